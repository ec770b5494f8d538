//! `sandcrab plugins check DIR`: validate a plugin without running any of
//! its code — manifest, component format, world, imports — and say what it
//! will need granted. The compiled component goes into the cache, so the
//! next load (and the next check) does not compile it again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::Config;
use crate::plugin::{Manifest, PluginHost, PluginHostConfig, PluginSource};

pub fn check(dir: PathBuf, config: Option<PathBuf>, no_cache: bool) -> anyhow::Result<ExitCode> {
    let scratch = tempfile::tempdir()?;
    let mut host_config = PluginHostConfig::new(scratch.path());
    let trusted = config.or_else(|| Config::user_file().filter(|p| p.exists()));
    if let Some(path) = &trusted
        && let Some(dir) = Config::read(path)?.cache_dir
    {
        host_config.cache_dir = Some(dir);
    }
    if no_cache {
        host_config.cache_dir = None;
    }
    let host = PluginHost::new(host_config)?;
    for d in host.diagnostics() {
        errln!("warning: {}", crate::cli::terminal::sanitize(&d.message));
    }
    match host.check(&PluginSource::Dir(dir.clone())) {
        Ok(checked) => {
            print_ok(&dir, &checked.manifest, &checked.version.to_string());
            outln!("native code: {}", checked.cache.describe());
            Ok(ExitCode::SUCCESS)
        }
        Err(err) => {
            errln!(
                "error: {}",
                crate::cli::terminal::sanitize(&err.to_string())
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

fn print_ok(dir: &Path, manifest: &Manifest, version: &str) {
    outln!(
        "ok: {} — {} {} ({} plugin, sandcrab:plugin@{version})",
        dir.display(),
        manifest.name,
        manifest.version,
        manifest.kind
    );
    outln!(
        "requests: {}",
        serde_json::to_string(&manifest.capabilities).unwrap_or_default()
    );
    let caps = &manifest.capabilities;
    if !caps.programs.is_empty() && caps.workspace == crate::plugin::Access::None {
        errln!(
            "warning: {}",
            crate::plugin::scratch_warning(&manifest.name)
        );
    }
    if !caps.programs.is_empty() || caps.workspace == crate::plugin::Access::ReadWrite {
        outln!(
            "grant what it needs in {}, for example:\n  [policy.plugins.{}]\n{}",
            crate::user_files::config_file_shown(),
            manifest.name,
            grant_lines(manifest)
        );
    }
}

/// The `[policy.plugins.NAME]` lines that grant what `manifest` requests
/// beyond a third-party plugin's defaults.
fn grant_lines(manifest: &Manifest) -> String {
    let caps = &manifest.capabilities;
    let quoted = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut lines = Vec::new();
    if caps.workspace == crate::plugin::Access::ReadWrite {
        lines.push("  workspace = \"read-write\"".to_string());
    }
    if !caps.programs.is_empty() {
        lines.push(format!("  programs = [{}]", quoted(&caps.programs)));
    }
    if !caps.env.is_empty() {
        lines.push(format!("  env = [{}]", quoted(&caps.env)));
    }
    lines.join("\n")
}
