//! Fetch what a [`Reference`] names as a [`Package`] and the digest it
//! resolved to, every byte checked against its digest and bound. Nothing
//! is installed here; partial downloads stay in the staging folder (so a
//! broken one resumes) and are never loaded.

use std::path::Path;

use super::artifact::{
    self, ArtifactError, ImageManifest, MAX_PLUGIN_MANIFEST, MAX_SIGNATURE, Package,
};
use super::download::{self, DownloadError};
use super::layout;
use super::reference::{OciRef, Reference};
use super::registry::Registry;
use super::signature::Digests;
use crate::plugin::{MAX_COMPONENT_BYTES, Manifest};

/// A plugin fetched: its files, its parsed manifest, and the digest its
/// source resolved to.
pub struct Fetched {
    pub package: Package,
    pub manifest: Manifest,
    pub digest: String,
    /// The SHA-256 of its `plugin.toml` and component, taken once: from
    /// the layer digests the download checked, else from the bytes.
    pub digests: Digests,
}

/// Why a fetch failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(transparent)]
    Download(#[from] DownloadError),
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
}

/// Fetch `reference` over `http`; `staging` holds partial downloads.
pub async fn fetch(
    reference: &Reference,
    staging: &Path,
    http: &download::Http,
) -> Result<Fetched, FetchError> {
    super::files::plain_dir(staging).map_err(|source| ArtifactError::Io {
        path: staging.to_path_buf(),
        source,
    })?;
    match reference {
        Reference::Oci(oci) => from_registry(oci, staging, http).await,
        Reference::Https { url, sha256 } => {
            let partial = staging.join(format!("{sha256}.partial"));
            let bytes = download::blob(
                http,
                url,
                &Default::default(),
                sha256,
                layout::MAX_LAYOUT_BYTES,
                &partial,
            )
            .await?;
            let files = layout::read_tar(std::io::Cursor::new(bytes), url.as_ref())?;
            let mut fetched = from_layout(&files, url.as_ref())?;
            fetched.digest = format!("sha256:{sha256}");
            Ok(fetched)
        }
        Reference::Local(path) => from_local(path),
    }
}

async fn from_registry(
    oci: &OciRef,
    staging: &Path,
    http: &download::Http,
) -> Result<Fetched, FetchError> {
    let what = oci.to_string();
    let mut registry = Registry::new(oci, http)?;
    let resolved = registry.resolve().await?;
    let image = ImageManifest::parse(&resolved.bytes, &what)?;
    let layers = image.plugin_layers(&what)?;
    let partial =
        |d: &artifact::Descriptor| staging.join(format!("{}.partial", d.hex().unwrap_or("x")));
    let manifest_bytes = registry
        .blob(
            &layers.manifest,
            MAX_PLUGIN_MANIFEST,
            &partial(&layers.manifest),
        )
        .await?;
    let component = registry
        .blob(
            &layers.component,
            MAX_COMPONENT_BYTES,
            &partial(&layers.component),
        )
        .await?;
    let signature = match &layers.signature {
        Some(d) => Some(registry.blob(d, MAX_SIGNATURE, &partial(d)).await?),
        None => None,
    };
    let package = Package {
        manifest: manifest_bytes,
        component,
        signature,
    };
    let manifest = package.parsed_manifest(&format!("{what} plugin.toml"))?;
    Ok(Fetched {
        package,
        manifest,
        digest: resolved.digest,
        digests: checked_digests(&layers),
    })
}

/// The digests of a plugin's layers, which the download or the layout
/// checked against the bytes themselves.
fn checked_digests(layers: &artifact::PluginLayers) -> Digests {
    Digests {
        manifest: layers
            .manifest
            .digest
            .trim_start_matches("sha256:")
            .to_string(),
        component: layers
            .component
            .digest
            .trim_start_matches("sha256:")
            .to_string(),
    }
}

fn from_local(path: &Path) -> Result<Fetched, FetchError> {
    if path.join("plugin.toml").exists() {
        let (package, manifest) = Package::from_dir(path)?;
        // A folder resolves to the digest it would have once packaged.
        let (image, _) = package.to_oci(&manifest);
        return Ok(Fetched {
            digest: artifact::digest_of(&image),
            digests: Digests::of(&package.manifest, &package.component),
            package,
            manifest,
        });
    }
    let files = layout::read(path)?;
    Ok(from_layout(&files, &path.display().to_string())?)
}

/// The package in an OCI layout's files, with its manifest's digest.
fn from_layout(
    files: &std::collections::BTreeMap<String, Vec<u8>>,
    what: &str,
) -> Result<Fetched, ArtifactError> {
    let (digest, bytes) = layout::manifest_of(files, None, what)?;
    let image = ImageManifest::parse(&bytes, what)?;
    let layers = image.plugin_layers(what)?;
    let package = Package {
        manifest: layout::blob(files, &layers.manifest, MAX_PLUGIN_MANIFEST, what)?,
        component: layout::blob(files, &layers.component, MAX_COMPONENT_BYTES, what)?,
        signature: layers
            .signature
            .as_ref()
            .map(|d| layout::blob(files, d, MAX_SIGNATURE, what))
            .transpose()?,
    };
    let manifest = package.parsed_manifest(&format!("{what} plugin.toml"))?;
    Ok(Fetched {
        package,
        manifest,
        digest,
        digests: checked_digests(&layers),
    })
}
