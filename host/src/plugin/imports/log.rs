//! `sandcrab:plugin/log`: guest log lines into the host's `tracing` log,
//! under the call's log budget (see [`crate::plugin::guest_log`]). Every
//! ABI version forwards to [`write`].

use crate::plugin::guest_log::Level;
use crate::plugin::state::HostState;

/// Write one guest log line.
pub(crate) fn write(state: &HostState, level: Level, message: &str) {
    state.log.line(level, "log", message);
}

/// Implement one version's `log` host trait over [`write`].
macro_rules! log_host {
    ($version:ident) => {
        impl crate::plugin::wit::$version::tool::sandcrab::plugin::log::Host
            for crate::plugin::state::HostState
        {
            async fn log(
                &mut self,
                level: crate::plugin::wit::$version::tool::sandcrab::plugin::log::Level,
                message: String,
            ) {
                use crate::plugin::wit::$version::tool::sandcrab::plugin::log::Level as L;
                let level = match level {
                    L::Trace => crate::plugin::guest_log::Level::Trace,
                    L::Debug => crate::plugin::guest_log::Level::Debug,
                    L::Info => crate::plugin::guest_log::Level::Info,
                    L::Warn => crate::plugin::guest_log::Level::Warn,
                    L::Error => crate::plugin::guest_log::Level::Error,
                };
                crate::plugin::imports::log::write(self, level, &message);
            }
        }
    };
}

pub(crate) use log_host;
