//! The idempotent batches a connection's produce answers refused as not written, and the
//! batches of the same producer that must be refused behind them (Produce's rule against
//! gaps: `apis/produce.rs`).

use std::collections::HashMap;

use kafka_protocol::ResponseError;

/// The idempotent batches one connection's produce answers refused as not written
/// (NOT_LEADER_OR_FOLLOWER: the client retries them, in order, under the same sequence): per
/// partition, the producer, its epoch and the batch's first sequence. A later batch of that
/// producer on the same connection, sent before the client read the refusal (pipelined),
/// then finds a gap where the refused batch was; answered OUT_OF_ORDER_SEQUENCE_NUMBER,
/// librdkafka takes the pair for lost data, bumps its producer epoch and writes every
/// unacknowledged record again under new sequence numbers, duplicating those already
/// appended and not yet acknowledged (librdkafka issue 4953; fault runs of seeds 101 and 103).
/// (And a producer the log does not know yet has any sequence accepted: the later batch
/// would be appended across the gap, the refused one's retry then out of order.) Such a
/// batch is refused NOT_LEADER_OR_FOLLOWER too, before the log sees it, so the client
/// retries both in order. An entry is per partition and producer (a connection may carry
/// several producers: a proxy), and ends when the log answers a batch of that producer that
/// is not behind it (the refused batch's retry, one before it, a new epoch: a real gap is
/// then answered as one), or after [`REFUSALS_BEHIND_MAX`] batches
/// refused behind it (the client's in-flight window: the refused batch may have been retried
/// on another broker, and a gap found later on this connection is a real one).
#[derive(Debug, Default)]
pub struct ProduceRefusals(parking_lot::Mutex<HashMap<(String, i32, i64), Refused>>);

/// A batch refused as not written, and how many batches behind it were refused since.
#[derive(Debug, Clone, Copy)]
struct Refused {
    epoch: i16,
    sequence: i32,
    behind: u32,
}

/// Whether a produce answer says the batch was not written and is to be retried (the codes
/// Produce's `append_one` answers before the log appends anything, and a failed log's).
fn refused_unwritten(code: i16) -> bool {
    [
        ResponseError::NotLeaderOrFollower.code(),
        ResponseError::NotEnoughReplicas.code(),
        ResponseError::KafkaStorageError.code(),
        ResponseError::UnknownTopicOrPartition.code(),
        ResponseError::UnknownTopicId.code(),
    ]
    .contains(&code)
}

/// Most refusal entries one connection keeps: past it a new refusal starts none (the rule
/// then protects fewer partitions, it never refuses more). A client producing to many
/// unknown partitions under many producer ids cannot grow the map without bound.
const REFUSALS_MAX: usize = 4096;

/// Batches of one producer refused behind a refusal before the rule gives up: Kafka's
/// clients keep at most five requests in flight per partition for an idempotent producer.
pub(crate) const REFUSALS_BEHIND_MAX: u32 = 5;

/// Whether sequence `a` comes after `b`: sequences count modulo 2^31, past i32::MAX to 0
/// (Kafka's `DefaultRecordBatch.incrementSequence`), and a producer is never half that far
/// ahead.
fn sequence_after(a: i32, b: i32) -> bool {
    let d = (i64::from(a) - i64::from(b)).rem_euclid(1 << 31);
    d > 0 && d < 1 << 30
}

impl ProduceRefusals {
    /// Whether a batch (`header`) of partition `tp` comes behind a batch of its producer this
    /// connection refused as not written (same epoch, a later sequence): then it is refused
    /// too, before the log sees it. The log could take it across the gap (a producer it does
    /// not know yet accepts any sequence) or answer OUT_OF_ORDER_SEQUENCE_NUMBER; either way
    /// the refused batch's retry would not come first. Unless the log takes it in order
    /// (`in_order`: the log's next sequence of the producer at that epoch is the batch's
    /// first): the refused batch was written since, its retry having gone to another
    /// connection or broker, and the entry is stale. Refused, the batch would leave the gap
    /// the entry guards against: the next one, past the entry's window, is then answered out
    /// of order, and librdkafka bumps its epoch and writes its unacknowledged records again
    /// (fault runs of seeds 104 and 105).
    pub(crate) fn refuses_behind(
        &self,
        tp: (&str, i32),
        header: Option<&sluice_format::BatchHeader>,
        in_order: impl FnOnce(&sluice_format::BatchHeader) -> bool,
    ) -> bool {
        let Some(h) = header.filter(|h| h.producer_id >= 0) else {
            return false;
        };
        let mut refused = self.0.lock();
        if refused.is_empty() {
            return false;
        }
        let key = (tp.0.to_string(), tp.1, h.producer_id);
        let Some(&Refused {
            epoch, sequence, ..
        }) = refused.get(&key)
        else {
            return false;
        };
        if epoch != h.producer_epoch || !sequence_after(h.base_sequence, sequence) {
            return false;
        }
        if in_order(h) {
            refused.remove(&key);
            return false;
        }
        let Some(r) = refused.get_mut(&key) else {
            return false;
        };
        r.behind += 1;
        if r.behind >= REFUSALS_BEHIND_MAX {
            refused.remove(&key);
        }
        true
    }

    /// The log answered `code` to a batch (`header`) of partition `tp` not refused behind
    /// another: a retriable refusal as not written (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS
    /// while the ownership is unconfirmed or the transaction unverified, KAFKA_STORAGE_ERROR)
    /// starts an entry, as does UNKNOWN_TOPIC_OR_PARTITION (a partition this broker does not
    /// know yet); any other answer to a batch of the producer (the refused batch's retry, one
    /// before it, a new epoch) ends one. A batch let through as in order for the log whose
    /// append is then refused starts the entry again at its own sequence: the batches
    /// pipelined behind it would otherwise reach the log across its gap. A batch of an older
    /// epoch than the entry's changes nothing.
    pub(crate) fn answered(
        &self,
        tp: (&str, i32),
        header: Option<&sluice_format::BatchHeader>,
        code: i16,
    ) {
        let Some(h) = header.filter(|h| h.producer_id >= 0) else {
            return;
        };
        let mut refused = self.0.lock();
        let key = (tp.0.to_string(), tp.1, h.producer_id);
        // A batch of an older epoch (a fenced instance of the same producer id on this
        // connection: a proxy) neither starts nor ends the current epoch's entry.
        if refused
            .get(&key)
            .is_some_and(|r| h.producer_epoch < r.epoch)
        {
            return;
        }
        if refused_unwritten(code) {
            if refused.len() >= REFUSALS_MAX && !refused.contains_key(&key) {
                return;
            }
            let r = Refused {
                epoch: h.producer_epoch,
                sequence: h.base_sequence,
                behind: 0,
            };
            refused.insert(key, r);
        } else if !refused.is_empty() {
            refused.remove(&key);
        }
    }
}
