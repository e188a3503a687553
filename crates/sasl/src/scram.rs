//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka implements them
//! (`ScramSaslServer`, `ScramMessages`, `ScramFormatter`):
//!
//! ```text
//! client-first  n,[a=authzid],n=<saslname>,r=<client nonce>[,<ext>=<value>]*
//! server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
//! client-final  c=<base64 gs2 header>,r=<nonce>[,<ext>=<value>]*,p=<base64 proof>
//! server-final  v=<base64 server signature>
//! ```
//!
//! Only the gs2 flag `n` (no channel binding) is accepted, as Kafka does. Extensions are
//! Kafka's `key=value` pairs after the nonce; `tokenauth=true` asks for delegation-token
//! authentication, which Sluice does not serve (it fails as an unknown token does), any
//! other extension is ignored. Names and values are ASCII (Kafka's grammar).
//!
//! A credential is what RFC 5802 stores: salt, StoredKey = H(HMAC(SaltedPassword, "Client
//! Key")), ServerKey = HMAC(SaltedPassword, "Server Key") and the iteration count; the
//! password itself is never kept.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2, rand::SecureRandom};
use subtle::ConstantTimeEq;

/// Kafka's iteration limits for both mechanisms (`ScramMechanism`: min 4096, max 16384).
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;

/// The longest message part (name, nonce, extension) accepted; Kafka has no such limit of its
/// own, the whole token being bounded by `sasl.server.max.receive.size`.
const MAX_FIELD_BYTES: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    /// The mechanism's name (`SCRAM-SHA-256`).
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// Kafka's mechanism type in AlterUserScramCredentials / DescribeUserScramCredentials
    /// (1: SHA-256, 2: SHA-512).
    pub fn kafka_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_kafka_type(t: i8) -> Option<ScramMechanism> {
        match t {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        [ScramMechanism::Sha256, ScramMechanism::Sha512]
            .into_iter()
            .find(|m| m.name() == name)
    }

    fn hmac_alg(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest_alg(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2_alg(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// Length of the hash (and of keys, proofs and signatures).
    pub fn hash_len(self) -> usize {
        self.digest_alg().output_len()
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac_alg(), key), data)
            .as_ref()
            .to_vec()
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest_alg(), data).as_ref().to_vec()
    }

    /// SaltedPassword = Hi(password, salt, iterations), Hi being PBKDF2 with the mechanism's
    /// HMAC and one block. `iterations` of 0 counts as 1.
    pub fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.hash_len()];
        let n = std::num::NonZeroU32::new(iterations).unwrap_or(std::num::NonZeroU32::MIN);
        pbkdf2::derive(self.pbkdf2_alg(), n, salt, password.as_bytes(), &mut out);
        out
    }
}

impl std::fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A stored SCRAM credential.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// The credential from a salted password, as AlterUserScramCredentials carries it (the
    /// client salts the password; Kafka's controller derives the keys).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: &[u8],
        salted_password: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            iterations,
        }
    }

    /// The credential of `password` with this salt.
    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> ScramCredential {
        let salted = mechanism.salted_password(password, salt, iterations);
        ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
    }
}

/// Why a SCRAM exchange failed. Kafka tells the client the message of an
/// [`ScramFailure::Authentication`] (its `SaslAuthenticationException`) and only a generic
/// sentence for [`ScramFailure::Credentials`] (its `SaslException`, whose text could tell an
/// unauthenticated client which users exist); the latter's text is for the broker's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScramFailure {
    Authentication(String),
    Credentials(String),
}

/// A random nonce: printable ASCII without `,` (base64 of 24 random bytes, 32 characters).
fn random_nonce(random: &dyn SecureRandom) -> String {
    let mut bytes = [0u8; 24];
    // The system random source does not fail on Linux once the kernel has entropy; if it
    // did, a nonce from the clock is still unique, which is what SCRAM needs of it.
    if random.fill(&mut bytes).is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes[..16].copy_from_slice(&now.to_le_bytes());
    }
    B64.encode(bytes)
}

/// A random salt for a new credential (what Kafka's tools send is theirs; this is for tests
/// and Sluice's own use).
pub fn random_salt() -> Vec<u8> {
    let mut bytes = vec![0u8; 32];
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    bytes
}

fn is_value_char(c: u8) -> bool {
    (0x01..=0x7f).contains(&c) && c != b','
}

