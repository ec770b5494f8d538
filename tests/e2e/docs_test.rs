//! The documentation cannot drift from the binary: every shell example
//! in `README.md` and `docs/` marked `<!-- runnable -->` runs (against a
//! loopback provider that answers every model call), every link between
//! pages leads to a page, and the reference pages name every setting and
//! every event kind there is.

use std::path::{Path, PathBuf};

use sandcrab::llm::ProviderKind;

use crate::llm_transcripts::{Answer, stream};
use crate::mock_llm::MockLlm;
use crate::support::Scene;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `README.md` and every page under `docs/`, with their text.
fn pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![root().join("README.md")];
    let mut folders = vec![root().join("docs")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

/// The shell blocks of `text` marked runnable: the line before the fence
/// is `<!-- runnable -->`.
fn runnable_blocks(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        if lines[i].trim() == "<!-- runnable -->" && lines[i + 1].starts_with("```sh") {
            let body: Vec<&str> = lines[i + 2..]
                .iter()
                .take_while(|l| !l.starts_with("```"))
                .copied()
                .collect();
            i += 2 + body.len();
            blocks.push(body.join("\n"));
        } else {
            i += 1;
        }
    }
    blocks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_runnable_example_in_the_docs_runs() {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_sandcrab"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for (page, text) in pages() {
        for block in runnable_blocks(&text) {
            let scene = Scene::new();
            let ws = scene.workspace();
            std::fs::write(ws.join("README.md"), "# demo\n").unwrap();
            let git = |args: &[&str]| {
                std::process::Command::new("git")
                    .args(args)
                    .current_dir(&ws)
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .output()
                    .unwrap()
            };
            git(&["init", "-q"]);
            git(&["-c", "user.name=d", "-c", "user.email=d@d", "add", "."]);
            git(&[
                "-c",
                "user.name=d",
                "-c",
                "user.email=d@d",
                "commit",
                "-qm",
                "start",
            ]);
            let server = MockLlm::start().await;
            for _ in 0..20 {
                server.push(stream(
                    ProviderKind::Anthropic,
                    &Answer::Text(vec!["Done."]),
                ));
            }
            // The environment the tests give the binary (its own config,
            // data and cache folders), and the binary first on PATH.
            let mut shell = std::process::Command::new("bash");
            let envs = crate::support::sandcrab_cmd(&scene);
            for (key, value) in envs.get_envs() {
                match value {
                    Some(value) => shell.env(key, value),
                    None => shell.env_remove(key),
                };
            }
            let out = shell
                .args(["-eo", "pipefail", "-c", &block])
                .env("PATH", &path)
                .env("ANTHROPIC_API_KEY", "sk-docs-example")
                .env("ANTHROPIC_BASE_URL", server.base_url())
                .current_dir(&ws)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: this example failed:\n{block}\n--- stdout\n{}\n--- stderr\n{}",
                page.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    // Control: the check found the examples it is meant to run.
    assert!(ran >= 8, "only {ran} runnable examples found");
}

#[test]
fn every_link_between_pages_leads_to_a_page() {
    let link = regex::Regex::new(r"\]\(([^)#\s]+)(#[^)\s]*)?\)").unwrap();
    let mut checked = 0;
    for (page, text) in pages() {
        for found in link.captures_iter(&text) {
            let target = &found[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let resolved = page.parent().unwrap().join(target);
            assert!(
                resolved.exists(),
                "{}: the link to {target} leads nowhere",
                page.display()
            );
            if let Some(anchor) = found.get(2) {
                let anchor = &anchor.as_str()[1..];
                let text = std::fs::read_to_string(&resolved).unwrap();
                assert!(
                    text.lines()
                        .filter(|l| l.starts_with('#'))
                        .any(|l| slug(l.trim_start_matches('#')) == anchor),
                    "{}: {target} has no heading #{anchor}",
                    page.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 10, "only {checked} links found");
}

/// A heading's anchor as GitHub makes it: lower case, spaces as dashes,
/// only letters, digits, dashes and underscores kept.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn the_configuration_reference_names_every_setting() {
    // serde lists every top-level key of the configuration when it meets
    // one it does not know.
    let err = sandcrab::config::Config::parse("zz_not_a_key = 1\n", Path::new("config.toml"))
        .unwrap_err()
        .to_string();
    let expected = err.split("expected one of").nth(1).expect(&err);
    let keys: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
    assert!(keys.len() > 15, "{err}");
    let reference = std::fs::read_to_string(root().join("docs/reference/config.md")).unwrap();
    for key in keys {
        assert!(
            reference.contains(&format!("`{key}`")) || reference.contains(&format!("`[{key}")),
            "docs/reference/config.md does not describe `{key}`"
        );
    }
}

#[test]
fn the_events_reference_names_every_event_kind() {
    let err = serde_json::from_value::<sandcrab::agent::EventKind>(serde_json::json!("ZZ"))
        .unwrap_err()
        .to_string();
    let kinds: Vec<&str> = err
        .split("expected one of")
        .nth(1)
        .expect(&err)
        .split('`')
        .skip(1)
        .step_by(2)
        .collect();
    assert!(kinds.len() > 20, "{err}");
    let reference = std::fs::read_to_string(root().join("docs/reference/events.md")).unwrap();
    for kind in kinds {
        assert!(
            reference.contains(&format!("`{kind}`")),
            "docs/reference/events.md does not describe `{kind}`"
        );
    }
}
