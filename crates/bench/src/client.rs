//! A small pipelined Kafka connection: requests are encoded with the `kafka-protocol` crate and
//! written in order; a reader task matches responses (which Kafka sends in request order) to
//! their callers by correlation id. Many requests may be in flight at once; the caller bounds
//! how many.

use std::collections::VecDeque;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::io::IoSlice;

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ProduceRequest, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use parking_lot::Mutex;
use sluice_wire::{encode_produce_request, FramePart};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Largest response frame accepted (a fetch answers at most fetch.max.bytes plus framing).
pub const MAX_RESPONSE_BYTES: usize = 256 << 20;

const CLIENT_ID: &str = "sluice-bench";

/// API versions this client can speak: (api, min, max). Produce and Fetch stop below the
/// versions that address topics by id only, so topic names work everywhere.
const OUR_VERSIONS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::ListOffsets, 1, 9),
];

/// The versions chosen for one broker (highest both sides speak).
#[derive(Clone, Copy, Debug)]
pub struct Versions {
    pub produce: i16,
    pub fetch: i16,
    pub metadata: i16,
    pub create_topics: i16,
    pub delete_topics: i16,
    pub list_offsets: i16,
}

/// Requests waiting for their responses, in send order; `None` once the connection is lost.
type Pending = Option<VecDeque<(i32, oneshot::Sender<Result<Bytes>>)>>;

/// One TCP connection to a broker.
#[derive(Debug)]
pub struct Connection {
    addr: String,
    writer: tokio::sync::Mutex<Writer>,
    pending: Arc<Mutex<Pending>>,
    pub versions: Versions,
}

#[derive(Debug)]
struct Writer {
    half: OwnedWriteHalf,
    next_correlation_id: i32,
    buf: BytesMut,
}

impl Writer {
    fn take_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1).max(1);
        id
    }
}

fn request_header(key: ApiKey, version: i16, correlation_id: i32) -> RequestHeader {
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)))
}

/// Largest number of buffers handed to one vectored write (Linux's IOV_MAX is 1024).
const MAX_IOVECS: usize = 1024;

impl Connection {
    /// Connect and negotiate API versions.
    pub async fn connect(addr: &str) -> Result<Arc<Connection>> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("cannot connect to {addr}"))?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        let pending: Arc<Mutex<Pending>> = Arc::new(Mutex::new(Some(VecDeque::new())));
        tokio::spawn(read_loop(read, pending.clone()));
        let mut conn = Connection {
            addr: addr.to_string(),
            writer: tokio::sync::Mutex::new(Writer {
                half: write,
                next_correlation_id: 1,
                buf: BytesMut::with_capacity(1 << 20),
            }),
            pending,
            versions: Versions {
                produce: 3,
                fetch: 4,
                metadata: 1,
                create_topics: 2,
                delete_topics: 1,
                list_offsets: 1,
            },
        };
        let resp: ApiVersionsResponse = conn
            .call(
                ApiKey::ApiVersions,
                3,
                &ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str(CLIENT_ID))
                    .with_client_software_version(StrBytes::from_static_str(env!(
                        "CARGO_PKG_VERSION"
                    ))),
            )
            .await
            .with_context(|| format!("ApiVersions to {addr}"))?;
        if resp.error_code != 0 {
            bail!(
                "{addr}: ApiVersions failed with error code {}",
                resp.error_code
            );
        }
        let pick = |key: ApiKey| -> Result<i16> {
            let &(_, ours_min, ours_max) = OUR_VERSIONS
                .iter()
                .find(|(k, _, _)| *k == key)
                .ok_or_else(|| anyhow!("no version table entry for {key:?}"))?;
            let theirs = resp
                .api_keys
                .iter()
                .find(|a| a.api_key == key as i16)
                .ok_or_else(|| anyhow!("{addr} does not support {key:?}"))?;
            let v = ours_max.min(theirs.max_version);
            if v < ours_min.max(theirs.min_version) {
                bail!(
                    "{addr} supports {key:?} v{}..=v{}, this client v{ours_min}..=v{ours_max}",
                    theirs.min_version,
                    theirs.max_version
                );
            }
            Ok(v)
        };
        conn.versions = Versions {
            produce: pick(ApiKey::Produce)?,
            fetch: pick(ApiKey::Fetch)?,
            metadata: pick(ApiKey::Metadata)?,
            create_topics: pick(ApiKey::CreateTopics)?,
            delete_topics: pick(ApiKey::DeleteTopics)?,
            list_offsets: pick(ApiKey::ListOffsets)?,
        };
        Ok(Arc::new(conn))
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Write a request; with `expect_response` return the receiver of its response body
    /// (header stripped). Requests leave in call order.
    pub async fn send<R: Encodable>(
        &self,
        key: ApiKey,
        version: i16,
        body: &R,
        expect_response: bool,
    ) -> Result<Option<oneshot::Receiver<Result<Bytes>>>> {
        let mut w = self.writer.lock().await;
        let correlation_id = w.take_correlation_id();
        let header = request_header(key, version, correlation_id);
        let header_version = key.request_header_version(version);
        let size = header.compute_size(header_version)? + body.compute_size(version)?;
        let mut buf = std::mem::take(&mut w.buf);
        buf.clear();
        buf.reserve(4 + size);
        buf.put_u32(u32::try_from(size).context("request too large")?);
        header.encode(&mut buf, header_version)?;
        body.encode(&mut buf, version)?;
        let rx = self.expect(correlation_id, expect_response)?;
        let res = w.half.write_all(&buf).await;
        w.buf = buf;
        res.with_context(|| format!("writing to {}", self.addr))?;
        Ok(rx)
    }

    /// Like [`Connection::send`] for a Produce request whose partitions carry
    /// [`sluice_wire::region_marker`]`(i)` as records: the `i`th of `batches` is written in
    /// its place straight from its buffer (one vectored write, no copy into the request).
    pub async fn send_produce(
        &self,
        version: i16,
        body: &ProduceRequest,
        batches: &[Bytes],
        expect_response: bool,
    ) -> Result<Option<oneshot::Receiver<Result<Bytes>>>> {
        let lens = batches
            .iter()
            .map(|b| u32::try_from(b.len()))
            .collect::<Result<Vec<u32>, _>>()
            .context("record batch too large")?;
        let mut w = self.writer.lock().await;
        let correlation_id = w.take_correlation_id();
        let header = request_header(ApiKey::Produce, version, correlation_id);
        let parts = encode_produce_request(&header, version, body, &lens)
            .map_err(|e| anyhow!("encoding a produce request: {e}"))?;
        let rx = self.expect(correlation_id, expect_response)?;
        let mut slices: Vec<IoSlice<'_>> = parts
            .iter()
            .map(|p| match p {
                FramePart::Inline(b) => Ok(IoSlice::new(b)),
                FramePart::Region(i) => batches
                    .get(*i)
                    .map(|b| IoSlice::new(b))
                    .ok_or_else(|| anyhow!("produce request refers to a missing batch")),
            })
            .collect::<Result<_>>()?;
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            let n = rest.len().min(MAX_IOVECS);
            let written = w
                .half
                .write_vectored(&rest[..n])
                .await
                .with_context(|| format!("writing to {}", self.addr))?;
            if written == 0 {
                bail!("writing to {}: connection closed", self.addr);
            }
            IoSlice::advance_slices(&mut rest, written);
        }
        Ok(rx)
    }

    /// Register a request's place in the response order.
    fn expect(
        &self,
        correlation_id: i32,
        expect_response: bool,
    ) -> Result<Option<oneshot::Receiver<Result<Bytes>>>> {
        if !expect_response {
            return Ok(None);
        }
        let (tx, rx) = oneshot::channel();
        match self.pending.lock().as_mut() {
            Some(p) => p.push_back((correlation_id, tx)),
            None => bail!("connection to {} is closed", self.addr),
        }
        Ok(Some(rx))
    }

    /// Send a request and wait for its decoded response.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        key: ApiKey,
        version: i16,
        body: &Req,
    ) -> Result<Resp> {
        let rx = self
            .send(key, version, body, true)
            .await?
            .ok_or_else(|| anyhow!("no response receiver"))?;
        let frame = rx
            .await
            .map_err(|_| anyhow!("connection to {} closed", self.addr))??;
        decode_response(key, version, frame)
    }
}

