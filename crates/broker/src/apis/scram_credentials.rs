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

pub(crate) fn alter(
    broker: &Arc<Broker>,
    req: AlterUserScramCredentialsRequest,
) -> Option<ResponseKind> {
    let duplicate = || {
        (
            ResponseError::DuplicateResource.code(),
            "A user credential cannot be altered twice in the same request".to_string(),
        )
    };
    // The current credentials, read from the store (another broker may have changed them).
    let current = match broker.meta.scram_credentials() {
        Ok(c) => c,
        Err(e) => {
            let code = crate::errors::meta_error_code(&e);
            let results = req
                .deletions
                .iter()
                .map(|d| d.name.to_string())
                .chain(req.upsertions.iter().map(|u| u.name.to_string()))
                .map(|user| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(str_bytes(user))
                        .with_error_code(code)
                        .with_error_message(Some(str_bytes(e.to_string())))
                })
                .collect();
            return Some(ResponseKind::AlterUserScramCredentials(
                AlterUserScramCredentialsResponse::default().with_results(results),
            ));
        }
    };
    let mut deletions: BTreeMap<String, ScramAlteration> = BTreeMap::new();
    let mut upserts: BTreeMap<String, ScramAlteration> = BTreeMap::new();
    let mut errors: BTreeMap<String, Outcome> = BTreeMap::new();
    for d in &req.deletions {
        let user = d.name.to_string();
        if errors.contains_key(&user) {
            continue;
        }
        if deletions.remove(&user).is_some() {
            errors.insert(user, duplicate());
            continue;
        }
        match validate_name_and_mechanism(&user, d.mechanism) {
            Err(e) => {
                errors.insert(user, e);
            }
            Ok(m) if !current.contains_key(&(user.clone(), m.name().to_string())) => {
                errors.insert(
                    user,
                    (
                        ResponseError::ResourceNotFound.code(),
                        "Attempt to delete a user credential that does not exist".into(),
                    ),
                );
            }
            Ok(m) => {
                deletions.insert(
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
    for u in &req.upsertions {
        let user = u.name.to_string();
        if errors.contains_key(&user) {
            continue;
        }
        if deletions.remove(&user).is_some() || upserts.remove(&user).is_some() {
            errors.insert(user, duplicate());
            continue;
        }
        let m = match validate_name_and_mechanism(&user, u.mechanism) {
            Ok(m) => m,
            Err(e) => {
                errors.insert(user, e);
                continue;
            }
        };
        let Ok(iterations) = u32::try_from(u.iterations) else {
            errors.insert(user, unacceptable("Too few iterations"));
            continue;
        };
        if iterations < MIN_ITERATIONS {
            errors.insert(user, unacceptable("Too few iterations"));
            continue;
        }
        if iterations > MAX_ITERATIONS {
            errors.insert(user, unacceptable("Too many iterations"));
            continue;
        }
        let c = ScramCredential::from_salted_password(m, &u.salt, &u.salted_password, iterations);
        upserts.insert(
            user.clone(),
            ScramAlteration {
                user,
                mechanism: m.name().to_string(),
                credential: Some(StoredScram {
                    salt: c.salt,
                    stored_key: c.stored_key,
                    server_key: c.server_key,
                    iterations,
                }),
            },
        );
    }
    let changes: Vec<ScramAlteration> = deletions
        .values()
        .chain(upserts.values())
        .cloned()
        .collect();
    let mut stored_error: Option<Outcome> = None;
    if !changes.is_empty() {
        match broker.meta.alter_scram_credentials(&changes) {
            Ok(table) => broker.scram.set_table(table),
            Err(e) => {
                tracing::warn!("altering SCRAM credentials failed: {e}");
                stored_error = Some((crate::errors::meta_error_code(&e), e.to_string()));
            }
        }
    }
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
