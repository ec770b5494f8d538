//! `list_dir(path, depth? = 1)`: a directory tree.

use sandcrab_sdk::prelude::*;

use crate::fs;

const MAX_ENTRIES: usize = 2000;

pub struct ListDir;

#[derive(Deserialize)]
pub struct Args {
    path: String,
    depth: Option<usize>,
}

impl Tool for ListDir {
    const NAME: &'static str = "list_dir";
    const DESCRIPTION: &'static str = "List a directory of the workspace: names sorted, directories marked with a trailing `/`, nested entries indented. depth 1 (the default) lists only the directory itself; larger values descend. The contents of .git are not listed.";
    type Args = Args;

    fn parameters() -> Schema {
        Schema::object()
            .required(
                "path",
                Schema::string("Directory to list (`.` for the workspace root)"),
            )
            .optional(
                "depth",
                Schema::integer("How many levels to show (default 1)")
                    .minimum(1)
                    .maximum(10),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        let root = fs::resolve(ctx, &args.path)?;
        let shown = fs::display(ctx, &root).to_string();
        let meta = std::fs::metadata(&root).map_err(|e| fs::io_error(&shown, e))?;
        if !meta.is_dir() {
            return Err(ToolError::invalid(format!(
                "{shown} is a file, not a directory (use read_file)"
            )));
        }
        let mut out = format!("{shown}/\n");
        let mut count = 0;
        list(&root, 1, args.depth.unwrap_or(1), &mut out, &mut count)
            .map_err(|e| fs::io_error(&shown, e))?;
        if count == 0 {
            out.push_str("  (empty)\n");
        } else if count >= MAX_ENTRIES {
            out.push_str(&format!(
                "[listing stopped at {MAX_ENTRIES} entries; list a subdirectory]\n"
            ));
        }
        Ok(out)
    }
}

fn list(
    dir: &str,
    level: usize,
    depth: usize,
    out: &mut String,
    count: &mut usize,
) -> std::io::Result<()> {
    let mut entries: Vec<(String, bool)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            (e.file_name().to_string_lossy().into_owned(), is_dir)
        })
        .collect();
    entries.sort();
    for (name, is_dir) in entries {
        if *count >= MAX_ENTRIES {
            return Ok(());
        }
        *count += 1;
        let indent = "  ".repeat(level);
        out.push_str(&format!(
            "{indent}{name}{}\n",
            if is_dir { "/" } else { "" }
        ));
        if is_dir && level < depth && name != ".git" {
            // Unreadable subdirectories are shown, not fatal.
            let _ = list(&format!("{dir}/{name}"), level + 1, depth, out, count);
        }
    }
    Ok(())
}
