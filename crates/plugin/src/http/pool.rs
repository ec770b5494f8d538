//! Idle keep-alive connections of one plugin, so a tool that makes several
//! requests to its API does not pay a new connection (and TLS handshake)
//! for each. A connection is reused only for the address it was opened to
//! — an address the gate checked for this request too — and the name its
//! certificate was checked against; it carries no state of a previous
//! request once that request's response was read whole.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::connect::{Connection, PoolKey};

/// Idle connections kept per address and name.
const PER_KEY: usize = 4;
/// Idle connections kept per plugin.
const PER_PLUGIN: usize = 16;
/// How long an idle connection is kept.
const IDLE: Duration = Duration::from_secs(30);

/// One plugin's idle connections.
#[derive(Default)]
pub struct Pool {
    idle: Mutex<HashMap<PoolKey, Vec<(Connection, Instant)>>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pool")
    }
}

impl Pool {
    /// An idle connection to one of `addrs` on `port` with `tls_host`, if
    /// one is usable.
    pub fn take(&self, addrs: &[IpAddr], port: u16, tls_host: Option<&str>) -> Option<Connection> {
        let mut idle = self.idle.lock().ok()?;
        for ip in addrs {
            let key = PoolKey {
                addr: std::net::SocketAddr::new(*ip, port),
                tls_host: tls_host.map(str::to_string),
            };
            let Some(list) = idle.get_mut(&key) else {
                continue;
            };
            while let Some((conn, since)) = list.pop() {
                if since.elapsed() < IDLE && conn.usable() {
                    return Some(conn);
                }
            }
        }
        None
    }

    /// Keep `conn` for a later request (or drop it when the pool is full).
    pub fn give_back(&self, conn: Connection) {
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        idle.retain(|_, list| {
            list.retain(|(c, since)| since.elapsed() < IDLE && c.usable());
            !list.is_empty()
        });
        let total: usize = idle.values().map(Vec::len).sum();
        let list = idle.entry(conn.key.clone()).or_default();
        if total < PER_PLUGIN && list.len() < PER_KEY {
            list.push((conn, Instant::now()));
        }
    }
}
