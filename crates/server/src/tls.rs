//! TLS listeners: a rustls server configuration (ring provider) from a listener's `ssl.*`
//! settings (sluice_config::TlsConfig), replaceable while the listener serves
//! ([`ListenerTls`]: a keystore or truststore changed at run time, Kafka's dynamic keystore
//! update), and the streams a connection reads and writes, plain or TLS. PEM is read by
//! sluice-tls (shared with the etcd client), PKCS12 by `pkcs12.rs`.
//!
//! A replacement is checked as Kafka's `SslFactory` checks a reconfiguration: the new stores
//! load; the new certificate keeps the subject and (at least) the alternative names of the
//! one it replaces, unless `ssl.allow.dn.changes` / `ssl.allow.san.changes`; a listener without
//! a truststore does not get one; and on the inter-broker listener, the old and new
//! certificates are each trusted by the other side's truststore (brokers not yet changed
//! still reach this one, and it them). Connections accepted after a replacement get the new
//! certificate; open ones keep the one they began with.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use parking_lot::RwLock;
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, RootCertStore, ServerConfig, SupportedProtocolVersion,
};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use sluice_config::{ClientAuth, KeyStore, TlsConfig, TrustStore};
use sluice_tls::{certificates, private_key};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// What a listener's stores hold, loaded, and the configurations built from them.
struct Loaded {
    settings: TlsConfig,
    /// The keystore's certificate chain, the broker's own certificate first.
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// The truststore's certificates, when the listener has one.
    trusted: Option<Vec<CertificateDer<'static>>>,
    server: Arc<ServerConfig>,
    /// The configuration brokers call each other with, on the inter-broker listener.
    client: Option<Arc<ClientConfig>>,
}

impl Loaded {
    /// Whether `other` holds the same certificates and key (then nothing would change).
    fn same_stores(&self, other: &Loaded) -> bool {
        self.chain == other.chain
            && self.key.secret_der() == other.key.secret_der()
            && self.trusted == other.trusted
    }
}

/// Load the stores `settings` name and build a listener's configurations; the error is a
/// sentence for the operator.
fn load(settings: &TlsConfig, inter_broker: bool) -> Result<Loaded, String> {
    let (chain, key) = keystore(&settings.keystore)?;
    let trusted = settings.truststore.as_ref().map(truststore).transpose()?;
    let roots = trusted.as_deref().map(root_store).transpose()?;
    let server = server_config(settings, &chain, &key, roots.clone())?;
    let client = if inter_broker {
        let Some(roots) = roots else {
            return Err(
                "brokers check each other's certificates against the inter-broker listener's truststore: set ssl.truststore.location or ssl.truststore.certificates".into(),
            );
        };
        Some(client_config(settings, &chain, &key, roots)?)
    } else {
        None
    };
    Ok(Loaded {
        settings: settings.clone(),
        chain,
        key,
        trusted,
        server,
        client,
    })
}

/// The rustls server configuration of a listener.
fn server_config(
    tls: &TlsConfig,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    roots: Option<RootCertStore>,
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(provider(&tls.cipher_suites)?);
    let versions = versions(&tls.protocols);
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| {
            format!("ssl.enabled.protocols and ssl.cipher.suites do not fit together: {e}")
        })?;
    let builder = match tls.client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        auth => {
            let Some(roots) = roots else {
                return Err("ssl.client.auth needs a truststore".into());
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
                    .map_err(|e| format!("cannot check client certificates: {e}"))?,
            )
        }
    };
    let config = builder
        .with_single_cert(chain.to_vec(), key.clone_key())
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))?;
    Ok(Arc::new(config))
}

/// The rustls client configuration brokers call each other with when the inter-broker
/// listener is an SSL one: the listener's truststore checks the peer (Kafka's inter-broker
/// client uses the broker's own `ssl.truststore.*`), and its keystore is the client
/// certificate a peer asking for one (`ssl.client.auth`) gets.
fn client_config(
    tls: &TlsConfig,
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    roots: RootCertStore,
) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(provider(&tls.cipher_suites)?);
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions(&tls.protocols))
        .map_err(|e| {
            format!("ssl.enabled.protocols and ssl.cipher.suites do not fit together: {e}")
        })?
        .with_root_certificates(roots)
        .with_client_auth_cert(chain.to_vec(), key.clone_key())
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))?;
    Ok(Arc::new(config))
}

/// One listener's TLS, replaceable while it serves (see the module docs).
pub struct ListenerTls {
    name: String,
    inter_broker: bool,
    current: RwLock<Arc<Loaded>>,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls")
            .field("name", &self.name)
            .field("inter_broker", &self.inter_broker)
            .finish_non_exhaustive()
    }
}

