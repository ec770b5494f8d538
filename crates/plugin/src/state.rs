//! Per-call store state: a fresh WASI context with only the plugin's
//! mounts and environment, memory limits, the wall-clock deadline, and the
//! plugin's sandbox for host imports.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime::{ResourceLimiter, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use super::clock::CallClock;
use super::guest_log::{GuestOutput, LogBudget};
use super::http::HttpGate;
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
    /// The call's time limit (waiting on a program is not guest time, up
    /// to a budget).
    pub(super) clock: Arc<CallClock>,
    /// The call's share of the host log.
    pub(super) log: Arc<LogBudget>,
    /// Where the call's programs run by default (guest path; 0.2.0 calls).
    pub(super) working_dir: Option<String>,
    /// Where program output goes as it arrives (for live tool output).
    pub(super) live_output: Option<crate::process::LiveOutput>,
    /// Directories the guest holds open through `sandcrab:fs` (bounded:
    /// each is a host file descriptor).
    pub(super) open_directories: usize,
    /// Where the call's programs are recorded (for its receipt).
    pub(super) programs: Option<super::types::ActivityLog>,
    /// The call was given the network for its programs.
    pub(super) network: bool,
    /// `wasi:http`: its settings and the gate every request goes through.
    http_ctx: WasiHttpCtx,
    http_gate: HttpGate,
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.http_gate,
        }
    }
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
    /// `wasi:filesystem` as the guest gets it: wasmtime-wasi's, judged by
    /// what the host keeps and protects (see
    /// [`super::imports::wasi_fs`]).
    pub(crate) fn guarded_fs(&mut self) -> super::imports::wasi_fs::GuardedFsView<'_> {
        super::imports::wasi_fs::GuardedFsView {
            inner: wasmtime_wasi::filesystem::WasiFilesystemCtxView {
                ctx: self.wasi.filesystem(),
                table: &mut self.table,
            },
            judge: self.sandbox.judge(),
            log: self.programs.as_ref(),
        }
    }

    /// Record that a file access was refused, for the call's receipt.
    pub(crate) fn note_refusal(&self, refusal: &crate::kept::Refusal) {
        tracing::info!("file access refused: {refusal}");
        if let Some(log) = &self.programs
            && let Ok(mut activity) = log.lock()
        {
            activity.refuse_file(refusal.to_string());
        }
    }

    /// The call's resources (host-side objects the guest holds handles to).
    pub(super) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// Whether the guest was refused memory during this call.
    pub fn memory_exhausted(&self) -> bool {
        self.limiter.denied
    }

    /// Resources the guest holds handles to now (open files, streams,
    /// pollables, requests).
    pub(super) fn open_resources(&mut self) -> usize {
        self.table.iter_mut().count()
    }

    /// Bytes of linear memory the store's instances hold now.
    pub(super) fn memory_bytes(&self) -> usize {
        self.limiter.total
    }

    /// Make the store of a reused instance ready for its next call: that
    /// call's clock, working directory, live output, program log and log
    /// budget. What the guest keeps (its memory, the handles it holds) is
    /// its own business within its sandbox; what the host keeps per call
    /// starts over. The WASI context (mounts, environment, network) is the
    /// plugin's and stays as it is; the memory budget keeps counting, for
    /// the instance's whole life.
    pub(super) fn begin_call(&mut self, parts: CallParts) {
        let CallParts {
            live_output,
            clock,
            working_dir,
            on_own_thread: _,
            programs,
            network,
        } = parts;
        self.network = network;
        self.http_gate.begin_call(clock.clone(), programs.clone());
        self.clock = clock;
        self.working_dir = working_dir;
        self.live_output = live_output;
        self.programs = programs;
        self.log.reset();
    }
}

/// Per-store ceilings besides memory (a component instantiates several
/// core instances, each with its memories and tables).
const MAX_INSTANCES_PER_STORE: usize = 200;
const MAX_MEMORIES_PER_STORE: usize = 32;
const MAX_TABLES_PER_STORE: usize = 400;
/// Resources a store may hold at once. Each open file is a descriptor of
/// the host process: a guest that opens without closing would otherwise
/// exhaust the host's descriptors (every session, the store, every
/// socket), not only its own.
pub(super) const MAX_RESOURCES_PER_STORE: usize = 1024;

