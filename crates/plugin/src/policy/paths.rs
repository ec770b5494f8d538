//! The workspace and further paths: the better of the base grant and the
//! operator's, never more than asked; paths compared by where they really
//! are, so `..` and links in a request cannot lead out of a grant.

use std::path::Path;

use super::decide::{Asking, Decided};
use super::schema::PluginGrant;
use crate::manifest::{Access, PathAccess};

/// The workspace access granted.
pub(super) fn workspace(asking: &Asking) -> Decided<Access> {
    let asked = asking.request().workspace;
    let granted = asking
        .base
        .workspace
        .max(asking.explicit.map(|g| g.workspace).unwrap_or_default());
    let workspace = asked.min(granted);
    let mut decided = Decided::all(workspace);
    if workspace < asked {
        decided.denied.push(format!(
            "workspace: {asked} requested, {workspace} granted{}",
            asking.hint(&format!("workspace = \"{asked}\""))
        ));
    }
    decided
}

/// The further paths granted, as real paths.
pub(super) fn paths(asking: &Asking) -> Decided<Vec<PathAccess>> {
    let mut decided = Decided::all(Vec::new());
    for want in &asking.request().paths {
        let Ok(real) = want.path.canonicalize() else {
            decided.denied.push(format!(
                "paths: {} does not exist or cannot be resolved",
                want.path.display()
            ));
            continue;
        };
        let granted = granted_path_access(&real, &asking.base.paths, asking.explicit);
        let access = want.access.min(granted);
        if access < want.access {
            decided.denied.push(format!(
                "paths: {} {} requested, {access} granted{}",
                want.path.display(),
                want.access,
                asking.hint(&format!(
                    "paths = [{{ path = \"{}\", access = \"{}\" }}]",
                    real.display(),
                    want.access
                ))
            ));
        }
        if access > Access::None {
            decided.granted.push(PathAccess { path: real, access });
        }
    }
    decided
}

/// The best access any grant gives to the real path `path` (a grant of a
/// directory covers everything below it; grants are compared by their real
/// paths too).
fn granted_path_access(path: &Path, base: &[PathAccess], explicit: Option<&PluginGrant>) -> Access {
    base.iter()
        .chain(explicit.map(|g| g.paths.as_slice()).unwrap_or_default())
        .filter(|g| {
            g.path
                .canonicalize()
                .is_ok_and(|granted| path.starts_with(granted))
        })
        .map(|g| g.access)
        .max()
        .unwrap_or_default()
}
