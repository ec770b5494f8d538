//! The [`Tool`] trait and the [`export_tools!`](crate::export_tools) macro.

use serde::de::DeserializeOwned;

use crate::Schema;
use crate::bindings::tool::exports::sandcrab::plugin::tool as wit;

/// What the host tells a tool about the call (workspace root as the plugin
/// sees it, session id, call id).
pub type CallContext = wit::CallContext;
/// A tool's name, description and parameter schema.
pub type ToolSpec = wit::ToolSpec;
/// Why a tool call failed; the message is shown to the model.
pub type ToolError = wit::ToolError;
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

    /// JSON Schema of [`Tool::Args`]. The host validates every call against
    /// it before [`Tool::run`] is called.
    fn parameters() -> Schema;

    /// Do the work.
    fn run(args: Self::Args, ctx: &CallContext) -> ToolResult;
}

/// The spec of `T`, as the host receives it.
pub fn spec_of<T: Tool>() -> ToolSpec {
    ToolSpec {
        name: T::NAME.to_string(),
        description: T::DESCRIPTION.to_string(),
        parameters_schema: T::parameters().to_value().to_string(),
    }
}

/// Deserialize `args_json` into `T::Args` and run `T`.
pub fn dispatch<T: Tool>(args_json: &str, ctx: &CallContext) -> ToolResult {
    let args: T::Args = serde_json::from_str(args_json).map_err(|e| {
        ToolError::InvalidArguments(format!("invalid arguments for {}: {e}", T::NAME))
    })?;
    T::run(args, ctx)
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
            ) -> $crate::ToolResult {
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
