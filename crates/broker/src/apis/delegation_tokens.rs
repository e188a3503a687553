//! CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and
//! DescribeDelegationToken: Sluice issues no delegation tokens, so every connection is answered
//! as Apache Kafka answers one that is not SASL authenticated, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
//! (docs/compatibility.md); `kafka-delegation-tokens` then reports Kafka's own error instead of
//! a closed connection.

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
