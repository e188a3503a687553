//! Dynamic broker configs (`kafka-configs --entity-type brokers --alter`): for each entity (a
//! broker id, or [`DEFAULT_ENTITY`] for the cluster-wide default) the configs set at run time,
//! by Kafka name, values already validated by the broker.
//!
//! Single broker: `broker-configs.v1` beside the embedded store's file, rewritten atomically
//! (write, fsync, rename). Cluster: one etcd record per entity, `P/broker_configs/<id>` and
//! `P/broker_configs/<default>` (JSON object of name to value), read with every view (so the
//! etcd watch that carries topic changes to every broker carries these too) and changed by
//! compare-and-swap on the record's mod revision.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::entity_configs::{entity_name, entity_of, RECORD_PREFIX};
pub use crate::entity_configs::{BrokerConfigs, EntityConfigs, DEFAULT_ENTITY, FEATURES_ENTITY};
use crate::etcd::{Compare, Op};
use crate::{EtcdStore, Meta, MetaError};

/// The dynamic configs of one entity with the version a change must name (see
/// [`Meta::set_broker_configs`]): etcd's mod revision (0 when absent), or the file's
/// generation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionedConfigs {
    pub configs: EntityConfigs,
    pub version: i64,
}

const FILE_NAME: &str = "broker-configs.v1";

#[derive(Debug, Default)]
struct FileState {
    configs: BrokerConfigs,
    generation: i64,
}

/// The single broker's dynamic configs file.
#[derive(Debug)]
pub struct BrokerConfigFile {
    path: PathBuf,
    state: Mutex<FileState>,
}

impl BrokerConfigFile {
    /// Open (or start empty) the file in the embedded store's directory.
    pub fn open(dir: &Path) -> Result<BrokerConfigFile, MetaError> {
        let path = dir.join(FILE_NAME);
        let configs = match fs::read_to_string(&path) {
            Ok(text) => parse(&path, &text)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => BrokerConfigs::new(),
            Err(source) => return Err(MetaError::Io { path, source }),
        };
        Ok(BrokerConfigFile {
            path,
            state: Mutex::new(FileState {
                configs,
                generation: 1,
            }),
        })
    }

    pub fn all(&self) -> BrokerConfigs {
        self.state.lock().configs.clone()
    }

    fn value(&self, entity: &str, name: &str) -> Option<String> {
        self.state.lock().configs.get(entity)?.get(name).cloned()
    }

    fn get(&self, entity: &str) -> VersionedConfigs {
        let st = self.state.lock();
        VersionedConfigs {
            configs: st.configs.get(entity).cloned().unwrap_or_default(),
            version: st.generation,
        }
    }

    fn set(&self, entity: &str, configs: EntityConfigs, version: i64) -> Result<(), MetaError> {
        let mut st = self.state.lock();
        if st.generation != version {
            return Err(changed_meanwhile(entity));
        }
        let mut next = st.configs.clone();
        if configs.is_empty() {
            next.remove(entity);
        } else {
            next.insert(entity.to_string(), configs);
        }
        self.persist(&next)?;
        st.configs = next;
        st.generation += 1;
        Ok(())
    }

    fn persist(&self, configs: &BrokerConfigs) -> Result<(), MetaError> {
        let mut text = String::from(
            "# Sluice dynamic broker configs, format 1. Rewritten atomically; change them with kafka-configs.\n",
        );
        for (entity, values) in configs {
            for (k, v) in values {
                text.push_str(&format!(
                    "config {} {} {}\n",
                    entity_name(entity),
                    k,
                    crate::escape(v)
                ));
            }
        }
        crate::record::write_file_atomically(&self.path, text.as_bytes())
    }
}

fn changed_meanwhile(entity: &str) -> MetaError {
    MetaError::Etcd(format!(
        "the dynamic configs of {} changed while this change was made; try again",
        entity_name(entity)
    ))
}

fn parse(path: &Path, text: &str) -> Result<BrokerConfigs, MetaError> {
    let mut out = BrokerConfigs::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut parts = line.splitn(4, ' ');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("config"), Some(entity), Some(key)) => {
                let value = crate::unescape(parts.next().unwrap_or(""));
                out.entry(entity_of(entity))
                    .or_default()
                    .insert(key.to_string(), value);
            }
            _ => {
                return Err(MetaError::Parse {
                    path: path.to_path_buf(),
                    line: i + 1,
                    reason: "not a config record".to_string(),
                })
            }
        }
    }
    Ok(out)
}

