//! The SASL settings of a listener, with Kafka's names: `sasl.enabled.mechanisms`, the JAAS
//! configuration of each mechanism (`listener.name.<listener>.<mechanism>.sasl.jaas.config`),
//! `connections.max.reauth.ms` and `sasl.server.max.receive.size`, each of which may be given
//! for one listener as `listener.name.<listener, lower case>.<property>`.
//!
//! This module parses Kafka's JAAS syntax ([`parse_jaas`]) and reads the properties; the
//! broker authenticates with them (crates/broker/src/sasl.rs). OAUTHBEARER's settings
//! (which validator, its JAAS options and `sasl.oauthbearer.*`) are in `oauthbearer.rs`.

use std::collections::BTreeMap;

use crate::scoped::Scoped;
use crate::{ConfigError, OAuthBearerConfig};

/// A SASL mechanism Sluice serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
    OAuthBearer,
}

impl SaslMechanism {
    pub const ALL: [SaslMechanism; 4] = [
        SaslMechanism::Plain,
        SaslMechanism::ScramSha256,
        SaslMechanism::ScramSha512,
        SaslMechanism::OAuthBearer,
    ];

    /// The mechanism's name on the wire (`PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`,
    /// `OAUTHBEARER`).
    pub fn name(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
            SaslMechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    /// The mechanism named `name` (exactly, as Kafka compares them).
    pub fn parse(name: &str) -> Option<SaslMechanism> {
        SaslMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The JAAS login module Kafka configures the mechanism with.
    pub fn login_module(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                "org.apache.kafka.common.security.scram.ScramLoginModule"
            }
            SaslMechanism::OAuthBearer => {
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
            }
        }
    }
}

impl std::fmt::Display for SaslMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A user name and password, as a JAAS configuration's `username` and `password` options give
/// them (what the broker itself logs in with as a client, to other brokers).
#[derive(Clone, PartialEq, Eq)]
pub struct SaslLogin {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("username", &self.username)
            .field("password", &"[hidden]")
            .finish()
    }
}

/// One SASL listener's settings.
#[derive(Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms`, in the order given (SaslHandshake answers with this list).
    pub mechanisms: Vec<SaslMechanism>,
    /// PLAIN's users, `user_<name>="<password>"` of the PLAIN JAAS configuration.
    pub plain_users: BTreeMap<String, String>,
    /// The `username` and `password` of each mechanism's JAAS configuration, where given.
    pub logins: BTreeMap<SaslMechanism, SaslLogin>,
    /// `connections.max.reauth.ms`: a session's lifetime (KIP-368); 0 = no limit.
    pub reauth_ms: u64,
    /// `listener.name.<l>.<mechanism>.connections.max.reauth.ms`, where given: the lifetime of
    /// that mechanism's sessions instead (Kafka's per-mechanism form).
    pub reauth_ms_by_mechanism: BTreeMap<SaslMechanism, u64>,
    /// `sasl.server.max.receive.size`: largest request read before authentication.
    pub max_receive_bytes: u32,
    /// How OAUTHBEARER tokens are validated, when the listener enables it.
    pub oauthbearer: Option<crate::OAuthBearerConfig>,
}

impl SaslConfig {
    /// The session lifetime of `mechanism` (`connections.max.reauth.ms`, or its per-mechanism
    /// form); 0 = no limit.
    pub fn reauth_ms_for(&self, mechanism: SaslMechanism) -> u64 {
        self.reauth_ms_by_mechanism
            .get(&mechanism)
            .copied()
            .unwrap_or(self.reauth_ms)
    }
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanisms", &self.mechanisms)
            .field("plain_users", &self.plain_users.keys().collect::<Vec<_>>())
            .field("logins", &self.logins)
            .field("reauth_ms", &self.reauth_ms)
            .field("reauth_ms_by_mechanism", &self.reauth_ms_by_mechanism)
            .field("max_receive_bytes", &self.max_receive_bytes)
            .field("oauthbearer", &self.oauthbearer)
            .finish()
    }
}

/// Kafka's default `sasl.server.max.receive.size`.
pub const SASL_MAX_RECEIVE_DEFAULT: u32 = 524288;

