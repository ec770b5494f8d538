//! The [`Summarizer`] trait and the
//! [`export_summarizer!`](crate::export_summarizer) macro.

use crate::bindings::summarizer::exports::sandcrab::plugin::summarizer as wit;

/// One message of the conversation being summarized.
pub type Message = wit::Message;

/// Renders the context-compaction prompt. Implement it on a unit struct and
/// export it with [`export_summarizer!`](crate::export_summarizer).
pub trait Summarizer {
    /// The prompt asking a model to summarize `messages`, folding in
    /// `existing_summary`, for the agent described by `persona`.
    fn render(persona: String, existing_summary: String, messages: Vec<Message>) -> String;
}

/// Export a [`Summarizer`] type as this component's `summarizer` interface.
#[macro_export]
macro_rules! export_summarizer {
    ($summarizer:ty) => {
        #[doc(hidden)]
        pub struct __SandcrabSummarizerPlugin;

        impl $crate::bindings::summarizer::exports::sandcrab::plugin::summarizer::Guest
            for __SandcrabSummarizerPlugin
        {
            fn render(
                persona: ::std::string::String,
                existing_summary: ::std::string::String,
                messages: ::std::vec::Vec<$crate::Message>,
            ) -> ::std::string::String {
                <$summarizer as $crate::Summarizer>::render(persona, existing_summary, messages)
            }
        }

        $crate::bindings::summarizer::export_summarizer_plugin!(__SandcrabSummarizerPlugin);
    };
}
