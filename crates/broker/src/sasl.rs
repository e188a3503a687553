//! SASL authentication of one connection, as Kafka's `SaslServerAuthenticator` does it, and
//! the SCRAM credentials the broker checks against.
//!
//! A connection on a SASL_PLAINTEXT or SASL_SSL listener starts unauthenticated. The server
//! hands each request to its [`Authenticator`] first, which says what to do ([`Step`]):
//!
//! ```text
//! Handshake  --ApiVersions (once)-->  Handshake (answered as usual)
//!            --SaslHandshake v1, mechanism enabled-->  Authenticate (SaslAuthenticate requests)
//!            --SaslHandshake v0, mechanism enabled-->  Authenticate (raw size-prefixed tokens)
//!            --SaslHandshake, mechanism not enabled-->  UNSUPPORTED_SASL_MECHANISM, closed
//!            --anything else-->  closed ("Unexpected Kafka request of type ... during SASL handshake")
//! Authenticate --exchange completes-->  Authenticated (principal `User:<name>` kept)
//!              --OAUTHBEARER token refused-->  Authenticate, answered with Kafka's JSON status
//!                  (`{"status":"invalid_token"}`) as a challenge; the client's `^A` then fails
//!              --credentials refused-->  SASL_AUTHENTICATION_FAILED with Kafka's message, closed
//!              --anything else-->  closed ("... during SASL authentication")
//! Authenticated --any request-->  served, unless the session expired (closed);
//!               --SaslHandshake, connections.max.reauth.ms set-->  Authenticate again (KIP-368)
//! ```
//!
//! Failures count in the failed-authentication metric of the listener. What a client is told
//! follows Kafka: a mechanism's own authentication message (PLAIN's "Invalid username or
//! password"), else only "Authentication failed during authentication due to invalid
//! credentials with SASL mechanism X", the reason going to the broker's log.
//!
//! A session ends `connections.max.reauth.ms` after it began or, for OAUTHBEARER, when its
//! token expires, whichever is first (Kafka's rule); the client is told that lifetime.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    RequestKind, ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::ResponseError;
use parking_lot::RwLock;
use sluice_config::{SaslConfig, SaslMechanism};
use sluice_meta::ScramCredentials;
use sluice_sasl::{oauthbearer, plain, ScramCredential, ScramFailure, ScramMechanism, ScramServer};
use sluice_wire::Request;

use crate::oauth::OAuthValidation;
use crate::wire::str_bytes;
use crate::Broker;

/// Kafka's principal type for SASL users.
pub const USER_PRINCIPAL: &str = "User";

/// Kafka refuses a re-authentication within a second of the previous one.
const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// The SCRAM credentials in force, reloaded when the metadata store changes them.
#[derive(Debug)]
pub(crate) struct ScramStore {
    table: RwLock<Arc<ScramCredentials>>,
    /// The cluster revision at which the table was last read (cluster mode).
    loaded_revision: AtomicI64,
}

impl Default for ScramStore {
    fn default() -> Self {
        ScramStore {
            table: RwLock::new(Arc::new(ScramCredentials::new())),
            loaded_revision: AtomicI64::new(-1),
        }
    }
}

impl ScramStore {
    pub(crate) fn table(&self) -> Arc<ScramCredentials> {
        self.table.read().clone()
    }

    pub(crate) fn set_table(&self, table: ScramCredentials) {
        *self.table.write() = Arc::new(table);
    }

    /// Load the credentials from the store (start-up).
    pub(crate) fn load(&self, meta: &sluice_meta::Meta) -> Result<(), sluice_meta::MetaError> {
        let revision = meta.etcd().map_or(0, |s| s.view().revision);
        self.set_table(meta.scram_credentials()?);
        self.loaded_revision.store(revision, Ordering::Relaxed);
        Ok(())
    }

