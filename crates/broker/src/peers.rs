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

/// Sends a request to another broker and yields its response.
pub trait PeerClient: Send + Sync + std::fmt::Debug {
    fn call(
        &self,
        host: &str,
        port: u16,
        api: ApiKey,
        version: i16,
        body: RequestKind,
    ) -> PeerReply;
}
