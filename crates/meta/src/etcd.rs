//! A small etcd v3 client over etcd's JSON gateway (`POST /v3/kv/range`, `/v3/kv/txn`,
//! `/v3/lease/grant`, ...), blocking, one HTTP/1.1 request per connection.
//!
//! Why not the `etcd-client` crate: it generates its gRPC code at build time with `protoc`,
//! which a fresh machine does not have, and brings tonic, prost, hyper and tower (dozens of
//! crates) into a build that every CI run pays for. The JSON gateway is etcd's documented
//! HTTP API (etcd 3.4 and later serve it on the client port), and the few calls the
//! coordination layer makes fit in this file. Keys and values travel base64-encoded; 64-bit
//! integers arrive as JSON strings.
//!
//! Every call has a time limit (`timeout`); a member that does not answer is skipped for the
//! next one in the list. Linearizable reads are etcd's default for `range`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::{json, Value};

/// Largest etcd answer read (a range over every record of a large cluster fits easily).
const RESPONSE_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    #[error("no etcd endpoint answered ({endpoints}): {last}")]
    Unreachable { endpoints: String, last: String },
    #[error("etcd answered {path} with HTTP {status}: {body}")]
    Status {
        path: String,
        status: u16,
        body: String,
    },
    #[error("etcd answered {path} with something that is not the expected JSON: {reason}")]
    Malformed { path: String, reason: String },
}

/// One key-value pair as etcd returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kv {
    pub key: String,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub lease: i64,
}

/// A comparison of a transaction (`Txn`), on one key or one prefix.
#[derive(Clone, Debug)]
pub enum Compare {
    /// The key's mod revision equals this (0: the key does not exist).
    ModRevision(String, i64),
    /// The key's create revision equals this (0: the key does not exist).
    CreateRevision(String, i64),
    /// The key's value equals this.
    Value(String, Vec<u8>),
    /// Every key under this prefix was last changed before this revision (true when none is
    /// there).
    PrefixModBelow(String, i64),
}

/// One operation of a transaction branch.
#[derive(Clone, Debug)]
pub enum Op {
    Put {
        key: String,
        value: Vec<u8>,
        lease: i64,
    },
    Delete {
        key: String,
    },
    /// Delete every key under this prefix.
    DeletePrefix {
        prefix: String,
    },
}

/// The etcd client: endpoints tried in turn, each request under `timeout`.
#[derive(Clone, Debug)]
pub struct Etcd {
    endpoints: Vec<String>,
    timeout: Duration,
}

fn b64(s: &[u8]) -> String {
    B64.encode(s)
}

