//! `sandcrab plugins statement | package | publish`: the author's side.
//! `statement` prints what a signature is made over, `package` writes the
//! OCI artifact as a layout `.tar` (which `skopeo copy oci-archive:…` or
//! `oras` can push too), `publish` pushes it to a registry.

use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;

use crate::supply::layout;
use crate::supply::registry::Registry;
use crate::supply::signature::{Digests, statement};
use crate::supply::{Package, Reference};

pub fn print_statement(dir: &Path) -> anyhow::Result<ExitCode> {
    let (package, _) = Package::from_dir(dir)?;
    out!(
        "{}",
        statement(&Digests::of(&package.manifest, &package.component))
    );
    Ok(ExitCode::SUCCESS)
}

pub fn package(dir: &Path, out: &Path, tag: &str) -> anyhow::Result<ExitCode> {
    let (package, manifest) = Package::from_dir(dir)?;
    let digest = layout::write_tar(&package, &manifest, tag, out)?;
    outln!(
        "packaged {} {} as {} (tag {tag}, {digest}), {}",
        manifest.name,
        manifest.version,
        out.display(),
        signed_or_not(&package)
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn publish(dir: &Path, to: &str) -> anyhow::Result<ExitCode> {
    let Reference::Oci(oci) = Reference::parse(to)? else {
        bail!("publish pushes to a registry: give oci://HOST/NAMESPACE/NAME:TAG");
    };
    let Some(tag) = oci.tag.clone().filter(|_| oci.digest.is_none()) else {
        bail!("publish needs a tag to push under (oci://HOST/NAMESPACE/NAME:TAG), not a digest");
    };
    let (package, manifest) = Package::from_dir(dir)?;
    let (image, blobs) = package.to_oci(&manifest);
    let digest = Registry::new(&oci, &crate::supply::download::Http::new(&[]))?
        .push(&tag, &image, &blobs)
        .await?;
    outln!(
        "published {} {} to {} ({digest}), {}",
        manifest.name,
        manifest.version,
        oci,
        signed_or_not(&package)
    );
    Ok(ExitCode::SUCCESS)
}

fn signed_or_not(package: &Package) -> &'static str {
    if package.signature.is_some() {
        "with its plugin.sig"
    } else {
        "unsigned (sign it: `sandcrab plugins statement DIR | ssh-keygen -Y sign -f KEY -n sandcrab-plugin > DIR/plugin.sig`)"
    }
}
