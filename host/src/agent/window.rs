//! What a session knows of its model's context window: how many tokens
//! it takes, where that came from, and how far the host's own estimate of
//! a request's size is from the provider's count. Refusals teach both:
//! "8021 tokens > 8000 maximum" gives the window and the real size of a
//! request whose estimate the host knows. What a refusal taught is kept in
//! the data folder per provider address and model, so the next session
//! starts from it.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::llm::refusal::ContextRefusal;

/// How long a learned window is believed (a server may be restarted with
/// more context).
const KEPT_FOR: Duration = Duration::from_secs(24 * 3600);

/// Margin added to a learned ratio of provider tokens to estimated ones.
const RATIO_MARGIN: f64 = 1.05;

/// The least ratio believed: a token per five bytes.
const LOWEST_RATIO: f64 = 0.6;

/// The most a ratio is believed: a token per byte (a refusal whose "sent"
/// counts the answer's limit too must not make every input too big).
const HIGHEST_RATIO: f64 = 3.0;

/// A refusal that gives no numbers: assume the estimate was this much low.
const BLIND_RATIO_STEP: f64 = 1.25;

/// Never reserve less than this for the answer, nor assume a smaller
/// window than this.
const MIN_ANSWER: u64 = 256;

/// Where the window's size came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// The provider profile's default.
    Profile,
    /// The known-model table.
    KnownModel,
    /// The server said (llama.cpp `/props`, Ollama, `/v1/models`).
    Server,
    /// `[providers.ID] context_window` in the operator's settings.
    Configured,
    /// A refusal said, in this session or one before.
    Learned,
}

/// The window and how to size requests to it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowFacts {
    pub tokens: u64,
    pub source: WindowSource,
    /// Provider tokens per estimated token: 1.0 at first, then what the
    /// provider's counts and refusals showed.
    pub ratio: f64,
}

/// What one refusal changed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Learned {
    pub before: WindowFacts,
    pub after: WindowFacts,
}

/// A session's window, shared with its subagents.
#[derive(Debug)]
pub struct Window {
    facts: Mutex<WindowFacts>,
    /// Where a learned window is kept (none: not kept).
    kept_at: Option<PathBuf>,
}

#[derive(Serialize, Deserialize)]
struct Kept {
    /// Seconds since the epoch when it was learned.
    learned_at: u64,
    tokens: u64,
    ratio: f64,
}

impl Window {
    /// A window of `tokens` from `source`, kept at `kept_at` when a refusal
    /// teaches another.
    pub fn new(tokens: u64, source: WindowSource, kept_at: Option<PathBuf>) -> Self {
        Window {
            facts: Mutex::new(WindowFacts {
                tokens: tokens.max(MIN_ANSWER * 2),
                source,
                ratio: 1.0,
            }),
            kept_at,
        }
    }

    /// A window as a recording says a session started with.
    pub fn restored(tokens: u64, ratio: f64) -> Self {
        let window = Window::new(tokens, WindowSource::Profile, None);
        window.facts.lock().expect("window lock").ratio = ratio.max(LOWEST_RATIO);
        window
    }

    /// `new`, then what a refusal taught before (within a day), when it
    /// is smaller than `tokens`.
    pub fn remembered(tokens: u64, source: WindowSource, kept_at: Option<PathBuf>) -> Self {
        let window = Window::new(tokens, source, kept_at);
        if let Some(kept) = window.read_kept() {
            let mut facts = window.facts.lock().expect("window lock");
            if kept.tokens < facts.tokens {
                facts.tokens = kept.tokens.max(MIN_ANSWER * 2);
                facts.source = WindowSource::Learned;
            }
            facts.ratio = facts.ratio.max(kept.ratio);
        }
        window
    }

    pub fn facts(&self) -> WindowFacts {
        *self.facts.lock().expect("window lock")
    }

