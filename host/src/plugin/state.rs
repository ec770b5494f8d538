//! Per-call store state: a fresh WASI context with only the plugin's
//! mounts and environment, memory limits, the wall-clock deadline, and the
//! plugin's sandbox for host imports.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::AsyncWrite;
use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::manifest::Access;
use super::policy::EffectiveLimits;
use super::sandbox::PluginSandbox;

/// Everything a store of one plugin call holds.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    /// The plugin's sandbox, for the `process` import.
    pub(super) sandbox: Arc<PluginSandbox>,
    /// When the guest must be stopped; pushed back by time spent in host
    /// imports (waiting on a program is not guest time).
    pub(super) deadline: Instant,
    /// Where program output goes as it arrives (for live tool output).
    pub(super) live_output: Option<crate::process::LiveOutput>,
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl HostState {
    /// Whether the guest was refused memory during this call.
    pub fn memory_exhausted(&self) -> bool {
        self.limiter.denied
    }
}

/// A new store for one call of a plugin with `sandbox` and `limits`.
pub fn new_store(
    engine: &wasmtime::Engine,
    sandbox: &Arc<PluginSandbox>,
    limits: &EffectiveLimits,
    live_output: Option<crate::process::LiveOutput>,
) -> wasmtime::Result<Store<HostState>> {
    let mut wasi = WasiCtxBuilder::new();
    wasi.allow_blocking_current_thread(true);
    for mount in &sandbox.mounts {
        let perms = match mount.access {
            Access::ReadWrite => FsPerms::ReadWrite,
            _ => FsPerms::ReadOnly,
        };
        wasi.preopened_dir(&mount.host, &mount.guest, perms)?;
    }
    for (name, value) in &sandbox.env {
        wasi.env(name, value);
    }
    wasi.env("SANDCRAB_SANDBOX", sandbox.sandbox_mode.to_string());
    wasi.env("SANDCRAB_PROTECTED", sandbox.protected.join("\n"));
    let plugin: Arc<str> = Arc::from(sandbox.plugin.as_str());
    wasi.stdout(GuestOutput::new(plugin.clone(), "stdout"));
    wasi.stderr(GuestOutput::new(plugin, "stderr"));
    if sandbox.network {
        wasi.inherit_network()
            .allow_tcp(true)
            .allow_udp(true)
            .allow_ip_name_lookup(true);
    } else {
        wasi.allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
    }

    let state = HostState {
        wasi: wasi.build(),
        table: ResourceTable::new(),
        limiter: Limiter {
            inner: StoreLimitsBuilder::new()
                .memory_size((limits.memory_mb as usize) << 20)
                .trap_on_grow_failure(true)
                .build(),
            denied: false,
        },
        sandbox: sandbox.clone(),
        deadline: Instant::now() + Duration::from_millis(limits.timeout_ms),
        live_output,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        if Instant::now() >= ctx.data().deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            // Yield so a spinning guest never starves the runtime.
            Ok(UpdateDeadline::Yield(1))
        }
    });
    Ok(store)
}

/// StoreLimits that remembers whether it refused a memory grow.
struct Limiter {
    inner: StoreLimits,
    denied: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let result = self.inner.memory_growing(current, desired, maximum);
        if !matches!(result, Ok(true)) {
            self.denied = true;
        }
        result
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }
    fn tables(&self) -> usize {
        self.inner.tables()
    }
    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

/// Guest stdout/stderr: each line goes to the host log, tagged with the
/// plugin; writes never fail, so a chatty guest cannot crash itself.
#[derive(Clone)]
struct GuestOutput {
    plugin: Arc<str>,
    stream: &'static str,
}

impl GuestOutput {
    fn new(plugin: Arc<str>, stream: &'static str) -> Self {
        GuestOutput { plugin, stream }
    }
}

impl IsTerminal for GuestOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(LineLogger {
            out: self.clone(),
            line: Vec::new(),
        })
    }
}

/// Longest line kept before it is logged in pieces.
const MAX_LOG_LINE: usize = 4096;

struct LineLogger {
    out: GuestOutput,
    line: Vec<u8>,
}

impl LineLogger {
    fn emit(&mut self) {
        if !self.line.is_empty() {
            let text = String::from_utf8_lossy(&self.line);
            tracing::debug!(target: "sandcrab::plugin::guest", plugin = %self.out.plugin, stream = self.out.stream, "{}", text.trim_end());
            self.line.clear();
        }
    }
}

impl AsyncWrite for LineLogger {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        for &byte in buf {
            if byte == b'\n' || self.line.len() >= MAX_LOG_LINE {
                self.emit();
            }
            if byte != b'\n' {
                self.line.push(byte);
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.emit();
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineLogger {
    fn drop(&mut self) {
        self.emit();
    }
}