/// The SASL properties this module reads: the plain names and their `listener.name.<l>.`
/// forms, and `[listener.name.<l>.]<mechanism>.sasl.jaas.config`.
const SASL_PROPERTIES: &[&str] = &[
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.server.max.receive.size",
    "connections.max.reauth.ms",
    "sasl.mechanism.inter.broker.protocol",
];

/// Kafka's `sasl.*` properties that Sluice accepts, needs only for OAUTHBEARER
/// (`sasl.oauthbearer.*`, the server callback handler class: `oauthbearer.rs`) or does not
/// need (Kerberos, the client callback handler class, login refresh).
const SASL_IGNORED_PREFIXES: &[&str] = &[
    "sasl.kerberos.",
    "sasl.login.",
    "sasl.oauthbearer.",
    "sasl.server.callback.handler.class",
    "sasl.client.callback.handler.class",
];

/// True for a property this module reads or accepts.
pub(crate) fn is_sasl_property(name: &str) -> bool {
    let base = match name.strip_prefix("listener.name.") {
        Some(rest) => match rest.split_once('.') {
            Some((_, base)) => base,
            None => return false,
        },
        None => name,
    };
    // `<mechanism>.sasl.jaas.config`, `<mechanism>.connections.max.reauth.ms`, ...
    let base = match base.split_once('.') {
        Some((mech, rest))
            if SaslMechanism::ALL
                .iter()
                .any(|m| m.name().eq_ignore_ascii_case(mech))
                || mech.eq_ignore_ascii_case("gssapi")
                || mech.eq_ignore_ascii_case("oauthbearer") =>
        {
            rest
        }
        _ => base,
    };
    SASL_PROPERTIES.contains(&base) || SASL_IGNORED_PREFIXES.iter().any(|p| base.starts_with(p))
}

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// One login module entry of a JAAS configuration: `<module> <flag> (<option>=<value>)*;`.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    /// `required`, `requisite`, `sufficient` or `optional` (lower case).
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JaasEntry")
            .field("login_module", &self.login_module)
            .field("flag", &self.flag)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Number,
    Char(char),
}

/// Split JAAS text into tokens as Java's `StreamTokenizer` does with Kafka's settings: words
/// of letters, digits, `.`, `-`, `_` and `$`; quoted strings (`"` or `'`, with backslash
/// escapes); `//` and `/* */` comments; any other character on its own.
fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() || c.is_control() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' || c == '\r' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                let mut closed = false;
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        closed = true;
                        break;
                    }
                    prev = c;
                }
                if !closed {
                    return Err("a /* comment is not closed".into());
                }
            }
            '"' | '\'' => {
                let quote = c;
                let mut s = String::new();
                let mut closed = false;
                while let Some(c) = chars.next() {
                    match c {
                        c if c == quote => {
                            closed = true;
                            break;
                        }
                        '\\' => match chars.next() {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('r') => s.push('\r'),
                            Some(other) => s.push(other),
                            None => break,
                        },
                        // Java's tokenizer ends a quoted string at a line break.
                        '\n' | '\r' => break,
                        c => s.push(c),
                    }
                }
                if !closed {
                    return Err(format!("a quoted value is not closed: {quote}{s}"));
                }
                tokens.push(Token::Quoted(s));
            }
            c if c.is_ascii_alphanumeric()
                || matches!(c, '.' | '-' | '_' | '$')
                || !c.is_ascii() =>
            {
                let mut s = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_ascii_alphanumeric()
                        || matches!(n, '.' | '-' | '_' | '$')
                        || (!n.is_ascii() && !n.is_whitespace())
                    {
                        s.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                // Java's tokenizer reads a token starting with a digit as a number, which
                // has no string value: Kafka then says the value is missing.
                if s.starts_with(|c: char| c.is_ascii_digit()) {
                    tokens.push(Token::Number);
                } else {
                    tokens.push(Token::Word(s));
                }
            }
            c => tokens.push(Token::Char(c)),
        }
    }
    Ok(tokens)
}

