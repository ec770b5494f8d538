//! The [`Profile`] trait and the [`export_profile!`](crate::export_profile)
//! macro for provider profile plugins.

use crate::bindings::profile::exports::sandcrab::plugin::profile as wit;

/// Static facts about a provider profile (id, default model, context
/// window, parallel tool calls, tool names, project doc files, output
/// limit).
pub type ProfileInfo = wit::ProfileInfo;

/// A provider profile. Implement it on a unit struct and export it with
/// [`export_profile!`](crate::export_profile).
pub trait Profile {
    /// The profile's facts.
    fn info() -> ProfileInfo;
    /// The base layer of the system prompt.
    fn base_instructions() -> String;
}

/// Export a [`Profile`] type as this component's `profile` interface.
#[macro_export]
macro_rules! export_profile {
    ($profile:ty) => {
        #[doc(hidden)]
        pub struct __SandcrabProfilePlugin;

        impl $crate::bindings::profile::exports::sandcrab::plugin::profile::Guest
            for __SandcrabProfilePlugin
        {
            fn info() -> $crate::ProfileInfo {
                <$profile as $crate::Profile>::info()
            }
            fn base_instructions() -> ::std::string::String {
                <$profile as $crate::Profile>::base_instructions()
            }
        }

        $crate::bindings::profile::export_profile_plugin!(__SandcrabProfilePlugin);
    };
}
