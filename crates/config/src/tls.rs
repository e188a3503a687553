//! The TLS settings of a listener, with Kafka's `ssl.*` names: a listener-prefixed property
//! (`listener.name.<listener, lower case>.ssl.keystore.location`) wins over the plain one.
//! This module only reads the properties; the server loads the files (crates/server/src/tls.rs).
//!
//! The keystore and truststore settings ([`RECONFIGURABLE`]) may also be set at run time for one
//! listener of one broker (`kafka-configs --entity-type brokers --entity-name <id> --alter
//! --add-config listener.name.<listener>.ssl.keystore.location=...`), as Kafka allows:
//! [`crate::BrokerConfig::listener_tls_with`] gives each listener's settings with such configs
//! applied.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::principal::SslPrincipalMapper;
use crate::scoped::Scoped;
use crate::ConfigError;

/// Where PEM text comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pem {
    File(PathBuf),
    /// Inline PEM (`ssl.keystore.key`, `ssl.keystore.certificate.chain`,
    /// `ssl.truststore.certificates`).
    Inline(String),
}

/// The broker's own certificate chain and private key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyStore {
    /// `ssl.keystore.type=PEM`: a file holding the key and the chain, or the two inline.
    Pem { chain: Pem, key: Pem },
    /// `ssl.keystore.type=PKCS12` (Kafka's usual keystores), its `ssl.keystore.password` and,
    /// when the key has a password of its own, `ssl.key.password`.
    Pkcs12 {
        path: PathBuf,
        password: String,
        key_password: Option<String>,
    },
}

/// Whose certificates the broker trusts (client certificates, with `ssl.client.auth`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustStore {
    Pem(Pem),
    Pkcs12 { path: PathBuf, password: String },
}

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// One listener's TLS settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    pub keystore: KeyStore,
    pub truststore: Option<TrustStore>,
    pub client_auth: ClientAuth,
    /// `ssl.enabled.protocols` (default TLSv1.2,TLSv1.3).
    pub protocols: Vec<String>,
    /// `ssl.cipher.suites` (empty: the TLS library's defaults).
    pub cipher_suites: Vec<String>,
    /// `ssl.principal.mapping.rules` (default `DEFAULT`): the principal of a client that
    /// authenticated with a certificate on an SSL listener.
    pub principal_mapping: SslPrincipalMapper,
    /// `ssl.allow.dn.changes` (default false): a keystore replaced at run time may hold a
    /// certificate whose subject differs from the one it replaces.
    pub allow_dn_changes: bool,
    /// `ssl.allow.san.changes` (default false): ... whose subject alternative names are not a
    /// superset of the ones of the certificate it replaces.
    pub allow_san_changes: bool,
}