/// Parse a JAAS configuration as Kafka's `sasl.jaas.config` takes it:
/// `<loginModuleClass> <controlFlag> (<optionName>=<optionValue>)*;`, one or more entries.
/// The error is a sentence for the operator, in Kafka's words where Kafka has them.
pub fn parse_jaas(text: &str) -> Result<Vec<JaasEntry>, String> {
    let tokens = tokenize(text)?;
    let mut entries = Vec::new();
    let mut i = 0;
    let word = |t: Option<&Token>| match t {
        Some(Token::Word(s)) | Some(Token::Quoted(s)) => Some(s.clone()),
        _ => None,
    };
    while i < tokens.len() {
        let login_module = word(tokens.get(i)).ok_or("the login module class is not given")?;
        i += 1;
        let flag = word(tokens.get(i))
            .ok_or("Login module control flag not specified in JAAS config")?
            .to_ascii_lowercase();
        if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) {
            return Err(format!(
                "Invalid login module control flag '{flag}' in JAAS config"
            ));
        }
        i += 1;
        let mut options = BTreeMap::new();
        loop {
            match tokens.get(i) {
                None => return Err("JAAS config entry not terminated by semi-colon".into()),
                Some(Token::Char(';')) => {
                    i += 1;
                    break;
                }
                t => {
                    let key = word(t)
                        .ok_or_else(|| format!("unexpected {} in JAAS config", describe(t)))?;
                    if tokens.get(i + 1) != Some(&Token::Char('=')) {
                        return Err(format!(
                            "Value not specified for key '{key}' in JAAS config"
                        ));
                    }
                    let value = word(tokens.get(i + 2)).ok_or_else(|| {
                        format!("Value not specified for key '{key}' in JAAS config")
                    })?;
                    options.insert(key, value);
                    i += 3;
                }
            }
        }
        entries.push(JaasEntry {
            login_module,
            flag,
            options,
        });
    }
    if entries.is_empty() {
        return Err("Login module not specified in JAAS config".into());
    }
    Ok(entries)
}

fn describe(t: Option<&Token>) -> String {
    match t {
        Some(Token::Char(c)) => format!("'{c}'"),
        Some(Token::Number) => "a number".into(),
        Some(Token::Word(w)) | Some(Token::Quoted(w)) => format!("'{w}'"),
        None => "end".into(),
    }
}

/// The SASL settings of listener `listener` from `props`.
pub(crate) fn listener_sasl(
    props: &BTreeMap<String, String>,
    listener: &str,
) -> Result<SaslConfig, ConfigError> {
    let p = Scoped::listener(props, listener);
    let mechanisms = mechanisms(&p, props, listener)?;
    let Credentials {
        plain_users,
        logins,
        oauthbearer,
    } = credentials(props, p.prefix(), listener, &mechanisms)?;
    Ok(SaslConfig {
        reauth_ms: whole_number(&p, "connections.max.reauth.ms", 0, i64::MAX as u64)?,
        reauth_ms_by_mechanism: reauth_by_mechanism(props, p.prefix(), &mechanisms)?,
        max_receive_bytes: whole_number(
            &p,
            "sasl.server.max.receive.size",
            u64::from(SASL_MAX_RECEIVE_DEFAULT),
            i32::MAX as u64,
        )? as u32,
        mechanisms,
        plain_users,
        logins,
        oauthbearer,
    })
}

/// `sasl.enabled.mechanisms`, each once, in order. Kafka's default is GSSAPI (Kerberos),
/// which Sluice does not serve, so a SASL listener must name its mechanisms, at least one.
fn mechanisms(
    p: &Scoped,
    props: &BTreeMap<String, String>,
    listener: &str,
) -> Result<Vec<SaslMechanism>, ConfigError> {
    let (mech_name, mech_value) = p
        .get("sasl.enabled.mechanisms")
        .unwrap_or_else(|| ("sasl.enabled.mechanisms".into(), "GSSAPI".into()));
    let mut mechanisms = Vec::new();
    for m in mech_value
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        match SaslMechanism::parse(m) {
            Some(m) if !mechanisms.contains(&m) => mechanisms.push(m),
            Some(_) => {}
            None => {
                return Err(invalid(
                    &mech_name,
                    &mech_value,
                    format!(
                        "listener {listener} uses SASL; the mechanism {m} is not served (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are){}",
                        if mech_name == "sasl.enabled.mechanisms" && !props.contains_key("sasl.enabled.mechanisms") {
                            " and GSSAPI is Kafka's default: set sasl.enabled.mechanisms"
                        } else {
                            ""
                        }
                    ),
                ))
            }
        }
    }
    if mechanisms.is_empty() {
        return Err(invalid(
            &mech_name,
            &mech_value,
            format!("listener {listener} uses SASL and needs at least one mechanism"),
        ));
    }
    Ok(mechanisms)
}

