//! [`ToolCatalog`]: the plugin tools every session of an agent offers, as
//! one shared, replaceable registry. Reloading a plugin publishes a new
//! registry; a call already running keeps the tool (and so the plugin
//! version) it started with, and the next call sees the new one.

use std::sync::{Arc, RwLock};

use super::registry::ToolRegistry;

/// A shared registry that can be replaced as a whole.
#[derive(Clone, Default)]
pub struct ToolCatalog {
    inner: Arc<RwLock<Published>>,
    /// Plugins still being compiled or loaded in the background.
    pending: Arc<tokio::sync::watch::Sender<usize>>,
    /// The generation, for holders that react to changes.
    changes: Arc<tokio::sync::watch::Sender<u64>>,
}

#[derive(Default)]
struct Published {
    registry: ToolRegistry,
    /// Bumped on every publish, so holders can tell the set changed.
    generation: u64,
}

impl From<ToolRegistry> for ToolCatalog {
    fn from(registry: ToolRegistry) -> Self {
        ToolCatalog::new(registry)
    }
}

impl ToolCatalog {
    /// A catalog holding `registry`.
    pub fn new(registry: ToolRegistry) -> Self {
        ToolCatalog {
            inner: Arc::new(RwLock::new(Published {
                registry,
                generation: 0,
            })),
            pending: Arc::new(tokio::sync::watch::channel(0).0),
            changes: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// A receiver that sees every new generation (for telling clients the
    /// tool list changed).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The registry now (a cheap copy: tools are shared).
    pub fn snapshot(&self) -> ToolRegistry {
        self.read().registry.clone()
    }

    /// The registry now and its generation.
    pub fn versioned(&self) -> (u64, ToolRegistry) {
        let published = self.read();
        (published.generation, published.registry.clone())
    }

    /// How many times the registry was replaced.
    pub fn generation(&self) -> u64 {
        self.read().generation
    }

    /// Replace the registry.
    pub fn publish(&self, registry: ToolRegistry) {
        let mut published = self.inner.write().unwrap_or_else(|e| e.into_inner());
        published.registry = registry;
        published.generation += 1;
        let generation = published.generation;
        drop(published);
        self.changes.send_replace(generation);
    }

    /// Note that a plugin started loading in the background; the returned
    /// guard marks it done when dropped.
    pub fn loading(&self) -> PendingLoad {
        self.pending.send_modify(|n| *n += 1);
        PendingLoad {
            pending: self.pending.clone(),
        }
    }

    /// Wait until no plugin is loading in the background (at once when
    /// none is).
    pub async fn ready(&self) {
        let mut rx = self.pending.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Published> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// A background plugin load in progress (see [`ToolCatalog::loading`]).
pub struct PendingLoad {
    pending: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Drop for PendingLoad {
    fn drop(&mut self) {
        self.pending.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::ToolSpec;
    use crate::tools::FnTool;

    fn registry(names: &[&str]) -> ToolRegistry {
        let mut r = ToolRegistry::new();
        for name in names {
            r.register(
                ToolSpec::new(*name, "d", serde_json::json!({"type": "object"})),
                Arc::new(FnTool(|_, _| async { Ok(String::new()) })),
            );
        }
        r
    }

    #[test]
    fn a_snapshot_taken_before_a_publish_keeps_the_old_tools() {
        let catalog = ToolCatalog::new(registry(&["a"]));
        let before = catalog.snapshot();
        catalog.publish(registry(&["b"]));
        assert_eq!(before.names(), ["a"]);
        assert_eq!(catalog.snapshot().names(), ["b"]);
        assert_eq!(catalog.generation(), 1);
    }

    #[tokio::test]
    async fn ready_waits_for_background_loads() {
        let catalog = ToolCatalog::default();
        catalog.ready().await;
        let load = catalog.loading();
        let waiter = tokio::spawn({
            let catalog = catalog.clone();
            async move { catalog.ready().await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(
            !waiter.is_finished(),
            "ready returned while a load was pending"
        );
        drop(load);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
            .await
            .expect("ready after the load ended")
            .unwrap();
    }
}
