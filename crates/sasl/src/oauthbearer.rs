//! OAUTHBEARER (RFC 7628) as Kafka's broker speaks it: the client's first message, the
//! error challenge, and the validation of the bearer token, either as Kafka's default
//! server handler does it (an unsecured JWS, `alg: none`,
//! `OAuthBearerUnsecuredValidatorCallbackHandler`) or as its broker JWT validator does it
//! (a signed JWT checked against a JSON Web Key Set, `OAuthBearerValidatorCallbackHandler` /
//! `BrokerJwtValidator`).
//!
//! The exchange, server side:
//!
//! ```text
//! client: n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]*^A
//! server: (token valid)   empty message; done, principal from the token
//!         (token refused) {"status":"invalid_token"} as a challenge
//! client: ^A               (after a refusal)
//! server: failure, with that JSON as the message
//! ```
//!
//! Everything here is pure: the caller passes the time and the key set in force. The token
//! and the message come from unauthenticated clients; nothing here panics on them, and each
//! refusal carries the reason for the broker's log (what the client is told is Kafka's:
//! the JSON status, or the generic failure for a malformed message).

use std::collections::{BTreeMap, BTreeSet};

use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;
use ring::signature;
use serde_json::Value;

/// The mechanism's name.
pub const MECHANISM: &str = "OAUTHBEARER";

/// What the client sends after the server's error challenge (RFC 7628 section 3.2.3).
pub const CONTROL_A: u8 = 0x01;

const SEPARATOR: char = '\u{1}';

/// Base64url as Java's URL decoder takes it: padding optional, trailing bits ignored.
const B64URL: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_decode_padding_mode(DecodePaddingMode::Indifferent)
        .with_decode_allow_trailing_bits(true),
);

fn b64url(s: &str) -> Result<Vec<u8>, ()> {
    B64URL.decode(s).map_err(|_| ())
}

/// The client's first message.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientFirst {
    /// The authorization id (`a=`), empty when not given.
    pub authzid: String,
    /// The bearer token.
    pub token: String,
    /// SASL extensions (every key but `auth`).
    pub extensions: BTreeMap<String, String>,
}

impl std::fmt::Debug for ClientFirst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientFirst")
            .field("authzid", &self.authzid)
            .field("token", &"[hidden]")
            .field("extensions", &self.extensions.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A SASLNAME (RFC 5801): ASCII but `=` and `,`, with `=2C` and `=3D` as escapes.
fn is_saslname(s: &str) -> bool {
    if s.is_empty() {
        return false;
    }
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'=' if matches!(b.get(i + 1..i + 3), Some(b"2C" | b"3D")) => i += 3,
            b'=' | b',' | 0 => return false,
            c if c.is_ascii() => i += 1,
            _ => return false,
        }
    }
    true
}

fn is_extension_key(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_alphabetic())
}

fn is_extension_value(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| (0x21..=0x7e).contains(&c) || matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
}

/// `<scheme> +<token>` with Kafka's characters: a word, spaces, then b64token (RFC 6750).
fn split_auth(auth: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = auth.split_once(' ')?;
    let token = rest.trim_start_matches(' ');
    let scheme_ok = !scheme.is_empty()
        && scheme
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_');
    let body = token.trim_end_matches('=');
    let token_ok = !body.is_empty()
        && body.bytes().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'~' | b'+' | b'/' | b'.')
        });
    (scheme_ok && token_ok).then_some((scheme, token))
}

/// Parse the client's first message as Kafka's `OAuthBearerClientInitialResponse` does. The
/// error is the reason for the log (the client is told only that authentication failed).
pub fn parse_client_first(bytes: &[u8]) -> Result<ClientFirst, String> {
    const INVALID: &str = "Invalid OAUTHBEARER client first message";
    let text = std::str::from_utf8(bytes).map_err(|_| INVALID.to_string())?;
    // GS2 header: `n,` then an optional `a=<saslname>`, then `,`.
    let rest = text.strip_prefix("n,").ok_or(INVALID)?;
    let (authzid, rest) = match rest.strip_prefix("a=") {
        Some(r) => {
            let (name, rest) = r.split_once(',').ok_or(INVALID)?;
            if !is_saslname(name) {
                return Err(INVALID.into());
            }
            (name.to_string(), rest)
        }
        None => (String::new(), rest.strip_prefix(',').ok_or(INVALID)?),
    };
    // ^A (key=value ^A)* ^A
    let pairs = rest
        .strip_prefix(SEPARATOR)
        .and_then(|r| r.strip_suffix(SEPARATOR))
        .ok_or(INVALID)?;
    let mut map = BTreeMap::new();
    if !pairs.is_empty() {
        let pairs = pairs.strip_suffix(SEPARATOR).ok_or(INVALID)?;
        for pair in pairs.split(SEPARATOR) {
            let (k, v) = pair.split_once('=').ok_or(INVALID)?;
            if !is_extension_key(k) || !is_extension_value(v) {
                return Err(INVALID.into());
            }
            map.insert(k.to_string(), v.to_string());
        }
    }
    let auth = map
        .remove("auth")
        .ok_or_else(|| format!("{INVALID}: 'auth' not specified"))?;
    let (scheme, token) =
        split_auth(&auth).ok_or_else(|| format!("{INVALID}: invalid 'auth' format"))?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(format!(
            "Invalid scheme in OAUTHBEARER client first message: {scheme}"
        ));
    }
    Ok(ClientFirst {
        authzid,
        token: token.to_string(),
        extensions: map,
    })
}

