//! Small valid inputs for every target. `smoke --write-corpus` writes them to
//! `fuzz/corpus/<target>/`; the committed corpus is exactly this output (keep it tiny).

use bytes::BytesMut;
use kafka_protocol::messages::{
    produce_request::{PartitionProduceData, TopicProduceData},
    metadata_request::MetadataRequestTopic,
    AlterConfigsRequest, ApiKey, ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteRecordsRequest, DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeLogDirsRequest, FetchRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, RequestHeader, RequestKind, TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use sluice_format::index::{OffsetIndexEntry, TimeIndexEntry};
use sluice_format::{BatchBuilder, BatchTimestampType};

/// (target, file name, content) of every seed.
pub fn all() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, data) in request_frames() {
        out.push(("decode_request", name, data));
    }
    for (name, data) in record_sets() {
        out.push(("record_batches", name, data));
    }
    for (name, data) in index_files() {
        out.push(("index_entries", name, data));
    }
    for (name, data) in text_files() {
        out.push(("text_files", name, data));
    }
    for (name, data) in principal_rules() {
        out.push(("principal_rules", name, data));
    }
    for (name, data) in oauthbearer() {
        out.push(("oauthbearer", name, data));
    }
    for (name, data) in sasl() {
        out.push(("sasl", name, data));
    }
    out
}

fn frame(key: ApiKey, version: i16, body: &RequestKind) -> Option<Vec<u8>> {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(42)
        .with_client_id(Some(StrBytes::from_static_str("fz")));
    let mut buf = BytesMut::new();
    header.encode(&mut buf, key.request_header_version(version)).ok()?;
    body.encode(&mut buf, version).ok()?;
    Some(buf.to_vec())
}

fn default_body(key: ApiKey) -> Option<RequestKind> {
    Some(match key {
        ApiKey::Produce => RequestKind::Produce(ProduceRequest::default()),
        ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default()),
        ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
        ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(DeleteTopicsRequest::default()),
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(DeleteRecordsRequest::default()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(InitProducerIdRequest::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(DescribeConfigsRequest::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default()),
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default()),
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default())
        }
        ApiKey::IncrementalAlterConfigs => {
            RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
        }
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        _ => return None,
    })
}

fn snake(key: ApiKey) -> String {
    let mut s = String::new();
    for (i, c) in format!("{key:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_lowercase());
    }
    s
}

/// Request frames (without the 4-byte size prefix): every supported API at its lowest and
/// highest version with a default body, plus a few with content.
pub fn request_frames() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for &(key, min, max) in sluice_wire::SUPPORTED_APIS {
        let Some(body) = default_body(key) else { continue };
        for v in [min, max] {
            if let Some(f) = frame(key, v, &body) {
                out.push((format!("{}_v{v}", snake(key)), f));
            }
        }
    }
    let av = RequestKind::ApiVersions(
        ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("sluice-fuzz"))
            .with_client_software_version(StrBytes::from_static_str("0.1")),
    );
    out.extend(frame(ApiKey::ApiVersions, 3, &av).map(|f| ("api_versions_v3_named".into(), f)));
    let topic = |name: &'static str| {
        MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str(name))))
    };
    for v in [1i16, 12] {
        let md = RequestKind::Metadata(
            MetadataRequest::default().with_topics(Some(vec![topic("t"), topic("orders")])),
        );
        out.extend(frame(ApiKey::Metadata, v, &md).map(|f| (format!("metadata_v{v}_topics"), f)));
    }
    let batch = BatchBuilder::new()
        .producer(1000, 0, 0)
        .record(1_700_000_000_000, Some(b"k"), Some(b"v"))
        .record(1_700_000_000_001, None, Some(b"value"))
        .build();
    for v in [3i16, 9] {
        let produce = RequestKind::Produce(
            ProduceRequest::default().with_acks(-1).with_timeout_ms(1000).with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("t")))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(batch.clone().into()))]),
            ]),
        );
        out.extend(frame(ApiKey::Produce, v, &produce).map(|f| (format!("produce_v{v}_batch"), f)));
    }
    out
}