    /// Cluster mode: read the credentials again if the cluster's records changed since the
    /// last read (another broker may have altered them). Runs on the cluster thread.
    pub(crate) fn reload_if_changed(&self, store: &sluice_meta::EtcdStore, revision: i64) {
        if revision <= self.loaded_revision.load(Ordering::Relaxed) {
            return;
        }
        match store.scram_credentials() {
            Ok(table) => {
                if *self.table() != table {
                    tracing::info!(credentials = table.len(), "SCRAM credentials changed");
                    self.set_table(table);
                }
                self.loaded_revision.store(revision, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!("reading the SCRAM credentials failed: {e}"),
        }
    }

    /// The credential of `user` for `mechanism`.
    pub(crate) fn lookup(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        let table = self.table();
        let c = table.get(&(user.to_string(), mechanism.name().to_string()))?;
        Some(ScramCredential {
            salt: c.salt.clone(),
            stored_key: c.stored_key.clone(),
            server_key: c.server_key.clone(),
            iterations: c.iterations,
        })
    }
}

fn scram_mechanism(m: SaslMechanism) -> Option<ScramMechanism> {
    match m {
        SaslMechanism::Plain | SaslMechanism::OAuthBearer => None,
        SaslMechanism::ScramSha256 => Some(ScramMechanism::Sha256),
        SaslMechanism::ScramSha512 => Some(ScramMechanism::Sha512),
    }
}

/// What the server is to do with a request, according to the connection's authenticator.
#[derive(Debug)]
pub enum Step {
    /// Serve the request as usual (the connection is authenticated, or it is ApiVersions).
    Serve(Box<Request>),
    /// Answer with this body; the connection goes on.
    Reply(ResponseKind),
    /// Authentication failed: answer with this body if any, then close the connection (the
    /// failure is counted and `reason` logged).
    Fail {
        reply: Option<ResponseKind>,
        reason: String,
    },
    /// Close the connection at once, without an answer.
    Close(String),
}

enum MechServer {
    Plain,
    Scram(Box<ScramServer>),
    /// OAUTHBEARER; after a refused token, the JSON status sent and the reason, until the
    /// client's `^A`.
    OAuthBearer {
        refused: Option<(String, String)>,
    },
}

enum State {
    /// Before the handshake; whether ApiVersions was answered already.
    Handshake {
        versions_seen: bool,
    },
    /// The handshake chose `mechanism`; its tokens come in SaslAuthenticate requests, or raw
    /// (SaslHandshake v0).
    Authenticate {
        mechanism: SaslMechanism,
        raw: bool,
        server: MechServer,
        /// Re-authentication asked for another mechanism: fail at its first token.
        bad_reauth: Option<String>,
    },
    Authenticated,
    /// A failure was answered; nothing more is served.
    Failed,
}

/// The authenticated session of a connection.
#[derive(Clone, Debug)]
struct Session {
    principal: Arc<str>,
    mechanism: SaslMechanism,
    /// When the session ends without a re-authentication (`connections.max.reauth.ms`, or
    /// the OAUTHBEARER token's expiry).
    expires: Option<Instant>,
    /// The lifetime the client was given, ms (0: none).
    lifetime_ms: i64,
}

/// The SASL state of one connection on a SASL listener.
pub struct Authenticator {
    config: Arc<SaslConfig>,
    /// How OAUTHBEARER tokens are validated, when the listener enables it.
    oauth: Option<Arc<OAuthValidation>>,
    listener: Arc<str>,
    state: State,
    session: Option<Session>,
    /// When the last re-authentication began.
    last_reauth: Option<Instant>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("listener", &self.listener)
            .field("authenticated", &self.authenticated())
            .field("principal", &self.principal())
            .finish()
    }
}

fn handshake_reply(code: i16, config: &SaslConfig) -> ResponseKind {
    ResponseKind::SaslHandshake(
        SaslHandshakeResponse::default()
            .with_error_code(code)
            .with_mechanisms(
                config
                    .mechanisms
                    .iter()
                    .map(|m| str_bytes(m.name()))
                    .collect(),
            ),
    )
}

fn authenticate_failure(message: String) -> ResponseKind {
    ResponseKind::SaslAuthenticate(
        SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::SaslAuthenticationFailed.code())
            .with_error_message(Some(str_bytes(message))),
    )
}

