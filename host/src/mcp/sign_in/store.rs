//! Where a server's sign-in is kept: one owner-only file per server in
//! sandcrab's data folder (a secret of the registry of what the host
//! keeps: no confined program and no file tool reads it), bound to the
//! URL it was issued for — a server whose URL changed is not sent the old
//! server's token.

use std::path::PathBuf;

use async_trait::async_trait;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde::{Deserialize, Serialize};

/// The folder of sign-ins in the data folder.
pub const FOLDER: &str = "mcp-sign-in";

/// What the file holds: the credentials, the URL they are for, and the
/// scopes a call was refused for want of (step-up: asked for at the next
/// sign-in).
#[derive(Serialize, Deserialize)]
struct Kept {
    url: String,
    credentials: StoredCredentials,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    wanted: Vec<String>,
}

/// What a server's sign-in file holds.
pub enum SignIn {
    /// Credentials for the URL configured now.
    Here(Box<StoredCredentials>),
    /// A sign-in for another URL (the configuration changed since).
    ForAnotherUrl(String),
    /// Nothing (or nothing readable).
    None,
}

/// The sign-in of server `server` at `url`.
#[derive(Debug, Clone)]
pub struct SignInStore {
    path: PathBuf,
    url: String,
}

/// A server name that cannot name a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "MCP server name '{0}' cannot be signed in to: use letters, digits, '-' and '_' (rename [mcp.servers.{0}])"
)]
pub struct BadServerName(pub String);

impl SignInStore {
    /// The store of `server` at `url`, in `data_dir`.
    pub fn new(data_dir: &std::path::Path, server: &str, url: &str) -> Result<Self, BadServerName> {
        let plain = !server.is_empty()
            && server.len() <= 64
            && server
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !plain {
            return Err(BadServerName(server.to_string()));
        }
        Ok(SignInStore {
            path: data_dir.join(FOLDER).join(format!("{server}.json")),
            url: url.to_string(),
        })
    }

    /// Where it is kept.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn kept(&self) -> Option<Kept> {
        std::fs::read(&self.path)
            .ok()
            .and_then(|text| serde_json::from_slice::<Kept>(&text).ok())
    }

    /// What is kept.
    pub fn state(&self) -> SignIn {
        match self.kept() {
            Some(kept) if kept.url == self.url => SignIn::Here(Box::new(kept.credentials)),
            Some(kept) => SignIn::ForAnotherUrl(kept.url),
            None => SignIn::None,
        }
    }

    /// What is kept, when it is for this URL.
    pub fn read(&self) -> Option<StoredCredentials> {
        match self.state() {
            SignIn::Here(credentials) => Some(*credentials),
            _ => None,
        }
    }

    /// The scopes the next sign-in asks for beyond the configured ones:
    /// those granted before and those a refused call needed (empty when
    /// no call was refused for want of scope since the last sign-in).
    pub fn step_up_scopes(&self) -> Vec<String> {
        let Some(kept) = self.kept().filter(|kept| kept.url == self.url) else {
            return Vec::new();
        };
        if kept.wanted.is_empty() {
            return Vec::new();
        }
        let mut scopes = kept.credentials.granted_scopes;
        for scope in kept.wanted {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes
    }

    /// Keep `scopes` (space-separated, as a challenge names them) for the
    /// next sign-in; an error when there is no sign-in to add them to.
    pub fn want(&self, scopes: &str) -> std::io::Result<()> {
        let Some(mut kept) = self.kept().filter(|kept| kept.url == self.url) else {
            return Err(std::io::Error::other("not signed in"));
        };
        for scope in scopes.split_whitespace() {
            if !kept.wanted.iter().any(|w| w == scope) {
                kept.wanted.push(scope.to_string());
            }
        }
        self.write_kept(&kept)
    }

    /// Forget it; true if there was one.
    pub fn remove(&self) -> std::io::Result<bool> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Keep `credentials`; the scopes still wanted are those they do not
    /// grant.
    fn write(&self, credentials: StoredCredentials) -> std::io::Result<()> {
        let wanted = self
            .kept()
            .filter(|kept| kept.url == self.url)
            .map(|kept| kept.wanted)
            .unwrap_or_default()
            .into_iter()
            .filter(|scope| !credentials.granted_scopes.contains(scope))
            .collect();
        self.write_kept(&Kept {
            url: self.url.clone(),
            credentials,
            wanted,
        })
    }

    fn write_kept(&self, kept: &Kept) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = self.path.parent().expect("a file in a folder");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let text = serde_json::to_vec(kept).map_err(std::io::Error::other)?;
        // Written whole beside it, owner-only, then moved over it.
        // A name of its own: another sandcrab refreshing at the same
        // moment never moves this half-written file into place.
        let partial = self
            .path
            .with_extension(format!("partial-{}", uuid::Uuid::new_v4().simple()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)?;
        let written = file
            .write_all(&text)
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&partial, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        written
    }
}

#[async_trait]
impl CredentialStore for SignInStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.read())
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(credentials).map_err(|e| {
            AuthError::CredentialStoreError(format!(
                "cannot keep the sign-in in {}: {e}",
                self.path.display()
            ))
        })
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remove().map(|_| ()).map_err(|e| {
            AuthError::CredentialStoreError(format!("cannot remove {}: {e}", self.path.display()))
        })
    }
}
