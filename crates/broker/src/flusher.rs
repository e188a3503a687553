//! Group commit: producers waiting for acks=all under flush.messages / flush.ms queue here; one
//! round fsyncs every log with a waiter, then answers them all. Requests that arrive during a
//! round wait for the next one, so N concurrent producers cost about one fsync per log per
//! round rather than one each.
//!
//! In cluster mode a round also confirms, after its fsyncs, that this broker still owns the
//! round's partitions (`Confirm`, one etcd transaction per round, one per partition when some
//! record changed); the waiters of a partition that cannot be confirmed get
//! [`FlushError::NotOwner`], never success.

use std::io;
use std::sync::Arc;

use sluice_metrics::Metrics;
use sluice_store::Log;
use tokio::sync::{mpsc, oneshot};

/// A log and the outcome of its fsync (the new recovery point).
type Flushed = (Arc<Log>, io::Result<i64>);

/// Most blocking tasks one flush round fsyncs with (each takes a share of the round's logs).
const FLUSH_TASKS_MAX: usize = 8;

/// Confirms that this broker may still acknowledge data of these logs (cluster mode): one
/// result per log.
pub(crate) type Confirm = Arc<dyn Fn(&[Arc<Log>]) -> Vec<Result<(), String>> + Send + Sync>;

/// Called with the logs a round fsynced whose readers wait for the fsync
/// (`Log::sync_bounded`, one broker): their fetches waiting for data are woken.
pub(crate) type Synced = Arc<dyn Fn(&[Arc<Log>]) + Send + Sync>;

/// Why a flush request was not answered with success.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FlushError {
    #[error("{0}")]
    Storage(String),
    /// The data is on storage, but this broker may no longer own the partition, so the data
    /// may not be in the log the new owner serves.
    #[error("{0}")]
    NotOwner(String),
}

struct FlushRequest {
    log: Arc<Log>,
    done: oneshot::Sender<Result<(), FlushError>>,
}

#[derive(Debug)]
pub(crate) struct Flusher {
    tx: mpsc::UnboundedSender<FlushRequest>,
}

impl std::fmt::Debug for FlushRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushRequest")
            .field("log", &self.log.topic_partition())
            .finish()
    }
}

impl Flusher {
    pub(crate) fn start(
        confirm: Option<Confirm>,
        synced: Option<Synced>,
        metrics: Arc<Metrics>,
    ) -> Flusher {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(rx, confirm, synced, metrics));
        Flusher { tx }
    }

    /// Ask for everything appended to `log` so far to reach stable storage; the request joins
    /// the next flush round at once, and the returned future resolves when that round is done.
    pub(crate) fn request(
        &self,
        log: Arc<Log>,
    ) -> impl std::future::Future<Output = Result<(), FlushError>> {
        let (done, wait) = oneshot::channel();
        let sent = self.tx.send(FlushRequest { log, done });
        let stopped = || FlushError::Storage("flusher stopped".to_string());
        async move {
            sent.map_err(|_| stopped())?;
            wait.await.map_err(|_| stopped())?
        }
    }
}

/// The group commit's task: one round at a time, in order: take every request waiting
/// ([`gather_round`]), fsync each of the round's logs once ([`distinct_logs`],
/// [`sync_logs`]), then in cluster mode confirm ownership ([`confirm_logs`]), wake the readers
/// that wait for the fsync ([`wake_synced_readers`]), and answer each request
/// ([`outcome_of`]).
///
/// Keeps (ARCHITECTURE.md): an answer comes from an fsync that began after the request was
/// made, so it covers the append made before it; in cluster mode success also needs the
/// ownership confirmation that follows the fsyncs (docs/cluster.md, Fencing, point 1).
async fn run(
    mut rx: mpsc::UnboundedReceiver<FlushRequest>,
    confirm: Option<Confirm>,
    synced: Option<Synced>,
    metrics: Arc<Metrics>,
) {
    while let Some(first) = rx.recv().await {
        let round = gather_round(first, &mut rx);
        let started = std::time::Instant::now();
        let logs = distinct_logs(&round);
        let results = sync_logs(&logs, &metrics).await;
        // Cluster mode: the fsyncs are done; acknowledge only if the partitions are still ours.
        let confirmed = confirm_logs(confirm.as_ref(), &logs).await;
        if let (Some(hook), Ok(results)) = (&synced, &results) {
            wake_synced_readers(hook, results);
        }
        metrics.round(round.len());
        tracing::debug!(
            requests = round.len(),
            logs = logs.len(),
            micros = started.elapsed().as_micros() as u64,
            "flush round"
        );
        for r in round {
            let outcome = outcome_of(&r.log, &logs, &confirmed, &results);
            let _ = r.done.send(outcome);
        }
    }
}

