//! The wire layer: Kafka request framing, request headers, response encoding and the table of
//! API versions Sluice speaks. Built on the `kafka-protocol` crate's message types.
//!
//! Owns: turning the bytes of one size-delimited frame into a [`Request`] (header + typed body)
//! and a typed response back into a frame. Does not own: sockets (the server) or what a request
//! means (the broker).

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    api_versions_response::ApiVersion, ApiKey, ApiVersionsResponse, RequestHeader, RequestKind,
    ResponseHeader, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, Encodable};

mod spliced;

pub use kafka_protocol;
pub use spliced::{
    cut_at_markers, encode_fetch_response, encode_produce_request, region_marker, FramePart,
};

/// Length of the size prefix of every Kafka frame.
pub const FRAME_PREFIX_BYTES: usize = 4;

/// The API versions Sluice implements: (api key, min version, max version).
///
/// Architecture invariant: an API is listed here only if the broker handles every version in
/// its range; ApiVersions answers from this table.
pub const SUPPORTED_APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 11),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::AlterReplicaLogDirs, 1, 2),
    (ApiKey::DescribeLogDirs, 1, 5),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::FindCoordinator, 0, 6),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 10),
    (ApiKey::OffsetFetch, 1, 10),
    (ApiKey::DescribeGroups, 0, 6),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::ShareGroupHeartbeat, 1, 1),
    (ApiKey::ShareGroupDescribe, 1, 1),
    (ApiKey::ShareFetch, 1, 2),
    (ApiKey::ShareAcknowledge, 1, 2),
    (ApiKey::ReadShareGroupState, 0, 0),
    (ApiKey::WriteShareGroupState, 0, 1),
    (ApiKey::ReadShareGroupStateSummary, 0, 1),
    (ApiKey::DescribeShareGroupOffsets, 0, 1),
    (ApiKey::AlterShareGroupOffsets, 0, 0),
    (ApiKey::DeleteShareGroupOffsets, 0, 0),
    (ApiKey::InitializeShareGroupState, 0, 0),
    (ApiKey::DeleteShareGroupState, 0, 0),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::WriteTxnMarkers, 1, 1),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 2),
    (ApiKey::DescribeTopicPartitions, 0, 0),
    (ApiKey::ListConfigResources, 0, 1),
    (ApiKey::UpdateFeatures, 0, 2),
    (ApiKey::UnregisterBroker, 0, 0),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::CreateDelegationToken, 1, 3),
    (ApiKey::RenewDelegationToken, 1, 2),
    (ApiKey::ExpireDelegationToken, 1, 2),
    (ApiKey::DescribeDelegationToken, 1, 3),
];

/// The version range Sluice supports for `key`, if any.
pub fn supported_versions(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED_APIS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, min, max)| (*min, *max))
}

/// The ApiVersions entries for every supported API.
pub fn api_version_entries() -> Vec<ApiVersion> {
    SUPPORTED_APIS
        .iter()
        .map(|(k, min, max)| {
            ApiVersion::default()
                .with_api_key(*k as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect()
}

/// Why a frame could not become a request. The server logs it and closes the connection,
/// except for [`WireError::UnsupportedApiVersions`], which gets Kafka's fallback answer.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("frame of {len} bytes is too short for a request header")]
    Truncated { len: usize },
    #[error("unknown API key {api_key} (correlation id {correlation_id})")]
    UnknownApiKey { api_key: i16, correlation_id: i32 },
    #[error("unsupported version {version} of {api:?} (correlation id {correlation_id})")]
    UnsupportedVersion {
        api: ApiKey,
        version: i16,
        correlation_id: i32,
    },
    /// ApiVersions at a version above ours: answer with v0 and UNSUPPORTED_VERSION (KIP-511).
    #[error(
        "ApiVersions version {version} is newer than supported (correlation id {correlation_id})"
    )]
    UnsupportedApiVersions { version: i16, correlation_id: i32 },
    #[error("malformed {api:?} v{version} request (correlation id {correlation_id}): {reason}")]
    Malformed {
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        reason: String,
    },
}

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: RequestKind,
    /// The frame's size without its size prefix (what client quotas count for a produce).
    pub size_bytes: usize,
}

impl Request {
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }
    pub fn correlation_id(&self) -> i32 {
        self.header.correlation_id
    }
}

