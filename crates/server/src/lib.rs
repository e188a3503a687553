//! The server: the listener, one task per connection, limits and graceful shutdown.
//!
//! Architecture invariant: this is the only crate that touches sockets.
//!
//! A connection's task reads one size-prefixed frame at a time (never more than
//! `socket.request.max.bytes`), decodes it, and calls [`Broker::handle`], which does the
//! ordered part of the work at once (so appends happen in request order) and returns a future
//! for the rest. The task queues that future and writes the queued responses in request order
//! as they become ready, while it keeps reading up to [`Limits::max_in_flight`] pipelined
//! requests ahead.
//!
//! A frame that cannot be a request (bad size, unknown API key, unsupported version,
//! malformed body) gets one log line and the connection is closed, as Kafka does; the only
//! exception is an ApiVersions request newer than ours, which gets Kafka's fallback answer.
//!
//! The operations listener (`/metrics`, `/healthz`, `/readyz`) is `http.rs`, a minimal
//! HTTP/1.1 server: [`serve_http`]. The client that fetches OAUTHBEARER key sets over
//! HTTP(S) is `jwks.rs`: [`jwks_fetcher`].

mod http;
mod jwks;
mod pkcs12;
mod tls;
mod x500;

pub use http::{serve_http, HTTP_MAX_CONNECTIONS, HTTP_MAX_HEAD_BYTES, HTTP_READ_TIMEOUT};
pub use jwks::{jwks_fetcher, JWKS_MAX_BYTES, JWKS_TIMEOUT, SYSTEM_CA_BUNDLES};
pub use tls::{Certificates, ListenerTls};

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use sluice_broker::{
    Answer, AuthStep, Authenticator, Broker, Connection, FileSlice, Gate, Response, Verdicts,
};
use sluice_wire::{
    decode_request, encode_fetch_response, encode_response, FramePart, Request, WireError,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use tls::{Reader, Writer};
use tokio::sync::{mpsc, watch, Semaphore};

mod peers;
pub use peers::TcpPeers;

/// Every limit the server enforces.
#[derive(Clone, Debug)]
pub struct Limits {
    /// `socket.request.max.bytes`: largest frame accepted.
    pub max_request_bytes: u32,
    /// `max.connections`, counted over every listener (at most what the open-files limit
    /// leaves for connections): while that many are open no listener accepts, as Kafka's
    /// acceptors wait for a slot; the kernel queues new connections meanwhile.
    pub max_connections: u32,
    /// `max.connections.per.ip`: a connection from an address that has this many open already
    /// is closed as soon as it is accepted, as Kafka closes it.
    pub max_connections_per_ip: u32,
    /// `max.connections.per.ip.overrides`, the host names resolved: per-address exceptions.
    pub max_connections_per_ip_overrides: HashMap<IpAddr, u32>,
    /// `connections.max.idle.ms`: a connection with no request waiting is closed this long
    /// after its last answer (or after it opened).
    pub idle_timeout: Duration,
    /// Requests read ahead of their responses on one connection.
    pub max_in_flight: usize,
    /// `connection.failed.authentication.delay.ms`: the answer to a failed SASL
    /// authentication, or the close, waits this long (a client trying passwords, or one
    /// misconfigured and reconnecting at once, is slowed down).
    pub failed_auth_delay: Duration,
}

/// Reason a connection ended, for its single log line.
#[derive(Debug)]
enum Close {
    Eof,
    Idle,
    Shutdown,
    Oversized(i32),
    Wire(WireError),
    Io(io::Error),
    /// SASL authentication failed, or the client broke its order (counted as a failed
    /// authentication).
    AuthFailed(String),
    /// The SASL session ended without a re-authentication (`connections.max.reauth.ms`).
    Expired(String),
}

/// One bound listener: its name (`listeners`, `listener.security.protocol.map`), its socket,
/// and for an SSL or SASL_SSL listener its TLS.
pub struct Bound {
    pub name: Arc<str>,
    pub listener: TcpListener,
    pub tls: Option<Tls>,
}

/// A listener's TLS: its certificates and configuration ([`ListenerTls`], replaceable at run
/// time) and, on an SSL listener (not SASL_SSL, where SASL says who the client is), the
/// `ssl.principal.mapping.rules` that make a client certificate's subject the connection's
/// principal.
#[derive(Clone, Debug)]
pub struct Tls {
    pub certs: Arc<ListenerTls>,
    pub principals: Option<Arc<sluice_config::SslPrincipalMapper>>,
}

/// At most one log line a second for client certificates no mapping rule gives a name to.
static UNMAPPED_LOG: sluice_broker::LogLimiter =
    sluice_broker::LogLimiter::new("client certificate(s) without a principal");

/// The principal of a TLS connection on an SSL listener: `User:<name>` with the name the
/// mapping rules give the client certificate's subject (its RFC 2253 form, as Java prints it);
/// `Ok(None)` without a client certificate (`ssl.client.auth=requested` or `none`): Kafka's
/// `User:ANONYMOUS`. An error when no rule applies: Kafka refuses such a connection.
fn certificate_principal(
    tls: &tokio_rustls::server::TlsStream<TcpStream>,
    rules: &sluice_config::SslPrincipalMapper,
) -> Result<Option<Arc<str>>, String> {
    let Some(leaf) = tls.get_ref().1.peer_certificates().and_then(|c| c.first()) else {
        return Ok(None);
    };
    let dn = x500::subject(leaf)?;
    match rules.name(&dn) {
        Some(name) => Ok(Some(format!("User:{name}").into())),
        None => Err(format!(
            "no ssl.principal.mapping.rules apply to the client certificate's subject {dn} (rules: {})",
            rules.text()
        )),
    }
}

impl std::fmt::Debug for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bound")
            .field("name", &self.name)
            .field("listener", &self.listener)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// At most one log line a second for failed authentications (a flood of failed logins must not
/// flood the log); the next line says how many were left out.
static AUTH_FAILURE_LOG: sluice_broker::LogLimiter =
    sluice_broker::LogLimiter::new("failed authentication(s)");

/// At most one log line a second for failed `accept` calls, for connections refused over
/// `max.connections.per.ip`, and for listeners that stopped accepting at `max.connections`.
static ACCEPT_FAILURE_LOG: sluice_broker::LogLimiter =
    sluice_broker::LogLimiter::new("failed accept(s)");
static PER_IP_LOG: sluice_broker::LogLimiter =
    sluice_broker::LogLimiter::new("connection(s) rejected over max.connections.per.ip");
static FULL_LOG: sluice_broker::LogLimiter =
    sluice_broker::LogLimiter::new("wait(s) at max.connections");

/// How long a listener waits before it accepts again after `accept` failed for want of a
/// resource (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`): the pending connection stays in the
/// kernel's queue, and the connections already open are served meanwhile (a listener that
/// retried at once would spin on the same error).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Open connections per client address, for `max.connections.per.ip` (Kafka's
/// `ConnectionQuotas`: counted at accept, over every listener).
#[derive(Debug)]
struct PerIp {
    default_max: u32,
    overrides: HashMap<IpAddr, u32>,
    counts: parking_lot::Mutex<HashMap<IpAddr, u32>>,
}

impl PerIp {
    fn max(&self, ip: IpAddr) -> u32 {
        self.overrides.get(&ip).copied().unwrap_or(self.default_max)
    }

    /// Count a connection from `ip`, or Err(the limit) if it has that many open already.
    fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<IpSlot, u32> {
        // An IPv4 client of a dual-stack listener arrives as `::ffff:a.b.c.d`; it is counted,
        // and its override found, under its IPv4 address, as Kafka sees it.
        let ip = ip.to_canonical();
        let max = self.max(ip);
        let mut counts = self.counts.lock();
        let n = counts.entry(ip).or_insert(0);
        if *n >= max {
            if *n == 0 {
                counts.remove(&ip);
            }
            return Err(max);
        }
        *n += 1;
        Ok(IpSlot {
            per_ip: self.clone(),
            ip,
        })
    }
}

/// One connection counted for its address; dropped when the connection ends.
#[derive(Debug)]
struct IpSlot {
    per_ip: Arc<PerIp>,
    ip: IpAddr,
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut counts = self.per_ip.counts.lock();
        if let Some(n) = counts.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// `accept` failed for want of a resource: waiting helps, retrying at once does not.
fn accept_needs_backoff(e: &io::Error) -> bool {
    use rustix::io::Errno;
    e.raw_os_error().is_some_and(|code| {
        [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
            .iter()
            .any(|x| x.raw_os_error() == code)
    })
}

/// How long a client has to complete its TLS handshake (Kafka bounds it by its idle timeout;
/// a handshake that never ends must not hold a connection slot).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serve connections from every listener until `shutdown` turns true, then wait for open
/// connections to finish their current requests. `max.connections` counts the connections
/// of all listeners together, as Kafka's does. Returns early only if a listener's task
/// failed (a panic): the caller must not go on without it.
pub async fn serve(
    broker: Arc<Broker>,
    listeners: Vec<Bound>,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
) {
    // Plaintext calls to peers, unless the binary installed its own (TLS) already.
    broker.set_peers(Arc::new(TcpPeers::new(broker.node_id())));
    broker.set_reader_peers(Arc::new(TcpPeers::new(broker.node_id())));
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.min(Semaphore::MAX_PERMITS as u32) as usize,
    ));
    let per_ip = Arc::new(PerIp {
        default_max: limits.max_connections_per_ip,
        overrides: limits.max_connections_per_ip_overrides.clone(),
        counts: parking_lot::Mutex::new(HashMap::new()),
    });
    // Every connection task holds a clone; when all are dropped, `all_done` yields None.
    let (done_tx, mut all_done) = mpsc::channel::<()>(1);
    let mut accepting = tokio::task::JoinSet::new();
    for bound in listeners {
        accepting.spawn(accept(
            broker.clone(),
            bound,
            limits.clone(),
            slots.clone(),
            per_ip.clone(),
            done_tx.clone(),
            shutdown.clone(),
        ));
    }
    drop(done_tx);
    while let Some(ended) = accepting.join_next().await {
        if let Err(e) = ended {
            tracing::error!("a listener's task failed: {e}");
            return;
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(10), all_done.recv()).await;
}

/// Accept connections on one listener until `shutdown` turns true: a slot under
/// `max.connections` first ([`connection_slot`]), then the accept (one that fails for want
/// of descriptors waits [`ACCEPT_BACKOFF`] with the slot given back, the open connections
/// served meanwhile), then a place under `max.connections.per.ip`; each connection is served
/// on a task of its own ([`serve_accepted`]).
async fn accept(
    broker: Arc<Broker>,
    bound: Bound,
    limits: Limits,
    slots: Arc<Semaphore>,
    per_ip: Arc<PerIp>,
    done_tx: mpsc::Sender<()>,
    mut shutdown: watch::Receiver<bool>,
) {
    let Bound {
        name,
        listener,
        tls,
    } = bound;
    let principals = tls.as_ref().and_then(|t| t.principals.clone());
    let certs = tls.map(|t| t.certs);
    loop {
        let Some(permit) = connection_slot(&slots, &name, &limits, &mut shutdown).await else {
            break;
        };
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        if !accept_needs_backoff(&e) {
                            // The client went away before the accept (ECONNABORTED and such).
                            tracing::debug!(listener = %name, "accept failed: {e}");
                            continue;
                        }
                        if let Some(more) = ACCEPT_FAILURE_LOG.admit() {
                            tracing::warn!(listener = %name, "accept failed: {e}; the open connections are served, new ones wait{more}");
                        }
                        drop(permit);
                        tokio::select! {
                            _ = tokio::time::sleep(ACCEPT_BACKOFF) => continue,
                            _ = shutdown.changed() => break,
                        }
                    }
                };
                let ip_slot = match per_ip.admit(peer.ip()) {
                    Ok(slot) => slot,
                    Err(max) => {
                        if let Some(more) = PER_IP_LOG.admit() {
                            tracing::info!(listener = %name, "Rejected connection from {}, address already has the configured maximum of {max} connections.{more}", peer.ip());
                        }
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let conn = Connection { peer: peer.ip(), listener: name.clone(), principal: None, produce_refusals: Default::default(), share_sessions: Default::default() };
                // The listener's configuration now: a keystore replaced at run time serves
                // the connections accepted after it.
                let tls = certs.as_ref().map(|c| (TlsAcceptor::from(c.server_config()), principals.clone()));
                let held = Held { _ip_slot: ip_slot, _permit: permit, _done: done_tx.clone() };
                tokio::spawn(serve_accepted(broker.clone(), stream, peer, conn, tls, limits.clone(), shutdown.clone(), held));
            }
            _ = shutdown.changed() => break,
        }
    }
}