/// The key just past every key that starts with `prefix` (etcd's `range_end` for a prefix).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn int_field(v: &Value, name: &str) -> i64 {
    match v.get(name) {
        Some(Value::String(s)) => s.parse().unwrap_or(0),
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

impl Etcd {
    pub fn new(endpoints: Vec<String>, timeout: Duration) -> Etcd {
        Etcd { endpoints, timeout }
    }

    fn malformed(path: &str, reason: impl Into<String>) -> EtcdError {
        EtcdError::Malformed {
            path: path.to_string(),
            reason: reason.into(),
        }
    }

    /// POST `body` to `path` on the first endpoint that answers.
    fn call(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let payload = body.to_string();
        let mut last = String::from("no endpoints configured");
        for endpoint in &self.endpoints {
            match self.post(endpoint, path, &payload) {
                Ok((200, text)) => {
                    // Streaming endpoints (lease keep-alive) wrap the answer in "result".
                    let v: Value = serde_json::from_slice(&text)
                        .map_err(|e| Etcd::malformed(path, e.to_string()))?;
                    return Ok(v);
                }
                Ok((status, text)) => {
                    return Err(EtcdError::Status {
                        path: path.to_string(),
                        status,
                        body: String::from_utf8_lossy(&text).chars().take(500).collect(),
                    })
                }
                Err(e) => last = format!("{endpoint}: {e}"),
            }
        }
        Err(EtcdError::Unreachable {
            endpoints: self.endpoints.join(","),
            last,
        })
    }

    fn post(&self, endpoint: &str, path: &str, payload: &str) -> io::Result<(u16, Vec<u8>)> {
        let stream = self.send(endpoint, path, payload)?;
        let mut r = BufReader::new(&stream);
        read_response(&mut r)
    }

    /// Connect to `endpoint` and send one POST; the answer is left to read.
    fn send(&self, endpoint: &str, path: &str, payload: &str) -> io::Result<TcpStream> {
        let addr = endpoint
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
        let stream = TcpStream::connect_timeout(&addr, self.timeout)?;
        stream.set_read_timeout(Some(self.timeout))?;
        stream.set_write_timeout(Some(self.timeout))?;
        stream.set_nodelay(true)?;
        let mut w = &stream;
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
            payload.len()
        );
        w.write_all(request.as_bytes())?;
        Ok(stream)
    }

    /// Watch every key under `prefix` (`POST /v3/watch`, a stream): `changed` is called once
    /// the watch is in place (changes made before it are not reported) and then after every
    /// message etcd sends, until the stream ends: etcd closed it, or `cancel` was used
    /// ([`WatchCancel::cancel`] shuts the connection down). Blocks until then; Ok means the
    /// stream ended, Err that it could not be opened or broke.
    pub fn watch_prefix(
        &self,
        prefix: &str,
        cancel: &WatchCancel,
        mut changed: impl FnMut(),
    ) -> Result<(), EtcdError> {
        let path = "/v3/watch";
        let payload = json!({"create_request": {
            "key": b64(prefix.as_bytes()), "range_end": b64(&prefix_end(prefix))}})
        .to_string();
        let mut last = String::from("no endpoints configured");
        for endpoint in &self.endpoints {
            let stream = match self.send(endpoint, path, &payload) {
                Ok(s) => s,
                Err(e) => {
                    last = format!("{endpoint}: {e}");
                    continue;
                }
            };
            let broke = |e: io::Error| EtcdError::Unreachable {
                endpoints: endpoint.clone(),
                last: format!("the watch stream broke: {e}"),
            };
            let mut r = BufReader::new(&stream);
            let head = read_head(&mut r).map_err(broke)?;
            if head.status != 200 || !head.chunked {
                return Err(Etcd::malformed(
                    path,
                    format!("HTTP {} (chunked: {})", head.status, head.chunked),
                ));
            }
            // Messages arrive whenever something changes: no read limit from here on.
            stream.set_read_timeout(None).map_err(broke)?;
            if !cancel.arm(&stream) {
                return Ok(());
            }
            let outcome = loop {
                match read_chunk(&mut r) {
                    Ok(Some(_)) => changed(),
                    Ok(None) => break Ok(()),
                    Err(_) if cancel.cancelled() => break Ok(()),
                    Err(e) => break Err(broke(e)),
                }
            };
            cancel.disarm();
            return outcome;
        }
        Err(EtcdError::Unreachable {
            endpoints: self.endpoints.join(","),
            last,
        })
    }

    /// Every key under `prefix`, in key order (a linearizable read), and the store's revision.
    pub fn range_prefix(&self, prefix: &str) -> Result<(Vec<Kv>, i64), EtcdError> {
        let path = "/v3/kv/range";
        let v = self.call(
            path,
            &json!({"key": b64(prefix.as_bytes()), "range_end": b64(&prefix_end(prefix))}),
        )?;
        let revision = v.get("header").map_or(0, |h| int_field(h, "revision"));
        Ok((parse_kvs(path, &v)?, revision))
    }

    /// One key (a linearizable read).
    pub fn get(&self, key: &str) -> Result<Option<Kv>, EtcdError> {
        let path = "/v3/kv/range";
        let v = self.call(path, &json!({"key": b64(key.as_bytes())}))?;
        Ok(parse_kvs(path, &v)?.into_iter().next())
    }

    /// Run `success` if every comparison holds, else `failure`; true when they held.
    pub fn txn(
        &self,
        compare: &[Compare],
        success: &[Op],
        failure: &[Op],
    ) -> Result<bool, EtcdError> {
        Ok(self.txn_at(compare, success, failure)?.is_some())
    }

    /// As [`Etcd::txn`], returning the store's revision after the transaction when the
    /// comparisons held (the mod revision of every key `success` wrote).
    pub fn txn_at(
        &self,
        compare: &[Compare],
        success: &[Op],
        failure: &[Op],
    ) -> Result<Option<i64>, EtcdError> {
        let cmp: Vec<Value> = compare
            .iter()
            .map(|c| match c {
                Compare::ModRevision(k, r) => json!({"key": b64(k.as_bytes()), "target": "MOD", "result": "EQUAL", "mod_revision": r.to_string()}),
                Compare::CreateRevision(k, r) => json!({"key": b64(k.as_bytes()), "target": "CREATE", "result": "EQUAL", "create_revision": r.to_string()}),
                Compare::Value(k, v) => json!({"key": b64(k.as_bytes()), "target": "VALUE", "result": "EQUAL", "value": b64(v)}),
                Compare::PrefixModBelow(p, r) => json!({"key": b64(p.as_bytes()), "range_end": b64(&prefix_end(p)), "target": "MOD", "result": "LESS", "mod_revision": r.to_string()}),
            })
            .collect();
        let ops = |ops: &[Op]| -> Vec<Value> {
            ops.iter()
                .map(|o| match o {
                    Op::Put { key, value, lease } => {
                        let mut put = json!({"key": b64(key.as_bytes()), "value": b64(value)});
                        if *lease != 0 {
                            put["lease"] = Value::String(lease.to_string());
                        }
                        json!({"request_put": put})
                    }
                    Op::Delete { key } => {
                        json!({"request_delete_range": {"key": b64(key.as_bytes())}})
                    }
                    Op::DeletePrefix { prefix } => json!({"request_delete_range": {
                        "key": b64(prefix.as_bytes()), "range_end": b64(&prefix_end(prefix))}}),
                })
                .collect()
        };
        let v = self.call(
            "/v3/kv/txn",
            &json!({"compare": cmp, "success": ops(success), "failure": ops(failure)}),
        )?;
        let succeeded = v.get("succeeded").and_then(Value::as_bool).unwrap_or(false);
        let revision = v.get("header").map_or(0, |h| int_field(h, "revision"));
        Ok(succeeded.then_some(revision))
    }

    /// A new lease of `ttl_s` seconds; returns its id.
    pub fn lease_grant(&self, ttl_s: i64) -> Result<i64, EtcdError> {
        let path = "/v3/lease/grant";
        let v = self.call(path, &json!({"TTL": ttl_s.to_string()}))?;
        match int_field(&v, "ID") {
            0 => Err(Etcd::malformed(path, format!("no lease id in {v}"))),
            id => Ok(id),
        }
    }

    /// Renew a lease; returns its remaining TTL in seconds (0 or less: it has expired).
    pub fn lease_keep_alive(&self, id: i64) -> Result<i64, EtcdError> {
        let v = self.call("/v3/lease/keepalive", &json!({"ID": id.to_string()}))?;
        let result = v.get("result").unwrap_or(&v);
        Ok(int_field(result, "TTL"))
    }

    pub fn lease_revoke(&self, id: i64) -> Result<(), EtcdError> {
        self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}))?;
        Ok(())
    }
}

