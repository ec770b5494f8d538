//! Integrity pins: `[policy.plugins.NAME] sha256 = "…"` fixes the exact
//! component a plugin may run. A different component is refused before it
//! is compiled, with both hashes in the message; in locked mode a
//! third-party plugin loads only when pinned.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::error::LoadError;
use super::policy::{PluginOrigin, Policy};

/// The SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Check the component `bytes` of plugin `name` against the policy's pin.
pub fn verify(
    policy: &Policy,
    name: &str,
    origin: PluginOrigin,
    bytes: &[u8],
    wasm_path: &Path,
) -> Result<(), LoadError> {
    let pin = policy.plugins.get(name).and_then(|g| g.sha256.as_deref());
    match pin {
        Some(expected) => {
            let actual = sha256_hex(bytes);
            if actual.eq_ignore_ascii_case(expected.trim()) {
                Ok(())
            } else {
                Err(LoadError::PinMismatch {
                    path: wasm_path.to_path_buf(),
                    plugin: name.to_string(),
                    expected: expected.trim().to_string(),
                    actual,
                })
            }
        }
        None if policy.locked() && origin == PluginOrigin::ThirdParty => Err(LoadError::Unpinned {
            path: wasm_path.to_path_buf(),
            plugin: name.to_string(),
            actual: sha256_hex(bytes),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{PluginGrant, PolicyMode};

    fn pinned(sha: &str) -> Policy {
        let mut policy = Policy::default();
        policy.plugins.insert(
            "p".into(),
            PluginGrant {
                sha256: Some(sha.into()),
                ..PluginGrant::default()
            },
        );
        policy
    }

    #[test]
    fn a_pin_admits_only_its_component() {
        let good = sha256_hex(b"component");
        let path = Path::new("/p/x.wasm");
        assert!(
            verify(
                &pinned(&good),
                "p",
                PluginOrigin::ThirdParty,
                b"component",
                path
            )
            .is_ok()
        );
        assert!(
            verify(
                &pinned(&good.to_uppercase()),
                "p",
                PluginOrigin::ThirdParty,
                b"component",
                path
            )
            .is_ok()
        );
        let err = verify(
            &pinned(&good),
            "p",
            PluginOrigin::ThirdParty,
            b"changed",
            path,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains(&good) && err.contains(&sha256_hex(b"changed")),
            "both hashes are named: {err}"
        );
        assert!(
            verify(
                &Policy::default(),
                "p",
                PluginOrigin::ThirdParty,
                b"x",
                path
            )
            .is_ok()
        );
    }

    #[test]
    fn locked_mode_needs_a_pin_for_third_party_plugins() {
        let locked = Policy {
            mode: PolicyMode::Locked,
            ..Policy::default()
        };
        let path = Path::new("/p/x.wasm");
        let err = verify(&locked, "p", PluginOrigin::ThirdParty, b"x", path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sandcrab plugins pin p"), "{err}");
        assert!(verify(&locked, "p", PluginOrigin::Builtin, b"x", path).is_ok());
    }
}