/// The client's first message (what a client sends; the broker uses it in tests and fuzzing).
pub fn client_first(token: &str, extensions: &BTreeMap<String, String>) -> Vec<u8> {
    let mut s = format!("n,,{SEPARATOR}auth=Bearer {token}");
    for (k, v) in extensions {
        s.push(SEPARATOR);
        s.push_str(k);
        s.push('=');
        s.push_str(v);
    }
    s.push(SEPARATOR);
    s.push(SEPARATOR);
    s.into_bytes()
}

/// A token that passed validation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The principal's name (the `sub` claim or the one configured).
    pub principal: String,
    /// When the token expires, milliseconds since the epoch (its `exp`).
    pub expires_ms: i64,
    /// When it was issued, milliseconds since the epoch (its `iat`), if it says.
    pub issued_ms: Option<i64>,
    pub scope: BTreeSet<String>,
}

/// Why a token was refused: the RFC 7628 error status (and scope) the client gets as JSON,
/// and the reason for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// `invalid_token` or `insufficient_scope`.
    pub status: &'static str,
    /// The scope that was required, as Kafka prints a list (`[a, b]`).
    pub scope: Option<String>,
    pub reason: String,
}

impl Refusal {
    fn invalid(reason: impl Into<String>) -> Refusal {
        Refusal {
            status: "invalid_token",
            scope: None,
            reason: reason.into(),
        }
    }

    /// The JSON the server sends as its challenge, and later as the failure's message, in
    /// Kafka's form: `{"status":"invalid_token"}`, `{"status":"insufficient_scope", "scope":"[a]"}`.
    pub fn challenge(&self) -> String {
        match &self.scope {
            None => format!("{{\"status\":\"{}\"}}", self.status),
            Some(scope) => format!(
                "{{\"status\":\"{}\", \"scope\":\"{}\"}}",
                self.status, scope
            ),
        }
    }
}

/// The claims or header of a JWS, as a JSON object (a JSON value that is not an object has
/// no members, as Kafka reads it).
fn json_object(segment: &str) -> Result<serde_json::Map<String, Value>, String> {
    let bytes = b64url(segment).map_err(|()| "malformed Base64 URL encoded value".to_string())?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Ok(serde_json::Map::new()),
        Err(_) => Err("malformed JSON".into()),
    }
}

/// Java's simple class name for a JSON value Kafka read, for messages.
fn java_type(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "ArrayList",
        Value::Number(n) if n.is_f64() => "Double",
        Value::Number(n) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => "Integer",
        Value::Number(_) => "Long",
        _ => "String",
    }
}

fn seconds_to_ms(seconds: f64) -> i64 {
    // Saturating: a float to int conversion in Rust never panics.
    (seconds * 1000.0).round() as i64
}

/// The options of Kafka's default server handler, `OAuthBearerUnsecuredValidatorCallbackHandler`
/// (its JAAS options `unsecuredValidator*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsecuredValidator {
    /// `unsecuredValidatorPrincipalClaimName` (`sub`).
    pub principal_claim: String,
    /// `unsecuredValidatorScopeClaimName` (`scope`).
    pub scope_claim: String,
    /// `unsecuredValidatorRequiredScope`, space separated.
    pub required_scope: Vec<String>,
    /// `unsecuredValidatorAllowableClockSkewMs` (0).
    pub clock_skew_ms: i64,
}

impl Default for UnsecuredValidator {
    fn default() -> Self {
        UnsecuredValidator {
            principal_claim: "sub".into(),
            scope_claim: "scope".into(),
            required_scope: Vec::new(),
            clock_skew_ms: 0,
        }
    }
}

/// A scope item as Kafka's `OAuthBearerScopeUtils` allows it: printable ASCII but space, `"`
/// and `\`.
pub fn is_scope_item(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c == 0x21 || (0x23..=0x5b).contains(&c) || (0x5d..=0x7e).contains(&c))
}

fn kafka_list(items: &[String]) -> String {
    format!("[{}]", items.join(", "))
}