impl EtcdStore {
    fn broker_configs_key(&self, entity: &str) -> String {
        self.key(&format!("{RECORD_PREFIX}{}", entity_name(entity)))
    }

    /// One entity's configs as etcd has them now.
    pub fn broker_configs_of(&self, entity: &str) -> Result<VersionedConfigs, MetaError> {
        let kv = self
            .etcd
            .get(&self.broker_configs_key(entity))
            .map_err(crate::cluster::etcd_err)?;
        Ok(match kv {
            Some(kv) => VersionedConfigs {
                configs: crate::cluster::parse_json(&kv)?,
                version: kv.mod_revision,
            },
            None => VersionedConfigs::default(),
        })
    }

    /// Replace one entity's configs if its record is still at `version` (an empty set removes
    /// the record), then read the view again.
    pub fn set_broker_configs(
        &self,
        entity: &str,
        configs: &EntityConfigs,
        version: i64,
    ) -> Result<(), MetaError> {
        let key = self.broker_configs_key(entity);
        let op = if configs.is_empty() {
            Op::Delete { key: key.clone() }
        } else {
            Op::Put {
                key: key.clone(),
                value: crate::cluster::to_json(configs),
                lease: 0,
            }
        };
        let ok = self
            .etcd
            .txn(&[Compare::ModRevision(key, version)], &[op], &[])
            .map_err(crate::cluster::etcd_err)?;
        if !ok {
            return Err(changed_meanwhile(entity));
        }
        self.refresh()?;
        Ok(())
    }
}

impl Meta {
    /// Every entity's dynamic broker configs (in a cluster: as of the latest view).
    pub fn broker_configs(&self) -> BrokerConfigs {
        match self {
            Meta::Embedded { store, .. } => store.broker_configs.all(),
            Meta::Etcd(s) => s.view().broker_configs.clone(),
        }
    }

    /// One dynamic config of one entity (in a cluster: as of the latest view), without
    /// copying the others (a hot path: a share group's lock duration on every ShareFetch).
    pub fn broker_config(&self, entity: &str, name: &str) -> Option<String> {
        match self {
            Meta::Embedded { store, .. } => store.broker_configs.value(entity, name),
            Meta::Etcd(s) => s.view().broker_configs.get(entity)?.get(name).cloned(),
        }
    }

    /// One entity's dynamic configs, read now, with the version
    /// [`Meta::set_broker_configs`] checks.
    pub fn broker_configs_of(&self, entity: &str) -> Result<VersionedConfigs, MetaError> {
        match self {
            Meta::Embedded { store, .. } => Ok(store.broker_configs.get(entity)),
            Meta::Etcd(s) => s.broker_configs_of(entity),
        }
    }

    /// Replace one entity's dynamic configs, unless they changed since `version` was read.
    pub fn set_broker_configs(
        &self,
        entity: &str,
        configs: EntityConfigs,
        version: i64,
    ) -> Result<(), MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.broker_configs.set(entity, configs, version),
            Meta::Etcd(s) => s.set_broker_configs(entity, &configs, version),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trip_and_stale_versions() {
        let dir = tempfile::tempdir().unwrap();
        let f = BrokerConfigFile::open(dir.path()).unwrap();
        let v = f.get(DEFAULT_ENTITY);
        assert!(v.configs.is_empty());
        let mut c = EntityConfigs::new();
        c.insert("log.retention.ms".into(), "1000".into());
        c.insert("odd".into(), "a b\nc".into());
        f.set(DEFAULT_ENTITY, c.clone(), v.version).unwrap();
        // A change made from an older read is refused.
        assert!(f
            .set(DEFAULT_ENTITY, EntityConfigs::new(), v.version)
            .is_err());
        let b = f.get("1");
        let mut one = EntityConfigs::new();
        one.insert("log.segment.bytes".into(), "2097152".into());
        f.set("1", one.clone(), b.version).unwrap();
        drop(f);
        let f = BrokerConfigFile::open(dir.path()).unwrap();
        assert_eq!(f.get(DEFAULT_ENTITY).configs, c);
        assert_eq!(f.get("1").configs, one);
        let v = f.get("1");
        f.set("1", EntityConfigs::new(), v.version).unwrap();
        assert_eq!(f.all().len(), 1);
    }
}
