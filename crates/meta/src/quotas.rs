//! Client quotas (Kafka's `kafka-configs --entity-type users|clients`): which quota entity
//! has which quota values, kept in the metadata store beside the topics.
//!
//! An entity is a set of (entity type, name) pairs, Kafka's `ClientQuotaEntity`: `user`,
//! `client-id` (or both), or `ip`; a name of `None` is the type's default entity
//! (`--entity-default`). Values are Kafka's quota keys (`producer_byte_rate`, ...) with their
//! numbers. This module stores them and applies alterations atomically; it does not validate
//! keys or values (the broker does, with Kafka's error codes) and does not enforce anything.
//!
//! Where they live:
//! - single broker: `<first log dir>/__sluice_meta/client-quotas.json`, rewritten atomically
//!   (write, fsync, rename) like the topics' file;
//! - cluster: one etcd key `P/client_quotas` holding the same JSON, changed only by
//!   compare-and-swap on its mod revision, so two brokers altering quotas at once cannot lose
//!   each other's change. Every broker's watch of the prefix sees the change; the broker
//!   re-reads the key when the cluster's revision moves ([`EtcdStore::client_quotas`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::record::{self, Codec};
use crate::{EmbeddedStore, EtcdStore, Meta, MetaError};

/// A quota entity: entity type (`user`, `client-id`, `ip`) -> name, `None` for the default.
pub type QuotaEntity = BTreeMap<String, Option<String>>;

/// Every entity with quotas, and its quota values by key.
pub type ClientQuotas = BTreeMap<QuotaEntity, BTreeMap<String, f64>>;

/// One entity's requested changes: key -> new value, or `None` to remove the key.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub ops: Vec<(String, Option<f64>)>,
}

/// The stored form: a list, because JSON object keys must be strings.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    entries: Vec<StoredEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredEntry {
    entity: QuotaEntity,
    values: BTreeMap<String, f64>,
}

fn encode(quotas: &ClientQuotas) -> Vec<u8> {
    let stored = Stored {
        entries: quotas
            .iter()
            .map(|(entity, values)| StoredEntry {
                entity: entity.clone(),
                values: values.clone(),
            })
            .collect(),
    };
    // Plain strings, options and finite numbers: serializing cannot fail.
    serde_json::to_vec_pretty(&stored).unwrap_or_default()
}

fn decode(bytes: &[u8], what: &str) -> Result<ClientQuotas, MetaError> {
    let stored: Stored = serde_json::from_slice(bytes)
        .map_err(|e| MetaError::Etcd(format!("the client quotas in {what} do not parse: {e}")))?;
    Ok(stored
        .entries
        .into_iter()
        .filter(|e| !e.values.is_empty())
        .map(|e| (e.entity, e.values))
        .collect())
}

/// `quotas` with `alterations` applied (keys set or removed; entities left without values
/// disappear).
pub fn apply(mut quotas: ClientQuotas, alterations: &[QuotaAlteration]) -> ClientQuotas {
    for a in alterations {
        let values = quotas.entry(a.entity.clone()).or_default();
        for (key, value) in &a.ops {
            match value {
                Some(v) => {
                    values.insert(key.clone(), *v);
                }
                None => {
                    values.remove(key);
                }
            }
        }
        if values.is_empty() {
            quotas.remove(&a.entity);
        }
    }
    quotas
}

/// Serializes read-modify-write of the embedded store's quota file (one store per process).
static EMBEDDED_QUOTAS: Mutex<()> = Mutex::new(());

/// The stored form, in a file or etcd ([`crate::record`]).
const CODEC: Codec<ClientQuotas> = Codec {
    decode,
    encode,
    what: "the client quotas",
};

impl EmbeddedStore {
    fn quotas_path(&self) -> PathBuf {
        self.path.with_file_name("client-quotas.json")
    }

    /// Every entity with quotas (none if the file does not exist yet).
    pub fn client_quotas(&self) -> Result<ClientQuotas, MetaError> {
        record::read_file(&self.quotas_path(), &CODEC)
    }

    /// Apply `alterations` in one atomic rewrite; returns the quotas after it.
    pub fn alter_client_quotas(
        &self,
        alterations: &[QuotaAlteration],
    ) -> Result<ClientQuotas, MetaError> {
        let change = |current| (apply(current, alterations), ());
        Ok(record::update_file(&self.quotas_path(), &EMBEDDED_QUOTAS, &CODEC, change)?.0)
    }
}

impl EtcdStore {
    fn quotas_key(&self) -> String {
        self.key("client_quotas")
    }

    /// Every entity with quotas (a linearizable read of the one record).
    pub fn client_quotas(&self) -> Result<ClientQuotas, MetaError> {
        self.read_record(&self.quotas_key(), &CODEC)
    }

    /// Apply `alterations` by compare-and-swap on the record; returns the quotas after it.
    pub fn alter_client_quotas(
        &self,
        alterations: &[QuotaAlteration],
    ) -> Result<ClientQuotas, MetaError> {
        let change = |current| (apply(current, alterations), ());
        Ok(self.update_record(&self.quotas_key(), &CODEC, change)?.0)
    }
}

impl Meta {
    /// Every entity with quotas, as the store holds them now.
    pub fn client_quotas(&self) -> Result<ClientQuotas, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.client_quotas(),
            Meta::Etcd(s) => s.client_quotas(),
        }
    }

    /// Apply validated alterations atomically; returns the quotas after them.
    pub fn alter_client_quotas(
        &self,
        alterations: &[QuotaAlteration],
    ) -> Result<ClientQuotas, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.alter_client_quotas(alterations),
            Meta::Etcd(s) => s.alter_client_quotas(alterations),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entity(pairs: &[(&str, Option<&str>)]) -> QuotaEntity {
        pairs
            .iter()
            .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
            .collect()
    }

    #[test]
    fn alterations_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), crate::new_cluster_id).unwrap();
        assert!(store.client_quotas().unwrap().is_empty());
        let user_default = entity(&[("user", None)]);
        let both = entity(&[("user", Some("alice")), ("client-id", Some("c 1\n"))]);
        store
            .alter_client_quotas(&[
                QuotaAlteration {
                    entity: user_default.clone(),
                    ops: vec![("producer_byte_rate".into(), Some(1024.0))],
                },
                QuotaAlteration {
                    entity: both.clone(),
                    ops: vec![
                        ("request_percentage".into(), Some(12.5)),
                        ("consumer_byte_rate".into(), Some(10.0)),
                    ],
                },
            ])
            .unwrap();
        let after = store
            .alter_client_quotas(&[QuotaAlteration {
                entity: both.clone(),
                ops: vec![("consumer_byte_rate".into(), None)],
            }])
            .unwrap();
        drop(store);
        let store = EmbeddedStore::open(dir.path(), crate::new_cluster_id).unwrap();
        let read = store.client_quotas().unwrap();
        assert_eq!(read, after);
        assert_eq!(read[&user_default]["producer_byte_rate"], 1024.0);
        assert_eq!(read[&both].len(), 1);
        assert_eq!(read[&both]["request_percentage"], 12.5);
        // Removing the last key removes the entity.
        let read = store
            .alter_client_quotas(&[QuotaAlteration {
                entity: both.clone(),
                ops: vec![("request_percentage".into(), None)],
            }])
            .unwrap();
        assert!(!read.contains_key(&both));
    }
}
