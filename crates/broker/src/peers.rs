//! Calls to other brokers of a cluster (WriteTxnMarkers to a partition's owner, AddPartitionsToTxn
//! to a transaction coordinator). The broker decides what to send and to whom; the server crate,
//! which owns sockets, carries the requests ([`PeerClient`], installed with
//! [`Broker::set_peers`](crate::Broker::set_peers)).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};

/// How long one broker-to-broker request may take before it counts as failed.
pub const PEER_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The outcome of a broker-to-broker request.
pub type PeerReply = Pin<Box<dyn Future<Output = Result<ResponseKind, String>> + Send>>;

/// What one connection attempt to a listener found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// A connection was accepted.
    Accepted,
    /// Every address of the host refused the connection: nothing listens on the port.
    Refused,
    /// No answer in time, or another error: nothing is known.
    Unknown,
}

/// Sends a request to another broker and yields its response.
pub trait PeerClient: Send + Sync + std::fmt::Debug {
    /// Try to connect to the listener at `host:port` (a blocking call, at most `timeout` per
    /// address), and close the connection at once.
    fn probe(&self, host: &str, port: u16, timeout: Duration) -> Probe;

    fn call(
        &self,
        host: &str,
        port: u16,
        api: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> PeerReply;
}
