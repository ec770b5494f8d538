//! `sandcrab:plugin/log`: guest log lines into the host's `tracing` log,
//! under the call's log budget (see [`crate::plugin::guest_log`]). Every
//! ABI version forwards to [`write`].

use crate::plugin::guest_log::Level;
use crate::plugin::state::HostState;

/// Write one guest log line.
fn write(state: &HostState, level: Level, message: &str) {
    state.log.line(level, "log", message);
}

/// Implement one version's `log` host trait over [`write`].
macro_rules! log_host {
    ($version:ident) => {
        impl crate::plugin::wit::$version::tool::sandcrab::plugin::log::Host for HostState {
            async fn log(
                &mut self,
                level: crate::plugin::wit::$version::tool::sandcrab::plugin::log::Level,
                message: String,
            ) {
                use crate::plugin::wit::$version::tool::sandcrab::plugin::log::Level as L;
                let level = match level {
                    L::Trace => Level::Trace,
                    L::Debug => Level::Debug,
                    L::Info => Level::Info,
                    L::Warn => Level::Warn,
                    L::Error => Level::Error,
                };
                write(self, level, &message);
            }
        }
    };
}

log_host!(since_v0_1_0);
log_host!(since_v0_2_0);
log_host!(since_v0_3_0);
