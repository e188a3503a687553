//! The web console (`sluice.console.listener`, docs/console.md): server-rendered HTML pages of
//! the cluster (brokers, ownership, topics, messages, consumer groups) and the actions on them
//! (create a topic, produce a record), served by every broker.
//!
//! Every page reads, and every action writes, through the cluster's own Kafka API
//! ([`kafka::Kafka`]), as Kafka's tools do: what a page shows is what they would report, any
//! broker shows the whole cluster, and the brokers' authorizer judges each request. What only
//! this broker knows (the ownership records it read from etcd, its fsyncs and group-commit
//! rounds) comes from the [`Broker`] itself.
//!
//! Safety: every value is escaped by the HTML templates (maud), record bytes included. Every
//! action is a POST that carries the token of the `sluice_csrf` cookie (SameSite=Strict) in
//! its form, and a POST whose `Origin` is not this listener is refused. `sluice.console.
//! read.only` refuses every action. Limits: a form body of at most [`BODY_MAX_BYTES`]; a page
//! of messages of at most [`MESSAGES_MAX`] records, read in at most [`FETCHES_MAX`] fetches.

mod admin;
mod figures;
mod groups;
mod kafka;
mod kafka_admin;
mod login;
mod pages;
mod rates;
mod records;
mod tail;

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use maud::{html, Markup, DOCTYPE};
use sluice_broker::{Broker, PeerClient};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use login::{Connect, LoginSettings};

/// Largest form body an action takes (a produced record's key, headers and value together).
pub const BODY_MAX_BYTES: usize = 1 << 20;
/// Most records one page of messages shows.
pub const MESSAGES_MAX: usize = 500;
/// Most Fetch requests one page of messages sends.
pub const FETCHES_MAX: usize = 20;

/// How the console is set up.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `sluice.console.read.only`: every action refused.
    pub read_only: bool,
    /// `sluice.console.hosts`: host names the console answers to besides `localhost` and IP
    /// addresses (the `Host` a browser sends), so that a page of another site whose name was
    /// made to resolve here (DNS rebinding) gets nothing.
    pub hosts: Vec<String>,
    /// `sluice.console.connections.max`: HTTP connections served at once; the next is
    /// accepted when one closes.
    pub connections_max: usize,
    /// The Kafka listener the console's requests go to first (this broker's); the others
    /// are those the cluster's Metadata names for the same listener.
    pub bootstrap: (String, u16),
    /// With the cluster reached through a SASL listener: how users log in. None: the console
    /// acts as a client without credentials on a PLAINTEXT listener.
    pub login: Option<LoginSettings>,
}

/// The console as one request is served by it: the shared state, and the Kafka client the
/// request's pages and actions go through (the logged-in user's, with logins).
#[derive(Debug, Clone)]
pub(crate) struct Console {
    pub(crate) hosts: Arc<Vec<String>>,
    pub(crate) broker: Arc<Broker>,
    pub(crate) kafka: kafka::Kafka,
    pub(crate) read_only: bool,
    pub(crate) logins: Option<Arc<login::Logins>>,
    /// The logged-in user, with logins.
    pub(crate) user: Option<String>,
    /// The token of the request's login, with logins (a live tail checks it is still good).
    pub(crate) session: Option<String>,
    /// Turns true when the broker stops (a live tail ends then).
    pub(crate) stop: watch::Receiver<bool>,
    /// The port the console listens on, which its cookies' names carry.
    pub(crate) port: u16,
    /// Messages per second of the partitions the topic list showed.
    pub(crate) rates: Arc<rates::Rates>,
}

impl Console {
    /// The CSRF token of a request to this console, and who is logged in.
    pub(crate) fn csrf(&self, headers: &HeaderMap) -> Csrf {
        Csrf {
            user: self.user.clone(),
            ..Csrf::of(headers, self.port)
        }
    }
}

/// Serve the console on `listener` until `stop` turns true.
pub async fn serve(
    broker: Arc<Broker>,
    peers: Arc<dyn PeerClient>,
    settings: Settings,
    listener: TcpListener,
    mut stop: watch::Receiver<bool>,
) {
    let console = Arc::new(Console {
        broker,
        kafka: kafka::Kafka::new(peers, settings.bootstrap),
        read_only: settings.read_only,
        hosts: Arc::new(settings.hosts.clone()),
        logins: settings.login.map(|l| Arc::new(login::Logins::new(l))),
        user: None,
        session: None,
        stop: stop.clone(),
        port: listener.local_addr().map_or(0, |a| a.port()),
        rates: Arc::default(),
    });
    let connections_max = settings.connections_max;
    let app = router(console);
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let listener = Limited {
        inner: listener,
        room: Arc::new(tokio::sync::Semaphore::new(connections_max.max(1))),
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!("the console listener stopped: {e}");
    }
}

