//! Tools the model can call: the registry (plugin tools and host-native
//! tools side by side), dispatch (which never fails: every problem becomes
//! an error result the model can read) and output truncation.

mod catalog;
mod dispatch;
mod prepared;
pub mod receipt;
mod registry;
mod selection;
mod status;
#[cfg(test)]
pub mod testing;
mod truncate;

pub use catalog::{PendingLoad, ToolCatalog};
pub use dispatch::{ToolCallRequest, ToolOutcome, dispatch};
pub use prepared::{
    ArgumentsError, CallPlace, PreparedCall, WritePlan, WrittenPath, read_arguments,
};
pub use receipt::{HookRecord, HookVerdict, Receipt, Standing};
pub use registry::{FnTool, PluginTool, RegisteredTool, ToolContext, ToolExecutor, ToolRegistry};
pub use selection::ToolSelection;
pub use status::{ToolError, ToolStatus};
pub use truncate::{TruncateMode, TruncationLimits, TruncationPolicy, truncate};
