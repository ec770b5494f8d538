//! A real PostgreSQL for the tests: one cluster per test run, made with
//! `initdb` in a temporary directory (as the `postgres` user when the tests
//! run as root: PostgreSQL refuses to run as root), listening on a free
//! loopback port with password (SCRAM) authentication, and killed with
//! the test process. Each test takes a database of its own.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The superuser's name and password in the test cluster.
pub const USER: &str = "sandcrab";
pub const PASSWORD: &str = "sandcrab-test-password";
/// The variable the tests pass the password in.
pub const PASSWORD_ENV: &str = "SANDCRAB_TEST_PGPASSWORD";

/// The running cluster.
pub struct Cluster {
    pub port: u16,
    bin: PathBuf,
}

static CLUSTER: OnceLock<Result<Cluster, String>> = OnceLock::new();

/// Whether the cluster makes commits durable (fsync). Off for the tests'
/// speed; benchmarks turn it on before the cluster's first use, so a
/// commit costs what it costs on a real server.
pub static DURABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The cluster, started on first use (a clear failure when PostgreSQL is
/// not installed: `scripts/test` installs it).
pub fn cluster() -> &'static Cluster {
    match CLUSTER.get_or_init(start) {
        Ok(c) => c,
        Err(e) => panic!("cannot start the test PostgreSQL: {e}"),
    }
}

/// A new, empty database; its URL (the password is [`PASSWORD`], in
/// [`PASSWORD_ENV`]).
pub fn database(hint: &str) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let c = cluster();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let name: String = format!("t_{hint}_{}_{n}", std::process::id())
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() {
                ch.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    c.psql("postgres", &format!("CREATE DATABASE {name}"));
    format!("postgres://{USER}@127.0.0.1:{}/{name}", c.port)
}

impl Cluster {
    /// Run `sql` in `db` with psql; panics with its output on failure.
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .args(["-d", db, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

/// The directory of PostgreSQL's programs: `SANDCRAB_PG_BIN`, else the
/// newest `/usr/lib/postgresql/N/bin`, else `pg_config --bindir`.
fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("SANDCRAB_PG_BIN") {
        return Ok(dir.into());
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let out = Command::new("pg_config").arg("--bindir").output();
    match out {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().into()),
        _ => Err(
            "PostgreSQL is not installed (no /usr/lib/postgresql/N/bin, no pg_config): `scripts/test` installs the Debian packages (postgresql), or set SANDCRAB_PG_BIN".into(),
        ),
    }
}

/// The `postgres` user's ids when running as root (None: run as
/// ourselves).
fn run_as() -> Result<Option<(u32, u32)>, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let id = |flag: &str| -> Result<u32, String> {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .map_err(|e| e.to_string())?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| "running as root, and there is no `postgres` user to run PostgreSQL as (install the Debian postgresql package)".to_string())
    };
    Ok(Some((id("-u")?, id("-g")?)))
}

fn as_user(cmd: &mut Command, user: Option<(u32, u32)>) -> &mut Command {
    if let Some((uid, gid)) = user {
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn chown(path: &Path, user: Option<(u32, u32)>) {
    if let Some((uid, gid)) = user {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string; chown has no other preconditions.
        unsafe { libc::chown(c.as_ptr(), uid, gid) };
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Remove the directories of earlier runs whose process is gone.
fn sweep(parent: &Path) {
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(pid) = name
            .strip_prefix("sandcrab-pg-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
            && !Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn start() -> Result<Cluster, String> {
    let bin = bin_dir()?;
    let user = run_as()?;
    let parent = std::env::temp_dir();
    sweep(&parent);
    let dir = parent.join(format!(
        "sandcrab-pg-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    chown(&dir, user);
    let pwfile = dir.join("pw");
    std::fs::write(&pwfile, PASSWORD).map_err(|e| e.to_string())?;
    chown(&pwfile, user);
    let data = dir.join("data");
    let out = as_user(&mut Command::new(bin.join("initdb")), user)
        .arg("-D")
        .arg(&data)
        .args([
            "-U",
            USER,
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        ])
        .arg(format!("--pwfile={}", pwfile.display()))
        .current_dir(&dir)
        .output()
        .map_err(|e| format!("{}: {e}", bin.join("initdb").display()))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let port = free_port();
    // Started from a thread that lives as long as the process: the server
    // is told to stop when the thread that started it ends.
    let (tx, rx) = std::sync::mpsc::channel();
    let (bin2, dir2) = (bin.clone(), dir.clone());
    let fsync = if DURABLE.load(std::sync::atomic::Ordering::SeqCst) {
        "fsync=on"
    } else {
        "fsync=off"
    };
    std::thread::spawn(move || {
        let mut cmd = Command::new(bin2.join("postgres"));
        as_user(&mut cmd, user)
            .arg("-D")
            .arg(dir2.join("data"))
            .args(["-p", &port.to_string(), "-k"])
            .arg(&dir2)
            .args(["-c", "listen_addresses=127.0.0.1", "-c", fsync])
            .args(["-c", "max_connections=400", "-c", "shared_buffers=64MB"])
            .current_dir(&dir2)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir2.join("log")).unwrap());
        // SAFETY: prctl in the child before exec; no allocation.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT);
                Ok(())
            });
        }
        let _ = tx.send(cmd.spawn().map_err(|e| e.to_string()));
        loop {
            std::thread::park();
        }
    });
    let _child = rx.recv().map_err(|e| e.to_string())??;
    let cluster = Cluster { port, bin };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = Command::new(cluster.bin.join("pg_isready"))
            .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q"])
            .status()
            .is_ok_and(|s| s.success());
        if ready {
            return Ok(cluster);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the server did not come up in 60 s: {}",
                std::fs::read_to_string(dir.join("log")).unwrap_or_default()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