fn parse_kvs(path: &str, v: &Value) -> Result<Vec<Kv>, EtcdError> {
    let Some(kvs) = v.get("kvs") else {
        return Ok(Vec::new());
    };
    let kvs = kvs
        .as_array()
        .ok_or_else(|| Etcd::malformed(path, "kvs is not a list"))?;
    kvs.iter()
        .map(|kv| {
            let decode = |name: &str| -> Result<Vec<u8>, EtcdError> {
                match kv.get(name).and_then(Value::as_str) {
                    Some(s) => B64
                        .decode(s)
                        .map_err(|e| Etcd::malformed(path, format!("{name}: {e}"))),
                    None => Ok(Vec::new()),
                }
            };
            let key = String::from_utf8(decode("key")?)
                .map_err(|_| Etcd::malformed(path, "a key is not UTF-8"))?;
            Ok(Kv {
                key,
                value: decode("value")?,
                create_revision: int_field(kv, "create_revision"),
                mod_revision: int_field(kv, "mod_revision"),
                lease: int_field(kv, "lease"),
            })
        })
        .collect()
}

/// Ends a [`Etcd::watch_prefix`] from another thread.
#[derive(Debug, Default)]
pub struct WatchCancel {
    /// The watch's connection while one is open.
    conn: parking_lot::Mutex<Option<TcpStream>>,
    cancelled: std::sync::atomic::AtomicBool,
}

