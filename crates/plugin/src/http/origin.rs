//! Origin patterns: `scheme://host[:port]`, where the host may be an exact
//! name, an IP address, or `*.domain` (any name below `domain`, not the
//! domain itself). A plugin's manifest asks for origins with them, the
//! operator grants them, and each request's URL is matched against both.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    /// The port a URL without one uses.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// The host part of a pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HostPattern {
    /// One DNS name (lower case, no trailing dot).
    Name(String),
    /// One address, written as the address: reaching it is what the
    /// operator asked for, private or not.
    Address(IpAddr),
    /// `*.suffix`: every name that ends in `.suffix`.
    Below(String),
}

/// One origin pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OriginPattern {
    pub scheme: Scheme,
    pub host: HostPattern,
    pub port: u16,
}

/// The origin of one request, as the host will connect to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestOrigin {
    pub scheme: Scheme,
    /// Lower case, no brackets around an IPv6 address, no trailing dot.
    pub host: String,
    pub port: u16,
}

impl RequestOrigin {
    /// The origin of `uri` (None when it has no scheme or host the host
    /// can reach: only `http` and `https`).
    pub fn of(uri: &http::Uri) -> Result<Self, String> {
        let scheme = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
            Some(s) if s.eq_ignore_ascii_case("http") => Scheme::Http,
            Some(other) => return Err(format!("scheme '{other}' is not http or https")),
            None => return Err("the request names no scheme".into()),
        };
        let authority = uri.authority().ok_or("the request names no host")?;
        if authority.as_str().contains('@') {
            return Err("user names in URLs are not sent (use a header)".into());
        }
        let host = normalize_host(authority.host());
        if host.is_empty() {
            return Err("the request names no host".into());
        }
        // The port as written: `Authority::port` hides one that does not
        // fit in 16 bits.
        let raw = authority.as_str();
        let after_host = raw.rsplit_once(']').map_or(raw, |(_, rest)| rest);
        let port = match after_host.rsplit_once(':').map(|(_, p)| p) {
            None | Some("") => scheme.default_port(),
            Some(p) => match p.parse::<u16>() {
                Ok(port) if port != 0 => port,
                _ => return Err(format!("port '{p}' is not a number 1-65535")),
            },
        };
        Ok(RequestOrigin { scheme, host, port })
    }

    /// The host as an address, when it is written as one.
    pub fn address(&self) -> Option<IpAddr> {
        self.host.parse().ok()
    }
}

impl fmt::Display for RequestOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_origin(f, self.scheme, &host_text(&self.host), self.port)
    }
}

fn host_text(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn write_origin(f: &mut fmt::Formatter<'_>, scheme: Scheme, host: &str, port: u16) -> fmt::Result {
    write!(f, "{}://{host}", scheme.as_str())?;
    if port != scheme.default_port() {
        write!(f, ":{port}")?;
    }
    Ok(())
}

/// Lower case, brackets and one trailing dot removed.
fn normalize_host(host: &str) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

impl OriginPattern {
    /// Whether a request to `origin` matches.
    pub fn matches(&self, origin: &RequestOrigin) -> bool {
        if self.scheme != origin.scheme || self.port != origin.port {
            return false;
        }
        match &self.host {
            HostPattern::Name(name) => *name == origin.host,
            HostPattern::Address(addr) => origin.address() == Some(*addr),
            HostPattern::Below(suffix) => is_below(&origin.host, suffix),
        }
    }

    /// Whether every request `other` matches, this matches too.
    pub fn covers(&self, other: &OriginPattern) -> bool {
        if self.scheme != other.scheme || self.port != other.port {
            return false;
        }
        match (&self.host, &other.host) {
            (a, b) if a == b => true,
            (HostPattern::Below(suffix), HostPattern::Name(name)) => is_below(name, suffix),
            (HostPattern::Below(suffix), HostPattern::Below(inner)) => is_below(inner, suffix),
            _ => false,
        }
    }

    /// Whether the pattern names an address (not a name).
    pub fn names_address(&self) -> bool {
        matches!(self.host, HostPattern::Address(_))
    }
}

fn is_below(name: &str, suffix: &str) -> bool {
    name.len() > suffix.len() + 1
        && name.ends_with(suffix)
        && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
}

/// Why a pattern could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid origin '{text}': {reason} (write it as scheme://host[:port], e.g. \"https://api.github.com\" or \"https://*.example.com:8443\")"
)]
pub struct InvalidOrigin {
    pub text: String,
    pub reason: String,
}

