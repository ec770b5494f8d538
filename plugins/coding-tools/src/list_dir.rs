//! `list_dir(path, depth? = 1)`: a directory tree.

use sandcrab_sdk::prelude::*;

use crate::fs;
use crate::walk::{Dir, EntryKind};

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
        match fs::root_kind(&root, &shown)? {
            fs::Root::Directory => {}
            fs::Root::File => {
                return Err(ToolError::invalid(format!(
                    "{shown} is a file, not a directory (use read_file)"
                )));
            }
            fs::Root::Other => {
                return Err(ToolError::invalid(format!(
                    "{shown} is not a directory (a FIFO, socket or device)"
                )));
            }
        }
        let mut out = format!("{shown}/\n");
        let mut count = 0;
        let dir = Dir::open_path(&root).map_err(|e| fs::io_error(&shown, e))?;
        list(&dir, 1, args.depth.unwrap_or(1), &mut out, &mut count)
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

/// Append the entries of `dir` (at `level`), descending to `depth`.
fn list(
    dir: &Dir,
    level: usize,
    depth: usize,
    out: &mut String,
    count: &mut usize,
) -> std::io::Result<()> {
    let mut entries = dir.entries()?;
    entries.sort_unstable_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    for entry in entries {
        if *count >= MAX_ENTRIES {
            return Ok(());
        }
        *count += 1;
        let is_dir = entry.kind == EntryKind::Directory;
        for _ in 0..level {
            out.push_str("  ");
        }
        out.push_str(&entry.name);
        out.push_str(if is_dir { "/\n" } else { "\n" });
        if is_dir && level < depth && entry.name != ".git" {
            // Unreadable subdirectories are shown, not fatal.
            if let Ok(sub) = dir.open_dir(&entry.name) {
                let _ = list(&sub, level + 1, depth, out, count);
            }
        }
    }
    Ok(())
}
