//! This broker's bytes in, measured over a window for the controller's bytes-in balancing
//! (`sluice_meta::load`): each window, the bytes appended to every partition it holds since
//! the last, as a rate, with the busiest partitions named.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use sluice_meta::load::{BrokerLoad, LOAD_TOP};
use sluice_store::{Log, TopicPartition};

/// Where each held log's appended-bytes count stood at the last reading.
#[derive(Debug, Default)]
pub(crate) struct LoadMeter {
    last: Option<(Instant, HashMap<TopicPartition, (usize, u64)>)>,
}

impl LoadMeter {
    /// Read `logs` (the partitions held now) at `now`: the load since the last reading, or
    /// None at the first. A log opened since (acquired, or opened again) counts from the
    /// next reading only: its count began within the window.
    pub(crate) fn read(
        &mut self,
        logs: Vec<(TopicPartition, Arc<Log>)>,
        now: Instant,
    ) -> Option<BrokerLoad> {
        let marks: HashMap<TopicPartition, (usize, u64)> = logs
            .iter()
            .map(|(tp, log)| {
                (
                    tp.clone(),
                    (Arc::as_ptr(log) as usize, log.appended_bytes()),
                )
            })
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
                (was_log == log && count > was).then(|| {
                    let rate = ((count - was) as f64 / secs).round() as u64;
                    (tp.topic.clone(), tp.partition, rate)
                })
            })
            .filter(|(_, _, r)| *r > 0)
            .collect();
        let bytes_in = rates.iter().map(|(_, _, r)| *r).sum();
        rates.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, a.1).cmp(&(&b.0, b.1))));
        let complete = rates.len() <= LOAD_TOP;
        rates.truncate(LOAD_TOP);
        Some(BrokerLoad {
            bytes_in,
            top: rates,
            complete,
        })
    }
}
