//! The host side of the plugin imports (`process`, `log`, `fs`). Each WIT
//! version binds its own traits; all of them forward here.

mod beneath;
pub mod fs;
pub mod fs_directory;
pub(crate) mod log;
pub(crate) mod process;
pub(crate) mod wasi_fs;
