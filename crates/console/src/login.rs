//! Logins, when the console reaches the cluster through a SASL listener: each user logs in
//! with the user name and password their Kafka clients use, checked by the brokers themselves
//! (the console's connections log in with SASL as that user, so the credential store and the
//! authorizer judge the user's every page and action as they judge a client of that user,
//! connecting from the broker's own address).
//!
//! A login is kept on the server, named by the `sluice_session_<port>` cookie (HttpOnly,
//! SameSite=Strict): its user, and a Kafka client whose connections are logged in as that
//! user. Every `sluice.console.session.recheck.ms` of use its password is checked again on new connections (a
//! password changed or a user deleted ends it). It ends when the user logs out, after
//! `sluice.console.session.idle.ms` without a page loaded, or when the broker stops. At most
//! `sluice.console.sessions.max` are held, `sluice.console.sessions.per.user.max` per user
//! (a new login of a user at its limit ends that user's least recently used one). Failed
//! logins are slowed: [`LOGINS_AT_ONCE`] are checked at a time (a login beyond them is refused
//! with 429), and a failure answers after [`FAILED_LOGIN_PAUSE`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Form, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::Extension;
use maud::html;
use serde::Deserialize;
use sluice_broker::PeerClient;

use crate::kafka::Kafka;
use crate::pages::redirect;
use crate::{cookie, forged, layout, with_status, Console, Csrf};

/// A Kafka client logged in with a SASL mechanism as a user: (mechanism, user name,
/// password) → the client.
pub type Connect = Arc<dyn Fn(&str, &str, &str) -> Arc<dyn PeerClient> + Send + Sync>;

/// How users log in to the console (Settings::login).
#[derive(Clone)]
pub struct LoginSettings {
    /// The SASL mechanisms a login is tried with, in order (SCRAM first), as the brokers'
    /// listener enables them.
    pub mechanisms: Vec<String>,
    /// Makes a client logged in as a user.
    pub connect: Connect,
    /// `sluice.console.sessions.max`.
    pub sessions_max: usize,
    /// `sluice.console.sessions.per.user.max`.
    pub sessions_per_user_max: usize,
    /// `sluice.console.session.idle.ms`.
    pub idle: Duration,
    /// `sluice.console.session.recheck.ms`: how often a login in use has its password
    /// checked again by the brokers.
    pub recheck: Duration,
}

impl std::fmt::Debug for LoginSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginSettings")
            .field("mechanisms", &self.mechanisms)
            .field("sessions_max", &self.sessions_max)
            .field("sessions_per_user_max", &self.sessions_per_user_max)
            .field("idle", &self.idle)
            .field("recheck", &self.recheck)
            .finish()
    }
}

/// Logins checked at once; more wait.
pub(crate) const LOGINS_AT_ONCE: usize = 4;
/// How long a failed login waits before it answers.
pub(crate) const FAILED_LOGIN_PAUSE: Duration = Duration::from_secs(1);

/// The name of the cookie naming a login on the console listening on `port`.
fn session_cookie(port: u16) -> String {
    format!("sluice_session_{port}")
}

struct Session {
    user: String,
    mechanism: String,
    password: String,
    kafka: Kafka,
    used: Instant,
    /// When the brokers last accepted its password.
    checked: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("user", &self.user).finish()
    }
}

/// A login as [`Logins::find`] finds it.
struct Found {
    user: String,
    kafka: Kafka,
    /// Due for its password to be checked again: (mechanism, password).
    recheck: Option<(String, String)>,
}

/// The logins held.
#[derive(Debug)]
pub(crate) struct Logins {
    settings: LoginSettings,
    sessions: parking_lot::Mutex<HashMap<String, Session>>,
    attempts: tokio::sync::Semaphore,
}

impl Logins {
    pub(crate) fn new(settings: LoginSettings) -> Logins {
        Logins {
            settings,
            sessions: parking_lot::Mutex::default(),
            attempts: tokio::sync::Semaphore::new(LOGINS_AT_ONCE),
        }
    }

    /// The login named `token`, if it has not ended; it is used now.
    fn find(&self, token: &str) -> Option<Found> {
        let mut sessions = self.sessions.lock();
        let now = Instant::now();
        let s = sessions.get_mut(token)?;
        if now.duration_since(s.used) > self.settings.idle {
            sessions.remove(token);
            return None;
        }
        s.used = now;
        // Due until a check succeeds (a request dropped while checking leaves it due).
        let recheck = (now.duration_since(s.checked) >= self.settings.recheck)
            .then(|| (s.mechanism.clone(), s.password.clone()));
        Some(Found {
            user: s.user.clone(),
            kafka: s.kafka.clone(),
            recheck,
        })
    }

