//! The server: the listener, one task pair per connection, limits and graceful shutdown.
//!
//! Architecture invariant: this is the only crate that touches sockets.
//!
//! Each connection has a reader and a writer. The reader reads one size-prefixed frame at a
//! time (never more than `socket.request.max.bytes`), decodes it, and calls
//! [`Broker::handle`], which does the ordered part of the work at once (so appends happen in
//! request order) and returns a future for the rest. The reader queues that future; the
//! writer awaits the queued futures one by one and writes their responses, so responses go out
//! in request order while up to [`Limits::max_in_flight`] requests are pipelined.
//!
//! A frame that cannot be a request (bad size, unknown API key, unsupported version,
//! malformed body) gets one log line and the connection is closed, as Kafka does; the only
//! exception is an ApiVersions request newer than ours, which gets Kafka's fallback answer.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use sluice_broker::{Broker, Reply};
use sluice_wire::{decode_request, encode_response, WireError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};

/// Every limit the server enforces.
#[derive(Clone, Debug)]
pub struct Limits {
    /// `socket.request.max.bytes`: largest frame accepted.
    pub max_request_bytes: u32,
    /// `max.connections`: connections beyond this are closed at once.
    pub max_connections: u32,
    /// `connections.max.idle.ms`: a connection with no complete request for this long is closed.
    pub idle_timeout: Duration,
    /// Requests read ahead of their responses on one connection.
    pub max_in_flight: usize,
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
}

/// Serve connections from `listener` until `shutdown` turns true, then wait for open
/// connections to finish their current requests.
pub async fn serve(
    broker: Arc<Broker>,
    listener: TcpListener,
    limits: Limits,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(
        limits.max_connections.min(Semaphore::MAX_PERMITS as u32) as usize,
    ));
    // Every connection task holds a clone; when all are dropped, `all_done` yields None.
    let (done_tx, mut all_done) = mpsc::channel::<()>(1);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Typically EMFILE: back off instead of spinning.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    tracing::warn!(%peer, max = limits.max_connections, "connection refused: max.connections reached");
                    drop(stream);
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let broker = broker.clone();
                let limits = limits.clone();
                let shutdown = shutdown.clone();
                let done = done_tx.clone();
                tokio::spawn(async move {
                    let close = connection(broker, stream, peer.ip(), &limits, shutdown).await;
                    match close {
                        Close::Eof | Close::Shutdown => tracing::debug!(%peer, "connection closed: {close:?}"),
                        Close::Idle => tracing::info!(%peer, "connection closed: idle for longer than connections.max.idle.ms"),
                        Close::Oversized(size) => tracing::warn!(%peer, size, max = limits.max_request_bytes, "connection closed: request size exceeds socket.request.max.bytes or is negative"),
                        Close::Wire(e) => tracing::warn!(%peer, "connection closed: {e}"),
                        Close::Io(e) => tracing::debug!(%peer, "connection closed: {e}"),
                    }
                    drop(permit);
                    drop(done);
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(done_tx);
    let _ = tokio::time::timeout(Duration::from_secs(10), all_done.recv()).await;
}

struct InFlight {
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    reply: Reply,
}

enum Queued {
    Pending(InFlight),
    /// A prepared frame (the ApiVersions fallback).
    Raw(BytesMut),
}

async fn connection(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: IpAddr,
    limits: &Limits,
    shutdown: watch::Receiver<bool>,
) -> Close {
    let (reader, writer) = stream.into_split();
    let (tx, rx) = mpsc::channel(limits.max_in_flight.max(1));
    let writer_task = tokio::spawn(write_responses(writer, rx));
    let close = read_requests(&broker, reader, peer, limits, tx, shutdown).await;
    // The reader dropped its sender: the writer drains what is queued, then ends.
    match writer_task.await {
        Ok(Err(e)) if matches!(close, Close::Eof) => Close::Io(e),
        _ => close,
    }
}

async fn read_requests(
    broker: &Arc<Broker>,
    mut reader: OwnedReadHalf,
    peer: IpAddr,
    limits: &Limits,
    tx: mpsc::Sender<Queued>,
    mut shutdown: watch::Receiver<bool>,
) -> Close {
    loop {
        let mut size = [0u8; 4];
        let read = tokio::select! {
            r = tokio::time::timeout(limits.idle_timeout, read_frame(&mut reader, &mut size, limits.max_request_bytes)) => r,
            _ = shutdown.changed() => return Close::Shutdown,
        };
        let frame = match read {
            Err(_) => return Close::Idle,
            Ok(Err(close)) => return close,
            Ok(Ok(frame)) => frame,
        };
        let queued = match decode_request(frame) {
            Ok(request) => {
                let api_key = request.api_key;
                let version = request.version();
                let correlation_id = request.correlation_id();
                let reply = broker.handle(request, peer);
                Queued::Pending(InFlight {
                    api_key,
                    version,
                    correlation_id,
                    reply,
                })
            }
            Err(WireError::UnsupportedApiVersions { correlation_id, .. }) => {
                match sluice_wire::unsupported_api_versions_response(correlation_id) {
                    Ok(frame) => Queued::Raw(frame),
                    Err(e) => return Close::Wire(e),
                }
            }
            Err(e) => return Close::Wire(e),
        };
        if tx.send(queued).await.is_err() {
            // The writer failed (peer gone); it reports the error.
            return Close::Eof;
        }
    }
}

/// Read one frame. The caller bounds the whole read with the idle timeout, so a client that
/// trickles bytes cannot hold the connection open past it.
async fn read_frame(
    reader: &mut OwnedReadHalf,
    size: &mut [u8; 4],
    max: u32,
) -> Result<Bytes, Close> {
    match reader.read_exact(size).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(Close::Eof),
        Err(e) => return Err(Close::Io(e)),
    }
    let len = i32::from_be_bytes(*size);
    if len < 0 || len as u32 > max {
        return Err(Close::Oversized(len));
    }
    let mut buf = BytesMut::zeroed(len as usize);
    reader.read_exact(&mut buf).await.map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            Close::Wire(WireError::Truncated { len: len as usize })
        } else {
            Close::Io(e)
        }
    })?;
    Ok(buf.freeze())
}

async fn write_responses(
    mut writer: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Queued>,
) -> io::Result<()> {
    while let Some(item) = rx.recv().await {
        let frame = match item {
            Queued::Raw(frame) => frame,
            Queued::Pending(f) => {
                let Some(body) = f.reply.await else { continue };
                match encode_response(f.api_key, f.version, f.correlation_id, &body) {
                    Ok(frame) => frame,
                    Err(e) => {
                        tracing::error!("cannot encode response: {e}");
                        return Err(io::Error::other(e.to_string()));
                    }
                }
            }
        };
        writer.write_all(&frame).await?;
    }
    writer.shutdown().await
}
