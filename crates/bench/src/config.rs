//! OpenMessaging Benchmark workload files and OMB-style Kafka driver files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::yaml::{self, Value};

/// Limits on what a workload may ask for (a 2-core benchmark machine; one process).
pub const MAX_TOPICS: u32 = 1_000;
pub const MAX_PARTITIONS_PER_TOPIC: u32 = 10_000;
pub const MAX_MESSAGE_BYTES: u32 = 1 << 20;
pub const MAX_PAYLOAD_POOL: u32 = 100_000;
pub const MAX_CLIENTS_PER_TOPIC: u32 = 256;
pub const MAX_SUBSCRIPTIONS_PER_TOPIC: u32 = 64;
pub const MAX_BACKLOG_GB: f64 = 1_000.0;
pub const MAX_DURATION_MINUTES: f64 = 24.0 * 60.0;
pub const MAX_BATCH_BYTES: u32 = 16 << 20;
pub const MAX_IN_FLIGHT: u32 = 1_000;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Yaml {
        path: PathBuf,
        source: yaml::YamlError,
    },
    #[error("{path}: {key}: {reason}")]
    Field {
        path: PathBuf,
        key: String,
        reason: String,
    },
}

/// How records get keys (OMB's `keyDistributor`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyDistributor {
    NoKey,
    KeyRoundRobin,
    RandomNano,
}

/// One OMB workload file.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub name: String,
    pub topics: u32,
    pub partitions_per_topic: u32,
    pub message_size: u32,
    /// Resolved against the workload file's directory; used when it exists.
    pub payload_file: Option<PathBuf>,
    pub use_randomized_payloads: bool,
    pub random_bytes_ratio: f64,
    pub randomized_payload_pool_size: u32,
    pub key_distributor: KeyDistributor,
    pub subscriptions_per_topic: u32,
    pub consumer_per_subscription: u32,
    pub producers_per_topic: u32,
    /// Total messages per second over all producers; 0 = as fast as the broker acknowledges.
    pub producer_rate: f64,
    pub consumer_backlog_size_gb: f64,
    /// Fraction of the backlog the consumers must drain before the drain phase ends.
    pub backlog_drain_ratio: f64,
    pub test_duration: Duration,
    pub warmup_duration: Duration,
}

/// Producer acknowledgement mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acks {
    None,
    Leader,
    All,
}

impl Acks {
    pub fn wire(self) -> i16 {
        match self {
            Acks::None => 0,
            Acks::Leader => 1,
            Acks::All => -1,
        }
    }
}

/// One OMB-style Kafka driver file.
#[derive(Clone, Debug, PartialEq)]
pub struct Driver {
    pub name: String,
    pub replication_factor: i16,
    /// Topic configs passed to CreateTopics.
    pub topic_config: BTreeMap<String, String>,
    pub bootstrap: Option<String>,
    pub acks: Acks,
    pub linger: Duration,
    pub batch_bytes: u32,
    pub max_in_flight: u32,
    pub request_timeout: Duration,
    pub fetch_min_bytes: i32,
    pub fetch_max_wait_ms: i32,
    pub fetch_max_bytes: i32,
    pub max_partition_fetch_bytes: i32,
}

impl Default for Driver {
    /// Kafka Java client defaults, except acks=all (also the Java default since 3.0).
    fn default() -> Self {
        Driver {
            name: "default".into(),
            replication_factor: 1,
            topic_config: BTreeMap::new(),
            bootstrap: None,
            acks: Acks::All,
            linger: Duration::from_millis(5),
            batch_bytes: 16 * 1024,
            max_in_flight: 5,
            request_timeout: Duration::from_secs(30),
            fetch_min_bytes: 1,
            fetch_max_wait_ms: 500,
            fetch_max_bytes: 50 * 1024 * 1024,
            max_partition_fetch_bytes: 1024 * 1024,
        }
    }
}

struct Fields<'a> {
    path: &'a Path,
    map: BTreeMap<String, Value>,
}

