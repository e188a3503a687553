//! SCRAM credentials (Kafka's `kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]'
//! --entity-type users`): for each user and mechanism the salt, stored key, server key and
//! iteration count, never the password. Kept in the metadata store beside the topics, as
//! client quotas are (`quotas.rs`), and changed atomically.
//!
//! Where they live:
//! - single broker: `<first log dir>/__sluice_meta/scram-credentials.json`, rewritten
//!   atomically (write, fsync, rename);
//! - cluster: one etcd key `P/scram_credentials` holding the same JSON, changed only by
//!   compare-and-swap on its mod revision. Every broker re-reads it when the cluster's revision
//!   moves, so a user created through one broker logs in on every other without a restart.
//!
//! This module stores and applies; it does not validate names, mechanisms or iteration counts
//! (the broker does, with Kafka's error codes), and does not derive keys (sluice-sasl does).

use std::collections::BTreeMap;
use std::path::PathBuf;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::record::{self, Codec};
use crate::{EmbeddedStore, EtcdStore, Meta, MetaError};

/// One stored credential.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredScram {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: u32,
}

impl std::fmt::Debug for StoredScram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredScram")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// Every credential, by (user name, mechanism name such as `SCRAM-SHA-256`).
pub type ScramCredentials = BTreeMap<(String, String), StoredScram>;

/// One requested change: set the credential of (user, mechanism), or remove it (None).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScramAlteration {
    pub user: String,
    pub mechanism: String,
    pub credential: Option<StoredScram>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    credentials: Vec<StoredEntry>,
}

/// The stored form: byte strings in hexadecimal.
#[derive(Debug, Serialize, Deserialize)]
struct StoredEntry {
    user: String,
    mechanism: String,
    salt: String,
    stored_key: String,
    server_key: String,
    iterations: u32,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn encode(credentials: &ScramCredentials) -> Vec<u8> {
    let stored = Stored {
        credentials: credentials
            .iter()
            .map(|((user, mechanism), c)| StoredEntry {
                user: user.clone(),
                mechanism: mechanism.clone(),
                salt: hex(&c.salt),
                stored_key: hex(&c.stored_key),
                server_key: hex(&c.server_key),
                iterations: c.iterations,
            })
            .collect(),
    };
    // Strings and numbers only: serializing cannot fail.
    serde_json::to_vec_pretty(&stored).unwrap_or_default()
}

fn decode(bytes: &[u8], what: &str) -> Result<ScramCredentials, String> {
    let stored: Stored = serde_json::from_slice(bytes)
        .map_err(|e| format!("the SCRAM credentials in {what} do not parse: {e}"))?;
    let mut out = ScramCredentials::new();
    for e in stored.credentials {
        let field = |name: &str, text: &str| {
            unhex(text).ok_or_else(|| {
                format!(
                    "the SCRAM credential of {} ({}) in {what} has a malformed {name}",
                    e.user, e.mechanism
                )
            })
        };
        let credential = StoredScram {
            salt: field("salt", &e.salt)?,
            stored_key: field("stored key", &e.stored_key)?,
            server_key: field("server key", &e.server_key)?,
            iterations: e.iterations,
        };
        out.insert((e.user, e.mechanism), credential);
    }
    Ok(out)
}

/// `credentials` with `alterations` applied, in order.
pub fn apply(
    mut credentials: ScramCredentials,
    alterations: &[ScramAlteration],
) -> ScramCredentials {
    for a in alterations {
        let key = (a.user.clone(), a.mechanism.clone());
        match &a.credential {
            Some(c) => {
                credentials.insert(key, c.clone());
            }
            None => {
                credentials.remove(&key);
            }
        }
    }
    credentials
}

/// Serializes read-modify-write of the embedded store's credentials file.
static EMBEDDED_SCRAM: Mutex<()> = Mutex::new(());

/// The stored form, in a file or etcd ([`crate::record`]).
const CODEC: Codec<ScramCredentials> = Codec {
    decode: |bytes, what| decode(bytes, what).map_err(MetaError::Etcd),
    encode,
    what: "the SCRAM credentials",
};

impl EmbeddedStore {
    fn scram_path(&self) -> PathBuf {
        self.path.with_file_name("scram-credentials.json")
    }

