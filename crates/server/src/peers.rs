//! The broker-to-broker client: one connection per peer, kept open between calls, one request
//! at a time on it (the calls are few: transaction markers and partition registrations). Over
//! TLS when the inter-broker listener is an SSL one ([`crate::tls::client_config`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use sluice_broker::{PeerClient, PeerReply, Probe};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

/// A connection to a peer, plain or TLS.
trait PeerIo: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> PeerIo for T {}

/// Largest response accepted from a peer.
const MAX_PEER_RESPONSE_BYTES: usize = 64 << 20;

/// One peer's connection, None until connected (and after a failure).
type Slot = Arc<Mutex<Option<Box<dyn PeerIo>>>>;

#[derive(Default)]
pub struct TcpPeers {
    /// The connection to each peer, by address; None after a failure (reconnect next call).
    conns: parking_lot::Mutex<HashMap<(String, u16), Slot>>,
    correlation: AtomicI32,
    client_id: String,
    /// TLS to the peers' inter-broker listener, when it is an SSL one.
    tls: Option<tokio_rustls::TlsConnector>,
}

impl std::fmt::Debug for TcpPeers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpPeers")
            .field("client_id", &self.client_id)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl TcpPeers {
    /// Plaintext calls to the peers.
    pub fn new(node_id: i32) -> TcpPeers {
        TcpPeers {
            client_id: format!("sluice-broker-{node_id}"),
            ..TcpPeers::default()
        }
    }

    /// Calls to the peers over TLS with `config` ([`crate::tls_client_config`]).
    pub fn with_tls(node_id: i32, config: Arc<rustls::ClientConfig>) -> TcpPeers {
        TcpPeers {
            tls: Some(tokio_rustls::TlsConnector::from(config)),
            ..TcpPeers::new(node_id)
        }
    }
}

async fn exchange(
    stream: &mut Box<dyn PeerIo>,
    frame: &[u8],
    api: ApiKey,
    version: i16,
    correlation_id: i32,
) -> Result<ResponseKind, String> {
    stream.write_all(frame).await.map_err(|e| e.to_string())?;
    stream.flush().await.map_err(|e| e.to_string())?;
    let len = stream.read_i32().await.map_err(|e| e.to_string())?;
    let len = usize::try_from(len)
        .ok()
        .filter(|l| *l <= MAX_PEER_RESPONSE_BYTES)
        .ok_or_else(|| format!("response of {len} bytes refused"))?;
    let mut buf = vec![0u8; len];
    stream
        .read_exact(&mut buf)
        .await
        .map_err(|e| e.to_string())?;
    let (id, body) =
        sluice_wire::decode_response(api, version, Bytes::from(buf)).map_err(|e| e.to_string())?;
    if id != correlation_id {
        return Err(format!(
            "response correlation id {id}, expected {correlation_id}"
        ));
    }
    Ok(body)
}

impl PeerClient for TcpPeers {
    fn probe(&self, host: &str, port: u16, timeout: Duration) -> Probe {
        use std::net::ToSocketAddrs;
        let Ok(addrs) = (host, port).to_socket_addrs() else {
            return Probe::Unknown;
        };
        let mut seen = false;
        for addr in addrs {
            seen = true;
            match std::net::TcpStream::connect_timeout(&addr, timeout) {
                Ok(_) => return Probe::Accepted,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
                Err(_) => return Probe::Unknown,
            }
        }
        if seen {
            Probe::Refused
        } else {
            Probe::Unknown
        }
    }

    fn call(
        &self,
        host: &str,
        port: u16,
        api: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> PeerReply {
        let slot = self
            .conns
            .lock()
            .entry((host.to_string(), port))
            .or_default()
            .clone();
        let correlation_id = self.correlation.fetch_add(1, Ordering::Relaxed);
        let frame =
            sluice_wire::encode_request(api, version, correlation_id, &self.client_id, &body);
        let addr = format!("{host}:{port}");
        let tls = self.tls.clone().map(|c| (c, host.to_string()));
        Box::pin(async move {
            let frame = frame.map_err(|e| e.to_string())?;
            let mut conn = slot.lock().await;
            if conn.is_none() {
                let stream = TcpStream::connect(&addr)
                    .await
                    .map_err(|e| format!("connecting to {addr}: {e}"))?;
                let _ = stream.set_nodelay(true);
                *conn = Some(match tls {
                    None => Box::new(stream),
                    Some((connector, host)) => {
                        let name = rustls_pki_types::ServerName::try_from(host.clone())
                            .map_err(|e| format!("{host} is not a name TLS can check: {e}"))?;
                        let stream = connector
                            .connect(name, stream)
                            .await
                            .map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
                        Box::new(stream)
                    }
                });
            }
            let Some(stream) = conn.as_mut() else {
                return Err(format!("no connection to {addr}"));
            };
            let result = exchange(stream, &frame, api, version, correlation_id).await;
            if result.is_err() {
                // A half-read response leaves the stream unusable.
                *conn = None;
            }
            result
        })
    }
}
