//! Logins, when the console reaches the cluster through a SASL listener: each user logs in
//! with the user name and password their Kafka clients use, checked by the brokers themselves
//! (the console's connections log in with SASL as that user, so the credential store and the
//! authorizer judge the user's every page and action exactly as they judge a client).
//!
//! A login is kept on the server, named by the `sluice_session` cookie (HttpOnly,
//! SameSite=Strict): its user, and a Kafka client whose connections are logged in as that
//! user. It ends when the user logs out, after `sluice.console.session.idle.ms` without a page
//! loaded, or when the broker stops. At most `sluice.console.sessions.max` are held.

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

/// A Kafka client logged in as a user: (user name, password) → the client.
pub type Connect = Arc<dyn Fn(&str, &str) -> Arc<dyn PeerClient> + Send + Sync>;

/// How users log in to the console (Settings::login).
#[derive(Clone)]
pub struct LoginSettings {
    /// The SASL mechanism the console logs in with, as the login page names it.
    pub mechanism: String,
    /// Makes a client logged in as a user.
    pub connect: Connect,
    /// `sluice.console.sessions.max`.
    pub sessions_max: usize,
    /// `sluice.console.session.idle.ms`.
    pub idle: Duration,
}

impl std::fmt::Debug for LoginSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginSettings")
            .field("mechanism", &self.mechanism)
            .field("sessions_max", &self.sessions_max)
            .field("idle", &self.idle)
            .finish()
    }
}

/// The name of the cookie naming a login.
const SESSION_COOKIE: &str = "sluice_session";

#[derive(Debug)]
struct Session {
    user: String,
    kafka: Kafka,
    used: Instant,
}

/// The logins held.
#[derive(Debug)]
pub(crate) struct Logins {
    settings: LoginSettings,
    sessions: parking_lot::Mutex<HashMap<String, Session>>,
}

impl Logins {
    pub(crate) fn new(settings: LoginSettings) -> Logins {
        Logins {
            settings,
            sessions: parking_lot::Mutex::default(),
        }
    }

    /// The user and client of the login named `token`, if it has not ended; it is used now.
    fn find(&self, token: &str) -> Option<(String, Kafka)> {
        let mut sessions = self.sessions.lock();
        let now = Instant::now();
        let s = sessions.get_mut(token)?;
        if now.duration_since(s.used) > self.settings.idle {
            sessions.remove(token);
            return None;
        }
        s.used = now;
        Some((s.user.clone(), s.kafka.clone()))
    }

    /// Keep a new login; its token, or why it is refused (as many as allowed are held).
    fn add(&self, user: String, kafka: Kafka) -> Result<String, String> {
        let mut sessions = self.sessions.lock();
        let now = Instant::now();
        let idle = self.settings.idle;
        sessions.retain(|_, s| now.duration_since(s.used) <= idle);
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
                kafka,
                used: now,
            },
        );
        Ok(token)
    }
}

/// Gives each request the console it is served by: the shared one, or, with logins, the one
/// acting as the request's logged-in user. A request with no login is sent to the login page
/// (GET) or refused (any other method), except the login page and the style sheet.
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
    if path == "/login" || path.starts_with("/assets/") {
        request.extensions_mut().insert(base);
        return next.run(request).await;
    }
    let found = cookie(request.headers(), SESSION_COOKIE).and_then(|t| logins.find(&t));
    match found {
        Some((user, kafka)) => {
            let console = Console {
                kafka,
                user: Some(user),
                ..(*base).clone()
            };
            request.extensions_mut().insert(Arc::new(console));
            next.run(request).await
        }
        None if request.method() == Method::GET || request.method() == Method::HEAD => {
            redirect("/login")
        }
        None => {
            let csrf = Csrf::of(request.headers());
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
    let mechanism = c
        .logins
        .as_ref()
        .map_or("", |l| l.settings.mechanism.as_str());
    layout(
        "Log in",
        csrf,
        html! {
            @if let Some(p) = problem { p.error { (p) } }
            p { "The user name and password of a Kafka client of this cluster (SASL/" (mechanism) "). Every page and action is then asked of the brokers as that user." }
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
    login_page(&c, &Csrf::of(&headers), None)
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
    let csrf = Csrf::of(&headers);
    if let Some(why) = forged(&headers, &form.csrf) {
        return with_status(login_page(&c, &csrf, Some(why)), StatusCode::FORBIDDEN);
    }
    let peers = (logins.settings.connect)(&form.user, &form.password);
    let kafka = Kafka::new(peers, c.kafka.bootstrap().clone());
    // The first request opens a connection, which logs in: a wrong password fails here.
    if let Err(e) = kafka.cluster(Some(&[])).await {
        tracing::info!("console login as {:?} failed: {e}", form.user);
        return with_status(
            login_page(&c, &csrf, Some(&format!("Login failed: {e}"))),
            StatusCode::UNAUTHORIZED,
        );
    }
    match logins.add(form.user.clone(), kafka) {
        Ok(token) => {
            tracing::info!("console login as {:?}", form.user);
            let mut r = redirect("/");
            if let Ok(v) = HeaderValue::from_str(&format!(
                "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
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
    if let Some(why) = forged(&headers, &form.csrf) {
        let csrf = c.csrf(&headers);
        return with_status(
            layout("Refused", &csrf, html! { p.error { (why) } }),
            StatusCode::FORBIDDEN,
        );
    }
    if let (Some(logins), Some(token)) = (&c.logins, cookie(&headers, SESSION_COOKIE)) {
        logins.sessions.lock().remove(&token);
    }
    let mut r = redirect("/login");
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("sluice_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    r
}