/// Kafka's `SslConfigs.RECONFIGURABLE_CONFIGS`: the keystore and truststore settings a listener
/// takes at run time (as `listener.name.<listener>.<name>` of one broker). Sorted.
pub(crate) const RECONFIGURABLE: &[&str] = &[
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Kafka's `ssl.*` settings of type PASSWORD: never shown by DescribeConfigs.
const SECRETS: &[&str] = &[
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.password",
    "ssl.truststore.certificates",
    "ssl.truststore.password",
];

/// `name` without its `listener.name.<listener>.` prefix, if it has one.
fn listener_base(name: &str) -> Option<&str> {
    name.strip_prefix("listener.name.")?
        .split_once('.')
        .map(|(_, base)| base)
}

/// True for `listener.name.<listener>.<name>` with `name` one of [`RECONFIGURABLE`]: what a
/// listener takes at run time.
pub(crate) fn is_reconfigurable_listener_config(name: &str) -> bool {
    listener_base(name).is_some_and(|base| RECONFIGURABLE.contains(&base))
}

/// True for one of [`RECONFIGURABLE`] without a listener prefix: Kafka takes these at run time
/// only per listener.
pub(crate) fn is_reconfigurable_without_prefix(name: &str) -> bool {
    RECONFIGURABLE.contains(&name)
}

/// True for a TLS secret (a password, a private key, inline PEM), plain or listener-prefixed.
pub(crate) fn is_secret(name: &str) -> bool {
    let base = listener_base(name).unwrap_or(name);
    SECRETS.contains(&base)
}

/// The `ssl.*` properties Sluice reads (a listener-prefixed form of each is read too).
pub(crate) const SSL_PROPERTIES: &[&str] = &[
    "ssl.allow.dn.changes",
    "ssl.allow.san.changes",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.principal.mapping.rules",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Kafka's `ssl.*` properties that Sluice accepts and does not need (the TLS library decides,
/// or they configure Java's providers).
pub(crate) const SSL_IGNORED: &[&str] = &[
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.keymanager.algorithm",
    "ssl.protocol",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
];

/// True for a property this module reads or accepts: `ssl.*` of the lists above, plain or
/// prefixed with `listener.name.<name>.`.
pub(crate) fn is_tls_property(name: &str) -> bool {
    let base = match name.strip_prefix("listener.name.") {
        Some(_) => match listener_base(name) {
            Some(base) => base,
            None => return false,
        },
        None => name,
    };
    SSL_PROPERTIES.contains(&base) || SSL_IGNORED.contains(&base)
}

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// The TLS settings of listener `listener` from `props`. On a SASL_SSL listener (`sasl`),
/// `ssl.client.auth` applies only with the listener's prefix, as on Kafka (which logs that the
/// plain one is ignored there).
pub(crate) fn listener_tls(
    props: &BTreeMap<String, String>,
    listener: &str,
    sasl: bool,
) -> Result<TlsConfig, ConfigError> {
    let p = Scoped::listener(props, listener);
    let keystore = keystore(&p, listener)?;
    let truststore = truststore(&p)?;
    let client_auth = client_auth(&p, listener, sasl)?;
    if client_auth != ClientAuth::None && truststore.is_none() {
        return Err(invalid(
            &format!("{}ssl.client.auth", p.prefix()),
            "",
            format!("listener {listener} asks for client certificates but has no truststore to check them against (ssl.truststore.location or ssl.truststore.certificates)"),
        ));
    }
    // Kafka refuses rules it cannot read at startup; so does Sluice.
    let principal_mapping = match p.get_set("ssl.principal.mapping.rules") {
        None => SslPrincipalMapper::default(),
        Some((name, rules)) => {
            SslPrincipalMapper::parse(&rules).map_err(|reason| invalid(&name, &rules, reason))?
        }
    };
    Ok(TlsConfig {
        keystore,
        truststore,
        client_auth,
        protocols: protocols(&p)?,
        cipher_suites: p.list("ssl.cipher.suites"),
        principal_mapping,
        allow_dn_changes: flag(&p, "ssl.allow.dn.changes")?,
        allow_san_changes: flag(&p, "ssl.allow.san.changes")?,
    })
}

/// The listener's key and certificate chain: `ssl.keystore.location` (a PEM or PKCS12 file),
/// or the PEM text of `ssl.keystore.certificate.chain` with `ssl.keystore.key`; one of the
/// two is required, never both. Encrypted PEM keys are refused (rustls reads none).
fn keystore(p: &Scoped, listener: &str) -> Result<KeyStore, ConfigError> {
    let password = |base: &str| p.get_set(base).map(|(_, v)| v).unwrap_or_default();
    Ok(match (
        p.get_set("ssl.keystore.location"),
        p.get_set("ssl.keystore.certificate.chain"),
        p.get_set("ssl.keystore.key"),
    ) {
        (Some((name, path)), None, None) => {
            let kind = store_type(
                &p.get_set("ssl.keystore.type"),
                &path,
                &name,
                p.get_set("ssl.keystore.password").is_some(),
            )?;
            match kind {
                StoreType::Pem => {
                    if p.get_set("ssl.key.password").is_some() {
                        return Err(invalid(
                            "ssl.key.password",
                            "[hidden]",
                            "encrypted PEM private keys are not supported; store the key unencrypted (openssl pkcs8 -topk8 -nocrypt) and protect the file",
                        ));
                    }
                    KeyStore::Pem {
                        chain: Pem::File(PathBuf::from(&path)),
                        key: Pem::File(PathBuf::from(path)),
                    }
                }
                StoreType::Pkcs12 => KeyStore::Pkcs12 {
                    path: PathBuf::from(path),
                    password: password("ssl.keystore.password"),
                    key_password: p.get_set("ssl.key.password").map(|(_, v)| v),
                },
            }
        }
        (None, Some((_, chain)), Some((_, key))) => KeyStore::Pem {
            chain: Pem::Inline(chain),
            key: Pem::Inline(key),
        },
        (None, None, None) => {
            return Err(invalid(
                &format!("{}ssl.keystore.location", p.prefix()),
                "",
                format!(
                    "listener {listener} uses TLS and needs a keystore: ssl.keystore.location (PEM or PKCS12), or ssl.keystore.certificate.chain with ssl.keystore.key"
                ),
            ))
        }
        _ => {
            return Err(invalid(
                &format!("{}ssl.keystore.location", p.prefix()),
                "",
                "set either ssl.keystore.location, or both ssl.keystore.certificate.chain and ssl.keystore.key",
            ))
        }
    })
}

/// The certificates client certificates are checked against, if any:
/// `ssl.truststore.location` (PEM or PKCS12) or the PEM text of `ssl.truststore.certificates`,
/// not both.
fn truststore(p: &Scoped) -> Result<Option<TrustStore>, ConfigError> {
    Ok(
        match (
            p.get_set("ssl.truststore.location"),
            p.get_set("ssl.truststore.certificates"),
        ) {
            (Some((name, path)), None) => Some(
                match store_type(
                    &p.get_set("ssl.truststore.type"),
                    &path,
                    &name,
                    p.get_set("ssl.truststore.password").is_some(),
                )? {
                    StoreType::Pem => TrustStore::Pem(Pem::File(PathBuf::from(path))),
                    StoreType::Pkcs12 => TrustStore::Pkcs12 {
                        path: PathBuf::from(path),
                        password: p
                            .get_set("ssl.truststore.password")
                            .map(|(_, v)| v)
                            .unwrap_or_default(),
                    },
                },
            ),
            (None, Some((_, pem))) => Some(TrustStore::Pem(Pem::Inline(pem))),
            (None, None) => None,
            (Some(_), Some(_)) => {
                return Err(invalid(
                    &format!("{}ssl.truststore.location", p.prefix()),
                    "",
                    "set either ssl.truststore.location or ssl.truststore.certificates, not both",
                ))
            }
        },
    )
}

/// `ssl.client.auth`: required, requested or none (the default). On a SASL_SSL listener
/// (`sasl`) only the listener-prefixed setting applies, as on Kafka; a plain one that would
/// ask for certificates there is said once in the log and ignored.
fn client_auth(p: &Scoped, listener: &str, sasl: bool) -> Result<ClientAuth, ConfigError> {
    let prefix = p.prefix();
    let setting = p.get_set("ssl.client.auth").filter(|(name, v)| {
        let applies = !sasl || name.starts_with(prefix);
        // Said once: the settings are read again whenever a dynamic config changes.
        static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !applies
            && !v.eq_ignore_ascii_case("none")
            && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::warn!(
                listener = %listener,
                "ssl.client.auth applies to SSL listeners only: on the SASL_SSL listener {listener} set {prefix}ssl.client.auth to ask for client certificates"
            );
        }
        applies
    });
    Ok(match setting {
        None => ClientAuth::None,
        Some((name, v)) => match v.to_ascii_lowercase().as_str() {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            _ => return Err(invalid(&name, &v, "must be required, requested or none")),
        },
    })
}

/// `ssl.enabled.protocols`: TLSv1.2 and TLSv1.3 (both by default); older versions are refused.
fn protocols(p: &Scoped) -> Result<Vec<String>, ConfigError> {
    let mut protocols = p.list("ssl.enabled.protocols");
    if protocols.is_empty() {
        protocols = vec!["TLSv1.2".into(), "TLSv1.3".into()];
    }
    if let Some(old) = protocols
        .iter()
        .find(|v| *v != "TLSv1.2" && *v != "TLSv1.3")
    {
        return Err(invalid(
            &p.get_set("ssl.enabled.protocols")
                .map(|(n, _)| n)
                .unwrap_or_default(),
            old,
            "only TLSv1.2 and TLSv1.3 are served (older versions are insecure)",
        ));
    }
    Ok(protocols)
}

/// A true/false setting; unset is false.
fn flag(p: &Scoped, base: &str) -> Result<bool, ConfigError> {
    match p.get_set(base) {
        None => Ok(false),
        Some((name, v)) => match v.to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(invalid(&name, &v, "must be true or false")),
        },
    }
}

