//! sandcrab: a coding-agent host whose tools, provider profiles and
//! summarization prompt are sandboxed WebAssembly components.

pub mod agent;
pub mod approvals;
pub mod checkpoint;
pub mod cli;
pub mod compaction;
pub mod config;
pub mod embeddings;
pub mod harness;
pub mod jobs;
pub mod kept;
pub mod llm;
pub mod mcp;
pub mod pipeline;
pub mod plugin;
pub mod process;
pub mod replay;
pub mod safe_fs;
pub mod server;
pub mod store;
pub mod terminal_safe;
pub mod time;
pub mod tls;
pub mod tools;
pub mod user_files;
