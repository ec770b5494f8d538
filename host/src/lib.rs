//! sandcrab: a coding-agent host whose tools, provider profiles and
//! summarization prompt are sandboxed WebAssembly components.

pub mod acp;
pub mod agent;
pub mod approvals;
pub mod checkpoint;
pub mod cli;
pub mod compaction;
pub mod config;
pub mod consent;
pub mod embeddings;
pub mod harness;
pub mod hooks;
pub mod jobs;
pub use sandcrab_kept as kept;
pub use sandcrab_llm as llm;
pub mod mcp;
pub mod pipeline;
pub use sandcrab_plugin as plugin;
pub use sandcrab_process as process;
pub mod replay;
pub use sandcrab_kept::safe_fs;
pub mod server;
pub mod skills;
pub mod supply;
pub use sandcrab_core::terminal_safe;
pub use sandcrab_core::time;
pub use sandcrab_store as store;
pub use sandcrab_store::tls;
pub mod telemetry;
pub mod tools;
pub use sandcrab_core::user_files;