/// Buffers of concatenated RecordBatch v2.
pub fn record_sets() -> Vec<(String, Vec<u8>)> {
    let one = BatchBuilder::new()
        .record(1_700_000_000_000, Some(b"key"), Some(b"value"))
        .record(1_700_000_000_005, None, None)
        .build();
    let mut idem = BatchBuilder::new().producer(7, 1, 0);
    idem.timestamp_type = BatchTimestampType::LogAppendTime;
    let idem = idem.record(5, Some(b"a"), Some(b"b")).build();
    let mut txn = BatchBuilder::new().producer(8, 0, 10);
    txn.transactional = true;
    txn.records.push(sluice_format::SimpleRecord {
        timestamp: 9,
        key: None,
        value: Some(b"x".to_vec()),
        headers: vec![("h".into(), Some(b"1".to_vec())), ("n".into(), None)],
    });
    let txn = txn.build();
    let empty = BatchBuilder::new().build();
    vec![
        ("one_batch".into(), one.clone()),
        ("two_batches".into(), [one, idem].concat()),
        ("txn_with_headers".into(), txn),
        ("header_only".into(), empty),
    ]
}

/// `.index` / `.timeindex` contents.
pub fn index_files() -> Vec<(String, Vec<u8>)> {
    let oi: Vec<u8> = [(0, 0), (3, 4096), (9, 8200)]
        .iter()
        .flat_map(|&(relative_offset, position)| {
            OffsetIndexEntry { relative_offset, position }.encode()
        })
        .collect();
    let ti: Vec<u8> = [(1_700_000_000_000i64, 0), (1_700_000_000_050, 3)]
        .iter()
        .flat_map(|&(timestamp, relative_offset)| {
            TimeIndexEntry { timestamp, relative_offset }.encode()
        })
        .collect();
    let mut prealloc = oi.clone();
    prealloc.extend_from_slice(&[0u8; 24]);
    vec![("offset_index".into(), oi), ("time_index".into(), ti), ("preallocated".into(), prealloc)]
}

/// Checkpoints, `partition.metadata`, `meta.properties`, segment names.
pub fn text_files() -> Vec<(String, Vec<u8>)> {
    let t = |s: &str| s.as_bytes().to_vec();
    vec![
        ("offset_checkpoint".into(), t("0\n2\norders 0 1234\nt 3 0\n")),
        ("leader_epoch_checkpoint".into(), t("0\n2\n0 0\n4 1200\n")),
        ("partition_metadata".into(), t("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")),
        (
            "meta_properties".into(),
            t("#\n#Sat Jan 01 00:00:00 UTC 2000\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\nnode.id=1\nversion=1\n"),
        ),
        (
            "segment_names".into(),
            t("00000000000000000000.log\n00000000000000001234.index\n00000000000000001234.timeindex\n00000000000000000042.log.deleted\n"),
        ),
    ]
}

/// `ssl.principal.mapping.rules` and a subject: the examples of docs/security.md.
pub fn principal_rules() -> Vec<(String, Vec<u8>)> {
    let t = |s: &str| s.as_bytes().to_vec();
    vec![
        ("default".into(), t("DEFAULT\nCN=alice,OU=eng,O=Acme,C=US")),
        (
            "rules".into(),
            t("RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT\nCN=Alice,OU=eng,O=Acme,C=US"),
        ),
        ("escapes".into(), t("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1\\/x/,DEFAULT\nCN=Tkac\\, Adam,OU=ITZ")),
    ]
}

/// OAUTHBEARER client first messages: an unsecured token (valid at the target's time) with an
/// authorization id and extensions, and a signed-looking one.
pub fn oauthbearer() -> Vec<(String, Vec<u8>)> {
    // {"alg":"none"} . {"sub":"alice","iat":1699999999,"exp":1700000600,"scope":["kafka"]} .
    let unsecured = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImlhdCI6MTY5OTk5OTk5OSwiZXhwIjoxNzAwMDAwNjAwLCJzY29wZSI6WyJrYWZrYSJdfQ.";
    // {"alg":"RS256","kid":"r1"} . {"sub":"bob","iat":1,"exp":1700000600,"aud":"kafka","iss":"https://idp"} . sig
    let signed = "eyJhbGciOiJSUzI1NiIsImtpZCI6InIxIn0.eyJzdWIiOiJib2IiLCJpYXQiOjEsImV4cCI6MTcwMDAwMDYwMCwiYXVkIjoia2Fma2EiLCJpc3MiOiJodHRwczovL2lkcCJ9.c2lnbmF0dXJl";
    vec![
        (
            "unsecured".into(),
            format!("n,a=alice,\u{1}auth=Bearer {unsecured}\u{1}traceId=abc\u{1}\u{1}").into_bytes(),
        ),
        ("signed".into(), format!("n,,\u{1}auth=Bearer {signed}\u{1}\u{1}").into_bytes()),
    ]
}