/// What the listener's JAAS entries give, per mechanism.
struct Credentials {
    plain_users: BTreeMap<String, String>,
    logins: BTreeMap<SaslMechanism, SaslLogin>,
    oauthbearer: Option<OAuthBearerConfig>,
}

/// Reads each mechanism's JAAS entry: PLAIN's users (`user_<name>="<password>"`, required:
/// without an entry nobody could log in), the broker's own login per mechanism
/// (`username` with `password`, both or neither) and OAUTHBEARER's validation settings.
fn credentials(
    props: &BTreeMap<String, String>,
    prefix: &str,
    listener: &str,
    mechanisms: &[SaslMechanism],
) -> Result<Credentials, ConfigError> {
    let mut plain_users = BTreeMap::new();
    let mut logins = BTreeMap::new();
    let mut oauthbearer = None;
    for &m in mechanisms {
        let jaas = jaas_for(props, prefix, m)?;
        if m == SaslMechanism::OAuthBearer {
            oauthbearer = Some(crate::oauthbearer::listener_oauthbearer(
                props,
                listener,
                jaas.as_ref().map(|(name, entry)| (name.as_str(), entry)),
            )?);
            continue;
        }
        let Some((name, entry)) = jaas else {
            if m == SaslMechanism::Plain {
                return Err(invalid(
                    &format!("{prefix}plain.sasl.jaas.config"),
                    "",
                    format!(
                        "listener {listener} enables PLAIN and needs its users: {prefix}plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"alice-secret\";"
                    ),
                ));
            }
            continue;
        };
        if m == SaslMechanism::Plain {
            for (k, v) in &entry.options {
                if let Some(user) = k.strip_prefix("user_") {
                    plain_users.insert(user.to_string(), v.clone());
                }
            }
            if plain_users.is_empty() {
                tracing::warn!(property = %name, "the PLAIN JAAS configuration of listener {listener} has no user_<name>=\"<password>\" option: nobody can log in with PLAIN");
            }
        }
        match (entry.options.get("username"), entry.options.get("password")) {
            (Some(u), Some(p)) => {
                logins.insert(
                    m,
                    SaslLogin {
                        username: u.clone(),
                        password: p.clone(),
                    },
                );
            }
            (None, None) => {}
            _ => {
                return Err(invalid(
                    &name,
                    "[hidden]",
                    "the JAAS configuration gives a username without a password or a password without a username",
                ))
            }
        }
    }
    Ok(Credentials {
        plain_users,
        logins,
        oauthbearer,
    })
}

/// A whole number from 0 to `max`; `default` when unset.
fn whole_number(p: &Scoped, base: &str, default: u64, max: u64) -> Result<u64, ConfigError> {
    match p.get(base) {
        None => Ok(default),
        Some((name, v)) => {
            v.parse::<u64>().ok().filter(|n| *n <= max).ok_or_else(|| {
                invalid(&name, &v, format!("must be a whole number from 0 to {max}"))
            })
        }
    }
}

/// `listener.name.<l>.<mechanism>.connections.max.reauth.ms`, for the mechanisms that set it.
fn reauth_by_mechanism(
    props: &BTreeMap<String, String>,
    prefix: &str,
    mechanisms: &[SaslMechanism],
) -> Result<BTreeMap<SaslMechanism, u64>, ConfigError> {
    let mut out = BTreeMap::new();
    for &m in mechanisms {
        let name = format!(
            "{prefix}{}.connections.max.reauth.ms",
            m.name().to_ascii_lowercase()
        );
        if let Some(v) = props.get(&name).map(|v| v.trim()) {
            let ms = v
                .parse::<u64>()
                .ok()
                .filter(|n| *n <= i64::MAX as u64)
                .ok_or_else(|| {
                    invalid(
                        &name,
                        v,
                        format!("must be a whole number from 0 to {}", i64::MAX),
                    )
                })?;
            out.insert(m, ms);
        }
    }
    Ok(out)
}