/// A round: the first request and every other one waiting already. Requests that arrive
/// later join the next round, whose fsync begins after them.
fn gather_round(
    first: FlushRequest,
    rx: &mut mpsc::UnboundedReceiver<FlushRequest>,
) -> Vec<FlushRequest> {
    let mut round = vec![first];
    while let Ok(more) = rx.try_recv() {
        round.push(more);
    }
    round
}

/// The logs of a round, each once, in the order their first request came.
fn distinct_logs(round: &[FlushRequest]) -> Vec<Arc<Log>> {
    let mut logs: Vec<Arc<Log>> = Vec::new();
    for r in round {
        if !logs.iter().any(|l| Arc::ptr_eq(l, &r.log)) {
            logs.push(r.log.clone());
        }
    }
    logs
}

/// Fsync the appended data of each log (`Log::sync_appended`), on blocking threads: at most
/// [`FLUSH_TASKS_MAX`] tasks, each taking a share of the logs. Each fsync is timed and
/// counted; a task that failed to run fails the whole round.
async fn sync_logs(
    logs: &[Arc<Log>],
    metrics: &Arc<Metrics>,
) -> Result<Vec<Flushed>, tokio::task::JoinError> {
    // The logs of a round are fsynced in parallel: concurrent fdatasyncs share journal
    // commits and device flushes, where one thread doing them in turn paid for each.
    let per_task = logs.len().div_ceil(FLUSH_TASKS_MAX).max(1);
    let tasks: Vec<_> = logs
        .chunks(per_task)
        .map(|chunk| {
            let chunk = chunk.to_vec();
            let metrics = metrics.clone();
            tokio::task::spawn_blocking(move || {
                chunk
                    .into_iter()
                    .map(|l| {
                        let started = std::time::Instant::now();
                        let r = l.sync_appended();
                        metrics.fsync(started.elapsed(), r.is_ok());
                        (l, r)
                    })
                    .collect::<Vec<Flushed>>()
            })
        })
        .collect();
    let mut results: Result<Vec<Flushed>, tokio::task::JoinError> =
        Ok(Vec::with_capacity(logs.len()));
    for t in tasks {
        match (t.await, &mut results) {
            (Ok(mut part), Ok(all)) => all.append(&mut part),
            (Err(e), _) => results = Err(e),
            (Ok(_), Err(_)) => {}
        }
    }
    results
}

/// Cluster mode: whether this broker may still acknowledge data of each log, asked after
/// the round's fsyncs (`Confirm`, on a blocking thread: it waits for etcd). One result per
/// log; every log fails when the check could not run. On a single broker, all succeed.
async fn confirm_logs(confirm: Option<&Confirm>, logs: &[Arc<Log>]) -> Vec<Result<(), String>> {
    match confirm {
        Some(confirm) => {
            let (confirm, to_check) = (confirm.clone(), logs.to_vec());
            match tokio::task::spawn_blocking(move || confirm(&to_check)).await {
                Ok(r) => r,
                Err(e) => vec![Err(format!("ownership check failed: {e}")); logs.len()],
            }
        }
        None => vec![Ok(()); logs.len()],
    }
}

/// Wake the fetches waiting for data of the logs whose readers see only fsynced data
/// (`Log::sync_bounded`) and whose fsync succeeded.
fn wake_synced_readers(hook: &Synced, results: &[Flushed]) {
    let bounded: Vec<Arc<Log>> = results
        .iter()
        .filter(|(l, r)| r.is_ok() && l.sync_bounded())
        .map(|(l, _)| l.clone())
        .collect();
    if !bounded.is_empty() {
        hook(&bounded);
    }
}

