//! Retry policy: 2 retries, 1 s base delay doubling, jitter ×0.5–1.5, 60 s
//! cap; a provider's Retry-After is honoured, and one longer than the cap is
//! an error rather than a long sleep.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use super::error::LlmError;

/// A retry about to be made: which one, of how many, after how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retrying {
    /// 1 for the first retry.
    pub attempt: u32,
    /// The most retries the policy makes.
    pub of: u32,
    /// The wait before it.
    pub wait: Duration,
}

/// Told of a retryable error a model call met, before it retries.
pub type RetryObserver = Arc<dyn Fn(&LlmError, Retrying) + Send + Sync>;

tokio::task_local! {
    static OBSERVER: RetryObserver;
}

/// Run `work` with `observer` told of every retryable error that model
/// calls made inside it (on this task) met and retried. A background job
/// uses it to keep such errors on its record, internal to the job; a
/// session, to tell the operator. An observer already watching this task
/// is told too (a job's, around a subagent's session).
pub async fn observed<F: Future>(observer: RetryObserver, work: F) -> F::Output {
    let observer = match OBSERVER.try_with(Arc::clone) {
        Ok(outer) => Arc::new(move |err: &LlmError, retrying: Retrying| {
            observer(err, retrying);
            outer(err, retrying);
        }),
        Err(_) => observer,
    };
    OBSERVER.scope(observer, work).await
}

/// Tell the observer of the current task, if any, about `err`.
pub(crate) fn notice(err: &LlmError, retrying: Retrying) {
    let _ = OBSERVER.try_with(|observe| observe(err, retrying));
}

/// When and how long to retry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub max_retries: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// Multiply each computed delay by a random factor in 0.5–1.5.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            jitter: true,
        }
    }
}

/// What to do after a failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryStep {
    RetryAfter(Duration),
    GiveUp,
}

impl RetryPolicy {
    /// No retries (for tests and callers that retry themselves).
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// Decide after attempt number `attempt` (0-based) failed with `err`.
    /// A Retry-After beyond the cap turns `err` into the final error.
    pub fn decide(&self, attempt: u32, err: &mut LlmError) -> RetryStep {
        if !err.retryable() || attempt >= self.max_retries {
            return RetryStep::GiveUp;
        }
        if let Some(wait) = err.retry_after {
            if wait > self.max_delay {
                err.message = format!(
                    "{} (the provider asked to retry after {} s, longer than the {} s limit)",
                    err.message,
                    wait.as_secs(),
                    self.max_delay.as_secs()
                );
                return RetryStep::GiveUp;
            }
            return RetryStep::RetryAfter(wait);
        }
        let exp = self.base_delay.saturating_mul(2u32.saturating_pow(attempt));
        let factor = if self.jitter {
            rand::rng().random_range(0.5..=1.5)
        } else {
            1.0
        };
        RetryStep::RetryAfter(exp.mul_f64(factor).min(self.max_delay))
    }
}

/// Parse a Retry-After header value (seconds, or an HTTP date).
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate_to_unix(value)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(when.saturating_sub(now)))
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` to Unix seconds.
fn httpdate_to_unix(s: &str) -> Option<u64> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    if parts.len() != 6 || parts[5] != "GMT" {
        return None;
    }
    let day: u64 = parts[1].parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == parts[2])? as u64
        + 1;
    let year: u64 = parts[3].parse().ok()?;
    let hms: Vec<u64> = parts[4]
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    if hms.len() != 3 {
        return None;
    }
    // Days from civil date (Howard Hinnant's algorithm).
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn err(kind: ErrorKind, retry_after: Option<Duration>) -> LlmError {
        let mut e = LlmError::new(kind, "p", "m");
        e.retry_after = retry_after;
        e
    }

    #[test]
    fn backoff_doubles_with_jitter_and_stops_after_two_retries() {
        let policy = RetryPolicy::default();
        for _ in 0..50 {
            let RetryStep::RetryAfter(d0) = policy.decide(0, &mut err(ErrorKind::Server, None))
            else {
                panic!()
            };
            assert!(
                d0 >= Duration::from_millis(500) && d0 <= Duration::from_millis(1500),
                "{d0:?}"
            );
            let RetryStep::RetryAfter(d1) = policy.decide(1, &mut err(ErrorKind::Server, None))
            else {
                panic!()
            };
            assert!(
                d1 >= Duration::from_millis(1000) && d1 <= Duration::from_millis(3000),
                "{d1:?}"
            );
        }
        assert_eq!(
            policy.decide(2, &mut err(ErrorKind::Server, None)),
            RetryStep::GiveUp
        );
        assert_eq!(
            policy.decide(0, &mut err(ErrorKind::Authentication, None)),
            RetryStep::GiveUp
        );
    }

    #[test]
    fn delays_are_capped() {
        let policy = RetryPolicy {
            max_retries: 10,
            jitter: false,
            ..RetryPolicy::default()
        };
        assert_eq!(
            policy.decide(9, &mut err(ErrorKind::Network, None)),
            RetryStep::RetryAfter(Duration::from_secs(60))
        );
    }

    #[test]
    fn retry_after_is_honoured_unless_longer_than_the_cap() {
        let policy = RetryPolicy::default();
        let wait = Duration::from_secs(7);
        assert_eq!(
            policy.decide(0, &mut err(ErrorKind::RateLimit, Some(wait))),
            RetryStep::RetryAfter(wait)
        );
        let mut long = err(ErrorKind::RateLimit, Some(Duration::from_secs(120)));
        assert_eq!(policy.decide(0, &mut long), RetryStep::GiveUp);
        assert!(
            long.message.contains("retry after 120 s"),
            "{}",
            long.message
        );
    }

    #[test]
    fn retry_after_header_forms() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(
            httpdate_to_unix("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
    }
}