/// A slot under `max.connections`: at the limit nothing is accepted until a connection
/// closes (said in the log, at most once a second). `None` when the broker shuts down.
async fn connection_slot(
    slots: &Arc<Semaphore>,
    listener: &str,
    limits: &Limits,
    shutdown: &mut watch::Receiver<bool>,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    if let Ok(p) = slots.clone().try_acquire_owned() {
        return Some(p);
    }
    if let Some(more) = FULL_LOG.admit() {
        tracing::warn!(%listener, max = limits.max_connections, "max.connections open: new connections wait until one closes{more}");
    }
    tokio::select! {
        p = slots.clone().acquire_owned() => p.ok(),
        _ = shutdown.changed() => None,
    }
}

/// What an accepted connection holds until it closes: its `max.connections` slot, its place
/// under `max.connections.per.ip`, and the sender whose drop tells shutdown it is done.
/// Held for their drops, in this order: the per-IP place before the slot (a connection
/// accepted on the freed slot finds its address's count already lowered), the sender last.
struct Held {
    _ip_slot: IpSlot,
    _permit: tokio::sync::OwnedSemaphorePermit,
    _done: mpsc::Sender<()>,
}

/// One accepted connection, from its TLS handshake (on a TLS listener) to its close, on a
/// task of its own; `held` is released when it ends, whichever way.
#[allow(clippy::too_many_arguments)]
async fn serve_accepted(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: std::net::SocketAddr,
    mut conn: Connection,
    tls: Option<(TlsAcceptor, Option<Arc<sluice_config::SslPrincipalMapper>>)>,
    limits: Limits,
    shutdown: watch::Receiver<bool>,
    held: Held,
) {
    let (reader, writer) = match tls {
        None => {
            let (r, w) = stream.into_split();
            (Reader::Tcp(r), Writer::Tcp(w))
        }
        Some((acceptor, principals)) => {
            match tls_handshake(&broker, stream, peer, &mut conn, acceptor, principals).await {
                Some(halves) => halves,
                None => return,
            }
        }
    };
    let metrics = broker.metrics().clone();
    metrics.connection_opened(&conn.listener);
    let auth = broker.authenticator(&conn.listener);
    let close = connection(
        broker,
        reader,
        writer,
        conn.clone(),
        auth,
        &limits,
        shutdown,
    )
    .await;
    metrics.connection_closed(&conn.listener);
    log_close(peer, &conn.listener, &close, &limits);
    drop(held);
}

