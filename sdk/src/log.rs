//! Write lines to the host's log. The host tags each line with the plugin's
//! name; the operator sees them with `sandcrab -v` or `RUST_LOG`.

use crate::bindings::tool::sandcrab::plugin::log as host;

/// Log at debug level.
pub fn debug(message: &str) {
    host::log(host::Level::Debug, message);
}

/// Log at info level.
pub fn info(message: &str) {
    host::log(host::Level::Info, message);
}

/// Log at warn level.
pub fn warn(message: &str) {
    host::log(host::Level::Warn, message);
}

/// Log at error level.
pub fn error(message: &str) {
    host::log(host::Level::Error, message);
}
