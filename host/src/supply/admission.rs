//! The check at every load of a third-party plugin folder, on the bytes
//! the loader read: an installed plugin must be what its install folder's
//! `sandcrab.lock` fixes, and a signature must verify over exactly those
//! bytes, by a signer the operator trusts for that plugin's name. Where
//! signatures are required, an unsigned plugin is refused.

use std::path::{Path, PathBuf};

use super::artifact::{MAX_SIGNATURE, SIGNATURE_FILE};
use super::lockfile::Lockfile;
use super::signature::{self, Digests};
use super::signers::Signers;
use crate::plugin::{Admission, Admitted};

/// The operator's signers, whether signatures are required, and the
/// folders `sandcrab plugins install` wrote.
#[derive(Debug, Clone)]
pub struct SignedInstalls {
    pub signers: Signers,
    pub required: bool,
    pub install_dirs: Vec<PathBuf>,
}

impl SignedInstalls {
    /// The install folder the plugin folder `dir` (a real path) is in, if
    /// any; a plugin at the install folder itself is refused.
    fn install_dir_of(&self, dir: &Path) -> Result<Option<&Path>, String> {
        let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        for root in &self.install_dirs {
            let root_real = real(root);
            if dir == root_real {
                return Err(format!(
                    "{} is the install folder itself, which holds installed plugins, not one",
                    root.display()
                ));
            }
            if dir.parent() == Some(root_real.as_path()) {
                return Ok(Some(root.as_path()));
            }
        }
        Ok(None)
    }

    /// Whether an installed plugin's bytes are what its lockfile fixes.
    fn locked(&self, root: &Path, dir: &Path, digests: &Digests) -> Result<(), String> {
        let lock = Lockfile::read(root).map_err(|e| e.to_string())?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let entry = lock.get(&name).ok_or_else(|| {
            format!(
                "{} is in the install folder {} but not in its sandcrab.lock, so sandcrab did not install it; install plugins with `sandcrab plugins install`, or keep hand-made ones in another folder",
                dir.display(),
                root.display()
            )
        })?;
        for (what, found, locked) in [
            ("plugin.toml", &digests.manifest, &entry.manifest_sha256),
            ("component", &digests.component, &entry.component_sha256),
        ] {
            if found != locked {
                return Err(format!(
                    "its {what} changed after it was installed from {} (sha256 {found}; the lockfile fixes {locked}); run `sandcrab plugins verify`, and `sandcrab plugins install {}` to restore it",
                    entry.source, entry.source
                ));
            }
        }
        Ok(())
    }
}

impl SignedInstalls {
    /// The whole check on a plugin folder `dir` whose manifest and
    /// component are these bytes: its lock entry when it is installed,
    /// then its signature. `Ok(signer)` when it may load (`None`:
    /// unsigned, where that is allowed); else why not.
    pub fn check(
        &self,
        dir: &Path,
        manifest: &[u8],
        component: &[u8],
    ) -> Result<Option<String>, String> {
        // Each digest taken once, for the lock and the signature alike.
        let digests = Digests::of(manifest, component);
        // Wherever the path given leads: `root/x/sub/..` is `root/x`.
        let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if let Some(root) = self.install_dir_of(&real)? {
            self.locked(root, &real, &digests)?;
        }
        let name = crate::plugin::Manifest::parse(
            std::str::from_utf8(manifest).unwrap_or_default(),
            &dir.join("plugin.toml"),
        )
        .map(|m| m.name)
        .map_err(|e| e.to_string())?;
        let sig_path = dir.join(SIGNATURE_FILE);
        let sig = match crate::safe_fs::read_regular(
            &sig_path,
            MAX_SIGNATURE,
            crate::safe_fs::Links::Refuse,
        ) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{}: {e}", sig_path.display())),
        };
        match signature::verify_optional(sig.as_deref(), &digests, &name, &self.signers) {
            Ok(signer) => Ok(Some(signer.label())),
            Err(e) if e.leaves_it_unsigned() && !self.required => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Admission for SignedInstalls {
    fn admit(&self, dir: &Path, manifest: &[u8], component: &[u8]) -> Result<Admitted, String> {
        Ok(Admitted {
            signer: self.check(dir, manifest, component)?,
        })
    }

    fn scope(&self, _dir: &Path) -> Option<PathBuf> {
        None
    }
}