    /// Tokens kept free for the answer: what the answer may use
    /// (`max_tokens`, else 4,096), at most an eighth of the window (a
    /// small window's answers are asked no longer than what is left).
    pub fn answer_reserve(&self, max_tokens: Option<u32>) -> u64 {
        let window = self.facts().tokens;
        u64::from(max_tokens.unwrap_or(4096))
            .min(window / 8)
            .max(MIN_ANSWER)
    }

    /// The most a request may be, in estimated tokens, leaving
    /// `reserve` for the answer.
    pub fn request_budget(&self, reserve: u64) -> u64 {
        let facts = self.facts();
        let provider_tokens = facts.tokens.saturating_sub(reserve).max(MIN_ANSWER);
        (provider_tokens as f64 / facts.ratio) as u64
    }

    /// Learn from a refusal of a request estimated at `estimated` tokens.
    pub fn learn(&self, refusal: ContextRefusal, estimated: u64) -> Learned {
        let mut facts = self.facts.lock().expect("window lock");
        let before = *facts;
        if let Some(limit) = refusal.limit {
            facts.tokens = limit.max(MIN_ANSWER * 2);
            facts.source = WindowSource::Learned;
        }
        match refusal.sent {
            Some(sent) if estimated > 0 => {
                let seen = sent as f64 / estimated as f64 * RATIO_MARGIN;
                facts.ratio = facts.ratio.max(seen).min(HIGHEST_RATIO);
            }
            // No count of the request: the estimate is assumed low (when
            // the window did not shrink enough to explain the refusal).
            _ if (estimated as f64 * facts.ratio) < facts.tokens as f64 => {
                facts.ratio = (facts.ratio * BLIND_RATIO_STEP).min(HIGHEST_RATIO);
            }
            _ => {}
        }
        let after = *facts;
        drop(facts);
        if after != before {
            self.keep(after);
        }
        Learned { before, after }
    }

    /// Calibrate the estimate with the provider's own count of a request
    /// it answered (`actual` tokens, estimated at `estimated`): the ratio
    /// follows the count, with a margin, never below [`LOWEST_RATIO`]. A
    /// count below a third of the estimate is not believed (no tokenizer
    /// packs text that tightly; a scripted provider reports anything).
    /// Whether the count was believed.
    pub fn observe(&self, actual: u64, estimated: u64) -> bool {
        if estimated < 256 || actual.saturating_mul(3) < estimated {
            return false;
        }
        let seen =
            (actual as f64 / estimated as f64 * RATIO_MARGIN).clamp(LOWEST_RATIO, HIGHEST_RATIO);
        self.facts.lock().expect("window lock").ratio = seen;
        true
    }

    fn read_kept(&self) -> Option<Kept> {
        let text = std::fs::read_to_string(self.kept_at.as_ref()?).ok()?;
        let kept: Kept = serde_json::from_str(&text).ok()?;
        let now = now_secs();
        (now.saturating_sub(kept.learned_at) < KEPT_FOR.as_secs()
            && kept.ratio.is_finite()
            && (LOWEST_RATIO..=HIGHEST_RATIO).contains(&kept.ratio))
        .then_some(kept)
    }

    fn keep(&self, facts: WindowFacts) {
        let Some(file) = &self.kept_at else { return };
        let kept = Kept {
            learned_at: now_secs(),
            tokens: facts.tokens,
            ratio: facts.ratio,
        };
        let _ = crate::user_files::write_private(
            file,
            &serde_json::to_string(&kept).unwrap_or_default(),
        );
    }
}

/// `DATA/windows/HASH.json`: where what was learned of the window of
/// `model` at the provider address `root` is kept.
pub fn kept_at(root: &str, model: &str) -> Option<PathBuf> {
    let key = blake3::hash(format!("{root}\n{model}").as_bytes());
    Some(
        crate::user_files::data_dir()?
            .join("windows")
            .join(format!("{}.json", &key.to_hex()[..24])),
    )
}

