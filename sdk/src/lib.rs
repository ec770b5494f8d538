//! # sandcrab-sdk
//!
//! Write sandcrab plugins in Rust. A tool plugin is a struct, an impl of
//! [`Tool`] with typed serde arguments, and one [`export_tools!`] line:
//!
//! ```ignore
//! use sandcrab_sdk::prelude::*;
//!
//! struct Hello;
//!
//! #[derive(Deserialize)]
//! struct Args { name: String }
//!
//! impl Tool for Hello {
//!     const NAME: &'static str = "hello";
//!     const DESCRIPTION: &'static str = "Greet someone.";
//!     type Args = Args;
//!     fn parameters() -> Schema {
//!         Schema::object().required("name", Schema::string("Who to greet")).into()
//!     }
//!     fn run(args: Args, _ctx: &CallContext) -> ToolResult {
//!         Ok(format!("Hello, {}!", args.name))
//!     }
//! }
//!
//! export_tools!(Hello);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2`; the `.wasm`
//! is a component that `sandcrab plugins check` accepts. Profile and
//! summarizer plugins use [`Profile`] / [`export_profile!`] and
//! [`Summarizer`] / [`export_summarizer!`] the same way. A tool whose work
//! splits into parts can also implement [`ShardedTool`] and be listed in
//! [`export_sharded_tools!`]: the host may then run one call on several
//! cores.

pub mod bindings;
pub mod http;
pub mod log;
pub mod paths;
pub mod process;
mod profile;
mod schema;
mod sharded;
mod summarizer;
mod tool;

pub use profile::{Profile, ProfileInfo};
pub use schema::{ObjectSchema, Schema};
pub use sharded::{Piece, Shard, ShardOutput, ShardedTool, run_whole};
pub use summarizer::{Message, Summarizer};
pub use tool::{
    CallContext, Keep, OutputLimit, SandboxMode, Tool, ToolError, ToolOutput, ToolResult, ToolSpec,
    Writes,
};

/// Everything a plugin usually needs, in one import.
pub mod prelude {
    pub use crate::{
        CallContext, Keep, ObjectSchema, OutputLimit, Piece, Profile, ProfileInfo, SandboxMode,
        Schema, Shard, ShardOutput, ShardedTool, Summarizer, Tool, ToolError, ToolOutput,
        ToolResult, Writes, export_profile, export_sharded_tools, export_summarizer, export_tools,
    };
    pub use serde::Deserialize;
    pub use serde_json::{Value, json};
}

#[doc(hidden)]
pub mod __private {
    pub use crate::sharded::{dispatch_merge, dispatch_shard, shards_context, shards_error};
    pub use crate::tool::{dispatch, spec_of};
    pub use serde_json;
}
