//! The wire: connect to an address the gate checked (never to a name that
//! could resolve again to something else), TLS with the origin's name,
//! one HTTP/1.1 exchange, the response read whole within its size cap.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Why the exchange failed on the wire.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("could not connect to {addr}: {source}")]
    Connect {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("TLS with {host} failed: {source}")]
    Tls {
        host: String,
        source: std::io::Error,
    },
    #[error("'{0}' is not a name TLS can check")]
    ServerName(String),
    #[error("HTTP exchange failed: {0}")]
    Http(#[from] hyper::Error),
    #[error("the response is larger than {limit} bytes")]
    TooLarge { limit: u64 },
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connect to the first of `addrs` that answers on `port`.
pub async fn connect(addrs: &[IpAddr], port: u16) -> Result<(TcpStream, SocketAddr), WireError> {
    let mut last = None;
    for ip in addrs {
        let addr = SocketAddr::new(*ip, port);
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok((stream, addr));
            }
            Err(source) => last = Some(WireError::Connect { addr, source }),
        }
    }
    Err(last.unwrap_or_else(|| WireError::Connect {
        addr: SocketAddr::new(IpAddr::from([0, 0, 0, 0]), port),
        source: std::io::Error::other("no address"),
    }))
}

/// One HTTP/1.1 connection to a checked address; its driver stops when it
/// is dropped.
pub struct Connection {
    sender: hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
    /// Where it goes: the address connected to and the name TLS checked.
    pub key: PoolKey,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// What a connection may be reused for: the same checked address, and
/// the same name its certificate was checked against (None: plain http).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolKey {
    pub addr: SocketAddr,
    pub tls_host: Option<String>,
}

impl Connection {
    /// Wrap `stream` (connected to `key.addr`) in TLS for `key.tls_host`
    /// when given, and shake hands.
    pub async fn open(
        stream: TcpStream,
        key: PoolKey,
        tls: &Arc<rustls::ClientConfig>,
    ) -> Result<Connection, WireError> {
        let stream: Box<dyn Stream> = match &key.tls_host {
            Some(host) => {
                let name = rustls::pki_types::ServerName::try_from(host.to_string())
                    .map_err(|_| WireError::ServerName(host.to_string()))?;
                let tls = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(name, stream)
                    .await
                    .map_err(|source| WireError::Tls {
                        host: host.to_string(),
                        source,
                    })?;
                Box::new(tls)
            }
            None => Box::new(stream),
        };
        let (sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Connection {
            sender,
            driver,
            key,
        })
    }

    /// Whether it can carry another request now.
    pub fn usable(&self) -> bool {
        self.sender.is_ready() && !self.sender.is_closed()
    }

    /// Send `request` (origin-form URI, headers final); read the response
    /// whole, refusing one over `limit` bytes.
    pub async fn exchange(
        &mut self,
        request: http::Request<Full<Bytes>>,
        limit: u64,
    ) -> Result<(http::response::Parts, Vec<u8>), WireError> {
        let response = self.sender.send_request(request).await?;
        let (parts, mut body) = response.into_parts();
        if let Some(len) = http_body::Body::size_hint(&body).exact()
            && len > limit
        {
            return Err(WireError::TooLarge { limit });
        }
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame?.into_data() {
                if bytes.len() as u64 + data.len() as u64 > limit {
                    return Err(WireError::TooLarge { limit });
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok((parts, bytes))
    }
}
