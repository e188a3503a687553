//! OAUTHBEARER's settings on a SASL listener, chosen as Kafka's broker chooses its server
//! callback handler:
//!
//! - `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` unset (or Kafka's
//!   `OAuthBearerUnsecuredValidatorCallbackHandler`): Kafka's default, unsecured tokens (a JWS
//!   with `alg: none`, for tests), with the `unsecuredValidator*` options of the listener's
//!   OAUTHBEARER JAAS configuration.
//! - `org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler`:
//!   signed JWTs checked against the JSON Web Key Set at `sasl.oauthbearer.jwks.endpoint.url`,
//!   with `sasl.oauthbearer.expected.audience`, `...expected.issuer`, `...sub.claim.name`,
//!   `...scope.claim.name`, `...clock.skew.seconds`, `...jwks.endpoint.refresh.ms`.
//!
//! Each `sasl.oauthbearer.*` property is looked up as Kafka's broker does for a listener:
//! `listener.name.<l>.oauthbearer.<property>`, then `listener.name.<l>.<property>`, then
//! `<property>`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::scoped::Scoped;
use crate::{ConfigError, JaasEntry};

/// Kafka's default server handler: unsecured tokens.
const UNSECURED_HANDLER: &str =
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";
/// Kafka's handler for signed tokens (and its older name, deprecated in Kafka 3.x).
const SECURED_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];
/// The JWT validators Kafka's handler picks by default, which behave as Sluice's.
const VALIDATORS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator",
    "org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator",
];

const JWKS_URL: &str = "sasl.oauthbearer.jwks.endpoint.url";

/// How a listener validates OAUTHBEARER tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OAuthBearerConfig {
    /// Kafka's default: unsecured JWS (`alg: none`), for tests and development.
    Unsecured(UnsecuredValidation),
    /// Signed JWTs checked against a JSON Web Key Set.
    Jwks(JwksValidation),
}

/// The JAAS options of Kafka's unsecured validator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsecuredValidation {
    /// `unsecuredValidatorPrincipalClaimName` (`sub`).
    pub principal_claim: String,
    /// `unsecuredValidatorScopeClaimName` (`scope`).
    pub scope_claim: String,
    /// `unsecuredValidatorRequiredScope`, space separated.
    pub required_scope: Vec<String>,
    /// `unsecuredValidatorAllowableClockSkewMs` (0).
    pub clock_skew_ms: i64,
}

/// Where the key set comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    /// A `file:` URL: read at start, and again when the file changes.
    File(PathBuf),
    /// An `http://` or `https://` URL: fetched at start and every `refresh_ms`.
    Http(String),
}