/// The console's listener, serving at most as many connections as it has permits: at the
/// limit it accepts nothing until a connection closes (as Kafka's acceptors wait at
/// `max.connections`).
struct Limited {
    inner: TcpListener,
    room: Arc<tokio::sync::Semaphore>,
}

/// A connection, holding its permit until it is dropped.
struct Counted {
    stream: tokio::net::TcpStream,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl axum::serve::Listener for Limited {
    type Io = Counted;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Counted, std::net::SocketAddr) {
        loop {
            let Ok(permit) = self.room.clone().acquire_owned().await else {
                // Never closed; wait rather than spin if it were.
                std::future::pending::<()>().await;
                continue;
            };
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    return (
                        Counted {
                            stream,
                            _permit: permit,
                        },
                        addr,
                    )
                }
                Err(e) => {
                    // Out of descriptors, or a connection reset before it was accepted: the
                    // open connections are served meanwhile.
                    tracing::warn!("the console listener could not accept a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }
}

impl tokio::io::AsyncRead for Counted {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Counted {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

fn router(console: Arc<Console>) -> Router {
    Router::new()
        .route("/", get(pages::cluster))
        .route("/topics", get(pages::topics).post(pages::create_topic))
        .route("/topics/{name}", get(pages::topic))
        .route("/topics/{name}/admin", post(pages::topic_admin))
        .route(
            "/topics/{name}/messages",
            get(pages::messages).post(pages::produce),
        )
        .route("/groups", get(groups::groups))
        .route("/group", get(groups::group))
        .route("/group/reset", post(groups::reset))
        .route("/group/delete", post(groups::delete))
        .route("/transactions", get(admin::transactions))
        .route("/transaction", get(admin::transaction))
        .route("/transactions/abort", post(admin::abort))
        .route("/security", get(admin::security))
        .route("/acls", post(admin::acl_action))
        .route("/quotas", post(admin::set_quota))
        .route(
            "/brokers/configs",
            get(admin::broker_configs).post(admin::set_broker_config),
        )
        .route("/login", get(login::login_form).post(login::login))
        .route("/logout", post(login::logout))
        .route("/topics/{name}/tail", get(tail::page))
        .route("/topics/{name}/tail/events", get(tail::events))
        .route("/api/broker", get(pages::broker_figures))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(BODY_MAX_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            login::session,
        ))
        .layer(axum::middleware::from_fn_with_state(
            console.clone(),
            known_host,
        ))
        .with_state(console)
}

/// Refuses a request whose `Host` is a name the console does not answer to.
async fn known_host(
    axum::extract::State(c): axum::extract::State<Arc<Console>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("\u{0}"));
    match host {
        Some(h) if !host_allowed(h, &c.hosts) => (
            StatusCode::MISDIRECTED_REQUEST,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "This console answers to localhost, IP addresses and the names in sluice.console.hosts only.\n",
        )
            .into_response(),
        _ => next.run(request).await,
    }
}

/// Whether a `Host` header names this console: an IP address, `localhost`, or one of `hosts`
/// (any port).
fn host_allowed(host: &str, hosts: &[String]) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        // [IPv6]:port
        return rest
            .split_once(']')
            .is_some_and(|(ip, _)| ip.parse::<std::net::Ipv6Addr>().is_ok());
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.parse::<std::net::Ipv4Addr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::host_allowed;

    #[test]
    fn only_addresses_localhost_and_named_hosts_are_answered() {
        let hosts = vec!["console.example.com".to_string()];
        for ok in [
            "127.0.0.1:9080",
            "10.1.2.3",
            "[::1]:9080",
            "localhost:9080",
            "Console.Example.com:443",
        ] {
            assert!(host_allowed(ok, &hosts), "{ok}");
        }
        for refused in [
            "evil.example:9080",
            "127.0.0.1.evil.example",
            "[evil]:80",
            "",
            "localhost.evil:1",
        ] {
            assert!(!host_allowed(refused, &hosts), "{refused}");
        }
    }
}

const CSS: &str = include_str!("../assets/console.css");
const JS: &str = include_str!("../assets/console.js");

async fn js() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        JS,
    )
        .into_response()
}