/// The outcome of one token of the exchange.
enum Token {
    /// The mechanism's next challenge; the exchange goes on.
    Challenge(Vec<u8>),
    /// The last server message; the user name authenticated.
    Done(Vec<u8>, String),
    /// Refused: the message for the client, the reason for the log.
    Refused(String, String),
}

impl Authenticator {
    pub(crate) fn new(
        config: Arc<SaslConfig>,
        oauth: Option<Arc<OAuthValidation>>,
        listener: Arc<str>,
    ) -> Authenticator {
        Authenticator {
            config,
            oauth,
            listener,
            state: State::Handshake {
                versions_seen: false,
            },
            session: None,
            last_reauth: None,
        }
    }

    /// Whether requests other than the SASL ones are served now.
    pub fn authenticated(&self) -> bool {
        matches!(self.state, State::Authenticated)
    }

    /// The authenticated principal (`User:alice`), once there is one.
    pub fn principal(&self) -> Option<Arc<str>> {
        self.session.as_ref().map(|s| s.principal.clone())
    }

    /// The largest request read while not authenticated (`sasl.server.max.receive.size`).
    pub fn max_receive_bytes(&self) -> u32 {
        self.config.max_receive_bytes
    }

    /// Whether the next frame is a raw token (after a SaslHandshake v0), not a request.
    pub fn wants_raw_token(&self) -> bool {
        matches!(self.state, State::Authenticate { raw: true, .. })
    }

    /// The session's end, if it has one and is authenticated.
    pub fn session_expires(&self) -> Option<Instant> {
        match self.state {
            State::Authenticated => self.session.as_ref().and_then(|s| s.expires),
            _ => None,
        }
    }

    fn fail(&mut self, reply: Option<ResponseKind>, reason: String) -> Step {
        self.state = State::Failed;
        Step::Fail { reply, reason }
    }