/// What one call's store is made with besides the plugin's sandbox and
/// limits.
pub struct CallParts {
    /// Where program output goes as it arrives.
    pub live_output: Option<crate::process::LiveOutput>,
    pub clock: Arc<CallClock>,
    /// Where the call's programs run by default (guest path).
    pub working_dir: Option<String>,
    /// The call runs on a thread of its own (file operations run there).
    pub on_own_thread: bool,
    /// Where the call's programs are recorded.
    pub programs: Option<super::types::ActivityLog>,
    /// The call was given the network for its programs.
    pub network: bool,
}

/// A new store for one call of a plugin with `sandbox` and `limits`.
pub fn new_store(
    engine: &wasmtime::Engine,
    sandbox: &Arc<PluginSandbox>,
    limits: &EffectiveLimits,
    parts: CallParts,
) -> wasmtime::Result<Store<HostState>> {
    let CallParts {
        live_output,
        clock,
        working_dir,
        on_own_thread,
        programs,
        network,
    } = parts;
    let mut wasi = WasiCtxBuilder::new();
    // File operations never block a runtime thread: a guest blocked on a
    // FIFO must not stall the host, and the call's clock must be able to
    // end it. A call that runs on a thread of its own does them there;
    // others hop to the blocking pool for each one.
    wasi.allow_blocking_current_thread(on_own_thread);
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
    let log = LogBudget::new(&sandbox.plugin);
    wasi.stdout(GuestOutput::new(log.clone(), "stdout"));
    wasi.stderr(GuestOutput::new(log.clone(), "stderr"));
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

    let http_gate = HttpGate::new(sandbox.http.clone(), clock.clone(), programs.clone());
    let state = HostState {
        wasi: wasi.build(),
        table: {
            let mut table = ResourceTable::new();
            table.set_max_capacity(MAX_RESOURCES_PER_STORE);
            table
        },
        limiter: Limiter {
            inner: StoreLimitsBuilder::new()
                .memory_size((limits.memory_mb as usize) << 20)
                .instances(MAX_INSTANCES_PER_STORE)
                .memories(MAX_MEMORIES_PER_STORE)
                .tables(MAX_TABLES_PER_STORE)
                .trap_on_grow_failure(true)
                .build(),
            budget: (limits.memory_mb as usize) << 20,
            total: 0,
            denied: false,
        },
        sandbox: sandbox.clone(),
        clock,
        log,
        working_dir,
        live_output,
        open_directories: 0,
        programs,
        network,
        http_ctx: WasiHttpCtx::new(),
        http_gate,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limiter);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        if ctx.data().clock.expired() {
            Ok(UpdateDeadline::Interrupt)
        } else {
            // Yield so a spinning guest never starves the runtime.
            Ok(UpdateDeadline::Yield(1))
        }
    });
    Ok(store)
}

/// StoreLimits plus one memory budget for the whole store (all linear
/// memories together, not each), remembering whether it refused a grow.
struct Limiter {
    inner: StoreLimits,
    /// Bytes all memories of the store may use together.
    budget: usize,
    /// Bytes they use now.
    total: usize,
    denied: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let after = self.total - current.min(self.total) + desired;
        if after > self.budget {
            self.denied = true;
            return Err(wasmtime::format_err!(
                "memory budget of {} MiB exceeded",
                self.budget >> 20
            ));
        }
        let result = self.inner.memory_growing(current, desired, maximum);
        match result {
            Ok(true) => self.total = after,
            _ => self.denied = true,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(budget_mb: usize) -> Limiter {
        Limiter {
            inner: StoreLimitsBuilder::new()
                .memory_size(budget_mb << 20)
                .trap_on_grow_failure(true)
                .build(),
            budget: budget_mb << 20,
            total: 0,
            denied: false,
        }
    }

    #[test]
    fn the_memory_budget_covers_all_memories_of_a_store_together() {
        let mut l = limiter(64);
        // Two memories of 40 MiB each: each alone is under the cap, together
        // they are not.
        assert!(matches!(l.memory_growing(0, 40 << 20, None), Ok(true)));
        assert!(l.memory_growing(0, 40 << 20, None).is_err());
        assert!(l.denied);
        // Growing the first memory within the budget still works.
        let mut l = limiter(64);
        assert!(matches!(l.memory_growing(0, 40 << 20, None), Ok(true)));
        assert!(matches!(
            l.memory_growing(40 << 20, 60 << 20, None),
            Ok(true)
        ));
        assert!(l.memory_growing(0, 8 << 20, None).is_err());
    }
}