    /// The login named `token` as a request or a live tail uses it now: its user and client,
    /// its password checked again by the brokers first when that is due. None: no such login,
    /// it ended, or the brokers now refuse its password (which ends it). A check that cannot
    /// reach the brokers keeps the login (the next use checks again).
    pub(crate) async fn current(
        &self,
        token: &str,
        bootstrap: &(String, u16),
    ) -> Option<(String, Kafka)> {
        let f = self.find(token)?;
        let Some((mechanism, password)) = f.recheck else {
            return Some((f.user, f.kafka));
        };
        let peers = (self.settings.connect)(&mechanism, &f.user, &password);
        let kafka = Kafka::new(peers, bootstrap.clone());
        match kafka.cluster(Some(&[])).await {
            Ok(_) => {
                self.renew(token, kafka.clone());
                Some((f.user, kafka))
            }
            // The SASL exchange failed: the brokers refuse this password now.
            Err(e) if e.contains("SASL login to") => {
                tracing::info!("console login of {:?} ended: {e}", f.user);
                self.end(token);
                None
            }
            Err(e) => {
                tracing::warn!(
                    "console login of {:?} could not be checked again (kept): {e}",
                    f.user
                );
                Some((f.user, f.kafka))
            }
        }
    }

    /// Keep a new login; its token, or why it is refused.
    fn add(
        &self,
        user: String,
        mechanism: String,
        password: String,
        kafka: Kafka,
    ) -> Result<String, String> {
        let mut sessions = self.sessions.lock();
        let now = Instant::now();
        let idle = self.settings.idle;
        sessions.retain(|_, s| now.duration_since(s.used) <= idle);
        // A user at its limit: its least recently used login ends.
        let mine: Vec<(Instant, String)> = sessions
            .iter()
            .filter(|(_, s)| s.user == user)
            .map(|(t, s)| (s.used, t.clone()))
            .collect();
        if mine.len() >= self.settings.sessions_per_user_max {
            if let Some((_, oldest)) = mine.into_iter().min() {
                sessions.remove(&oldest);
            }
        }
        if sessions.len() >= self.settings.sessions_max {
            return Err(format!(
                "{} console logins are held already (sluice.console.sessions.max); one must log out or stay unused for {} s first",
                sessions.len(),
                idle.as_secs()
            ));
        }
        let token = crate::new_token();
        sessions.insert(
            token.clone(),
            Session {
                user,
                mechanism,
                password,
                kafka,
                used: now,
                checked: now,
            },
        );
        Ok(token)
    }

    /// Replace a login's client by one whose connections logged in again just now.
    fn renew(&self, token: &str, kafka: Kafka) {
        if let Some(s) = self.sessions.lock().get_mut(token) {
            s.kafka = kafka;
            s.checked = Instant::now();
        }
    }

    fn end(&self, token: &str) {
        self.sessions.lock().remove(token);
    }

    /// A client logged in as `user`, with the first mechanism the brokers accept the
    /// password with, and that mechanism; or the last refusal.
    async fn log_in(
        &self,
        bootstrap: &(String, u16),
        user: &str,
        password: &str,
    ) -> Result<(Kafka, String), String> {
        let mut refusal = String::from("no SASL mechanism to log in with");
        for mechanism in &self.settings.mechanisms {
            let kafka = Kafka::new(
                (self.settings.connect)(mechanism, user, password),
                bootstrap.clone(),
            );
            // The first request opens a connection, which logs in.
            match kafka.cluster(Some(&[])).await {
                Ok(_) => return Ok((kafka, mechanism.clone())),
                Err(e) => refusal = e,
            }
        }
        Err(refusal)
    }
}