/// The JAAS entry configuring mechanism `m` on the listener with property prefix `prefix`:
/// Kafka's `listener.name.<l>.<mechanism>.sasl.jaas.config`, else (a fallback Kafka's brokers
/// take from their JAAS file instead) `listener.name.<l>.sasl.jaas.config` or
/// `sasl.jaas.config` when its login module is the mechanism's.
fn jaas_for(
    props: &BTreeMap<String, String>,
    prefix: &str,
    m: SaslMechanism,
) -> Result<Option<(String, JaasEntry)>, ConfigError> {
    let exact = format!("{prefix}{}.sasl.jaas.config", m.name().to_ascii_lowercase());
    let candidates = [
        (exact.clone(), true),
        (format!("{prefix}sasl.jaas.config"), false),
        ("sasl.jaas.config".to_string(), false),
    ];
    for (name, mechanism_specific) in candidates {
        let Some(text) = props.get(&name) else {
            continue;
        };
        let entries = parse_jaas(text).map_err(|e| invalid(&name, "[hidden]", e))?;
        if entries.len() != 1 {
            return Err(invalid(
                &name,
                "[hidden]",
                format!(
                    "JAAS config property contains {} login modules, should be 1 module",
                    entries.len()
                ),
            ));
        }
        let Some(entry) = entries.into_iter().next() else {
            continue;
        };
        if entry.login_module != m.login_module() {
            if mechanism_specific {
                return Err(invalid(
                    &name,
                    "[hidden]",
                    format!(
                        "{} is configured with {}, which Sluice does not serve; use {}",
                        m,
                        entry.login_module,
                        m.login_module()
                    ),
                ));
            }
            continue;
        }
        return Ok(Some((name, entry)));
    }
    Ok(None)
}

