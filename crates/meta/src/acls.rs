//! ACLs (Kafka's `kafka-acls`, CreateAcls and DeleteAcls): every binding, kept in the metadata
//! store beside the topics, as client quotas and SCRAM credentials are, and changed atomically
//! ([`crate::record`]).
//!
//! Where they live:
//! - single broker: `<first log dir>/__sluice_meta/acls.json`, rewritten atomically;
//! - cluster: one etcd key `P/acls` holding the same JSON, changed only by compare-and-swap on
//!   its mod revision. Every broker re-reads it when the cluster's revision moves, so an ACL
//!   created through one broker is applied by every other without a restart.
//!
//! This module stores; it does not check bindings (sluice-acl does, the broker answers with
//! Kafka's error codes) and does not decide anything.

use std::collections::BTreeSet;
use std::path::PathBuf;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use sluice_acl::AclBinding;

use crate::record::{self, Codec};
use crate::{EmbeddedStore, EtcdStore, Meta, MetaError};

/// Every ACL.
pub type AclSet = BTreeSet<AclBinding>;

/// The stored form: a versioned list.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    acls: Vec<AclBinding>,
}

fn encode(acls: &AclSet) -> Vec<u8> {
    let stored = Stored {
        acls: acls.iter().cloned().collect(),
    };
    // Strings and unit enum variants only: serializing cannot fail.
    serde_json::to_vec_pretty(&stored).unwrap_or_default()
}

fn decode(bytes: &[u8], what: &str) -> Result<AclSet, MetaError> {
    let stored: Stored = serde_json::from_slice(bytes)
        .map_err(|e| MetaError::Etcd(format!("the ACLs in {what} do not parse: {e}")))?;
    Ok(stored.acls.into_iter().collect())
}

/// The stored form, in a file or etcd.
const CODEC: Codec<AclSet> = Codec {
    decode,
    encode,
    what: "the ACLs",
};

/// Serializes read-modify-write of the embedded store's ACL file.
static EMBEDDED_ACLS: Mutex<()> = Mutex::new(());

impl EmbeddedStore {
    fn acls_path(&self) -> PathBuf {
        self.path.with_file_name("acls.json")
    }
}

impl EtcdStore {
    fn acls_key(&self) -> String {
        self.key("acls")
    }

    /// Every ACL (a linearizable read of the one record).
    pub fn acls(&self) -> Result<AclSet, MetaError> {
        self.read_record(&self.acls_key(), &CODEC)
    }
}

impl Meta {
    /// Every ACL, as the store holds them now (a linearizable read in a cluster).
    pub fn acls(&self) -> Result<AclSet, MetaError> {
        match self {
            Meta::Embedded { store, .. } => record::read_file(&store.acls_path(), &CODEC),
            Meta::Etcd(s) => s.acls(),
        }
    }

    /// Apply `change` to the ACLs atomically (in a cluster it may run more than once, each
    /// time on what the store holds then); returns the ACLs after it and what `change`
    /// returned.
    pub fn alter_acls<R>(
        &self,
        change: impl FnMut(AclSet) -> (AclSet, R),
    ) -> Result<(AclSet, R), MetaError> {
        match self {
            Meta::Embedded { store, .. } => {
                record::update_file(&store.acls_path(), &EMBEDDED_ACLS, &CODEC, change)
            }
            Meta::Etcd(s) => s.update_record(&s.acls_key(), &CODEC, change),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_acl::{Operation, PatternType, Permission, ResourceType};

    fn acl(name: &str, op: Operation) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            resource_name: name.into(),
            pattern_type: PatternType::Prefixed,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        }
    }

    #[test]
    fn acls_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let meta = || Meta::Embedded {
            store: EmbeddedStore::open(dir.path(), crate::new_cluster_id).unwrap(),
            node_id: 1,
        };
        let m = meta();
        assert!(m.acls().unwrap().is_empty());
        let (after, added) = m
            .alter_acls(|mut acls| {
                let added = acls.insert(acl("orders-", Operation::Read));
                acls.insert(acl("orders-", Operation::Write));
                (acls, added)
            })
            .unwrap();
        assert!(added);
        let (after2, removed) = m
            .alter_acls(|mut acls| {
                let removed = acls.remove(&acl("orders-", Operation::Write));
                (acls, removed)
            })
            .unwrap();
        assert!(removed);
        assert_eq!(after.len(), 2);
        drop(m);
        let read = meta().acls().unwrap();
        assert_eq!(read, after2);
        assert!(read.contains(&acl("orders-", Operation::Read)));
        let text = std::fs::read_to_string(dir.path().join("acls.json")).unwrap();
        assert!(text.contains("\"PREFIXED\""), "{text}");
    }
}
