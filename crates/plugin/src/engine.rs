//! The one wasmtime engine every plugin runs on: async, epoch interruption
//! driven by a ticker thread, and the pooling allocator where the machine
//! allows it (falling back to on-demand allocation).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use super::error::EngineError;

/// How often the epoch advances; the granularity of plugin deadlines.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Try the pooling allocator (falls back to on-demand if it fails).
    pub pooling: bool,
    /// Instances the pool holds at once (all plugins together).
    pub pool_instances: u32,
    /// Largest linear memory any plugin may get, in MiB (pool slot size).
    pub max_memory_mb: u64,
    /// What changes the compiled code (the embedded first-party code is
    /// used only when this is what it was built with).
    pub code: sandcrab_engine::CodeSettings,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            pooling: true,
            pool_instances: 64,
            max_memory_mb: super::policy::limits::MAX_MEMORY_MB,
            code: sandcrab_engine::CodeSettings::default(),
        }
    }
}

/// The engine plus its epoch ticker. Dropping it stops the ticker.
pub struct PluginEngine {
    engine: Engine,
    pooling: bool,
    ticker_stop: Arc<AtomicBool>,
}

impl PluginEngine {
    /// Create the engine; pooling is used when requested and the machine
    /// can reserve the pool, otherwise on-demand allocation.
    pub fn new(options: &EngineOptions) -> Result<Self, EngineError> {
        let (engine, pooling) = if options.pooling {
            match Engine::new(&config(options, true)) {
                Ok(engine) => (engine, true),
                Err(err) => {
                    tracing::info!(
                        "pooling allocator unavailable ({err:#}); using on-demand allocation"
                    );
                    (new_engine(options)?, false)
                }
            }
        } else {
            (new_engine(options)?, false)
        };
        let ticker_stop = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.clone(), ticker_stop.clone());
        Ok(PluginEngine {
            engine,
            pooling,
            ticker_stop,
        })
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether the pooling allocator is in use.
    pub fn pooling(&self) -> bool {
        self.pooling
    }
}

impl Drop for PluginEngine {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// An engine with on-demand allocation.
fn new_engine(options: &EngineOptions) -> Result<Engine, EngineError> {
    Engine::new(&config(options, false)).map_err(|e| EngineError::Create(format!("{e:#}")))
}

/// The shared code settings (see `sandcrab-engine`) plus, if `pooling`,
/// the pooling allocator, which changes how instances are allocated but
/// not the code.
fn config(options: &EngineOptions, pooling: bool) -> Config {
    let mut config = sandcrab_engine::config(options.code);
    if pooling {
        let instances = options.pool_instances.max(1);
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(instances)
            .total_core_instances(instances * 8)
            .total_memories(instances * 2)
            .total_tables(instances * 4)
            .total_stacks(instances)
            .max_memory_size((options.max_memory_mb as usize) << 20)
            // Reset recycled slots with memset where pages are resident
            // instead of unmapping them: most of a call's cost otherwise
            // is page faults re-touching fresh pages.
            .pagemap_scan(wasmtime::Enabled::Auto)
            .linear_memory_keep_resident(64 << 20)
            .table_keep_resident(1 << 20);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    config
}

fn spawn_ticker(engine: Engine, stop: Arc<AtomicBool>) {
    std::thread::Builder::new()
        .name("sandcrab-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                engine.increment_epoch();
            }
        })
        .expect("spawn epoch ticker thread");
}
