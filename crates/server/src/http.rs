//! The operations listener (`sluice.metrics.listener`): a minimal HTTP/1.1 server with three
//! resources, `GET /metrics` (Prometheus text format), `GET /healthz` (the process answers)
//! and `GET /readyz` (the broker serves: 200, or 503 with the reason).
//!
//! One request per connection (the answer says `Connection: close`), as Prometheus and
//! service managers need no more. Limits: [`HTTP_MAX_CONNECTIONS`] at once (more are closed
//! at once), a request head of at most [`HTTP_MAX_HEAD_BYTES`] read within
//! [`HTTP_READ_TIMEOUT`]; a request body is never read. Bad input gets a status and a one-line
//! reason: 400 (not an HTTP request line), 405 (a method other than GET or HEAD), 404 (another
//! path), 431 (head too large), 505 (not HTTP/1.x).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use sluice_broker::Broker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

/// Connections served at once; more are closed without an answer.
pub const HTTP_MAX_CONNECTIONS: usize = 16;
/// Largest request head (request line and headers) read.
pub const HTTP_MAX_HEAD_BYTES: usize = 8 * 1024;
/// Time to send the request head.
pub const HTTP_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Metrics,
    Healthz,
    Readyz,
}

/// A request's method and route, or the status that refuses it with its reason.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) head_only: bool,
    pub(crate) route: Route,
}

/// Parse a complete request head.
pub(crate) fn parse_head(head: &[u8]) -> Result<Parsed, (u16, &'static str)> {
    let text = std::str::from_utf8(head).map_err(|_| (400, "the request is not text"))?;
    let line = text.lines().next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err((400, "the request line is not METHOD TARGET HTTP/1.1"));
    };
    if !version.starts_with("HTTP/") {
        return Err((400, "the request line is not METHOD TARGET HTTP/1.1"));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err((505, "only HTTP/1.0 and HTTP/1.1 are served"));
    }
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Err((405, "only GET and HEAD are served")),
    };
    let path = target.split(['?', '#']).next().unwrap_or("");
    let route = match path {
        "/metrics" => Route::Metrics,
        "/healthz" => Route::Healthz,
        "/readyz" => Route::Readyz,
        _ => {
            return Err((
                404,
                "not found: the resources are /metrics, /healthz and /readyz",
            ))
        }
    };
    Ok(Parsed { head_only, route })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    }
}

/// Serve the operations listener until `shutdown` turns true.
pub async fn serve_http(
    broker: Arc<Broker>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(HTTP_MAX_CONNECTIONS));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        if let Some(more) = crate::ACCEPT_FAILURE_LOG.admit() {
                            tracing::warn!("metrics listener: accept failed: {e}{more}");
                        }
                        tokio::time::sleep(crate::ACCEPT_BACKOFF).await;
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    tracing::debug!(%peer, "metrics listener: too many connections; closed");
                    continue;
                };
                let broker = broker.clone();
                tokio::spawn(async move {
                    if let Err(e) = exchange(&broker, stream).await {
                        tracing::debug!(%peer, "metrics listener: {e}");
                    }
                    drop(permit);
                });
            }
            _ = shutdown.changed() => break,
        }
    }
}

/// Read one request head, answer it, close.
async fn exchange(broker: &Arc<Broker>, mut stream: TcpStream) -> io::Result<()> {
    let head = match tokio::time::timeout(HTTP_READ_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) => {
            return answer(
                &mut stream,
                431,
                "the request head is too large\n",
                "text/plain",
                false,
            )
            .await
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            return answer(
                &mut stream,
                408,
                "the request took too long\n",
                "text/plain",
                false,
            )
            .await
        }
    };
    let parsed = match parse_head(&head) {
        Ok(p) => p,
        Err((status, why)) => {
            return answer(
                &mut stream,
                status,
                &format!("{why}\n"),
                "text/plain",
                false,
            )
            .await
        }
    };
    let (status, body, content_type) = match parsed.route {
        Route::Healthz => (200, "ok\n".to_string(), "text/plain"),
        Route::Readyz => match broker.readiness() {
            Ok(()) => (200, "ready\n".to_string(), "text/plain"),
            Err(why) => (503, format!("not ready: {why}\n"), "text/plain"),
        },
        Route::Metrics => {
            let b = broker.clone();
            match tokio::task::spawn_blocking(move || b.render_metrics()).await {
                Ok(page) => (200, page, sluice_metrics::exposition::CONTENT_TYPE),
                Err(e) => (
                    500,
                    format!("rendering the metrics failed: {e}\n"),
                    "text/plain",
                ),
            }
        }
    };
    answer(&mut stream, status, &body, content_type, parsed.head_only).await
}

/// Read until the end of the request head; None if it exceeds [`HTTP_MAX_HEAD_BYTES`].
async fn read_head(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&buf) {
            buf.truncate(end);
            return Ok(Some(buf));
        }
        if buf.len() > HTTP_MAX_HEAD_BYTES {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed inside the request head",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Where the head ends (after its blank line), if it has.
fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4);
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

async fn answer(
    stream: &mut TcpStream,
    status: u16,
    body: &str,
    content_type: &str,
    head_only: bool,
) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n{}\r\n",
        reason(status),
        body.len(),
        if status == 405 { "Allow: GET, HEAD\r\n" } else { "" },
    );
    stream.write_all(head.as_bytes()).await?;
    if !head_only {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn routes_and_refusals() {
        let ok = |h: &str| parse_head(h.as_bytes());
        assert_eq!(
            ok("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(Parsed {
                head_only: false,
                route: Route::Metrics
            })
        );
        assert_eq!(
            ok("HEAD /readyz?x=1 HTTP/1.0\r\n\r\n").map(|p| (p.head_only, p.route)),
            Ok((true, Route::Readyz))
        );
        assert_eq!(
            ok("GET /healthz HTTP/1.1\n\n").map(|p| p.route),
            Ok(Route::Healthz)
        );
        assert_eq!(ok("POST /metrics HTTP/1.1\r\n\r\n").unwrap_err().0, 405);
        assert_eq!(ok("GET /other HTTP/1.1\r\n\r\n").unwrap_err().0, 404);
        assert_eq!(ok("GET /metrics HTTP/2.0\r\n\r\n").unwrap_err().0, 505);
        assert_eq!(ok("hello\r\n\r\n").unwrap_err().0, 400);
        assert_eq!(ok("GET  /metrics HTTP/1.1\r\n\r\n").unwrap_err().0, 400);
        assert_eq!(parse_head(&[0xff, 0xfe]).unwrap_err().0, 400);
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n"), None);
    }
}
