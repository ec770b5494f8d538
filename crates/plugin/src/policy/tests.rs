//! The two-yes rule, capability by capability.

use super::*;
use crate::manifest::{Access, Capabilities, Limits, Manifest, NetworkUse, PathAccess, PluginKind};
use std::path::Path;
use std::path::PathBuf;

fn manifest(caps: Capabilities) -> Manifest {
    Manifest {
        name: "probe".into(),
        version: "1".into(),
        kind: PluginKind::Tool,
        wasm: "probe.wasm".into(),
        description: String::new(),
        capabilities: caps,
        limits: Limits::default(),
    }
}

/// A real directory tree for path grants: `<tmp>/data/sub`.
fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().canonicalize().unwrap().join("data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    (dir, data)
}

fn greedy(data: &Path) -> Capabilities {
    Capabilities {
        workspace: Access::ReadWrite,
        paths: vec![PathAccess {
            path: data.join("sub"),
            access: Access::ReadWrite,
        }],
        programs: vec!["sh".into(), "git".into()],
        env: vec!["LANG".into(), "GITHUB_TOKEN".into()],
        network: NetworkUse::Always,
        http: vec!["https://api.github.com".parse().unwrap()],
    }
}

fn http_grant(origins: &[&str], pinned: bool) -> PluginGrant {
    let text = format!(
        "http = [{}]\n{}[credentials.\"https://api.github.com\"]\nheader = \"Authorization\"\nvalue = \"Bearer ${{GITHUB_TOKEN}}\"\n",
        origins
            .iter()
            .map(|o| format!("\"{o}\""))
            .collect::<Vec<_>>()
            .join(", "),
        if pinned { "sha256 = \"ab\"\n" } else { "" }
    );
    toml::from_str(&text).unwrap()
}

#[test]
fn http_needs_both_the_manifest_and_the_grant() {
    let (_dir, data) = data_dir();
    let m = manifest(greedy(&data));
    let none = Policy::default().decide(&m, PluginOrigin::ThirdParty);
    assert!(none.grants.http.is_empty());
    assert!(
        none.denied.iter().any(|d| d.contains("http: https://api.github.com (grant it with [policy.plugins.probe] http = [\"https://api.github.com\"]")),
        "{:?}",
        none.denied
    );
    let mut policy = Policy::default();
    policy.plugins.insert(
        "probe".into(),
        http_grant(&["https://api.github.com", "https://api.other.com"], false),
    );
    let d = policy.decide(&m, PluginOrigin::ThirdParty);
    assert!(!d.denied.iter().any(|x| x.contains("also granted")));
    let shown: Vec<String> = d.grants.http.iter().map(|r| r.describe()).collect();
    assert_eq!(shown, ["https://api.github.com"], "only what was asked for");
    assert_eq!(
        d.grants.credentials[0].describe(),
        "authorization for https://api.github.com from $GITHUB_TOKEN"
    );
    assert!(
        d.sources.iter().any(|s| s.capability == "credentials"
            && s.source.ends_with("policy.plugins.probe.credentials"))
    );
    // The credential's variable granted as env too: the plugin could read it.
    policy.plugins.get_mut("probe").unwrap().env = vec!["GITHUB_TOKEN".into()];
    let d = policy.decide(&m, PluginOrigin::ThirdParty);
    assert!(
        d.denied
            .iter()
            .any(|x| x.contains("GITHUB_TOKEN is also granted to the plugin as env")),
        "{:?}",
        d.denied
    );
}

#[test]
fn locked_mode_gives_http_only_to_pinned_plugins_and_network_false_to_none() {
    let (_dir, data) = data_dir();
    let m = manifest(greedy(&data));
    let mut policy = Policy {
        mode: PolicyMode::Locked,
        ..Policy::default()
    };
    policy.plugins.insert(
        "probe".into(),
        http_grant(&["https://api.github.com"], false),
    );
    let d = policy.decide(&m, PluginOrigin::ThirdParty);
    assert!(d.grants.http.is_empty());
    assert!(
        d.denied
            .iter()
            .any(|x| x.contains("sandcrab plugins pin probe")),
        "{:?}",
        d.denied
    );
    policy.plugins.insert(
        "probe".into(),
        http_grant(&["https://api.github.com"], true),
    );
    assert_eq!(
        policy
            .decide(&m, PluginOrigin::ThirdParty)
            .grants
            .http
            .len(),
        1
    );
    policy.network = Some(false);
    policy.mode = PolicyMode::Default;
    let d = policy.decide(&m, PluginOrigin::ThirdParty);
    assert!(d.grants.http.is_empty());
    assert!(d.grants.credentials.is_empty());
}

