//! `apply_patch(patch)`: the v4a patch format.
//!
//! ```text
//! *** Begin Patch
//! *** Add File: docs/new.md
//! +first line
//! *** Update File: src/lib.rs
//! *** Move to: src/core.rs
//! @@ fn main
//!  context
//! -removed
//! +added
//! *** End of File
//! *** Delete File: old.txt
//! *** End Patch
//! ```
//!
//! All or nothing: every change is computed in memory first; if any hunk
//! of any file fails, no file is touched.

mod apply;
mod parse;

use sandcrab_sdk::prelude::*;

use apply::{Change, plan};
pub use parse::parse;

pub struct ApplyPatch;

#[derive(Deserialize)]
pub struct Args {
    patch: String,
}

impl Tool for ApplyPatch {
    const NAME: &'static str = "apply_patch";
    fn output_limit() -> Option<OutputLimit> {
        Some(OutputLimit {
            chars: 10_000,
            lines: None,
            keep: Keep::Tail,
        })
    }
    const DESCRIPTION: &'static str = "Apply a patch in the v4a format to one or more files. The patch starts with `*** Begin Patch` and ends with `*** End Patch`. Inside, `*** Add File: PATH` is followed by the new file's lines, each prefixed with `+`; `*** Delete File: PATH` deletes; `*** Update File: PATH` (optionally followed by `*** Move to: NEWPATH`) is followed by hunks. Each hunk starts with `@@` (optionally `@@ text of a line to seek to`, such as a function signature) and has lines prefixed with ` ` (context, about 3 lines before and after), `-` (remove) or `+` (add). `*** End of File` anchors a hunk at the end of the file. All or nothing: if any hunk does not match, no file changes.";
    type Args = Args;

    fn writes() -> Writes {
        Writes::Workspace
    }

    fn parameters() -> Schema {
        Schema::object()
            .required(
                "patch",
                Schema::string("The whole patch, from *** Begin Patch to *** End Patch"),
            )
            .into()
    }

    fn run(args: Args, ctx: &CallContext) -> ToolResult {
        let ops = parse(&args.patch)
            .map_err(|e| ToolError::invalid(format!("apply_patch: invalid patch: {e}")))?;
        let changes = plan(ctx, &ops).map_err(|e| {
            ToolError::failed(format!("apply_patch failed: {e}. No files were changed."))
        })?;
        // Stage every change, then put them all in place: a failure
        // anywhere (a protected target, a link, a write error) changes
        // nothing.
        let mut tx = crate::guarded::Transaction::new(ctx);
        let mut summary = Vec::new();
        for change in &changes {
            match change {
                Change::Write {
                    guest,
                    shown,
                    content,
                    added,
                } => {
                    tx.write(guest, shown, content.as_bytes())?;
                    summary.push(format!("{} {shown}", if *added { "A" } else { "M" }));
                }
                Change::Move {
                    from,
                    from_shown,
                    to,
                    to_shown,
                    content,
                } => {
                    tx.write(to, to_shown, content.as_bytes())?;
                    tx.delete(from, from_shown)?;
                    summary.push(format!("R {from_shown} -> {to_shown}"));
                }
                Change::Delete { guest, shown } => {
                    tx.delete(guest, shown)?;
                    summary.push(format!("D {shown}"));
                }
            }
        }
        tx.commit()?;
        Ok(format!(
            "Success. Updated the following files:\n{}",
            summary.join("\n")
        ))
    }
}

#[cfg(test)]
mod tests;
