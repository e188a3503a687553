//! SASL/PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd`, checked as Kafka's
//! `PlainSaslServer` checks it, with Kafka's messages.

use ring::digest;
use subtle::ConstantTimeEq;

/// What a PLAIN client sent.
#[derive(PartialEq, Eq)]
pub struct PlainMessage {
    pub authzid: String,
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for PlainMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainMessage")
            .field("authzid", &self.authzid)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// Parse a PLAIN message. The error is Kafka's message for the client.
pub fn parse(bytes: &[u8]) -> Result<PlainMessage, String> {
    // Kafka decodes the bytes as UTF-8 (replacing what is not) and splits at NUL into at most
    // four pieces; exactly three are expected.
    let text = String::from_utf8_lossy(bytes);
    let tokens: Vec<&str> = text.splitn(4, '\0').collect();
    if tokens.len() != 3 {
        return Err(format!(
            "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
            tokens.len()
        ));
    }
    let (authzid, username, password) = (tokens[0], tokens[1], tokens[2]);
    if username.is_empty() {
        return Err("Authentication failed: username not specified".into());
    }
    if password.is_empty() {
        return Err("Authentication failed: password not specified".into());
    }
    Ok(PlainMessage {
        authzid: authzid.to_string(),
        username: username.to_string(),
        password: password.to_string(),
    })
}

/// Check `message` against `expected`, the user's configured password (None: no such user).
/// Returns the authenticated user name, or Kafka's message for the client. The comparison
/// takes the same time whatever the passwords (their SHA-256 digests are compared in
/// constant time, so not even their lengths show).
pub fn authenticate(message: &PlainMessage, expected: Option<&str>) -> Result<String, String> {
    let given = digest::digest(&digest::SHA256, message.password.as_bytes());
    let (wanted, known) = match expected {
        Some(p) => (digest::digest(&digest::SHA256, p.as_bytes()), true),
        // Still compare, so an unknown user costs the same time as a wrong password.
        None => (digest::digest(&digest::SHA256, b"\0no such user\0"), false),
    };
    let equal: bool = given.as_ref().ct_eq(wanted.as_ref()).into();
    if !(equal && known) {
        return Err("Authentication failed: Invalid username or password".into());
    }
    if !message.authzid.is_empty() && message.authzid != message.username {
        return Err("Authentication failed: Client requested an authorization id that is different from username".into());
    }
    Ok(message.username.clone())
}

/// The message a PLAIN client sends (no authorization id).
pub fn client_message(username: &str, password: &str) -> Vec<u8> {
    format!("\0{username}\0{password}").into_bytes()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_as_kafka_does() {
        let m = parse(&client_message("alice", "alice-secret")).unwrap();
        assert_eq!(m.username, "alice");
        assert_eq!(authenticate(&m, Some("alice-secret")).unwrap(), "alice");
        assert_eq!(
            authenticate(&m, Some("other")).unwrap_err(),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            authenticate(&m, None).unwrap_err(),
            "Authentication failed: Invalid username or password"
        );
        let m = parse(b"bob\0alice\0alice-secret").unwrap();
        assert!(authenticate(&m, Some("alice-secret"))
            .unwrap_err()
            .contains("authorization id that is different"));
        assert_eq!(
            authenticate(&parse(b"alice\0alice\0pw").unwrap(), Some("pw")).unwrap(),
            "alice"
        );
    }

    #[test]
    fn malformed_messages() {
        for (bytes, wanted) in [
            (&b""[..], "expected 3 tokens, got 1"),
            (b"\0alice", "expected 3 tokens, got 2"),
            (b"\0a\0b\0c", "expected 3 tokens, got 4"),
            (b"\0\0pw", "username not specified"),
            (b"\0alice\0", "password not specified"),
        ] {
            assert!(parse(bytes).unwrap_err().contains(wanted), "{bytes:?}");
        }
        // Not UTF-8: read with replacement characters, never a panic.
        let m = parse(b"\0al\xffice\0pw").unwrap();
        assert!(authenticate(&m, Some("pw")).is_ok());
    }
}
