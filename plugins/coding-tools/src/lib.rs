//! coding-tools: the agent's everyday tools as one WASM component.
//!
//! Every path goes through [`fs::resolve`]: relative paths resolve against
//! the workspace, absolute ones must lie inside it (host paths of the
//! workspace are mapped), and the WASI sandbox refuses anything that still
//! tries to leave it (a symlink out, say).

mod binary;
mod edit_file;
mod fs;
mod glob;
mod grep;
mod guarded;
mod list_dir;
mod patch;
mod read_file;
mod search;
mod shell;
#[cfg(test)]
mod test_tree;
mod walk;
mod write_file;

use sandcrab_sdk::{export_sharded_tools, export_tools};

export_tools!(
    read_file::ReadFile,
    write_file::WriteFile,
    edit_file::EditFile,
    patch::ApplyPatch,
    shell::Shell,
    grep::Grep,
    glob::Glob,
    list_dir::ListDir,
);

// The host may run one grep call as several shards, one per free core
// (`sandcrab:shards`), each walking its own share of the tree.
export_sharded_tools!(grep::Grep);
