//! How each SASL listener that enables OAUTHBEARER validates its tokens (`sluice_sasl::
//! oauthbearer` does the validation; this module keeps what it needs in force): Kafka's
//! unsecured validator with its JAAS options, or Kafka's broker JWT validator with the JSON
//! Web Key Set of `sasl.oauthbearer.jwks.endpoint.url`.
//!
//! A key set is kept in memory and replaced by a thread of its own: a `file:` set is read at
//! start (a set that does not load stops startup, as on Kafka) and again whenever the file
//! changes or `sasl.oauthbearer.jwks.endpoint.refresh.ms` passes; an `http(s)://` set is
//! fetched at start and every `refresh.ms` through the fetcher the server installs
//! ([`Broker::set_jwks_fetcher`]), failed fetches retried with Kafka's backoff settings. A
//! token naming a key id the set lacks asks for an early refresh (at most one a second), as
//! Kafka's refreshing resolver does; that token is refused meanwhile.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Condvar, Mutex, RwLock};
use sluice_config::{JwksSource, JwksValidation, OAuthBearerConfig};
use sluice_sasl::oauthbearer::{Jwks, JwtValidator, Refusal, Token, UnsecuredValidator};

use crate::{Broker, BrokerError};

/// Fetches a key set over HTTP(S): the body of a GET of the URL, or why not. The server
/// installs it (only the server touches sockets).
pub type JwksFetcher = dyn Fn(&str) -> Result<Vec<u8>, String> + Send + Sync;

/// How often the refresh thread wakes up: a `file:` key set is checked for changes this often.
const TICK: Duration = Duration::from_secs(1);
/// The shortest time between two refreshes asked for by unknown key ids.
const EXPEDITE_MIN: Duration = Duration::from_secs(1);

/// A listener's OAUTHBEARER validation.
#[derive(Debug)]
pub(crate) enum OAuthValidation {
    Unsecured(UnsecuredValidator),
    Jwks {
        validator: JwtValidator,
        keys: Arc<KeySet>,
    },
}

/// A refused token: what the client is sent (the JSON status) and the reason to log.
pub(crate) type Refused = (String, String);

impl OAuthValidation {
    /// Validate `token` now.
    pub(crate) fn validate(&self, token: &str) -> Result<Token, Refused> {
        let now = crate::now_ms();
        match self {
            OAuthValidation::Unsecured(v) => v
                .validate(token, now)
                .map_err(|r| (r.challenge(), r.reason)),
            OAuthValidation::Jwks { validator, keys } => {
                // Kafka's handler answers every refusal with invalid_token; the reason is
                // logged only.
                let refused = |reason: String| {
                    (
                        Refusal {
                            status: "invalid_token",
                            scope: None,
                            reason: String::new(),
                        }
                        .challenge(),
                        reason,
                    )
                };
                let Some(set) = keys.current() else {
                    keys.expedite();
                    return Err(refused(format!(
                        "no JSON Web Key Set loaded yet from {}",
                        keys.url
                    )));
                };
                validator.validate(token, &set, now).map_err(|r| {
                    if r.unknown_kid.is_some() {
                        keys.expedite();
                    }
                    refused(r.reason)
                })
            }
        }
    }
}

/// A JSON Web Key Set in force and how it is refreshed.
pub(crate) struct KeySet {
    url: String,
    source: JwksSource,
    refresh: Duration,
    backoff: Duration,
    backoff_max: Duration,
    current: RwLock<Option<Arc<Jwks>>>,
    /// Set when a refresh is wanted before its time; the thread waits on `wake`.
    expedite: Mutex<bool>,
    wake: Condvar,
    last_expedite: Mutex<Option<Instant>>,
    fetcher: std::sync::OnceLock<Arc<JwksFetcher>>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySet")
            .field("url", &self.url)
            .field("keys", &self.current().map(|s| s.keys.len()))
            .finish()
    }
}