    /// Decide what to do with `request`.
    pub fn on_request(&mut self, broker: &Broker, request: Request) -> Step {
        let api = request.api_key;
        match &mut self.state {
            State::Failed => Step::Close("the authentication failed already".into()),
            State::Authenticated => {
                let now = Instant::now();
                if let RequestKind::SaslHandshake(h) = &request.body {
                    // KIP-368: a new handshake on an authenticated connection whose session
                    // has a lifetime starts a re-authentication (not more than once a second).
                    let reauth_allowed = self.session.as_ref().is_some_and(|s| s.expires.is_some())
                        && self
                            .last_reauth
                            .is_none_or(|t| now.duration_since(t) >= MIN_REAUTH_INTERVAL);
                    if reauth_allowed {
                        self.last_reauth = Some(now);
                        let mechanism = h.mechanism.to_string();
                        return self.handshake(&mechanism, request.version());
                    }
                }
                if let Some(expires) = self.session_expires() {
                    if now >= expires {
                        return Step::Close(format!(
                            "the SASL session of {} expired (connections.max.reauth.ms) and the client did not re-authenticate",
                            self.principal().as_deref().unwrap_or("?")
                        ));
                    }
                }
                Step::Serve(Box::new(request))
            }
            State::Handshake { versions_seen } => match &request.body {
                RequestKind::ApiVersions(_) if !*versions_seen => {
                    *versions_seen = true;
                    Step::Serve(Box::new(request))
                }
                RequestKind::ApiVersions(_) => Step::Close(
                    "Unexpected ApiVersions request received during SASL authentication state HANDSHAKE_REQUEST".into(),
                ),
                RequestKind::SaslHandshake(h) => {
                    let mechanism = h.mechanism.to_string();
                    self.handshake(&mechanism, request.version())
                }
                _ => Step::Close(format!(
                    "Unexpected Kafka request of type {api:?} during SASL handshake."
                )),
            },
            State::Authenticate { raw: true, .. } => Step::Close(
                "a Kafka request where a raw SASL token was expected (SaslHandshake v0)".into(),
            ),
            State::Authenticate { .. } => match &request.body {
                RequestKind::SaslAuthenticate(r) => {
                    let version = request.version();
                    match self.token(broker, &r.auth_bytes) {
                        Token::Challenge(bytes) => Step::Reply(ResponseKind::SaslAuthenticate(
                            SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(bytes)),
                        )),
                        Token::Done(bytes, _) => {
                            let lifetime_ms = match &self.session {
                                Some(s) if version >= 1 => s.lifetime_ms,
                                _ => 0,
                            };
                            Step::Reply(ResponseKind::SaslAuthenticate(
                                SaslAuthenticateResponse::default()
                                    .with_auth_bytes(Bytes::from(bytes))
                                    .with_session_lifetime_ms(lifetime_ms),
                            ))
                        }
                        Token::Refused(message, reason) => {
                            self.fail(Some(authenticate_failure(message)), reason)
                        }
                    }
                }
                _ => {
                    let reason =
                        format!("Unexpected Kafka request of type {api:?} during SASL authentication.");
                    self.state = State::Failed;
                    Step::Close(reason)
                }
            },
        }
    }

    /// A raw token (after SaslHandshake v0): the mechanism's answer to send back raw, or why
    /// the connection is to be closed (the failure is counted by the caller).
    pub fn on_raw_token(&mut self, broker: &Broker, token: &[u8]) -> Result<Vec<u8>, String> {
        match self.token(broker, token) {
            Token::Challenge(bytes) | Token::Done(bytes, _) => Ok(bytes),
            Token::Refused(message, reason) => {
                self.state = State::Failed;
                Err(format!("{message} ({reason})"))
            }
        }
    }

    fn handshake(&mut self, mechanism: &str, version: i16) -> Step {
        let Some(m) =
            SaslMechanism::parse(mechanism).filter(|m| self.config.mechanisms.contains(m))
        else {
            let reply =
                handshake_reply(ResponseError::UnsupportedSaslMechanism.code(), &self.config);
            return self.fail(
                Some(reply),
                format!("Unsupported SASL mechanism {mechanism}"),
            );
        };
        let bad_reauth = match &self.session {
            Some(s) if s.mechanism != m => Some(format!(
                "SASL mechanism '{m}' requested by client is not supported for re-authentication of mechanism '{}'",
                s.mechanism
            )),
            _ => None,
        };
        let server = match (m, scram_mechanism(m)) {
            (SaslMechanism::OAuthBearer, _) => MechServer::OAuthBearer { refused: None },
            (_, None) => MechServer::Plain,
            (_, Some(s)) => MechServer::Scram(Box::new(ScramServer::new(s))),
        };
        self.state = State::Authenticate {
            mechanism: m,
            raw: version == 0,
            server,
            bad_reauth,
        };
        Step::Reply(handshake_reply(0, &self.config))
    }

    /// One token of the exchange: refused outside it, or when the handshake asked a
    /// re-authentication under another mechanism (Kafka's rule); else the mechanism's step
    /// ([`oauthbearer_token`], [`plain_token`], [`scram_token`]), and a user authenticated
    /// starts the session ([`Authenticator::start_session`]).
    fn token(&mut self, broker: &Broker, bytes: &[u8]) -> Token {
        let State::Authenticate {
            mechanism,
            server,
            bad_reauth,
            ..
        } = &mut self.state
        else {
            return Token::Refused(
                "Unexpected SASL token".into(),
                "a SASL token outside the exchange".into(),
            );
        };
        let mechanism = *mechanism;
        let text = if self.session.is_some() {
            "re-authentication"
        } else {
            "authentication"
        };
        if let Some(message) = bad_reauth.take() {
            return Token::Refused(message.clone(), message);
        }
        let generic = format!(
            "Authentication failed during {text} due to invalid credentials with SASL mechanism {mechanism}"
        );
        // OAUTHBEARER: when the token expires, ms since the epoch.
        let (outcome, credential_expires_ms) = match server {
            MechServer::OAuthBearer { refused } => oauthbearer_token(
                self.oauth.as_deref(),
                &self.listener,
                refused,
                bytes,
                generic,
            ),
            MechServer::Plain => (plain_token(&self.config, bytes), None),
            MechServer::Scram(s) => (scram_token(broker, s, mechanism, bytes, generic), None),
        };
        if let Token::Done(_, user) = &outcome {
            if let Err(refused) = self.start_session(user, mechanism, credential_expires_ms, text) {
                return refused;
            }
        }
        outcome
    }

    /// `user` authenticated: the session starts, its lifetime the shorter of
    /// `connections.max.reauth.ms` and the credential's ([`session_lifetime_ms`]). A
    /// re-authentication may not change the principal (Kafka's rule): refused, the session
    /// left as it was.
    fn start_session(
        &mut self,
        user: &str,
        mechanism: SaslMechanism,
        credential_expires_ms: Option<i64>,
        text: &str,
    ) -> Result<(), Token> {
        let principal: Arc<str> = format!("{USER_PRINCIPAL}:{user}").into();
        if let Some(previous) = &self.session {
            if previous.principal != principal {
                let message = format!(
                    "Cannot change principals during re-authentication from {}: {}",
                    previous.principal.replacen(':', ".", 1),
                    principal.replacen(':', ".", 1)
                );
                return Err(Token::Refused(message.clone(), message));
            }
        }
        let lifetime_ms = session_lifetime_ms(
            self.config.reauth_ms_for(mechanism),
            credential_expires_ms,
            crate::now_ms(),
        );
        let expires = lifetime_ms
            .map(|ms| Instant::now() + Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
        tracing::debug!(listener = %self.listener, %principal, %mechanism, ?lifetime_ms, "SASL {text} succeeded");
        self.session = Some(Session {
            principal,
            mechanism,
            expires,
            lifetime_ms: lifetime_ms.unwrap_or(0),
        });
        self.state = State::Authenticated;
        Ok(())
    }
}

