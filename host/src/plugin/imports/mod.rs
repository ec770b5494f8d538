//! The host side of the plugin imports (`process`, `log`, `fs`). Each WIT
//! version binds its own traits; all of them forward here.

pub mod fs;
pub mod fs_directory;
mod log;
mod process;

impl crate::plugin::wit::since_v0_1_0::tool::sandcrab::plugin::types::Host
    for crate::plugin::state::HostState
{
}

impl crate::plugin::wit::since_v0_2_0::tool::sandcrab::plugin::types::Host
    for crate::plugin::state::HostState
{
}

impl crate::plugin::wit::since_v0_3_0::tool::sandcrab::plugin::types::Host
    for crate::plugin::state::HostState
{
}