/// The TLS handshake of a connection on a TLS listener, within [`TLS_HANDSHAKE_TIMEOUT`], and
/// on an SSL listener its principal from the client certificate (`ssl.principal.mapping.rules`).
/// `None` when the connection is closed instead: a handshake that failed, timed out or gave a
/// certificate no rule names counts as a failed authentication; a connection closed before its
/// first byte is no handshake at all (a liveness check: the cluster's death probe, a load
/// balancer's), closed quietly and not counted, as Kafka takes an end of stream for a
/// disconnect.
async fn tls_handshake(
    broker: &Broker,
    stream: TcpStream,
    peer: std::net::SocketAddr,
    conn: &mut Connection,
    acceptor: TlsAcceptor,
    principals: Option<Arc<sluice_config::SslPrincipalMapper>>,
) -> Option<(Reader, Writer)> {
    let started = tokio::time::Instant::now();
    let mut first = [0u8; 1];
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await {
        Ok(Ok(0)) | Ok(Err(_)) => {
            tracing::debug!(%peer, listener = %conn.listener, "connection closed before a TLS handshake began");
            return None;
        }
        Ok(Ok(_)) | Err(_) => {}
    }
    let failed = |reason: String| {
        broker.metrics().failed_authentication(&conn.listener);
        tracing::info!(%peer, listener = %conn.listener, "connection closed: {reason}");
    };
    let tls =
        match tokio::time::timeout_at(started + TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream))
            .await
        {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                failed(format!("TLS handshake failed: {e}"));
                return None;
            }
            Err(_) => {
                failed(format!("no TLS handshake within {TLS_HANDSHAKE_TIMEOUT:?}"));
                return None;
            }
        };
    if let Some(rules) = &principals {
        match certificate_principal(&tls, rules) {
            Ok(principal) => conn.principal = principal,
            Err(reason) => {
                broker.metrics().failed_authentication(&conn.listener);
                if let Some(more) = UNMAPPED_LOG.admit() {
                    tracing::info!(%peer, listener = %conn.listener, "connection closed: {reason}{more}");
                }
                return None;
            }
        }
    }
    let (r, w) = tokio::io::split(tls);
    Some((Reader::Tls(r), Writer::Tls(w)))
}

