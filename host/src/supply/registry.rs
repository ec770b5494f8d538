//! The OCI distribution API, as much as installing and publishing a
//! plugin needs: resolve a tag or digest to a manifest, fetch blobs, push
//! blobs and a manifest. Anonymous bearer tokens are fetched when a
//! registry asks for one (`WWW-Authenticate: Bearer realm=…`).

use std::path::Path;

use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, WWW_AUTHENTICATE,
};
use reqwest::{Method, StatusCode};

use super::artifact::{self, Descriptor, MAX_OCI_MANIFEST};
use super::download::{self, DownloadError};
use super::reference::OciRef;
use crate::llm::is_loopback;

/// A registry, reached as one repository's client.
pub struct Registry {
    http: download::Http,
    reference: OciRef,
    base: url::Url,
    token: Option<String>,
    /// Whether the registry was asked once whether it wants a token.
    probed: bool,
}

/// A manifest as resolved: its digest and bytes.
pub struct Resolved {
    pub digest: String,
    pub bytes: Vec<u8>,
}

impl Registry {
    /// A client for `reference`'s repository, over `http`.
    pub fn new(reference: &OciRef, http: &download::Http) -> Result<Registry, DownloadError> {
        let base = url::Url::parse(&format!("{}://{}/", reference.scheme(), reference.registry))
            .map_err(|e| DownloadError::Transport {
                url: reference.to_string(),
                reason: e.to_string(),
            })?;
        Ok(Registry {
            http: http.clone(),
            reference: reference.clone(),
            base,
            token: None,
            probed: false,
        })
    }

    fn url(&self, path: &str) -> url::Url {
        self.base
            .join(&format!("v2/{}/{path}", self.reference.repository))
            .expect("a path of validated parts")
    }