/// The answer to a request for `log` in a round over `logs`: success only if the log's
/// ownership was confirmed (`confirmed`, one per log) and its fsync succeeded (`results`).
/// A failed confirmation is answered [`FlushError::NotOwner`] whatever the fsync did; a
/// failed fsync, or a round whose fsync task failed, [`FlushError::Storage`].
fn outcome_of(
    log: &Arc<Log>,
    logs: &[Arc<Log>],
    confirmed: &[Result<(), String>],
    results: &Result<Vec<Flushed>, tokio::task::JoinError>,
) -> Result<(), FlushError> {
    let not_owner = logs
        .iter()
        .zip(confirmed)
        .find(|(l, _)| Arc::ptr_eq(l, log))
        .and_then(|(_, c)| c.clone().err());
    match results {
        Ok(results) if not_owner.is_some() => {
            let synced = results
                .iter()
                .any(|(l, res)| Arc::ptr_eq(l, log) && res.is_ok());
            let why = not_owner.unwrap_or_default();
            if synced {
                tracing::info!(tp = ?log.topic_partition(), "not acknowledging: {why}");
            }
            Err(FlushError::NotOwner(why))
        }
        Ok(results) => match results.iter().find(|(l, _)| Arc::ptr_eq(l, log)) {
            Some((_, Ok(_))) => Ok(()),
            Some((l, Err(e))) => {
                tracing::error!(tp = ?l.topic_partition(), "fsync failed: {e}");
                Err(FlushError::Storage(e.to_string()))
            }
            None => Err(FlushError::Storage(
                "log missing from flush round".to_string(),
            )),
        },
        Err(e) => Err(FlushError::Storage(format!("flush task failed: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use bytes::Bytes;
    use sluice_format::BatchBuilder;
    use sluice_store::{AppendOrigin, LogConfig};

    use crate::testutil::{log_config, open_logs};

    /// Every answer comes from an fsync that covers the append made before the request, with
    /// many tasks appending to and flushing the same few logs at once (so requests keep
    /// arriving while a round fsyncs their log).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn each_answer_covers_the_requesting_append() {
        // Small segments, so the appends roll them too.
        let config = LogConfig {
            segment_bytes: 64 * 1024,
            ..log_config(1, 0)
        };
        let (_dir, _manager, logs) = open_logs(3, &config);
        let flusher = Arc::new(Flusher::start(
            None,
            None,
            crate::metrics::new_metrics(&["PLAINTEXT"]),
        ));
        let mut tasks = Vec::new();
        for t in 0..24usize {
            let (flusher, logs) = (flusher.clone(), logs.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0..40usize {
                    let log = &logs[(t + i) % logs.len()];
                    let records = BatchBuilder::new()
                        .record(1_700_000_000_000, None, Some(&[b'x'; 200]))
                        .build();
                    let appended = log
                        .append(
                            Bytes::from(records),
                            AppendOrigin::Client,
                            1_700_000_000_000,
                        )
                        .unwrap();
                    assert!(appended.flush_due);
                    flusher.request(log.clone()).await.unwrap();
                    let synced = log.synced_offset();
                    assert!(
                        synced > appended.last_offset,
                        "answered with offset {} appended but only {synced} synced",
                        appended.last_offset
                    );
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }

    /// A round's logs are fsynced once each, in the order their first request came.
    #[test]
    fn a_round_fsyncs_each_log_once_in_request_order() {
        let (_dir, _manager, logs) = open_logs(3, &log_config(1, 0));
        let request = |i: usize| FlushRequest {
            log: logs[i].clone(),
            done: oneshot::channel().0,
        };
        let round = [request(2), request(0), request(2), request(1), request(0)];
        let distinct = distinct_logs(&round);
        let order: Vec<i32> = distinct
            .iter()
            .map(|l| l.topic_partition().partition)
            .collect();
        assert_eq!(order, [2, 0, 1]);
    }

    /// The answer to each request of a round: success only with the fsync done and the
    /// ownership confirmed; a failed confirmation answers NotOwner whatever the fsync did
    /// (the data may be on storage, but perhaps not in the new owner's log); a failed fsync
    /// answers Storage; a log the round did not fsync is never answered with success.
    #[test]
    fn an_answer_needs_both_the_fsync_and_the_confirmation() {
        let (_dir, _manager, logs) = open_logs(5, &log_config(1, 0));
        let round = logs[..4].to_vec();
        let confirmed = vec![
            Ok(()),
            Err("moved".to_string()),
            Ok(()),
            Err("moved too".to_string()),
        ];
        let results: Result<Vec<Flushed>, tokio::task::JoinError> = Ok(vec![
            (logs[0].clone(), Ok(1)),
            (logs[1].clone(), Ok(1)),
            (logs[2].clone(), Err(io::Error::other("disk gone"))),
            (logs[3].clone(), Err(io::Error::other("disk gone"))),
        ]);
        let outcome = |i: usize| outcome_of(&logs[i], &round, &confirmed, &results);
        assert_eq!(outcome(0), Ok(()));
        assert_eq!(outcome(1), Err(FlushError::NotOwner("moved".into())));
        assert_eq!(outcome(2), Err(FlushError::Storage("disk gone".into())));
        assert_eq!(outcome(3), Err(FlushError::NotOwner("moved too".into())));
        assert_eq!(
            outcome(4),
            Err(FlushError::Storage("log missing from flush round".into()))
        );
    }
}
