//! How to reach the PostgreSQL store: the URL from the trusted
//! configuration, the password from an environment variable or a file
//! (never from a project), and TLS when the URL asks for it
//! (`sslmode=require`: the server's certificate is always verified,
//! against the Web PKI roots and `[store] ca_file`).

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

/// `[store] url` and what goes with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgSettings {
    /// `postgres://user@host:port/database[?sslmode=require]`.
    pub url: String,
    /// The variable holding the password.
    pub password_env: Option<String>,
    /// A file holding the password (owner-only).
    pub password_file: Option<PathBuf>,
    /// Certificates of a CA to trust besides the Web PKI roots.
    pub ca_file: Option<PathBuf>,
    /// Most connections open at once (default 16).
    pub pool_size: Option<usize>,
}

impl PgSettings {
    /// The driver's configuration, with the password filled in, and the
    /// TLS connector; an error names the setting to fix.
    pub(super) fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(tokio_postgres::Config, Tls), String> {
        let mut config = tokio_postgres::Config::from_str(&self.url).map_err(|e| {
            format!(
                "[store] url is not a PostgreSQL URL ({e}): write postgres://USER@HOST:PORT/DATABASE"
            )
        })?;
        if config.get_user().is_none() {
            return Err(
                "[store] url names no user: write postgres://USER@HOST:PORT/DATABASE".into(),
            );
        }
        let from_url = config.get_password().is_some();
        let password = match (&self.password_env, &self.password_file) {
            (Some(_), Some(_)) => {
                return Err("[store] password_env and password_file are both set: keep one".into());
            }
            (Some(var), None) => Some(env(var).ok_or_else(|| {
                format!("[store] password_env = \"{var}\", but {var} is not set")
            })?),
            (None, Some(file)) => Some(read_password_file(file)?),
            (None, None) => None,
        };
        if let Some(password) = password {
            if from_url {
                return Err(
                    "[store] url holds a password and password_env or password_file is set too: keep the password out of the URL".into(),
                );
            }
            config.password(password);
        }
        // Without `sslmode=require` the connection is plain (a socket or a
        // loopback server); with it, TLS that verifies the certificate.
        if config.get_ssl_mode() == SslMode::Prefer {
            // "Prefer" would take whatever a man in the middle offers: for
            // a server over the network the operator chooses (TLS, or
            // plain in so many words); a socket or loopback stays plain.
            let remote: Vec<String> = config
                .get_hosts()
                .iter()
                .filter_map(|h| match h {
                    tokio_postgres::config::Host::Tcp(name) if !is_loopback(name) => {
                        Some(name.clone())
                    }
                    _ => None,
                })
                .collect();
            if !remote.is_empty() {
                return Err(format!(
                    "[store] url reaches {} over the network without saying how: add ?sslmode=require (TLS, the server's certificate verified) or, on a network you trust, ?sslmode=disable",
                    remote.join(", ")
                ));
            }
            config.ssl_mode(SslMode::Disable);
        }
        let ca: Vec<PathBuf> = self.ca_file.iter().cloned().collect();
        let tls = Tls(crate::tls::client_config(&ca).map_err(|e| format!("[store] ca_file: {e}"))?);
        config.application_name("sandcrab");
        config.connect_timeout(std::time::Duration::from_secs(10));
        // A server or a peer that stops answering (a cut network, a host
        // frozen inside a transaction) may not hold anything for long: a
        // lost connection is noticed within about 30 s, and a transaction
        // left idle (its host frozen) is ended by the server after 15 s,
        // so the locks it held (a session's row) do not stop other hosts.
        config
            .keepalives_idle(std::time::Duration::from_secs(10))
            .keepalives_interval(std::time::Duration::from_secs(5))
            .keepalives_retries(3)
            .tcp_user_timeout(std::time::Duration::from_secs(30));
        let limits = "-c idle_in_transaction_session_timeout=15000";
        let options = match config.get_options() {
            Some(own) if !own.is_empty() => format!("{limits} {own}"),
            _ => limits.to_string(),
        };
        config.options(options);
        Ok((config, tls))
    }

    /// The URL as shown in messages: without its password or parameters.
    pub fn shown(&self) -> String {
        match url::Url::parse(&self.url) {
            Ok(mut u) => {
                let _ = u.set_password(None);
                u.set_query(None);
                u.to_string()
            }
            Err(_) => "postgres://(unparsable URL)".into(),
        }
    }
}

