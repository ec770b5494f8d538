//! `write_file(file_path, content)`: create or overwrite a file.

use sandcrab_sdk::prelude::*;

use crate::fs;

pub struct WriteFile;

#[derive(Deserialize)]
pub struct Args {
    file_path: String,
    content: String,
}

impl Tool for WriteFile {
    const NAME: &'static str = "write_file";
    fn output_limit() -> Option<OutputLimit> {
        Some(OutputLimit {
            chars: 1_000,
            lines: None,
            keep: Keep::Tail,
        })
    }
    const DESCRIPTION: &'static str = "Create a file, or overwrite it, with the given content. Parent directories are created as needed. Prefer edit_file or apply_patch to change part of an existing file.";
    type Args = Args;

    fn writes() -> Writes {
        Writes::Paths(vec!["file_path".into()])
    }

    fn parameters() -> Schema {
        Schema::object()
            .required("file_path", fs::file_path_schema())
            .required(
                "content",
                Schema::string("The complete new content of the file"),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        let guest = fs::resolve(ctx, &args.file_path)?;
        let shown = fs::display(ctx, &guest).to_string();
        if std::fs::metadata(&guest).is_ok_and(|m| m.is_dir()) {
            return Err(ToolError::failed(format!("{shown} is a directory")));
        }
        let existed = std::fs::metadata(&guest).is_ok();
        fs::write(ctx, &guest, &shown, args.content.as_bytes())?;
        let verb = if existed { "Overwrote" } else { "Created" };
        Ok(format!("{verb} {shown} ({} bytes)", args.content.len()))
    }
}
