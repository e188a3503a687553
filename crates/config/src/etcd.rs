//! Cluster mode's link to etcd: `sluice.cluster.etcd.endpoints` written as etcd's own tools
//! write them (`https://host:port`, `http://host:port`, or a bare `host:port`), and the
//! properties that secure the link: TLS (a CA to trust, a client certificate for etcd's
//! `--client-cert-auth`) and etcd's user and password authentication. This module only
//! reads the properties; the metadata crate's etcd client connects
//! (crates/meta/src/etcd.rs).
//!
//! A bare `host:port` is TLS when a truststore is set and plain HTTP otherwise, as etcd's Go
//! client treats an endpoint without a scheme (TLS when it was given credentials for it).

use std::fmt;
use std::path::PathBuf;

use crate::{ConfigError, Pem};

/// The properties, for messages that name them.
pub const ETCD_ENDPOINTS: &str = "sluice.cluster.etcd.endpoints";
pub const ETCD_TRUSTSTORE: &str = "sluice.cluster.etcd.ssl.truststore.location";
pub const ETCD_KEYSTORE: &str = "sluice.cluster.etcd.ssl.keystore.location";
pub const ETCD_USERNAME: &str = "sluice.cluster.etcd.username";
pub const ETCD_PASSWORD: &str = "sluice.cluster.etcd.password";
use {
    ETCD_ENDPOINTS as ENDPOINTS, ETCD_KEYSTORE as KEYSTORE, ETCD_PASSWORD as PASSWORD,
    ETCD_TRUSTSTORE as TRUSTSTORE, ETCD_USERNAME as USERNAME,
};

/// One etcd member's client URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdEndpoint {
    /// `https`: the link is TLS.
    pub tls: bool,
    /// A host name or an IP address (IPv6 without brackets).
    pub host: String,
    pub port: u16,
}

impl EtcdEndpoint {
    /// `host:port`, an IPv6 host in brackets: what to connect to, and the HTTP `Host`.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for EtcdEndpoint {
    /// The URL: `https://host:port` or `http://host:port`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}", self.authority())
    }
}

/// One entry of `sluice.cluster.etcd.endpoints`: its scheme (None: none written; `Some(true)`
/// for https), host and port. The error says what is wrong with the entry, in words for the
/// operator.
pub fn parse_etcd_endpoint(entry: &str) -> Result<(Option<bool>, String, u16), String> {
    let example = "for example https://10.0.0.21:2379, http://127.0.0.1:2379 or 127.0.0.1:2379";
    let (tls, rest) = match entry.split_once("://") {
        Some((scheme, rest)) => match scheme.to_ascii_lowercase().as_str() {
            "https" => (Some(true), rest),
            "http" => (Some(false), rest),
            "unix" | "unixs" => {
                return Err(format!(
                "etcd's unix socket endpoints are not supported; give its client URL ({example})"
            ))
            }
            _ => {
                return Err(format!(
                    "the scheme {scheme:?} is not http or https ({example})"
                ))
            }
        },
        None => (None, entry),
    };
    // A client URL as etcd prints it may end in '/'; nothing else may follow the port.
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains('/') || authority.contains('?') || authority.contains('#') {
        return Err(format!(
            "an etcd endpoint is a scheme, host and port, with no path ({example})"
        ));
    }
    if authority.contains('@') {
        return Err(format!(
            "credentials do not belong in the endpoint: set {USERNAME} and {PASSWORD}"
        ));
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        match bracketed.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Err(format!("the IPv6 address has no closing ']' ({example})")),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, _)) if host.contains(':') => {
                return Err(format!(
                    "write an IPv6 address in brackets, as [::1]:2379 ({example})"
                ))
            }
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("the host is missing ({example})"));
    }
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '%');
    if !host.chars().all(valid) {
        return Err(format!(
            "{host:?} is not a host name or IP address ({example})"
        ));
    }
    let port = match port {
        None | Some("") => {
            return Err(format!(
                "the port is missing (etcd's client port is usually 2379: {example})"
            ))
        }
        Some(p) => p
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("the port {p:?} is not a port number ({example})"))?,
    };
    Ok((tls, host.to_string(), port))
}

