//! DescribeUserScramCredentials and AlterUserScramCredentials (`kafka-configs --entity-type
//! users --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=...]'`,
//! `--delete-config SCRAM-SHA-256`, `--describe`), answered as Kafka's metadata image
//! (`ScramImage.describe`) and controller (`ScramControlManager.alterCredentials`) answer them,
//! with their messages.
//!
//! The client sends a salt and the salted password; the broker derives the stored key and
//! server key (the password never reaches the broker) and stores those with the salt and
//! iteration count in the metadata store, so every broker of a cluster sees them.
//!
//! Also here: SaslHandshake and SaslAuthenticate when they reach the broker, which is after a
//! connection authenticated or on a listener without SASL; the server's authenticator takes
//! them before that (crates/broker/src/sasl.rs).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, ResponseKind,
    SaslAuthenticateResponse, SaslHandshakeResponse,
};
use kafka_protocol::ResponseError;
use sluice_meta::{ScramAlteration, StoredScram};
use sluice_sasl::scram::{MAX_ITERATIONS, MIN_ITERATIONS};
use sluice_sasl::{ScramCredential, ScramMechanism};

use crate::wire::str_bytes;
use crate::Broker;

pub(crate) fn describe(
    broker: &Arc<Broker>,
    req: DescribeUserScramCredentialsRequest,
) -> Option<ResponseKind> {
    let table = broker.scram.table();
    // name -> asked more than once
    let mut users: BTreeMap<String, bool> = BTreeMap::new();
    match req.users.as_ref().filter(|u| !u.is_empty()) {
        // No names: every user with a credential.
        None => {
            for (user, _) in table.keys() {
                users.insert(user.clone(), false);
            }
        }
        Some(names) => {
            for u in names {
                let name = u.name.to_string();
                match users.get_mut(&name) {
                    Some(twice) => *twice = true,
                    None => {
                        users.insert(name, false);
                    }
                }
            }
        }
    }
    let results = users
        .into_iter()
        .map(|(user, twice)| {
            let result = DescribeUserScramCredentialsResult::default().with_user(str_bytes(user.as_str()));
            if twice {
                return result
                    .with_error_code(ResponseError::DuplicateResource.code())
                    .with_error_message(Some(str_bytes(format!(
                        "Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                    ))));
            }
            let infos: Vec<CredentialInfo> = [ScramMechanism::Sha256, ScramMechanism::Sha512]
                .into_iter()
                .filter_map(|m| {
                    let c = table.get(&(user.clone(), m.name().to_string()))?;
                    Some(
                        CredentialInfo::default()
                            .with_mechanism(m.kafka_type())
                            .with_iterations(i32::try_from(c.iterations).unwrap_or(i32::MAX)),
                    )
                })
                .collect();
            if infos.is_empty() {
                result
                    .with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(str_bytes(format!(
                        "Attempt to describe a user credential that does not exist: {user}"
                    ))))
            } else {
                result.with_credential_infos(infos)
            }
        })
        .collect();
    Some(ResponseKind::DescribeUserScramCredentials(
        DescribeUserScramCredentialsResponse::default().with_results(results),
    ))
}

type Outcome = (i16, String);

fn unacceptable(message: &str) -> Outcome {
    (
        ResponseError::UnacceptableCredential.code(),
        message.to_string(),
    )
}

/// Kafka's `validateScramUsernameAndMechanism`.
fn validate_name_and_mechanism(user: &str, mechanism: i8) -> Result<ScramMechanism, Outcome> {
    if user.is_empty() {
        return Err(unacceptable("Username must not be empty"));
    }
    ScramMechanism::from_kafka_type(mechanism).ok_or((
        ResponseError::UnsupportedSaslMechanism.code(),
        "Unknown SCRAM mechanism".to_string(),
    ))
}

/// DUPLICATE_RESOURCE: a user named more than once in one request.
fn duplicate() -> Outcome {
    (
        ResponseError::DuplicateResource.code(),
        "A user credential cannot be altered twice in the same request".to_string(),
    )
}

/// An alteration whose credentials could not be read from the store: each user it names (its
/// deletions, then its upsertions, as they come) answered the store's error.
fn store_unreadable(
    req: &AlterUserScramCredentialsRequest,
    e: &sluice_meta::MetaError,
) -> Vec<AlterUserScramCredentialsResult> {
    let code = crate::errors::meta_error_code(e);
    req.deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(req.upsertions.iter().map(|u| u.name.to_string()))
        .map(|user| {
            AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(user))
                .with_error_code(code)
                .with_error_message(Some(str_bytes(e.to_string())))
        })
        .collect()
}

/// What an AlterUserScramCredentials request changes, per user, and the users it refuses
/// (Kafka's `ScramControlManager.alterCredentials`): a user refused once is refused for the
/// whole request, and a user named twice is refused DUPLICATE_RESOURCE, dropping the change
/// already planned for it.
#[derive(Default)]
struct Alterations {
    deletions: BTreeMap<String, ScramAlteration>,
    upserts: BTreeMap<String, ScramAlteration>,
    errors: BTreeMap<String, Outcome>,
}

impl Alterations {
    /// The request's deletions: a credential deleted must exist in `current`
    /// (RESOURCE_NOT_FOUND otherwise), its name and mechanism valid.
    fn plan_deletions(
        &mut self,
        req: &AlterUserScramCredentialsRequest,
        current: &sluice_meta::ScramCredentials,
    ) {
        for d in &req.deletions {
            let user = d.name.to_string();
            if self.errors.contains_key(&user) {
                continue;
            }
            if self.deletions.remove(&user).is_some() {
                self.errors.insert(user, duplicate());
                continue;
            }
            match validate_name_and_mechanism(&user, d.mechanism) {
                Err(e) => {
                    self.errors.insert(user, e);
                }
                Ok(m) if !current.contains_key(&(user.clone(), m.name().to_string())) => {
                    self.errors.insert(
                        user,
                        (
                            ResponseError::ResourceNotFound.code(),
                            "Attempt to delete a user credential that does not exist".into(),
                        ),
                    );
                }
                Ok(m) => {
                    self.deletions.insert(
                        user.clone(),
                        ScramAlteration {
                            user,
                            mechanism: m.name().to_string(),
                            credential: None,
                        },
                    );
                }
            }
        }
    }

    /// The request's upsertions ([`upsertion`]): a user also deleted, or upserted twice, is
    /// refused DUPLICATE_RESOURCE.
    fn plan_upsertions(&mut self, req: &AlterUserScramCredentialsRequest) {
        for u in &req.upsertions {
            let user = u.name.to_string();
            if self.errors.contains_key(&user) {
                continue;
            }
            if self.deletions.remove(&user).is_some() || self.upserts.remove(&user).is_some() {
                self.errors.insert(user, duplicate());
                continue;
            }
            match upsertion(u) {
                Ok(a) => {
                    self.upserts.insert(user, a);
                }
                Err(e) => {
                    self.errors.insert(user, e);
                }
            }
        }
    }
}

/// One upsertion's credential: its name and mechanism valid, its iterations within
/// [`MIN_ITERATIONS`]..=[`MAX_ITERATIONS`] (UNACCEPTABLE_CREDENTIAL otherwise); the stored key
/// and server key derived from the salted password the client sent.
fn upsertion(u: &ScramCredentialUpsertion) -> Result<ScramAlteration, Outcome> {
    let user = u.name.to_string();
    let m = validate_name_and_mechanism(&user, u.mechanism)?;
    let Ok(iterations) = u32::try_from(u.iterations) else {
        return Err(unacceptable("Too few iterations"));
    };
    if iterations < MIN_ITERATIONS {
        return Err(unacceptable("Too few iterations"));
    }
    if iterations > MAX_ITERATIONS {
        return Err(unacceptable("Too many iterations"));
    }
    let c = ScramCredential::from_salted_password(m, &u.salt, &u.salted_password, iterations);
    Ok(ScramAlteration {
        user,
        mechanism: m.name().to_string(),
        credential: Some(StoredScram {
            salt: c.salt,
            stored_key: c.stored_key,
            server_key: c.server_key,
            iterations,
        }),
    })
}

/// Write the changes to the metadata store, every broker's table then following, and take
/// the new table here at once; the store's error when the write failed.
fn store_changes(broker: &Broker, changes: &[ScramAlteration]) -> Option<Outcome> {
    if changes.is_empty() {
        return None;
    }
    match broker.meta.alter_scram_credentials(changes) {
        Ok(table) => {
            broker.scram.set_table(table);
            None
        }
        Err(e) => {
            tracing::warn!("altering SCRAM credentials failed: {e}");
            Some((crate::errors::meta_error_code(&e), e.to_string()))
        }
    }
}

/// The results: each change (deletions, then upsertions, by user) with the store's error if
/// the write failed, then each refused user with its own.
fn alter_results(
    changes: &[ScramAlteration],
    stored_error: Option<Outcome>,
    errors: BTreeMap<String, Outcome>,
) -> Vec<AlterUserScramCredentialsResult> {
    let mut results: Vec<AlterUserScramCredentialsResult> = changes
        .iter()
        .map(|a| {
            let r =
                AlterUserScramCredentialsResult::default().with_user(str_bytes(a.user.as_str()));
            match &stored_error {
                None => r,
                Some((code, message)) => r
                    .with_error_code(*code)
                    .with_error_message(Some(str_bytes(message.as_str()))),
            }
        })
        .collect();
    results.extend(errors.into_iter().map(|(user, (code, message))| {
        AlterUserScramCredentialsResult::default()
            .with_user(str_bytes(user))
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message)))
    }));
    results
}