/// Decode a response frame (correlation id already checked) for `key` at `version`.
pub fn decode_response<Resp: Decodable>(
    key: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<Resp> {
    ResponseHeader::decode(&mut frame, key.response_header_version(version))
        .with_context(|| format!("{key:?} v{version} response header"))?;
    Resp::decode(&mut frame, version).with_context(|| format!("{key:?} v{version} response"))
}

/// Socket reads ask for at least this much room, so small responses arrive together.
const READ_CHUNK: usize = 64 * 1024;

async fn read_loop(mut read: tokio::net::tcp::OwnedReadHalf, pending: Arc<Mutex<Pending>>) {
    // One buffer for every response: frames are cut from it, and once a response has been
    // dropped its memory is used again (a fresh, zeroed buffer per response cost page faults
    // and a memset per fetched MiB).
    let mut inbuf = BytesMut::with_capacity(READ_CHUNK);
    let err = loop {
        if let Err(e) = fill(&mut read, &mut inbuf, 4).await {
            break e;
        }
        let len = (&inbuf[..4]).get_u32() as usize;
        if !(4..=MAX_RESPONSE_BYTES).contains(&len) {
            break anyhow!("response frame of {len} bytes (limit {MAX_RESPONSE_BYTES})");
        }
        if let Err(e) = fill(&mut read, &mut inbuf, 4 + len).await {
            break e;
        }
        let mut frame = inbuf.split_to(4 + len);
        frame.advance(4);
        let frame = frame.freeze();
        let correlation_id = (&frame[..4]).get_i32();
        let Some((expected, tx)) = pending.lock().as_mut().and_then(VecDeque::pop_front) else {
            break anyhow!("response {correlation_id} with no request waiting");
        };
        if expected != correlation_id {
            let _ = tx.send(Err(anyhow!(
                "correlation id {correlation_id}, expected {expected}"
            )));
            break anyhow!("correlation id mismatch");
        }
        let _ = tx.send(Ok(frame));
    };
    let waiting = pending.lock().take().unwrap_or_default();
    for (_, tx) in waiting {
        let _ = tx.send(Err(anyhow!("connection lost: {err}")));
    }
}

/// Read until `buf` holds at least `want` bytes.
async fn fill(
    read: &mut tokio::net::tcp::OwnedReadHalf,
    buf: &mut BytesMut,
    want: usize,
) -> Result<()> {
    while buf.len() < want {
        buf.reserve((want - buf.len()).max(READ_CHUNK));
        if read.read_buf(buf).await? == 0 {
            bail!("connection closed by the broker");
        }
    }
    Ok(())
}