impl Fields<'_> {
    fn bad(&self, key: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::Field {
            path: self.path.to_path_buf(),
            key: key.into(),
            reason: reason.into(),
        }
    }

    fn scalar(&mut self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.map.remove(key) {
            None => Ok(None),
            Some(Value::Scalar(s)) => Ok(Some(s)),
            Some(_) => Err(self.bad(key, "expected a single value")),
        }
    }

    fn number<T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy>(
        &mut self,
        key: &str,
        default: Option<T>,
        min: T,
        max: T,
    ) -> Result<T, ConfigError> {
        let v = match self.scalar(key)? {
            None => default.ok_or_else(|| self.bad(key, "missing (required)"))?,
            Some(s) => s
                .parse::<T>()
                .map_err(|_| self.bad(key, format!("{s:?} is not a number")))?,
        };
        if !(v >= min && v <= max) {
            return Err(self.bad(key, format!("{v} is outside {min}..={max}")));
        }
        Ok(v)
    }

    fn boolean(&mut self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.scalar(key)?.as_deref() {
            None => Ok(default),
            Some("true" | "True" | "TRUE") => Ok(true),
            Some("false" | "False" | "FALSE") => Ok(false),
            Some(other) => Err(self.bad(key, format!("{other:?} is not true or false"))),
        }
    }

    fn properties(&mut self, key: &str) -> Result<BTreeMap<String, String>, ConfigError> {
        match self.map.remove(key) {
            None => Ok(BTreeMap::new()),
            Some(v) => v.as_properties().map_err(|e| self.bad(key, e.reason)),
        }
    }
}

fn load(path: &Path) -> Result<Fields<'_>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let map = yaml::parse(&text).map_err(|source| ConfigError::Yaml {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Fields { path, map })
}

fn minutes(f: &mut Fields<'_>, key: &str, default: f64) -> Result<Duration, ConfigError> {
    let m: f64 = f.number(key, Some(default), 0.0, MAX_DURATION_MINUTES)?;
    Ok(Duration::from_secs_f64(m * 60.0))
}

impl Workload {
    pub fn from_file(path: &Path) -> Result<Workload, ConfigError> {
        let f = load(path)?;
        Self::from_fields(f)
    }