/// Why a connection closed, at the level it deserves: a client's ordinary end at debug, a
/// limit or a broken request at info or warn, failed logins at most once a second.
fn log_close(peer: std::net::SocketAddr, listener: &str, close: &Close, limits: &Limits) {
    match close {
        Close::Eof | Close::Shutdown => {
            tracing::debug!(%peer, %listener, "connection closed: {close:?}")
        }
        Close::Idle => {
            tracing::info!(%peer, %listener, "connection closed: idle for longer than connections.max.idle.ms")
        }
        Close::Oversized(size) => {
            tracing::warn!(%peer, %listener, size, max = limits.max_request_bytes, "connection closed: request size exceeds socket.request.max.bytes or is negative")
        }
        Close::Wire(e) => tracing::warn!(%peer, %listener, "connection closed: {e}"),
        Close::Io(e) => tracing::debug!(%peer, %listener, "connection closed: {e}"),
        Close::AuthFailed(reason) => {
            if let Some(more) = AUTH_FAILURE_LOG.admit() {
                tracing::info!(%peer, %listener, "connection closed: SASL authentication failed: {reason}{more}");
            }
        }
        Close::Expired(reason) => tracing::info!(%peer, %listener, "connection closed: {reason}"),
    }
}

struct InFlight {
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    /// When the request was read (its time, Kafka's TotalTimeMs, ends when the answer is
    /// written).
    received: std::time::Instant,
    reply: Answer,
}

enum Queued {
    Pending(InFlight),
    /// A prepared frame (the ApiVersions fallback).
    Raw(BytesMut),
}

/// Wait until the oldest queued request's response is ready, then take the request off the
/// queue with its response (None: the request gets no response, such as acks=0). Cancel-safe:
/// until it returns, the request stays queued.
async fn next_ready(queue: &mut VecDeque<Queued>) -> (Queued, Option<Response>) {
    std::future::poll_fn(|cx| {
        // The caller only waits on a non-empty queue.
        let Some(mut head) = queue.pop_front() else {
            return Poll::Pending;
        };
        let response = match &mut head {
            Queued::Raw(_) => None,
            Queued::Pending(f) => match f.reply.as_mut().poll(cx) {
                Poll::Ready(response) => response,
                Poll::Pending => {
                    queue.push_front(head);
                    return Poll::Pending;
                }
            },
        };
        Poll::Ready((head, response))
    })
    .await
}

/// One task serves a connection: it reads requests while fewer than
/// [`Limits::max_in_flight`] are queued, and writes each response as soon as it and every
/// earlier one are ready. Reading pauses while a response is being written (as Kafka mutes a
/// channel while it sends). One task, not a reader and a writer: a response costs no task
/// wake-up, and the socket is never used from two threads at once.
///
/// Each turn does one step, the first ready of: write the oldest answer once ready (then
/// mute the connection for its throttle time, [`muted_until_after`]); unmute; start the
/// request held back once its gate opens ([`Session::start_gated`]); stop reading at
/// shutdown or when idle; take in a frame read ([`Session::on_read`]). Once reading stopped
/// and every queued request is answered, the connection closes ([`Session::close`]).
async fn connection(
    broker: Arc<Broker>,
    mut reader: Reader,
    mut writer: Writer,
    conn: Connection,
    auth: Option<Authenticator>,
    limits: &Limits,
    mut shutdown: watch::Receiver<bool>,
) -> Close {
    let max_in_flight = limits.max_in_flight.max(1);
    let mut s = Session {
        broker,
        conn,
        auth,
        limits,
        queue: VecDeque::with_capacity(max_in_flight),
        stopped: None,
        gated: None,
        muted_until: None,
        failure_answered: false,
    };
    // Bytes read from the socket but not yet framed: one read can bring several pipelined
    // requests (or the next one's start), so most requests cost one system call, not two.
    let mut inbuf = BytesMut::new();
    // Closed `connections.max.idle.ms` after the last answer, unless a request waits. The
    // timer restarts only at an answer: every request read is answered before the queue is
    // empty again, so restarting it at a read too would change nothing.
    let idle = tokio::time::sleep(limits.idle_timeout);
    tokio::pin!(idle);
    loop {
        if s.stopped.is_some() && s.queue.is_empty() && s.gated.is_none() {
            break;
        }
        tokio::select! {
            biased;
            (head, response) = next_ready(&mut s.queue), if !s.queue.is_empty() => {
                let throttle_ms = match write_response(&s.broker, &mut writer, head, response).await {
                    Ok(ms) => ms,
                    Err(e) => return close_after_write_error(s.stopped, e),
                };
                let now = tokio::time::Instant::now();
                s.muted_until = muted_until_after(s.muted_until, now, throttle_ms);
                idle.as_mut().reset(now + limits.idle_timeout);
            }
            () = sleep_until_some(s.muted_until), if s.muted_until.is_some() => s.muted_until = None,
            verdicts = open_gate(&mut s.gated), if s.gated.is_some() => s.start_gated(verdicts),
            _ = shutdown.changed(), if s.stopped.is_none() => s.stopped = Some(Close::Shutdown),
            () = &mut idle, if s.stopped.is_none() && s.queue.is_empty() => s.stopped = Some(Close::Idle),
            read = read_frame(&mut reader, &mut inbuf, frame_limit(limits, s.auth.as_ref())),
                if s.stopped.is_none() && s.gated.is_none() && s.muted_until.is_none()
                    && s.queue.len() < max_in_flight => s.on_read(read),
        }
    }
    s.close(writer).await
}