impl WatchCancel {
    /// Shut the open watch's connection down (its reader returns), and refuse new ones.
    pub fn cancel(&self) {
        let conn = self.conn.lock();
        self.cancelled
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some(s) = &*conn {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn cancelled(&self) -> bool {
        self.cancelled.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Remember the watch's connection; false if cancelled already.
    fn arm(&self, stream: &TcpStream) -> bool {
        let mut conn = self.conn.lock();
        if self.cancelled() {
            return false;
        }
        *conn = stream.try_clone().ok();
        true
    }

    fn disarm(&self) {
        *self.conn.lock() = None;
    }
}

fn bad_data(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// An HTTP/1.1 response's status line and the headers that say how its body is framed.
struct Head {
    status: u16,
    length: Option<usize>,
    chunked: bool,
}

fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad_data("not an HTTP status line"))?;
    let mut head = Head {
        status,
        length: None,
        chunked: false,
    };
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(bad_data("connection closed in the headers"));
        }
        let header = line.trim_end();
        if header.is_empty() {
            return Ok(head);
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                head.length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| bad_data("bad Content-Length"))?,
                );
            } else if name.eq_ignore_ascii_case("transfer-encoding")
                && value.eq_ignore_ascii_case("chunked")
            {
                head.chunked = true;
            }
        }
    }
}

/// One chunk of a chunked body; None at the last (empty) chunk or the end of the connection.
fn read_chunk(r: &mut impl BufRead) -> io::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
        .map_err(|_| bad_data("bad chunk size"))?;
    if size == 0 {
        return Ok(None);
    }
    if size > RESPONSE_BYTES_MAX {
        return Err(bad_data("answer too large"));
    }
    let mut chunk = vec![0; size];
    r.read_exact(&mut chunk)?;
    line.clear();
    r.read_line(&mut line)?;
    Ok(Some(chunk))
}

/// Read an HTTP/1.1 response: status, headers, then a body of `Content-Length` bytes, or
/// chunked, or up to the end of the connection.
fn read_response(r: &mut impl BufRead) -> io::Result<(u16, Vec<u8>)> {
    let head = read_head(r)?;
    let mut body = Vec::new();
    if head.chunked {
        while let Some(chunk) = read_chunk(r)? {
            if body.len() + chunk.len() > RESPONSE_BYTES_MAX {
                return Err(bad_data("answer too large"));
            }
            body.extend_from_slice(&chunk);
            // A streaming endpoint (lease keep-alive) sends one JSON object per message;
            // the first is the answer.
            if serde_json::from_slice::<Value>(&body).is_ok() {
                break;
            }
        }
    } else if let Some(n) = head.length {
        if n > RESPONSE_BYTES_MAX {
            return Err(bad_data("answer too large"));
        }
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.take(RESPONSE_BYTES_MAX as u64).read_to_end(&mut body)?;
    }
    Ok((head.status, body))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_key() {
        assert_eq!(prefix_end("/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80".to_vec());
    }

    #[test]
    fn reads_chunked_and_sized_answers() {
        let sized = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
        let (s, body) = read_response(&mut &sized[..]).unwrap();
        assert_eq!((s, body), (200, b"{\"a\":1}".to_vec()));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
        let (s, body) = read_response(&mut &chunked[..]).unwrap();
        assert_eq!((s, body), (200, b"{\"a\":1}".to_vec()));
        let garbage = b"SSH-2.0\r\n";
        assert!(read_response(&mut &garbage[..]).is_err());
    }

    #[test]
    fn parses_kvs_with_string_integers() {
        let v = json!({"header": {"revision": "9"}, "kvs": [
            {"key": b64(b"/k"), "value": b64(b"v"), "create_revision": "3", "mod_revision": "8", "lease": "77"}]});
        let kvs = parse_kvs("/v3/kv/range", &v).unwrap();
        assert_eq!(
            kvs,
            vec![Kv {
                key: "/k".into(),
                value: b"v".to_vec(),
                create_revision: 3,
                mod_revision: 8,
                lease: 77
            }]
        );
    }
}
