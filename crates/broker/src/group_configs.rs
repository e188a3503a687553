//! Group configs (GROUP config resources: `kafka-configs --entity-type groups`), the ones Sluice
//! honours: `share.auto.offset.reset` (where a share group starts on a partition it has not
//! read yet), `share.record.lock.duration.ms` and `share.isolation.level`. Stored as the
//! `<group:ID>` entity of the dynamic configs' store (a file on one broker, an etcd record in
//! a cluster), read when a share partition is first used and when records are acquired.

use std::collections::BTreeMap;

use kafka_protocol::ResponseError;
use sluice_config::{ConfigEntry, ConfigSource, ConfigSynonym};

use crate::admin::Refusal;
use crate::errors::meta_error_code;
use crate::Broker;

pub(crate) const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
pub(crate) const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
pub(crate) const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";

/// Kafka's bounds of a group's lock duration (`group.share.min/max.record.lock.duration.ms`).
const MIN_LOCK_MS: i64 = 15_000;
const MAX_LOCK_MS: i64 = 3_600_000;

/// Where a share group starts on a partition it has not read yet (`share.auto.offset.reset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ShareStart {
    Earliest,
    Latest,
    /// `by_duration:D`: at the first record no older than D (milliseconds) when the partition
    /// is first read, or at the end when every record is older.
    ByDuration(i64),
}

impl ShareStart {
    pub(crate) fn parse(value: &str) -> Option<ShareStart> {
        match value {
            "earliest" => Some(ShareStart::Earliest),
            "latest" => Some(ShareStart::Latest),
            _ => value
                .strip_prefix("by_duration:")
                .and_then(iso_duration_ms)
                .map(ShareStart::ByDuration),
        }
    }
}

/// An ISO 8601 duration as Java's `Duration.parse` reads it (`PnDTnHnMn.nS`, letters in either
/// case, a fraction of seconds up to nine digits), in milliseconds; None when it is not one,
/// is negative (Kafka refuses those for `by_duration`) or overflows.
fn iso_duration_ms(text: &str) -> Option<i64> {
    let upper = text.to_ascii_uppercase();
    let rest = upper.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut ms: i64 = 0;
    let mut parts = 0;
    let number = |digits: &str| -> Option<i64> {
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    };
    if !days.is_empty() {
        ms = number(days.strip_suffix('D')?)?.checked_mul(86_400_000)?;
        parts += 1;
    }
    if let Some(mut t) = time {
        if t.is_empty() {
            return None;
        }
        for (unit, scale) in [('H', 3_600_000i64), ('M', 60_000)] {
            if let Some(i) = t.find(unit) {
                ms = ms.checked_add(number(&t[..i])?.checked_mul(scale)?)?;
                t = &t[i + 1..];
                parts += 1;
            }
        }
        if !t.is_empty() {
            let secs = t.strip_suffix('S')?;
            let (whole, frac) = match secs.split_once(['.', ',']) {
                Some((w, f)) if !f.is_empty() && f.len() <= 9 && number(f).is_some() => (w, f),
                Some(_) => return None,
                None => (secs, ""),
            };
            let frac_ms = format!("{frac:0<3}")[..3].parse::<i64>().ok()?;
            ms = ms.checked_add(number(whole)?.checked_mul(1000)?.checked_add(frac_ms)?)?;
            parts += 1;
        }
    }
    (parts > 0).then_some(ms)
}

fn entity(group: &str) -> String {
    format!("<group:{group}>")
}

/// Why `name = value` is not a group config Sluice takes, in Kafka's words where it has them.
fn check(name: &str, value: &str) -> Result<(), Refusal> {
    let invalid = |m: String| Err(Refusal::new(ResponseError::InvalidConfig, m));
    match name {
        SHARE_AUTO_OFFSET_RESET => match ShareStart::parse(value) {
            Some(_) => Ok(()),
            None => invalid(format!(
                "Invalid value {value} for configuration {name}: takes earliest, latest or by_duration:<ISO 8601 duration, PnDTnHnMn.nS, not negative>"
            )),
        },
        SHARE_RECORD_LOCK_DURATION_MS => match value.parse::<i64>() {
            Ok(v) if (MIN_LOCK_MS..=MAX_LOCK_MS).contains(&v) => Ok(()),
            _ => invalid(format!(
                "Invalid value {value} for configuration {name}: Value must be between {MIN_LOCK_MS} and {MAX_LOCK_MS}"
            )),
        },
        SHARE_ISOLATION_LEVEL => match value {
            "read_uncommitted" | "read_committed" => Ok(()),
            _ => invalid(format!(
                "Invalid value {value} for configuration {name}: String must be one of: read_committed, read_uncommitted"
            )),
        },
        _ => Err(Refusal::new(
            ResponseError::InvalidConfig,
            format!("Unknown group config name: {name} (Sluice takes {SHARE_AUTO_OFFSET_RESET}, {SHARE_RECORD_LOCK_DURATION_MS} and {SHARE_ISOLATION_LEVEL})"),
        )),
    }
}