impl UnsecuredValidator {
    /// Validate `token` at `now_ms` (milliseconds since the epoch) as Kafka's unsecured
    /// validator does.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<Token, Refusal> {
        if token.contains("..") {
            return Err(Refusal::invalid(
                "Malformed compact serialization contains '..'",
            ));
        }
        // Java's split drops trailing empty strings; Kafka adds one back for a final dot.
        let mut splits: Vec<&str> = token.split('.').collect();
        while splits.len() > 1 && splits.last() == Some(&"") {
            splits.pop();
        }
        if token.ends_with('.') {
            splits.push("");
        }
        let [header, claims, signature] = splits[..] else {
            return Err(Refusal::invalid(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values",
            ));
        };
        let header = json_object(header).map_err(Refusal::invalid)?;
        let claims = json_object(claims).map_err(Refusal::invalid)?;
        match header.get("alg") {
            None => return Err(Refusal::invalid("JWS header must have an Algorithm value")),
            Some(Value::String(a)) if a == "none" => {}
            Some(_) => {
                return Err(Refusal::invalid(
                    "Unsecured JWS must have 'none' for an algorithm",
                ))
            }
        }
        if !signature.is_empty() {
            return Err(Refusal::invalid(
                "Unsecured JWS must not contain a digital signature",
            ));
        }
        let scope = self.scope(&claims)?;
        let number = |name: &str| -> Result<Option<f64>, Refusal> {
            match claims.get(name) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(n.as_f64()),
                Some(other) => Err(Refusal::invalid(format!(
                    "The '{name}' claim was not of type Number: {}",
                    java_type(other)
                ))),
            }
        };
        let exp = number("exp")?.ok_or_else(|| Refusal::invalid("No expiration time in JWT"))?;
        let principal = match claims.get(&self.principal_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::String(_)) | None => {
                return Err(Refusal::invalid(format!(
                    "No principal name in JWT claim: {}",
                    self.principal_claim
                )))
            }
            Some(other) => {
                return Err(Refusal::invalid(format!(
                    "The '{}' claim was not of type String: {}",
                    self.principal_claim,
                    java_type(other)
                )))
            }
        };
        let iat = number("iat")?;
        let skew = self.clock_skew_ms;
        if let Some(iat) = iat {
            if 1000.0 * iat > now_ms.saturating_add(skew) as f64 {
                return Err(Refusal::invalid(format!(
                    "The Issued At value ({iat:.6} seconds) was after the indicated time ({now_ms} ms) plus allowable clock skew ({skew} ms)"
                )));
            }
        }
        if now_ms.saturating_sub(skew) as f64 >= 1000.0 * exp {
            return Err(Refusal::invalid(format!(
                "The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after the Expiration Time value ({exp:.6} seconds)"
            )));
        }
        if let Some(iat) = iat {
            if exp <= iat {
                return Err(Refusal::invalid(format!(
                    "The Expiration Time time ({exp:.6} seconds) was not after the Issued At time ({iat:.6} seconds)"
                )));
            }
        }
        if let Some(missing) = self.required_scope.iter().find(|s| !scope.contains(*s)) {
            return Err(Refusal {
                status: "insufficient_scope",
                scope: Some(kafka_list(&self.required_scope)),
                reason: format!(
                    "The provided scope ({}) was missing a required scope ({missing}).  All required scope elements: {}",
                    kafka_list(&scope.iter().cloned().collect::<Vec<_>>()),
                    kafka_list(&self.required_scope)
                ),
            });
        }
        Ok(Token {
            principal,
            expires_ms: seconds_to_ms(exp),
            issued_ms: iat.map(seconds_to_ms),
            scope,
        })
    }

    /// The scope claim: a string is one item (as Kafka reads it), a list its non-blank items.
    fn scope(&self, claims: &serde_json::Map<String, Value>) -> Result<BTreeSet<String>, Refusal> {
        match claims.get(&self.scope_claim) {
            None => Ok(BTreeSet::new()),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(BTreeSet::new()),
            Some(Value::String(s)) => Ok([s.trim().to_string()].into()),
            Some(Value::Array(items)) => Ok(items
                .iter()
                .map(json_text)
                .filter(|s| !s.trim().is_empty())
                .map(|s| s.trim().to_string())
                .collect()),
            Some(other) => Err(Refusal::invalid(format!(
                "The '{}' claim was not of type List: {}",
                self.scope_claim,
                java_type(other)
            ))),
        }
    }
}

/// A JSON value as Jackson's `asText` gives it.
fn json_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        _ => String::new(),
    }
}

/// A public key of a JSON Web Key Set that can verify signatures.
#[derive(Clone, PartialEq, Eq)]
enum KeyMaterial {
    /// RSA modulus and exponent (big-endian, leading zeros removed).
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// An uncompressed EC point (`04 || x || y`) on P-256 or P-384.
    Ec { curve: Curve, point: Vec<u8> },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
}

/// One key of a key set.
#[derive(Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    /// The key's `alg`, when it names one.
    pub alg: Option<String>,
    /// The key's `use` (`sig`, `enc`), when given.
    pub usage: Option<String>,
    material: KeyMaterial,
}

impl std::fmt::Debug for Jwk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kty = match &self.material {
            KeyMaterial::Rsa { n, .. } => format!("RSA {} bits", n.len() * 8),
            KeyMaterial::Ec { curve, .. } => format!("EC {curve:?}"),
        };
        f.debug_struct("Jwk")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .field("use", &self.usage)
            .field("kty", &kty)
            .finish()
    }
}

/// A JSON Web Key Set (RFC 7517): the keys that can verify signatures. Keys of other types
/// (symmetric, OKP, P-521) and malformed keys are left out, and counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Jwks {
    pub keys: Vec<Jwk>,
    /// Keys left out (not a signature key Sluice verifies with, or malformed).
    pub skipped: usize,
}

