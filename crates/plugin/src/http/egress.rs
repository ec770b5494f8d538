//! One plugin's outgoing HTTP, decided: which origins and methods it may
//! use, which credential the host adds to each, the limits of a request,
//! and the refusal the guest reads when a request falls outside.

use std::collections::BTreeMap;
use std::net::IpAddr;

use http::{HeaderName, HeaderValue};

use super::address::restricted_kind;
use super::grant::{CredentialGrant, HttpRule, fill_template};
use super::origin::{OriginPattern, RequestOrigin};

/// The limits of one plugin's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub timeout_ms: u64,
    /// Requests one call may have open at once.
    pub concurrent: u32,
    /// Bytes of responses the host holds for one instance until the guest
    /// reads them (the plugin's memory limit).
    pub held_bytes: usize,
}

/// A credential ready to be added: its value, or the variables it lacks.
pub struct Credential {
    pub grant: CredentialGrant,
    pub header: HeaderName,
    value: Result<HeaderValue, String>,
    /// Byte strings that must never reach the guest: the value and each
    /// variable's value.
    secrets: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the value never reaches a log.
        write!(f, "Credential({})", self.grant.describe())
    }
}

impl Credential {
    /// The header's value (or why it cannot be made).
    pub fn value(&self) -> Result<&HeaderValue, &str> {
        self.value.as_ref().map_err(|e| e.as_str())
    }
}

/// Everything the host needs to let one plugin's requests out.
#[derive(Debug)]
pub struct HttpEgress {
    pub plugin: String,
    /// What the manifest asked for (for refusals).
    pub requested: Vec<OriginPattern>,
    pub rules: Vec<HttpRule>,
    pub credentials: Vec<Credential>,
    pub limits: HttpLimits,
    /// Where the operator's grants live (for refusals).
    pub config_file: String,
    /// Idle keep-alive connections of the plugin.
    pub pool: super::pool::Pool,
    /// TLS settings of its HTTPS requests.
    pub tls: std::sync::Arc<rustls::ClientConfig>,
}

impl HttpEgress {
    /// The egress of `plugin`, its credentials filled from `env` (the
    /// operator's environment).
    pub fn new(
        plugin: &str,
        requested: Vec<OriginPattern>,
        rules: Vec<HttpRule>,
        credentials: &[CredentialGrant],
        limits: HttpLimits,
        env: &BTreeMap<String, String>,
        tls: std::sync::Arc<rustls::ClientConfig>,
    ) -> Self {
        let credentials = credentials
            .iter()
            .map(|grant| {
                let header = HeaderName::from_bytes(grant.rule.header.as_bytes())
                    .expect("checked when the configuration was read");
                let mut secrets: Vec<Vec<u8>> = grant
                    .rule
                    .vars
                    .iter()
                    .filter_map(|v| env.get(v))
                    .filter(|v| v.len() >= MIN_SECRET_LEN)
                    .map(|v| v.as_bytes().to_vec())
                    .collect();
                let value = match fill_template(&grant.rule.value, env) {
                    Ok(text) => {
                        secrets.push(text.as_bytes().to_vec());
                        HeaderValue::from_str(&text).map(|mut v| {
                            v.set_sensitive(true);
                            v
                        }).map_err(|_| {
                            format!(
                                "the credential for {} is not a valid header value (check {})",
                                grant.origin,
                                grant.rule.vars.join(", ")
                            )
                        })
                    }
                    Err(missing) => Err(format!(
                        "the credential for {} needs {}, which is not set in sandcrab's environment",
                        grant.origin,
                        missing.join(", ")
                    )),
                };
                secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
                Credential {
                    grant: grant.clone(),
                    header,
                    value,
                    secrets,
                }
            })
            .collect();
        HttpEgress {
            plugin: plugin.to_string(),
            requested,
            rules,
            credentials,
            limits,
            config_file: crate::user_files::config_file_shown(),
            pool: Default::default(),
            tls,
        }
    }

    /// Whether the plugin may make any request at all.
    pub fn any(&self) -> bool {
        !self.rules.is_empty()
    }