impl Broker {
    /// The configs set on `group`.
    pub(crate) fn group_configs(&self, group: &str) -> BTreeMap<String, String> {
        self.meta
            .broker_configs()
            .get(&entity(group))
            .cloned()
            .unwrap_or_default()
    }

    /// Where `group` starts on a partition it never read.
    pub(crate) fn share_start(&self, group: &str) -> ShareStart {
        self.meta
            .broker_config(&entity(group), SHARE_AUTO_OFFSET_RESET)
            .and_then(|v| ShareStart::parse(&v))
            .unwrap_or(ShareStart::Latest)
    }

    /// The lock duration of `group`'s acquisitions.
    pub(crate) fn share_lock_ms(&self, group: &str) -> i64 {
        self.meta
            .broker_config(&entity(group), SHARE_RECORD_LOCK_DURATION_MS)
            .and_then(|v| v.parse().ok())
            .unwrap_or(self.shares.limits().lock_ms)
    }

    /// What `group`'s share fetches read: up to the last stable offset without aborted
    /// transactions (`read_committed`), or everything below the high watermark.
    pub(crate) fn share_isolation(&self, group: &str) -> sluice_store::Isolation {
        match self
            .meta
            .broker_config(&entity(group), SHARE_ISOLATION_LEVEL)
        {
            Some(v) if v == "read_committed" => sluice_store::Isolation::ReadCommitted,
            _ => sluice_store::Isolation::ReadUncommitted,
        }
    }

    pub(crate) fn describe_group_configs(&self, group: &str) -> Result<Vec<ConfigEntry>, Refusal> {
        if group.is_empty() {
            return Err(Refusal::new(
                ResponseError::InvalidRequest,
                "Group id must not be empty.",
            ));
        }
        let set = self.group_configs(group);
        let default_lock = self.shares.limits().lock_ms.to_string();
        let entry = |name: &str, default: String, config_type: i8| {
            let (value, source) = match set.get(name) {
                Some(v) => (v.clone(), ConfigSource::Group),
                None => (default.clone(), ConfigSource::Default),
            };
            ConfigEntry {
                name: name.to_string(),
                value: Some(value.clone()),
                source,
                read_only: false,
                sensitive: false,
                config_type,
                documentation: None,
                synonyms: vec![ConfigSynonym {
                    name: name.to_string(),
                    value: Some(value),
                    source,
                }],
            }
        };
        Ok(vec![
            entry(SHARE_AUTO_OFFSET_RESET, "latest".into(), 2),
            entry(SHARE_RECORD_LOCK_DURATION_MS, default_lock, 3),
            entry(SHARE_ISOLATION_LEVEL, "read_uncommitted".into(), 2),
        ])
    }

    /// Change `group`'s configs: `change` edits the stored set, checked, stored unless
    /// `validate_only`.
    pub(crate) fn alter_group_configs(
        &self,
        group: &str,
        validate_only: bool,
        change: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        if group.is_empty() {
            return Err(Refusal::new(
                ResponseError::InvalidRequest,
                "Group id must not be empty.",
            ));
        }
        let entity = entity(group);
        let stored = self.meta.broker_configs_of(&entity).map_err(|e| Refusal {
            code: meta_error_code(&e),
            message: e.to_string(),
        })?;
        let mut next = stored.configs.clone();
        change(&mut next)?;
        for (k, v) in &next {
            check(k, v)?;
        }
        if validate_only || next == stored.configs {
            return Ok(());
        }
        self.meta
            .set_broker_configs(&entity, next, stored.version)
            .map_err(|e| Refusal {
                code: meta_error_code(&e),
                message: e.to_string(),
            })?;
        tracing::info!(group, "group configs set");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_starts_parse_as_kafka_reads_them() {
        assert_eq!(ShareStart::parse("earliest"), Some(ShareStart::Earliest));
        assert_eq!(ShareStart::parse("latest"), Some(ShareStart::Latest));
        let ms = |s: &str| match ShareStart::parse(&format!("by_duration:{s}")) {
            Some(ShareStart::ByDuration(ms)) => Some(ms),
            _ => None,
        };
        assert_eq!(ms("PT1H"), Some(3_600_000));
        assert_eq!(ms("P1D"), Some(86_400_000));
        assert_eq!(ms("P1DT2H3M4.5S"), Some(93_784_500));
        assert_eq!(ms("pt0.001s"), Some(1));
        assert_eq!(ms("PT90M"), Some(5_400_000));
        for bad in [
            "",
            "P",
            "PT",
            "1H",
            "PT-1H",
            "P-1D",
            "PT1.S",
            "PT1.0000000001S",
            "PT1X",
            "P1H",
            "PT1S2M",
            "P99999999999999D",
            "by_duration",
        ] {
            assert_eq!(ms(bad), None, "{bad}");
        }
        assert_eq!(ShareStart::parse("by_duration"), None);
        assert_eq!(ShareStart::parse("none"), None);
    }
}