/// What one connection's task keeps between its steps ([`connection`]).
struct Session<'a> {
    broker: Arc<Broker>,
    conn: Connection,
    auth: Option<Authenticator>,
    limits: &'a Limits,
    /// The requests read and not yet answered, in request order.
    queue: VecDeque<Queued>,
    /// Why reading stopped (then the queued requests are answered and the connection closes).
    stopped: Option<Close>,
    /// A request waiting for its gate (`Broker::prepare`) before its ordered part runs.
    gated: Option<(Gate, Request, std::time::Instant)>,
    /// Client quotas: a throttled answer mutes the connection (nothing more is read) until
    /// this instant, as Kafka mutes a throttled client's channel (KIP-219).
    muted_until: Option<tokio::time::Instant>,
    /// A failed authentication's answer was held back already (else the close is).
    failure_answered: bool,
}

/// A request's API key, version and correlation id, as its answer is written with them.
type RequestId = (ApiKey, i16, i32);

/// The id `request`'s answer is written with.
fn request_id(request: &Request) -> RequestId {
    (request.api_key, request.version(), request.correlation_id())
}

impl InFlight {
    /// A request read at `received`, to be answered with `reply` under `id`.
    fn new(id: RequestId, received: std::time::Instant, reply: Answer) -> InFlight {
        let (api_key, version, correlation_id) = id;
        InFlight {
            api_key,
            version,
            correlation_id,
            received,
            reply,
        }
    }
}

impl Session<'_> {
    /// Take in what one read brought: a frame, or why reading stops. A frame too large for a
    /// SASL connection not authenticated yet fails its authentication (Kafka's bound on
    /// unauthenticated input, `sasl.server.max.receive.size`). After a SaslHandshake v0 a
    /// frame is a bare token ([`Session::on_raw_token`]); otherwise a request
    /// ([`Session::on_frame`]).
    fn on_read(&mut self, read: Result<Bytes, Close>) {
        let frame = match read {
            Ok(frame) => frame,
            Err(Close::Oversized(size))
                if self.auth.as_ref().is_some_and(|a| !a.authenticated()) =>
            {
                self.broker
                    .metrics()
                    .failed_authentication(&self.conn.listener);
                self.stopped = Some(Close::AuthFailed(format!(
                    "Failing SASL authentication due to invalid receive size ({size} bytes; sasl.server.max.receive.size is {})",
                    frame_limit(self.limits, self.auth.as_ref())
                )));
                return;
            }
            Err(close) => {
                self.stopped = Some(close);
                return;
            }
        };
        if self.auth.as_ref().is_some_and(|a| a.wants_raw_token()) {
            self.on_raw_token(&frame);
        } else {
            self.on_frame(frame);
        }
    }

    /// After a SaslHandshake v0 the tokens come and go as bare size-prefixed frames: answer
    /// one ([`raw_token_frame`]), and take the principal once authenticated; a refused token
    /// fails the authentication.
    fn on_raw_token(&mut self, frame: &Bytes) {
        let Some(a) = self.auth.as_mut() else {
            return;
        };
        match a.on_raw_token(&self.broker, frame) {
            Ok(token) => {
                self.queue.push_back(Queued::Raw(raw_token_frame(&token)));
                if a.authenticated() {
                    self.conn.principal = a.principal();
                }
            }
            Err(reason) => {
                self.broker
                    .metrics()
                    .failed_authentication(&self.conn.listener);
                self.stopped = Some(Close::AuthFailed(reason));
            }
        }
    }

    /// Decode a frame. A request is counted, goes through the connection's authenticator
    /// ([`Session::authenticate`]) and, if it is to be served, starts ([`Session::start`]).
    /// An ApiVersions request newer than ours gets Kafka's fallback answer; anything else
    /// that cannot be a request stops reading (one log line at the close), and before a SASL
    /// connection authenticated counts as a failed authentication.
    fn on_frame(&mut self, frame: Bytes) {
        match decode_request(frame) {
            Ok(request) => {
                let received = std::time::Instant::now();
                self.broker
                    .metrics()
                    .request(request.api_key as i16, request.version());
                let id = request_id(&request);
                if let Some(request) = self.authenticate(request, id, received) {
                    self.start(request, id, received);
                }
            }
            Err(WireError::UnsupportedApiVersions { correlation_id, .. }) => {
                match sluice_wire::unsupported_api_versions_response(correlation_id) {
                    Ok(frame) => self.queue.push_back(Queued::Raw(frame)),
                    Err(e) => self.stopped = Some(Close::Wire(e)),
                }
            }
            Err(e) => {
                if self.auth.as_ref().is_some_and(|a| !a.authenticated()) {
                    self.broker
                        .metrics()
                        .failed_authentication(&self.conn.listener);
                }
                self.stopped = Some(Close::Wire(e));
            }
        }
    }

    /// Hand a request of a SASL connection to its authenticator first; the request to serve,
    /// if any (on a connection without SASL, the request itself).
    ///
    /// Keeps (ARCHITECTURE.md): on a SASL listener no request but ApiVersions, SaslHandshake
    /// and SaslAuthenticate reaches `Broker::handle` before its connection has
    /// authenticated, and none after its session ended without a re-authentication. The
    /// authenticator's own answers are queued in request order; a failed authentication's
    /// answer waits `connection.failed.authentication.delay.ms`, and reading stops.
    fn authenticate(
        &mut self,
        request: Request,
        id: RequestId,
        received: std::time::Instant,
    ) -> Option<Request> {
        let Some(a) = self.auth.as_mut() else {
            return Some(request);
        };
        let was_authenticated = a.authenticated();
        match a.on_request(&self.broker, request) {
            AuthStep::Serve(request) => Some(*request),
            AuthStep::Reply(body) => {
                if a.authenticated() {
                    self.conn.principal = a.principal();
                }
                let reply: Answer = Box::pin(std::future::ready(Some(Response::Body(body))));
                self.queue
                    .push_back(Queued::Pending(InFlight::new(id, received, reply)));
                None
            }
            AuthStep::Fail { reply, reason } => {
                self.broker
                    .metrics()
                    .failed_authentication(&self.conn.listener);
                if let Some(body) = reply {
                    let delay = self.limits.failed_auth_delay;
                    self.failure_answered = true;
                    let reply: Answer = Box::pin(async move {
                        tokio::time::sleep(delay).await;
                        Some(Response::Body(body))
                    });
                    self.queue
                        .push_back(Queued::Pending(InFlight::new(id, received, reply)));
                }
                self.stopped = Some(Close::AuthFailed(reason));
                None
            }
            AuthStep::Close(reason) if was_authenticated => {
                self.stopped = Some(Close::Expired(reason));
                None
            }
            AuthStep::Close(reason) => {
                self.broker
                    .metrics()
                    .failed_authentication(&self.conn.listener);
                self.stopped = Some(Close::AuthFailed(reason));
                None
            }
        }
    }

    /// Run a request's ordered part now and queue its answer, unless it must wait for its
    /// gate first (`Broker::prepare`: a transactional produce's KIP-890 check, produce
    /// backpressure, an acquisition under way). Then it is held back, and nothing more is
    /// read until the gate opens: appends stay in request order (ARCHITECTURE.md).
    fn start(&mut self, request: Request, id: RequestId, received: std::time::Instant) {
        match self.broker.prepare(&request, &self.conn) {
            // Nothing more is read until the gate opens: appends stay in order.
            Some(gate) => self.gated = Some((gate, request, received)),
            None => {
                let reply = self.broker.handle(request, &self.conn);
                self.queue
                    .push_back(Queued::Pending(InFlight::new(id, received, reply)));
            }
        }
    }

    /// The held-back request's gate opened: run its ordered part with the gate's answer and
    /// queue its answer, in request order (nothing was read after it).
    fn start_gated(&mut self, verdicts: Verdicts) {
        if let Some((_, request, received)) = self.gated.take() {
            let id = request_id(&request);
            let reply = self.broker.handle_prepared(request, &self.conn, verdicts);
            self.queue
                .push_back(Queued::Pending(InFlight::new(id, received, reply)));
        }
    }

    /// Close the connection once every queued request is answered: a failed authentication
    /// whose answer was not held back waits `connection.failed.authentication.delay.ms`
    /// first; then the writer shuts down. Returns why the connection ended.
    async fn close(self, mut writer: Writer) -> Close {
        let close = self.stopped.unwrap_or(Close::Eof);
        if matches!(close, Close::AuthFailed(_)) && !self.failure_answered {
            tokio::time::sleep(self.limits.failed_auth_delay).await;
        }
        match writer.shutdown().await {
            Err(e) if matches!(close, Close::Eof) => Close::Io(e),
            _ => close,
        }
    }
}

