//! `sandcrab:plugin/log`: guest log lines into the host's `tracing` log.

use crate::plugin::state::HostState;
use crate::plugin::wit::since_v0_1_0::tool::sandcrab::plugin::log::{Host, Level};

/// Longest message kept; the rest is cut so a guest cannot flood the log.
const MAX_MESSAGE: usize = 8 * 1024;

impl Host for HostState {
    async fn log(&mut self, level: Level, message: String) {
        let mut message = message;
        if message.len() > MAX_MESSAGE {
            let cut = message.floor_char_boundary(MAX_MESSAGE);
            message.truncate(cut);
            message.push_str(" [cut]");
        }
        let plugin = self.sandbox.plugin.as_str();
        match level {
            Level::Trace => tracing::trace!(target: "sandcrab::plugin", plugin, "{message}"),
            Level::Debug => tracing::debug!(target: "sandcrab::plugin", plugin, "{message}"),
            Level::Info => tracing::info!(target: "sandcrab::plugin", plugin, "{message}"),
            Level::Warn => tracing::warn!(target: "sandcrab::plugin", plugin, "{message}"),
            Level::Error => tracing::error!(target: "sandcrab::plugin", plugin, "{message}"),
        }
    }
}
