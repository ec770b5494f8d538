//! Reading another process's streams with a byte bound, never a line
//! bound: a program that writes one endless line must not grow our memory.
//!
//! - [`LineLimited`] passes a stream through unchanged and fails it once a
//!   line runs past its limit (for protocols read line by line by someone
//!   else, such as MCP over stdio);
//! - [`forward_lines`] reads a stream in chunks and hands on each line cut
//!   to at most a given length (for logs such as a server's stderr).

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

/// An [`AsyncRead`] that fails with `InvalidData` once a line (bytes since
/// the last `\n`) grows past `max_line` bytes.
pub struct LineLimited<R> {
    inner: R,
    max_line: usize,
    current: usize,
    what: String,
}

impl<R> LineLimited<R> {
    /// Bound the lines of `inner` (named `what` in the error) to `max_line`.
    pub fn new(inner: R, max_line: usize, what: &str) -> Self {
        LineLimited {
            inner,
            max_line,
            current: 0,
            what: what.to_string(),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimited<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let fresh = &buf.filled()[before..];
                this.current = match memchr_last_newline(fresh) {
                    Some(at) => fresh.len() - at - 1,
                    None => this.current + fresh.len(),
                };
                if this.current > this.max_line {
                    // An error reads nothing: the bytes of this read go.
                    buf.set_filled(before);
                    return Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "{} sent a line longer than {} bytes",
                            this.what, this.max_line
                        ),
                    )));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

fn memchr_last_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b == b'\n')
}

/// Read `stream` to its end in chunks, calling `line` with each line (at
/// most `max_line` bytes of it, lossily decoded; the rest of a longer line
/// is dropped, and `cut` says so). Memory stays within one chunk plus one
/// line, whatever the stream sends.
pub async fn forward_lines<R: AsyncRead + Unpin>(
    mut stream: R,
    max_line: usize,
    mut line: impl FnMut(&str, bool),
) {
    let mut chunk = vec![0u8; 8192];
    let mut current: Vec<u8> = Vec::new();
    let mut cut = false;
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &chunk[..n] {
            if b == b'\n' {
                line(&String::from_utf8_lossy(&current), cut);
                current.clear();
                cut = false;
            } else if current.len() < max_line {
                current.push(b);
            } else {
                cut = true;
            }
        }
    }
    if !current.is_empty() || cut {
        line(&String::from_utf8_lossy(&current), cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_endless_line_fails_the_stream_at_its_bound() {
        let data = vec![b'x'; 100_000];
        let mut r = LineLimited::new(&data[..], 1000, "server");
        let mut out = Vec::new();
        let err = r.read_to_end(&mut out).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(
            err.to_string()
                .contains("server sent a line longer than 1000 bytes")
        );
        assert!(out.len() <= 1000, "read {} bytes", out.len());
    }

    #[tokio::test]
    async fn short_lines_pass_unchanged() {
        let data: Vec<u8> = (0..10_000).flat_map(|_| b"0123456789\n".to_vec()).collect();
        let mut r = LineLimited::new(&data[..], 11, "server");
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, data);
    }

    #[tokio::test]
    async fn forwarded_lines_are_cut_and_the_rest_dropped() {
        let mut data = vec![b'y'; 50_000];
        data.extend_from_slice(b"\nshort\nlast");
        let mut seen = Vec::new();
        forward_lines(&data[..], 100, |l, cut| seen.push((l.to_string(), cut))).await;
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[0], ("y".repeat(100), true));
        assert_eq!(seen[1], ("short".to_string(), false));
        assert_eq!(seen[2], ("last".to_string(), false));
    }
}