    /// Every credential (none if the file does not exist yet).
    pub fn scram_credentials(&self) -> Result<ScramCredentials, MetaError> {
        record::read_file(&self.scram_path(), &CODEC)
    }

    /// Apply `alterations` in one atomic rewrite; returns the credentials after it.
    pub fn alter_scram_credentials(
        &self,
        alterations: &[ScramAlteration],
    ) -> Result<ScramCredentials, MetaError> {
        let change = |current| (apply(current, alterations), ());
        Ok(record::update_file(&self.scram_path(), &EMBEDDED_SCRAM, &CODEC, change)?.0)
    }
}

impl EtcdStore {
    fn scram_key(&self) -> String {
        self.key("scram_credentials")
    }

    /// Every credential (a linearizable read of the one record).
    pub fn scram_credentials(&self) -> Result<ScramCredentials, MetaError> {
        self.read_record(&self.scram_key(), &CODEC)
    }

    /// Apply `alterations` by compare-and-swap on the record; returns the credentials after.
    pub fn alter_scram_credentials(
        &self,
        alterations: &[ScramAlteration],
    ) -> Result<ScramCredentials, MetaError> {
        let change = |current| (apply(current, alterations), ());
        Ok(self.update_record(&self.scram_key(), &CODEC, change)?.0)
    }
}

impl Meta {
    /// Every SCRAM credential, as the store holds them now.
    pub fn scram_credentials(&self) -> Result<ScramCredentials, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.scram_credentials(),
            Meta::Etcd(s) => s.scram_credentials(),
        }
    }

    /// Apply validated alterations atomically; returns the credentials after them.
    pub fn alter_scram_credentials(
        &self,
        alterations: &[ScramAlteration],
    ) -> Result<ScramCredentials, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.alter_scram_credentials(alterations),
            Meta::Etcd(s) => s.alter_scram_credentials(alterations),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cred(n: u8) -> StoredScram {
        StoredScram {
            salt: vec![n, 1, 2],
            stored_key: vec![n; 32],
            server_key: vec![255 - n; 32],
            iterations: 4096 + u32::from(n),
        }
    }

    #[test]
    fn alterations_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), crate::new_cluster_id).unwrap();
        assert!(store.scram_credentials().unwrap().is_empty());
        let set = |user: &str, mech: &str, c: Option<StoredScram>| ScramAlteration {
            user: user.into(),
            mechanism: mech.into(),
            credential: c,
        };
        store
            .alter_scram_credentials(&[
                set("alice", "SCRAM-SHA-256", Some(cred(1))),
                set("alice", "SCRAM-SHA-512", Some(cred(2))),
                set("b,=b", "SCRAM-SHA-256", Some(cred(3))),
            ])
            .unwrap();
        let after = store
            .alter_scram_credentials(&[set("alice", "SCRAM-SHA-512", None)])
            .unwrap();
        drop(store);
        let store = EmbeddedStore::open(dir.path(), crate::new_cluster_id).unwrap();
        let read = store.scram_credentials().unwrap();
        assert_eq!(read, after);
        assert_eq!(read.len(), 2);
        assert_eq!(read[&("b,=b".into(), "SCRAM-SHA-256".into())], cred(3));
        // The file holds no password, only what SCRAM stores.
        let text = std::fs::read_to_string(store.scram_path()).unwrap();
        assert!(text.contains("stored_key"));
    }

    #[test]
    fn malformed_records_are_errors() {
        assert!(decode(b"{", "x").is_err());
        assert!(decode(
            br#"{"credentials":[{"user":"a","mechanism":"SCRAM-SHA-256","salt":"zz","stored_key":"","server_key":"","iterations":4096}]}"#,
            "x"
        )
        .unwrap_err()
        .contains("malformed salt"));
    }
}
