//! A real pseudo-terminal for the tests of `sandcrab chat`: the program
//! runs on its slave side (its controlling terminal, so Ctrl-C there is
//! SIGINT), and the test reads everything it wrote, in the order the
//! terminal received it.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A program on the slave side of a pseudo-terminal (its controlling
/// terminal, so Ctrl-C there is SIGINT), and everything it wrote.
pub(crate) struct Terminal {
    child: Child,
    master: std::fs::File,
    seen: Arc<Mutex<String>>,
    /// While set, nothing is read: the terminal fills up and the program's
    /// writes block, as on a slow terminal.
    paused: Arc<std::sync::atomic::AtomicBool>,
    /// Where the next `expect` starts looking.
    cursor: usize,
}

impl Terminal {
    /// A terminal that reports no size (as some do).
    pub(crate) fn spawn(cmd: Command) -> Terminal {
        Terminal::open(cmd, None)
    }

    /// A terminal of `cols` × `rows` that says it is an xterm.
    pub(crate) fn spawn_sized(mut cmd: Command, cols: u16, rows: u16) -> Terminal {
        cmd.env("TERM", "xterm-256color").env_remove("NO_COLOR");
        Terminal::open(cmd, Some((cols, rows)))
    }

    fn open(mut cmd: Command, size: Option<(u16, u16)>) -> Terminal {
        let (mut master, mut slave) = (0, 0);
        let mut winsize = size.map(|(cols, rows)| libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        });
        let winsize_ptr = winsize
            .as_mut()
            .map_or(std::ptr::null_mut(), |w| w as *mut libc::winsize);
        // SAFETY: openpty fills two descriptors we then own.
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                winsize_ptr,
            )
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both were just opened and are ours.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        cmd.stdin(io(&slave)).stdout(io(&slave)).stderr(io(&slave));
        // SAFETY: setsid and ioctl are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        drop(slave);
        let master = std::fs::File::from(master);
        let mut reader = master.try_clone().unwrap();
        let seen = Arc::new(Mutex::new(String::new()));
        let sink = seen.clone();
        let paused = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let hold = paused.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                while hold.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let Ok(n) = reader.read(&mut buf) else { break };
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Terminal {
            child,
            master,
            seen,
            paused,
            cursor: 0,
        }
    }

    /// Wait until `needle` appears after what was already expected; what
    /// appeared up to and including it.
    pub(crate) fn expect(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            {
                let seen = self.seen.lock().unwrap();
                if let Some(at) = seen[self.cursor..].find(needle) {
                    let end = self.cursor + at + needle.len();
                    let chunk = seen[self.cursor..end].to_string();
                    self.cursor = end;
                    return chunk;
                }
                assert!(
                    Instant::now() < deadline,
                    "no {needle:?} on the terminal; it shows:\n{}",
                    &seen[self.cursor..]
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop reading (`true`) or read again (`false`).
    pub(crate) fn pause(&self, paused: bool) {
        self.paused
            .store(paused, std::sync::atomic::Ordering::SeqCst);
    }

    /// Everything the program wrote so far.
    pub(crate) fn seen(&self) -> String {
        self.seen.lock().unwrap().clone()
    }

    /// The screen as a terminal of `cols` × `rows` would show it now
    /// (cursor movement and erasing applied), one string per row.
    pub(crate) fn screen(&self, cols: u16, rows: u16) -> Vec<String> {
        let mut parser = vt100::Parser::new(rows, cols, 0);
        parser.process(self.seen().as_bytes());
        parser
            .screen()
            .rows(0, cols)
            .map(|row| row.trim_end().to_string())
            .collect()
    }

    /// Tell the program its terminal is now `cols` × `rows` (SIGWINCH).
    pub(crate) fn resize(&self, cols: u16, rows: u16) {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads a winsize we own.
        let rc = unsafe { libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size) };
        assert_eq!(rc, 0, "resize: {}", std::io::Error::last_os_error());
    }

    pub(crate) fn send(&mut self, text: &str) {
        self.master.write_all(text.as_bytes()).unwrap();
    }

    /// Send `signal` to the program and wait for it to end; its status.
    pub(crate) fn signal_and_wait(&mut self, signal: libc::c_int) -> std::process::ExitStatus {
        // SAFETY: kill with the pid of our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "chat did not end on signal {signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the terminal echoes and edits lines (as a shell expects to
    /// find it): (ECHO, ICANON).
    pub(crate) fn echo_and_canonical(&self) -> (bool, bool) {
        let mut termios = std::mem::MaybeUninit::<libc::termios>::uninit();
        // SAFETY: tcgetattr on our master descriptor fills the struct.
        let rc = unsafe { libc::tcgetattr(self.master.as_raw_fd(), termios.as_mut_ptr()) };
        assert_eq!(rc, 0, "tcgetattr: {}", std::io::Error::last_os_error());
        // SAFETY: tcgetattr succeeded.
        let termios = unsafe { termios.assume_init() };
        (
            termios.c_lflag & libc::ECHO != 0,
            termios.c_lflag & libc::ICANON != 0,
        )
    }

    /// `/exit`, and wait for the program to end.
    pub(crate) fn exit(mut self) -> String {
        self.send("/exit\n");
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "chat did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = self.master.as_raw_fd();
    }
}