impl ListenerTls {
    /// Load listener `name`'s stores; `inter_broker`: brokers call each other on it, so its
    /// client configuration is built too (which needs a truststore). The error is a sentence
    /// for the operator, naming the listener.
    pub fn load(
        name: &str,
        settings: &TlsConfig,
        inter_broker: bool,
    ) -> Result<ListenerTls, String> {
        let loaded = load(settings, inter_broker).map_err(|e| {
            if inter_broker {
                format!("inter-broker listener {name}: {e}")
            } else {
                format!("listener {name}: {e}")
            }
        })?;
        Ok(ListenerTls {
            name: name.to_string(),
            inter_broker,
            current: RwLock::new(Arc::new(loaded)),
        })
    }

    /// The listener's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server configuration a connection accepted now gets.
    pub(crate) fn server_config(&self) -> Arc<ServerConfig> {
        self.current.read().server.clone()
    }

    /// The configuration a new call to a peer gets (the inter-broker listener only).
    pub(crate) fn client_config(&self) -> Option<Arc<ClientConfig>> {
        self.current.read().client.clone()
    }

    /// Load the stores `settings` name and check that they may replace the listener's
    /// (module docs); with `apply`, replace them. Ok(false): the stores hold the certificates
    /// and key the listener has already, nothing changes. The error is a sentence for the
    /// operator.
    pub fn reload(&self, settings: &TlsConfig, apply: bool) -> Result<bool, String> {
        let next = load(settings, self.inter_broker)?;
        // Checked and replaced under one lock: two changes at once are each checked against
        // what the other left.
        let mut current = self.current.write();
        if current.same_stores(&next) {
            return Ok(false);
        }
        compatible(&current, &next, self.inter_broker)?;
        if apply {
            let serial = |l: &Loaded| {
                l.chain
                    .first()
                    .and_then(|c| crate::x500::serial(c).ok())
                    .unwrap_or_default()
            };
            tracing::info!(
                listener = %self.name,
                "new TLS keystore/truststore in use for new connections (certificate serial {} replaces {}); open connections keep theirs",
                serial(&next),
                serial(&current),
            );
            *current = Arc::new(next);
        }
        Ok(true)
    }
}

/// Kafka's checks of a keystore or truststore replacing `old` (`SslFactory`'s
/// `validateReconfiguration`).
fn compatible(old: &Loaded, new: &Loaded, inter_broker: bool) -> Result<(), String> {
    if old.trusted.is_none() && new.trusted.is_some() {
        return Err(
            "Cannot add SSL truststore to an existing listener for which no truststore was configured."
                .into(),
        );
    }
    let (old_leaf, new_leaf) = match (old.chain.first(), new.chain.first()) {
        (Some(o), Some(n)) => (o, n),
        _ => return Err("the keystore holds no certificate".into()),
    };
    identity_kept(
        old_leaf,
        new_leaf,
        new.settings.allow_dn_changes,
        new.settings.allow_san_changes,
    )?;
    if inter_broker {
        // Brokers not changed yet must trust the new certificate, and this broker theirs
        // (Kafka runs a handshake each way between the old and the new settings; names are
        // not checked there either).
        trusted_by(
            &new.chain,
            old,
            "the new keystore's certificate",
            "the old truststore",
        )?;
        trusted_by(
            &old.chain,
            new,
            "the old keystore's certificate",
            "the new truststore",
        )?;
    }
    Ok(())
}