/// AlterUserScramCredentials: the changes planned against the credentials in the store
/// (another broker may have changed them; [`Alterations`]), written together
/// ([`store_changes`]), and answered per user ([`alter_results`]).
pub(crate) fn alter(
    broker: &Arc<Broker>,
    req: AlterUserScramCredentialsRequest,
) -> Option<ResponseKind> {
    let results = match broker.meta.scram_credentials() {
        Err(e) => store_unreadable(&req, &e),
        Ok(current) => {
            let mut plan = Alterations::default();
            plan.plan_deletions(&req, &current);
            plan.plan_upsertions(&req);
            let changes: Vec<ScramAlteration> = plan
                .deletions
                .values()
                .chain(plan.upserts.values())
                .cloned()
                .collect();
            let stored_error = store_changes(broker, &changes);
            alter_results(&changes, stored_error, plan.errors)
        }
    };
    Some(ResponseKind::AlterUserScramCredentials(
        AlterUserScramCredentialsResponse::default().with_results(results),
    ))
}

/// SaslHandshake on an authenticated connection (without re-authentication) or a listener
/// without SASL: Kafka's `KafkaApis.handleSaslHandshakeRequest`.
pub(crate) fn sasl_handshake_refused() -> Option<ResponseKind> {
    Some(ResponseKind::SaslHandshake(
        SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code()),
    ))
}