/// SASL messages: a PLAIN message with an authorization id, and a SCRAM client-first and
/// client-final pair of the target's server (its nonce, a proof of the right length).
pub fn sasl() -> Vec<(String, Vec<u8>)> {
    vec![
        ("plain".into(), b"alice\0alice\0secret".to_vec()),
        (
            "scram".into(),
            b"n,,n=alice,r=abc\nc=biws,r=abcservernonce,p=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=".to_vec(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    /// The seeds are what they claim to be: valid input for the code under test.
    #[test]
    fn seeds_are_valid() {
        for (name, f) in super::request_frames() {
            let r = sluice_wire::decode_request(f.into());
            assert!(r.is_ok(), "{name}: {r:?}");
        }
        for (name, b) in super::record_sets() {
            let r = sluice_format::parse_batches(&b, None);
            assert!(r.is_ok(), "{name}: {r:?}");
        }
        for (name, t) in super::text_files() {
            let t = String::from_utf8(t).unwrap();
            let ok = match name.as_str() {
                "offset_checkpoint" => sluice_format::text::parse_offset_checkpoint(&t).is_ok(),
                "leader_epoch_checkpoint" => {
                    sluice_format::text::parse_leader_epoch_checkpoint(&t).is_ok()
                }
                "partition_metadata" => sluice_format::text::parse_partition_metadata(&t).is_ok(),
                _ => true,
            };
            assert!(ok, "{name}");
        }
    }

    #[test]
    fn rule_seeds_parse() {
        for (name, t) in super::principal_rules() {
            let t = String::from_utf8(t).unwrap();
            let rules = t.split_once('\n').unwrap().0;
            assert!(sluice_config::SslPrincipalMapper::parse(rules).is_ok(), "{name}");
        }
    }

    #[test]
    fn oauthbearer_seeds_parse() {
        for (name, m) in super::oauthbearer() {
            let first = sluice_sasl::oauthbearer::parse_client_first(&m);
            assert!(first.is_ok(), "{name}: {first:?}");
        }
        let (_, m) = &super::oauthbearer()[0];
        let first = sluice_sasl::oauthbearer::parse_client_first(m).unwrap();
        let token = sluice_sasl::oauthbearer::UnsecuredValidator::default()
            .validate(&first.token, 1_700_000_000_000);
        assert!(token.is_ok(), "{token:?}");
        assert_eq!(
            sluice_sasl::oauthbearer::Jwks::parse(crate::targets::FUZZ_JWKS.as_bytes()).map(|k| k.keys.len()),
            Ok(2)
        );
    }

    #[test]
    fn sasl_seeds_parse() {
        let (_, plain) = &super::sasl()[0];
        assert!(sluice_sasl::plain::parse(plain).is_ok());
        let (_, scram) = &super::sasl()[1];
        let (first, last) = scram.split_at(scram.iter().position(|b| *b == b'\n').unwrap());
        let m = sluice_sasl::ScramMechanism::Sha256;
        let credential = sluice_sasl::ScramCredential::from_salted_password(m, b"salt", &[7; 32], 4096);
        let mut server = sluice_sasl::ScramServer::with_nonce(m, "servernonce");
        assert!(server.client_first(first, |_| Some(credential)).is_ok());
        // The proof is the right length and wrong: refused as credentials, not as format.
        let refusal = server.client_final(&last[1..]).unwrap_err();
        assert!(format!("{refusal:?}").contains("Invalid client credentials"), "{refusal:?}");
    }

    #[test]
    fn targets_accept_their_seeds() {
        for (target, _, data) in super::all() {
            (crate::target(target).unwrap())(&data);
        }
    }
}
