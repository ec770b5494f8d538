//! What `sandcrab plugins install` is given, parsed and validated before
//! anything is fetched: `oci://HOST/NS/NAME:TAG` or `…@sha256:HEX`, an
//! `https://` URL with `#sha256=HEX`, or a local folder or `.tar`.

use std::fmt;
use std::path::PathBuf;

use crate::llm::is_loopback;

/// A reference that names what to install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reference {
    /// An artifact in an OCI registry.
    Oci(OciRef),
    /// An archive (an OCI layout as `.tar`) downloaded over HTTPS, whose
    /// SHA-256 the operator states.
    Https { url: url::Url, sha256: String },
    /// A plugin folder, an OCI layout folder or an OCI layout `.tar`.
    Local(PathBuf),
}

/// An artifact in an OCI registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    /// `host` or `host:port`.
    pub registry: String,
    /// `namespace/name` (one or more path components).
    pub repository: String,
    /// The tag, when the reference names one.
    pub tag: Option<String>,
    /// `sha256:HEX`, when the reference names one.
    pub digest: Option<String>,
}

/// A reference that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
#[error(
    "'{given}' is not a plugin reference: {reason} (expected oci://HOST/NAMESPACE/NAME:TAG, oci://HOST/NAMESPACE/NAME@sha256:HEX, https://HOST/PATH.tar#sha256=HEX, or a local folder or .tar)"
)]
pub struct BadReference {
    pub given: String,
    pub reason: String,
}

impl Reference {
    /// Parse what the operator typed.
    pub fn parse(given: &str) -> Result<Reference, BadReference> {
        let bad = |reason: &str| BadReference {
            given: given.to_string(),
            reason: reason.to_string(),
        };
        if let Some(rest) = given.strip_prefix("oci://") {
            return OciRef::parse(rest).map(Reference::Oci).map_err(|r| bad(&r));
        }
        if given.starts_with("https://") || given.starts_with("http://") {
            let url = url::Url::parse(given).map_err(|e| bad(&e.to_string()))?;
            let sha = url
                .fragment()
                .and_then(|f| f.strip_prefix("sha256="))
                .ok_or_else(|| bad("a download needs the SHA-256 it must have, as #sha256=HEX"))?;
            if !is_sha256_hex(sha) {
                return Err(bad("#sha256= needs 64 lower-case hex digits"));
            }
            if url.scheme() == "http" && !is_loopback(url.host()) {
                return Err(bad(
                    "plain http is used only on this machine (loopback); use https",
                ));
            }
            let sha256 = sha.to_string();
            let mut url = url;
            url.set_fragment(None);
            return Ok(Reference::Https { url, sha256 });
        }
        if given.contains("://") {
            return Err(bad("unknown scheme"));
        }
        Ok(Reference::Local(PathBuf::from(given)))
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reference::Oci(r) => write!(f, "{r}"),
            Reference::Https { url, sha256 } => write!(f, "{url}#sha256={sha256}"),
            Reference::Local(path) => write!(f, "{}", path.display()),
        }
    }
}

impl OciRef {
    fn parse(rest: &str) -> Result<OciRef, String> {
        let (rest, digest) = match rest.split_once('@') {
            Some((r, d)) => {
                let hex = d
                    .strip_prefix("sha256:")
                    .ok_or("a digest must be sha256:HEX")?;
                if !is_sha256_hex(hex) {
                    return Err("a digest needs 64 lower-case hex digits".into());
                }
                (r, Some(d.to_string()))
            }
            None => (rest, None),
        };
        let (registry, path) = rest
            .split_once('/')
            .ok_or("no repository after the registry host")?;
        if registry.is_empty()
            || !registry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c))
        {
            return Err(format!("'{registry}' is not a registry host"));
        }
        // A tag follows the last ':' of the last path component.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => (repo, Some(tag.to_string())),
            _ => (path, None),
        };
        for part in repository.split('/') {
            if !valid_path_component(part) {
                return Err(format!(
                    "'{part}' is not a repository name component ([a-z0-9] separated by '.', '_' or '-')"
                ));
            }
        }
        if let Some(tag) = &tag
            && !valid_tag(tag)
        {
            return Err(format!(
                "'{tag}' is not a tag ([A-Za-z0-9_.-], at most 128)"
            ));
        }
        let tag = match (&tag, &digest) {
            (None, None) => Some("latest".to_string()),
            _ => tag,
        };
        Ok(OciRef {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag,
            digest,
        })
    }

    /// `http` for a registry on this machine, else `https`.
    pub fn scheme(&self) -> &'static str {
        let base = url::Url::parse(&format!("http://{}/", self.registry));
        if base.is_ok_and(|u| is_loopback(u.host())) {
            "http"
        } else {
            "https"
        }
    }

    /// What to ask the registry for: the digest when known, else the tag.
    pub fn manifest_ref(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The same artifact, pinned to `digest` (the tag kept for messages).
    pub fn at(&self, digest: &str) -> OciRef {
        OciRef {
            digest: Some(digest.to_string()),
            ..self.clone()
        }
    }

    /// The reference without its digest (what the tag resolves to now).
    pub fn by_tag(&self) -> OciRef {
        OciRef {
            digest: None,
            ..self.clone()
        }
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// 64 lower-case hex digits: a SHA-256 as digests write it.
pub(super) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn valid_path_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    !part.is_empty()
        && part.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && part
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
}

fn valid_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 128
        && !tag.starts_with(['.', '-'])
        && tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oci_references_parse_with_tag_digest_or_both() {
        let Reference::Oci(r) = Reference::parse("oci://127.0.0.1:5000/acme/hello:v1").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (r.registry.as_str(), r.repository.as_str()),
            ("127.0.0.1:5000", "acme/hello")
        );
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.scheme(), "http");
        let d = format!("sha256:{}", "a".repeat(64));
        let Reference::Oci(r) =
            Reference::parse(&format!("oci://ghcr.io/acme/tools/hello@{d}")).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.digest.as_deref(), Some(d.as_str()));
        assert_eq!(r.tag, None);
        assert_eq!(r.scheme(), "https");
        assert_eq!(r.manifest_ref(), d);
        let Reference::Oci(r) = Reference::parse("oci://localhost/hello").unwrap() else {
            panic!()
        };
        assert_eq!(r.tag.as_deref(), Some("latest"));
    }

    #[test]
    fn bad_references_say_what_is_wrong() {
        for (given, says) in [
            ("oci://host", "no repository"),
            ("oci://host/Acme/x:v1", "'Acme'"),
            ("oci://host/acme/x@sha256:12", "64"),
            ("oci://host/a/../b:v1", "'..'"),
            ("https://example.com/p.tar", "#sha256"),
            ("http://example.com/p.tar#sha256=aa", "64"),
            (
                &format!("http://example.com/p.tar#sha256={}", "a".repeat(64)),
                "loopback",
            ),
            ("ftp://x/y", "unknown scheme"),
        ] {
            let err = Reference::parse(given).unwrap_err().to_string();
            assert!(err.contains(says), "{given}: {err}");
        }
        assert!(matches!(
            Reference::parse(&format!(
                "https://example.com/p.tar#sha256={}",
                "b".repeat(64)
            )),
            Ok(Reference::Https { .. })
        ));
    }
}
