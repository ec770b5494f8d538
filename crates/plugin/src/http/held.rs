//! Response bodies the host holds for a plugin until the guest reads them:
//! counted against one budget per instance, so a guest that makes requests
//! and never reads the answers cannot pile them up in the host.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;

/// Bytes of response bodies held for one instance.
#[derive(Debug, Default, Clone)]
pub struct Held(Arc<AtomicUsize>);

impl Held {
    /// Take `len` more bytes, unless that passes `limit`.
    pub fn take(&self, len: usize, limit: usize) -> Result<HeldBody, usize> {
        let mut now = self.0.load(Ordering::Relaxed);
        loop {
            if now.saturating_add(len) > limit {
                return Err(now);
            }
            match self
                .0
                .compare_exchange(now, now + len, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    return Ok(HeldBody {
                        inner: Full::new(Bytes::new()),
                        held: self.clone(),
                        len,
                    });
                }
                Err(actual) => now = actual,
            }
        }
    }
}

/// A whole response body; its bytes leave the budget when it is dropped
/// (read to the end, or abandoned).
pub struct HeldBody {
    inner: Full<Bytes>,
    held: Held,
    len: usize,
}

impl HeldBody {
    /// Hold `bytes` as the body.
    pub fn with(mut self, bytes: Vec<u8>) -> Self {
        self.inner = Full::new(Bytes::from(bytes));
        self
    }
}

impl Drop for HeldBody {
    fn drop(&mut self) {
        self.held.0.fetch_sub(self.len, Ordering::AcqRel);
    }
}

impl Body for HeldBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_given_back_when_a_body_goes() {
        let held = Held::default();
        let a = held.take(600, 1000).unwrap();
        assert_eq!(held.take(600, 1000).err(), Some(600));
        drop(a);
        assert!(held.take(600, 1000).is_ok());
    }
}