/// TLS to etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdTls {
    /// `sluice.cluster.etcd.ssl.truststore.location`: the CA certificates etcd's certificate
    /// must chain to (PEM; etcd's `--trusted-ca-file`, etcdctl's `--cacert`).
    pub truststore: Pem,
    /// `sluice.cluster.etcd.ssl.keystore.location`: this broker's client certificate chain
    /// and private key in one PEM file, for an etcd that asks for one
    /// (`--client-cert-auth`; etcdctl's `--cert` and `--key`).
    pub keystore: Option<Pem>,
}

/// etcd's user and password authentication.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdLogin {
    /// `sluice.cluster.etcd.username`.
    pub username: String,
    /// `sluice.cluster.etcd.password` (never logged or described).
    pub password: String,
}

impl fmt::Debug for EtcdLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdLogin")
            .field("username", &self.username)
            .field("password", &"[hidden]")
            .finish()
    }
}

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// The link to etcd as the properties describe it.
#[derive(Debug)]
pub(crate) struct Link {
    pub(crate) endpoints: Vec<EtcdEndpoint>,
    pub(crate) tls: Option<EtcdTls>,
    pub(crate) login: Option<EtcdLogin>,
}

/// The endpoints, TLS and login settings from the values given (each trimmed, empty = unset).
pub(crate) fn etcd_link(
    endpoints: &str,
    truststore: Option<&str>,
    keystore: Option<&str>,
    username: Option<&str>,
    password: Option<&str>,
) -> Result<Link, ConfigError> {
    let mut parsed = Vec::new();
    for entry in endpoints
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
    {
        let (tls, host, port) = parse_etcd_endpoint(entry)
            .map_err(|reason| invalid(ENDPOINTS, endpoints, format!("{entry:?}: {reason}")))?;
        parsed.push((entry, tls, host, port));
    }
    if parsed.is_empty() {
        return Err(invalid(ENDPOINTS, endpoints, "no endpoint is given"));
    }
    let https = parsed.iter().any(|(_, tls, ..)| *tls == Some(true));
    let http = parsed.iter().find(|(_, tls, ..)| *tls == Some(false));
    if let (true, Some((entry, ..))) = (https, http) {
        return Err(invalid(
            ENDPOINTS,
            endpoints,
            format!("{entry:?} is http while others are https: every member of one etcd cluster is reached the same way"),
        ));
    }
    let tls = match (truststore, keystore) {
        (Some(ca), keystore) => {
            if let Some((entry, ..)) = http {
                return Err(invalid(
                    ENDPOINTS,
                    endpoints,
                    format!("{entry:?} is plain http, yet {TRUSTSTORE} is set: write https:// to talk to etcd over TLS"),
                ));
            }
            Some(EtcdTls {
                truststore: Pem::File(PathBuf::from(ca)),
                keystore: keystore.map(|k| Pem::File(PathBuf::from(k))),
            })
        }
        (None, Some(k)) => {
            return Err(invalid(
                KEYSTORE,
                k,
                format!("a client certificate is for a TLS link to etcd, which needs {TRUSTSTORE} too (the CA etcd's certificate is signed by, etcd's --trusted-ca-file)"),
            ))
        }
        (None, None) => {
            if https {
                return Err(invalid(
                    ENDPOINTS,
                    endpoints,
                    format!("https endpoints need {TRUSTSTORE}: the CA etcd's certificate is signed by (etcd's --trusted-ca-file, etcdctl's --cacert)"),
                ));
            }
            None
        }
    };
    let endpoints = parsed
        .into_iter()
        .map(|(_, _, host, port)| EtcdEndpoint {
            tls: tls.is_some(),
            host,
            port,
        })
        .collect();
    let login = match (username, password) {
        (Some(u), Some(p)) => Some(EtcdLogin {
            username: u.to_string(),
            password: p.to_string(),
        }),
        (None, None) => None,
        (Some(u), None) => {
            return Err(invalid(
                PASSWORD,
                "",
                format!(
                    "{USERNAME} is set ({u}) but no password: etcd authenticates a user with both"
                ),
            ))
        }
        (None, Some(_)) => {
            return Err(invalid(
                USERNAME,
                "",
                format!("{PASSWORD} is set but no user name: etcd authenticates a user with both"),
            ))
        }
    };
    Ok(Link {
        endpoints,
        tls,
        login,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ok(entry: &str) -> (Option<bool>, String, u16) {
        parse_etcd_endpoint(entry).unwrap()
    }

    #[test]
    fn endpoints_as_etcd_writes_them() {
        assert_eq!(ok("127.0.0.1:2379"), (None, "127.0.0.1".into(), 2379));
        assert_eq!(
            ok("http://10.0.0.1:2379"),
            (Some(false), "10.0.0.1".into(), 2379)
        );
        assert_eq!(
            ok("https://etcd-1.example:2379/"),
            (Some(true), "etcd-1.example".into(), 2379)
        );
        assert_eq!(ok("HTTPS://etcd:12379"), (Some(true), "etcd".into(), 12379));
        assert_eq!(ok("https://[::1]:2379"), (Some(true), "::1".into(), 2379));
        assert_eq!(
            ok("[fe80::1%eth0]:2379"),
            (None, "fe80::1%eth0".into(), 2379)
        );
    }

    #[test]
    fn bad_endpoints_say_what_is_wrong() {
        let err = |entry: &str| parse_etcd_endpoint(entry).unwrap_err();
        assert!(err("https://etcd").contains("port is missing"));
        assert!(err("etcd:").contains("port is missing"));
        assert!(err("etcd:http").contains("not a port number"));
        assert!(err("etcd:0").contains("not a port number"));
        assert!(err("etcd:70000").contains("not a port number"));
        assert!(err("grpc://etcd:2379").contains("not http or https"));
        assert!(err("unix:///run/etcd.sock").contains("unix socket"));
        assert!(err("https://etcd:2379/v3").contains("no path"));
        assert!(err("https://root:pw@etcd:2379").contains(USERNAME));
        assert!(err("::1:2379").contains("brackets"));
        assert!(err("[::1:2379").contains("closing"));
        assert!(err(":2379").contains("host is missing"));
        assert!(err("https://:2379").contains("host is missing"));
        assert!(err("et cd:2379").contains("not a host name"));
    }

    #[test]
    fn urls_print_as_given() {
        let e = EtcdEndpoint {
            tls: true,
            host: "::1".into(),
            port: 2379,
        };
        assert_eq!(e.to_string(), "https://[::1]:2379");
        assert_eq!(e.authority(), "[::1]:2379");
        let e = EtcdEndpoint {
            tls: false,
            host: "etcd".into(),
            port: 2379,
        };
        assert_eq!(e.to_string(), "http://etcd:2379");
    }

    #[test]
    fn the_scheme_and_the_truststore_agree() {
        let link = |endpoints: &str, ca: Option<&str>, cert: Option<&str>| {
            etcd_link(endpoints, ca, cert, None, None)
        };
        // No scheme: TLS exactly when a truststore is given (etcd's client does the same).
        let l = link("a:1,b:2", None, None).unwrap();
        assert!(l.tls.is_none() && l.endpoints.iter().all(|e| !e.tls));
        let l = link("a:1,https://b:2", Some("/ca.pem"), Some("/me.pem")).unwrap();
        assert!(l.endpoints.iter().all(|e| e.tls));
        assert_eq!(
            l.tls.unwrap(),
            EtcdTls {
                truststore: Pem::File("/ca.pem".into()),
                keystore: Some(Pem::File("/me.pem".into())),
            }
        );
        let e = link("https://a:1", None, None).unwrap_err().to_string();
        assert!(e.contains(ENDPOINTS) && e.contains(TRUSTSTORE), "{e}");
        let e = link("http://a:1", Some("/ca.pem"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("write https://"), "{e}");
        let e = link("http://a:1,https://b:1", Some("/ca.pem"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("the same way"), "{e}");
        let e = link("a:1", None, Some("/me.pem")).unwrap_err().to_string();
        assert!(e.contains(KEYSTORE) && e.contains(TRUSTSTORE), "{e}");
        let e = link(" , ", None, None).unwrap_err().to_string();
        assert!(e.contains("no endpoint"), "{e}");
        let e = link("a:1,http://b", None, None).unwrap_err().to_string();
        assert!(
            e.contains(ENDPOINTS) && e.contains("\"http://b\"") && e.contains("port"),
            "{e}"
        );
    }

    #[test]
    fn a_login_needs_both_halves_and_hides_the_password() {
        let l = etcd_link("a:1", None, None, Some("sluice"), Some("s3cret")).unwrap();
        let login = l.login.unwrap();
        assert_eq!(login.username, "sluice");
        assert!(!format!("{login:?}").contains("s3cret"));
        let e = etcd_link("a:1", None, None, Some("sluice"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(PASSWORD), "{e}");
        let e = etcd_link("a:1", None, None, None, Some("s3cret"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(USERNAME) && !e.contains("s3cret"), "{e}");
    }
}