#[test]
fn builtin_gets_what_it_requests_except_secrets() {
    let (_t, data) = data_dir();
    let d = Policy::default().decide(&manifest(greedy(&data)), PluginOrigin::Builtin);
    assert_eq!(d.grants.workspace, Access::ReadWrite);
    assert_eq!(d.grants.programs, vec!["sh", "git"]);
    assert_eq!(d.grants.env, vec!["LANG"]);
    assert!(d.grants.network);
    assert_eq!(d.grants.paths.len(), 1);
    assert_eq!(d.denied.len(), 1);
    assert!(
        d.denied[0].starts_with("env: GITHUB_TOKEN is a secret")
            && d.denied[0].contains("[policy.plugins.probe] env = [\"GITHUB_TOKEN\"]"),
        "{}",
        d.denied[0]
    );
}

#[test]
fn third_party_without_grants_reads_workspace_only() {
    let (_t, data) = data_dir();
    let d = Policy::default().decide(&manifest(greedy(&data)), PluginOrigin::ThirdParty);
    assert_eq!(d.grants.workspace, Access::Read);
    assert!(d.grants.programs.is_empty());
    assert!(d.grants.env.is_empty());
    assert!(d.grants.paths.is_empty());
    assert!(!d.grants.network);
    let has = |prefix: &str| d.denied.iter().any(|l| l.starts_with(prefix));
    assert!(has(&format!(
        "workspace: read-write requested, read granted (grant it with [policy.plugins.probe] workspace = \"read-write\" in {})",
        crate::user_files::config_file_shown()
    )));
    assert!(has(
        "programs: git (grant it with [policy.plugins.probe] programs = [\"git\"]"
    ));
    assert!(has(
        "network (grant it with [policy.plugins.probe] network = true"
    ));
}

#[test]
fn effective_is_request_intersect_grant() {
    let (_t, data) = data_dir();
    let mut policy = Policy::default();
    policy.plugins.insert(
        "probe".into(),
        PluginGrant {
            workspace: Access::ReadWrite,
            paths: vec![PathAccess {
                path: data.clone(),
                access: Access::Read,
            }],
            programs: vec!["git".into(), "curl".into()],
            env: vec!["GITHUB_TOKEN".into(), "UNREQUESTED".into()],
            network: true,
            ..PluginGrant::default()
        },
    );
    // Request less than granted: get only the request.
    let mut caps = greedy(&data);
    caps.workspace = Access::Read;
    let d = policy.decide(&manifest(caps), PluginOrigin::ThirdParty);
    assert_eq!(d.grants.workspace, Access::Read);
    assert_eq!(
        d.grants.programs,
        vec!["git"],
        "sh not granted, curl not requested"
    );
    assert_eq!(
        d.grants.env,
        vec!["GITHUB_TOKEN"],
        "secret passes when named"
    );
    assert_eq!(
        d.grants.paths,
        vec![PathAccess {
            path: data.join("sub"),
            access: Access::Read
        }],
        "a grant of a parent directory covers the child, at the granted access"
    );
    assert!(d.grants.network);
}

#[test]
fn locked_mode_grants_third_party_only_what_is_named() {
    let (_t, data) = data_dir();
    let mut policy = Policy {
        mode: PolicyMode::Locked,
        ..Policy::default()
    };
    let d = policy.decide(&manifest(greedy(&data)), PluginOrigin::ThirdParty);
    assert_eq!(d.grants.workspace, Access::None);
    assert!(d.grants.programs.is_empty() && d.grants.env.is_empty());

    policy.plugins.insert(
        "probe".into(),
        PluginGrant {
            workspace: Access::Read,
            programs: vec!["git".into()],
            env: vec!["LANG".into()],
            network: true,
            ..PluginGrant::default()
        },
    );
    let d = policy.decide(&manifest(greedy(&data)), PluginOrigin::ThirdParty);
    assert_eq!(d.grants.workspace, Access::Read);
    assert_eq!(d.grants.programs, vec!["git"]);
    assert_eq!(d.grants.env, vec!["LANG"]);
    assert!(
        !d.grants.network,
        "locked mode allows no network even when granted"
    );
    assert_eq!(policy.sandbox_mode(), SandboxMode::Locked);
}