fn is_printable(c: u8) -> bool {
    (0x21..=0x7e).contains(&c) && c != b','
}

fn check_field(
    value: &str,
    ok: fn(u8) -> bool,
    what: &str,
    message: &str,
) -> Result<(), ScramFailure> {
    if value.is_empty() || value.len() > MAX_FIELD_BYTES || !value.bytes().all(ok) {
        return Err(ScramFailure::Credentials(format!(
            "Invalid SCRAM {what} message format: {message}"
        )));
    }
    Ok(())
}

/// A saslname (`=2C` for `,`, `=3D` for `=`) decoded to the user name; None if another `=`
/// appears (Kafka's `ScramFormatter.username`).
fn username(saslname: &str) -> Option<String> {
    let decoded = saslname.replace("=2C", ",");
    if decoded.replace("=3D", "").contains('=') {
        return None;
    }
    Some(decoded.replace("=3D", "="))
}

/// A user name encoded as a saslname.
fn saslname(username: &str) -> String {
    username.replace('=', "=3D").replace(',', "=2C")
}

/// `key=value` extensions (names of letters, values of ASCII without `,`).
fn extensions<'a>(
    parts: &[&'a str],
    what: &str,
    message: &str,
) -> Result<Vec<(&'a str, &'a str)>, ScramFailure> {
    parts
        .iter()
        .map(|p| {
            let (k, v) = p.split_once('=').ok_or_else(|| {
                ScramFailure::Credentials(format!("Invalid SCRAM {what} message format: {message}"))
            })?;
            if k.is_empty() || !k.bytes().all(|c| c.is_ascii_alphabetic()) {
                return Err(ScramFailure::Credentials(format!(
                    "Invalid SCRAM {what} message format: {message}"
                )));
            }
            check_field(v, is_value_char, what, message)?;
            Ok((k, v))
        })
        .collect()
}

/// The client-first message, parsed.
#[derive(Debug)]
struct ClientFirst {
    username: String,
    authzid: String,
    nonce: String,
    /// `n=...` to the end: part of the AuthMessage.
    bare: String,
    token_auth: bool,
}

fn parse_client_first(bytes: &[u8]) -> Result<ClientFirst, ScramFailure> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        ScramFailure::Credentials("Invalid SCRAM client first message format: not UTF-8".into())
    })?;
    let bad =
        || ScramFailure::Credentials(format!("Invalid SCRAM client first message format: {text}"));
    // gs2-header: "n," [ "a=" saslname ] ","
    let rest = text.strip_prefix("n,").ok_or_else(bad)?;
    let (authz, rest) = rest.split_once(',').ok_or_else(bad)?;
    let authzid = match authz {
        "" => String::new(),
        a => {
            let name = a.strip_prefix("a=").ok_or_else(bad)?;
            check_field(name, is_value_char, "client first", text)?;
            username(name).ok_or_else(bad)?
        }
    };
    // Kafka's grammar allows a reserved "m=" part before the name.
    let bare = match rest.strip_prefix("m=") {
        Some(after) => after.split_once(',').map(|(_, b)| b).ok_or_else(bad)?,
        None => rest,
    };
    let parts: Vec<&str> = bare.split(',').collect();
    if parts.len() < 2 {
        return Err(bad());
    }
    let name = parts[0].strip_prefix("n=").ok_or_else(bad)?;
    check_field(name, is_value_char, "client first", text)?;
    let username = username(name).ok_or_else(bad)?;
    let nonce = parts[1].strip_prefix("r=").ok_or_else(bad)?;
    check_field(nonce, is_printable, "client first", text)?;
    let ext = extensions(&parts[2..], "client first", text)?;
    let token_auth = ext
        .iter()
        .any(|(k, v)| *k == "tokenauth" && v.eq_ignore_ascii_case("true"));
    Ok(ClientFirst {
        username,
        authzid,
        nonce: nonce.to_string(),
        bare: bare.to_string(),
        token_auth,
    })
}

enum State {
    First,
    Final {
        client_first_bare: String,
        server_first: String,
        nonce: String,
        credential: ScramCredential,
        username: String,
    },
    Done,
}

/// The server side of one SCRAM exchange: [`ScramServer::client_first`], then
/// [`ScramServer::client_final`].
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: State,
    random: ring::rand::SystemRandom,
    /// A fixed server nonce (tests only).
    fixed_nonce: Option<String>,
}