fn unsigned(bytes: Vec<u8>) -> Vec<u8> {
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    bytes[start..].to_vec()
}

fn parse_jwk(k: &serde_json::Map<String, Value>) -> Option<Jwk> {
    let text = |name: &str| k.get(name).and_then(Value::as_str).map(str::to_string);
    let bytes = |name: &str| {
        k.get(name)
            .and_then(Value::as_str)
            .and_then(|s| b64url(s).ok())
    };
    let material = match k.get("kty")?.as_str()? {
        "RSA" => KeyMaterial::Rsa {
            n: unsigned(bytes("n")?),
            e: unsigned(bytes("e")?),
        },
        "EC" => {
            let (curve, len) = match k.get("crv")?.as_str()? {
                "P-256" => (Curve::P256, 32),
                "P-384" => (Curve::P384, 48),
                _ => return None,
            };
            let (x, y) = (unsigned(bytes("x")?), unsigned(bytes("y")?));
            if x.len() > len || y.len() > len {
                return None;
            }
            let mut point = vec![4u8];
            for c in [x, y] {
                point.resize(point.len() + len - c.len(), 0);
                point.extend_from_slice(&c);
            }
            KeyMaterial::Ec { curve, point }
        }
        _ => return None,
    };
    Some(Jwk {
        kid: text("kid"),
        alg: text("alg"),
        usage: text("use"),
        material,
    })
}

impl Jwks {
    /// Parse a key set document (`{"keys":[...]}`).
    pub fn parse(json: &[u8]) -> Result<Jwks, String> {
        let v: Value =
            serde_json::from_slice(json).map_err(|e| format!("not a JSON document: {e}"))?;
        let keys = v
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("not a JSON Web Key Set: no \"keys\" array")?;
        let mut set = Jwks::default();
        for k in keys {
            match k.as_object().and_then(parse_jwk) {
                Some(k) => set.keys.push(k),
                None => set.skipped += 1,
            }
        }
        Ok(set)
    }

    /// Whether a key with this id is in the set.
    pub fn has_kid(&self, kid: &str) -> bool {
        self.keys.iter().any(|k| k.kid.as_deref() == Some(kid))
    }
}

/// A JWS algorithm Sluice verifies.
#[derive(Clone, Copy, Debug)]
enum Alg {
    Rsa(&'static signature::RsaParameters),
    Ec(Curve, &'static signature::EcdsaVerificationAlgorithm),
}

fn algorithm(name: &str) -> Option<Alg> {
    Some(match name {
        "RS256" => Alg::Rsa(&signature::RSA_PKCS1_2048_8192_SHA256),
        "RS384" => Alg::Rsa(&signature::RSA_PKCS1_2048_8192_SHA384),
        "RS512" => Alg::Rsa(&signature::RSA_PKCS1_2048_8192_SHA512),
        "PS256" => Alg::Rsa(&signature::RSA_PSS_2048_8192_SHA256),
        "PS384" => Alg::Rsa(&signature::RSA_PSS_2048_8192_SHA384),
        "PS512" => Alg::Rsa(&signature::RSA_PSS_2048_8192_SHA512),
        "ES256" => Alg::Ec(Curve::P256, &signature::ECDSA_P256_SHA256_FIXED),
        "ES384" => Alg::Ec(Curve::P384, &signature::ECDSA_P384_SHA384_FIXED),
        _ => return None,
    })
}

fn verify(alg: Alg, key: &Jwk, message: &[u8], sig: &[u8]) -> bool {
    match (alg, &key.material) {
        (Alg::Rsa(params), KeyMaterial::Rsa { n, e }) => signature::RsaPublicKeyComponents { n, e }
            .verify(params, message, sig)
            .is_ok(),
        (Alg::Ec(curve, a), KeyMaterial::Ec { curve: c, point }) if curve == *c => {
            signature::UnparsedPublicKey::new(a, point)
                .verify(message, sig)
                .is_ok()
        }
        _ => false,
    }
}

/// The checks of Kafka's broker JWT validator (`BrokerJwtValidator`, on jose4j): a signed JWS
/// (never `alg: none`), its signature by a key of the set, `exp` and `iat` present, `exp` and
/// `nbf` within the clock skew, the audience and issuer when configured, and the subject and
/// scope claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtValidator {
    /// `sasl.oauthbearer.expected.audience`: the token's `aud` must name one of them; when
    /// empty, a token with an `aud` is refused (as jose4j does).
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

impl Default for JwtValidator {
    fn default() -> Self {
        JwtValidator {
            expected_audience: Vec::new(),
            expected_issuer: None,
            sub_claim: "sub".into(),
            scope_claim: "scope".into(),
            clock_skew_s: 30,
        }
    }
}

/// Why a signed token was refused, for the log, and whether a fresh key set might accept
/// it (its key id is not in the set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwtRefusal {
    pub reason: String,
    pub unknown_kid: Option<String>,
}

impl JwtRefusal {
    fn new(reason: impl Into<String>) -> JwtRefusal {
        JwtRefusal {
            reason: format!("Could not validate the access token: {}", reason.into()),
            unknown_kid: None,
        }
    }
}

/// A NumericDate claim (seconds), as jose4j reads it: a number, truncated to whole seconds.
fn numeric_date(
    claims: &serde_json::Map<String, Value>,
    name: &str,
) -> Result<Option<i64>, JwtRefusal> {
    match claims.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_i64().or_else(|| n.as_f64().map(|f| f as i64))),
        Some(other) => Err(JwtRefusal::new(format!(
            "The value of the '{name}' claim is not the expected type ({other} - {})",
            java_type(other)
        ))),
    }
}