/// What identifies the version of a key set file.
fn file_stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl KeySet {
    fn new(c: &JwksValidation) -> KeySet {
        KeySet {
            url: c.url.clone(),
            source: c.source.clone(),
            refresh: Duration::from_millis(c.refresh_ms.max(1)),
            backoff: Duration::from_millis(c.retry_backoff_ms.max(1)),
            backoff_max: Duration::from_millis(c.retry_backoff_max_ms.max(1)),
            current: RwLock::new(None),
            expedite: Mutex::new(false),
            wake: Condvar::new(),
            last_expedite: Mutex::new(None),
            fetcher: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn current(&self) -> Option<Arc<Jwks>> {
        self.current.read().clone()
    }

    /// Ask for a refresh before its time (a token named a key id the set lacks).
    fn expedite(&self) {
        let now = Instant::now();
        {
            let mut last = self.last_expedite.lock();
            if last.is_some_and(|t| now.duration_since(t) < EXPEDITE_MIN) {
                return;
            }
            *last = Some(now);
        }
        *self.expedite.lock() = true;
        self.wake.notify_all();
    }

    /// Read or fetch the set once.
    fn load(&self) -> Result<Jwks, String> {
        let bytes = match &self.source {
            JwksSource::File(path) => {
                std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?
            }
            JwksSource::Http(url) => {
                let fetcher = self
                    .fetcher
                    .get()
                    .ok_or("the HTTP client is not installed yet")?;
                fetcher(url)?
            }
        };
        Jwks::parse(&bytes)
    }

    fn install(&self, set: Jwks) {
        let changed = self.current().is_none_or(|c| *c != set);
        if changed {
            tracing::info!(
                url = %self.url,
                keys = set.keys.len(),
                skipped = set.skipped,
                "JSON Web Key Set loaded (sasl.oauthbearer.jwks.endpoint.url)"
            );
        }
        *self.current.write() = Some(Arc::new(set));
    }

    /// Wait until `until` or an expedited refresh; true if one was asked for.
    fn wait(&self, until: Instant) -> bool {
        let mut flag = self.expedite.lock();
        while !*flag {
            if self.wake.wait_until(&mut flag, until).timed_out() {
                break;
            }
        }
        std::mem::take(&mut *flag)
    }
}

/// The refresh thread of one key set; it ends within [`TICK`] of the set being dropped.
fn refresh_loop(keys: Weak<KeySet>) {
    let mut backoff = None::<Duration>;
    let mut stamp = None;
    // When the set is next read or fetched (at once: a file set was read at start, and reading
    // it again costs little).
    let mut next_load = Instant::now();
    loop {
        let Some(k) = keys.upgrade() else { return };
        if matches!(k.source, JwksSource::Http(_)) && k.fetcher.get().is_none() {
            // Not started yet: the server installs its HTTP client (set_jwks_fetcher).
            k.wait(Instant::now() + TICK);
            continue;
        }
        let now = Instant::now();
        if let JwksSource::File(path) = &k.source {
            let s = file_stamp(path);
            if s != stamp {
                stamp = s;
                next_load = now;
            }
        }
        if now >= next_load {
            match k.load() {
                Ok(set) => {
                    k.install(set);
                    backoff = None;
                    next_load = now + k.refresh;
                }
                Err(e) => {
                    let b = backoff.map_or(k.backoff, |b| (b * 2).min(k.backoff_max));
                    backoff = Some(b);
                    next_load = now + b;
                    tracing::warn!(
                        url = %k.url,
                        "JSON Web Key Set not loaded ({e}); trying again in {} ms, the keys loaded before stay in force",
                        b.as_millis()
                    );
                }
            }
        }
        if k.wait(next_load.min(Instant::now() + TICK)) {
            next_load = Instant::now();
        }
    }
}

/// The validations of the listeners that enable OAUTHBEARER, with their key sets loaded (a
/// `file:` set that does not load stops startup) and refresh threads started.
pub(crate) fn listeners(
    config: &sluice_config::BrokerConfig,
) -> Result<std::collections::HashMap<String, Arc<OAuthValidation>>, BrokerError> {
    let mut out = std::collections::HashMap::new();
    for (listener, sasl) in &config.listener_sasl {
        let Some(oauth) = &sasl.oauthbearer else {
            continue;
        };
        let v = match oauth {
            OAuthBearerConfig::Unsecured(u) => {
                tracing::warn!(
                    "listener {listener} takes unsecured OAUTHBEARER tokens (Kafka's default validator: alg none, no signature): anyone can name any principal; for tests only (set listener.name.{}.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler and sasl.oauthbearer.jwks.endpoint.url)",
                    listener.to_ascii_lowercase()
                );
                OAuthValidation::Unsecured(UnsecuredValidator {
                    principal_claim: u.principal_claim.clone(),
                    scope_claim: u.scope_claim.clone(),
                    required_scope: u.required_scope.clone(),
                    clock_skew_ms: u.clock_skew_ms,
                })
            }
            OAuthBearerConfig::Jwks(j) => {
                let keys = Arc::new(KeySet::new(j));
                if let JwksSource::File(_) = j.source {
                    let set = keys.load().map_err(|e| {
                        BrokerError::Startup(format!(
                            "listener {listener}: the JSON Web Key Set of sasl.oauthbearer.jwks.endpoint.url={} does not load: {e}",
                            j.url
                        ))
                    })?;
                    keys.install(set);
                }
                let weak = Arc::downgrade(&keys);
                std::thread::Builder::new()
                    .name("sluice-jwks".into())
                    .spawn(move || refresh_loop(weak))
                    .map_err(|e| {
                        BrokerError::Startup(format!("cannot start the JWKS refresh thread: {e}"))
                    })?;
                OAuthValidation::Jwks {
                    validator: JwtValidator {
                        expected_audience: j.expected_audience.clone(),
                        expected_issuer: j.expected_issuer.clone(),
                        sub_claim: j.sub_claim.clone(),
                        scope_claim: j.scope_claim.clone(),
                        clock_skew_s: j.clock_skew_s,
                    },
                    keys,
                }
            }
        };
        out.insert(listener.clone(), Arc::new(v));
    }
    Ok(out)
}

impl Broker {
    /// Install the HTTP(S) client that fetches `http(s)://` key sets (the server's; once, at
    /// start). The refresh threads fetch with it from then on.
    pub fn set_jwks_fetcher(&self, fetcher: Arc<JwksFetcher>) {
        for v in self.oauth_listeners.values() {
            if let OAuthValidation::Jwks { keys, .. } = v.as_ref() {
                if let JwksSource::Http(_) = keys.source {
                    let _ = keys.fetcher.set(fetcher.clone());
                    *keys.expedite.lock() = true;
                    keys.wake.notify_all();
                }
            }
        }
    }
}