/// Decode one frame (without its 4-byte size prefix).
pub fn decode_request(mut frame: Bytes) -> Result<Request, WireError> {
    if frame.len() < 8 {
        return Err(WireError::Truncated { len: frame.len() });
    }
    let size_bytes = frame.len();
    let api_key_raw = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api_key = ApiKey::try_from(api_key_raw).map_err(|_| WireError::UnknownApiKey {
        api_key: api_key_raw,
        correlation_id,
    })?;
    let Some((min, max)) = supported_versions(api_key) else {
        return Err(WireError::UnknownApiKey {
            api_key: api_key_raw,
            correlation_id,
        });
    };
    if version < min || version > max {
        if api_key == ApiKey::ApiVersions && version > max {
            return Err(WireError::UnsupportedApiVersions {
                version,
                correlation_id,
            });
        }
        return Err(WireError::UnsupportedVersion {
            api: api_key,
            version,
            correlation_id,
        });
    }
    let malformed = |reason: String| WireError::Malformed {
        api: api_key,
        version,
        correlation_id,
        reason,
    };
    let header_version = api_key.request_header_version(version);
    let header =
        RequestHeader::decode(&mut frame, header_version).map_err(|e| malformed(e.to_string()))?;
    let body =
        RequestKind::decode(api_key, &mut frame, version).map_err(|e| malformed(e.to_string()))?;
    // Bytes after the body are ignored, as Apache Kafka does (it parses the body and never
    // looks at what is left): librdkafka 2.x sends three such bytes after a Metadata v13
    // request for all topics, which Kafka answers.
    Ok(Request {
        api_key,
        header,
        body,
        size_bytes,
    })
}