impl FromStr for OriginPattern {
    type Err = InvalidOrigin;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| InvalidOrigin {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let (scheme, rest) = text.split_once("://").ok_or_else(|| invalid("no scheme"))?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "https" => Scheme::Https,
            "http" => Scheme::Http,
            _ => return Err(invalid("the scheme must be http or https")),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(invalid(
                "an origin has no path, query or user name; grants are by origin",
            ));
        }
        let (host, port) = split_port(rest).map_err(|r| invalid(&r))?;
        let port = port.unwrap_or(scheme.default_port());
        if port == 0 {
            return Err(invalid("port 0"));
        }
        let host = normalize_host(host);
        if host.is_empty() {
            return Err(invalid("no host"));
        }
        let host = if let Some(suffix) = host.strip_prefix("*.") {
            check_name(suffix).map_err(|r| invalid(&r))?;
            if !suffix.contains('.') {
                return Err(invalid(
                    "a wildcard must stay below a registered domain (*.example.com, not *.com)",
                ));
            }
            HostPattern::Below(suffix.to_string())
        } else if let Ok(addr) = host.parse::<IpAddr>() {
            HostPattern::Address(addr)
        } else {
            if host.contains('*') {
                return Err(invalid(
                    "'*' may only stand for the leading labels: *.example.com",
                ));
            }
            check_name(&host).map_err(|r| invalid(&r))?;
            HostPattern::Name(host)
        };
        Ok(OriginPattern { scheme, host, port })
    }
}

/// `host[:port]`, with IPv6 addresses in brackets.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if let Some(inner) = text.strip_prefix('[') {
        let (addr, after) = inner
            .split_once(']')
            .ok_or("an IPv6 address needs its closing ']'")?;
        match after.strip_prefix(':') {
            Some(port) => (addr, Some(port)),
            None if after.is_empty() => (addr, None),
            None => return Err("unexpected text after ']'".into()),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = port
        .map(|p| {
            p.parse::<u16>()
                .map_err(|_| format!("port '{p}' is not a number 1-65535"))
        })
        .transpose()?;
    Ok((host, port))
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = name.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a host name (ASCII letters, digits, '-' and '.'; write international names in their xn-- form)"
        ))
    }
}

impl fmt::Display for OriginPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = match &self.host {
            HostPattern::Name(name) => name.clone(),
            HostPattern::Address(addr) => host_text(&addr.to_string()),
            HostPattern::Below(suffix) => format!("*.{suffix}"),
        };
        write_origin(f, self.scheme, &host, self.port)
    }
}

impl TryFrom<String> for OriginPattern {
    type Error = InvalidOrigin;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<OriginPattern> for String {
    fn from(pattern: OriginPattern) -> String {
        pattern.to_string()
    }
}

impl serde::Serialize for OriginPattern {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for OriginPattern {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> OriginPattern {
        text.parse().unwrap()
    }

    fn req(url: &str) -> RequestOrigin {
        RequestOrigin::of(&url.parse().unwrap()).unwrap()
    }

    #[test]
    fn exact_origins_match_only_their_scheme_host_and_port() {
        let github = p("https://api.github.com");
        assert!(github.matches(&req("https://api.github.com/repos")));
        assert!(github.matches(&req("https://API.github.com.:443/")));
        assert!(!github.matches(&req("http://api.github.com/")));
        assert!(!github.matches(&req("https://api.github.com:8443/")));
        assert!(!github.matches(&req("https://api.github.com.evil.net/")));
        assert!(!github.matches(&req("https://evilapi.github.com/")));
    }

    #[test]
    fn wildcards_match_names_below_the_domain_not_the_domain() {
        let any = p("https://*.example.com:8443");
        assert!(any.matches(&req("https://a.example.com:8443/")));
        assert!(any.matches(&req("https://a.b.example.com:8443/")));
        assert!(!any.matches(&req("https://example.com:8443/")));
        assert!(!any.matches(&req("https://badexample.com:8443/")));
        assert!(!any.matches(&req("https://a.example.com/")));
        assert!(any.covers(&p("https://api.example.com:8443")));
        assert!(any.covers(&p("https://*.api.example.com:8443")));
        assert!(!p("https://api.example.com:8443").covers(&any));
    }

    #[test]
    fn addresses_match_the_address_whatever_its_spelling() {
        let v6 = p("http://[::1]:8080");
        assert!(v6.matches(&req("http://[::1]:8080/x")));
        assert!(v6.matches(&req("http://[0:0:0:0:0:0:0:1]:8080/x")));
        assert_eq!(v6.to_string(), "http://[::1]:8080");
        assert!(p("http://127.0.0.1:9").names_address());
        assert!(!p("http://127.0.0.1:9").matches(&req("http://127.0.0.2:9/")));
    }

    #[test]
    fn a_request_port_out_of_range_is_refused_not_defaulted() {
        for url in ["http://x.org:99999/", "http://x.org:0/"] {
            let err = RequestOrigin::of(&url.parse().unwrap()).unwrap_err();
            assert!(err.contains("1-65535"), "{url}: {err}");
        }
    }

    #[test]
    fn bad_patterns_say_what_is_wrong() {
        for (text, why) in [
            ("api.github.com", "no scheme"),
            ("ftp://x.org", "http or https"),
            ("https://x.org/path", "no path"),
            ("https://*", "leading labels"),
            ("https://*.com", "registered domain"),
            ("https://a*.x.org", "leading labels"),
            ("https://x.org:99999", "1-65535"),
            ("https://user@x.org", "user name"),
        ] {
            let err = text.parse::<OriginPattern>().unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
