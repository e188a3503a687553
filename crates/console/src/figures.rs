//! Each broker's own figures (bytes in and out, messages in, fsyncs, group-commit rounds),
//! which only that broker knows and the Kafka API does not carry: a console serves its
//! broker's at `/api/broker` as JSON, and the cluster page of any broker reads the others'
//! from the console addresses they registered in etcd.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_broker::Broker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::kafka::Res;

/// How long the cluster page waits for another broker's figures.
const PEER_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest answer read from another broker's console.
const ANSWER_MAX_BYTES: u64 = 64 * 1024;

/// One broker's figures since it started.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Figures {
    pub(crate) node: i32,
    pub(crate) bytes_in: u64,
    pub(crate) bytes_out: u64,
    pub(crate) messages_in: u64,
    pub(crate) fsyncs: u64,
    pub(crate) fsync_failures: u64,
    pub(crate) fsync_mean_us: Option<f64>,
    /// The upper bound of the histogram bucket holding the 99th percentile.
    pub(crate) fsync_p99_us: Option<u64>,
    pub(crate) rounds: u64,
    pub(crate) requests_per_round: Option<f64>,
}

impl Figures {
    pub(crate) fn of(broker: &Broker) -> Figures {
        let m = broker.metrics();
        let [bytes_in, bytes_out, messages_in] = m.traffic();
        let (fsyncs, fsync_failures) = m.fsyncs();
        let rounds = m.rounds();
        Figures {
            node: broker.node_id(),
            bytes_in,
            bytes_out,
            messages_in,
            fsyncs: fsyncs.count,
            fsync_failures,
            fsync_mean_us: (fsyncs.count > 0).then(|| fsyncs.sum as f64 / fsyncs.count as f64),
            fsync_p99_us: crate::pages::quantile(&fsyncs, 0.99),
            rounds: rounds.count,
            requests_per_round: (rounds.count > 0).then(|| rounds.sum as f64 / rounds.count as f64),
        }
    }
}

/// Another broker's figures, from its console at `addr` (host:port).
pub(crate) async fn of_peer(addr: &str) -> Res<Figures> {
    let read = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET /api/broker HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut answer = Vec::new();
        s.take(ANSWER_MAX_BYTES).read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(PEER_TIMEOUT, read)
        .await
        .map_err(|_| format!("the console at {addr} did not answer in time"))?
        .map_err(|e| format!("the console at {addr}: {e}"))?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("the console at {addr} sent no HTTP answer"))?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("the console at {addr} answered {status}"));
    }
    serde_json::from_str(body).map_err(|e| format!("the console at {addr}: {e}"))
}