impl std::fmt::Debug for ScramServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::First => "first",
            State::Final { .. } => "final",
            State::Done => "done",
        };
        f.debug_struct("ScramServer")
            .field("mechanism", &self.mechanism)
            .field("state", &state)
            .finish()
    }
}

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        ScramServer {
            mechanism,
            state: State::First,
            random: ring::rand::SystemRandom::new(),
            fixed_nonce: None,
        }
    }

    /// A server whose nonce is `nonce` (for test vectors).
    pub fn with_nonce(mechanism: ScramMechanism, nonce: &str) -> ScramServer {
        ScramServer {
            fixed_nonce: Some(nonce.to_string()),
            ..ScramServer::new(mechanism)
        }
    }

    /// Whether the next message expected is the client-first one.
    pub fn awaiting_client_first(&self) -> bool {
        matches!(self.state, State::First)
    }

    /// Take the client-first message; `lookup` gives the credential of a user name (None: no
    /// such user). Returns the server-first message.
    pub fn client_first(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Vec<u8>, ScramFailure> {
        if !matches!(self.state, State::First) {
            return Err(ScramFailure::Credentials(
                "Unexpected challenge in Sasl server state".into(),
            ));
        }
        self.state = State::Done;
        let first = parse_client_first(message)?;
        if first.token_auth {
            return Err(ScramFailure::Credentials(format!(
                "Token Authentication failed: Invalid tokenId : {} (delegation tokens are not served)",
                first.username
            )));
        }
        let credential = lookup(&first.username).ok_or_else(|| {
            ScramFailure::Credentials(format!(
                "Authentication failed: Invalid user credentials ({} has no {} credential)",
                first.username, self.mechanism
            ))
        })?;
        if !first.authzid.is_empty() && first.authzid != first.username {
            return Err(ScramFailure::Authentication("Authentication failed: Client requested an authorization id that is different from username".into()));
        }
        if credential.iterations < MIN_ITERATIONS {
            return Err(ScramFailure::Credentials(format!(
                "Iterations {} is less than the minimum {MIN_ITERATIONS} for {}",
                credential.iterations, self.mechanism
            )));
        }
        let server_nonce = self
            .fixed_nonce
            .clone()
            .unwrap_or_else(|| random_nonce(&self.random));
        let nonce = format!("{}{}", first.nonce, server_nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        self.state = State::Final {
            client_first_bare: first.bare,
            server_first: server_first.clone(),
            nonce,
            credential,
            username: first.username,
        };
        Ok(server_first.into_bytes())
    }

    /// Take the client-final message: check the proof. Returns the server-final message and
    /// the authenticated user name.
    pub fn client_final(&mut self, message: &[u8]) -> Result<(Vec<u8>, String), ScramFailure> {
        let State::Final {
            client_first_bare,
            server_first,
            nonce,
            credential,
            username,
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Err(ScramFailure::Credentials(
                "Unexpected challenge in Sasl server state".into(),
            ));
        };
        let text = std::str::from_utf8(message).map_err(|_| {
            ScramFailure::Credentials("Invalid SCRAM client final message format: not UTF-8".into())
        })?;
        let bad = || {
            ScramFailure::Credentials(format!("Invalid SCRAM client final message format: {text}"))
        };
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or_else(bad)?;
        let parts: Vec<&str> = without_proof.split(',').collect();
        if parts.len() < 2 {
            return Err(bad());
        }
        let channel = parts[0].strip_prefix("c=").ok_or_else(bad)?;
        B64.decode(channel).map_err(|_| bad())?;
        let client_nonce = parts[1].strip_prefix("r=").ok_or_else(bad)?;
        extensions(&parts[2..], "client final", text)?;
        let proof = B64.decode(proof).map_err(|_| bad())?;
        if client_nonce != nonce {
            return Err(ScramFailure::Credentials(
                "Invalid client nonce in the final client message.".into(),
            ));
        }
        let m = self.mechanism;
        if proof.len() != m.hash_len() {
            return Err(ScramFailure::Credentials(format!(
                "Invalid client credentials: a proof of {} bytes",
                proof.len()
            )));
        }
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        let client_key: Vec<u8> = client_signature
            .iter()
            .zip(&proof)
            .map(|(a, b)| a ^ b)
            .collect();
        let computed = m.hash(&client_key);
        let equal: bool = computed.ct_eq(&credential.stored_key).into();
        if !equal {
            return Err(ScramFailure::Credentials(
                "Invalid client credentials".into(),
            ));
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok((
            format!("v={}", B64.encode(server_signature)).into_bytes(),
            username,
        ))
    }
}

/// The client side of a SCRAM exchange (what the broker logs in to its peers with).
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// The AuthMessage and salted password, once the server-first message is in.
    pending: Option<(String, Vec<u8>)>,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, username: &str, password: &str) -> ScramClient {
        let nonce = random_nonce(&ring::rand::SystemRandom::new());
        ScramClient::with_nonce(mechanism, username, password, &nonce)
    }

    pub fn with_nonce(
        mechanism: ScramMechanism,
        username: &str,
        password: &str,
        nonce: &str,
    ) -> ScramClient {
        ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={},r={nonce}", saslname(username)),
            nonce: nonce.to_string(),
            pending: None,
        }
    }

    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// Take the server-first message; returns the client-final message.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(server_first)
            .map_err(|_| "the server-first message is not UTF-8".to_string())?;
        let bad = || format!("Invalid SCRAM server first message format: {text}");
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for part in text.split(',') {
            match part.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(B64.decode(v).map_err(|_| bad())?),
                Some(("i", v)) => iterations = Some(v.parse::<u32>().map_err(|_| bad())?),
                Some(("m", _)) => return Err(bad()),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(bad());
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("Invalid server nonce: does not start with client nonce".into());
        }
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!(
                "Requested iterations {iterations} is outside {MIN_ITERATIONS}..={MAX_ITERATIONS} for {}",
                self.mechanism
            ));
        }
        let m = self.mechanism;
        let salted = m.salted_password(&self.password, &salt, iterations);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        self.pending = Some((auth_message, salted));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Check the server-final message (the server's signature proves it knows the
    /// credential).
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let (auth_message, salted) = self
            .pending
            .as_ref()
            .ok_or("no server-first message was taken")?;
        let text = String::from_utf8_lossy(server_final);
        if let Some(error) = text.strip_prefix("e=") {
            return Err(format!(
                "Sasl authentication using {} failed with error: {error}",
                self.mechanism
            ));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v.split(',').next().unwrap_or("")).ok())
            .ok_or_else(|| format!("Invalid SCRAM server final message format: {text}"))?;
        let m = self.mechanism;
        let server_key = m.hmac(salted, b"Server Key");
        let expected = m.hmac(&server_key, auth_message.as_bytes());
        let equal: bool = expected.ct_eq(&signature).into();
        if !equal {
            return Err("Invalid server signature in server final message".into());
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// RFC 7677's example exchange (SCRAM-SHA-256, user "user", password "pencil").
    const C1: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
    const S1: &str =
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const C2: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const S2: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc_credential() -> ScramCredential {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        ScramCredential::from_password(ScramMechanism::Sha256, "pencil", &salt, 4096)
    }

    #[test]
    fn rfc7677_server() {
        let mut s =
            ScramServer::with_nonce(ScramMechanism::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
        let first = s
            .client_first(C1.as_bytes(), |u| (u == "user").then(rfc_credential))
            .unwrap();
        assert_eq!(String::from_utf8(first).unwrap(), S1);
        let (last, user) = s.client_final(C2.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(last).unwrap(), S2);
        assert_eq!(user, "user");
    }

    #[test]
    fn rfc7677_client() {
        let mut c = ScramClient::with_nonce(
            ScramMechanism::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO",
        );
        assert_eq!(String::from_utf8(c.client_first()).unwrap(), C1);
        assert_eq!(
            String::from_utf8(c.client_final(S1.as_bytes()).unwrap()).unwrap(),
            C2
        );
        c.verify_server_final(S2.as_bytes()).unwrap();
        assert!(c
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G5=")
            .is_err());
    }

    #[test]
    fn client_and_server_agree_for_both_mechanisms() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let cred = ScramCredential::from_password(m, "s3cr=t,", &random_salt(), 8192);
            let mut c = ScramClient::new(m, "al=ice,x", "s3cr=t,");
            let mut s = ScramServer::new(m);
            let first = s
                .client_first(&c.client_first(), |u| {
                    (u == "al=ice,x").then(|| cred.clone())
                })
                .unwrap();
            let fin = c.client_final(&first).unwrap();
            let (last, user) = s.client_final(&fin).unwrap();
            assert_eq!(user, "al=ice,x");
            c.verify_server_final(&last).unwrap();

            // A wrong password: the proof does not verify.
            let mut c = ScramClient::new(m, "al=ice,x", "wrong");
            let mut s = ScramServer::new(m);
            let first = s
                .client_first(&c.client_first(), |_| Some(cred.clone()))
                .unwrap();
            let fin = c.client_final(&first).unwrap();
            assert_eq!(
                s.client_final(&fin).unwrap_err(),
                ScramFailure::Credentials("Invalid client credentials".into())
            );
        }
    }

    #[test]
    fn kafka_extensions_and_token_auth() {
        let cred = rfc_credential();
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(s
            .client_first(b"n,,n=user,r=abc,foo=bar,baz=1", |_| Some(cred.clone()))
            .is_ok());
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(
            s.client_first(b"n,,n=user,r=abc,tokenauth=true", |_| Some(cred.clone())),
            Err(ScramFailure::Credentials(m)) if m.contains("Token Authentication failed")
        ));
    }

    #[test]
    fn unknown_user_low_iterations_and_authzid() {
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(
            s.client_first(C1.as_bytes(), |_| None),
            Err(ScramFailure::Credentials(_))
        ));
        let salt = random_salt();
        let weak = ScramCredential::from_password(ScramMechanism::Sha256, "p", &salt, 4095);
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(
            s.client_first(C1.as_bytes(), |_| Some(weak.clone())),
            Err(ScramFailure::Credentials(m)) if m.contains("less than the minimum")
        ));
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(matches!(
            s.client_first(b"n,a=bob,n=user,r=x", |_| Some(rfc_credential())),
            Err(ScramFailure::Authentication(m)) if m.contains("authorization id")
        ));
        let mut s = ScramServer::new(ScramMechanism::Sha256);
        assert!(s
            .client_first(b"n,a=user,n=user,r=x", |_| Some(rfc_credential()))
            .is_ok());
    }

    #[test]
    fn garbage_is_refused_without_panic() {
        let garbage: &[&[u8]] = &[
            b"",
            b"n",
            b"n,",
            b"n,,",
            b"n,,n=",
            b"n,,n=user",
            b"n,,n=user,r=",
            b"y,,n=user,r=x",
            b"p=tls-unique,,n=user,r=x",
            b"n,,n=us=er,r=x",
            b"n,,n=user,r=a,b",
            b"n,,n=user,r=a b",
            b"\xff\xfe",
            b"n,,n=user,r=x,=v",
            b"n,m,n=user,r=x",
        ];
        for g in garbage {
            let mut s = ScramServer::new(ScramMechanism::Sha512);
            assert!(
                s.client_first(g, |_| Some(rfc_credential())).is_err(),
                "{:?}",
                String::from_utf8_lossy(g)
            );
        }
        let finals: &[&[u8]] = &[
            b"",
            b"c=biws",
            b"c=biws,r=x",
            b"c=biws,p=AAAA",
            b"c=!!,r=x,p=AAAA",
            b"c=biws,r=x,p=!!",
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=AAAA",
            b"\xff",
        ];
        for g in finals {
            let mut s =
                ScramServer::with_nonce(ScramMechanism::Sha256, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
            s.client_first(C1.as_bytes(), |_| Some(rfc_credential()))
                .unwrap();
            assert!(
                s.client_final(g).is_err(),
                "{:?}",
                String::from_utf8_lossy(g)
            );
            // And a second message after the exchange ended is refused too.
            assert!(s.client_final(C2.as_bytes()).is_err());
        }
    }

    #[test]
    fn salted_password_is_kafkas_alter_request() {
        // What kafka-configs sends (salt, salted password) gives the credential a password
        // gives.
        let salt = b"0123456789abcdef".to_vec();
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let salted = m.salted_password("alice-secret", &salt, 8192);
            assert_eq!(salted.len(), m.hash_len());
            assert_eq!(
                ScramCredential::from_salted_password(m, &salt, &salted, 8192),
                ScramCredential::from_password(m, "alice-secret", &salt, 8192)
            );
        }
    }
}
