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

/// A session's window. Each session has its own (a subagent's starts
/// from its parent's); what one learns reaches the others through the
/// kept file, never by sharing, so a session's window follows only its
/// own requests (and a replay sees the same).
#[derive(Debug)]
pub struct Window {
    state: Mutex<State>,
}

#[derive(Debug, Clone)]
struct State {
    facts: WindowFacts,
    /// What the window was said to be before any refusal (a kept lesson
    /// applies only while the same is said).
    told: Told,
    /// The provider address (for the kept file of another model).
    root: Option<String>,
    /// Where a learned window is kept (none: not kept).
    kept_at: Option<PathBuf>,
}

/// The window as said before anything was learned, and by whom.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Told {
    pub tokens: u64,
    pub source: WindowSource,
}

#[derive(Serialize, Deserialize)]
struct Kept {
    /// Seconds since the epoch when it was learned.
    learned_at: u64,
    /// What the window was said to be when a refusal taught otherwise.
    #[serde(default)]
    told: u64,
    tokens: u64,
    ratio: f64,
}

impl Window {
    /// A window as `told`, not kept.
    pub fn new(tokens: u64, source: WindowSource) -> Self {
        Window::with_state(State {
            facts: WindowFacts {
                tokens: tokens.max(MIN_ANSWER * 2),
                source,
                ratio: 1.0,
            },
            told: Told { tokens, source },
            root: None,
            kept_at: None,
        })
    }

    fn with_state(state: State) -> Self {
        Window {
            state: Mutex::new(state),
        }
    }

    /// A window as a recording says a session started with.
    pub fn restored(tokens: u64, source: WindowSource, ratio: f64) -> Self {
        let window = Window::new(tokens, source);
        window.lock().facts.ratio = ratio.clamp(LOWEST_RATIO, HIGHEST_RATIO);
        window
    }

    /// The window of `model` at the provider address `root`: as `told`
    /// (the operator or the server), else the known-model table, else
    /// `default`; then what a refusal taught within the day, when the
    /// same was said then.
    pub fn of_model(told: Option<Told>, model: &str, root: &str, default: u64) -> Self {
        let told = told
            .or_else(|| {
                known_model_window(model).map(|tokens| Told {
                    tokens,
                    source: WindowSource::KnownModel,
                })
            })
            .unwrap_or(Told {
                tokens: default,
                source: WindowSource::Profile,
            });
        let window = Window::new(told.tokens, told.source);
        {
            let mut state = window.lock();
            state.root = Some(root.to_string());
            state.kept_at = kept_at(root, model);
        }
        window.remember();
        window
    }

    /// A window for a new session: as this one was told, and what was
    /// learned since (by any session) read back from the kept file.
    pub fn fresh(&self) -> Self {
        let state = self.lock().clone();
        let window = Window::new(state.told.tokens, state.told.source);
        {
            let mut fresh = window.lock();
            fresh.root = state.root;
            fresh.kept_at = state.kept_at;
        }
        window.remember();
        window
    }

    /// A copy of what this window knows now (a subagent of the same model).
    pub fn copy(&self) -> Self {
        Window::with_state(self.lock().clone())
    }

    /// The window after the session switched to `model`: the operator's
    /// setting holds for every model of the provider; else the known-model
    /// table; else the profile's `default`.
    pub fn for_model(&self, model: &str, default: u64) -> Self {
        let state = self.lock().clone();
        let told = (state.told.source == WindowSource::Configured).then_some(state.told);
        match &state.root {
            Some(root) => Window::of_model(told, model, root, default),
            None => {
                let told = told.unwrap_or(Told {
                    tokens: known_model_window(model).unwrap_or(default),
                    source: WindowSource::Profile,
                });
                Window::new(told.tokens, told.source)
            }
        }
    }

