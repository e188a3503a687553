//! CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
//! DescribeDelegationToken as Apache Kafka answers them on a connection that is not SASL
//! authenticated: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. Sluice has only PLAINTEXT listeners
//! (docs/compatibility.md), so this is every connection; `kafka-delegation-tokens` then reports
//! Kafka's own error instead of a closed connection.

use kafka_protocol::messages::{
    CreateDelegationTokenResponse, DescribeDelegationTokenResponse, ExpireDelegationTokenResponse,
    RenewDelegationTokenResponse, ResponseKind,
};
use kafka_protocol::ResponseError;

const NOT_ALLOWED: i16 = ResponseError::DelegationTokenRequestNotAllowed.code();

pub(crate) fn create() -> Option<ResponseKind> {
    Some(ResponseKind::CreateDelegationToken(
        CreateDelegationTokenResponse::default().with_error_code(NOT_ALLOWED),
    ))
}

pub(crate) fn renew() -> Option<ResponseKind> {
    Some(ResponseKind::RenewDelegationToken(
        RenewDelegationTokenResponse::default().with_error_code(NOT_ALLOWED),
    ))
}

pub(crate) fn expire() -> Option<ResponseKind> {
    Some(ResponseKind::ExpireDelegationToken(
        ExpireDelegationTokenResponse::default().with_error_code(NOT_ALLOWED),
    ))
}

pub(crate) fn describe() -> Option<ResponseKind> {
    Some(ResponseKind::DescribeDelegationToken(
        DescribeDelegationTokenResponse::default().with_error_code(NOT_ALLOWED),
    ))
}
