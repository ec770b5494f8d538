//! `sandcrab:plugin/log`: guest log lines into the host's `tracing` log,
//! under the call's log budget (see [`crate::plugin::guest_log`]).

use crate::plugin::guest_log;
use crate::plugin::state::HostState;
use crate::plugin::wit::since_v0_1_0::tool::sandcrab::plugin::log::{Host, Level};

impl Host for HostState {
    async fn log(&mut self, level: Level, message: String) {
        let level = match level {
            Level::Trace => guest_log::Level::Trace,
            Level::Debug => guest_log::Level::Debug,
            Level::Info => guest_log::Level::Info,
            Level::Warn => guest_log::Level::Warn,
            Level::Error => guest_log::Level::Error,
        };
        self.log.line(level, "log", &message);
    }
}