/// Why a connection ends when writing an answer failed with `e`: the reason reading had
/// stopped for, if any (a shutdown, an idle timeout, a failed authentication), else the
/// write's error.
fn close_after_write_error(stopped: Option<Close>, e: io::Error) -> Close {
    match stopped {
        None | Some(Close::Eof) => Close::Io(e),
        Some(close) => close,
    }
}

/// Until when the connection reads nothing, after an answer with a throttle time of
/// `throttle_ms` written `now`: the later of that and the mute already running (KIP-219).
fn muted_until_after(
    muted_until: Option<tokio::time::Instant>,
    now: tokio::time::Instant,
    throttle_ms: i32,
) -> Option<tokio::time::Instant> {
    if throttle_ms > 0 {
        let until = now + Duration::from_millis(throttle_ms as u64);
        return Some(muted_until.map_or(until, |m| m.max(until)));
    }
    muted_until
}

/// A SASL token as the bare size-prefixed frame a SaslHandshake v0 client reads.
fn raw_token_frame(token: &[u8]) -> BytesMut {
    let mut out = BytesMut::with_capacity(FRAME_PREFIX + token.len());
    out.extend_from_slice(&(token.len() as u32).to_be_bytes());
    out.extend_from_slice(token);
    out
}

/// The largest frame read now: `socket.request.max.bytes`, and before a SASL connection is
/// authenticated `sasl.server.max.receive.size` (Kafka's bound on unauthenticated input).
fn frame_limit(limits: &Limits, auth: Option<&Authenticator>) -> u32 {
    match auth {
        Some(a) if !a.authenticated() => limits.max_request_bytes.min(a.max_receive_bytes()),
        _ => limits.max_request_bytes,
    }
}