/// The settings of Kafka's broker JWT validator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwksValidation {
    /// `sasl.oauthbearer.jwks.endpoint.url`, as given.
    pub url: String,
    pub source: JwksSource,
    /// `sasl.oauthbearer.jwks.endpoint.refresh.ms` (3600000).
    pub refresh_ms: u64,
    /// `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms` (100) and `...backoff.max.ms`
    /// (10000): the waits between failed fetches.
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// `sasl.oauthbearer.expected.audience` (none: a token naming an audience is refused).
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name` (`sub`).
    pub sub_claim: String,
    /// `sasl.oauthbearer.scope.claim.name` (`scope`).
    pub scope_claim: String,
    /// `sasl.oauthbearer.clock.skew.seconds` (30).
    pub clock_skew_s: i64,
}

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// A scope item as Kafka's `OAuthBearerScopeUtils` allows it.
fn is_scope_item(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c == 0x21 || (0x23..=0x5b).contains(&c) || (0x5d..=0x7e).contains(&c))
}

/// OAUTHBEARER's settings on `listener`, whose OAUTHBEARER JAAS entry is `jaas` (Sluice, like
/// for SCRAM, does not require one: without it the options take their defaults). Each
/// setting is read as `listener.name.<l>.oauthbearer.<name>`, then `listener.name.<l>.<name>`,
/// then `<name>`.
pub(crate) fn listener_oauthbearer(
    props: &BTreeMap<String, String>,
    listener: &str,
    jaas: Option<(&str, &JaasEntry)>,
) -> Result<OAuthBearerConfig, ConfigError> {
    let l = listener.to_ascii_lowercase();
    let p = Scoped::with_prefixes(
        props,
        vec![
            format!("listener.name.{l}.oauthbearer."),
            format!("listener.name.{l}."),
        ],
    );
    let handler_name = format!("{}sasl.server.callback.handler.class", p.prefix());
    if !secured(props, &handler_name)? {
        if let Some((name, url)) = p.get(JWKS_URL) {
            // Kafka would ignore the key set and take unsigned tokens: refuse rather than
            // let anyone name any principal.
            return Err(invalid(
                &name,
                &url,
                format!(
                    "a JWKS is configured for listener {listener}, but its OAUTHBEARER tokens would be validated unsecured (alg none, no signature), Kafka's default: set {handler_name}={} to check signatures against it, or remove {JWKS_URL}",
                    SECURED_HANDLERS[0]
                ),
            ));
        }
        return unsecured(jaas).map(OAuthBearerConfig::Unsecured);
    }
    jwks(&p, &handler_name).map(OAuthBearerConfig::Jwks)
}

/// Whether the listener's `sasl.server.callback.handler.class` (only the listener's
/// OAUTHBEARER-prefixed name, as Kafka reads it) asks for signed tokens: Kafka's JWT
/// validator does, its default unsecured one (also when unset) does not; any other class is
/// refused, as Sluice cannot load it.
fn secured(props: &BTreeMap<String, String>, handler_name: &str) -> Result<bool, ConfigError> {
    match props.get(handler_name).map(|v| v.trim()) {
        None | Some("") => Ok(false),
        Some(h) if h == UNSECURED_HANDLER => Ok(false),
        Some(h) if SECURED_HANDLERS.contains(&h) => Ok(true),
        Some(h) => Err(invalid(
            handler_name,
            h,
            format!(
                "Sluice validates OAUTHBEARER tokens as Kafka's {} (signed JWTs against sasl.oauthbearer.jwks.endpoint.url) or, unset, as Kafka's default {UNSECURED_HANDLER} (unsecured tokens); other classes cannot be loaded",
                SECURED_HANDLERS[0]
            ),
        )),
    }
}

/// The JWT validator's settings: the key set's URL (required) and its refresh and retry
/// times, the accepted clock skew, the expected audience and issuer, and the claims that
/// name the principal and the scope. Numbers must be non-negative, claim names non-empty,
/// as Kafka checks them.
fn jwks(p: &Scoped, handler_name: &str) -> Result<JwksValidation, ConfigError> {
    if let Some((name, v)) = p.get("sasl.oauthbearer.jwt.validator.class") {
        if !VALIDATORS.contains(&v.as_str()) {
            return Err(invalid(
                &name,
                &v,
                format!(
                    "tokens are validated as Kafka's {} does; other classes cannot be loaded",
                    VALIDATORS[1]
                ),
            ));
        }
    }
    let (url_name, url) = p.get(JWKS_URL).ok_or_else(|| {
        invalid(
            &format!("{}{JWKS_URL}", p.prefix()),
            "",
            format!(
                "{handler_name} checks tokens against a JSON Web Key Set: The OAuth configuration option {JWKS_URL} is required (an https://, http:// or file: URL)"
            ),
        )
    })?;
    let source = jwks_source(&url_name, &url)?;
    let refresh_ms = non_negative(p, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000)?;
    let retry_backoff_ms = non_negative(p, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100)?;
    let retry_backoff_max_ms = non_negative(
        p,
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        10_000,
    )?;
    let clock_skew_s = non_negative(p, "sasl.oauthbearer.clock.skew.seconds", 30)?;
    if clock_skew_s > i64::from(i32::MAX) {
        return Err(invalid(
            "sasl.oauthbearer.clock.skew.seconds",
            &clock_skew_s.to_string(),
            "must be at most 2147483647",
        ));
    }
    Ok(JwksValidation {
        url,
        source,
        refresh_ms: refresh_ms as u64,
        retry_backoff_ms: retry_backoff_ms as u64,
        retry_backoff_max_ms: retry_backoff_max_ms.max(retry_backoff_ms) as u64,
        expected_audience: p.list("sasl.oauthbearer.expected.audience"),
        expected_issuer: p
            .get_set("sasl.oauthbearer.expected.issuer")
            .map(|(_, v)| v),
        sub_claim: claim_name(p, "sasl.oauthbearer.sub.claim.name", "sub")?,
        scope_claim: claim_name(p, "sasl.oauthbearer.scope.claim.name", "scope")?,
        clock_skew_s,
    })
}

/// A whole number, 0 or more; `default` when unset.
fn non_negative(p: &Scoped, base: &str, default: i64) -> Result<i64, ConfigError> {
    match p.get(base) {
        None => Ok(default),
        Some((name, v)) => v.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            invalid(
                &name,
                &v,
                format!("The OAuth configuration option {base} value must be non-negative"),
            )
        }),
    }
}

/// The name of a claim; `default` when unset, refused when set empty.
fn claim_name(p: &Scoped, base: &str, default: &str) -> Result<String, ConfigError> {
    match p.get(base) {
        Some((name, v)) if v.is_empty() => Err(invalid(
            &name,
            &v,
            format!("The OAuth configuration option {base} value is required"),
        )),
        Some((_, v)) => Ok(v),
        None => Ok(default.to_string()),
    }
}

/// The unsecured validator's JAAS options.
fn unsecured(jaas: Option<(&str, &JaasEntry)>) -> Result<UnsecuredValidation, ConfigError> {
    let name = jaas.map_or("", |(name, _)| name);
    let option = |key: &str| {
        jaas.and_then(|(_, e)| e.options.get(key))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let mut required_scope = Vec::new();
    if let Some(scope) = option("unsecuredValidatorRequiredScope") {
        for item in scope.split(' ').filter(|s| !s.is_empty()) {
            if !is_scope_item(item) {
                return Err(invalid(
                    name,
                    "[hidden]",
                    format!("unsecuredValidatorRequiredScope: Invalid scope value: {item}"),
                ));
            }
            required_scope.push(item.to_string());
        }
    }
    let clock_skew_ms = match option("unsecuredValidatorAllowableClockSkewMs") {
        None => 0,
        Some(v) => match v.parse::<i32>() {
            Ok(n) if n >= 0 => i64::from(n),
            Ok(_) => {
                return Err(invalid(
                    name,
                    "[hidden]",
                    format!("Allowable clock skew millis must not be negative: {v}"),
                ))
            }
            Err(_) => {
                return Err(invalid(
                    name,
                    "[hidden]",
                    format!("unsecuredValidatorAllowableClockSkewMs: For input string: \"{v}\""),
                ))
            }
        },
    };
    Ok(UnsecuredValidation {
        principal_claim: option("unsecuredValidatorPrincipalClaimName").unwrap_or("sub".into()),
        scope_claim: option("unsecuredValidatorScopeClaimName").unwrap_or("scope".into()),
        required_scope,
        clock_skew_ms,
    })
}

/// The key set's source from its URL, checked as Kafka checks it at start.
fn jwks_source(name: &str, url: &str) -> Result<JwksSource, ConfigError> {
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(invalid(
            name,
            url,
            format!("The OAuth configuration option {JWKS_URL} contains a URL ({url}) that is missing the protocol"),
        ));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "http" | "https" => {
            let host = rest.strip_prefix("//").unwrap_or("");
            if host.is_empty() || host.starts_with('/') {
                return Err(invalid(
                    name,
                    url,
                    format!("The OAuth configuration option {JWKS_URL} contains a URL ({url}) that is malformed: no host"),
                ));
            }
            Ok(JwksSource::Http(url.to_string()))
        }
        "file" => {
            // file:///path, file:/path, file://localhost/path
            let path = match rest.strip_prefix("//") {
                Some(r) => r.strip_prefix("localhost").unwrap_or(r),
                None => rest,
            };
            let path = PathBuf::from(percent_decode(path));
            if !path.is_absolute() {
                return Err(invalid(
                    name,
                    url,
                    format!("The OAuth configuration option {JWKS_URL} contains a URL ({url}) that is malformed: a file: URL names an absolute path"),
                ));
            }
            match std::fs::metadata(&path) {
                Err(_) => Err(invalid(
                    name,
                    url,
                    format!("The OAuth configuration option {JWKS_URL} contains a file ({}) that doesn't exist", path.display()),
                )),
                Ok(m) if m.is_dir() => Err(invalid(
                    name,
                    url,
                    format!("The OAuth configuration option {JWKS_URL} references a directory ({}), not a file", path.display()),
                )),
                Ok(_) => Ok(JwksSource::File(path)),
            }
        }
        other => Err(invalid(
            name,
            url,
            format!("The OAuth configuration option {JWKS_URL} contains a URL ({url}) that contains an invalid protocol ({other}); only \"http\", \"https\", and \"file\" protocol are supported"),
        )),
    }
}

/// `%XX` escapes of a URL path decoded (invalid ones kept as they are).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::parse_jaas;
    use crate::test_support::props;

    #[test]
    fn unsecured_by_default_with_its_jaas_options() {
        let jaas = parse_jaas(
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin" unsecuredValidatorPrincipalClaimName="user" unsecuredValidatorRequiredScope="a b" unsecuredValidatorAllowableClockSkewMs="500";"#,
        )
        .unwrap();
        let c = listener_oauthbearer(&props(&[]), "SASL", Some(("j", &jaas[0]))).unwrap();
        assert_eq!(
            c,
            OAuthBearerConfig::Unsecured(UnsecuredValidation {
                principal_claim: "user".into(),
                scope_claim: "scope".into(),
                required_scope: vec!["a".into(), "b".into()],
                clock_skew_ms: 500,
            })
        );
        let bad = parse_jaas(
            r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredValidatorAllowableClockSkewMs="-1";"#,
        )
        .unwrap();
        let e = listener_oauthbearer(&props(&[]), "SASL", Some(("j", &bad[0])))
            .unwrap_err()
            .to_string();
        assert!(e.contains("must not be negative"), "{e}");
        // A key set without the secured handler is refused (Kafka would ignore it).
        let e = listener_oauthbearer(
            &props(&[(JWKS_URL, "https://idp.example/keys")]),
            "SASL",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("listener.name.sasl.oauthbearer.sasl.server.callback.handler.class"),
            "{e}"
        );
    }

    #[test]
    fn secured_with_kafkas_names_and_lookup_order() {
        let dir = tempfile::tempdir().unwrap();
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, "{\"keys\":[]}").unwrap();
        let file_url = format!("file://{}", jwks.display());
        let p = props(&[
            (
                "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class",
                SECURED_HANDLERS[0],
            ),
            (JWKS_URL, "https://elsewhere/keys"),
            (
                "listener.name.sasl.oauthbearer.sasl.oauthbearer.jwks.endpoint.url",
                &file_url,
            ),
            (
                "listener.name.sasl.sasl.oauthbearer.expected.audience",
                "kafka, other",
            ),
            ("sasl.oauthbearer.expected.issuer", "https://idp"),
            ("sasl.oauthbearer.clock.skew.seconds", "5"),
        ]);
        let OAuthBearerConfig::Jwks(c) = listener_oauthbearer(&p, "SASL", None).unwrap() else {
            panic!("not secured")
        };
        assert_eq!(c.source, JwksSource::File(jwks.clone()));
        assert_eq!(
            c.expected_audience,
            vec!["kafka".to_string(), "other".into()]
        );
        assert_eq!(c.expected_issuer.as_deref(), Some("https://idp"));
        assert_eq!((c.clock_skew_s, c.refresh_ms), (5, 3_600_000));
        assert_eq!(
            (c.sub_claim.as_str(), c.scope_claim.as_str()),
            ("sub", "scope")
        );

        let handler = (
            "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class",
            SECURED_HANDLERS[0],
        );
        for (extra, wanted) in [
            (vec![], "is required"),
            (vec![(JWKS_URL, "ftp://x/keys")], "invalid protocol (ftp)"),
            (vec![(JWKS_URL, "keys.json")], "missing the protocol"),
            (
                vec![(JWKS_URL, "file:///nonexistent/keys.json")],
                "doesn't exist",
            ),
            (
                vec![
                    (JWKS_URL, "https://idp/k"),
                    ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "-1"),
                ],
                "non-negative",
            ),
        ] {
            let mut p = props(&extra);
            p.insert(handler.0.into(), handler.1.into());
            let e = listener_oauthbearer(&p, "SASL", None)
                .unwrap_err()
                .to_string();
            assert!(e.contains(wanted), "{extra:?}: {e}");
        }
        let e = listener_oauthbearer(
            &props(&[(
                "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class",
                "com.example.MyHandler",
            )]),
            "SASL",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot be loaded"), "{e}");
    }

    #[test]
    fn the_handler_class_says_secured_unsecured_or_is_refused() {
        let name = "listener.name.l.oauthbearer.sasl.server.callback.handler.class";
        assert!(!secured(&props(&[]), name).unwrap());
        assert!(!secured(&props(&[(name, " ")]), name).unwrap());
        assert!(!secured(&props(&[(name, UNSECURED_HANDLER)]), name).unwrap());
        assert!(secured(&props(&[(name, SECURED_HANDLERS[0])]), name).unwrap());
        assert!(secured(&props(&[(name, "x.Y")]), name).is_err());
    }

    #[test]
    fn numbers_are_non_negative_and_claim_names_non_empty_most_specific_name_first() {
        let p = props(&[
            ("listener.name.l.oauthbearer.n", "7"),
            ("listener.name.l.n", "8"),
            ("n", "9"),
            ("listener.name.l.m", "-1"),
            ("c", ""),
        ]);
        let s = Scoped::with_prefixes(
            &p,
            vec![
                "listener.name.l.oauthbearer.".into(),
                "listener.name.l.".into(),
            ],
        );
        assert_eq!(non_negative(&s, "n", 1).unwrap(), 7);
        assert_eq!(non_negative(&s, "unset", 1).unwrap(), 1);
        match non_negative(&s, "m", 1) {
            Err(ConfigError::InvalidValue { name, .. }) => assert_eq!(name, "listener.name.l.m"),
            other => panic!("{other:?}"),
        }
        assert_eq!(claim_name(&s, "unset", "sub").unwrap(), "sub");
        assert!(claim_name(&s, "c", "sub").is_err());
    }
}
