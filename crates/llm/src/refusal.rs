//! The numbers inside a provider's "prompt too long" refusal: how many
//! tokens the request was and how many the model takes. Each API words it
//! its own way; what is found here lets the host learn the window from
//! the refusal itself and size the next request to it.

/// What a context-length refusal said (either number may be missing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextRefusal {
    /// The model's window, in the provider's tokens.
    pub limit: Option<u64>,
    /// The size of the refused request, in the provider's tokens.
    pub sent: Option<u64>,
}

/// Read `message` (the provider's own error text) for its numbers:
///
/// - Anthropic: `prompt is too long: 8021 tokens > 8000 maximum`
/// - OpenAI: `This model's maximum context length is 8192 tokens. However,
///   your messages resulted in 9100 tokens.`, or `… tokens allowed (8192)`
/// - Gemini: `The input token count (9100) exceeds the maximum number of
///   tokens allowed (8192).`
/// - llama.cpp: `request (9100 tokens) exceeds the available context size
///   (8192 tokens), try increasing it`
/// - vLLM: `… maximum context length is 8192 tokens. However, you
///   requested 9100 tokens …`
pub fn context_refusal(message: &str) -> ContextRefusal {
    let m = message.to_ascii_lowercase();
    let mut found = ContextRefusal::default();
    // "N tokens > M maximum" (Anthropic).
    if let Some(at) = m.find(" tokens > ") {
        found.sent = number_before(&m[..at]);
        found.limit = number_after(&m[at + " tokens > ".len()..], false);
    }
    // "you requested N tokens (X in the messages, Y in the completion)"
    // (vLLM): the messages are what was sent; the completion is the
    // answer's limit.
    let messages_said = m.find(" in the messages");
    if let Some(at) = messages_said {
        found.sent = number_before(&m[..at]);
    }
    for needle in NEEDLES {
        if let Some(at) = m.find(needle.words)
            && let Some(n) = number_after(&m[at + needle.words.len()..], needle.tokens_follow)
        {
            let slot = match needle.number {
                Number::Limit => &mut found.limit,
                Number::Sent => &mut found.sent,
            };
            slot.get_or_insert(n);
        }
    }
    // A "limit" not above what was sent is a misreading.
    // (Not when the messages' share is said: the answer's limit filled
    // the rest.)
    if let (Some(limit), Some(sent)) = (found.limit, found.sent)
        && limit >= sent
        && messages_said.is_none()
    {
        return ContextRefusal::default();
    }
    found
}

/// Which of the two numbers a needle finds.
#[derive(Clone, Copy)]
enum Number {
    Limit,
    Sent,
}

/// Words a number follows in a refusal.
struct Needle {
    words: &'static str,
    number: Number,
    /// Whether "tokens" must follow the number (the words alone are too
    /// common: "bad request (400)").
    tokens_follow: bool,
}

const fn needle(words: &'static str, number: Number, tokens_follow: bool) -> Needle {
    Needle {
        words,
        number,
        tokens_follow,
    }
}

/// The needles, the most specific first for each number.
const NEEDLES: &[Needle] = &[
    needle("maximum context length is", Number::Limit, false),
    needle("context length is", Number::Limit, true),
    needle("available context size (", Number::Limit, false),
    needle("context size (", Number::Limit, true),
    needle("maximum number of tokens allowed (", Number::Limit, false),
    needle("tokens allowed (", Number::Limit, false),
    needle("context window of", Number::Limit, true),
    needle("resulted in", Number::Sent, true),
    needle("you requested", Number::Sent, true),
    needle("input token count (", Number::Sent, false),
    needle("request (", Number::Sent, true),
    needle("prompt has", Number::Sent, true),
];

/// The first whole number at the start of `text` (after spaces and `(`),
/// "128k" read as 128,000; with `tokens_follow`, only when the word
/// "tokens" comes next.
fn number_after(text: &str, tokens_follow: bool) -> Option<u64> {
    let text = text.trim_start_matches([' ', '(']);
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == ','))
        .unwrap_or(text.len());
    let digits: String = text[..digits_end]
        .chars()
        .filter(char::is_ascii_digit)
        .collect();
    let mut n: u64 = digits.parse().ok()?;
    let mut rest = &text[digits_end..];
    if let Some(after) = rest.strip_prefix('k') {
        n = n.checked_mul(1000)?;
        rest = after;
    }
    if tokens_follow && !rest.trim_start().starts_with("token") {
        return None;
    }
    Some(n)
}

/// The whole number that ends `text` (before trailing spaces).
fn number_before(text: &str) -> Option<u64> {
    let text = text.trim_end();
    let start = text
        .char_indices()
        .rfind(|(_, c)| !(c.is_ascii_digit() || *c == ','))
        .map_or(0, |(i, c)| i + c.len_utf8());
    let digits: String = text[start..].chars().filter(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(message: &str) -> (Option<u64>, Option<u64>) {
        let r = context_refusal(message);
        (r.sent, r.limit)
    }

    #[test]
    fn each_apis_own_words_give_both_numbers() {
        assert_eq!(
            read("prompt is too long: 8021 tokens > 8000 maximum"),
            (Some(8021), Some(8000))
        );
        assert_eq!(
            read(
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9,100 tokens. Please reduce the length of the messages."
            ),
            (Some(9100), Some(8192))
        );
        assert_eq!(
            read(
                "The input token count (9100) exceeds the maximum number of tokens allowed (8192)."
            ),
            (Some(9100), Some(8192))
        );
        assert_eq!(
            read(
                "request (9100 tokens) exceeds the available context size (4096 tokens), try increasing it"
            ),
            (Some(9100), Some(4096))
        );
        assert_eq!(
            read(
                "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion)."
            ),
            (Some(4000), Some(4096))
        );
    }

    #[test]
    fn common_words_without_tokens_and_short_limits_are_read_right() {
        // "request (400)" is an HTTP status, not the request's size.
        assert_eq!(
            read(
                "Bad request (400): this model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens."
            ),
            (Some(9100), Some(8192))
        );
        assert_eq!(
            read("the prompt has 140,000 tokens, over the context window of 128k tokens"),
            (Some(140_000), Some(128_000))
        );
    }

    #[test]
    fn text_around_the_numbers_in_any_script_reads_without_a_panic() {
        assert_eq!(
            read("prompt is too long: ≈8021 tokens > 8000 maximum").1,
            Some(8000)
        );
        // A narrow no-break space inside the number: misread as 21, which
        // is no reason for a refusal, so nothing is believed.
        assert_eq!(
            read("prompt is too long: 8\u{202f}021 tokens > 8000 maximum"),
            (None, None)
        );
    }

    #[test]
    fn a_refusal_without_numbers_gives_none_and_nonsense_is_not_believed() {
        assert_eq!(read("prompt is too long"), (None, None));
        assert_eq!(read("Input is too long for requested model."), (None, None));
        // A "limit" at or above what was sent cannot be why it was refused.
        assert_eq!(
            read("request (100 tokens) exceeds the available context size (4096 tokens)"),
            (None, None)
        );
    }
}
