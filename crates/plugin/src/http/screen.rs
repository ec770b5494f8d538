//! Clearing an answer of secrets before the guest reads it: a
//! credentialed answer must come uncompressed and keeps only headers whose
//! names are known data; every header value and the body are searched for
//! the credentials, and then all of it together (a secret split over two
//! headers, or a header and the body).

use super::egress::HttpEgress;
use super::origin::RequestOrigin;

/// Why an answer cannot be handed to the guest.
pub(super) type Withheld = String;

/// Clear `head` and `body` (the answer from `origin`) of every credential
/// `egress` adds; `credentialed`: one was added to this request.
pub(super) fn screen(
    egress: &HttpEgress,
    origin: &RequestOrigin,
    credentialed: bool,
    head: &mut http::response::Parts,
    body: &mut Vec<u8>,
) -> Result<(), Withheld> {
    if credentialed {
        if encoded(&head.headers) {
            return Err(format!(
                "{origin} answered with a compressed body although sandcrab asked for none; a compressed body cannot be checked for the credential, so it is withheld"
            ));
        }
        head.headers = credentialed_headers(std::mem::take(&mut head.headers));
    }
    egress.redact(body);
    for value in head.headers.values_mut() {
        let mut bytes = value.as_bytes().to_vec();
        if egress.redact(&mut bytes) {
            *value = http::HeaderValue::from_bytes(&bytes)
                .unwrap_or_else(|_| http::HeaderValue::from_static("[withheld]"));
        }
    }
    let mut together: Vec<u8> = Vec::new();
    for (name, value) in &head.headers {
        together.extend_from_slice(name.as_str().as_bytes());
        together.extend_from_slice(value.as_bytes());
    }
    together.extend_from_slice(body);
    if egress.redact(&mut together) {
        return Err(format!(
            "{origin} answered with the credential split over its headers and body; the answer is withheld"
        ));
    }
    Ok(())
}

/// Whether the answer's body is coded some way other than plain (or
/// chunked, which the host undoes).
fn encoded(headers: &http::HeaderMap) -> bool {
    let coded = |name: http::header::HeaderName, plain: &[u8]| {
        headers.get_all(name).iter().any(|v| {
            v.as_bytes()
                .split(|b| *b == b',')
                .map(|t| t.trim_ascii())
                .any(|t| {
                    !t.is_empty()
                        && !t.eq_ignore_ascii_case(plain)
                        && !t.eq_ignore_ascii_case(b"identity")
                })
        })
    };
    coded(http::header::CONTENT_ENCODING, b"identity")
        || coded(http::header::TRANSFER_ENCODING, b"chunked")
}

/// Response headers a credentialed answer keeps: names of data a client
/// needs (type, length, caching, paging, rate limits), none a server could
/// use to hand the credential back under a name of its choosing.
const CREDENTIALED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-language",
    "content-disposition",
    "content-range",
    "accept-ranges",
    "cache-control",
    "date",
    "etag",
    "expires",
    "last-modified",
    "vary",
    "age",
    "retry-after",
    "link",
    "location",
    "x-total-count",
];

/// `headers` cut to [`CREDENTIALED_HEADERS`] and the rate-limit family.
fn credentialed_headers(headers: http::HeaderMap) -> http::HeaderMap {
    let mut kept = http::HeaderMap::new();
    let mut name = None;
    for (next, value) in headers {
        if let Some(next) = next {
            name = Some(next);
        }
        let Some(name) = &name else { continue };
        let n = name.as_str();
        if CREDENTIALED_HEADERS.contains(&n)
            || n.starts_with("x-ratelimit-")
            || n.starts_with("ratelimit")
        {
            kept.append(name.clone(), value);
        }
    }
    kept
}