/// SaslAuthenticate on an authenticated connection or a listener without SASL: Kafka's
/// `KafkaApis.handleSaslAuthenticateRequest`.
pub(crate) fn sasl_authenticate_refused() -> Option<ResponseKind> {
    Some(ResponseKind::SaslAuthenticate(
        SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::IllegalSaslState.code())
            .with_error_message(Some(str_bytes(
                "SaslAuthenticate request received after successful authentication",
            ))),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(user: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(str_bytes(user))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(bytes::Bytes::from_static(b"salt"))
            .with_salted_password(bytes::Bytes::from_static(&[7; 32]))
    }

    /// An upsertion needs a name, a known mechanism and iterations within Kafka's bounds.
    #[test]
    fn an_upsertion_checks_its_name_mechanism_and_iterations() {
        let unacceptable = ResponseError::UnacceptableCredential.code();
        let refused = |u| upsertion(&u).err();
        assert_eq!(
            refused(upsert("", 1, 8192)),
            Some((unacceptable, "Username must not be empty".to_string()))
        );
        assert_eq!(
            refused(upsert("alice", 9, 8192)).map(|(code, _)| code),
            Some(ResponseError::UnsupportedSaslMechanism.code())
        );
        for (iterations, message) in [
            (-1, "Too few iterations"),
            (MIN_ITERATIONS as i32 - 1, "Too few iterations"),
            (MAX_ITERATIONS as i32 + 1, "Too many iterations"),
        ] {
            assert_eq!(
                refused(upsert("alice", 1, iterations)),
                Some((unacceptable, message.to_string()))
            );
        }
        let a = upsert("alice", 1, MIN_ITERATIONS as i32);
        let Ok(alteration) = upsertion(&a) else {
            panic!("a valid upsertion was refused");
        };
        assert_eq!(alteration.user, "alice");
        assert_eq!(
            alteration.credential.map(|c| c.iterations),
            Some(MIN_ITERATIONS)
        );
    }

    /// A user deleted and upserted in one request is refused DUPLICATE_RESOURCE, and
    /// neither change is made; deleting a credential that does not exist is refused
    /// RESOURCE_NOT_FOUND.
    #[test]
    fn a_user_named_twice_is_refused_and_changes_nothing() {
        use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
        let deletion = |user: &str| {
            ScramCredentialDeletion::default()
                .with_name(str_bytes(user))
                .with_mechanism(1)
        };
        let req = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![deletion("bob"), deletion("carol")])
            .with_upsertions(vec![upsert("bob", 1, 8192), upsert("alice", 1, 8192)]);
        let mut current = sluice_meta::ScramCredentials::new();
        current.insert(
            ("bob".to_string(), ScramMechanism::Sha256.name().to_string()),
            StoredScram {
                salt: vec![],
                stored_key: vec![],
                server_key: vec![],
                iterations: 8192,
            },
        );
        let mut plan = Alterations::default();
        plan.plan_deletions(&req, &current);
        plan.plan_upsertions(&req);
        assert!(plan.deletions.is_empty());
        assert_eq!(plan.upserts.keys().collect::<Vec<_>>(), vec!["alice"]);
        let codes: Vec<(&str, i16)> = plan
            .errors
            .iter()
            .map(|(u, (code, _))| (u.as_str(), *code))
            .collect();
        assert_eq!(
            codes,
            vec![
                ("bob", ResponseError::DuplicateResource.code()),
                ("carol", ResponseError::ResourceNotFound.code()),
            ]
        );
    }
}
