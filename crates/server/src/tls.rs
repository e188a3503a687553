//! TLS listeners: a rustls server configuration (ring provider) from a listener's `ssl.*`
//! settings (sluice_config::TlsConfig), and the streams a connection reads and writes, plain
//! or TLS. PEM is read by sluice-tls (shared with the etcd client), PKCS12 by `pkcs12.rs`.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sluice_config::{ClientAuth, KeyStore, TlsConfig, TrustStore};
use sluice_tls::{certificates, private_key};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The rustls configuration of listener `listener`; the error is a sentence for the operator.
pub fn server_config(listener: &str, tls: &TlsConfig) -> Result<Arc<ServerConfig>, String> {
    let fail = |what: String| format!("listener {listener}: {what}");
    let (chain, key) = keystore(&tls.keystore).map_err(fail)?;
    let provider = Arc::new(provider(&tls.cipher_suites).map_err(fail)?);
    let versions = versions(&tls.protocols);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| {
            fail(format!(
                "ssl.enabled.protocols and ssl.cipher.suites do not fit together: {e}"
            ))
        })?;
    let builder = match tls.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let roots = match &tls.truststore {
                Some(store) => truststore(store).map_err(fail)?,
                None => return Err(fail("ssl.client.auth needs a truststore".into())),
            };
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = if auth == ClientAuth::Requested {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| fail(format!("cannot check client certificates: {e}")))?,
            )
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| {
        fail(format!(
            "the keystore's key does not fit its certificate: {e}"
        ))
    })?;
    Ok(Arc::new(config))
}

/// The rustls client configuration brokers call each other with when the inter-broker
/// listener `listener` is an SSL one: the listener's truststore checks the peer (Kafka's
/// inter-broker client uses the broker's own `ssl.truststore.*`), and its keystore is the
/// client certificate a peer asking for one (`ssl.client.auth`) gets.
pub fn client_config(listener: &str, tls: &TlsConfig) -> Result<Arc<ClientConfig>, String> {
    let fail = |what: String| format!("inter-broker listener {listener}: {what}");
    let roots = match &tls.truststore {
        Some(store) => truststore(store).map_err(fail)?,
        None => {
            return Err(fail(
                "brokers check each other's certificates against the listener's truststore: set ssl.truststore.location or ssl.truststore.certificates".into(),
            ))
        }
    };
    let (chain, key) = keystore(&tls.keystore).map_err(fail)?;
    let provider = Arc::new(provider(&tls.cipher_suites).map_err(fail)?);
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(&tls.protocols))
        .map_err(|e| {
            fail(format!(
                "ssl.enabled.protocols and ssl.cipher.suites do not fit together: {e}"
            ))
        })?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain, key)
        .map_err(|e| {
            fail(format!(
                "the keystore's key does not fit its certificate: {e}"
            ))
        })?;
    Ok(Arc::new(config))
}

fn versions(protocols: &[String]) -> Vec<&'static SupportedProtocolVersion> {
    protocols
        .iter()
        .filter_map(|p| match p.as_str() {
            "TLSv1.2" => Some(&rustls::version::TLS12),
            "TLSv1.3" => Some(&rustls::version::TLS13),
            _ => None,
        })
        .collect()
}

/// The certificate chain and private key of a keystore.
fn keystore(
    store: &KeyStore,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    match store {
        KeyStore::Pem { chain, key } => {
            let chain = certificates(chain)?;
            if chain.is_empty() {
                return Err("the keystore holds no certificate".into());
            }
            Ok((chain, private_key(key)?))
        }
        KeyStore::Pkcs12 {
            path,
            password,
            key_password,
        } => {
            let store = pkcs12_store(path, password, key_password.as_deref(), "ssl.keystore")?;
            let Some(key) = store.key else {
                return Err(format!(
                    "the PKCS12 keystore {} holds no private key (ssl.keystore.location must be the broker's key and certificate, not a truststore)",
                    path.display()
                ));
            };
            if store.certificates.is_empty() {
                return Err(format!(
                    "the PKCS12 keystore {} holds no certificate",
                    path.display()
                ));
            }
            Ok((store.certificates, key))
        }
    }
}

/// The certificates of a truststore (at least one).
fn truststore(store: &TrustStore) -> Result<RootCertStore, String> {
    let certs = match store {
        TrustStore::Pem(pem) => certificates(pem)?,
        TrustStore::Pkcs12 { path, password } => {
            pkcs12_store(path, password, None, "ssl.truststore")?.certificates
        }
    };
    sluice_tls::roots(certs)
}

/// Read a PKCS12 store; `which` is `ssl.keystore` or `ssl.truststore`, for the error.
fn pkcs12_store(
    path: &Path,
    password: &str,
    key_password: Option<&str>,
    which: &str,
) -> Result<crate::pkcs12::Store, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    crate::pkcs12::read(&bytes, password, key_password).map_err(|e| {
        let hint = match e {
            crate::pkcs12::Pkcs12Error::WrongPassword if which == "ssl.keystore" => {
                ": check ssl.keystore.password (and ssl.key.password, if the key has a password of its own)"
            }
            crate::pkcs12::Pkcs12Error::WrongPassword => ": check ssl.truststore.password",
            _ => "",
        };
        format!("{which}.location {} {e}{hint}", path.display())
    })
}

/// ring's provider, its cipher suites narrowed to `ssl.cipher.suites` when that is set (Java's
/// names: TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, ...).
fn provider(names: &[String]) -> Result<CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    if names.is_empty() {
        return Ok(provider);
    }
    let java_name = |s: &rustls::SupportedCipherSuite| {
        let name = format!("{:?}", s.suite());
        match name.strip_prefix("TLS13_") {
            Some(rest) => format!("TLS_{rest}"),
            None => name,
        }
    };
    let known: Vec<String> = provider.cipher_suites.iter().map(java_name).collect();
    for n in names {
        if !known.iter().any(|k| k == n) {
            return Err(format!(
                "ssl.cipher.suites names {n}, which is not served; the suites served are {}",
                known.join(", ")
            ));
        }
    }
    provider
        .cipher_suites
        .retain(|s| names.iter().any(|n| *n == java_name(s)));
    Ok(provider)
}

/// The read side of a connection.
pub(crate) enum Reader {
    Tcp(OwnedReadHalf),
    Tls(ReadHalf<TlsStream<TcpStream>>),
}

/// The write side of a connection: on TCP, record regions go out with `sendfile`; over TLS
/// they are read and encrypted.
pub(crate) enum Writer {
    Tcp(OwnedWriteHalf),
    Tls(WriteHalf<TlsStream<TcpStream>>),
}

impl AsyncRead for Reader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Reader::Tcp(r) => Pin::new(r).poll_read(cx, buf),
            Reader::Tls(r) => Pin::new(r).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Writer {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_write(cx, buf),
            Writer::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            Writer::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Writer::Tcp(w) => w.is_write_vectored(),
            Writer::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_flush(cx),
            Writer::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Writer::Tcp(w) => Pin::new(w).poll_shutdown(cx),
            Writer::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}