/// Encode a response for `api_key` at `version` as a complete frame (size prefix included).
pub fn encode_response(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<BytesMut, WireError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let header_version = api_key.response_header_version(version);
    let malformed = |reason: String| WireError::Malformed {
        api: api_key,
        version,
        correlation_id,
        reason,
    };
    header
        .encode(&mut buf, header_version)
        .map_err(|e| malformed(e.to_string()))?;
    body.encode(&mut buf, version)
        .map_err(|e| malformed(e.to_string()))?;
    let len = (buf.len() - FRAME_PREFIX_BYTES) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

/// Encode a request as a complete frame (size prefix included), for a broker-to-broker call.
pub fn encode_request(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    client_id: &str,
    body: &RequestKind,
) -> Result<BytesMut, WireError> {
    let mut buf = BytesMut::with_capacity(256);
    buf.put_i32(0);
    let header = RequestHeader::default()
        .with_request_api_key(api_key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(kafka_protocol::protocol::StrBytes::from_string(
            client_id.to_string(),
        )));
    let malformed = |reason: String| WireError::Malformed {
        api: api_key,
        version,
        correlation_id,
        reason,
    };
    header
        .encode(&mut buf, api_key.request_header_version(version))
        .map_err(|e| malformed(e.to_string()))?;
    body.encode(&mut buf, version)
        .map_err(|e| malformed(e.to_string()))?;
    let len = (buf.len() - FRAME_PREFIX_BYTES) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

/// Decode a response frame (without its size prefix) to a request made with `api_key` at
/// `version`: its correlation id and body.
pub fn decode_response(
    api_key: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<(i32, ResponseKind), WireError> {
    let malformed = |correlation_id: i32, reason: String| WireError::Malformed {
        api: api_key,
        version,
        correlation_id,
        reason,
    };
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(version))
        .map_err(|e| malformed(-1, e.to_string()))?;
    let id = header.correlation_id;
    let body = ResponseKind::decode(api_key, &mut frame, version)
        .map_err(|e| malformed(id, e.to_string()))?;
    Ok((id, body))
}

/// Kafka's answer to an ApiVersions request newer than we speak: v0 body, UNSUPPORTED_VERSION,
/// and our version table so the client can pick a version and retry.
pub fn unsupported_api_versions_response(correlation_id: i32) -> Result<BytesMut, WireError> {
    let body = ApiVersionsResponse::default()
        .with_error_code(kafka_protocol::ResponseError::UnsupportedVersion.code())
        .with_api_keys(api_version_entries());
    encode_response(
        ApiKey::ApiVersions,
        0,
        correlation_id,
        &ResponseKind::ApiVersions(body),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// librdkafka 2.16's Metadata v13 request for all topics, as captured on the wire (after
    /// the length prefix): three bytes follow the body, and Kafka answers it.
    #[test]
    fn trailing_bytes_after_the_body_are_ignored_as_kafka_does() {
        let frame = [
            0x00, 0x03, 0x00, 0x0d, 0x00, 0x00, 0x00, 0x03, 0x00, 0x07, b'r', b'd', b'k', b'a',
            b'f', b'k', b'a', 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
        ];
        let req = decode_request(Bytes::copy_from_slice(&frame)).unwrap();
        assert_eq!(req.version(), 13);
        match req.body {
            RequestKind::Metadata(m) => assert!(m.topics.is_none()),
            other => panic!("decoded as {other:?}"),
        }
    }

    /// Every API and version `SUPPORTED_APIS` advertises is one the protocol crate encodes
    /// and decodes: a request and a response of each, through the functions the server uses.
    #[test]
    fn every_advertised_version_round_trips() {
        macro_rules! defaults {
            ($key:expr, $($k:ident),+ $(,)?) => {
                match $key {
                    $(ApiKey::$k => (
                        RequestKind::$k(Default::default()),
                        ResponseKind::$k(Default::default()),
                    ),)+
                    other => panic!("{other:?} is advertised: add it to this test"),
                }
            };
        }
        let mut checked = 0;
        for &(key, min, max) in SUPPORTED_APIS {
            for version in min..=max {
                let (request, response) = defaults!(
                    key,
                    Produce,
                    Fetch,
                    ListOffsets,
                    Metadata,
                    ApiVersions,
                    CreateTopics,
                    DeleteTopics,
                    DeleteRecords,
                    InitProducerId,
                    DescribeConfigs,
                    AlterConfigs,
                    AlterReplicaLogDirs,
                    DescribeLogDirs,
                    CreatePartitions,
                    IncrementalAlterConfigs,
                    DescribeCluster,
                    FindCoordinator,
                    JoinGroup,
                    SyncGroup,
                    Heartbeat,
                    LeaveGroup,
                    OffsetCommit,
                    OffsetFetch,
                    DescribeGroups,
                    ListGroups,
                    DeleteGroups,
                    OffsetDelete,
                    ConsumerGroupHeartbeat,
                    ConsumerGroupDescribe,
                    ShareGroupHeartbeat,
                    ShareGroupDescribe,
                    ShareFetch,
                    ShareAcknowledge,
                    ReadShareGroupState,
                    WriteShareGroupState,
                    ReadShareGroupStateSummary,
                    DescribeShareGroupOffsets,
                    AlterShareGroupOffsets,
                    DeleteShareGroupOffsets,
                    InitializeShareGroupState,
                    DeleteShareGroupState,
                    ElectLeaders,
                    AlterPartitionReassignments,
                    ListPartitionReassignments,
                    OffsetForLeaderEpoch,
                    AddPartitionsToTxn,
                    AddOffsetsToTxn,
                    EndTxn,
                    WriteTxnMarkers,
                    TxnOffsetCommit,
                    DescribeProducers,
                    DescribeTransactions,
                    ListTransactions,
                    DescribeTopicPartitions,
                    ListConfigResources,
                    UpdateFeatures,
                    UnregisterBroker,
                    DescribeClientQuotas,
                    AlterClientQuotas,
                    SaslHandshake,
                    SaslAuthenticate,
                    DescribeUserScramCredentials,
                    AlterUserScramCredentials,
                    DescribeAcls,
                    CreateAcls,
                    DeleteAcls,
                    CreateDelegationToken,
                    RenewDelegationToken,
                    ExpireDelegationToken,
                    DescribeDelegationToken,
                );
                let frame = encode_request(key, version, 7, "round-trip", &request)
                    .unwrap_or_else(|e| panic!("{key:?} v{version} request: {e}"));
                let decoded = decode_request(frame.freeze().split_off(FRAME_PREFIX_BYTES))
                    .unwrap_or_else(|e| panic!("{key:?} v{version} request: {e}"));
                assert_eq!((decoded.api_key, decoded.version()), (key, version));
                let frame = encode_response(key, version, 7, &response)
                    .unwrap_or_else(|e| panic!("{key:?} v{version} response: {e}"));
                let (id, _) =
                    decode_response(key, version, frame.freeze().split_off(FRAME_PREFIX_BYTES))
                        .unwrap_or_else(|e| panic!("{key:?} v{version} response: {e}"));
                assert_eq!(id, 7);
                checked += 1;
            }
        }
        assert!(checked > 200, "{checked} versions checked");
    }
}