    fn from_fields(mut f: Fields<'_>) -> Result<Workload, ConfigError> {
        let name = f.scalar("name")?.unwrap_or_else(|| {
            f.path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let key_distributor = match f.scalar("keyDistributor")?.as_deref() {
            None | Some("NO_KEY") => KeyDistributor::NoKey,
            Some("KEY_ROUND_ROBIN") => KeyDistributor::KeyRoundRobin,
            Some("RANDOM_NANO") => KeyDistributor::RandomNano,
            Some(other) => {
                return Err(f.bad(
                    "keyDistributor",
                    format!("{other:?} is not NO_KEY, KEY_ROUND_ROBIN or RANDOM_NANO"),
                ))
            }
        };
        let dir = f.path.parent().unwrap_or(Path::new("."));
        let payload_file = f.scalar("payloadFile")?.map(|p| dir.join(p));
        let w = Workload {
            name,
            topics: f.number("topics", None, 1, MAX_TOPICS)?,
            partitions_per_topic: f.number(
                "partitionsPerTopic",
                None,
                1,
                MAX_PARTITIONS_PER_TOPIC,
            )?,
            message_size: f.number("messageSize", None, 1, MAX_MESSAGE_BYTES)?,
            payload_file,
            use_randomized_payloads: f.boolean("useRandomizedPayloads", false)?,
            random_bytes_ratio: f.number("randomBytesRatio", Some(0.5), 0.0, 1.0)?,
            randomized_payload_pool_size: f.number(
                "randomizedPayloadPoolSize",
                Some(1000),
                1,
                MAX_PAYLOAD_POOL,
            )?,
            key_distributor,
            subscriptions_per_topic: f.number(
                "subscriptionsPerTopic",
                Some(1),
                0,
                MAX_SUBSCRIPTIONS_PER_TOPIC,
            )?,
            consumer_per_subscription: f.number(
                "consumerPerSubscription",
                Some(1),
                0,
                MAX_CLIENTS_PER_TOPIC,
            )?,
            producers_per_topic: f.number(
                "producersPerTopic",
                Some(1),
                1,
                MAX_CLIENTS_PER_TOPIC,
            )?,
            producer_rate: f.number("producerRate", Some(0.0), 0.0, 1e9)?,
            consumer_backlog_size_gb: f.number(
                "consumerBacklogSizeGB",
                Some(0.0),
                0.0,
                MAX_BACKLOG_GB,
            )?,
            backlog_drain_ratio: f.number("backlogDrainRatio", Some(1.0), 0.0, 1.0)?,
            test_duration: minutes(&mut f, "testDurationMinutes", 15.0)?,
            warmup_duration: minutes(&mut f, "warmupDurationMinutes", 1.0)?,
        };
        if w.consumer_backlog_size_gb > 0.0
            && (w.subscriptions_per_topic == 0 || w.consumer_per_subscription == 0)
        {
            return Err(f.bad(
                "consumerBacklogSizeGB",
                "a backlog needs at least one consumer to drain it",
            ));
        }
        if let Some(k) = f.map.keys().next() {
            return Err(f.bad(k, "unknown workload field"));
        }
        Ok(w)
    }

    /// Producers over all topics.
    pub fn producer_count(&self) -> u32 {
        self.topics * self.producers_per_topic
    }
}

impl Driver {
    pub fn from_file(path: &Path) -> Result<Driver, ConfigError> {
        let mut f = load(path)?;
        let d = Driver::default();
        let name = f.scalar("name")?.unwrap_or(d.name);
        let _driver_class = f.scalar("driverClass")?;
        let _reset = f.scalar("reset")?;
        let replication_factor = f.number("replicationFactor", Some(1i16), 1, 16)?;
        let topic_config = f.properties("topicConfig")?;
        let common = f.properties("commonConfig")?;
        let producer = f.properties("producerConfig")?;
        let consumer = f.properties("consumerConfig")?;
        if let Some(k) = f.map.keys().next() {
            return Err(f.bad(k, "unknown driver field"));
        }
        let get = |section: &BTreeMap<String, String>, key: &str| -> Option<String> {
            section.get(key).or_else(|| common.get(key)).cloned()
        };
        let num = |section: &BTreeMap<String, String>,
                   key: &str,
                   default: i64,
                   min: i64,
                   max: i64|
         -> Result<i64, ConfigError> {
            let Some(s) = get(section, key) else {
                return Ok(default);
            };
            let v: i64 = s.parse().map_err(|_| ConfigError::Field {
                path: path.to_path_buf(),
                key: key.into(),
                reason: format!("{s:?} is not an integer"),
            })?;
            if !(min..=max).contains(&v) {
                return Err(ConfigError::Field {
                    path: path.to_path_buf(),
                    key: key.into(),
                    reason: format!("{v} is outside {min}..={max}"),
                });
            }
            Ok(v)
        };
        let acks = match get(&producer, "acks").as_deref() {
            None | Some("all" | "-1") => Acks::All,
            Some("1") => Acks::Leader,
            Some("0") => Acks::None,
            Some(other) => {
                return Err(ConfigError::Field {
                    path: path.to_path_buf(),
                    key: "acks".into(),
                    reason: format!("{other:?} is not 0, 1, all or -1"),
                })
            }
        };
        let bootstrap = common.get("bootstrap.servers").cloned();
        // The ranges below make the `as` casts lossless.
        Ok(Driver {
            name,
            replication_factor,
            topic_config,
            bootstrap,
            acks,
            linger: Duration::from_millis(num(&producer, "linger.ms", 5, 0, 60_000)? as u64),
            batch_bytes: num(
                &producer,
                "batch.size",
                d.batch_bytes.into(),
                1,
                MAX_BATCH_BYTES.into(),
            )? as u32,
            max_in_flight: num(
                &producer,
                "max.in.flight.requests.per.connection",
                d.max_in_flight.into(),
                1,
                MAX_IN_FLIGHT.into(),
            )? as u32,
            request_timeout: Duration::from_millis(num(
                &producer,
                "request.timeout.ms",
                30_000,
                1,
                3_600_000,
            )? as u64),
            fetch_min_bytes: num(&consumer, "fetch.min.bytes", 1, 0, i32::MAX.into())? as i32,
            fetch_max_wait_ms: num(&consumer, "fetch.max.wait.ms", 500, 0, 60_000)? as i32,
            fetch_max_bytes: num(
                &consumer,
                "fetch.max.bytes",
                d.fetch_max_bytes.into(),
                1,
                i32::MAX.into(),
            )? as i32,
            max_partition_fetch_bytes: num(
                &consumer,
                "max.partition.fetch.bytes",
                d.max_partition_fetch_bytes.into(),
                1,
                i32::MAX.into(),
            )? as i32,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_workload_and_driver_files_load() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench");
        let mut n = 0;
        for (dir, is_workload) in [("workloads", true), ("drivers", false)] {
            for e in std::fs::read_dir(root.join(dir)).unwrap() {
                let path = e.unwrap().path();
                if is_workload {
                    Workload::from_file(&path).unwrap();
                } else {
                    Driver::from_file(&path).unwrap();
                }
                n += 1;
            }
        }
        assert!(n >= 8, "{n} files");
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn tmpdir(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("sluice-bench-test-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn omb_workload_parses() {
        let d = tmpdir("w");
        let p = write(
            &d,
            "w.yaml",
            "name: 1 topic / 100 partitions / 1kb\n\ntopics: 1\npartitionsPerTopic: 100\n\
             messageSize: 1024\npayloadFile: \"payload/payload-1Kb.data\"\n\
             subscriptionsPerTopic: 1\nconsumerPerSubscription: 4\nproducersPerTopic: 4\n\
             producerRate: 40000\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 15\n\
             warmupDurationMinutes: 0.5\nkeyDistributor: \"NO_KEY\"\n",
        );
        let w = Workload::from_file(&p).unwrap();
        assert_eq!(w.partitions_per_topic, 100);
        assert_eq!(w.message_size, 1024);
        assert_eq!(w.producer_rate, 40000.0);
        assert_eq!(w.consumer_per_subscription, 4);
        assert_eq!(w.test_duration, Duration::from_secs(900));
        assert_eq!(w.warmup_duration, Duration::from_secs(30));
        assert_eq!(w.payload_file, Some(d.join("payload/payload-1Kb.data")));
        assert_eq!(w.key_distributor, KeyDistributor::NoKey);
    }

    #[test]
    fn workload_errors_name_the_field() {
        let d = tmpdir("e");
        for (text, key) in [
            ("topics: 1\nmessageSize: 10\n", "partitionsPerTopic"),
            (
                "topics: 0\npartitionsPerTopic: 1\nmessageSize: 10\n",
                "topics",
            ),
            (
                "topics: x\npartitionsPerTopic: 1\nmessageSize: 10\n",
                "topics",
            ),
            (
                "topics: 1\npartitionsPerTopic: 1\nmessageSize: 10\nbogus: 1\n",
                "bogus",
            ),
            (
                "topics: 1\npartitionsPerTopic: 1\nmessageSize: 10\nrandomBytesRatio: 2\n",
                "randomBytesRatio",
            ),
            (
                "topics: 1\npartitionsPerTopic: 1\nmessageSize: 10\nkeyDistributor: X\n",
                "keyDistributor",
            ),
        ] {
            let p = write(&d, "bad.yaml", text);
            let e = Workload::from_file(&p).unwrap_err().to_string();
            assert!(e.contains(key), "{e} should mention {key}");
        }
        assert!(Workload::from_file(&d.join("missing.yaml")).is_err());
    }

    #[test]
    fn omb_driver_parses() {
        let d = tmpdir("d");
        let p = write(
            &d,
            "kafka-sync.yaml",
            "name: Kafka\ndriverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver\n\
             replicationFactor: 1\n\
             topicConfig: |\n  flush.messages=1\n  flush.ms=0\n\
             commonConfig: |\n  bootstrap.servers=localhost:9092\n  request.timeout.ms=60000\n\
             producerConfig: |\n  acks=all\n  linger.ms=1\n  batch.size=131072\n\
             consumerConfig: |\n  auto.offset.reset=earliest\n  fetch.min.bytes=1024\n",
        );
        let drv = Driver::from_file(&p).unwrap();
        assert_eq!(drv.acks, Acks::All);
        assert_eq!(drv.linger, Duration::from_millis(1));
        assert_eq!(drv.batch_bytes, 131072);
        assert_eq!(drv.request_timeout, Duration::from_secs(60));
        assert_eq!(drv.fetch_min_bytes, 1024);
        assert_eq!(drv.topic_config["flush.messages"], "1");
        assert_eq!(drv.bootstrap.as_deref(), Some("localhost:9092"));

        let p = write(&d, "bad.yaml", "producerConfig: |\n  acks=2\n");
        assert!(Driver::from_file(&p)
            .unwrap_err()
            .to_string()
            .contains("acks"));
        let p = write(&d, "bad2.yaml", "producerConfig: |\n  batch.size=-1\n");
        assert!(Driver::from_file(&p)
            .unwrap_err()
            .to_string()
            .contains("batch.size"));
    }
}
