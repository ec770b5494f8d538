//! What the operator writes to let a plugin make HTTP requests, and what
//! the plugin ends up with: the origins both its manifest and the grant
//! allow (with the grant's methods), and the credentials the host adds.
//!
//! ```toml
//! [policy.plugins.tracker]
//! http = ["https://api.github.com", { origin = "http://10.0.0.5:8080", methods = ["GET"], private = true }]
//!
//! [policy.plugins.tracker.credentials."https://api.github.com"]
//! header = "Authorization"
//! value = "Bearer ${GITHUB_TOKEN}"   # from the operator's environment
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::origin::OriginPattern;

/// One granted origin: a plain pattern, or a table with restrictions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HttpGrant {
    pub origin: OriginPattern,
    /// Methods allowed (upper case); empty: any.
    pub methods: Vec<String>,
    /// Names may resolve to private, loopback or link-local addresses
    /// (an internal API). Without it only a grant written as an address
    /// reaches such an address.
    pub private: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantTable {
    origin: OriginPattern,
    #[serde(default)]
    methods: Vec<String>,
    #[serde(default)]
    private: bool,
}

impl<'de> Deserialize<'de> for HttpGrant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = HttpGrant;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an origin (\"https://api.github.com\") or a table { origin, methods, private }")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<HttpGrant, E> {
                Ok(HttpGrant {
                    origin: text.parse().map_err(E::custom)?,
                    methods: Vec::new(),
                    private: false,
                })
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<HttpGrant, A::Error> {
                let table =
                    GrantTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                let mut methods = Vec::new();
                for m in table.methods {
                    let upper = m.to_ascii_uppercase();
                    if upper.is_empty() || !upper.bytes().all(|b| b.is_ascii_uppercase()) {
                        return Err(serde::de::Error::custom(format!(
                            "method '{m}' is not an HTTP method (GET, POST, …)"
                        )));
                    }
                    methods.push(upper);
                }
                Ok(HttpGrant {
                    origin: table.origin,
                    methods,
                    private: table.private,
                })
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A header the host adds to a plugin's requests to one origin, its value
/// made from the operator's environment (`${NAME}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CredentialRule {
    /// The header's name (lower case).
    pub header: String,
    /// The value's template: literal text and `${VAR}` references.
    pub value: String,
    /// The variables the value is made from.
    pub vars: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialTable {
    header: String,
    value: String,
}

impl<'de> Deserialize<'de> for CredentialRule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = CredentialTable::deserialize(d)?;
        let header = http::HeaderName::from_bytes(table.header.as_bytes()).map_err(|_| {
            serde::de::Error::custom(format!("'{}' is not a header name", table.header))
        })?;
        if wasmtime_wasi_http::DEFAULT_FORBIDDEN_HEADERS.contains(&header) {
            return Err(serde::de::Error::custom(format!(
                "the host sets '{header}' itself; a credential cannot"
            )));
        }
        let vars = template_vars(&table.value).map_err(serde::de::Error::custom)?;
        if vars.is_empty() {
            return Err(serde::de::Error::custom(
                "a credential's value names the environment variable it comes from, e.g. \"Bearer ${GITHUB_TOKEN}\" (a secret written into the file would be readable by anything that reads the configuration)",
            ));
        }
        Ok(CredentialRule {
            header: header.as_str().to_string(),
            value: table.value,
            vars,
        })
    }
}

/// The `${NAME}` references of a template.
fn template_vars(template: &str) -> Result<Vec<String>, String> {
    let mut vars = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("'${{' without its '}}' in \"{template}\""))?;
        let name = &after[..end];
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(format!("'${{{name}}}' is not an environment variable name"));
        }
        vars.push(name.to_string());
        rest = &after[end + 1..];
    }
    Ok(vars)
}