/// Kafka's check that a new certificate names the broker as the old one did: the same
/// subject (equal as encoded, or as RFC 2253 text ignoring case) unless `allow_dn_changes`,
/// and every subject alternative name of the old one unless `allow_san_changes`.
fn identity_kept(
    old: &[u8],
    new: &[u8],
    allow_dn_changes: bool,
    allow_san_changes: bool,
) -> Result<(), String> {
    if !allow_dn_changes {
        let (o, n) = (crate::x500::subject(old)?, crate::x500::subject(new)?);
        let same = crate::x500::subject_der(old)? == crate::x500::subject_der(new)?
            || o.eq_ignore_ascii_case(&n);
        if !same {
            return Err(format!(
                "Keystore DistinguishedName does not match: existing={o}, new={n} (set ssl.allow.dn.changes=true to allow it)"
            ));
        }
    }
    if !allow_san_changes {
        let (o, n) = (
            crate::x500::subject_alt_names(old)?,
            crate::x500::subject_alt_names(new)?,
        );
        if !o.iter().all(|name| n.contains(name)) {
            let show = |v: &[crate::x500::AltName]| {
                v.iter()
                    .map(|a| a.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(format!(
                "Keystore SubjectAltNames do not match: existing=[{}], new=[{}] (the new certificate must keep every name of the old one; set ssl.allow.san.changes=true to allow it)",
                show(&o),
                show(&n)
            ));
        }
    }
    Ok(())
}

/// Whether `chain` is trusted by `by`'s truststore as a server's certificate and, when `by`
/// asks for client certificates, as a client's; names are not checked.
fn trusted_by(
    chain: &[CertificateDer<'static>],
    by: &Loaded,
    what: &str,
    store: &str,
) -> Result<(), String> {
    let Some(trusted) = &by.trusted else {
        return Ok(());
    };
    let Some((leaf, intermediates)) = chain.split_first() else {
        return Ok(());
    };
    let roots = Arc::new(root_store(trusted)?);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let fail = |e: rustls::Error| format!("{what} is not trusted by {store}: {e}");
    let now = UnixTime::now();
    let server = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| format!("cannot check certificates against {store}: {e}"))?;
    // Any name: a mismatch is the only error allowed.
    let name = ServerName::try_from("sluice.invalid").map_err(|e| e.to_string())?;
    match server.verify_server_cert(leaf, intermediates, &name, &[], now) {
        Ok(_) => {}
        Err(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => {}
        Err(e) => return Err(fail(e)),
    }
    if by.settings.client_auth != ClientAuth::None {
        let client = WebPkiClientVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| format!("cannot check certificates against {store}: {e}"))?;
        client
            .verify_client_cert(leaf, intermediates, now)
            .map_err(fail)?;
    }
    Ok(())
}

/// Every listener's TLS, for the broker to reload a listener's stores changed at run time
/// (`sluice_broker::ListenerCertificates`).
#[derive(Debug, Default)]
pub struct Certificates {
    listeners: Vec<Arc<ListenerTls>>,
}

impl Certificates {
    pub fn new(listeners: Vec<Arc<ListenerTls>>) -> Certificates {
        Certificates { listeners }
    }
}

impl sluice_broker::ListenerCertificates for Certificates {
    fn reload(&self, listener: &str, settings: &TlsConfig, apply: bool) -> Result<bool, String> {
        match self.listeners.iter().find(|l| l.name == listener) {
            Some(l) => l.reload(settings, apply),
            None => Err(format!("listener {listener} has no TLS")),
        }
    }
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
fn truststore(store: &TrustStore) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = match store {
        TrustStore::Pem(pem) => certificates(pem)?,
        TrustStore::Pkcs12 { path, password } => {
            pkcs12_store(path, password, None, "ssl.truststore")?.certificates
        }
    };
    if certs.is_empty() {
        return Err("the truststore holds no certificate".into());
    }
    Ok(certs)
}

/// A truststore's certificates as rustls's roots.
fn root_store(certs: &[CertificateDer<'static>]) -> Result<RootCertStore, String> {
    sluice_tls::roots(certs.to_vec())
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::x500::testcert::{cert_with_sans, dns, ip, utf8};

    fn broker(cn: &str, sans: &[Vec<u8>]) -> Vec<u8> {
        cert_with_sans(
            &[&[("2.5.4.10", utf8("sluice"))], &[("2.5.4.3", utf8(cn))]],
            sans,
        )
    }

    #[test]
    fn a_new_certificate_keeps_the_subject_and_names_unless_allowed() {
        let both = [dns("localhost"), ip(&[127, 0, 0, 1])];
        let old = broker("localhost", &both);
        // Same subject, the same names in another order, or more names: kept.
        let reordered = broker("localhost", &[ip(&[127, 0, 0, 1]), dns("localhost")]);
        assert_eq!(identity_kept(&old, &reordered, false, false), Ok(()));
        let more = broker(
            "localhost",
            &[dns("localhost"), dns("b1"), ip(&[127, 0, 0, 1])],
        );
        assert_eq!(identity_kept(&old, &more, false, false), Ok(()));
        // The subject differs only in case: kept (Kafka compares RFC 2253 names ignoring case).
        let upper = broker("LOCALHOST", &both);
        assert_eq!(identity_kept(&old, &upper, false, false), Ok(()));

        let renamed = broker("elsewhere", &both);
        let e = identity_kept(&old, &renamed, false, false).unwrap_err();
        assert!(
            e.starts_with("Keystore DistinguishedName does not match: existing=CN=localhost,O=sluice, new=CN=elsewhere,O=sluice"),
            "{e}"
        );
        assert_eq!(identity_kept(&old, &renamed, true, false), Ok(()));

        let fewer = broker("localhost", &[ip(&[127, 0, 0, 1])]);
        let e = identity_kept(&old, &fewer, false, false).unwrap_err();
        assert!(
            e.starts_with("Keystore SubjectAltNames do not match: existing=[DNS:localhost, IP:127.0.0.1], new=[IP:127.0.0.1]"),
            "{e}"
        );
        assert_eq!(identity_kept(&old, &fewer, false, true), Ok(()));
        let none = broker("localhost", &[]);
        assert!(identity_kept(&old, &none, false, false).is_err());
        assert_eq!(identity_kept(&none, &old, false, false), Ok(()));
    }
}
