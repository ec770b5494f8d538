//! An OCI image layout (`oci-layout`, `index.json`, `blobs/sha256/…`):
//! what `sandcrab plugins package` writes as a `.tar`, and what install
//! reads from a folder or a `.tar` (a download's, in memory), every file
//! bounded and every blob checked against its digest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::artifact::{
    ArtifactError, Descriptor, MAX_OCI_MANIFEST, OCI_INDEX, OCI_MANIFEST, Package, digest_of,
};
use crate::plugin::integrity::sha256_hex;
use crate::plugin::{MAX_COMPONENT_BYTES, Manifest};

/// Largest layout archive or folder read (the component's bound and
/// room for the rest).
pub const MAX_LAYOUT_BYTES: u64 = MAX_COMPONENT_BYTES + (4 << 20);

/// Write `package` as a layout `.tar` at `out`, tagged `tag`; returns
/// the manifest's digest.
pub fn write_tar(
    package: &Package,
    manifest: &Manifest,
    tag: &str,
    out: &Path,
) -> Result<String, ArtifactError> {
    let io = |source| ArtifactError::Io {
        path: out.to_path_buf(),
        source,
    };
    let files = files(package, manifest, tag);
    let tmp = out.with_extension("tar.partial");
    let file = std::fs::File::create(&tmp).map_err(io)?;
    let mut tar = tar::Builder::new(file);
    for (path, bytes) in &files.1 {
        let mut header = tar::Header::new_ustar();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, path, bytes.as_slice())
            .map_err(io)?;
    }
    tar.into_inner().and_then(|f| f.sync_all()).map_err(io)?;
    std::fs::rename(&tmp, out).map_err(io)?;
    Ok(files.0)
}

/// The layout's files, by path, and the manifest digest.
fn files(package: &Package, manifest: &Manifest, tag: &str) -> (String, Vec<(String, Vec<u8>)>) {
    let (image, blobs) = package.to_oci(manifest);
    let digest = digest_of(&image);
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{
            "mediaType": OCI_MANIFEST,
            "digest": digest,
            "size": image.len(),
            "annotations": {"org.opencontainers.image.ref.name": tag},
        }],
    });
    let mut out = vec![
        (
            "oci-layout".to_string(),
            br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
        ),
        (
            "index.json".to_string(),
            serde_json::to_vec(&index).expect("JSON"),
        ),
    ];
    let blob_path = |d: &str| format!("blobs/sha256/{}", d.trim_start_matches("sha256:"));
    out.push((blob_path(&digest), image));
    for (d, bytes) in blobs {
        out.push((blob_path(&d.digest), bytes));
    }
    (digest, out)
}

/// The files of a layout folder or `.tar`, bounded in total.
pub fn read(path: &Path) -> Result<BTreeMap<String, Vec<u8>>, ArtifactError> {
    let what = path.display().to_string();
    let io = |source| ArtifactError::Io {
        path: path.to_path_buf(),
        source,
    };
    if !path.is_dir() {
        return read_tar(std::fs::File::open(path).map_err(io)?, &what);
    }
    let mut files = Files::new(&what);
    let read = |p: &Path| {
        crate::safe_fs::read_regular(p, MAX_LAYOUT_BYTES, crate::safe_fs::Links::Refuse).map_err(
            |source| ArtifactError::Io {
                path: p.to_path_buf(),
                source,
            },
        )
    };
    for name in ["oci-layout", "index.json"] {
        files.add(name.into(), read(&path.join(name))?)?;
    }
    let blobs = path.join("blobs/sha256");
    for entry in std::fs::read_dir(&blobs).map_err(io)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        files.add(format!("blobs/sha256/{name}"), read(&entry.path())?)?;
    }
    Ok(files.done())
}

/// The files of a layout `.tar` read from `reader` (`what` names it),
/// bounded in total and per entry.
pub fn read_tar(
    reader: impl std::io::Read,
    what: &str,
) -> Result<BTreeMap<String, Vec<u8>>, ArtifactError> {
    let io = |source| ArtifactError::Io {
        path: PathBuf::from(what),
        source,
    };
    let mut files = Files::new(what);
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let name = entry
            .path()
            .map_err(io)?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_string();
        let size = entry.header().size().map_err(io)?;
        if size > MAX_LAYOUT_BYTES {
            return Err(ArtifactError::TooBig {
                what: what.to_string(),
                part: "archive entry",
                size,
                bound: MAX_LAYOUT_BYTES,
            });
        }
        let mut bytes = Vec::with_capacity(size as usize);
        std::io::Read::read_to_end(&mut std::io::Read::take(&mut entry, size), &mut bytes)
            .map_err(io)?;
        files.add(name, bytes)?;
    }
    Ok(files.done())
}