    fn headers(&self, extra: &[(reqwest::header::HeaderName, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(token) = &self.token
            && let Ok(value) = HeaderValue::from_str(&format!("Bearer {token}"))
        {
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in extra {
            headers.insert(name.clone(), HeaderValue::from_str(value).expect("ASCII"));
        }
        headers
    }

    /// Send, fetching an anonymous token once if the registry asks.
    async fn send(
        &mut self,
        method: Method,
        url: &url::Url,
        extra: &[(reqwest::header::HeaderName, &str)],
        body: Option<Vec<u8>>,
    ) -> Result<reqwest::Response, DownloadError> {
        let response = download::send(
            &self.http,
            method.clone(),
            url,
            &self.headers(extra),
            body.clone(),
        )
        .await?;
        if response.status() != StatusCode::UNAUTHORIZED || self.token.is_some() {
            return Ok(response);
        }
        let Some(challenge) = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
        else {
            return Ok(response);
        };
        self.token = Some(self.anonymous_token(&challenge, url).await?);
        download::send(&self.http, method, url, &self.headers(extra), body).await
    }

    /// An anonymous token from the realm a `Bearer` challenge names.
    async fn anonymous_token(
        &self,
        challenge: &str,
        asked: &url::Url,
    ) -> Result<String, DownloadError> {
        let refused = |reason: String| DownloadError::Transport {
            url: asked.to_string(),
            reason,
        };
        let params = challenge.strip_prefix("Bearer ").ok_or_else(|| {
            refused(format!(
                "the registry asks for '{challenge}'; only anonymous bearer tokens are supported"
            ))
        })?;
        let mut realm = None;
        let mut query = Vec::new();
        for part in split_params(params) {
            if let Some((k, v)) = part.split_once('=') {
                let v = v.trim_matches('"').to_string();
                match k.trim() {
                    "realm" => realm = Some(v),
                    k @ ("service" | "scope") => query.push((k.to_string(), v)),
                    _ => {}
                }
            }
        }
        let mut realm = url::Url::parse(
            &realm.ok_or_else(|| refused("a Bearer challenge without a realm".into()))?,
        )
        .map_err(|e| refused(format!("the token realm: {e}")))?;
        // The realm may be another host (Docker Hub's auth.docker.io), but
        // only over https; plain http only where the registry itself is
        // on this machine. A realm is asked with its parameters only, so
        // it cannot carry a request of its own to some local service.
        let local = is_loopback(self.base.host()) && is_loopback(realm.host());
        if realm.scheme() != "https" && !local {
            return Err(refused(format!("the token realm {realm} is not https")));
        }
        if realm.query().is_some() || realm.fragment().is_some() {
            return Err(refused(format!(
                "the token realm {realm} carries a query of its own"
            )));
        }
        realm.query_pairs_mut().extend_pairs(query);
        let response =
            download::send(&self.http, Method::GET, &realm, &HeaderMap::new(), None).await?;
        if !response.status().is_success() {
            return Err(download::status_error(response).await);
        }
        let body = download::body(response, 64 << 10).await?;
        let json: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| refused(format!("the token answer is not JSON: {e}")))?;
        json.get("token")
            .or_else(|| json.get("access_token"))
            .and_then(|t| t.as_str())
            .map(str::to_string)
            .ok_or_else(|| refused("the token answer has no token".into()))
    }

    /// The manifest `reference` names (its digest, if given, else its
    /// tag), checked: bounded, and by the digest asked for.
    pub async fn resolve(&mut self) -> Result<Resolved, DownloadError> {
        let url = self.url(&format!("manifests/{}", self.reference.manifest_ref()));
        let response = self
            .send(Method::GET, &url, &[(ACCEPT, artifact::OCI_MANIFEST)], None)
            .await?;
        if !response.status().is_success() {
            return Err(download::status_error(response).await);
        }
        let said = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = download::body(response, MAX_OCI_MANIFEST).await?;
        let digest = artifact::digest_of(&bytes);
        // What was asked by digest must be what came; a digest the
        // registry states must be the content's.
        for expected in [self.reference.digest.clone(), said].into_iter().flatten() {
            if expected != digest {
                return Err(DownloadError::Digest {
                    url: url.to_string(),
                    expected: expected.trim_start_matches("sha256:").to_string(),
                    actual: digest.trim_start_matches("sha256:").to_string(),
                });
            }
        }
        Ok(Resolved { digest, bytes })
    }

    /// The blob `d` names, at most `bound` bytes, through `partial`.
    pub async fn blob(
        &mut self,
        d: &Descriptor,
        bound: u64,
        partial: &Path,
    ) -> Result<Vec<u8>, DownloadError> {
        let url = self.url(&format!("blobs/{}", d.digest));
        let hex = d.hex().map_err(|reason| DownloadError::Transport {
            url: url.to_string(),
            reason,
        })?;
        // A token first, if the registry wants one (the blob request
        // itself is not repeated).
        if self.token.is_none() && !self.probed {
            self.probed = true;
            drop(self.send(Method::HEAD, &url, &[], None).await?);
        }
        download::blob(
            &self.http,
            &url,
            &self.headers(&[]),
            hex,
            bound.min(d.size),
            partial,
        )
        .await
    }

    /// Push `blobs` and then the manifest `bytes` under `tag`; the
    /// manifest's digest.
    pub async fn push(
        &mut self,
        tag: &str,
        manifest: &[u8],
        blobs: &[(Descriptor, Vec<u8>)],
    ) -> Result<String, DownloadError> {
        for (d, bytes) in blobs {
            let url = self.url(&format!("blobs/{}", d.digest));
            if self
                .send(Method::HEAD, &url, &[], None)
                .await?
                .status()
                .is_success()
            {
                continue;
            }
            let start = self.url("blobs/uploads/");
            let response = self.send(Method::POST, &start, &[], None).await?;
            if response.status() != StatusCode::ACCEPTED {
                return Err(download::status_error(response).await);
            }
            let mut upload = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .and_then(|l| start.join(l).ok())
                .ok_or_else(|| DownloadError::Transport {
                    url: start.to_string(),
                    reason: "the upload answer has no Location".into(),
                })?;
            if !download::same_host(&start, &upload) {
                return Err(DownloadError::OtherHost {
                    from: start.to_string(),
                    to: upload.to_string(),
                });
            }
            upload.query_pairs_mut().append_pair("digest", &d.digest);
            let response = self
                .send(
                    Method::PUT,
                    &upload,
                    &[(CONTENT_TYPE, "application/octet-stream")],
                    Some(bytes.clone()),
                )
                .await?;
            if response.status() != StatusCode::CREATED {
                return Err(download::status_error(response).await);
            }
        }
        let url = self.url(&format!("manifests/{tag}"));
        let response = self
            .send(
                Method::PUT,
                &url,
                &[(CONTENT_TYPE, artifact::OCI_MANIFEST)],
                Some(manifest.to_vec()),
            )
            .await?;
        if response.status() != StatusCode::CREATED {
            return Err(download::status_error(response).await);
        }
        Ok(artifact::digest_of(manifest))
    }
}

/// The comma-separated parameters of a challenge (commas inside quotes
/// kept).
fn split_params(params: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in params.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                out.last_mut().expect("one").push(c);
            }
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("one").push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn challenge_parameters_keep_quoted_commas() {
        let parts = super::split_params(
            r#"realm="https://a/token",service="r",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(parts.len(), 3);
        assert!(parts[2].ends_with("pull,push\""));
    }
}