#[test]
fn locked_mode_keeps_builtin_defaults_but_not_network_or_unnamed_env() {
    let (_t, data) = data_dir();
    let policy = Policy {
        mode: PolicyMode::Locked,
        sandbox: Some(SandboxMode::Off),
        ..Policy::default()
    };
    let d = policy.decide(&manifest(greedy(&data)), PluginOrigin::Builtin);
    assert_eq!(d.grants.workspace, Access::ReadWrite);
    assert_eq!(d.grants.programs, vec!["sh", "git"]);
    assert!(!d.grants.network);
    assert!(
        d.grants.env.is_empty(),
        "LANG was not named: {:?}",
        d.grants.env
    );
    assert_eq!(
        policy.sandbox_mode(),
        SandboxMode::Locked,
        "locked mode pins locked confinement"
    );
    assert!(policy.warnings()[0].contains("sandbox = \"off\" is ignored"));
}

#[test]
fn path_requests_are_compared_by_real_path() {
    let (_t, data) = data_dir();
    let secret = data.parent().unwrap().join("home-ssh");
    std::fs::create_dir_all(&secret).unwrap();
    std::os::unix::fs::symlink(&secret, data.join("link")).unwrap();
    let policy = grant_paths(&data, Access::ReadWrite);
    for sneaky in [
        data.join("../home-ssh"),
        data.join("link"),
        data.join("sub/../../home-ssh"),
    ] {
        let mut caps = Capabilities::default();
        caps.paths.push(PathAccess {
            path: sneaky.clone(),
            access: Access::Read,
        });
        let d = policy.decide(&manifest(caps), PluginOrigin::ThirdParty);
        assert!(
            d.grants.paths.is_empty(),
            "{} was mounted",
            sneaky.display()
        );
        assert!(d.denied[0].starts_with("paths: "), "{:?}", d.denied);
    }
    let mut caps = Capabilities::default();
    caps.paths.push(PathAccess {
        path: data.join("sub/."),
        access: Access::Read,
    });
    let d = policy.decide(&manifest(caps), PluginOrigin::ThirdParty);
    assert_eq!(
        d.grants.paths[0].path,
        data.join("sub"),
        "granted, as its real path"
    );
}

fn grant_paths(path: &Path, access: Access) -> Policy {
    let mut policy = Policy::default();
    policy.plugins.insert(
        "probe".into(),
        PluginGrant {
            paths: vec![PathAccess {
                path: path.to_path_buf(),
                access,
            }],
            ..PluginGrant::default()
        },
    );
    policy
}

#[test]
fn network_false_takes_the_network_from_everyone() {
    let (_t, data) = data_dir();
    let policy = Policy {
        network: Some(false),
        ..Policy::default()
    };
    let d = policy.decide(&manifest(greedy(&data)), PluginOrigin::Builtin);
    assert!(!d.grants.network);
    assert!(
        d.denied
            .iter()
            .any(|l| l == "network ([policy] network = false)")
    );
}

#[test]
fn secret_names_are_recognised() {
    for name in [
        "OPENAI_API_KEY",
        "GITHUB_TOKEN",
        "AWS_SECRET",
        "DB_PASSWORD",
        "GCP_CREDENTIALS",
        "api_key",
    ] {
        assert!(is_secret_env(name), "{name}");
    }
    for name in ["PATH", "HOME", "TOKENIZER_PATH", "LANG"] {
        assert!(!is_secret_env(name), "{name}");
    }
}

#[test]
fn limits_above_the_defaults_need_the_operator() {
    let mut m = manifest(Capabilities::default());
    m.limits.memory_mb = Some(100_000);
    m.limits.max_instances = Some(2);
    let d = Policy::default().decide(&m, PluginOrigin::ThirdParty);
    assert_eq!(d.grants.limits.memory_mb, limits::DEFAULT_MEMORY_MB);
    assert_eq!(d.grants.limits.timeout_ms, limits::DEFAULT_TIMEOUT_MS);
    assert_eq!(
        d.grants.limits.max_instances, 2,
        "less than the default is fine"
    );
    assert!(
        d.denied.iter().any(|l| l.starts_with("limits: memory_mb 2048 requested, 256 granted (grant it with [policy.plugins.probe] limits = { memory_mb = 2048 }")),
        "{:?}",
        d.denied
    );
    let d = Policy::default().decide(&m, PluginOrigin::Builtin);
    assert_eq!(
        d.grants.limits.memory_mb,
        limits::MAX_MEMORY_MB,
        "first-party: as asked, capped"
    );

    let mut policy = Policy::default();
    policy.plugins.insert(
        "probe".into(),
        PluginGrant {
            limits: Limits {
                memory_mb: Some(4096),
                ..Limits::default()
            },
            ..PluginGrant::default()
        },
    );
    assert_eq!(
        policy
            .decide(&m, PluginOrigin::ThirdParty)
            .grants
            .limits
            .memory_mb,
        limits::MAX_MEMORY_MB,
        "even the operator cannot pass the engine's ceiling"
    );
}
