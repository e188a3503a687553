//! The broker-to-broker client: one connection per peer, kept open between calls, one request
//! at a time on it (the calls are few: transaction markers and partition registrations). Over
//! TLS when the inter-broker listener is an SSL one ([`crate::tls::client_config`]); logged in
//! with SASL when it is a SASL one (`sasl.mechanism.inter.broker.protocol` and the listener's
//! JAAS `username`/`password`), as Kafka's inter-broker clients do, before the first call and
//! again on a new connection before the session the broker gave (`connections.max.reauth.ms`)
//! runs out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, RequestKind, ResponseKind, SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;
use sluice_broker::{PeerClient, PeerReply, Probe};
use sluice_config::SaslMechanism;
use sluice_sasl::{ScramClient, ScramMechanism};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;

/// A connection to a peer, plain or TLS.
trait PeerIo: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Sync> PeerIo for T {}

/// Largest response accepted from a peer.
const MAX_PEER_RESPONSE_BYTES: usize = 64 << 20;

/// One peer's connection and when its SASL session ends, None until connected (and after a
/// failure).
type Slot = Arc<Mutex<Option<(Box<dyn PeerIo>, Option<Instant>)>>>;

/// A connection whose SASL session ends within this is replaced before a call.
const SESSION_MARGIN: Duration = Duration::from_secs(5);

/// How brokers log in to each other on a SASL inter-broker listener.
#[derive(Clone)]
struct SaslLogin {
    mechanism: SaslMechanism,
    username: String,
    password: String,
}

#[derive(Default)]
pub struct TcpPeers {
    /// The connection to each peer, by address; None after a failure (reconnect next call).
    conns: parking_lot::Mutex<HashMap<(String, u16), Slot>>,
    correlation: Arc<AtomicI32>,
    client_id: String,
    /// TLS to the peers' inter-broker listener, when it is an SSL one: this broker's own
    /// listener's, whose keystore and truststore may be replaced at run time (a new
    /// connection takes what it holds then).
    tls: Option<Arc<crate::ListenerTls>>,
    /// SASL login on the peers' inter-broker listener, when it is a SASL one.
    sasl: Option<SaslLogin>,
}

impl std::fmt::Debug for TcpPeers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpPeers")
            .field("client_id", &self.client_id)
            .field("tls", &self.tls.is_some())
            .field(
                "sasl",
                &self
                    .sasl
                    .as_ref()
                    .map(|s| (s.mechanism, s.username.clone())),
            )
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

    /// Calls to the peers over TLS with the client configuration of the inter-broker
    /// listener `listener` (loaded with `inter_broker` set).
    pub fn with_tls(node_id: i32, listener: Arc<crate::ListenerTls>) -> TcpPeers {
        TcpPeers {
            tls: Some(listener),
            ..TcpPeers::new(node_id)
        }
    }

    /// The same calls, logged in with SASL `mechanism` as `login` (the inter-broker listener
    /// is SASL_PLAINTEXT or SASL_SSL).
    pub fn with_sasl(
        mut self,
        mechanism: SaslMechanism,
        login: &sluice_config::SaslLogin,
    ) -> TcpPeers {
        self.sasl = Some(SaslLogin {
            mechanism,
            username: login.username.clone(),
            password: login.password.clone(),
        });
        self
    }
}

impl TcpPeers {
    /// The same calls with another client id in their request headers.
    pub fn named(mut self, client_id: &str) -> TcpPeers {
        self.client_id = client_id.to_string();
        self
    }

    /// The same calls (TLS, SASL login, client id) on connections of their own: the read
    /// replicas' long polls go through one, so that they never hold up the calls of the
    /// first (transaction markers, consumer lag).
    pub fn separate(&self) -> TcpPeers {
        TcpPeers {
            conns: parking_lot::Mutex::default(),
            correlation: Arc::default(),
            client_id: self.client_id.clone(),
            tls: self.tls.clone(),
            sasl: self.sasl.clone(),
        }
    }
}

