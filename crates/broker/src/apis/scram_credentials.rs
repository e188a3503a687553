//! DescribeUserScramCredentials: Sluice has no SASL, so no user has SCRAM credentials. The
//! answer is Kafka's for a cluster without any: nothing for "every user", RESOURCE_NOT_FOUND
//! for a named one, DUPLICATE_RESOURCE for a name asked twice. `kafka-configs --describe
//! --entity-type users` asks this beside DescribeClientQuotas.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, ResponseKind,
};
use kafka_protocol::ResponseError;

use super::str_bytes;

pub(crate) fn describe(req: DescribeUserScramCredentialsRequest) -> Option<ResponseKind> {
    // name -> asked more than once
    let mut users: BTreeMap<String, bool> = BTreeMap::new();
    for u in req.users.iter().flatten() {
        let name = u.name.to_string();
        match users.get_mut(&name) {
            Some(twice) => *twice = true,
            None => {
                users.insert(name, false);
            }
        }
    }
    let results = users
        .into_iter()
        .map(|(user, twice)| {
            let (code, message) = if twice {
                (
                    ResponseError::DuplicateResource.code(),
                    format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
                )
            } else {
                (
                    ResponseError::ResourceNotFound.code(),
                    format!("Attempt to describe a user credential that does not exist: {user}"),
                )
            };
            DescribeUserScramCredentialsResult::default()
                .with_user(str_bytes(user))
                .with_error_code(code)
                .with_error_message(Some(str_bytes(message)))
        })
        .collect();
    Some(ResponseKind::DescribeUserScramCredentials(
        DescribeUserScramCredentialsResponse::default().with_results(results),
    ))
}
