//! `sandcrab:plugin/log`: guest log lines into the host's `tracing` log,
//! under the call's log budget (see [`crate::guest_log`]). Every
//! ABI version forwards to [`write`].

use crate::guest_log::Level;
use crate::state::HostState;

/// Write one guest log line.
pub(crate) fn write(state: &HostState, level: Level, message: &str) {
    state.log.line(level, "log", message);
}

/// Implement one version's `log` host trait over [`write`].
macro_rules! log_host {
    ($version:ident) => {
        impl crate::wit::$version::tool::sandcrab::plugin::log::Host for crate::state::HostState {
            async fn log(
                &mut self,
                level: crate::wit::$version::tool::sandcrab::plugin::log::Level,
                message: String,
            ) {
                use crate::wit::$version::tool::sandcrab::plugin::log::Level as L;
                let level = match level {
                    L::Trace => crate::guest_log::Level::Trace,
                    L::Debug => crate::guest_log::Level::Debug,
                    L::Info => crate::guest_log::Level::Info,
                    L::Warn => crate::guest_log::Level::Warn,
                    L::Error => crate::guest_log::Level::Error,
                };
                crate::imports::log::write(self, level, &message);
            }
        }
    };
}

pub(crate) use log_host;