/// Log in on a new connection; returns when the session ends, if the broker said.
async fn sasl_login(
    stream: &mut Box<dyn PeerIo>,
    login: &SaslLogin,
    client_id: &str,
    correlation: &AtomicI32,
) -> Result<Option<Instant>, String> {
    let mut call = async |api: ApiKey, version: i16, body: RequestKind| {
        let id = correlation.fetch_add(1, Ordering::Relaxed);
        let frame = sluice_wire::encode_request(api, version, id, client_id, &body)
            .map_err(|e| e.to_string())?;
        exchange(stream, &frame, api, version, id).await
    };
    let m = login.mechanism;
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(m.name().into()));
    match call(
        ApiKey::SaslHandshake,
        1,
        RequestKind::SaslHandshake(handshake),
    )
    .await?
    {
        ResponseKind::SaslHandshake(r) if r.error_code == 0 => {}
        ResponseKind::SaslHandshake(r) => {
            let enabled: Vec<String> = r.mechanisms.iter().map(|m| m.to_string()).collect();
            return Err(format!(
                "the peer refused SASL mechanism {m} (error {}; enabled there: {})",
                r.error_code,
                enabled.join(", ")
            ));
        }
        other => return Err(format!("unexpected answer to SaslHandshake: {other:?}")),
    }
    let mut authenticate = async |bytes: Vec<u8>| -> Result<(Bytes, i64), String> {
        let body = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        match call(
            ApiKey::SaslAuthenticate,
            2,
            RequestKind::SaslAuthenticate(body),
        )
        .await?
        {
            ResponseKind::SaslAuthenticate(r) if r.error_code == 0 => {
                Ok((r.auth_bytes, r.session_lifetime_ms))
            }
            ResponseKind::SaslAuthenticate(r) => Err(format!(
                "SASL/{m} login as {} refused (error {}): {}",
                login.username,
                r.error_code,
                r.error_message.as_deref().unwrap_or("")
            )),
            other => Err(format!("unexpected answer to SaslAuthenticate: {other:?}")),
        }
    };
    let lifetime_ms = match m {
        SaslMechanism::Plain => {
            authenticate(sluice_sasl::plain::client_message(
                &login.username,
                &login.password,
            ))
            .await?
            .1
        }
        SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
            let scram = if m == SaslMechanism::ScramSha256 {
                ScramMechanism::Sha256
            } else {
                ScramMechanism::Sha512
            };
            let mut client = ScramClient::new(scram, &login.username, &login.password);
            let (server_first, _) = authenticate(client.client_first()).await?;
            let last = client.client_final(&server_first)?;
            let (server_final, lifetime_ms) = authenticate(last).await?;
            client.verify_server_final(&server_final)?;
            lifetime_ms
        }
        // The configuration refuses it as `sasl.mechanism.inter.broker.protocol`.
        SaslMechanism::OAuthBearer => {
            return Err("brokers do not log in to each other with OAUTHBEARER".into())
        }
    };
    Ok((lifetime_ms > 0).then(|| Instant::now() + Duration::from_millis(lifetime_ms as u64)))
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
        let tls = self
            .tls
            .as_ref()
            .and_then(|l| l.client_config())
            .map(|c| (tokio_rustls::TlsConnector::from(c), host.to_string()));
        let sasl = self.sasl.clone();
        let client_id = self.client_id.clone();
        let correlation = self.correlation.clone();
        Box::pin(async move {
            let frame = frame.map_err(|e| e.to_string())?;
            let mut conn = slot.lock().await;
            if conn
                .as_ref()
                .is_some_and(|(_, ends)| ends.is_some_and(|t| Instant::now() + SESSION_MARGIN >= t))
            {
                // The session is about to end: a new connection logs in again.
                *conn = None;
            }
            if conn.is_none() {
                let stream = TcpStream::connect(&addr)
                    .await
                    .map_err(|e| format!("connecting to {addr}: {e}"))?;
                let _ = stream.set_nodelay(true);
                let mut stream: Box<dyn PeerIo> = match tls {
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
                };
                let ends = match &sasl {
                    None => None,
                    Some(login) => sasl_login(&mut stream, login, &client_id, &correlation)
                        .await
                        .map_err(|e| format!("SASL login to {addr}: {e}"))?,
                };
                *conn = Some((stream, ends));
            }
            let Some((stream, _)) = conn.as_mut() else {
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