impl JwtValidator {
    /// Validate `token` against `keys` at `now_ms` (milliseconds since the epoch).
    pub fn validate(&self, token: &str, keys: &Jwks, now_ms: i64) -> Result<Token, JwtRefusal> {
        let token = token.trim();
        let parts: Vec<&str> = token.split('.').collect();
        let [header_b64, claims_b64, sig_b64] = parts[..] else {
            return Err(JwtRefusal::new(
                "Malformed JWT provided; expected three sections (header, payload, and signature)",
            ));
        };
        if [header_b64, claims_b64, sig_b64]
            .iter()
            .any(|p| p.trim().is_empty())
        {
            return Err(JwtRefusal::new(
                "Malformed JWT provided; expected at least one character in each section",
            ));
        }
        let header = json_object(header_b64).map_err(JwtRefusal::new)?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        if alg.is_empty() || alg == "none" {
            return Err(JwtRefusal::new(format!(
                "the JWS algorithm (alg) header value '{alg}' is not permitted"
            )));
        }
        let Some(algorithm) = algorithm(alg) else {
            return Err(JwtRefusal::new(format!(
                "the JWS algorithm (alg) {alg} is not supported (RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384 are)"
            )));
        };
        if header.contains_key("crit") {
            return Err(JwtRefusal::new(
                "the JWS header names critical extensions (crit), none of which is understood",
            ));
        }
        let sig = b64url(sig_b64).map_err(|()| JwtRefusal::new("malformed signature"))?;
        let kid = header.get("kid").and_then(Value::as_str);
        let family_matches = |k: &Jwk| {
            matches!(
                (algorithm, &k.material),
                (Alg::Rsa(_), KeyMaterial::Rsa { .. }) | (Alg::Ec(..), KeyMaterial::Ec { .. })
            )
        };
        let candidates: Vec<&Jwk> = keys
            .keys
            .iter()
            .filter(|k| kid.is_none_or(|kid| k.kid.as_deref() == Some(kid)))
            .filter(|k| family_matches(k))
            .filter(|k| k.usage.as_deref().is_none_or(|u| u == "sig"))
            .filter(|k| k.alg.as_deref().is_none_or(|a| a == alg))
            .collect();
        if candidates.is_empty() {
            return Err(JwtRefusal {
                reason: format!(
                    "Could not validate the access token: Unable to find a suitable verification key for JWS w/ header alg={alg} kid={} among {} key(s)",
                    kid.unwrap_or("(none)"),
                    keys.keys.len()
                ),
                unknown_kid: kid.filter(|k| !keys.has_kid(k)).map(str::to_string),
            });
        }
        let signed = &token.as_bytes()[..header_b64.len() + 1 + claims_b64.len()];
        if !candidates
            .iter()
            .any(|k| verify(algorithm, k, signed, &sig))
        {
            return Err(JwtRefusal::new(format!(
                "JWS signature is invalid (alg={alg} kid={})",
                kid.unwrap_or("(none)")
            )));
        }
        let claims = json_object(claims_b64).map_err(JwtRefusal::new)?;
        self.check_claims(&claims, now_ms)
    }

    /// The claims of a token whose signature verified, as Kafka's JWT validator checks them:
    /// its times, audience and issuer, then the principal and the scope it gives.
    fn check_claims(
        &self,
        claims: &serde_json::Map<String, Value>,
        now_ms: i64,
    ) -> Result<Token, JwtRefusal> {
        let (exp, iat) = self.check_times(claims, now_ms)?;
        self.check_audience(claims)?;
        self.check_issuer(claims)?;
        Ok(Token {
            principal: self.principal(claims)?,
            expires_ms: exp.saturating_mul(1000),
            issued_ms: Some(iat.saturating_mul(1000)),
            scope: self.scope(claims)?,
        })
    }

    /// `exp` and `iat` are required, `exp` not before `iat`; the token is refused from `exp`
    /// on and before `nbf`, each with `sasl.oauthbearer.clock.skew.seconds` of leeway.
    /// Returns (exp, iat) in seconds.
    fn check_times(
        &self,
        claims: &serde_json::Map<String, Value>,
        now_ms: i64,
    ) -> Result<(i64, i64), JwtRefusal> {
        let now = now_ms.div_euclid(1000);
        let skew = self.clock_skew_s;
        let leeway =
            format!(" (even when providing {skew} seconds of leeway to account for clock skew).");
        let exp = numeric_date(claims, "exp")?
            .ok_or_else(|| JwtRefusal::new("No Expiration Time (exp) claim present."))?;
        let iat = numeric_date(claims, "iat")?
            .ok_or_else(|| JwtRefusal::new("No Issued At (iat) claim present."))?;
        if now >= exp.saturating_add(skew) {
            return Err(JwtRefusal::new(format!(
                "The JWT is no longer valid - the evaluation time {now} is on or after the Expiration Time (exp={exp}) claim value{leeway}"
            )));
        }
        if exp < iat {
            return Err(JwtRefusal::new(format!(
                "The Expiration Time (exp={exp}) claim value cannot be before the Issued At (iat={iat}) claim value."
            )));
        }
        if let Some(nbf) = numeric_date(claims, "nbf")? {
            if now.saturating_add(skew) < nbf {
                return Err(JwtRefusal::new(format!(
                    "The JWT is not yet valid as the evaluation time {now} is before the Not Before (nbf={nbf}) claim time{leeway}"
                )));
            }
        }
        Ok((exp, iat))
    }