    /// The rule that lets `method` to `origin` out, or the refusal.
    pub fn rule_for(&self, method: &str, origin: &RequestOrigin) -> Result<&HttpRule, String> {
        let matching: Vec<&HttpRule> = self
            .rules
            .iter()
            .filter(|r| r.origin.matches(origin))
            .collect();
        if let Some(rule) = matching
            .iter()
            .find(|r| r.methods.is_empty() || r.methods.iter().any(|m| m == method))
        {
            return Ok(rule);
        }
        if let Some(rule) = matching.first() {
            return Err(format!(
                "{method} to {origin} is not granted to plugin '{}' (granted methods: {}); {}",
                self.plugin,
                rule.methods.join(", "),
                self.hint(&format!(
                    "{{ origin = \"{}\", methods = [\"{method}\"] }}",
                    rule.origin
                ))
            ));
        }
        let plain = origin.scheme == super::origin::Scheme::Http
            && self.rules.iter().any(|r| {
                r.origin.scheme == super::origin::Scheme::Https
                    && r.origin.matches(&RequestOrigin {
                        scheme: super::origin::Scheme::Https,
                        port: r.origin.port,
                        host: origin.host.clone(),
                    })
            });
        if plain {
            return Err(format!(
                "plain http to {} is not granted to plugin '{}' (only https): use https, or, if the server has no TLS, the manifest asks for and the operator grants \"{origin}\"",
                origin.host, self.plugin
            ));
        }
        let asked = self.requested.iter().any(|p| p.matches(origin));
        if !asked {
            let listed = if self.requested.is_empty() {
                "none".to_string()
            } else {
                self.requested
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(format!(
                "plugin '{}' does not ask for {origin} in its manifest ([capabilities] http lists: {listed}); a plugin reaches only origins its manifest asks for and the operator grants",
                self.plugin
            ));
        }
        Err(format!(
            "{origin} is not granted to plugin '{}'; {}",
            self.plugin,
            self.hint(&format!("\"{origin}\""))
        ))
    }

    fn hint(&self, entry: &str) -> String {
        format!(
            "grant it with [policy.plugins.{}] http = [{entry}] in {}",
            self.plugin, self.config_file
        )
    }

    /// The credential for requests to `origin` (an exact pattern before a
    /// wildcard).
    pub fn credential_for(&self, origin: &RequestOrigin) -> Option<&Credential> {
        let mut matching = self
            .credentials
            .iter()
            .filter(|c| c.grant.origin.matches(origin));
        let exact = matching
            .clone()
            .find(|c| !matches!(c.grant.origin.host, super::origin::HostPattern::Below(_)));
        exact.or_else(|| matching.next())
    }

    /// Of `addrs` (what `origin`'s host resolved to), those `rule` lets
    /// the plugin reach, or the refusal.
    pub fn reachable(
        &self,
        rule: &HttpRule,
        origin: &RequestOrigin,
        addrs: &[IpAddr],
    ) -> Result<Vec<IpAddr>, String> {
        if rule.origin.names_address() || rule.private {
            return Ok(addrs.to_vec());
        }
        let allowed: Vec<IpAddr> = addrs
            .iter()
            .copied()
            .filter(|a| restricted_kind(*a).is_none())
            .collect();
        if !allowed.is_empty() {
            return Ok(allowed);
        }
        let shown: Vec<String> = addrs
            .iter()
            .map(|a| format!("{a} ({})", restricted_kind(*a).unwrap_or("public")))
            .collect();
        Err(format!(
            "{} resolves to {}; a host name granted to a plugin reaches only public addresses. Grant the address itself (\"{}\") or add private = true to the grant of {} in {}",
            origin.host,
            shown.join(", "),
            addrs
                .first()
                .map(|a| RequestOrigin {
                    host: a.to_string(),
                    ..origin.clone()
                }
                .to_string())
                .unwrap_or_default(),
            rule.origin,
            self.config_file
        ))
    }

    /// Replace every secret in `bytes` by a marker naming the credential.
    pub fn redact(&self, bytes: &mut Vec<u8>) -> bool {
        let mut changed = false;
        for credential in &self.credentials {
            for secret in &credential.secrets {
                if let Some(out) = replace_all(bytes, secret, credential.marker().as_bytes()) {
                    *bytes = out;
                    changed = true;
                }
            }
        }
        changed
    }
}

impl Credential {
    fn marker(&self) -> String {
        format!(
            "[credential {} withheld by sandcrab]",
            self.grant.rule.header
        )
    }
}

/// Shorter values are not searched for (they would match by chance).
const MIN_SECRET_LEN: usize = 6;

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    let finder = memchr::memmem::Finder::new(needle);
    let mut hits = finder.find_iter(haystack).peekable();
    hits.peek()?;
    let mut out = Vec::with_capacity(haystack.len());
    let mut at = 0;
    for hit in hits {
        if hit < at {
            continue;
        }
        out.extend_from_slice(&haystack[at..hit]);
        out.extend_from_slice(with);
        at = hit + needle.len();
    }
    out.extend_from_slice(&haystack[at..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::grant::CredentialRule;

    fn egress(rules: &[&str], creds: &[(&str, &str)], env: &[(&str, &str)]) -> HttpEgress {
        let rules: Vec<HttpRule> = rules
            .iter()
            .map(|r| HttpRule {
                origin: r.parse().unwrap(),
                methods: vec![],
                private: false,
            })
            .collect();
        let credentials: Vec<CredentialGrant> = creds
            .iter()
            .map(|(o, v)| CredentialGrant {
                origin: o.parse().unwrap(),
                rule: CredentialRule {
                    header: "authorization".into(),
                    value: v.to_string(),
                    vars: vec!["TOKEN".into()],
                },
            })
            .collect();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        HttpEgress::new(
            "probe",
            rules.iter().map(|r| r.origin.clone()).collect(),
            rules,
            &credentials,
            HttpLimits {
                request_bytes: 1 << 20,
                response_bytes: 1 << 20,
                timeout_ms: 1000,
                concurrent: 2,
                held_bytes: 1 << 20,
            },
            &env,
            crate::tls::client_config(&[]).unwrap(),
        )
    }

    fn origin(url: &str) -> RequestOrigin {
        RequestOrigin::of(&url.parse().unwrap()).unwrap()
    }

    #[test]
    fn refusals_name_the_grant_to_add() {
        let e = egress(&["https://api.example.com"], &[], &[]);
        let err = e
            .rule_for("GET", &origin("http://api.example.com/x"))
            .unwrap_err();
        assert!(
            err.contains("plain http to api.example.com is not granted"),
            "{err}"
        );
        let err = e
            .rule_for("GET", &origin("https://other.example.com/"))
            .unwrap_err();
        assert!(
            err.contains("does not ask for https://other.example.com"),
            "{err}"
        );
    }

    #[test]
    fn names_reach_public_addresses_only() {
        let e = egress(&["http://localhost:8080"], &[], &[]);
        let o = origin("http://localhost:8080/");
        let rule = e.rule_for("GET", &o).unwrap();
        let err = e
            .reachable(rule, &o, &["127.0.0.1".parse().unwrap()])
            .unwrap_err();
        assert!(err.contains("127.0.0.1 (loopback)"), "{err}");
        assert!(err.contains("\"http://127.0.0.1:8080\""), "{err}");
        let mixed = [
            "127.0.0.1".parse().unwrap(),
            "93.184.216.34".parse().unwrap(),
        ];
        assert_eq!(
            e.reachable(rule, &o, &mixed).unwrap(),
            vec!["93.184.216.34".parse::<IpAddr>().unwrap()]
        );
    }

    #[test]
    fn secrets_are_withheld_and_missing_variables_named() {
        let e = egress(
            &["https://api.example.com"],
            &[("https://api.example.com", "Bearer ${TOKEN}")],
            &[("TOKEN", "tok-123456")],
        );
        let mut body = b"{\"echo\":\"Bearer tok-123456\",\"raw\":\"tok-123456\"}".to_vec();
        assert!(e.redact(&mut body));
        let text = String::from_utf8(body).unwrap();
        assert!(!text.contains("tok-123456"), "{text}");
        assert!(
            format!("{:?}", e.credentials)
                .contains("authorization for https://api.example.com from $TOKEN")
        );
        let missing = egress(
            &["https://api.example.com"],
            &[("https://api.example.com", "Bearer ${TOKEN}")],
            &[],
        );
        let err = missing.credentials[0].value().unwrap_err();
        assert!(err.contains("needs TOKEN"), "{err}");
    }
}