/// Gives each request the console it is served by: the shared one, or, with logins, the one
/// acting as the request's logged-in user. A request with no login is sent to the login page
/// (GET) or refused (any other method), except the login and logout pages, the assets and
/// this broker's figures.
pub(crate) async fn session(
    State(base): State<Arc<Console>>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let Some(logins) = base.logins.clone() else {
        request.extensions_mut().insert(base);
        return next.run(request).await;
    };
    let path = request.uri().path();
    // The other brokers' consoles read this broker's figures without a login (they are on
    // its /metrics too).
    if path == "/login"
        || path == "/logout"
        || path == "/api/broker"
        || path.starts_with("/assets/")
    {
        request.extensions_mut().insert(base);
        return next.run(request).await;
    }
    let token = cookie(request.headers(), &session_cookie(base.port));
    let found = match &token {
        Some(t) => logins.current(t, base.kafka.bootstrap()).await,
        None => None,
    };
    match found {
        Some((user, kafka)) => {
            let console = Console {
                kafka,
                user: Some(user),
                session: token,
                ..(*base).clone()
            };
            request.extensions_mut().insert(Arc::new(console));
            next.run(request).await
        }
        None if request.method() == Method::GET || request.method() == Method::HEAD => {
            redirect("/login")
        }
        None => {
            let csrf = base.csrf(request.headers());
            with_status(
                layout(
                    "Not logged in",
                    &csrf,
                    html! { p.error { "Log in first: nothing was changed." } a href="/login" { "Log in" } },
                ),
                StatusCode::UNAUTHORIZED,
            )
        }
    }
}

fn login_page(c: &Console, csrf: &Csrf, problem: Option<&str>) -> Response {
    let mechanisms = c
        .logins
        .as_ref()
        .map_or(String::new(), |l| l.settings.mechanisms.join(", "));
    layout(
        "Log in",
        csrf,
        html! {
            @if let Some(p) = problem { p.error { (p) } }
            p { "The user name and password of a Kafka client of this cluster (SASL: " (mechanisms) "). Every page and action is then asked of the brokers as that user." }
            form.action #login method="post" action="/login" {
                input type="hidden" name="csrf" value=(csrf.token);
                label { "User " input type="text" name="user" autocomplete="username" required; }
                label { "Password " input type="password" name="password" autocomplete="current-password"; }
                button type="submit" { "Log in" }
            }
        },
    )
}

pub(crate) async fn login_form(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
) -> Response {
    if c.logins.is_none() {
        return redirect("/");
    }
    login_page(&c, &c.csrf(&headers), None)
}

#[derive(Deserialize)]
pub(crate) struct LoginForm {
    csrf: String,
    user: String,
    password: String,
}

impl std::fmt::Debug for LoginForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginForm")
            .field("user", &self.user)
            .finish()
    }
}

pub(crate) async fn login(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let Some(logins) = c.logins.clone() else {
        return redirect("/");
    };
    let csrf = c.csrf(&headers);
    if let Some(why) = forged(&headers, c.port, &form.csrf) {
        return with_status(login_page(&c, &csrf, Some(why)), StatusCode::FORBIDDEN);
    }
    // Logins checked at once are few; beyond them a login is refused at once rather than
    // queued (a queue of slowed failures would hold every HTTP connection).
    let Ok(_permit) = logins.attempts.try_acquire() else {
        return with_status(
            login_page(
                &c,
                &csrf,
                Some("Too many logins are being checked right now: try again in a moment."),
            ),
            StatusCode::TOO_MANY_REQUESTS,
        );
    };
    let (kafka, mechanism) = match logins
        .log_in(c.kafka.bootstrap(), &form.user, &form.password)
        .await
    {
        Ok(v) => v,
        Err(e) => {
            tracing::info!("console login as {:?} failed: {e}", form.user);
            tokio::time::sleep(FAILED_LOGIN_PAUSE).await;
            return with_status(
                login_page(&c, &csrf, Some(&format!("Login failed: {e}"))),
                StatusCode::UNAUTHORIZED,
            );
        }
    };
    match logins.add(form.user.clone(), mechanism.clone(), form.password, kafka) {
        Ok(token) => {
            tracing::info!("console login as {:?} (SASL/{mechanism})", form.user);
            let mut r = redirect("/");
            if let Ok(v) = HeaderValue::from_str(&format!(
                "{}={token}; Path=/; HttpOnly; SameSite=Strict",
                session_cookie(c.port)
            )) {
                r.headers_mut().insert(header::SET_COOKIE, v);
            }
            r
        }
        Err(why) => with_status(
            login_page(&c, &csrf, Some(&why)),
            StatusCode::SERVICE_UNAVAILABLE,
        ),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct LogoutForm {
    csrf: String,
}

pub(crate) async fn logout(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<LogoutForm>,
) -> Response {
    if let Some(why) = forged(&headers, c.port, &form.csrf) {
        let csrf = c.csrf(&headers);
        return with_status(
            layout("Refused", &csrf, html! { p.error { (why) } }),
            StatusCode::FORBIDDEN,
        );
    }
    let name = session_cookie(c.port);
    if let (Some(logins), Some(token)) = (&c.logins, cookie(&headers, &name)) {
        logins.end(&token);
    }
    let mut r = redirect("/login");
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"
    )) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
