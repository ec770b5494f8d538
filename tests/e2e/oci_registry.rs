//! What the plugin-registry tests stand on: a real OCI registry (Debian's
//! `docker-registry`) started on loopback, SSH keys made and plugins
//! signed with the real `ssh-keygen`, and a rogue registry that answers
//! what a broken or hostile one would.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// A `docker-registry` on a free loopback port, storing into a temp dir;
/// stopped when dropped.
pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("docker-registry (run scripts/setup-registry)");
        let registry = Registry {
            child,
            port,
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if get_status(port, "/v2/") == Some(200) {
                return registry;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("docker-registry did not answer on port {port}");
    }

    /// `oci://127.0.0.1:PORT/REPO:TAG`.
    pub fn reference(&self, repo_tag: &str) -> String {
        format!("oci://127.0.0.1:{}/{repo_tag}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn get_status(port: u16, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// An ed25519 key pair made by `ssh-keygen`: (private key path, public
/// key line).
pub fn ssh_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let key = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C"])
        .arg(format!("{name}@example"))
        .arg("-f")
        .arg(&key)
        .output()
        .expect("ssh-keygen");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    (key, public.trim().to_string())
}

/// The fingerprint `ssh-keygen -l` gives the key at `key`.
pub fn fingerprint(key: &Path) -> String {
    let out = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(key.with_extension("pub"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_string()
}

/// Sign the plugin folder `dir` with `key` as an author would: the
/// statement `sandcrab plugins statement` prints, through `ssh-keygen -Y
/// sign`, into `dir/plugin.sig`.
pub fn sign(sandcrab: &mut Command, dir: &Path, key: &Path) {
    let statement = sandcrab
        .args(["plugins", "statement"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        statement.status.success(),
        "{}",
        String::from_utf8_lossy(&statement.stderr)
    );
    let mut keygen = Command::new("ssh-keygen");
    keygen
        .args(["-Y", "sign", "-n", "sandcrab-plugin", "-f"])
        .arg(key);
    let out = crate::support::with_stdin(keygen, &statement.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join("plugin.sig"), out.stdout).unwrap();
}

/// A request the rogue registry saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: Vec<(String, String)>,
}

/// What the rogue registry answers: the raw bytes written before the
/// connection is closed (a short body is a broken download).
pub type Answer = Box<dyn Fn(&Seen, usize) -> Vec<u8> + Send + Sync>;

/// An HTTP server on loopback that answers each request with what
/// `answer` writes (given the request and how many came before it).
pub struct Rogue {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Rogue {
    pub fn start(answer: Answer) -> Rogue {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let Some(request) = read_request(&mut stream) else {
                    continue;
                };
                let n = {
                    let mut log = log.lock().unwrap();
                    log.push(request.clone());
                    log.len() - 1
                };
                let _ = stream.write_all(&answer(&request, n));
                let _ = stream.flush();
            }
        });
        Rogue { port, seen }
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_string());
            if k == "content-length" {
                length = v.parse().unwrap_or(0);
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen { path, headers })
}

/// A whole HTTP answer.
pub fn http(status: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}