async fn css() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        CSS,
    )
        .into_response()
}

/// A page answered with another status than 200.
pub(crate) fn with_status(mut page: Response, status: StatusCode) -> Response {
    *page.status_mut() = status;
    page
}

async fn not_found(Extension(c): Extension<Arc<Console>>, headers: HeaderMap) -> Response {
    let csrf = c.csrf(&headers);
    with_status(
        layout("Not found", &csrf, html! { p { "No such page." } }),
        StatusCode::NOT_FOUND,
    )
}

/// The name of the cookie holding the CSRF token on the console listening on `port`: cookies
/// are kept per host whatever the port, and each broker's console on one host has its own.
pub(crate) fn csrf_cookie(port: u16) -> String {
    format!("sluice_csrf_{port}")
}

/// The CSRF token of a request: its cookie's, or a new one the answer sets.
#[derive(Debug, Clone)]
pub(crate) struct Csrf {
    pub(crate) token: String,
    fresh: bool,
    /// The cookie's name.
    cookie: String,
    /// Who is logged in, for the navigation.
    user: Option<String>,
}

impl Csrf {
    pub(crate) fn of(headers: &HeaderMap, port: u16) -> Csrf {
        let name = csrf_cookie(port);
        match cookie(headers, &name).filter(|t| valid_token(t)) {
            Some(token) => Csrf {
                token,
                fresh: false,
                cookie: name,
                user: None,
            },
            None => Csrf {
                token: new_token(),
                fresh: true,
                cookie: name,
                user: None,
            },
        }
    }
}

/// 256 random bits in hex: a CSRF or login token.
pub(crate) fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn valid_token(t: &str) -> bool {
    t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(crate) fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// Why a POST may not act, as the page refusing it: the console is read-only, the form's token
/// is not the cookie's, or the request comes from a page of another site (`Origin`, when the
/// browser sends it). None: it may.
pub(crate) fn refusal(
    console: &Console,
    headers: &HeaderMap,
    form_token: &str,
) -> Option<Response> {
    let why = if console.read_only {
        "The console is read-only (sluice.console.read.only=true): nothing was changed."
    } else {
        forged(headers, console.port, form_token)?
    };
    let csrf = console.csrf(headers);
    Some(with_status(
        layout("Refused", &csrf, html! { p.error { (why) } }),
        StatusCode::FORBIDDEN,
    ))
}

/// Why a form may not be taken as this browser's own: its token is not the cookie's, or it
/// comes from a page of another site (`Origin`, when the browser sends it). None: it may.
pub(crate) fn forged(headers: &HeaderMap, port: u16, form_token: &str) -> Option<&'static str> {
    let cookie = cookie(headers, &csrf_cookie(port)).filter(|t| valid_token(t));
    if cookie.as_deref() != Some(form_token) {
        return Some(
            "The form's token does not match this browser's console cookie (a form from another site, or an expired page): nothing was changed. Load the page again and retry.",
        );
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .unwrap_or("");
        if origin_host != host {
            return Some("The request comes from a page of another site: nothing was changed.");
        }
    }
    None
}

/// A whole page: the navigation, `body`, and the CSRF cookie when it is new.
pub(crate) fn layout(title: &str, csrf: &Csrf, body: Markup) -> Response {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Sluice" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                nav {
                    a.brand href="/" { "Sluice" }
                    a href="/" { "Cluster" }
                    a href="/topics" { "Topics" }
                    a href="/groups" { "Consumer groups" }
                    a href="/transactions" { "Transactions" }
                    a href="/security" { "Quotas & ACLs" }
                    a href="/brokers/configs" { "Broker configs" }
                    @if let Some(user) = &csrf.user {
                        form.logout method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(csrf.token);
                            span.user { (user) }
                            button type="submit" { "Log out" }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    };
    let mut r = (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page.into_string(),
    )
        .into_response();
    let h = r.headers_mut();
    // No page of the console may be framed (clickjacking), nor run script from elsewhere.
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; frame-ancestors 'none'; form-action 'self'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if csrf.fresh {
        if let Ok(v) = HeaderValue::from_str(&format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            csrf.cookie, csrf.token
        )) {
            h.insert(header::SET_COOKIE, v);
        }
    }
    r
}