    /// Know from now on what `other` knows (the session switched model).
    pub fn replace_with(&self, other: Window) {
        let state = other.lock().clone();
        *self.lock() = state;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Apply the kept lesson, if it was learned against what is said now
    /// and tells of a smaller window or a larger ratio.
    fn remember(&self) {
        let mut state = self.lock();
        let Some(kept) = read_kept(state.kept_at.as_deref()) else {
            return;
        };
        if kept.told != state.told.tokens {
            return;
        }
        if kept.tokens < state.facts.tokens {
            state.facts.tokens = kept.tokens.max(MIN_ANSWER * 2);
            state.facts.source = WindowSource::Learned;
        }
        state.facts.ratio = state.facts.ratio.max(kept.ratio);
    }

    pub fn facts(&self) -> WindowFacts {
        self.lock().facts
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
    /// What a refusal's numbers taught is kept for the next sessions; a
    /// refusal without numbers only makes this session's estimates
    /// more careful.
    pub fn learn(&self, refusal: ContextRefusal, estimated: u64) -> Learned {
        let mut state = self.lock();
        let before = state.facts;
        let facts = &mut state.facts;
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
        let said_numbers = refusal.limit.is_some() || refusal.sent.is_some();
        if after != before && said_numbers {
            keep(&state);
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
        self.lock().facts.ratio = seen;
        true
    }
}

fn read_kept(file: Option<&std::path::Path>) -> Option<Kept> {
    let text = std::fs::read_to_string(file?).ok()?;
    let kept: Kept = serde_json::from_str(&text).ok()?;
    let now = now_secs();
    (now.saturating_sub(kept.learned_at) < KEPT_FOR.as_secs()
        && kept.ratio.is_finite()
        && (LOWEST_RATIO..=HIGHEST_RATIO).contains(&kept.ratio))
    .then_some(kept)
}

fn keep(state: &State) {
    let Some(file) = &state.kept_at else { return };
    let kept = Kept {
        learned_at: now_secs(),
        told: state.told.tokens,
        tokens: state.facts.tokens,
        ratio: state.facts.ratio,
    };
    let _ =
        crate::user_files::write_private(file, serde_json::to_string(&kept).unwrap_or_default());
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
        let window = Window::new(200_000, WindowSource::Profile);
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

    /// A window told `tokens` by the server, kept in `file`.
    fn kept_in(tokens: u64, file: &std::path::Path) -> Window {
        let window = Window::new(tokens, WindowSource::Server);
        window.lock().kept_at = Some(file.to_path_buf());
        window.remember();
        window
    }

    #[test]
    fn a_lesson_with_numbers_is_kept_for_what_was_said_then_and_a_blind_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.json");
        let window = kept_in(8000, &file);
        let before = window.request_budget(1000);
        window.learn(ContextRefusal::default(), 5000);
        assert!(window.request_budget(1000) < before);
        assert!(!file.exists(), "a refusal without numbers is not kept");
        window.learn(
            ContextRefusal {
                limit: Some(4096),
                sent: None,
            },
            5000,
        );
        assert!(file.exists());
        // The next session, told the same, starts from the lesson.
        let next = window.fresh();
        assert_eq!(next.facts().tokens, 4096);
        assert_eq!(next.facts().source, WindowSource::Learned);
        assert_eq!(kept_in(8000, &file).facts().tokens, 4096);
        // A server restarted with more context says so: it is believed.
        let restarted = kept_in(16_384, &file);
        assert_eq!(restarted.facts().tokens, 16_384);
        assert_eq!(restarted.facts().source, WindowSource::Server);
        // A subagent's copy learns alone.
        let child = next.copy();
        child.learn(
            ContextRefusal {
                limit: Some(2048),
                sent: None,
            },
            3000,
        );
        assert_eq!(next.facts().tokens, 4096);
        assert_eq!(child.facts().tokens, 2048);
    }

    #[test]
    fn the_providers_count_calibrates_the_estimate_within_bounds() {
        let window = Window::new(4096, WindowSource::Server);
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
    fn another_model_has_its_own_window_but_the_operators_setting_holds() {
        let root = "http://sandcrab.invalid";
        let claude = Window::of_model(None, "claude-sonnet-4-5", root, 8000);
        assert_eq!(claude.facts().tokens, 200_000);
        let llama = claude.for_model("llama3:8b", 8000);
        assert_eq!(llama.facts().tokens, 8_192);
        assert_eq!(llama.facts().source, WindowSource::KnownModel);
        assert_eq!(llama.for_model("my-own", 8000).facts().tokens, 8000);
        let told = Told {
            tokens: 32_768,
            source: WindowSource::Configured,
        };
        let configured = Window::of_model(Some(told), "claude-sonnet-4-5", root, 8000);
        assert_eq!(
            configured.for_model("llama3:8b", 8000).facts().tokens,
            32_768
        );
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