/// `sasl.mechanism.inter.broker.protocol` (Kafka's default GSSAPI, not served) for the SASL
/// inter-broker listener `listener` with settings `sasl`: enabled there, and the JAAS
/// configuration of that mechanism on that listener gives the `username` and `password` the
/// broker logs in to its peers with.
pub(crate) fn inter_broker(
    props: &BTreeMap<String, String>,
    listener: &str,
    sasl: &SaslConfig,
) -> Result<(SaslMechanism, SaslLogin), ConfigError> {
    const NAME: &str = "sasl.mechanism.inter.broker.protocol";
    let value = props
        .get(NAME)
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "GSSAPI".into());
    let m = SaslMechanism::parse(&value).ok_or_else(|| {
        invalid(
            NAME,
            &value,
            format!(
                "the inter-broker listener {listener} uses SASL; brokers log in to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512{}",
                if props.contains_key(NAME) { "" } else { " (GSSAPI is Kafka's default: set this property)" }
            ),
        )
    })?;
    if m == SaslMechanism::OAuthBearer {
        return Err(invalid(
            NAME,
            &value,
            format!("brokers do not log in to each other with OAUTHBEARER (they would need a token of their own): enable PLAIN or SCRAM-SHA-256/512 on the inter-broker listener {listener} as well and name it here"),
        ));
    }
    if !sasl.mechanisms.contains(&m) {
        return Err(invalid(
            NAME,
            &value,
            format!("{m} is not enabled on the inter-broker listener {listener} (sasl.enabled.mechanisms)"),
        ));
    }
    let login = sasl.logins.get(&m).cloned().ok_or_else(|| {
        invalid(
            &format!(
                "listener.name.{}.{}.sasl.jaas.config",
                listener.to_ascii_lowercase(),
                m.name().to_ascii_lowercase()
            ),
            "",
            format!("brokers log in to each other on {listener} with {m}: its JAAS configuration needs username=\"...\" and password=\"...\""),
        )
    })?;
    Ok((m, login))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_support::props;

    #[test]
    fn parses_kafkas_plain_example() {
        let e = parse_jaas(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#,
        )
        .unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].login_module, SaslMechanism::Plain.login_module());
        assert_eq!(e[0].flag, "required");
        assert_eq!(e[0].options["username"], "admin");
        assert_eq!(e[0].options["user_alice"], "alice-secret");
        assert_eq!(e[0].options.len(), 4);
    }

    #[test]
    fn quotes_escapes_comments_and_unquoted_words() {
        let e = parse_jaas(
            "/* broker */ org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED\n  // the admin\n  username=admin password='p\\'a\"s s=;' tokenauth=false ;",
        )
        .unwrap();
        assert_eq!(e[0].flag, "required");
        assert_eq!(e[0].options["username"], "admin");
        assert_eq!(e[0].options["password"], "p'a\"s s=;");
        assert_eq!(e[0].options["tokenauth"], "false");
        // Two entries.
        assert_eq!(
            parse_jaas("a.B required; c.D optional x=\"1\";")
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn bad_syntax_says_what_is_wrong() {
        for (text, wanted) in [
            ("", "Login module not specified"),
            ("a.B", "control flag not specified"),
            (
                "a.B mandatory;",
                "Invalid login module control flag 'mandatory'",
            ),
            (
                "a.B required username=\"x\"",
                "not terminated by semi-colon",
            ),
            (
                "a.B required username;",
                "Value not specified for key 'username'",
            ),
            (
                "a.B required username=;",
                "Value not specified for key 'username'",
            ),
            (
                "a.B required username=123;",
                "Value not specified for key 'username'",
            ),
            ("a.B required username=\"x;", "not closed"),
            ("a.B required /* x", "not closed"),
            ("a.B required = \"x\";", "unexpected '='"),
        ] {
            let e = parse_jaas(text).unwrap_err();
            assert!(e.contains(wanted), "{text:?}: {e}");
        }
    }

    #[test]
    fn listener_settings_with_kafkas_names() {
        let p = props(&[
            (
                "listener.name.sasl_plaintext.sasl.enabled.mechanisms",
                "SCRAM-SHA-512,PLAIN",
            ),
            ("sasl.enabled.mechanisms", "GSSAPI"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#,
            ),
            (
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
                r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s";"#,
            ),
            (
                "listener.name.sasl_plaintext.connections.max.reauth.ms",
                "60000",
            ),
            (
                "listener.name.sasl_plaintext.plain.connections.max.reauth.ms",
                "5000",
            ),
        ]);
        let c = listener_sasl(&p, "SASL_PLAINTEXT").unwrap();
        assert_eq!(
            c.mechanisms,
            vec![SaslMechanism::ScramSha512, SaslMechanism::Plain]
        );
        assert_eq!(c.plain_users["alice"], "alice-secret");
        assert_eq!(c.logins[&SaslMechanism::ScramSha512].password, "s");
        assert_eq!(c.reauth_ms, 60000);
        assert_eq!(c.reauth_ms_for(SaslMechanism::Plain), 5000);
        assert_eq!(c.reauth_ms_for(SaslMechanism::ScramSha512), 60000);
        assert_eq!(c.max_receive_bytes, SASL_MAX_RECEIVE_DEFAULT);
        // GSSAPI (Kafka's default) is refused with what to set.
        let e = listener_sasl(&props(&[]), "SASL_PLAINTEXT")
            .unwrap_err()
            .to_string();
        assert!(e.contains("GSSAPI is Kafka's default"), "{e}");
        // PLAIN without users' JAAS.
        let e = listener_sasl(&props(&[("sasl.enabled.mechanisms", "PLAIN")]), "X")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listener.name.x.plain.sasl.jaas.config"), "{e}");
        // The fallback sasl.jaas.config.
        let c = listener_sasl(
            &props(&[
                ("sasl.enabled.mechanisms", "PLAIN"),
                ("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"b\";"),
            ]),
            "X",
        )
        .unwrap();
        assert_eq!(c.plain_users["bob"], "b");
        // Bad JAAS syntax names the property.
        let e = listener_sasl(
            &props(&[
                ("sasl.enabled.mechanisms", "PLAIN"),
                ("listener.name.x.plain.sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required user_bob=\"b\""),
            ]),
            "X",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("listener.name.x.plain.sasl.jaas.config") && e.contains("semi-colon"),
            "{e}"
        );
        assert!(
            !e.contains("user_bob=\\\"b"),
            "the JAAS text (passwords) is not shown: {e}"
        );
    }

    #[test]
    fn sasl_property_names_are_known() {
        for name in [
            "sasl.enabled.mechanisms",
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "listener.name.a.scram-sha-256.sasl.jaas.config",
            "sasl.mechanism.inter.broker.protocol",
            "sasl.kerberos.service.name",
            "listener.name.a.connections.max.reauth.ms",
        ] {
            assert!(is_sasl_property(name), "{name}");
        }
        assert!(!is_sasl_property("sasl.bogus"));
    }
}