/// Fill a template from `env`; the names of the variables that are not
/// set, when any is missing.
pub fn fill_template(
    template: &str,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<String, Vec<String>> {
    let mut out = String::new();
    let mut missing = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        match env.get(name).filter(|v| !v.is_empty()) {
            Some(value) => out.push_str(value),
            None => missing.push(name.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if missing.is_empty() {
        Ok(out)
    } else {
        Err(missing)
    }
}

/// An origin a plugin may reach: requested by its manifest and granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpRule {
    pub origin: OriginPattern,
    /// Empty: any method.
    pub methods: Vec<String>,
    pub private: bool,
}

impl HttpRule {
    /// `https://api.github.com (GET, POST; private addresses)`.
    pub fn describe(&self) -> String {
        let mut notes = Vec::new();
        if !self.methods.is_empty() {
            notes.push(self.methods.join(", "));
        }
        if self.private {
            notes.push("private addresses".into());
        }
        if notes.is_empty() {
            self.origin.to_string()
        } else {
            format!("{} ({})", self.origin, notes.join("; "))
        }
    }
}

/// A credential the plugin's requests to `origin` get.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CredentialGrant {
    pub origin: OriginPattern,
    pub rule: CredentialRule,
}

impl CredentialGrant {
    /// `Authorization for https://api.github.com from $GITHUB_TOKEN`: names
    /// only.
    pub fn describe(&self) -> String {
        let vars: Vec<String> = self.rule.vars.iter().map(|v| format!("${v}")).collect();
        format!(
            "{} for {} from {}",
            self.rule.header,
            self.origin,
            vars.join(", ")
        )
    }
}

/// The origins `requested` ∩ `granted`: where a request pattern lies
/// inside a grant, the request; where a grant lies inside a request
/// pattern, the grant (both wildcards nest or are apart, so this is the
/// exact intersection). Methods and `private` come from the grant.
pub fn intersect(requested: &[OriginPattern], granted: &[HttpGrant]) -> Vec<HttpRule> {
    let mut out: Vec<HttpRule> = Vec::new();
    for want in requested {
        for grant in granted {
            let origin = if grant.origin.covers(want) {
                want.clone()
            } else if want.covers(&grant.origin) {
                grant.origin.clone()
            } else {
                continue;
            };
            let rule = HttpRule {
                origin,
                methods: grant.methods.clone(),
                private: grant.private,
            };
            if !out.contains(&rule) {
                out.push(rule);
            }
        }
    }
    out
}

/// The credentials of `credentials` whose origin overlaps one of `rules`;
/// the others are returned apart (the operator named an origin the plugin
/// does not get).
pub fn usable_credentials(
    credentials: &BTreeMap<OriginPattern, CredentialRule>,
    rules: &[HttpRule],
) -> (Vec<CredentialGrant>, Vec<OriginPattern>) {
    let mut usable = Vec::new();
    let mut unused = Vec::new();
    for (origin, rule) in credentials {
        if rules
            .iter()
            .any(|r| r.origin.covers(origin) || origin.covers(&r.origin))
        {
            usable.push(CredentialGrant {
                origin: origin.clone(),
                rule: rule.clone(),
            });
        } else {
            unused.push(origin.clone());
        }
    }
    (usable, unused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: &str) -> OriginPattern {
        t.parse().unwrap()
    }

    #[test]
    fn a_plugin_gets_only_what_it_asked_for_and_was_granted() {
        let granted = vec![
            HttpGrant {
                origin: p("https://api.example.com"),
                methods: vec!["GET".into()],
                private: false,
            },
            HttpGrant {
                origin: p("https://*.corp.net"),
                methods: vec![],
                private: true,
            },
        ];
        let rules = intersect(
            &[
                p("https://*.example.com"),
                p("https://ci.corp.net"),
                p("https://api.github.com"),
            ],
            &granted,
        );
        let shown: Vec<String> = rules.iter().map(HttpRule::describe).collect();
        assert_eq!(
            shown,
            [
                "https://api.example.com (GET)",
                "https://ci.corp.net (private addresses)"
            ]
        );
    }

    #[test]
    fn templates_name_their_variables_and_fill_from_the_environment() {
        assert_eq!(
            template_vars("Bearer ${GITHUB_TOKEN}").unwrap(),
            ["GITHUB_TOKEN"]
        );
        assert!(template_vars("Bearer ${GITHUB").is_err());
        assert!(template_vars("${A B}").is_err());
        let env = [("T".to_string(), "s3cret".to_string())].into();
        assert_eq!(fill_template("token ${T}", &env).unwrap(), "token s3cret");
        assert_eq!(
            fill_template("${T}:${U}", &env).unwrap_err(),
            vec!["U".to_string()]
        );
    }
}