/// A password file must be the user's own and unreadable by others (as
/// `~/.pgpass` must).
fn read_password_file(file: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(file)
        .map_err(|e| format!("[store] password_file {}: {e}", file.display()))?;
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "[store] password_file {} can be read by others (mode {:o}): chmod 600 it",
            file.display(),
            meta.mode() & 0o777
        ));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("[store] password_file {}: {e}", file.display()))?;
    let password = text.trim_end_matches(['\n', '\r']).to_string();
    if password.is_empty() {
        return Err(format!("[store] password_file {} is empty", file.display()));
    }
    Ok(password)
}

/// TLS for the driver, on rustls (the connector the rest of sandcrab uses).
#[derive(Clone)]
pub struct Tls(Arc<rustls::ClientConfig>);

impl<S> MakeTlsConnect<S> for Tls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type TlsConnect = Connector;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<Connector> {
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Connector {
            config: self.0.clone(),
            name,
        })
    }
}

/// One TLS handshake to come.
pub struct Connector {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
}

type Handshake<S> = Pin<Box<dyn Future<Output = io::Result<TlsStream<S>>> + Send>>;

impl<S> TlsConnect<S> for Connector
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = TlsStream<S>;
    type Error = io::Error;
    type Future = Handshake<S>;

    fn connect(self, stream: S) -> Handshake<S> {
        Box::pin(async move {
            let stream = tokio_rustls::TlsConnector::from(self.config)
                .connect(self.name, stream)
                .await?;
            Ok(TlsStream(stream))
        })
    }
}

/// The encrypted connection.
pub struct TlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for TlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

/// Whether `host` names this machine.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(url: &str) -> PgSettings {
        PgSettings {
            url: url.into(),
            ..PgSettings::default()
        }
    }

    #[test]
    fn passwords_come_from_one_place_and_are_never_shown() {
        let env = |v: &str| (v == "PGPW").then(|| "s3cret".to_string());
        let mut s = settings("postgres://app@db:5432/sandcrab?sslmode=require");
        s.password_env = Some("PGPW".into());
        let (config, _) = s.resolve(&env).unwrap();
        assert_eq!(config.get_password(), Some(&b"s3cret"[..]));
        s.password_env = Some("MISSING".into());
        let err = s.resolve(&env).err().unwrap();
        assert!(err.contains("MISSING is not set"), "{err}");
        let mut s = settings("postgres://app:inline@db/sandcrab?sslmode=require");
        assert!(s.shown().contains("app@db") && !s.shown().contains("inline"));
        s.password_env = Some("PGPW".into());
        let err = s.resolve(&env).err().unwrap();
        assert!(err.contains("keep the password out of the URL"), "{err}");
        let err = settings("mysql://x").resolve(&env).err().unwrap();
        assert!(err.contains("[store] url"), "{err}");
    }

    #[test]
    fn a_password_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "pw\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut s = settings("postgres://app@localhost/sandcrab");
        s.password_file = Some(file.clone());
        let err = s.resolve(&|_| None).err().unwrap();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (config, _) = s.resolve(&|_| None).unwrap();
        assert_eq!(config.get_password(), Some(&b"pw"[..]));
    }
    fn resolve(url: &str) -> Result<tokio_postgres::Config, String> {
        settings(url).resolve(&|_| None).map(|(config, _)| config)
    }

    #[test]
    fn a_server_over_the_network_is_never_reached_in_plain_text_by_default() {
        let err = resolve("postgres://app@db.example.com/x").unwrap_err();
        assert!(
            err.contains("db.example.com") && err.contains("sslmode=require"),
            "{err}"
        );
        assert!(resolve("postgres://app@db.example.com/x?sslmode=prefer").is_err());
        let tls = resolve("postgres://app@db.example.com/x?sslmode=require").unwrap();
        assert_eq!(tls.get_ssl_mode(), SslMode::Require);
        let chosen = resolve("postgres://app@db.example.com/x?sslmode=disable").unwrap();
        assert_eq!(chosen.get_ssl_mode(), SslMode::Disable);
        for local in [
            "postgres://app@localhost/x",
            "postgres://app@127.0.0.1:5433/x",
            "postgres://app@[::1]/x",
        ] {
            assert_eq!(
                resolve(local).unwrap().get_ssl_mode(),
                SslMode::Disable,
                "{local}"
            );
        }
    }
}