/// A layout's files as they are read, bounded in total.
struct Files<'a> {
    what: &'a str,
    files: BTreeMap<String, Vec<u8>>,
    total: u64,
}

impl<'a> Files<'a> {
    fn new(what: &'a str) -> Self {
        Files {
            what,
            files: BTreeMap::new(),
            total: 0,
        }
    }

    fn add(&mut self, name: String, bytes: Vec<u8>) -> Result<(), ArtifactError> {
        self.total += bytes.len() as u64;
        if self.total > MAX_LAYOUT_BYTES {
            return Err(ArtifactError::TooBig {
                what: self.what.to_string(),
                part: "layout",
                size: self.total,
                bound: MAX_LAYOUT_BYTES,
            });
        }
        self.files.insert(name, bytes);
        Ok(())
    }

    fn done(self) -> BTreeMap<String, Vec<u8>> {
        self.files
    }
}

/// The manifest a layout's index names (the one tagged `tag`, or its
/// only one) and its digest.
pub fn manifest_of(
    files: &BTreeMap<String, Vec<u8>>,
    tag: Option<&str>,
    what: &str,
) -> Result<(String, Vec<u8>), ArtifactError> {
    let invalid = |reason: String| ArtifactError::Invalid {
        what: what.to_string(),
        reason,
    };
    let index = files
        .get("index.json")
        .ok_or_else(|| invalid("no index.json: not an OCI image layout".into()))?;
    #[derive(Deserialize)]
    struct Index {
        manifests: Vec<Descriptor>,
    }
    let index: Index =
        serde_json::from_slice(index).map_err(|e| invalid(format!("index.json: {e}")))?;
    let named = |d: &&Descriptor| {
        tag.is_none_or(|t| {
            d.annotations
                .get("org.opencontainers.image.ref.name")
                .map(String::as_str)
                == Some(t)
        })
    };
    let found: Vec<&Descriptor> = index.manifests.iter().filter(named).collect();
    let d = match found.as_slice() {
        [one] => *one,
        [] => {
            return Err(invalid(format!(
                "no manifest tagged {}",
                tag.unwrap_or("(any)")
            )));
        }
        _ => {
            return Err(invalid(
                "more than one manifest; name the tag (FILE.tar:TAG)".into(),
            ));
        }
    };
    let bytes = blob(files, d, MAX_OCI_MANIFEST, what)?;
    Ok((d.digest.clone(), bytes))
}

/// The blob `d` names, checked against its digest and size.
pub fn blob(
    files: &BTreeMap<String, Vec<u8>>,
    d: &Descriptor,
    bound: u64,
    what: &str,
) -> Result<Vec<u8>, ArtifactError> {
    let invalid = |reason: String| ArtifactError::Invalid {
        what: what.to_string(),
        reason,
    };
    let hex = d.hex().map_err(&invalid)?;
    if d.size > bound {
        return Err(ArtifactError::TooBig {
            what: what.to_string(),
            part: "blob",
            size: d.size,
            bound,
        });
    }
    let bytes = files
        .get(&format!("blobs/sha256/{hex}"))
        .ok_or_else(|| invalid(format!("blob {} is missing", d.digest)))?;
    if sha256_hex(bytes) != hex || bytes.len() as u64 != d.size {
        return Err(invalid(format!(
            "blob {} does not have that digest or size (damaged or altered)",
            d.digest
        )));
    }
    Ok(bytes.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supply::artifact::ImageManifest;

    #[test]
    fn a_layout_tar_reads_back_as_the_same_package_with_a_stable_digest() {
        let dir = tempfile::tempdir().unwrap();
        let (package, manifest) = crate::supply::artifact::tests::package();
        let out = dir.path().join("p.tar");
        let digest = write_tar(&package, &manifest, "v1", &out).unwrap();
        let again = write_tar(&package, &manifest, "v1", &dir.path().join("q.tar")).unwrap();
        assert_eq!(digest, again, "the same files package to the same digest");
        let files = read(&out).unwrap();
        let (d, bytes) = manifest_of(&files, Some("v1"), "p.tar").unwrap();
        assert_eq!(d, digest);
        let image = ImageManifest::parse(&bytes, "p.tar").unwrap();
        let layers = image.plugin_layers("p.tar").unwrap();
        assert_eq!(
            blob(&files, &layers.component, MAX_COMPONENT_BYTES, "p").unwrap(),
            package.component
        );
        assert!(manifest_of(&files, Some("v2"), "p.tar").is_err());
    }
}