enum StoreType {
    Pem,
    Pkcs12,
}

/// `ssl.keystore.type` / `ssl.truststore.type`: PEM or PKCS12. Kafka's default, JKS, is
/// Java's own format; unset, the type is what the file is (PEM text or PKCS12). A file that
/// cannot be read is taken as PKCS12 when a password is set, else PEM: the server says what is
/// wrong with it when it loads it (a configuration stays readable while a keystore is being
/// replaced).
fn store_type(
    given: &Option<(String, String)>,
    path: &str,
    location_name: &str,
    password: bool,
) -> Result<StoreType, ConfigError> {
    match given {
        Some((name, t)) => match t.to_ascii_uppercase().as_str() {
            "PEM" => Ok(StoreType::Pem),
            "PKCS12" => Ok(StoreType::Pkcs12),
            "JKS" => Err(invalid(
                name,
                t,
                format!("JKS keystores are Java's own format; convert {path} to PKCS12 (keytool -importkeystore -srckeystore {path} -destkeystore store.p12 -deststoretype PKCS12) or use PEM"),
            )),
            _ => Err(invalid(name, t, "must be PEM or PKCS12")),
        },
        None => {
            // Sniffed from the file's first bytes: PEM is text ("-----BEGIN").
            let Ok(head) = std::fs::read(path) else {
                return Ok(if password {
                    StoreType::Pkcs12
                } else {
                    StoreType::Pem
                });
            };
            if head.starts_with(b"-----BEGIN") || head.iter().take(64).all(|b| b.is_ascii()) {
                Ok(StoreType::Pem)
            } else if head.starts_with(&[0xfe, 0xed, 0xfe, 0xed]) {
                Err(invalid(
                    location_name,
                    path,
                    "this is a JKS keystore (Java's own format); convert it to PKCS12 (keytool -importkeystore -deststoretype PKCS12) or use PEM",
                ))
            } else {
                Ok(StoreType::Pkcs12)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::props;

    #[test]
    fn on_sasl_ssl_only_the_listeners_own_client_auth_applies() {
        let p = props(&[("ssl.client.auth", "required")]);
        let s = Scoped::listener(&p, "SECURE");
        assert_eq!(
            client_auth(&s, "SECURE", false).unwrap(),
            ClientAuth::Required
        );
        assert_eq!(client_auth(&s, "SECURE", true).unwrap(), ClientAuth::None);
        let p = props(&[("listener.name.secure.ssl.client.auth", "Requested")]);
        let s = Scoped::listener(&p, "SECURE");
        assert_eq!(
            client_auth(&s, "SECURE", true).unwrap(),
            ClientAuth::Requested
        );
        let p = props(&[("ssl.client.auth", "sometimes")]);
        assert!(client_auth(&Scoped::listener(&p, "L"), "L", false).is_err());
    }

    #[test]
    fn protocols_default_to_tls_1_2_and_1_3_and_refuse_older_ones() {
        let p = props(&[]);
        assert_eq!(
            protocols(&Scoped::listener(&p, "L")).unwrap(),
            vec!["TLSv1.2".to_string(), "TLSv1.3".to_string()]
        );
        let p = props(&[("ssl.enabled.protocols", "TLSv1.3")]);
        assert_eq!(
            protocols(&Scoped::listener(&p, "L")).unwrap(),
            vec!["TLSv1.3".to_string()]
        );
        let p = props(&[("listener.name.l.ssl.enabled.protocols", "TLSv1.3,TLSv1.1")]);
        match protocols(&Scoped::listener(&p, "L")) {
            Err(ConfigError::InvalidValue { name, value, .. }) => {
                assert_eq!(name, "listener.name.l.ssl.enabled.protocols");
                assert_eq!(value, "TLSv1.1");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_keystore_is_one_of_a_location_or_inline_pem_never_both_nor_neither() {
        let p = props(&[]);
        assert!(keystore(&Scoped::listener(&p, "L"), "L").is_err());
        let p = props(&[
            (
                "ssl.keystore.certificate.chain",
                "-----BEGIN CERTIFICATE-----",
            ),
            ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
        ]);
        assert!(matches!(
            keystore(&Scoped::listener(&p, "L"), "L").unwrap(),
            KeyStore::Pem {
                chain: Pem::Inline(_),
                key: Pem::Inline(_)
            }
        ));
        let p = props(&[
            ("ssl.keystore.location", "/x.pem"),
            ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
        ]);
        assert!(keystore(&Scoped::listener(&p, "L"), "L").is_err());
    }

    #[test]
    fn flags_are_true_or_false_and_unset_is_false() {
        let p = props(&[("a", "TRUE"), ("b", "yes")]);
        let s = Scoped::listener(&p, "L");
        assert!(flag(&s, "a").unwrap());
        assert!(flag(&s, "b").is_err());
        assert!(!flag(&s, "c").unwrap());
    }
}
