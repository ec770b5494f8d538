//! Where a server's sign-in is kept: one owner-only file per server in
//! sandcrab's data folder (a secret of the registry of what the host
//! keeps: no confined program and no file tool reads it), bound to the
//! URL it was issued for — a server whose URL changed is not sent the old
//! server's token.

use std::path::PathBuf;

use async_trait::async_trait;
use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, StoredCredentials,
};
use serde::{Deserialize, Serialize};

/// The folder of sign-ins in the data folder.
pub const FOLDER: &str = "mcp-sign-in";

/// What the file holds: the credentials and the URL they are for.
#[derive(Serialize, Deserialize)]
struct Kept {
    url: String,
    credentials: StoredCredentials,
}

/// The scopes calls were refused for want of (step-up: asked for at the
/// next sign-in), in a file of their own beside the sign-in: recording
/// them never rewrites the credentials a refresh may be writing.
#[derive(Serialize, Deserialize, Default)]
struct Wanted {
    url: String,
    scopes: Vec<String>,
}

/// Most scopes kept for the next sign-in.
pub const MAX_WANTED_SCOPES: usize = 16;
/// Longest scope kept.
const MAX_SCOPE_CHARS: usize = 128;

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

    fn wanted_path(&self) -> PathBuf {
        self.path.with_extension("scopes.json")
    }

    /// The scopes wanted for this URL.
    pub fn wanted(&self) -> Vec<String> {
        std::fs::read(self.wanted_path())
            .ok()
            .and_then(|text| serde_json::from_slice::<Wanted>(&text).ok())
            .filter(|w| w.url == self.url)
            .map(|w| w.scopes)
            .unwrap_or_default()
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
        let wanted = self.wanted();
        if wanted.is_empty() {
            return Vec::new();
        }
        let mut scopes = self.read().map(|c| c.granted_scopes).unwrap_or_default();
        for scope in wanted {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes
    }

    /// Keep `scopes` (space-separated, as a challenge names them) for the
    /// next sign-in; the scopes newly kept. Only well-formed scope tokens
    /// (RFC 6749), at most [`MAX_WANTED_SCOPES`]; an error when there is
    /// no sign-in to add them to.
    pub fn want(&self, scopes: &str) -> std::io::Result<Vec<String>> {
        if self.read().is_none() {
            return Err(std::io::Error::other("not signed in"));
        }
        let mut wanted = self.wanted();
        let mut added = Vec::new();
        for scope in scopes.split_whitespace().filter(|s| scope_token(s)) {
            if !wanted.iter().any(|w| w == scope) && wanted.len() < MAX_WANTED_SCOPES {
                wanted.push(scope.to_string());
                added.push(scope.to_string());
            }
        }
        if !added.is_empty() {
            self.write_wanted(wanted)?;
        }
        Ok(added)
    }

    fn write_wanted(&self, scopes: Vec<String>) -> std::io::Result<()> {
        let path = self.wanted_path();
        if scopes.is_empty() {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        let wanted = Wanted {
            url: self.url.clone(),
            scopes,
        };
        let text = serde_json::to_vec(&wanted).map_err(std::io::Error::other)?;
        write_owner_only(&path, &text)
    }

    /// Forget it (and the scopes wanted); true if there was one.
    pub fn remove(&self) -> std::io::Result<bool> {
        self.write_wanted(Vec::new())?;
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Keep `credentials`; the scopes still wanted are those they do not
    /// grant.
    fn write(&self, credentials: StoredCredentials) -> std::io::Result<()> {
        let wanted = self.wanted();
        if !wanted.is_empty() {
            let still: Vec<String> = wanted
                .into_iter()
                .filter(|scope| !credentials.granted_scopes.contains(scope))
                .collect();
            self.write_wanted(still)?;
        }
        let kept = Kept {
            url: self.url.clone(),
            credentials,
        };
        let text = serde_json::to_vec(&kept).map_err(std::io::Error::other)?;
        write_owner_only(&self.path, &text)
    }
}

/// `path`, created owner-only if need be, locked exclusively (waiting
/// for another holder); the lock goes with the file.
fn lock_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().expect("a file in a folder");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    file.lock()?;
    Ok(file)
}

/// A scope token as RFC 6749 §3.3 defines it, of a sane length.
fn scope_token(scope: &str) -> bool {
    scope.len() <= MAX_SCOPE_CHARS
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// Write `text` to `path` whole, owner-only: beside it, then moved over
/// it. A name of its own: another sandcrab writing at the same moment
/// never moves this half-written file into place.
fn write_owner_only(path: &std::path::Path, text: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().expect("a file in a folder");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let partial = path.with_extension(format!("partial-{}", uuid::Uuid::new_v4().simple()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&partial)?;
    let written = file
        .write_all(text)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
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

    /// A refresh holds an exclusive lock on `NAME.lock` beside the sign-in
    /// through the token request and its save: two sandcrab processes
    /// refreshing at once take turns, and the second refreshes with the
    /// token the first saved (a rotating refresh token is never spent
    /// twice).
    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let path = self.path.with_extension("lock");
        let locked = tokio::task::spawn_blocking(move || lock_file(&path))
            .await
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?
            .map_err(|e| {
                AuthError::CredentialStoreError(format!(
                    "cannot lock the sign-in for a refresh: {e}"
                ))
            })?;
        Ok(Some(CredentialRefreshGuard::new(locked)))
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.remove().map(|_| ()).map_err(|e| {
            AuthError::CredentialStoreError(format!("cannot remove {}: {e}", self.path.display()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signed_in(dir: &std::path::Path) -> SignInStore {
        let store = SignInStore::new(dir, "srv", "https://mcp.example/mcp").unwrap();
        let credentials = StoredCredentials::new("client".into(), None, vec!["read".into()], None);
        store.write(credentials).unwrap();
        store
    }

    #[test]
    fn only_well_formed_new_scopes_are_kept_and_within_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let store = signed_in(dir.path());
        let added = store.want("write bad\"quote sp\\ace é read").unwrap();
        assert_eq!(added, ["write", "read"]);
        assert_eq!(store.step_up_scopes(), ["read", "write"]);
        // Nothing new: the file is not written again.
        let before = std::fs::metadata(store.wanted_path())
            .unwrap()
            .modified()
            .unwrap();
        assert!(store.want("write").unwrap().is_empty());
        let after = std::fs::metadata(store.wanted_path())
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(before, after);
        let many: Vec<String> = (0..100).map(|i| format!("s{i}")).collect();
        store.want(&many.join(" ")).unwrap();
        assert_eq!(store.wanted().len(), MAX_WANTED_SCOPES);
    }

    #[test]
    fn a_sign_in_that_grants_them_clears_the_wanted_scopes_and_keeps_the_token_file_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = signed_in(dir.path());
        store.want("write admin").unwrap();
        let granted = StoredCredentials::new(
            "client".into(),
            None,
            vec!["read".into(), "write".into()],
            None,
        );
        store.write(granted).unwrap();
        assert_eq!(store.wanted(), ["admin"]);
        // Wanting never rewrote the credentials.
        assert_eq!(store.read().unwrap().granted_scopes, ["read", "write"]);
        assert!(store.remove().unwrap());
        assert!(store.wanted().is_empty() && !store.wanted_path().exists());
        // Not signed in: nothing to add to.
        assert!(store.want("write").is_err());
    }

    #[tokio::test]
    async fn refreshes_of_one_sign_in_take_turns() {
        let dir = tempfile::tempdir().unwrap();
        let store = signed_in(dir.path());
        let first = store.acquire_refresh_guard().await.unwrap().unwrap();
        // Another process's refresh (another open file) waits for it.
        let other = std::fs::OpenOptions::new()
            .write(true)
            .open(store.path.with_extension("lock"))
            .unwrap();
        assert!(matches!(
            other.try_lock(),
            Err(std::fs::TryLockError::WouldBlock)
        ));
        drop(first);
        other.try_lock().unwrap();
    }
}