/// One OAUTHBEARER token (RFC 7628), validated by the listener's `oauth` settings: a token
/// refused is answered with the JSON error status as a challenge (kept in `refused`), and
/// the client's `^A` after it ends the exchange refused; an authorization id other than the
/// token's principal is refused (Kafka's rule). With the token's expiry (ms since the
/// epoch) when it authenticates.
fn oauthbearer_token(
    oauth: Option<&OAuthValidation>,
    listener: &str,
    refused: &mut Option<(String, String)>,
    bytes: &[u8],
    generic: String,
) -> (Token, Option<i64>) {
    let previous = refused.take();
    if let Some((json, reason)) = previous.filter(|_| bytes == [oauthbearer::CONTROL_A]) {
        // The client's ^A after our error status: the failure, with that status.
        return (
            Token::Refused(json, format!("OAUTHBEARER token refused: {reason}")),
            None,
        );
    }
    let first = match oauthbearer::parse_client_first(bytes) {
        Err(reason) => return (Token::Refused(generic, reason), None),
        Ok(first) => first,
    };
    match oauth.map(|o| o.validate(&first.token)) {
        None => (
            Token::Refused(
                generic,
                "OAUTHBEARER is not configured on this listener".into(),
            ),
            None,
        ),
        Some(Err((json, reason))) => {
            tracing::debug!(listener = %listener, "OAUTHBEARER token refused: {reason}");
            *refused = Some((json.clone(), reason));
            (Token::Challenge(json.into_bytes()), None)
        }
        Some(Ok(token)) => {
            if !first.authzid.is_empty() && first.authzid != token.principal {
                let m = format!(
                    "Authentication failed: Client requested an authorization id ({}) that is different from the token's principal name ({})",
                    first.authzid, token.principal
                );
                (Token::Refused(m.clone(), m), None)
            } else {
                (
                    Token::Done(Vec::new(), token.principal),
                    Some(token.expires_ms),
                )
            }
        }
    }
}

