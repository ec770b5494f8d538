//! The [`Tool`] trait and the [`export_tools!`](crate::export_tools) macro.

use serde::de::DeserializeOwned;

use crate::Schema;
use crate::bindings::tool::exports::sandcrab::plugin::tool as wit;

/// What the host tells a tool about the call: workspace root and working
/// directory as the plugin sees them, session and call ids, the sandbox
/// mode, the protected paths, the time budget and whether the call runs in
/// the background.
pub type CallContext = wit::CallContext;
/// A tool's name, description, parameter schema and traits.
pub type ToolSpec = wit::ToolSpec;
/// Why a tool call failed; the message is shown to the model.
pub type ToolError = wit::ToolError;
/// What a tool call may write (the host orders calls writing the same
/// paths).
pub type Writes = crate::bindings::tool::sandcrab::plugin::types::Writes;
/// How much of a call's output the model sees by default.
pub type OutputLimit = crate::bindings::tool::sandcrab::plugin::types::OutputLimit;
/// Which part of an over-long output the model sees.
pub type Keep = crate::bindings::tool::sandcrab::plugin::types::Keep;
/// How the programs a call starts are confined.
pub type SandboxMode = crate::bindings::tool::sandcrab::plugin::types::SandboxMode;
/// A tool's answer: its text, and whether it stopped for lack of time.
pub type ToolOutput = wit::ToolOutput;
/// What a tool returns: the text the model sees, or an error.
pub type ToolResult = Result<String, ToolError>;

/// One tool. Implement it on a unit struct and list the struct in
/// [`export_tools!`](crate::export_tools).
pub trait Tool {
    /// The name the model calls the tool by (`[a-z0-9_]+`).
    const NAME: &'static str;
    /// What the tool does and when to use it, for the model.
    const DESCRIPTION: &'static str;
    /// The typed arguments; deserialized from the model's JSON.
    type Args: DeserializeOwned;

    /// Whether the model may start a call as a background job; the
    /// parameters must then declare a boolean `run_in_background`.
    const BACKGROUND: bool = false;

    /// JSON Schema of [`Tool::Args`]. The host validates every call against
    /// it before [`Tool::run`] is called.
    fn parameters() -> Schema;

    /// What a call writes: [`Writes::Paths`] with the names of arguments
    /// holding workspace paths, or [`Writes::Workspace`] for anything
    /// (default: nothing). Calls of one answer writing the same path run in
    /// the model's order.
    fn writes() -> Writes {
        Writes::Nothing
    }

    /// How much of a call's output the model sees (default: the host's,
    /// 30,000 characters and 1,000 lines, head and tail). The whole output
    /// stays in the event stream, and the operator may override it.
    fn output_limit() -> Option<OutputLimit> {
        None
    }

    /// Do the work.
    fn run(args: Self::Args, ctx: &CallContext) -> ToolResult;

    /// Do the work and say whether it stopped for lack of time (default:
    /// [`Tool::run`], never timed out). Tools that stop long work override
    /// this instead of marking the text.
    fn run_with_status(args: Self::Args, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
        Self::run(args, ctx).map(|text| ToolOutput {
            text,
            timed_out: false,
        })
    }
}

/// The spec of `T`, as the host receives it.
pub fn spec_of<T: Tool>() -> ToolSpec {
    ToolSpec {
        name: T::NAME.to_string(),
        description: T::DESCRIPTION.to_string(),
        parameters_schema: T::parameters().to_value().to_string(),
        writes: T::writes(),
        background: T::BACKGROUND,
        output_limit: T::output_limit(),
    }
}

/// Deserialize `args_json` into `T::Args` and run `T`.
pub fn dispatch<T: Tool>(args_json: &str, ctx: &CallContext) -> Result<ToolOutput, ToolError> {
    let args: T::Args = serde_json::from_str(args_json).map_err(|e| {
        ToolError::InvalidArguments(format!("invalid arguments for {}: {e}", T::NAME))
    })?;
    T::run_with_status(args, ctx)
}

/// Export the listed [`Tool`] types as this component's `tool` interface.
/// Use it once per plugin crate.
#[macro_export]
macro_rules! export_tools {
    ($($tool:ty),+ $(,)?) => {
        #[doc(hidden)]
        pub struct __SandcrabToolPlugin;

        impl $crate::bindings::tool::exports::sandcrab::plugin::tool::Guest for __SandcrabToolPlugin {
            fn tools() -> ::std::vec::Vec<$crate::ToolSpec> {
                ::std::vec![$($crate::__private::spec_of::<$tool>()),+]
            }

            fn call(
                name: ::std::string::String,
                args_json: ::std::string::String,
                context: $crate::CallContext,
            ) -> ::std::result::Result<$crate::ToolOutput, $crate::ToolError> {
                $(
                    if name == <$tool as $crate::Tool>::NAME {
                        return $crate::__private::dispatch::<$tool>(&args_json, &context);
                    }
                )+
                ::std::result::Result::Err($crate::ToolError::InvalidArguments(
                    ::std::format!("this plugin has no tool named {name}"),
                ))
            }
        }

        $crate::bindings::tool::export_tool_plugin!(__SandcrabToolPlugin);
    };
}

impl ToolError {
    /// A [`ToolError::Failed`] from anything printable.
    pub fn failed(message: impl std::fmt::Display) -> Self {
        ToolError::Failed(message.to_string())
    }

    /// A [`ToolError::InvalidArguments`] from anything printable.
    pub fn invalid(message: impl std::fmt::Display) -> Self {
        ToolError::InvalidArguments(message.to_string())
    }

    /// A [`ToolError::Denied`] from anything printable.
    pub fn denied(message: impl std::fmt::Display) -> Self {
        ToolError::Denied(message.to_string())
    }

    /// The message, whatever the kind.
    pub fn message(&self) -> &str {
        match self {
            ToolError::InvalidArguments(m) | ToolError::Denied(m) | ToolError::Failed(m) => m,
        }
    }
}