/// Wait for the gate of the request held back (the caller polls this only when one is).
/// Cancel-safe: the gate stays in place until it yields.
async fn open_gate(gated: &mut Option<(Gate, Request, std::time::Instant)>) -> Verdicts {
    match gated.as_mut() {
        Some((gate, _, _)) => gate.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Sleep until `at` (the caller polls this only when it is set).
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Encode and write one response; returns its throttle time (client quotas), for which the
/// connection reads nothing more.
async fn write_response(
    broker: &Broker,
    writer: &mut Writer,
    head: Queued,
    mut response: Option<Response>,
) -> io::Result<i32> {
    let f = match head {
        Queued::Raw(frame) => {
            writer.write_all(&frame).await?;
            return writer.flush().await.map(|()| 0);
        }
        Queued::Pending(f) => f,
    };
    let throttle_ms = response.as_mut().map_or(0, Response::throttle_time_ms);
    if let Some(r) = &response {
        broker.count_errors(f.api_key as i16, r);
    }
    let mut written = write_answer(writer, f.api_key, f.version, f.correlation_id, response).await;
    if written.is_ok() {
        // TLS holds encrypted records back until flushed; on TCP this does nothing.
        written = writer.flush().await;
    }
    broker.request_done(f.api_key as i16, f.received.elapsed());
    written.map(|()| throttle_ms)
}

/// Encode and write one answer.
async fn write_answer(
    writer: &mut Writer,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    response: Option<Response>,
) -> io::Result<()> {
    let encoded = match response {
        None | Some(Response::Silent { .. }) => return Ok(()),
        Some(Response::Body(body)) => encode_response(api_key, version, correlation_id, &body),
        Some(Response::Fetch { mut body, regions }) => {
            let lens: Vec<(usize, u32)> = regions.iter().map(|(at, r)| (*at, r.len)).collect();
            match encode_fetch_response(version, correlation_id, &mut body, &lens) {
                Ok(parts) => return write_parts(writer, parts, &regions).await,
                Err(e) => Err(e),
            }
        }
    };
    match encoded {
        Ok(frame) => writer.write_all(&frame).await,
        Err(e) => {
            tracing::error!("cannot encode response: {e}");
            Err(io::Error::other(e.to_string()))
        }
    }
}

/// Length of a frame's size prefix.
const FRAME_PREFIX: usize = sluice_wire::FRAME_PREFIX_BYTES;

/// Socket reads ask for at least this much, so small pipelined requests arrive together.
const READ_CHUNK: usize = 64 * 1024;

/// Read one frame, using and refilling `inbuf`. Cancel-safe: bytes read stay in `inbuf` for
/// the next call. The caller's idle timer restarts only when a request is answered, so a
/// client that trickles bytes cannot hold the connection open past it.
async fn read_frame(reader: &mut Reader, inbuf: &mut BytesMut, max: u32) -> Result<Bytes, Close> {
    loop {
        // The size prefix is checked as soon as it is here, before any of the body is read.
        let wanted = if inbuf.len() >= FRAME_PREFIX {
            let len = i32::from_be_bytes([inbuf[0], inbuf[1], inbuf[2], inbuf[3]]);
            if len < 0 || len as u32 > max {
                return Err(Close::Oversized(len));
            }
            let total = FRAME_PREFIX + len as usize;
            if inbuf.len() >= total {
                let mut frame = inbuf.split_to(total);
                let _prefix = frame.split_to(FRAME_PREFIX);
                return Ok(frame.freeze());
            }
            total
        } else {
            FRAME_PREFIX
        };
        // Room for the rest of this frame (read straight into it, never zeroed), and for the
        // start of the next one when this one is small.
        let missing = wanted - inbuf.len();
        inbuf.reserve(missing.max(READ_CHUNK));
        match reader.read_buf(inbuf).await {
            Ok(0) if inbuf.is_empty() => return Err(Close::Eof),
            Ok(0) if wanted == FRAME_PREFIX => return Err(Close::Eof),
            Ok(0) => {
                return Err(Close::Wire(WireError::Truncated {
                    len: wanted - FRAME_PREFIX,
                }))
            }
            Ok(_) => {}
            Err(e) => return Err(Close::Io(e)),
        }
    }
}

/// Regions at least this long are sent with `sendfile` (no copy through memory); shorter ones
/// are read and written together with the bytes around them in one vectored write, which
/// costs fewer system calls.
const SENDFILE_MIN_BYTES: u32 = 64 * 1024;

/// Most bytes handed to one `sendfile`; the connection's task lets the runtime thread serve
/// others between calls. On loopback a call also runs the reader's receive path (the softirq
/// that delivers the segments runs in the sending thread: 28% of the broker's samples inside
/// `sendfile` in a profile at 700k msg/s), and one of 650 KB was seen to hold a runtime
/// thread for 31 ms while produce requests waited unread (2026-11-26; fixed in 6212207, whose
/// effect ARCHITECTURE.md gives with the fetch path's invariant).
const SENDFILE_CHUNK_BYTES: usize = 128 * 1024;

/// Largest number of buffers handed to one vectored write (Linux's IOV_MAX is 1024).
const MAX_IOVECS: usize = 1024;

/// Over TLS a region cannot go out with `sendfile`: it is read, encrypted and written. One at
/// least SENDFILE_MIN_BYTES long goes through one buffer of this size, reused for each of its
/// chunks and the response's other large regions, instead of each region being read whole
/// into fresh memory before the response is written: that held up to a whole response
/// (`fetch.max.bytes`, 50 MiB by default) in memory per connection, and the new pages' faults
/// and zeroing took 15% of the broker's CPU under kafka-consumer-perf-test over TLS
/// (bda7375, 2026-11-30). 64 KiB is what rustls encrypts before writing to the socket
/// (its default buffer limit) and below glibc's threshold for a fresh mapping.
const TLS_CHUNK_BYTES: usize = 64 * 1024;

/// Write a frame given in parts, with each region's bytes taken from its file.
async fn write_parts(
    writer: &mut Writer,
    parts: Vec<FramePart>,
    regions: &[(usize, FileSlice)],
) -> io::Result<()> {
    let mut pending: Vec<Bytes> = Vec::with_capacity(parts.len());
    let mut chunk: Vec<u8> = Vec::new();
    for part in parts {
        match part {
            FramePart::Inline(b) => pending.push(b),
            FramePart::Region(i) => {
                let Some((_, region)) = regions.get(i) else {
                    return Err(io::Error::other(
                        "fetch response refers to a missing region",
                    ));
                };
                if region.len < SENDFILE_MIN_BYTES {
                    let bytes = region.read_bytes().inspect_err(|e| {
                        tracing::error!("reading a fetched region from its segment failed: {e}")
                    })?;
                    pending.push(bytes);
                } else {
                    write_all_vectored(writer, &mut pending).await?;
                    match writer {
                        Writer::Tcp(tcp) => send_region(tcp, region).await?,
                        Writer::Tls(_) => write_region(writer, region, &mut chunk).await?,
                    }
                }
            }
        }
    }
    write_all_vectored(writer, &mut pending).await
}

/// Write one region read from its file in chunks of TLS_CHUNK_BYTES through `chunk` (TLS:
/// the bytes must pass through memory to be encrypted).
async fn write_region(
    writer: &mut Writer,
    region: &FileSlice,
    chunk: &mut Vec<u8>,
) -> io::Result<()> {
    chunk.resize(TLS_CHUNK_BYTES, 0);
    let mut from: u32 = 0;
    while from < region.len {
        let n = ((region.len - from) as usize).min(TLS_CHUNK_BYTES);
        region.read_into(from, &mut chunk[..n]).inspect_err(|e| {
            tracing::error!("reading a fetched region from its segment failed: {e}")
        })?;
        writer.write_all(&chunk[..n]).await?;
        from += n as u32;
    }
    Ok(())
}

/// Write every buffer, in as few system calls as the socket allows; empties `bufs`.
async fn write_all_vectored(writer: &mut Writer, bufs: &mut Vec<Bytes>) -> io::Result<()> {
    let mut slices: Vec<io::IoSlice<'_>> = bufs
        .iter()
        .filter(|b| !b.is_empty())
        .map(|b| io::IoSlice::new(b))
        .collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        let n = rest.len().min(MAX_IOVECS);
        let written = writer.write_vectored(&rest[..n]).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        io::IoSlice::advance_slices(&mut rest, written);
    }
    drop(slices);
    bufs.clear();
    Ok(())
}

/// `sendfile` one region from its segment file to the socket.
async fn send_region(
    writer: &tokio::net::tcp::OwnedWriteHalf,
    region: &FileSlice,
) -> io::Result<()> {
    let stream: &TcpStream = writer.as_ref();
    let mut offset = region.position;
    let end = region.position + region.len as u64;
    while offset < end {
        stream.writable().await?;
        let want = ((end - offset) as usize).min(SENDFILE_CHUNK_BYTES);
        let sent = stream.try_io(tokio::io::Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, &*region.file, Some(&mut offset), want)
                .map_err(io::Error::from)
        });
        match sent {
            // The file ended before the region did: the frame cannot be completed.
            Ok(0) => {
                tracing::error!(offset, end, "segment file ended inside a fetched region");
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment file ended inside a fetched region",
                ));
            }
            Ok(_) => {
                if offset < end {
                    tokio::task::yield_now().await;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod per_ip_tests {
    use super::*;

    /// On a dual-stack listener (`PLAINTEXT://[::]:9092`) an IPv4 client's address is accepted
    /// as `::ffff:a.b.c.d`: it is counted, and its override applied, under `a.b.c.d`, as Java
    /// hands Kafka the IPv4 address (adversary finding on 3a5d161).
    #[test]
    fn an_ipv4_mapped_peer_gets_its_addresses_override() {
        let v4: IpAddr = "10.1.2.3".parse().expect("ip");
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().expect("ip");
        let per_ip = Arc::new(PerIp {
            default_max: 0,
            overrides: HashMap::from([(v4, 5)]),
            counts: parking_lot::Mutex::new(HashMap::new()),
        });
        assert!(per_ip.admit(v4).is_ok());
        assert!(
            per_ip.admit(mapped).is_ok(),
            "the IPv4 client of a dual-stack listener is refused despite its override"
        );
    }
}

#[cfg(test)]
mod connection_tests {
    use super::*;

    /// A throttled answer mutes the connection until its throttle time has passed, or longer
    /// when a mute running already ends later; an answer without a throttle time changes
    /// nothing (a running mute is not lifted).
    #[test]
    fn a_throttled_answer_mutes_until_the_later_end() {
        let now = tokio::time::Instant::now();
        let ms = |n: u64| Duration::from_millis(n);
        assert_eq!(muted_until_after(None, now, 0), None);
        assert_eq!(muted_until_after(None, now, -1), None);
        assert_eq!(muted_until_after(None, now, 100), Some(now + ms(100)));
        assert_eq!(
            muted_until_after(Some(now + ms(500)), now, 100),
            Some(now + ms(500))
        );
        assert_eq!(
            muted_until_after(Some(now + ms(50)), now, 100),
            Some(now + ms(100))
        );
        assert_eq!(
            muted_until_after(Some(now + ms(50)), now, 0),
            Some(now + ms(50))
        );
    }

    /// A write that fails after reading stopped ends the connection for the reason reading
    /// stopped (its one log line names it); otherwise for the write's error.
    #[test]
    fn a_failed_write_keeps_the_reason_reading_stopped() {
        let e = || io::Error::from(io::ErrorKind::BrokenPipe);
        assert!(matches!(close_after_write_error(None, e()), Close::Io(_)));
        assert!(matches!(
            close_after_write_error(Some(Close::Eof), e()),
            Close::Io(_)
        ));
        assert!(matches!(
            close_after_write_error(Some(Close::Shutdown), e()),
            Close::Shutdown
        ));
        assert!(matches!(
            close_after_write_error(Some(Close::Idle), e()),
            Close::Idle
        ));
        assert!(matches!(
            close_after_write_error(Some(Close::AuthFailed("bad".into())), e()),
            Close::AuthFailed(reason) if reason == "bad"
        ));
    }

    /// A SaslHandshake v0 token goes out as a bare frame: its length, big-endian, then the
    /// token.
    #[test]
    fn a_raw_token_is_framed_with_its_length() {
        assert_eq!(&raw_token_frame(b"abc")[..], b"\0\0\0\x03abc");
        assert_eq!(&raw_token_frame(b"")[..], b"\0\0\0\0");
    }
}