    /// With an expected audience, `aud` (a string or a list) must name one of it; an `aud`
    /// when none is expected is refused, as Kafka's validator does.
    fn check_audience(&self, claims: &serde_json::Map<String, Value>) -> Result<(), JwtRefusal> {
        let audiences: Option<Vec<String>> = match claims.get("aud") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(vec![s.clone()]),
            Some(Value::Array(a)) => Some(a.iter().map(json_text).collect()),
            Some(other) => {
                return Err(JwtRefusal::new(format!(
                    "The value of the 'aud' claim is not the expected type ({other})"
                )))
            }
        };
        match audiences {
            None if !self.expected_audience.is_empty() => {
                return Err(JwtRefusal::new("No Audience (aud) claim present."))
            }
            None => {}
            Some(auds) if !auds.iter().any(|a| self.expected_audience.contains(a)) => {
                let why = if self.expected_audience.is_empty() {
                    " present in the JWT but no expected audience value(s) were provided to the JWT Consumer."
                } else {
                    " doesn't contain an acceptable identifier."
                };
                return Err(JwtRefusal::new(format!(
                    "Audience (aud) claim {}{why} Expected {} as an aud value.",
                    kafka_list(&auds),
                    if self.expected_audience.len() == 1 {
                        self.expected_audience[0].clone()
                    } else {
                        format!("one of {}", kafka_list(&self.expected_audience))
                    }
                )));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// With an expected issuer, `iss` must be it.
    fn check_issuer(&self, claims: &serde_json::Map<String, Value>) -> Result<(), JwtRefusal> {
        if let Some(expected) = &self.expected_issuer {
            match claims.get("iss").and_then(Value::as_str) {
                None => return Err(JwtRefusal::new("No Issuer (iss) claim present.")),
                Some(iss) if iss != expected => {
                    return Err(JwtRefusal::new(format!(
                    "Issuer (iss) claim value ({iss}) doesn't match expected value of {expected}"
                )))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The principal: the `sasl.oauthbearer.sub.claim.name` claim, a non-empty string.
    fn principal(&self, claims: &serde_json::Map<String, Value>) -> Result<String, JwtRefusal> {
        match claims.get(&self.sub_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            Some(Value::String(_)) | None | Some(Value::Null) => Err(JwtRefusal {
                reason: format!(
                    "The {} claim is required and cannot be empty",
                    self.sub_claim
                ),
                unknown_kid: None,
            }),
            Some(_) => Err(JwtRefusal {
                reason: format!(
                    "Could not extract the '{}' claim from the access token",
                    self.sub_claim
                ),
                unknown_kid: None,
            }),
        }
    }

    /// The scope: the `sasl.oauthbearer.scope.claim.name` claim, a string or a list, none of
    /// its items empty; empty when absent.
    fn scope(
        &self,
        claims: &serde_json::Map<String, Value>,
    ) -> Result<BTreeSet<String>, JwtRefusal> {
        let scope: BTreeSet<String> = match claims.get(&self.scope_claim) {
            Some(Value::String(s)) => [s.clone()].into(),
            Some(Value::Array(a)) => a.iter().map(json_text).collect(),
            _ => BTreeSet::new(),
        };
        if scope.iter().any(|s| s.trim().is_empty()) {
            return Err(JwtRefusal {
                reason: format!("The {} claim contains an empty value", self.scope_claim),
                unknown_kid: None,
            });
        }
        Ok(scope.iter().map(|s| s.trim().to_string()).collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn enc(json: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    fn unsecured(claims: &str) -> String {
        format!("{}.{}.", enc(r#"{"alg":"none"}"#), enc(claims))
    }

    #[test]
    fn parses_kafkas_first_message() {
        let m = parse_client_first(b"n,,\x01auth=Bearer abc.def.\x01\x01").unwrap();
        assert_eq!(m.token, "abc.def.");
        assert_eq!(m.authzid, "");
        assert!(m.extensions.is_empty());
        let m = parse_client_first(
            b"n,a=alice,\x01auth=bearer  tok==\x01traceId=12 3\x01logicalCluster=x\x01\x01",
        )
        .unwrap();
        assert_eq!(m.authzid, "alice");
        assert_eq!(m.token, "tok==");
        assert_eq!(m.extensions["traceId"], "12 3");
        assert_eq!(m.extensions["logicalCluster"], "x");
        let mut ext = BTreeMap::new();
        ext.insert("k".to_string(), "v".to_string());
        let m = parse_client_first(&client_first("t.u.v", &ext)).unwrap();
        assert_eq!(
            (m.token.as_str(), m.extensions["k"].as_str()),
            ("t.u.v", "v")
        );
    }

    #[test]
    fn refuses_malformed_first_messages() {
        for (m, why) in [
            (&b""[..], "Invalid OAUTHBEARER client first message"),
            (b"y,,\x01auth=Bearer t\x01\x01", "Invalid"),
            (b"n,,\x01auth=Bearer t\x01", "Invalid"),
            (b"n,,\x01\x01", "'auth' not specified"),
            (b"n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
            (b"n,,\x01auth=Bearer t t\x01\x01", "invalid 'auth' format"),
            (b"n,,\x01auth=Basic t\x01\x01", "Invalid scheme"),
            (b"n,,\x01auth=Bearer t\x01k1=v\x01\x01", "Invalid"),
            (b"n,,\x01auth=Bearer t\x01k=\x01\x01", "Invalid"),
            (b"n,a=a,b,\x01auth=Bearer t\x01\x01", "Invalid"),
            (b"n,,\x01auth=Bearer \xff\x01\x01", "Invalid"),
        ] {
            let e = parse_client_first(m).unwrap_err();
            assert!(e.contains(why), "{m:?}: {e}");
        }
    }

    #[test]
    fn unsecured_tokens_as_kafka_reads_them() {
        let v = UnsecuredValidator::default();
        let now = 1_700_000_000_000;
        let t = v
            .validate(
                &unsecured(
                    r#"{"sub":"alice","iat":1699999999,"exp":1700000060,"scope":["a"," b ",""]}"#,
                ),
                now,
            )
            .unwrap();
        assert_eq!(t.principal, "alice");
        assert_eq!(t.expires_ms, 1_700_000_060_000);
        assert_eq!(t.scope, ["a".to_string(), "b".to_string()].into());
        // A string scope is one item.
        let t = v
            .validate(
                &unsecured(r#"{"sub":"a","exp":1700000060,"scope":"x y"}"#),
                now,
            )
            .unwrap();
        assert_eq!(t.scope, ["x y".to_string()].into());
        for (token, why) in [
            (
                unsecured(r#"{"sub":"a","exp":1699999999}"#),
                "on or after the Expiration Time",
            ),
            (unsecured(r#"{"sub":"a"}"#), "No expiration time"),
            (
                unsecured(r#"{"exp":1700000060}"#),
                "No principal name in JWT claim: sub",
            ),
            (
                unsecured(r#"{"sub":7,"exp":1700000060}"#),
                "not of type String",
            ),
            (unsecured(r#"{"sub":"a","exp":"x"}"#), "not of type Number"),
            (
                unsecured(r#"{"sub":"a","exp":1700000060,"iat":1700000100}"#),
                "Issued At",
            ),
            (
                format!(
                    "{}.{}.sig",
                    enc(r#"{"alg":"none"}"#),
                    enc(r#"{"sub":"a","exp":1700000060}"#)
                ),
                "must not contain a digital signature",
            ),
            (
                format!(
                    "{}.{}.",
                    enc(r#"{"alg":"RS256"}"#),
                    enc(r#"{"sub":"a","exp":1700000060}"#)
                ),
                "'none' for an algorithm",
            ),
            ("a..b".into(), "contains '..'"),
            ("abc".into(), "3 dot-separated"),
            ("a+b.c.".into(), "malformed Base64"),
            (format!("{}.{}.", enc("{"), enc("{}")), "malformed JSON"),
        ] {
            let r = v.validate(&token, now).unwrap_err();
            assert_eq!(r.status, "invalid_token");
            assert!(r.reason.contains(why), "{token}: {}", r.reason);
            assert_eq!(r.challenge(), r#"{"status":"invalid_token"}"#);
        }
        // Clock skew.
        let skewed = UnsecuredValidator {
            clock_skew_ms: 2000,
            ..UnsecuredValidator::default()
        };
        assert!(skewed
            .validate(&unsecured(r#"{"sub":"a","exp":1699999999}"#), now)
            .is_ok());
        // Required scope.
        let scoped = UnsecuredValidator {
            required_scope: vec!["a".into(), "c".into()],
            ..UnsecuredValidator::default()
        };
        let r = scoped
            .validate(
                &unsecured(r#"{"sub":"a","exp":1700000060,"scope":["a"]}"#),
                now,
            )
            .unwrap_err();
        assert_eq!(
            r.challenge(),
            r#"{"status":"insufficient_scope", "scope":"[a, c]"}"#
        );
    }

    #[test]
    fn jwks_keys_and_claims() {
        let set = Jwks::parse(
            br#"{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB","use":"sig"},
                {"kty":"oct","k":"AA"},{"kty":"EC","crv":"P-256","x":"AQ","y":"Ag"},{"kty":"RSA"}]}"#,
        )
        .unwrap();
        assert_eq!(set.keys.len(), 2);
        assert_eq!(set.skipped, 2);
        assert!(set.has_kid("k1"));
        assert!(Jwks::parse(b"{}").is_err());
        assert!(Jwks::parse(b"[").is_err());

        let v = JwtValidator {
            expected_audience: vec!["kafka".into()],
            expected_issuer: Some("https://idp".into()),
            ..JwtValidator::default()
        };
        let claims = |s: &str| -> serde_json::Map<String, Value> {
            match serde_json::from_str(s).unwrap() {
                Value::Object(m) => m,
                _ => unreachable!(),
            }
        };
        let now = 1_700_000_000_000;
        let ok = v
            .check_claims(
                &claims(r#"{"sub":"bob","iat":1699999000,"exp":1700000100,"aud":["x","kafka"],"iss":"https://idp","scope":"s"}"#),
                now,
            )
            .unwrap();
        assert_eq!(
            (ok.principal.as_str(), ok.expires_ms),
            ("bob", 1_700_000_100_000)
        );
        for (c, why) in [
            (
                r#"{"sub":"b","iat":1,"exp":1699999970,"aud":"kafka","iss":"https://idp"}"#,
                "no longer valid",
            ),
            (
                r#"{"sub":"b","iat":1,"exp":1700000100,"aud":"other","iss":"https://idp"}"#,
                "acceptable identifier",
            ),
            (
                r#"{"sub":"b","iat":1,"exp":1700000100,"iss":"https://idp"}"#,
                "No Audience",
            ),
            (
                r#"{"sub":"b","iat":1,"exp":1700000100,"aud":"kafka","iss":"x"}"#,
                "Issuer (iss) claim value (x)",
            ),
            (
                r#"{"sub":"b","exp":1700000100,"aud":"kafka","iss":"https://idp"}"#,
                "No Issued At",
            ),
            (
                r#"{"iat":1,"exp":1700000100,"aud":"kafka","iss":"https://idp"}"#,
                "sub claim is required",
            ),
            (
                r#"{"sub":"b","iat":1,"exp":1700000100,"nbf":1700000100,"aud":"kafka","iss":"https://idp"}"#,
                "not yet valid",
            ),
        ] {
            let e = v.check_claims(&claims(c), now).unwrap_err();
            assert!(e.reason.contains(why), "{c}: {}", e.reason);
        }
        // Without an expected audience, a token naming one is refused (jose4j).
        let e = JwtValidator::default()
            .check_claims(
                &claims(r#"{"sub":"b","iat":1,"exp":1700000100,"aud":"kafka"}"#),
                now,
            )
            .unwrap_err();
        assert!(e.reason.contains("no expected audience"), "{}", e.reason);
    }

    #[test]
    fn signed_tokens_need_a_key_that_verifies() {
        // An ES256 key made by ring, its public point as a JWK.
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .unwrap();
        let pair = signature::EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8.as_ref(),
            &rng,
        )
        .unwrap();
        use signature::KeyPair;
        let point = pair.public_key().as_ref();
        let jwks = format!(
            r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"e1","x":"{}","y":"{}"}}]}}"#,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&point[1..33]),
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&point[33..65]),
        );
        let keys = Jwks::parse(jwks.as_bytes()).unwrap();
        let sign = |header: &str, claims: &str| {
            let input = format!("{}.{}", enc(header), enc(claims));
            let sig = pair.sign(&rng, input.as_bytes()).unwrap();
            format!(
                "{input}.{}",
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig.as_ref())
            )
        };
        let claims = r#"{"sub":"carol","iat":1699999000,"exp":1700000100}"#;
        let v = JwtValidator::default();
        let now = 1_700_000_000_000;
        let t = v
            .validate(&sign(r#"{"alg":"ES256","kid":"e1"}"#, claims), &keys, now)
            .unwrap();
        assert_eq!(t.principal, "carol");
        // No kid: any key that verifies.
        assert!(v
            .validate(&sign(r#"{"alg":"ES256"}"#, claims), &keys, now)
            .is_ok());
        // Another kid: unknown, a refresh may help.
        let e = v
            .validate(&sign(r#"{"alg":"ES256","kid":"e2"}"#, claims), &keys, now)
            .unwrap_err();
        assert_eq!(e.unknown_kid.as_deref(), Some("e2"));
        // A changed payload: the signature fails.
        let good = sign(r#"{"alg":"ES256","kid":"e1"}"#, claims);
        let mut parts: Vec<String> = good.split('.').map(str::to_string).collect();
        parts[1] = enc(r#"{"sub":"mallory","iat":1699999000,"exp":1700000100}"#);
        let e = v.validate(&parts.join("."), &keys, now).unwrap_err();
        assert!(e.reason.contains("signature is invalid"), "{}", e.reason);
        // alg none, and an unsupported alg.
        let e = v.validate(&unsecured(claims), &keys, now).unwrap_err();
        assert!(
            e.reason.contains("Malformed") || e.reason.contains("not permitted"),
            "{}",
            e.reason
        );
        let e = v
            .validate(&sign(r#"{"alg":"HS256","kid":"e1"}"#, claims), &keys, now)
            .unwrap_err();
        assert!(e.reason.contains("not supported"), "{}", e.reason);
    }
}