/// The window of a well-known model, by its name (the part after a
/// vendor's `/`, longest known prefix first).
pub fn known_model_window(model: &str) -> Option<u64> {
    const KNOWN: &[(&str, u64)] = &[
        ("claude-", 200_000),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-4-turbo", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-5", 400_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4-mini", 200_000),
        ("gemini-1.5-pro", 2_097_152),
        ("gemini-1.5-flash", 1_048_576),
        ("gemini-2", 1_048_576),
        ("gemini-3", 1_048_576),
        ("llama3.1", 131_072),
        ("llama3.2", 131_072),
        ("llama3.3", 131_072),
        ("llama-3.1", 131_072),
        ("llama-3.2", 131_072),
        ("llama-3.3", 131_072),
        ("llama3", 8_192),
        ("llama-3", 8_192),
        ("qwen2.5", 32_768),
        ("qwen3", 32_768),
        ("mistral", 32_768),
        ("gemma2", 8_192),
        ("gemma3", 131_072),
        ("phi3", 4_096),
        ("deepseek-coder", 16_384),
    ];
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    if name == "gpt-4" {
        return Some(8_192);
    }
    KNOWN
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, tokens)| *tokens)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_with_numbers_sets_the_window_and_the_ratio() {
        let window = Window::new(200_000, WindowSource::Profile, None);
        let learned = window.learn(
            ContextRefusal {
                limit: Some(8000),
                sent: Some(8021),
            },
            7000,
        );
        assert_eq!(learned.before.tokens, 200_000);
        assert_eq!(learned.after.tokens, 8000);
        assert_eq!(learned.after.source, WindowSource::Learned);
        assert!(learned.after.ratio > 8021.0 / 7000.0, "{learned:?}");
        // The budget leaves the answer's reserve and corrects the estimate.
        let budget = window.request_budget(window.answer_reserve(Some(1000)));
        assert!(budget < 7000 && budget > 5000, "{budget}");
    }

    #[test]
    fn a_refusal_without_numbers_shrinks_the_budget_and_a_kept_window_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.json");
        let window = Window::new(8000, WindowSource::Server, Some(file.clone()));
        let before = window.request_budget(1000);
        window.learn(ContextRefusal::default(), 5000);
        assert!(window.request_budget(1000) < before);
        window.learn(
            ContextRefusal {
                limit: Some(4096),
                sent: None,
            },
            5000,
        );
        let again = Window::remembered(32_768, WindowSource::Profile, Some(file.clone()));
        assert_eq!(again.facts().tokens, 4096);
        assert_eq!(again.facts().source, WindowSource::Learned);
        // A window the operator made smaller than what was learned stays.
        let smaller = Window::remembered(2048, WindowSource::Configured, Some(file));
        assert_eq!(smaller.facts().tokens, 2048);
    }

    #[test]
    fn the_providers_count_calibrates_the_estimate_within_bounds() {
        let window = Window::new(4096, WindowSource::Server, None);
        let before = window.request_budget(512);
        // A tokenizer that packs prose tightly: the budget grows.
        window.observe(1400, 2000);
        assert!((window.facts().ratio - 0.735).abs() < 0.01);
        assert!(window.request_budget(512) > before);
        // Tighter than a token per five bytes is not believed beyond it.
        window.observe(800, 2000);
        assert_eq!(window.facts().ratio, LOWEST_RATIO);
        // A count below a third of the estimate is not a count.
        window.observe(10, 2000);
        assert_eq!(window.facts().ratio, LOWEST_RATIO);
        // A count above the estimate raises it at once.
        window.observe(2400, 2000);
        assert!((window.facts().ratio - 1.26).abs() < 0.01);
    }

    #[test]
    fn known_models_are_found_by_their_longest_prefix() {
        assert_eq!(known_model_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(known_model_window("meta-llama/Llama-3.1-8B"), Some(131_072));
        assert_eq!(known_model_window("llama3:8b"), Some(8_192));
        assert_eq!(known_model_window("gpt-4"), Some(8_192));
        assert_eq!(known_model_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(known_model_window("my-own-model"), None);
    }
}
