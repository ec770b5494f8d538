//! Plugins published to and installed from a real OCI registry
//! (`docker-registry` on loopback), pushed by a third-party client
//! (`skopeo`) and by `sandcrab plugins publish`, signed with real
//! `ssh-keygen` keys: install, update with the capability diff, remove
//! and verify through the binary; every load checked against
//! `sandcrab.lock` and `[trust.signers]`; every bad answer a registry or
//! an author can give refused with nothing installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sandcrab::llm::ProviderKind;
use serde_json::json;

use crate::llm_transcripts::{Answer, stream, tool};
use crate::mock_llm::MockLlm;
use crate::oci_registry::{self, Registry, Rogue, http, sign, ssh_key};
use crate::support::{Scene, sandcrab_cmd};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn both(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

/// A scene whose operator trusts `acme` to sign `hello-*` plugins, and
/// installs into `outside/installed`.
struct Author {
    scene: Scene,
    key: PathBuf,
    public: String,
}

impl Author {
    fn new(extra_config: &str) -> Author {
        let scene = Scene::new();
        let (key, public) = ssh_key(&scene.outside(), "acme");
        let author = Author { scene, key, public };
        author.configure(extra_config);
        author
    }

    fn configure(&self, extra: &str) {
        self.scene.write_user_config(&format!(
            "plugin_install_dir = \"{}\"\n{extra}\n[trust.signers.acme]\nkey = \"{}\"\nplugins = [\"hello-*\"]\n",
            self.installed().display(),
            self.public
        ));
    }

    fn installed(&self) -> PathBuf {
        self.scene.outside().join("installed")
    }

    /// A fresh copy of the example Rust plugin, as `name/`, its manifest
    /// passed through `edit`, not signed.
    fn plugin(&self, name: &str, edit: impl FnOnce(String) -> String) -> PathBuf {
        crate::support::install_plugin(
            &self.scene.outside().join("src"),
            "examples/hello-tool",
            name,
            edit,
        )
    }

    fn sign(&self, dir: &Path) {
        sign(&mut sandcrab_cmd(&self.scene), dir, &self.key);
    }

    fn sandcrab(&self, args: &[&str]) -> Output {
        sandcrab_cmd(&self.scene)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    fn lock(&self) -> toml::Table {
        let path = self.installed().join("sandcrab.lock");
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).unwrap(),
            Err(_) => toml::Table::new(),
        }
    }

    fn locked(&self, name: &str) -> Option<toml::Table> {
        self.lock()
            .get("plugin")?
            .as_array()?
            .iter()
            .filter_map(|p| p.as_table())
            .find(|p| p["name"].as_str() == Some(name))
            .cloned()
    }

    /// Nothing of `name` is installed, and the table the operator wrote
    /// for it is as it was.
    fn nothing_installed_but_the_old_table(&self, name: &str) {
        assert!(!self.installed().join(name).exists(), "{name} has a folder");
        assert!(self.locked(name).is_none(), "{name} is in the lockfile");
        let config = std::fs::read_to_string(self.scene.user_config()).unwrap();
        assert!(!config.contains("granted_sha256"), "{config}");
    }

    /// Nothing of `name` is installed: no folder, no lock entry, no grant.
    fn nothing_installed(&self, name: &str) {
        assert!(!self.installed().join(name).exists(), "{name} has a folder");
        assert!(self.locked(name).is_none(), "{name} is in the lockfile");
        let config = std::fs::read_to_string(self.scene.user_config()).unwrap();
        assert!(
            !config.contains(&format!("[policy.plugins.{name}]")),
            "{name} was granted: {config}"
        );
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `skopeo copy` of a layout `.tar` that `plugins package` wrote.
fn skopeo_push(tar: &Path, tag: &str, to: &str) {
    let out = Command::new("skopeo")
        .args(["copy", "--dest-tls-verify=false", "--insecure-policy"])
        .arg(format!("oci-archive:{}:{tag}", tar.display()))
        .arg(format!("docker://{}", to.trim_start_matches("oci://")))
        .output()
        .expect("skopeo (run scripts/setup-registry)");
    assert!(out.status.success(), "skopeo: {}", both(&out));
}

/// The whole road: an author packages and signs, skopeo pushes to a real
/// registry, the operator installs, the model calls the tool, and the
/// call's receipt names the signer by the fingerprint ssh-keygen gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_plugin_pushed_by_skopeo_installs_and_its_receipt_names_the_signer() {
    let registry = Registry::start();
    let author = Author::new("");
    let dir = author.plugin("hello-tool", |m| m);
    author.sign(&dir);
    let tar = author.scene.outside().join("hello.tar");
    let out = author.sandcrab(&[
        "plugins",
        "package",
        path(&dir),
        "-o",
        path(&tar),
        "--tag",
        "v1",
    ]);
    assert!(out.status.success(), "{}", both(&out));
    let reference = registry.reference("acme/hello-tool:v1");
    skopeo_push(&tar, "v1", &reference);

    let out = author.sandcrab(&["plugins", "install", &reference, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let fingerprint = oci_registry::fingerprint(&author.key);
    let signer = format!("acme ({fingerprint})");
    assert!(
        text(&out.stdout).contains(&format!("signed by {signer}")),
        "{}",
        both(&out)
    );
    let locked = author.locked("hello-tool").expect("locked");
    assert_eq!(locked["source"].as_str(), Some(reference.as_str()));
    assert_eq!(locked["signer"].as_str(), Some(signer.as_str()));
    // The digest is the one `package` wrote and skopeo kept.
    assert!(
        text(
            &author
                .sandcrab(&["plugins", "package", path(&dir), "-o", path(&tar)])
                .stdout
        )
        .contains(locked["digest"].as_str().unwrap())
    );

    let kind = ProviderKind::OpenAiCompatible;
    let server = MockLlm::strict(kind).await;
    server.push(stream(
        kind,
        &Answer::Tools(vec![tool("c1", "hello", json!({"name": "registry"}))]),
    ));
    server.push(stream(kind, &Answer::Text(vec!["Done."])));
    let out = crate::cli_support::sandcrab(&author.scene, kind, &server, "run")
        .arg("--json")
        .arg("Greet the registry.")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", both(&out));
    let events = crate::cli_support::events(&out.stdout);
    let end = events
        .iter()
        .find(|e| e["kind"] == "TOOL_CALL_END")
        .expect("the tool ran");
    let receipt = &end["data"]["receipt"];
    assert_eq!(receipt["principal"]["name"], "hello-tool", "{end}");
    assert_eq!(receipt["principal"]["signer"], signer.as_str(), "{end}");
    let answered = crate::cli_support::tool_result(kind, &server.requests()[1], "c1", "hello");
    assert!(answered.contains("Hello, registry!"), "{answered}");
}

/// `plugins publish` pushes; a tag moved after install does not move the
/// install (the lockfile wins and says so); `update` shows what the new
/// version asks beyond its grant and needs consent for it; `verify`
/// passes; `remove` takes the folder, the lock entry and the grant.
#[test]
fn publish_update_with_the_capability_diff_verify_and_remove() {
    let registry = Registry::start();
    let author = Author::new("");
    let reference = registry.reference("acme/hello-tool:stable");
    let v1 = author.plugin("hello-tool", |m| m);
    author.sign(&v1);
    let out = author.sandcrab(&["plugins", "publish", path(&v1), &reference]);
    assert!(out.status.success(), "{}", both(&out));
    let out = author.sandcrab(&["plugins", "install", &reference, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let first = author.locked("hello-tool").unwrap()["digest"].clone();

    // A new version under the same tag, asking for an environment variable.
    let v2 = author.plugin("next", |m| {
        m.replace("version = \"0.2.0\"", "version = \"0.3.0\"")
            .replace(
                "[capabilities]",
                "[capabilities]\nenv = [\"HELLO_GREETING\"]",
            )
    });
    author.sign(&v2);
    let out = author.sandcrab(&["plugins", "publish", path(&v2), &reference]);
    assert!(out.status.success(), "{}", both(&out));

    let out = author.sandcrab(&["plugins", "install", &reference, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("sandcrab.lock fixes")
            && text(&out.stdout).contains("now points to"),
        "{}",
        both(&out)
    );
    assert_eq!(
        author.locked("hello-tool").unwrap()["digest"],
        first,
        "the lockfile won"
    );

    let out = author.sandcrab(&["plugins", "update", "hello-tool"]);
    assert!(
        !out.status.success(),
        "a widening needs consent: {}",
        both(&out)
    );
    assert!(
        text(&out.stdout).contains("+ env: HELLO_GREETING"),
        "{}",
        both(&out)
    );
    assert!(both(&out).contains("--yes"), "{}", both(&out));
    assert_eq!(
        author.locked("hello-tool").unwrap()["digest"],
        first,
        "nothing changed"
    );

    let out = author.sandcrab(&["plugins", "update", "hello-tool", "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("0.2.0 → 0.3.0"),
        "{}",
        both(&out)
    );
    let locked = author.locked("hello-tool").unwrap();
    assert_ne!(locked["digest"], first);
    assert_eq!(locked["version"].as_str(), Some("0.3.0"));
    let config = std::fs::read_to_string(author.scene.user_config()).unwrap();
    assert!(config.contains("env = [\"HELLO_GREETING\"]"), "{config}");
    let out = author.sandcrab(&["plugins", "update", "hello-tool"]);
    assert!(text(&out.stdout).contains("up to date"), "{}", both(&out));

    let out = author.sandcrab(&["plugins", "verify"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("ok: hello-tool 0.3.0"),
        "{}",
        both(&out)
    );

    let out = author.sandcrab(&["plugins", "remove", "hello-tool"]);
    assert!(out.status.success(), "{}", both(&out));
    author.nothing_installed("hello-tool");
    let list = author.sandcrab(&["plugins", "list", "--json"]);
    assert!(
        !text(&list.stdout).contains("hello-tool"),
        "{}",
        both(&list)
    );
}

/// In locked mode with signers named, a third-party plugin loads only
/// with a trusted signature over exactly its bytes; an installed one only
/// as its lockfile fixes it, so a component swapped after install is
/// refused at load.
#[test]
fn locked_mode_refuses_unsigned_wrongly_signed_and_swapped_plugins_at_load() {
    let author = Author::new("[policy]\nmode = \"locked\"\n");
    let signed = author.plugin("hello-tool", |m| m);
    author.sign(&signed);
    let tar = author.scene.outside().join("hello.tar");
    assert!(
        author
            .sandcrab(&["plugins", "package", path(&signed), "-o", path(&tar)])
            .status
            .success()
    );
    let out = author.sandcrab(&["plugins", "install", path(&tar), "--yes"]);
    assert!(out.status.success(), "{}", both(&out));

    // Control: the installed, signed plugin runs in locked mode.
    let call = |author: &Author, extra: &[&str]| {
        let mut args = vec!["tool", "call", "hello", "--args", r#"{"name":"locked"}"#];
        args.extend_from_slice(extra);
        author.sandcrab(&args)
    };
    let out = call(&author, &[]);
    assert!(
        text(&out.stdout).contains("Hello, locked!"),
        "{}",
        both(&out)
    );

    // Unsigned, beside it: refused at load.
    let unsigned = author.plugin("hello-unsigned", |m| {
        m.replace("name = \"hello-tool\"", "name = \"hello-unsigned\"")
    });
    let list = author.sandcrab(&["plugins", "list", "--plugins", path(&unsigned)]);
    assert!(
        both(&list).contains("carries no signature"),
        "{}",
        both(&list)
    );

    // Signed by a stranger: refused.
    let (stranger, _) = ssh_key(&author.scene.outside(), "stranger");
    let foreign = author.plugin("hello-foreign", |m| {
        m.replace("name = \"hello-tool\"", "name = \"hello-foreign\"")
    });
    sign(&mut sandcrab_cmd(&author.scene), &foreign, &stranger);
    let list = author.sandcrab(&["plugins", "list", "--plugins", path(&foreign)]);
    assert!(
        both(&list).contains("no [trust.signers] entry names"),
        "{}",
        both(&list)
    );

    // acme's valid signature, over another artifact: refused.
    let copied = author.plugin("hello-copied", |m| m.replace("0.2.0", "0.2.1"));
    std::fs::copy(signed.join("plugin.sig"), copied.join("plugin.sig")).unwrap();
    let list = author.sandcrab(&["plugins", "list", "--plugins", path(&copied)]);
    assert!(
        both(&list).contains("does not verify over this plugin"),
        "{}",
        both(&list)
    );

    // The installed component swapped after install: refused at load.
    let installed = author.installed().join("hello-tool");
    let other = crate::support::artifact("test-fixtures/versioned-v1");
    std::fs::copy(other.wasm_path, installed.join("hello_tool.wasm")).unwrap();
    let out = call(&author, &[]);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        both(&out).contains("changed after it was installed"),
        "{}",
        both(&out)
    );
    let out = author.sandcrab(&["plugins", "verify"]);
    assert!(
        !out.status.success() && text(&out.stdout).contains("FAILED: hello-tool"),
        "{}",
        both(&out)
    );
    // Installing again restores what the lockfile fixes.
    let out = author.sandcrab(&["plugins", "install", path(&tar), "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let out = call(&author, &[]);
    assert!(
        text(&out.stdout).contains("Hello, locked!"),
        "{}",
        both(&out)
    );
}

/// At install, a signature nobody the operator trusts made, and a valid
/// signature over other files, are refused, and nothing is installed.
#[test]
fn install_refuses_an_unknown_signer_and_a_signature_over_another_artifact() {
    let author = Author::new("");
    let (stranger, _) = ssh_key(&author.scene.outside(), "stranger");
    let foreign = author.plugin("hello-tool", |m| m);
    sign(&mut sandcrab_cmd(&author.scene), &foreign, &stranger);
    let out = author.sandcrab(&["plugins", "install", path(&foreign), "--yes"]);
    assert!(!out.status.success());
    assert!(
        both(&out).contains("no [trust.signers] entry names"),
        "{}",
        both(&out)
    );
    author.nothing_installed("hello-tool");

    let signed = author.plugin("signed", |m| m);
    author.sign(&signed);
    let altered = author.plugin("altered", |m| {
        m.replace("programs = [\"sort\"]", "programs = [\"sort\", \"sh\"]")
    });
    std::fs::copy(signed.join("plugin.sig"), altered.join("plugin.sig")).unwrap();
    let out = author.sandcrab(&["plugins", "install", path(&altered), "--yes"]);
    assert!(!out.status.success());
    assert!(
        both(&out).contains("does not verify over this plugin"),
        "{}",
        both(&out)
    );
    author.nothing_installed("hello-tool");

    // Control: the signed one installs, and an unsigned one only when
    // the operator says so.
    let out = author.sandcrab(&["plugins", "install", path(&signed), "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    std::fs::remove_file(signed.join("plugin.sig")).unwrap();
    let renamed = author.plugin("hello-bare", |m| {
        m.replace("name = \"hello-tool\"", "name = \"hello-bare\"")
    });
    let out = author.sandcrab(&["plugins", "install", path(&renamed), "--yes"]);
    assert!(
        !out.status.success() && both(&out).contains("--allow-unsigned"),
        "{}",
        both(&out)
    );
    // (Its tools are hello-tool's: that one goes first.)
    assert!(
        author
            .sandcrab(&["plugins", "remove", "hello-tool"])
            .status
            .success()
    );
    let out = author.sandcrab(&[
        "plugins",
        "install",
        path(&renamed),
        "--yes",
        "--allow-unsigned",
    ]);
    assert!(out.status.success(), "{}", both(&out));
}

/// An artifact as a registry serves it: the manifest's bytes, its
/// digest, and every blob by digest.
type Served = (Vec<u8>, String, Vec<(String, Vec<u8>)>);

/// The OCI pieces of the example plugin, signed: the manifest's bytes and
/// every blob by digest.
fn served(author: &Author) -> Served {
    let dir = author.plugin("hello-tool", |m| m);
    author.sign(&dir);
    served_from(&dir)
}

/// The OCI pieces of the plugin folder `dir`.
fn served_from(dir: &Path) -> Served {
    let (package, manifest) = sandcrab::supply::Package::from_dir(dir).unwrap();
    let (image, blobs) = package.to_oci(&manifest);
    let digest = sandcrab::supply::artifact::digest_of(&image);
    let blobs = blobs.into_iter().map(|(d, b)| (d.digest, b)).collect();
    (image, digest, blobs)
}

fn manifest_answer(image: &[u8]) -> Vec<u8> {
    http(
        "200 OK",
        &[(
            "Content-Type",
            "application/vnd.oci.image.manifest.v1+json".into(),
        )],
        image,
    )
}

fn blob_of<'a>(blobs: &'a [(String, Vec<u8>)], path: &str) -> Option<&'a [u8]> {
    blobs
        .iter()
        .find(|(d, _)| path.ends_with(&format!("/blobs/{d}")))
        .map(|(_, b)| b.as_slice())
}

/// Every bad answer a registry can give ends in a clear error, with
/// nothing installed: a different digest than asked, a manifest or a
/// layer past its bound, a redirect to another host, a download that
/// breaks half-way (kept to resume, never loaded). The control: a
/// download that breaks once resumes with a Range request and installs.
#[test]
fn bad_registry_answers_install_nothing() {
    let author = Author::new("");
    let (image, digest, blobs) = served(&author);
    let install = |port: u16, reference: &str| {
        author.sandcrab(&[
            "plugins",
            "install",
            &format!("oci://127.0.0.1:{port}/{reference}"),
            "--yes",
        ])
    };

    // A different manifest than the digest asked for.
    let other = {
        let mut m: serde_json::Value = serde_json::from_slice(&image).unwrap();
        m["annotations"]["swapped"] = json!("yes");
        serde_json::to_vec(&m).unwrap()
    };
    let rogue = Rogue::start(Box::new(move |_, _| manifest_answer(&other)));
    let out = install(rogue.port, &format!("acme/hello-tool@{digest}"));
    assert!(
        both(&out).contains(&format!("not the {digest} asked for")),
        "{}",
        both(&out)
    );
    author.nothing_installed("hello-tool");

    // A manifest bigger than its bound.
    let rogue = Rogue::start(Box::new(|_, _| manifest_answer(&vec![b' '; 70 << 10])));
    let out = install(rogue.port, "acme/hello-tool:v1");
    assert!(
        both(&out).contains("bigger than its bound of 65536 bytes"),
        "{}",
        both(&out)
    );

    // A layer whose descriptor is bigger than its bound.
    let big = {
        let mut m: serde_json::Value = serde_json::from_slice(&image).unwrap();
        m["layers"][1]["size"] = json!(70 << 10);
        serde_json::to_vec(&m).unwrap()
    };
    let rogue = Rogue::start(Box::new(move |_, _| manifest_answer(&big)));
    let out = install(rogue.port, "acme/hello-tool:v1");
    assert!(
        both(&out).contains("plugin.toml layer is 71680 bytes; the bound is 65536"),
        "{}",
        both(&out)
    );
    author.nothing_installed("hello-tool");

    // A redirect to another host.
    let rogue = Rogue::start(Box::new(|seen, _| {
        http(
            "307 Temporary Redirect",
            &[("Location", format!("http://localhost:9{}", seen.path))],
            b"",
        )
    }));
    let out = install(rogue.port, "acme/hello-tool:v1");
    assert!(both(&out).contains("another host"), "{}", both(&out));
    author.nothing_installed("hello-tool");

    // The component's download always breaks half-way.
    let component = blobs[1].clone();
    let (image_b, blobs_b) = (image.clone(), blobs.clone());
    let rogue = Rogue::start(Box::new(move |seen, _| {
        if seen.path.contains("/manifests/") {
            return manifest_answer(&image_b);
        }
        let Some(bytes) = blob_of(&blobs_b, &seen.path) else {
            return http("404 Not Found", &[], b"");
        };
        if bytes == component.1.as_slice() {
            // Promise all of it, send half, close.
            let mut answer = http("200 OK", &[], bytes);
            answer.truncate(answer.len() - bytes.len() / 2);
            return answer;
        }
        http("200 OK", &[], bytes)
    }));
    let out = install(rogue.port, "acme/hello-tool:v1");
    assert!(!out.status.success(), "{}", both(&out));
    author.nothing_installed("hello-tool");
    let staging = author.installed().join(".staging");
    let partial = std::fs::read_dir(&staging)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().ends_with(".partial"));
    assert!(partial, "the half-written download is kept to resume");
    let list = author.sandcrab(&["plugins", "list"]);
    assert!(
        list.status.success() && !both(&list).contains(".staging"),
        "{}",
        both(&list)
    );

    // Control: broken once, then the registry honours Range: it resumes.
    let component = blobs[1].clone();
    let (image_c, blobs_c) = (image.clone(), blobs.clone());
    let rogue = Rogue::start(Box::new(move |seen, _| {
        if seen.path.contains("/manifests/") {
            return manifest_answer(&image_c);
        }
        let Some(bytes) = blob_of(&blobs_c, &seen.path) else {
            return http("404 Not Found", &[], b"");
        };
        let range = seen
            .headers
            .iter()
            .find(|(k, _)| k == "range")
            .and_then(|(_, v)| {
                v.strip_prefix("bytes=")?
                    .strip_suffix('-')?
                    .parse::<usize>()
                    .ok()
            });
        match range {
            Some(from) => http(
                "206 Partial Content",
                &[(
                    "Content-Range",
                    format!("bytes {from}-{}/{}", bytes.len() - 1, bytes.len()),
                )],
                &bytes[from..],
            ),
            None if bytes == component.1.as_slice() => {
                let mut answer = http("200 OK", &[], bytes);
                answer.truncate(answer.len() - bytes.len() / 2);
                answer
            }
            None => http("200 OK", &[], bytes),
        }
    }));
    let out = install(rogue.port, "acme/hello-tool:v1");
    assert!(out.status.success(), "{}", both(&out));
    let resumed = rogue.seen.lock().unwrap().iter().any(|s| {
        s.headers
            .iter()
            .any(|(k, v)| k == "range" && v.starts_with("bytes="))
    });
    assert!(resumed, "the download resumed with a Range request");
    assert!(author.locked("hello-tool").is_some());
}

/// Two more roads in, each with its control: an HTTPS-style download
/// installs only with the digest the operator stated, and a registry that
/// hands out anonymous bearer tokens and serves its blobs from a CDN (as
/// ghcr.io does) is asked for a token, and followed to the CDN the
/// operator named, without the token.
#[test]
fn a_download_needs_its_digest_and_a_token_registry_with_a_cdn_installs() {
    let author = Author::new("plugin_redirect_hosts = [\"localhost\"]");
    let dir = author.plugin("hello-tool", |m| m);
    author.sign(&dir);
    let tar = author.scene.outside().join("hello.tar");
    assert!(
        author
            .sandcrab(&["plugins", "package", path(&dir), "-o", path(&tar)])
            .status
            .success()
    );
    let bytes = std::fs::read(&tar).unwrap();
    let sha = sandcrab::plugin::integrity::sha256_hex(&bytes);
    let served = bytes.clone();
    let web = Rogue::start(Box::new(move |_, _| http("200 OK", &[], &served)));
    let url = |sha: &str| format!("http://127.0.0.1:{}/hello.tar#sha256={sha}", web.port);

    let wrong = "0".repeat(64);
    let out = author.sandcrab(&["plugins", "install", &url(&wrong), "--yes"]);
    assert!(
        both(&out).contains(&format!("not the sha256:{wrong} asked for")),
        "{}",
        both(&out)
    );
    author.nothing_installed("hello-tool");
    let out = author.sandcrab(&["plugins", "install", &url(&sha), "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(
        author.locked("hello-tool").unwrap()["digest"].as_str(),
        Some(format!("sha256:{sha}").as_str())
    );
    assert!(
        author
            .sandcrab(&["plugins", "remove", "hello-tool"])
            .status
            .success()
    );

    // A registry behind anonymous tokens.
    let (image, _, blobs) = served_from(&dir);
    let cdn = Rogue::start(Box::new(move |seen, _| match blob_of(&blobs, &seen.path) {
        Some(bytes) => http("200 OK", &[], bytes),
        None => http("404 Not Found", &[], b""),
    }));
    let cdn_port = cdn.port;
    let port = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(0));
    let realm_port = port.clone();
    let registry = Rogue::start(Box::new(move |seen, _| {
        if seen.path.starts_with("/token") {
            return http("200 OK", &[], br#"{"token":"t0k3n"}"#);
        }
        let authorized = seen
            .headers
            .iter()
            .any(|(k, v)| k == "authorization" && v == "Bearer t0k3n");
        if !authorized {
            let realm = format!(
                "http://127.0.0.1:{}/token",
                realm_port.load(std::sync::atomic::Ordering::SeqCst)
            );
            return http(
                "401 Unauthorized",
                &[(
                    "WWW-Authenticate",
                    format!(
                        r#"Bearer realm="{realm}",service="rogue",scope="repository:acme/hello-tool:pull""#
                    ),
                )],
                b"",
            );
        }
        if seen.path.contains("/manifests/") {
            return manifest_answer(&image);
        }
        // Blobs come from the CDN.
        http(
            "307 Temporary Redirect",
            &[(
                "Location",
                format!("http://localhost:{}{}", cdn_port, seen.path),
            )],
            b"",
        )
    }));
    port.store(registry.port, std::sync::atomic::Ordering::SeqCst);
    let reference = format!("oci://127.0.0.1:{}/acme/hello-tool:v1", registry.port);
    let out = author.sandcrab(&["plugins", "install", &reference, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let seen = registry.seen.lock().unwrap();
    let token = seen
        .iter()
        .find(|s| s.path.starts_with("/token"))
        .expect("a token was asked for");
    assert!(
        token
            .path
            .contains("scope=repository%3Aacme%2Fhello-tool%3Apull"),
        "{}",
        token.path
    );
}

/// What a name from outside must not take over: a grant left in the
/// operator's file under the plugin's name is not this plugin's (a fresh
/// install asks from nothing and replaces it), a folder put into the
/// install directory by hand is not replaced, and a trusted project
/// cannot move the install directory.
#[test]
fn a_fresh_install_takes_over_no_grant_folder_or_setting_it_did_not_make() {
    let author = Author::new(
        "[policy.plugins.hello-tool]\nworkspace = \"read-write\"\nprograms = [\"sort\", \"sh\"]\noverride_tools = [\"shell\"]\n",
    );
    let dir = author.plugin("hello-tool", |m| m);
    author.sign(&dir);
    let out = author.sandcrab(&["plugins", "install", path(&dir)]);
    assert!(
        !out.status.success(),
        "consent was asked from nothing: {}",
        both(&out)
    );
    assert!(
        text(&out.stdout).contains("+ programs: sort"),
        "{}",
        both(&out)
    );
    author.nothing_installed_but_the_old_table("hello-tool");
    let out = author.sandcrab(&["plugins", "install", path(&dir), "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let config = std::fs::read_to_string(author.scene.user_config()).unwrap();
    assert!(
        !config.contains("override_tools")
            && !config.contains("\"sh\"")
            && !config.contains("read-write"),
        "the old table was replaced: {config}"
    );
    // The source is recorded where it really is.
    let source = author.locked("hello-tool").unwrap()["source"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(Path::new(&source).is_absolute(), "{source}");

    // A folder put there by hand is not replaced.
    let hand = author.installed().join("hello-hand");
    std::fs::create_dir_all(&hand).unwrap();
    let other = author.plugin("hello-hand", |m| {
        m.replace("name = \"hello-tool\"", "name = \"hello-hand\"")
    });
    author.sign(&other);
    let out = author.sandcrab(&["plugins", "install", path(&other), "--yes"]);
    assert!(both(&out).contains("does not name it"), "{}", both(&out));

    // A trusted project's plugin_install_dir is not the operator's.
    let vendor = author.scene.workspace().join("vendor");
    std::fs::write(
        author.scene.workspace().join("sandcrab.toml"),
        format!("plugin_install_dir = \"{}\"\n", vendor.display()),
    )
    .unwrap();
    let trust = author.sandcrab(&["trust", path(&author.scene.workspace())]);
    assert!(trust.status.success(), "{}", both(&trust));
    let list = sandcrab_cmd(&author.scene)
        .args(["plugins", "list", "--json", "-w"])
        .arg(author.scene.workspace())
        .output()
        .unwrap();
    assert!(
        text(&list.stdout).contains("\"hello-tool\""),
        "still found where the operator put it: {}",
        both(&list)
    );
}

/// `update` refuses what a moved tag or a taken-over account looks like:
/// an older version (a rollback), and a version the installed one's
/// signer did not sign; each only when the operator says so.
#[test]
fn update_refuses_a_rollback_and_a_change_of_signer_unless_told() {
    let registry = Registry::start();
    let author = Author::new("");
    let reference = registry.reference("acme/hello-tool:stable");
    let publish = |dir: &Path| {
        let out = author.sandcrab(&["plugins", "publish", path(dir), &reference]);
        assert!(out.status.success(), "{}", both(&out));
    };
    let v2 = author.plugin("hello-tool", |m| m);
    author.sign(&v2);
    publish(&v2);
    assert!(
        author
            .sandcrab(&["plugins", "install", &reference, "--yes"])
            .status
            .success()
    );

    let update = |flags: &[&str]| {
        let mut args = vec!["plugins", "update", "hello-tool", "--yes"];
        args.extend_from_slice(flags);
        author.sandcrab(&args)
    };
    let installed = || {
        author.locked("hello-tool").unwrap()["version"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let refused = |out: &Output, says: &str| {
        assert!(
            !out.status.success() && both(out).contains(says),
            "{}",
            both(out)
        );
    };

    let old = author.plugin("old", |m| m.replace("0.2.0", "0.1.0"));
    author.sign(&old);
    publish(&old);
    refused(&update(&[]), "rollback");
    assert_eq!(installed(), "0.2.0");
    let out = update(&["--allow-downgrade"]);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(installed(), "0.1.0");

    let (stranger, _) = ssh_key(&author.scene.outside(), "stranger");
    let taken = author.plugin("taken", |m| m.replace("0.2.0", "0.9.0"));
    sign(&mut sandcrab_cmd(&author.scene), &taken, &stranger);
    publish(&taken);
    refused(&update(&["--allow-unsigned"]), "--allow-signer-change");
    assert_eq!(installed(), "0.1.0");
    let out = update(&["--allow-unsigned", "--allow-signer-change"]);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(installed(), "0.9.0");
    assert!(author.locked("hello-tool").unwrap().get("signer").is_none());
}

/// A token realm is asked with its own parameters only: one that carries
/// a query (a request of its own to some local service) is refused.
#[test]
fn a_token_realm_with_a_query_is_not_asked() {
    let author = Author::new("");
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = asked.clone();
    let registry = Rogue::start(Box::new(move |seen, _| {
        if seen.path.starts_with("/admin") {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        http(
            "401 Unauthorized",
            &[(
                "WWW-Authenticate",
                r#"Bearer realm="http://127.0.0.1:1/admin?action=delete",service="x""#.into(),
            )],
            b"",
        )
    }));
    let out = author.sandcrab(&[
        "plugins",
        "install",
        &format!("oci://127.0.0.1:{}/acme/hello-tool:v1", registry.port),
        "--yes",
    ]);
    assert!(
        both(&out).contains("carries a query of its own"),
        "{}",
        both(&out)
    );
    assert!(!asked.load(std::sync::atomic::Ordering::SeqCst));
}

/// The install folder holds against what someone who can write it might
/// plant: a `.staging` that is a link (the sweep deletes nothing through
/// it), a partial download that is a link (the download writes nothing
/// through it), a path that reaches an installed folder another way (the
/// lockfile still checks it), and a reinstall of the same folder with an
/// older version (an update's checks apply).
#[test]
fn the_install_folder_holds_against_planted_links_other_paths_and_rollbacks() {
    let registry = Registry::start();
    let author = Author::new("");
    let dir = author.plugin("hello-tool", |m| m);
    author.sign(&dir);
    let reference = registry.reference("acme/hello-tool:v1");
    assert!(
        author
            .sandcrab(&["plugins", "publish", path(&dir), &reference])
            .status
            .success()
    );

    // A partial download planted as a link to a file of the user's.
    let victim = author.scene.outside().join("victim.txt");
    std::fs::write(&victim, "the user's").unwrap();
    let staging = author.installed().join(".staging");
    std::fs::create_dir_all(&staging).unwrap();
    let (_, _, blobs) = served_from(&dir);
    for (digest, _) in &blobs {
        let hex = digest.trim_start_matches("sha256:");
        std::os::unix::fs::symlink(&victim, staging.join(format!("{hex}.partial"))).unwrap();
    }
    let out = author.sandcrab(&["plugins", "install", &reference, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "the user's");

    // A `.staging` that is a link to another folder with old files.
    let days_old = |file: &Path| {
        std::fs::write(file, "old").unwrap();
        let touched = Command::new("touch")
            .args(["-d", "3 days ago"])
            .arg(file)
            .status()
            .unwrap();
        assert!(touched.success());
    };
    // Control: in the real staging folder, the sweep takes a stale file.
    days_old(&staging.join("stale.partial"));
    let out = author.sandcrab(&["plugins", "verify"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(!staging.join("stale.partial").exists(), "the sweep ran");
    let elsewhere = author.scene.outside().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    days_old(&elsewhere.join("old.txt"));
    std::fs::remove_dir_all(&staging).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &staging).unwrap();
    let out = author.sandcrab(&["plugins", "verify"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        elsewhere.join("old.txt").exists(),
        "nothing deleted through the link"
    );
    std::fs::remove_file(&staging).unwrap();

    // The installed folder reached by another path is still checked.
    let installed = author.installed().join("hello-tool");
    std::fs::create_dir_all(installed.join("sub")).unwrap();
    let other = crate::support::artifact("test-fixtures/versioned-v1");
    std::fs::copy(other.wasm_path, installed.join("hello_tool.wasm")).unwrap();
    let around = installed.join("sub").join("..");
    let list = author.sandcrab(&["plugins", "list", "--plugins", path(&around)]);
    assert!(
        both(&list).contains("changed after it was installed"),
        "{}",
        both(&list)
    );
    // And the install folder itself is no plugin.
    for file in ["plugin.toml", "hello_tool.wasm"] {
        std::fs::copy(installed.join(file), author.installed().join(file)).unwrap();
    }
    let list = author.sandcrab(&["plugins", "list"]);
    assert!(
        both(&list).contains("is the install folder itself"),
        "{}",
        both(&list)
    );
    for file in ["plugin.toml", "hello_tool.wasm"] {
        std::fs::remove_file(author.installed().join(file)).unwrap();
    }

    // The same local folder installed again, older: an update's checks.
    // (It offers hello-tool's tools: that one goes first.)
    assert!(
        author
            .sandcrab(&["plugins", "remove", "hello-tool"])
            .status
            .success()
    );
    let local = author.plugin("local", |m| {
        m.replace("name = \"hello-tool\"", "name = \"hello-local\"")
    });
    author.sign(&local);
    assert!(
        author
            .sandcrab(&["plugins", "install", path(&local), "--yes"])
            .status
            .success()
    );
    let older = std::fs::read_to_string(local.join("plugin.toml"))
        .unwrap()
        .replace("0.2.0", "0.1.0");
    std::fs::write(local.join("plugin.toml"), older).unwrap();
    author.sign(&local);
    let out = author.sandcrab(&["plugins", "install", path(&local), "--yes"]);
    assert!(
        !out.status.success() && both(&out).contains("rollback"),
        "{}",
        both(&out)
    );
    assert_eq!(
        author.locked("hello-local").unwrap()["version"].as_str(),
        Some("0.2.0")
    );
}

/// Signatures are required in a locked sandbox however it was set: by
/// `[policy] sandbox` or `--sandbox`, not only `[policy] mode`.
#[test]
fn a_locked_sandbox_set_any_way_requires_signatures() {
    let author = Author::new("");
    let unsigned = author.plugin("hello-tool", |m| m);
    let list = |extra: &[&str]| {
        let mut args = vec!["plugins", "list", "--plugins", path(&unsigned)];
        args.extend_from_slice(extra);
        author.sandcrab(&args)
    };
    // Control: unlocked, an unsigned plugin loads.
    let out = list(&[]);
    assert!(
        text(&out.stdout).contains("hello-tool") && !both(&out).contains("carries no signature"),
        "{}",
        both(&out)
    );
    assert!(both(&list(&["--sandbox", "locked"])).contains("carries no signature"));
    author.configure("[policy]\nsandbox = \"locked\"\n");
    assert!(both(&list(&[])).contains("carries no signature"));
}

/// A plugin whose author picked another installed plugin's tool names
/// would answer the model's calls to them (whichever loads first wins):
/// it is refused at install, naming the tools and their plugin, and
/// nothing of it is installed.
#[test]
fn a_plugin_never_takes_another_installed_plugins_tools() {
    let author = Author::new("");
    let first = author.plugin("hello-tool", |m| m);
    author.sign(&first);
    let out = author.sandcrab(&["plugins", "install", path(&first), "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("tools: hello, line_count, sort_lines"),
        "{}",
        both(&out)
    );
    // Sorted before it, so it would load first.
    let twin = author.plugin("hello-a", |m| {
        m.replace("name = \"hello-tool\"", "name = \"hello-a\"")
    });
    author.sign(&twin);
    let out = author.sandcrab(&["plugins", "install", path(&twin), "--yes"]);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        both(&out).contains("hello (from hello-tool)"),
        "{}",
        both(&out)
    );
    author.nothing_installed("hello-a");
}
