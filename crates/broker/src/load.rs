//! This broker's bytes in, measured over a window for the controller's bytes-in balancing
//! (`sluice_meta::load`): each window, the bytes appended to every partition it holds since
//! the last, as a rate, with the busiest partitions named.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Instant;

use sluice_meta::load::{ownership_digest, BrokerLoad, LOAD_TOP};
use sluice_store::{Log, TopicPartition};

/// Each held log at a reading: which open log it was and its appended-bytes count. A weak
/// reference, not an address: it keeps the allocation of a log closed since, so a log opened
/// again is never taken for the one it replaced (a freed address is reused).
type Marks = HashMap<TopicPartition, (Weak<Log>, u64)>;

/// Where each held log's appended-bytes count stood at the last reading.
#[derive(Debug, Default)]
pub(crate) struct LoadMeter {
    last: Option<(Instant, Marks)>,
}

impl LoadMeter {
    /// Read `logs` (the partitions held now) at `now`: the load since the last reading, or
    /// None at the first. A log opened since (acquired, or opened again) counts from the
    /// next reading only (its count began within the window), and a window in which the
    /// logs held changed is not `steady`: the controller waits for one that is.
    pub(crate) fn read(
        &mut self,
        logs: Vec<(TopicPartition, Arc<Log>)>,
        now: Instant,
    ) -> Option<BrokerLoad> {
        let marks: Marks = logs
            .iter()
            .map(|(tp, log)| (tp.clone(), (Arc::downgrade(log), log.appended_bytes())))
            .collect();
        let (then, before) = self.last.replace((now, marks))?;
        let secs = now.saturating_duration_since(then).as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        let marks = &self.last.as_ref()?.1;
        let mut rates: Vec<(String, i32, u64)> = marks
            .iter()
            .filter_map(|(tp, (log, count))| {
                let (was_log, was) = before.get(tp)?;
                (Weak::ptr_eq(was_log, log) && count > was).then(|| {
                    let rate = ((count - was) as f64 / secs).round() as u64;
                    (tp.topic.clone(), tp.partition, rate)
                })
            })
            .filter(|(_, _, r)| *r > 0)
            .collect();
        let bytes_in = rates
            .iter()
            .fold(0u64, |sum, (_, _, r)| sum.saturating_add(*r));
        // The same logs held from the window's start to its end: the rates describe them.
        let steady = before.len() == marks.len()
            && marks.iter().all(|(tp, (log, _))| {
                before
                    .get(tp)
                    .is_some_and(|(was, _)| Weak::ptr_eq(was, log))
            });
        let digest = ownership_digest(marks.keys().map(|tp| (tp.topic.as_str(), tp.partition)));
        rates.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, a.1).cmp(&(&b.0, b.1))));
        let complete = rates.len() <= LOAD_TOP;
        rates.truncate(LOAD_TOP);
        Some(BrokerLoad {
            bytes_in,
            top: rates,
            complete,
            steady,
            digest,
            // The registration's, set as it is published.
            lease: 0,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use bytes::Bytes;
    use sluice_format::BatchBuilder;
    use sluice_store::AppendOrigin;

    use super::*;
    use crate::testutil::{log_config, open_logs};

    fn append(log: &Log, bytes: usize) {
        let records = BatchBuilder::new()
            .record(1_700_000_000_000, None, Some(&vec![b'x'; bytes]))
            .build();
        log.append(
            Bytes::from(records),
            AppendOrigin::Client,
            1_700_000_000_000,
        )
        .unwrap();
    }

    fn held(logs: &[Arc<Log>], which: &[usize]) -> Vec<(TopicPartition, Arc<Log>)> {
        which
            .iter()
            .map(|&i| (logs[i].topic_partition().clone(), logs[i].clone()))
            .collect()
    }

    #[test]
    fn a_steady_window_names_the_busiest_partitions_and_digests_what_was_held() {
        let (_dir, _m, logs) = open_logs(3, &log_config(i64::MAX, i64::MAX));
        let mut meter = LoadMeter::default();
        let t0 = Instant::now();
        assert!(meter.read(held(&logs, &[0, 1, 2]), t0).is_none());
        append(&logs[0], 10_000);
        append(&logs[0], 10_000);
        append(&logs[1], 1_000);
        let load = meter
            .read(held(&logs, &[0, 1, 2]), t0 + Duration::from_secs(2))
            .unwrap();
        assert!(load.steady && load.complete);
        assert_eq!(load.top.len(), 2, "partition 2 took nothing: {load:?}");
        assert_eq!((load.top[0].0.as_str(), load.top[0].1), ("t", 0));
        let p0 = logs[0].appended_bytes() / 2;
        assert_eq!(load.top[0].2, p0, "bytes a second over the 2 s window");
        assert_eq!(load.bytes_in, load.top[0].2 + load.top[1].2);
        assert_eq!(
            load.digest,
            ownership_digest([("t", 0), ("t", 1), ("t", 2)])
        );
    }

    #[test]
    fn a_window_in_which_the_held_logs_changed_is_not_steady() {
        let (_dir, m, logs) = open_logs(3, &log_config(i64::MAX, i64::MAX));
        let mut meter = LoadMeter::default();
        let t0 = Instant::now();
        meter.read(held(&logs, &[0, 1]), t0);
        // Acquired within the window: its bytes are not counted, the window not steady.
        append(&logs[2], 5_000);
        let load = meter
            .read(held(&logs, &[0, 1, 2]), t0 + Duration::from_secs(1))
            .unwrap();
        assert!(!load.steady && load.top.is_empty(), "{load:?}");
        // The next window, with the same logs held, is.
        append(&logs[2], 5_000);
        let load = meter
            .read(held(&logs, &[0, 1, 2]), t0 + Duration::from_secs(2))
            .unwrap();
        assert!(load.steady && load.top.len() == 1, "{load:?}");
        // Released within the window: not steady; and a log opened again (another `Log`
        // under the same name) is a change too.
        let load = meter
            .read(held(&logs, &[0, 2]), t0 + Duration::from_secs(3))
            .unwrap();
        assert!(!load.steady);
        meter.read(held(&logs, &[0, 2]), t0 + Duration::from_secs(4));
        let tp = logs[2].topic_partition().clone();
        m.close_log(&tp).unwrap();
        let again = m
            .open_log(&tp, logs[2].topic_id(), log_config(i64::MAX, i64::MAX), 0)
            .unwrap();
        let mut now = held(&logs, &[0]);
        now.push((tp, again));
        let load = meter.read(now, t0 + Duration::from_secs(5)).unwrap();
        assert!(!load.steady);
    }

    /// A log closed and opened again between two readings, nothing else holding the old one:
    /// the new one may be allocated where the old one was. It is still a change. (Found by
    /// an adversary on c0cb672: the meter compared addresses, and a reused one read as
    /// steady.)
    #[test]
    fn a_log_opened_again_where_the_old_one_was_is_a_change() {
        let (_dir, m, logs) = open_logs(1, &log_config(i64::MAX, i64::MAX));
        let tp = logs[0].topic_partition().clone();
        let id = logs[0].topic_id();
        let mut log = logs.into_iter().next().unwrap();
        let mut meter = LoadMeter::default();
        let t0 = Instant::now();
        meter.read(vec![(tp.clone(), log.clone())], t0);
        for i in 1..=20 {
            m.close_log(&tp).unwrap();
            drop(log);
            log = m
                .open_log(&tp, id, log_config(i64::MAX, i64::MAX), 0)
                .unwrap();
            append(&log, 1_000);
            let load = meter
                .read(vec![(tp.clone(), log.clone())], t0 + Duration::from_secs(i))
                .unwrap();
            assert!(
                !load.steady && load.top.is_empty(),
                "opened again {i}: {load:?}"
            );
        }
    }
}