/// One PLAIN token: the user and password checked against the listener's `plain_users`.
fn plain_token(config: &SaslConfig, bytes: &[u8]) -> Token {
    match plain::parse(bytes) {
        Err(message) => Token::Refused(message.clone(), message),
        Ok(m) => {
            let expected = config.plain_users.get(&m.username).map(String::as_str);
            match plain::authenticate(&m, expected) {
                Ok(user) => Token::Done(Vec::new(), user),
                Err(message) => {
                    let reason = format!("{message} (user {})", m.username);
                    Token::Refused(message, reason)
                }
            }
        }
    }
}

/// One SCRAM message: the client's first (its user's credential looked up in the broker's
/// table) answered with the server's first, the client's final checked and answered with the
/// server's final. Bad credentials are refused with the `generic` message, as Kafka hides
/// which part was wrong.
fn scram_token(
    broker: &Broker,
    s: &mut ScramServer,
    mechanism: SaslMechanism,
    bytes: &[u8],
    generic: String,
) -> Token {
    let step = if s.awaiting_client_first() {
        let scram = scram_mechanism(mechanism);
        s.client_first(bytes, |user| {
            scram.and_then(|m| broker.scram.lookup(user, m))
        })
        .map(Token::Challenge)
    } else {
        s.client_final(bytes).map(|(b, user)| Token::Done(b, user))
    };
    match step {
        Ok(t) => t,
        Err(ScramFailure::Authentication(m)) => Token::Refused(m.clone(), m),
        Err(ScramFailure::Credentials(reason)) => Token::Refused(generic, reason),
    }
}

impl Broker {
    /// The authenticator of a new connection on `listener`, if it is a SASL listener.
    pub fn authenticator(&self, listener: &Arc<str>) -> Option<Authenticator> {
        let config = self.sasl_listeners.get(listener.as_ref())?;
        let oauth = self.oauth_listeners.get(listener.as_ref()).cloned();
        Some(Authenticator::new(config.clone(), oauth, listener.clone()))
    }
}

/// A session's lifetime as Kafka's `SaslServerAuthenticator` computes it, ms: none without
/// `connections.max.reauth.ms` and a credential that expires; else the shorter of the two,
/// from `now_ms`, never negative.
fn session_lifetime_ms(
    reauth_ms: u64,
    credential_expires_ms: Option<i64>,
    now_ms: i64,
) -> Option<i64> {
    let max = (reauth_ms > 0).then(|| i64::try_from(reauth_ms).unwrap_or(i64::MAX));
    let credential = credential_expires_ms.map(|e| e.saturating_sub(now_ms));
    let lifetime = match (max, credential) {
        (None, None) => return None,
        (Some(m), None) => m,
        (None, Some(c)) => c,
        (Some(m), Some(c)) => m.min(c),
    };
    Some(lifetime.max(0))
}

#[cfg(test)]
mod tests {
    use super::session_lifetime_ms;

    #[test]
    fn session_lifetime_is_the_shorter_of_the_reauth_limit_and_the_token() {
        assert_eq!(session_lifetime_ms(0, None, 1000), None);
        assert_eq!(session_lifetime_ms(500, None, 1000), Some(500));
        assert_eq!(session_lifetime_ms(0, Some(61_000), 1000), Some(60_000));
        assert_eq!(session_lifetime_ms(5000, Some(61_000), 1000), Some(5000));
        assert_eq!(session_lifetime_ms(0, Some(900), 1000), Some(0));
    }
}
