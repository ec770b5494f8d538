//! Outgoing HTTP for plugins (`wasi:http/outgoing-handler`): a capability
//! with two yeses like the others — the manifest asks for origins, the
//! operator grants them — checked request by request by the host, which
//! also adds the operator's credentials on the way out so the plugin never
//! holds them.

pub mod address;
mod connect;
pub mod egress;
mod gate;
pub mod grant;
mod held;
pub mod origin;
mod pool;
mod screen;
pub mod self_check;
mod send;

pub use egress::{HttpEgress, HttpLimits};
pub use gate::HttpGate;
pub use grant::{CredentialGrant, CredentialRule, HttpGrant, HttpRule};
pub use origin::OriginPattern;
