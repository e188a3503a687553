//! Protocol-level tests over real sockets against an in-process broker on 127.0.0.1:0 with a
//! real log directory: malformed input, version negotiation, batch validation, idempotence.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use indexmap::IndexMap;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;

struct TestBroker {
    addr: SocketAddr,
    /// The broker the listener serves, for a test that drives a request's steps itself.
    broker: std::sync::Arc<sluice_broker::Broker>,
    _dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    stop: tokio::sync::watch::Sender<bool>,
}

impl TestBroker {
    fn start(extra: &[(&str, &str)]) -> TestBroker {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut props = BTreeMap::new();
        props.insert(
            "log.dirs".to_string(),
            dir.path().join("data").display().to_string(),
        );
        props.insert(
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        );
        props.insert(
            "socket.request.max.bytes".to_string(),
            "1048576".to_string(),
        );
        props.insert("connections.max.idle.ms".to_string(), "5000".to_string());
        for (k, v) in extra {
            props.insert(k.to_string(), v.to_string());
        }
        let config = sluice_config::BrokerConfig::from_properties(props).expect("config");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let (addr, broker) = runtime.block_on(async {
            let limits = sluice_server::Limits {
                max_request_bytes: config.socket_request_max_bytes,
                max_connections: 64,
                max_connections_per_ip: 64,
                max_connections_per_ip_overrides: Default::default(),
                idle_timeout: Duration::from_millis(config.connections_max_idle_ms),
                max_in_flight: 16,
                failed_auth_delay: Duration::from_millis(100),
            };
            let broker = sluice_broker::Broker::open(config).expect("broker");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            tokio::spawn(sluice_server::serve(
                broker.clone(),
                vec![sluice_server::Bound {
                    name: "PLAINTEXT".into(),
                    listener,
                    tls: None,
                }],
                limits,
                stop_rx,
            ));
            (addr, broker)
        });
        TestBroker {
            addr,
            broker,
            _dir: dir,
            runtime,
            stop,
        }
    }

    fn connect(&self) -> Client {
        Client::connect(self.addr)
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        let _ = &self.runtime;
    }
}

struct Client {
    stream: TcpStream,
    correlation: i32,
}

impl Client {
    /// A connection whose reads give up after 10 s (a test never waits longer for an answer).
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Client {
            stream,
            correlation: 0,
        }
    }

    fn send_raw(&mut self, frame: &[u8]) {
        self.stream.write_all(frame).expect("write");
    }

    /// Read one response frame; None if the broker closed the connection.
    fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut buf = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut buf).ok()?;
        Some(Bytes::from(buf))
    }

    /// True if the broker closed the connection (end of stream or reset) within the read
    /// timeout; false if a byte arrived or the read timed out with the connection open.
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }

    fn request<R: Request + Encodable + HeaderVersion>(
        &mut self,
        req: &R,
        version: i16,
    ) -> R::Response
    where
        R::Response: Decodable + HeaderVersion,
    {
        let correlation = self.send(req, version);
        self.receive::<R>(version, correlation)
    }

    /// Send a request without waiting for its response; returns its correlation id.
    fn send<R: Request + Encodable + HeaderVersion>(&mut self, req: &R, version: i16) -> i32 {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("protocol-test")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .expect("header");
        req.encode(&mut body, version).expect("body");
        let mut frame = BytesMut::new();
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        self.send_raw(&frame);
        self.correlation
    }

    /// Read the next response, which must answer the request with `correlation`.
    fn receive<R: Request>(&mut self, version: i16, correlation: i32) -> R::Response
    where
        R::Response: Decodable + HeaderVersion,
    {
        let mut resp = self.read_frame().expect("response");
        let rh = ResponseHeader::decode(&mut resp, R::Response::header_version(version))
            .expect("response header");
        assert_eq!(rh.correlation_id, correlation, "responses out of order");
        let out = R::Response::decode(&mut resp, version).expect("response body");
        assert!(!resp.has_remaining(), "trailing bytes in response");
        out
    }
}

fn batch(values: &[&str], producer_id: i64, epoch: i16, first_sequence: i32) -> Bytes {
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if producer_id >= 0 {
                first_sequence + i as i32
            } else {
                -1
            },
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(v.to_string())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode batch");
    buf.freeze()
}

fn produce(
    client: &mut Client,
    topic: &str,
    records: Bytes,
    acks: i16,
) -> produce_response::PartitionProduceResponse {
    produce_with(client, topic, 0, records, acks)
}

fn produce_with(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
    acks: i16,
) -> produce_response::PartitionProduceResponse {
    let resp = client.request(&produce_request(topic, partition, records, acks), 9);
    resp.responses[0].partition_responses[0].clone()
}

fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

fn create_topic(client: &mut Client, name: &str, configs: &[(&str, &str)]) {
    let topic = create_topics_request::CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_string())))
        .with_num_partitions(1)
        .with_replication_factor(1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    create_topics_request::CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.to_string()))
                        .with_value(Some(StrBytes::from_string(v.to_string())))
                })
                .collect(),
        );
    let resp = client.request(
        &CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(5000),
        7,
    );
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
}

/// `req` as the broker's server decodes it from a frame.
fn decoded<R: Request + Encodable + HeaderVersion>(req: &R, version: i16) -> sluice_wire::Request {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("protocol-test")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .expect("header");
    req.encode(&mut body, version).expect("body");
    sluice_wire::decode_request(body.freeze()).expect("decode")
}

/// A transactional batch of one record.
fn txn_batch(value: &str, producer_id: i64, epoch: i16, sequence: i32) -> Bytes {
    let record = Record {
        transactional: true,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id,
        producer_epoch: epoch,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::from(value.to_string())),
        headers: IndexMap::new(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &[record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode batch");
    buf.freeze()
}

/// Partition 0's latest offset under `isolation` (1: read_committed, the last stable offset).
fn latest_offset(client: &mut Client, topic: &str, isolation: i8) -> i64 {
    let req = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)
                    .with_current_leader_epoch(-1),
            ])]);
    let r = client.request(&req, 8);
    let p = &r.topics[0].partitions[0];
    assert_eq!(p.error_code, 0);
    p.offset
}

/// KIP-890 part 1, transaction version 1 (issue 53): a produce the transaction coordinator
/// verified while its transaction was ongoing is held back before its append (a connection
/// slow to run its ordered part); meanwhile the producer aborts, and the ABORT marker reaches
/// the partition. The held produce must not append after the marker: it would open a
/// transaction the coordinator does not know (TV1 aborts bump no epoch), and the last stable
/// offset would stick there. Kafka's VerificationGuard refuses it with INVALID_TXN_STATE.
#[test]
fn a_verified_produce_held_past_its_abort_marker_is_refused() {
    let broker = TestBroker::start(&[
        ("transaction.state.log.num.partitions", "1"),
        ("sluice.transaction.version", "1"),
    ]);
    let mut c = broker.connect();
    create_topic(&mut c, "guarded", &[]);
    let tid = TransactionalId(StrBytes::from_static_str("guarded-producer"));
    let init = c.request(
        &InitProducerIdRequest::default()
            .with_transactional_id(Some(tid.clone()))
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        4,
    );
    assert_eq!(init.error_code, 0);
    let (pid, epoch) = (init.producer_id, init.producer_epoch);
    add_partition_to_txn(&mut c, &tid, pid, epoch, "guarded");

    // The produce (v9: verified, not added, by the partition leader) passes its gate.
    let produce = decoded(
        &produce_request("guarded", 0, txn_batch("late", pid.0, epoch, 0), -1)
            .with_transactional_id(Some(tid.clone())),
        9,
    );
    let conn = sluice_broker::Connection {
        peer: std::net::IpAddr::from([127, 0, 0, 1]),
        listener: "PLAINTEXT".into(),
        principal: None,
        produce_refusals: Default::default(),
        share_sessions: Default::default(),
    };
    let gate = broker
        .broker
        .prepare(&produce, &conn)
        .expect("a verification");
    let verdicts = broker.runtime.block_on(gate);

    // The producer aborts before the produce's ordered part runs; the ABORT marker is
    // written to the partition (offset 0).
    let end = c.request(
        &EndTxnRequest::default()
            .with_transactional_id(tid.clone())
            .with_producer_id(pid)
            .with_producer_epoch(epoch)
            .with_committed(false),
        3,
    );
    assert_eq!(end.error_code, 0);
    wait_for("the ABORT marker", || {
        latest_offset(&mut c, "guarded", 0) == 1
    });

    let conn = sluice_broker::Connection {
        peer: std::net::IpAddr::from([127, 0, 0, 1]),
        listener: "PLAINTEXT".into(),
        principal: None,
        produce_refusals: Default::default(),
        share_sessions: Default::default(),
    };
    let answer = broker
        .runtime
        .block_on(broker.broker.handle_prepared(produce, &conn, verdicts));
    let Some(sluice_broker::Response::Body(ResponseKind::Produce(r))) = answer else {
        panic!("not a produce response: {answer:?}");
    };
    assert_eq!(
        r.responses[0].partition_responses[0].error_code,
        ResponseError::InvalidTxnState.code(),
        "the batch verified before the ABORT marker was appended after it"
    );
    let end = latest_offset(&mut c, "guarded", 0);
    assert_eq!(end, 1, "nothing appended");
    assert_eq!(
        latest_offset(&mut c, "guarded", 1),
        end,
        "the last stable offset is held back by a transaction"
    );

    // The producer bumps its epoch (KIP-360) and its next transaction includes the
    // partition: verified anew, it appends, and its COMMIT commits its own batch only.
    // CONCURRENT_TRANSACTIONS while the abort completes (its markers are fsynced first):
    // retried, as clients do.
    let mut bumped = None;
    for _ in 0..200 {
        let r = c.request(
            &InitProducerIdRequest::default()
                .with_transactional_id(Some(tid.clone()))
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(pid)
                .with_producer_epoch(epoch),
            4,
        );
        if r.error_code != ResponseError::ConcurrentTransactions.code() {
            bumped = Some(r);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let bumped = bumped.expect("the abort never completed");
    assert_eq!((bumped.error_code, bumped.producer_epoch), (0, epoch + 1));
    let epoch = bumped.producer_epoch;
    add_partition_to_txn(&mut c, &tid, pid, epoch, "guarded");
    let produced = c.request(
        &produce_request("guarded", 0, txn_batch("next", pid.0, epoch, 0), -1)
            .with_transactional_id(Some(tid.clone())),
        9,
    );
    let p = &produced.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 1));
    let end = c.request(
        &EndTxnRequest::default()
            .with_transactional_id(tid.clone())
            .with_producer_id(pid)
            .with_producer_epoch(epoch)
            .with_committed(true),
        3,
    );
    assert_eq!(end.error_code, 0);
    wait_for("the COMMIT marker", || {
        latest_offset(&mut c, "guarded", 1) == 3
    });
    let fetched = c.request(
        &fetch_request("guarded", &[(0, 0)], 0, -1, 0, 1).with_isolation_level(1),
        11,
    );
    let part = &fetched.responses[0].partitions[0];
    assert_eq!(part.error_code, 0);
    assert!(part
        .aborted_transactions
        .as_ref()
        .is_none_or(|a| a.is_empty()));
    let mut values = Vec::new();
    let mut buf = part.records.clone().unwrap_or_default();
    while buf.has_remaining() {
        let set = RecordBatchDecoder::decode(&mut buf).expect("fetched batch decodes");
        for r in set.records.into_iter().filter(|r| !r.control) {
            values.push(r.value.map(|v| v.to_vec()));
        }
    }
    assert_eq!(values, vec![Some(b"next".to_vec())]);
}

/// AddPartitionsToTxn v3 (a producer of transaction version 1) for partition 0 of `topic`.
fn add_partition_to_txn(
    client: &mut Client,
    tid: &TransactionalId,
    pid: ProducerId,
    epoch: i16,
    topic: &str,
) {
    let add = client.request(
        &AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(tid.clone())
            .with_v3_and_below_producer_id(pid)
            .with_v3_and_below_producer_epoch(epoch)
            .with_v3_and_below_topics(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(vec![0]),
            ]),
        3,
    );
    assert_eq!(
        add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
        0
    );
}

fn frame_for(api_key: i16, version: i16, correlation: i32, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    let len = 2 + 2 + 4 + 2 + body.len();
    f.extend_from_slice(&(len as i32).to_be_bytes());
    f.extend_from_slice(&api_key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&correlation.to_be_bytes());
    f.extend_from_slice(&(-1i16).to_be_bytes());
    f.extend_from_slice(body);
    f
}

#[test]
fn api_versions_and_fallback_for_newer_versions() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    let resp = c.request(&ApiVersionsRequest::default(), 3);
    assert_eq!(resp.error_code, 0);
    assert!(resp
        .api_keys
        .iter()
        .any(|k| k.api_key == ApiKey::Produce as i16 && k.max_version >= 9));

    // ApiVersions v99: answered with a v0 body, UNSUPPORTED_VERSION, and our table.
    let mut c = broker.connect();
    c.send_raw(&frame_for(ApiKey::ApiVersions as i16, 99, 7, &[0]));
    let mut resp = c.read_frame().expect("fallback response");
    assert_eq!(resp.get_i32(), 7);
    let body = ApiVersionsResponse::decode(&mut resp, 0).expect("v0 body");
    assert_eq!(body.error_code, ResponseError::UnsupportedVersion.code());
    assert!(!body.api_keys.is_empty());
}

#[test]
fn malformed_frames_close_only_their_connection() {
    let broker = TestBroker::start(&[]);
    // Unknown API key.
    let mut c = broker.connect();
    c.send_raw(&frame_for(9999, 0, 1, &[]));
    assert!(c.closed());
    // Unsupported version of a known API.
    let mut c = broker.connect();
    c.send_raw(&frame_for(ApiKey::Metadata as i16, 99, 1, &[]));
    assert!(c.closed());
    // A body that does not decode.
    let mut c = broker.connect();
    c.send_raw(&frame_for(
        ApiKey::Metadata as i16,
        4,
        1,
        &[0xff, 0xff, 0xff],
    ));
    assert!(c.closed());
    // A frame over socket.request.max.bytes (1 MiB here), and a negative size.
    let mut c = broker.connect();
    c.send_raw(&(2 * 1024 * 1024i32).to_be_bytes());
    assert!(c.closed());
    let mut c = broker.connect();
    c.send_raw(&(-5i32).to_be_bytes());
    assert!(c.closed());
    // A frame shorter than a header.
    let mut c = broker.connect();
    c.send_raw(&[0, 0, 0, 3, 0, 3, 0]);
    assert!(c.closed());
    // A truncated frame: the peer goes away mid-frame.
    {
        let mut c = broker.connect();
        c.send_raw(&[0, 0, 0, 100, 0, 3]);
    }
    // Everyone else is still served.
    let mut c = broker.connect();
    assert_eq!(c.request(&ApiVersionsRequest::default(), 3).error_code, 0);
}

#[test]
fn garbage_and_invalid_batches_get_their_error_codes() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic(&mut c, "t", &[("max.message.bytes", "2000")]);

    let good = batch(&["a", "b"], -1, -1, -1);
    let ok = produce(&mut c, "t", good.clone(), -1);
    assert_eq!(ok.error_code, 0);
    assert_eq!(ok.base_offset, 0);

    // Flip a byte covered by the CRC.
    let mut corrupt = BytesMut::from(&good[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(
        produce(&mut c, "t", corrupt.freeze(), -1).error_code,
        ResponseError::CorruptMessage.code()
    );

    // Magic 1 inside a v9 produce request.
    let mut old_magic = BytesMut::from(&good[..]);
    old_magic[16] = 1;
    let code = produce(&mut c, "t", old_magic.freeze(), -1).error_code;
    assert!(
        code == ResponseError::InvalidRecord.code() || code == ResponseError::CorruptMessage.code(),
        "got {code}"
    );

    // Random garbage and a truncated batch.
    let garbage = Bytes::from(vec![0x5a; 100]);
    assert_ne!(produce(&mut c, "t", garbage, -1).error_code, 0);
    assert_ne!(
        produce(&mut c, "t", good.slice(..good.len() - 3), -1).error_code,
        0
    );

    // Larger than the topic's max.message.bytes.
    let big = "x".repeat(3000);
    assert_eq!(
        produce(&mut c, "t", batch(&[&big], -1, -1, -1), -1).error_code,
        ResponseError::MessageTooLarge.code()
    );

    // Nothing bad was appended: the next good batch lands at offset 2.
    assert_eq!(produce(&mut c, "t", good, 1).base_offset, 2);
}

/// A batch whose header claims 2^31 - 1 records (CRC made valid over the forged count) sent
/// to a topic that recompresses (`compression.type=zstd`, the batch uncompressed) reaches the
/// record decoder: it is refused with CORRUPT_MESSAGE, and the broker goes on serving. Before
/// the vendored decoder capped its reservation by the bytes left, it reserved room for the
/// claimed count (hundreds of GB) and the process aborted.
#[test]
fn a_batch_claiming_2_pow_31_records_to_a_recompressing_topic_is_refused() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic(&mut c, "zs", &[("compression.type", "zstd")]);

    // One record: a single batch, so the CRC check passes and the decoder is reached.
    let mut forged = BytesMut::from(&batch(&["v"], -1, -1, -1)[..]);
    forged[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes()); // lastOffsetDelta
    forged[57..61].copy_from_slice(&i32::MAX.to_be_bytes()); // record count
    let crc = sluice_format::batch::compute_crc(&forged);
    forged[17..21].copy_from_slice(&crc.to_be_bytes());
    sluice_format::batch::validate_batch(&forged).expect("the forged batch has a valid CRC");
    let refused = produce(&mut c, "zs", forged.freeze(), -1);
    assert_eq!(
        refused.error_code,
        ResponseError::CorruptMessage.code(),
        "{:?}",
        refused.error_message
    );

    // Still serving, on the same connection and a new one; nothing was appended.
    let ok = produce(&mut c, "zs", batch(&["after"], -1, -1, -1), -1);
    assert_eq!((ok.error_code, ok.base_offset), (0, 0));
    let mut fresh = broker.connect();
    let resp = fresh.request(&fetch_request("zs", &[(0, 0)], 0, -1, 0, 0), 12);
    assert_eq!(resp.error_code, 0);
    let part = &resp.responses[0].partitions[0];
    assert_eq!(part.error_code, 0);
    assert_eq!(
        fetched_records(&part.records),
        vec![(0, "after".to_string())]
    );
}

#[test]
fn idempotent_retries_are_not_appended_twice() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic(&mut c, "idem", &[]);
    let pid = c.request(
        &InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(60000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
        4,
    );
    assert_eq!(pid.error_code, 0);
    let id = pid.producer_id.0;

    let first = produce(&mut c, "idem", batch(&["a", "b", "c"], id, 0, 0), -1);
    assert_eq!((first.error_code, first.base_offset), (0, 0));
    let second = produce(&mut c, "idem", batch(&["d"], id, 0, 3), -1);
    assert_eq!((second.error_code, second.base_offset), (0, 3));
    // The retry of the first batch: acknowledged with its original offset, not appended.
    let retry = produce(&mut c, "idem", batch(&["a", "b", "c"], id, 0, 0), -1);
    assert_eq!((retry.error_code, retry.base_offset), (0, 0));
    // A gap in the sequence.
    let gap = produce(&mut c, "idem", batch(&["x"], id, 0, 10), -1);
    assert_eq!(
        gap.error_code,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    // The log holds exactly 4 records.
    let next = produce(&mut c, "idem", batch(&["e"], id, 0, 4), -1);
    assert_eq!((next.error_code, next.base_offset), (0, 4));
}

#[test]
fn invalid_acks_and_unknown_topics() {
    let broker = TestBroker::start(&[("auto.create.topics.enable", "false")]);
    let mut c = broker.connect();
    create_topic(&mut c, "a", &[]);
    assert_eq!(
        produce(&mut c, "a", batch(&["v"], -1, -1, -1), 2).error_code,
        ResponseError::InvalidRequiredAcks.code()
    );
    assert_eq!(
        produce(&mut c, "nope", batch(&["v"], -1, -1, -1), 1).error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let md = c.request(
        &MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(StrBytes::from_static_str("nope"))))]))
            .with_allow_auto_topic_creation(true),
        12,
    );
    assert_eq!(
        md.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

fn fetch_request(
    topic: &str,
    partitions: &[(i32, i64)],
    session_id: i32,
    session_epoch: i32,
    max_wait_ms: i32,
    min_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(min_bytes)
        .with_max_bytes(1 << 20)
        .with_session_id(session_id)
        .with_session_epoch(session_epoch)
        .with_topics(if partitions.is_empty() {
            vec![]
        } else {
            vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|(p, offset)| {
                            fetch_request::FetchPartition::default()
                                .with_partition(*p)
                                .with_fetch_offset(*offset)
                                .with_partition_max_bytes(1 << 20)
                                .with_current_leader_epoch(-1)
                                .with_log_start_offset(-1)
                        })
                        .collect(),
                )]
        })
}

fn create_topic_with_partitions(client: &mut Client, name: &str, partitions: i32) {
    let topic = create_topics_request::CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_string())))
        .with_num_partitions(partitions)
        .with_replication_factor(1);
    let resp = client.request(
        &CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(5000),
        7,
    );
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
}

fn produce_to(
    client: &mut Client,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> produce_response::PartitionProduceResponse {
    produce_with(client, topic, partition, records, -1)
}

#[test]
fn fetch_sessions_long_poll_and_out_of_range() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic_with_partitions(&mut c, "f", 2);
    produce_to(&mut c, "f", 0, batch(&["a", "b"], -1, -1, -1));
    produce_to(&mut c, "f", 1, batch(&["c"], -1, -1, -1));

    // Full fetch that opens a session: both partitions answered with their records.
    let full = c.request(&fetch_request("f", &[(0, 0), (1, 0)], 0, 0, 0, 0), 12);
    assert_eq!(full.error_code, 0);
    assert_ne!(full.session_id, 0, "a session was created");
    let parts = &full.responses[0].partitions;
    assert_eq!(parts.len(), 2);
    assert!(parts
        .iter()
        .all(|p| p.records.as_ref().is_some_and(|r| !r.is_empty())));
    assert_eq!(parts[0].high_watermark, 2);
    assert_eq!(parts[1].high_watermark, 1);

    // Incremental fetch naming only the moved offset of partition 0, with nothing new: no
    // partition has news, so the response is empty (after max.wait.ms).
    let incr = c.request(
        &fetch_request("f", &[(0, 2), (1, 1)], full.session_id, 1, 100, 1),
        12,
    );
    assert_eq!(incr.error_code, 0);
    assert!(
        incr.responses.iter().all(|t| t.partitions.is_empty()),
        "{:?}",
        incr.responses
    );

    // New data on partition 1 only: the incremental response carries just that partition.
    produce_to(&mut c, "f", 1, batch(&["d"], -1, -1, -1));
    let incr = c.request(&fetch_request("f", &[], full.session_id, 2, 1000, 1), 12);
    let answered: Vec<i32> = incr
        .responses
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
        .collect();
    assert_eq!(answered, vec![1]);

    // Wrong epoch and unknown session.
    let bad = c.request(&fetch_request("f", &[], full.session_id, 7, 0, 0), 12);
    assert_eq!(
        bad.error_code,
        ResponseError::InvalidFetchSessionEpoch.code()
    );
    let bad = c.request(&fetch_request("f", &[], 123456, 1, 0, 0), 12);
    assert_eq!(bad.error_code, ResponseError::FetchSessionIdNotFound.code());

    // Long poll: a sessionless fetch at the end of the log waits until a producer on another
    // connection appends to its partition, then returns the new batch. Its max.wait.ms is the
    // broker's cap (60 s), beyond the client's 10 s read timeout: only the append's wake-up
    // can answer it in time. An append to another partition first must not answer it.
    let addr = broker.addr;
    let producer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let mut p = Client::connect(addr);
        let other = produce_to(&mut p, "f", 1, batch(&["elsewhere"], -1, -1, -1));
        std::thread::sleep(Duration::from_millis(200));
        (
            other,
            produce_to(&mut p, "f", 0, batch(&["late"], -1, -1, -1)),
        )
    });
    let waited = c.request(&fetch_request("f", &[(0, 2)], 0, -1, 60_000, 1), 12);
    let (other, late) = producer.join().expect("producer");
    assert_eq!((other.error_code, late.error_code), (0, 0));
    let p0 = &waited.responses[0].partitions[0];
    assert!(
        p0.records.as_ref().is_some_and(|r| !r.is_empty()),
        "long poll returned without the new batch"
    );
    assert_eq!(p0.high_watermark, 3);

    // Beyond the end of the log.
    let oor = c.request(&fetch_request("f", &[(0, 99)], 0, -1, 0, 0), 12);
    assert_eq!(
        oor.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );

    // A long poll on a topic that is deleted meanwhile answers at once, with the error.
    let deleter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let mut d = Client::connect(addr);
        let resp = d.request(
            &DeleteTopicsRequest::default()
                .with_topic_names(vec![TopicName(StrBytes::from_static_str("f"))])
                .with_timeout_ms(5000),
            5,
        );
        resp.responses[0].error_code
    });
    let gone = c.request(&fetch_request("f", &[(0, 3)], 0, -1, 60_000, 1), 12);
    assert_eq!(deleter.join().expect("deleter"), 0);
    assert_eq!(
        gone.responses[0].partitions[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

/// The session rules franz-go relies on (KIP-227 as Kafka's FetchManager keeps them): a client
/// resets its session by sending epoch 0 with its old session id, which opens a new session;
/// a long poll abandoned by its client (the connection closed) leaves the session in place at
/// its next epoch.
#[test]
fn fetch_session_reset_with_its_id_and_an_abandoned_long_poll() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic_with_partitions(&mut c, "s", 1);
    produce_to(&mut c, "s", 0, batch(&["a"], -1, -1, -1));
    let full = c.request(&fetch_request("s", &[(0, 0)], 0, 0, 0, 0), 12);
    assert_eq!(full.error_code, 0);
    let first = full.session_id;
    assert_ne!(first, 0);

    // Epoch 1 waits at the end of the log on a connection that then goes away.
    let mut gone = broker.connect();
    gone.send(&fetch_request("s", &[(0, 1)], first, 1, 60_000, 1), 12);
    std::thread::sleep(Duration::from_millis(300));
    drop(gone);
    std::thread::sleep(Duration::from_millis(100));
    // The session is still there, at epoch 2 (epoch 1 was taken by the abandoned request).
    let again = c.request(&fetch_request("s", &[], first, 1, 0, 0), 12);
    assert_eq!(
        again.error_code,
        ResponseError::InvalidFetchSessionEpoch.code()
    );
    let next = c.request(&fetch_request("s", &[], first, 2, 0, 0), 12);
    assert_eq!(
        next.error_code, 0,
        "the session outlived its abandoned fetch"
    );

    // The client resets: epoch 0 with the old id opens a new session and answers in full.
    let reset = c.request(&fetch_request("s", &[(0, 0)], first, 0, 0, 0), 12);
    assert_eq!(reset.error_code, 0);
    assert_ne!(reset.session_id, 0);
    assert_ne!(reset.session_id, first);
    assert_eq!(reset.responses[0].partitions[0].high_watermark, 1);
    let old = c.request(&fetch_request("s", &[], first, 3, 0, 0), 12);
    assert_eq!(old.error_code, ResponseError::FetchSessionIdNotFound.code());
    let on = c.request(&fetch_request("s", &[], reset.session_id, 1, 0, 0), 12);
    assert_eq!(on.error_code, 0);

    // Epoch -1 with the id closes the session and fetches without one.
    let closing = c.request(
        &fetch_request("s", &[(0, 0)], reset.session_id, -1, 0, 0),
        12,
    );
    assert_eq!((closing.error_code, closing.session_id), (0, 0));
    let closed = c.request(&fetch_request("s", &[], reset.session_id, 2, 0, 0), 12);
    assert_eq!(
        closed.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
}

/// (offset, value) of every record in a fetched partition's records, in order.
fn fetched_records(records: &Option<Bytes>) -> Vec<(i64, String)> {
    let mut buf = records.clone().unwrap_or_default();
    let mut out = Vec::new();
    while buf.has_remaining() {
        let set = RecordBatchDecoder::decode(&mut buf).expect("fetched batch decodes");
        for r in set.records {
            let v = r.value.expect("value");
            out.push((r.offset, String::from_utf8(v.to_vec()).expect("utf-8")));
        }
    }
    out
}

/// Fetch answers carry record data straight from the segment files (small regions read, large
/// ones sent with sendfile); the bytes must arrive exactly, framed correctly, in both the
/// flexible and the older response encodings, next to partitions without data.
#[test]
fn fetched_records_arrive_exactly_from_small_and_large_regions() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic_with_partitions(&mut c, "z", 3);
    // The test batches carry old timestamps, so (as in Kafka) every append rolls a new segment
    // and a fetch returns one segment's batch at a time.
    let big: Vec<String> = (0..300)
        .map(|i| format!("{i:04}-{}", "x".repeat(995)))
        .collect();
    for chunk in big.chunks(100) {
        let refs: Vec<&str> = chunk.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            produce_to(&mut c, "z", 1, batch(&refs, -1, -1, -1)).error_code,
            0
        );
    }
    let small = ["s0", "s1", "s2"];
    for v in small {
        assert_eq!(
            produce_to(&mut c, "z", 0, batch(&[v], -1, -1, -1)).error_code,
            0
        );
    }
    for version in [4, 11, 12] {
        let mut next = [0i64; 3];
        let mut got: [Vec<String>; 3] = Default::default();
        for _round in 0..10 {
            let wanted: Vec<(i32, i64)> = (0..3).map(|p| (p as i32, next[p])).collect();
            let resp = c.request(&fetch_request("z", &wanted, 0, -1, 0, 0), version);
            assert_eq!(resp.error_code, 0);
            let parts = &resp.responses[0].partitions;
            assert_eq!(parts.len(), 3, "version {version}");
            for (p, data) in parts.iter().enumerate() {
                assert_eq!(data.error_code, 0);
                for (offset, value) in fetched_records(&data.records) {
                    if offset >= next[p] {
                        assert_eq!(offset, next[p], "version {version}: no gaps");
                        got[p].push(value);
                        next[p] = offset + 1;
                    }
                }
            }
        }
        assert_eq!(got[0], small, "version {version}");
        assert_eq!(got[1], big, "version {version}");
        assert!(got[2].is_empty());
    }
}

#[test]
fn list_offsets_and_create_partitions() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic_with_partitions(&mut c, "lo", 1);
    produce_to(&mut c, "lo", 0, batch(&["a", "b", "c"], -1, -1, -1));
    produce_to(&mut c, "lo", 0, batch(&["d", "e"], -1, -1, -1));
    let ask_at = |c: &mut Client, ts: i64, version: i16| {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("lo")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(ts)
                        .with_current_leader_epoch(-1),
                ])]);
        let r = c.request(&req, version);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset, p.timestamp)
    };
    let ask = |c: &mut Client, ts: i64| ask_at(c, ts, 8);
    assert_eq!(ask(&mut c, -1).1, 5);
    // A special timestamp older than the request's version, or unknown, is refused with
    // UNSUPPORTED_VERSION, as Kafka refuses it; v11's earliest pending upload is -1 without
    // tiered storage.
    let unsupported = ResponseError::UnsupportedVersion.code();
    assert_eq!(ask_at(&mut c, -6, 10).0, unsupported);
    assert_eq!(ask_at(&mut c, -3, 6).0, unsupported);
    assert_eq!(ask_at(&mut c, -7, 11).0, unsupported);
    assert_eq!(ask_at(&mut c, -6, 11), (0, -1, -1));
    assert_eq!(ask_at(&mut c, -2, 11), (0, 0, -1));
    assert_eq!(ask(&mut c, -2).1, 0);
    // The batch builder stamps record i with 1_700_000_000_000 + i: the first record at or
    // after +1 is offset 1 in the first batch.
    let (code, offset, ts) = ask(&mut c, 1_700_000_000_001);
    assert_eq!((code, offset, ts), (0, 1, 1_700_000_000_001));
    let (_, offset, ts) = ask(&mut c, -3);
    assert_eq!((offset, ts), (2, 1_700_000_000_002));
    assert_eq!(ask(&mut c, 1_800_000_000_000).1, -1, "no record that late");

    let grow = |c: &mut Client, count: i32, validate_only: bool| {
        let req = CreatePartitionsRequest::default()
            .with_topics(vec![
                create_partitions_request::CreatePartitionsTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("lo")))
                    .with_count(count),
            ])
            .with_validate_only(validate_only)
            .with_timeout_ms(5000);
        c.request(&req, 3).results[0].error_code
    };
    assert_eq!(grow(&mut c, 3, true), 0);
    assert_eq!(
        grow(&mut c, 1, false),
        ResponseError::InvalidPartitions.code()
    );
    assert_eq!(grow(&mut c, 3, false), 0);
    let md = c.request(&MetadataRequest::default().with_topics(None), 12);
    assert_eq!(
        md.topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "lo"))
            .map(|t| t.partitions.len()),
        Some(3)
    );
}

#[test]
fn pipelined_requests_are_answered_in_order_behind_a_long_poll() {
    // The test broker reads at most 16 requests ahead of its responses.
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic(&mut c, "pipe", &[]);

    // A long poll at the end of the empty log heads the queue; 20 more requests follow at once,
    // the last a produce, all sent before any response is read. The broker answers none of
    // the later ones before the fetch, and stops reading after 16; an append from another
    // connection answers the fetch, and then every response comes in request order.
    let fetch = c.send(&fetch_request("pipe", &[(0, 0)], 0, -1, 60_000, 1), 12);
    let versions: Vec<i32> = (0..19)
        .map(|_| c.send(&ApiVersionsRequest::default(), 3))
        .collect();
    let produce = c.send(
        &produce_request("pipe", 0, batch(&["second"], -1, -1, -1), 1),
        9,
    );
    let addr = broker.addr;
    let other = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let mut p = Client::connect(addr);
        produce_to(&mut p, "pipe", 0, batch(&["first"], -1, -1, -1))
    });

    let fetched = c.receive::<FetchRequest>(12, fetch);
    assert_eq!(other.join().expect("producer").base_offset, 0);
    let p0 = &fetched.responses[0].partitions[0];
    assert_eq!(p0.error_code, 0);
    assert_eq!(
        fetched_records(&p0.records),
        vec![(0, "first".to_string())],
        "the long poll returns the other connection's append"
    );
    for correlation in versions {
        let v = c.receive::<ApiVersionsRequest>(3, correlation);
        assert_eq!(v.error_code, 0);
    }
    let produced = c.receive::<ProduceRequest>(9, produce);
    let p = &produced.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 1));
}

#[test]
fn idle_connections_close_but_not_while_a_request_waits() {
    let broker = TestBroker::start(&[("connections.max.idle.ms", "300")]);

    // Idle after a request: closed.
    let mut c = broker.connect();
    create_topic(&mut c, "idle", &[]);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(c.closed(), "an idle connection stays open");

    // A long poll that outlasts the idle time is answered (after its max.wait.ms, empty);
    // the connection closes once it is idle again.
    let mut c = broker.connect();
    let waited = c.request(&fetch_request("idle", &[(0, 0)], 0, -1, 1500, 1), 12);
    assert_eq!(waited.error_code, 0);
    let p0 = &waited.responses[0].partitions[0];
    assert_eq!(p0.error_code, 0);
    assert!(p0.records.as_ref().is_none_or(|r| r.is_empty()));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(c.closed(), "idle after the long poll, yet open");

    // A client trickling a request a byte at a time, never completing it, is closed too.
    let mut c = broker.connect();
    let frame = frame_for(ApiKey::ApiVersions as i16, 3, 1, &[0; 64]);
    let mut sent = 0;
    for byte in &frame[..20] {
        if c.stream.write_all(std::slice::from_ref(byte)).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(sent >= 3, "closed before it was idle");
    assert!(c.closed(), "a trickling client holds its connection open");
}

#[test]
fn offset_for_leader_epoch_answers_where_an_epoch_ends() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic_with_partitions(&mut c, "ep", 1);
    produce_to(&mut c, "ep", 0, batch(&["a", "b", "c"], -1, -1, -1));
    let md = c.request(&MetadataRequest::default().with_topics(None), 12);
    let epoch = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "ep"))
        .map(|t| t.partitions[0].leader_epoch)
        .expect("topic in metadata");
    assert!(epoch >= 1);
    let ask = |c: &mut Client, topic: &'static str, current: i32, leader_epoch: i32| {
        let req = OffsetForLeaderEpochRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![
                offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(TopicName(StrBytes::from_static_str(topic)))
                    .with_partitions(vec![
                        offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(current)
                            .with_leader_epoch(leader_epoch),
                    ]),
            ]);
        let r = c.request(&req, 4);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.leader_epoch, p.end_offset)
    };
    // The current epoch ends at the log end.
    assert_eq!(ask(&mut c, "ep", epoch, epoch), (0, epoch, 3));
    assert_eq!(ask(&mut c, "ep", -1, epoch), (0, epoch, 3));
    // A consumer behind the partition's epoch is fenced; one ahead of it is told to retry.
    assert_eq!(
        ask(&mut c, "ep", epoch - 1, epoch).0,
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(
        ask(&mut c, "ep", epoch + 1, epoch).0,
        ResponseError::UnknownLeaderEpoch.code()
    );
    // Fetch and ListOffsets check the epoch the same way (KIP-320).
    let fetch = |c: &mut Client, current: i32| {
        let mut req = fetch_request("ep", &[(0, 0)], 0, -1, 0, 0);
        req.topics[0].partitions[0].current_leader_epoch = current;
        c.request(&req, 12).responses[0].partitions[0].error_code
    };
    assert_eq!(fetch(&mut c, epoch), 0);
    assert_eq!(fetch(&mut c, -1), 0);
    assert_eq!(
        fetch(&mut c, epoch - 1),
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(
        fetch(&mut c, epoch + 1),
        ResponseError::UnknownLeaderEpoch.code()
    );
    let latest = |c: &mut Client, current: i32| {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("ep")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_current_leader_epoch(current)
                        .with_timestamp(-1),
                ])]);
        let r = c.request(&req, 7);
        let p = &r.topics[0].partitions[0];
        (p.error_code, p.offset)
    };
    assert_eq!(latest(&mut c, epoch), (0, 3));
    assert_eq!(
        latest(&mut c, epoch - 1).0,
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(
        latest(&mut c, epoch + 1).0,
        ResponseError::UnknownLeaderEpoch.code()
    );
    // No epoch at or below 0 was ever used: as Kafka's endOffsetFor, an epoch older than
    // every epoch of the log ends where the oldest one starts (offset 0 here).
    assert_eq!(ask(&mut c, "ep", epoch, 0), (0, 0, 0));
    assert_eq!(
        ask(&mut c, "nope", -1, 0).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

/// A real etcd on free 127.0.0.1 ports (Debian's `etcd-server`, installed by `scripts/test`).
struct Etcd {
    child: std::process::Child,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl Etcd {
    fn start() -> Etcd {
        let free = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port()
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let (client, peer) = (free(), free());
        let endpoint = format!("127.0.0.1:{client}");
        let child = std::process::Command::new(
            std::env::var("SLUICE_ETCD_BIN").unwrap_or_else(|_| "etcd".into()),
        )
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen-client-urls", &format!("http://{endpoint}")])
        .args(["--advertise-client-urls", &format!("http://{endpoint}")])
        .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
        .args([
            "--initial-advertise-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
        ])
        .args([
            "--initial-cluster",
            &format!("default=http://127.0.0.1:{peer}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("etcd must be installed (scripts/test installs Debian's etcd-server)");
        let etcd = Etcd {
            child,
            endpoint,
            _dir: dir,
        };
        wait_for("etcd to serve", || {
            TcpStream::connect(&etcd.endpoint).is_ok()
        });
        etcd
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Leader and leader epoch of every partition of `topic`, as `client`'s broker reports them.
fn leaders(client: &mut Client, topic: &str) -> Vec<(i32, i32)> {
    let md = client.request(&MetadataRequest::default().with_topics(None), 12);
    md.topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == topic))
        .map(|t| {
            let mut ps: Vec<_> = t
                .partitions
                .iter()
                .map(|p| (p.partition_index, p.leader_id.0, p.leader_epoch))
                .collect();
            ps.sort_unstable();
            ps.into_iter().map(|(_, l, e)| (l, e)).collect()
        })
        .unwrap_or_default()
}

/// Two brokers on one shared log directory and a real etcd: a request for a partition the
/// other broker owns names that owner (KIP-951) where the version carries the hint, and the
/// owner fences requests with a stale leader epoch (KIP-320).
#[test]
fn cluster_routing_names_the_owner_and_fences_stale_epochs() {
    let etcd = Etcd::start();
    let shared = tempfile::tempdir().expect("tempdir");
    let log_dir = shared.path().display().to_string();
    let member = |node: &'static str| {
        TestBroker::start(&[
            ("node.id", node),
            ("log.dirs", &log_dir),
            ("sluice.cluster.etcd.endpoints", &etcd.endpoint),
            ("sluice.cluster.poll.ms", "100"),
        ])
    };
    let (a, b) = (member("1"), member("2"));
    let (mut ca, mut cb) = (a.connect(), b.connect());
    wait_for("both brokers registered", || {
        let md = ca.request(&MetadataRequest::default().with_topics(None), 12);
        md.brokers.len() == 2
    });
    create_topic_with_partitions(&mut ca, "routed", 4);
    // Each broker owns some partitions (spread at creation or balanced soon after), and both
    // report the same acquired owners.
    let mut owners = Vec::new();
    wait_for("partitions spread and acquired", || {
        owners = leaders(&mut ca, "routed");
        owners.len() == 4
            && owners.iter().any(|(l, _)| *l == 1)
            && owners.iter().any(|(l, _)| *l == 2)
            && owners.iter().all(|(_, e)| *e >= 1)
            && leaders(&mut cb, "routed") == owners
            && owners.iter().enumerate().all(|(p, (l, _))| {
                let c = if *l == 1 { &mut ca } else { &mut cb };
                produce_with(c, "routed", p as i32, batch(&["x"], -1, -1, -1), -1).error_code == 0
            })
    });
    let p = owners
        .iter()
        .position(|(l, _)| *l == 2)
        .expect("a partition of broker 2") as i32;
    let epoch = owners[p as usize].1;
    let not_leader = ResponseError::NotLeaderOrFollower.code();

    // Produce v10+ to the broker that does not own it: the owner and its epoch, and its
    // endpoint. v9 has no place for them.
    let r = ca.request(
        &produce_request("routed", p, batch(&["a"], -1, -1, -1), -1),
        10,
    );
    let part = &r.responses[0].partition_responses[0];
    assert_eq!(part.error_code, not_leader);
    assert_eq!(
        (
            part.current_leader.leader_id.0,
            part.current_leader.leader_epoch
        ),
        (2, epoch)
    );
    assert_eq!(
        r.node_endpoints
            .iter()
            .map(|n| n.node_id.0)
            .collect::<Vec<_>>(),
        vec![2]
    );
    let part = produce_with(&mut ca, "routed", p, batch(&["a"], -1, -1, -1), -1);
    assert_eq!(part.error_code, not_leader);
    // Fetch v16+ likewise (by topic id from v13).
    let id = ca
        .request(&MetadataRequest::default().with_topics(None), 12)
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "routed"))
        .map(|t| t.topic_id)
        .expect("topic id");
    let by_id = |p: i32, current: i32| {
        let mut req = fetch_request("routed", &[(p, 0)], 0, -1, 0, 0);
        req.topics[0].topic_id = id;
        req.topics[0].partitions[0].current_leader_epoch = current;
        req
    };
    let r = ca.request(&by_id(p, -1), 16);
    let part = &r.responses[0].partitions[0];
    assert_eq!(part.error_code, not_leader);
    assert_eq!(
        (
            part.current_leader.leader_id.0,
            part.current_leader.leader_epoch
        ),
        (2, epoch)
    );
    assert_eq!(
        r.node_endpoints
            .iter()
            .map(|n| n.node_id.0)
            .collect::<Vec<_>>(),
        vec![2]
    );

    // The owner: a consumer at the current epoch reads, a stale one is fenced, one ahead of
    // this broker is told to retry.
    let fetch = |c: &mut Client, current: i32| {
        c.request(&by_id(p, current), 16).responses[0].partitions[0].error_code
    };
    assert_eq!(fetch(&mut cb, epoch), 0);
    assert_eq!(
        fetch(&mut cb, epoch - 1),
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(
        fetch(&mut cb, epoch + 1),
        ResponseError::UnknownLeaderEpoch.code()
    );
}

/// A produce request without a transactional id that reaches the broker a partition is
/// assigned to before it has acquired the partition waits for the acquisition instead of
/// being answered NOT_LEADER_OR_FOLLOWER (`Broker::prepare`, ACQUISITION_WAIT_MAX). Here
/// broker 1 leaves the cluster (a controlled shutdown: each of its partitions handed over to
/// broker 2) while requests for those partitions keep arriving at broker 2. Every request
/// broker 2 decides to hold back for an acquisition (its `prepare` returns a gate: no
/// transactional id, the write-back limit is far away) must then be appended, never be
/// answered NOT_LEADER_OR_FOLLOWER: nothing here moves a partition away from broker 2.
#[test]
fn a_produce_held_for_an_acquisition_is_not_answered_not_leader() {
    let etcd = Etcd::start();
    let shared = tempfile::tempdir().expect("tempdir");
    let log_dir = shared.path().display().to_string();
    let member = |node: &'static str| {
        TestBroker::start(&[
            ("node.id", node),
            ("log.dirs", &log_dir),
            ("sluice.cluster.etcd.endpoints", &etcd.endpoint),
            ("sluice.cluster.poll.ms", "100"),
        ])
    };
    let (a, b) = (member("1"), member("2"));
    let (mut ca, mut cb) = (a.connect(), b.connect());
    wait_for("both brokers registered", || {
        let md = ca.request(&MetadataRequest::default().with_topics(None), 12);
        md.brokers.len() == 2
    });
    const PARTITIONS: i32 = 32;
    create_topic_with_partitions(&mut ca, "moving", PARTITIONS);
    let mut owners = Vec::new();
    wait_for("partitions spread and acquired", || {
        owners = leaders(&mut ca, "moving");
        owners.len() == PARTITIONS as usize
            && owners.iter().any(|(l, _)| *l == 1)
            && owners.iter().all(|(_, e)| *e >= 1)
            && leaders(&mut cb, "moving") == owners
            && owners.iter().enumerate().all(|(p, (l, _))| {
                let c = if *l == 1 { &mut ca } else { &mut cb };
                produce_with(c, "moving", p as i32, batch(&["x"], -1, -1, -1), -1).error_code == 0
            })
    });
    let of_a: Vec<i32> = owners
        .iter()
        .enumerate()
        .filter(|(_, (l, _))| *l == 1)
        .map(|(p, _)| p as i32)
        .collect();

    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let started = std::time::Instant::now();
    let workers: Vec<_> = of_a
        .iter()
        .map(|&p| {
            let broker = b.broker.clone();
            let rt = b.runtime.handle().clone();
            std::thread::spawn(move || {
                let conn = sluice_broker::Connection {
                    peer: std::net::IpAddr::from([127, 0, 0, 1]),
                    listener: "PLAINTEXT".into(),
                    principal: None,
                    produce_refusals: Default::default(),
                    share_sessions: Default::default(),
                };
                let mut seen = Vec::new();
                while started.elapsed() < Duration::from_secs(30) {
                    let req = decoded(
                        &produce_request("moving", p, batch(&["y"], -1, -1, -1), -1),
                        9,
                    );
                    let at = std::time::Instant::now();
                    let (gated, answer) = match broker.prepare(&req, &conn) {
                        Some(gate) => {
                            let verdicts = rt.block_on(gate);
                            (
                                true,
                                rt.block_on(broker.handle_prepared(req, &conn, verdicts)),
                            )
                        }
                        None => (false, rt.block_on(broker.handle(req, &conn))),
                    };
                    let Some(sluice_broker::Response::Body(ResponseKind::Produce(r))) = answer
                    else {
                        panic!("not a produce response: {answer:?}");
                    };
                    let code = r.responses[0].partition_responses[0].error_code;
                    seen.push((p, gated, code, at.elapsed()));
                    if code == 0 {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                seen
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let leaving = a.broker.clone();
    std::thread::spawn(move || leaving.leave_cluster())
        .join()
        .expect("leave");
    let seen: Vec<(i32, bool, i16, Duration)> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect();
    let unled: Vec<i32> = of_a
        .iter()
        .copied()
        .filter(|p| !seen.iter().any(|(q, _, code, _)| q == p && *code == 0))
        .collect();
    assert!(unled.is_empty(), "never appended at broker 2: {unled:?}");
    let held_then_refused: Vec<_> = seen
        .iter()
        .filter(|(_, gated, code, _)| *gated && *code == not_leader)
        .collect();
    assert!(
        held_then_refused.is_empty(),
        "{} of {} requests held back for an acquisition were then answered \
         NOT_LEADER_OR_FOLLOWER (partition, gated, code, time): {:?}",
        held_then_refused.len(),
        seen.iter().filter(|(_, gated, _, _)| *gated).count(),
        &held_then_refused[..held_then_refused.len().min(8)]
    );
}

/// The wait for an acquisition is bounded per request (ACQUISITION_WAIT_MAX and the
/// request's timeout), counted from when the request is read, and the connection reads
/// nothing more meanwhile. So a partition assigned here whose acquisition keeps failing (its
/// directory's name is taken by a file: storage refuses the open, retried with a backoff) is
/// not waited for while its retry backs off: three pipelined requests for it are answered at
/// once, and a request for a healthy partition right behind them within its own timeout.
/// (Waiting for it held every such request for the bound: the healthy one was answered after
/// 15 s.)
#[test]
fn a_partition_whose_acquisition_keeps_failing_is_not_waited_for() {
    let etcd = Etcd::start();
    let shared = tempfile::tempdir().expect("tempdir");
    // Storage refuses partition 0's directory: a file has its name.
    std::fs::write(shared.path().join("stuck-0"), b"not a directory").expect("squat");
    let log_dir = shared.path().display().to_string();
    let b = TestBroker::start(&[
        ("node.id", "1"),
        ("log.dirs", &log_dir),
        ("sluice.cluster.etcd.endpoints", &etcd.endpoint),
        ("sluice.cluster.poll.ms", "100"),
        ("connections.max.idle.ms", "600000"),
    ]);
    let mut c = b.connect();
    wait_for("the broker registered", || {
        c.request(&MetadataRequest::default().with_topics(None), 12)
            .brokers
            .len()
            == 1
    });
    create_topic_with_partitions(&mut c, "stuck", 2);
    wait_for("partition 1 acquired", || {
        produce_with(&mut c, "stuck", 1, batch(&["ok"], -1, -1, -1), -1).error_code == 0
    });
    // Partition 0 is assigned here (Metadata names this broker) and never acquired.
    assert_eq!(leaders(&mut c, "stuck")[0].0, 1);

    // Pipelined on one connection, as a producer sends them (timeout_ms 5000 each): three
    // requests for partition 0, then one for the healthy partition 1.
    let started = std::time::Instant::now();
    let mut stuck = Vec::new();
    for _ in 0..3 {
        stuck.push(c.send(
            &produce_request("stuck", 0, batch(&["s"], -1, -1, -1), -1),
            9,
        ));
    }
    let healthy = c.send(
        &produce_request("stuck", 1, batch(&["h"], -1, -1, -1), -1),
        9,
    );
    c.stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut answered = Vec::new();
    for correlation in stuck {
        let r = c.receive::<ProduceRequest>(9, correlation);
        answered.push((
            r.responses[0].partition_responses[0].error_code,
            started.elapsed(),
        ));
    }
    let r = c.receive::<ProduceRequest>(9, healthy);
    let healthy_after = started.elapsed();
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    assert!(
        healthy_after < Duration::from_secs(5) + Duration::from_millis(500),
        "a request for a healthy partition (timeout 5000 ms) was answered after {healthy_after:?}: \
         the connection read nothing while the requests ahead of it each waited for an \
         acquisition that does not come ({answered:?})"
    );
}

/// Two brokers on one shared directory and a real etcd, a topic of 4 partitions spread over
/// them; returns the brokers (a: node 1, b: node 2) and a partition b owns and serves.
fn two_brokers_and_a_partition_of_b(
    log_dir: &str,
    etcd: &Etcd,
    topic: &str,
) -> (TestBroker, TestBroker, i32) {
    let member = |node: &'static str| {
        TestBroker::start(&[
            ("node.id", node),
            ("log.dirs", log_dir),
            ("sluice.cluster.etcd.endpoints", &etcd.endpoint),
            ("sluice.cluster.poll.ms", "100"),
            ("connections.max.idle.ms", "600000"),
        ])
    };
    let (a, b) = (member("1"), member("2"));
    let (mut ca, mut cb) = (a.connect(), b.connect());
    wait_for("both brokers registered", || {
        let md = ca.request(&MetadataRequest::default().with_topics(None), 12);
        md.brokers.len() == 2
    });
    create_topic_with_partitions(&mut ca, topic, 4);
    let mut owners = Vec::new();
    wait_for("partitions spread and acquired", || {
        owners = leaders(&mut ca, topic);
        owners.len() == 4
            && owners.iter().any(|(l, _)| *l == 1)
            && owners.iter().any(|(l, _)| *l == 2)
            && owners.iter().all(|(_, e)| *e >= 1)
            && leaders(&mut cb, topic) == owners
            && owners.iter().enumerate().all(|(p, (l, _))| {
                let c = if *l == 1 { &mut ca } else { &mut cb };
                produce_with(c, topic, p as i32, batch(&["x"], -1, -1, -1), -1).error_code == 0
            })
    });
    let p = owners
        .iter()
        .position(|(l, _)| *l == 2)
        .expect("a partition of broker 2") as i32;
    (a, b, p)
}

/// Broker b leaves the cluster (its partitions handed over to a); returns once a appends to
/// partition `p` of `topic`.
fn b_leaves_and_a_serves(a: &TestBroker, b: &TestBroker, topic: &str, p: i32) {
    let leaving = b.broker.clone();
    std::thread::spawn(move || leaving.leave_cluster())
        .join()
        .expect("leave");
    let mut probe = a.connect();
    wait_for("broker 1 serves the partition", || {
        produce_with(&mut probe, topic, p, batch(&["probe"], -1, -1, -1), -1).error_code == 0
    });
}

/// ADVERSARY (ProduceRefusals keyed per partition, one producer each): a connection shared
/// by two idempotent producers (a proxy multiplexing clients onto one broker connection).
/// Broker 1 refuses producer 1's batch (sequence 1) NOT_LEADER_OR_FOLLOWER, then producer
/// 2's: the second refusal replaces the first in the connection's table. Once broker 1
/// serves the partition, producer 1's next batch (sequence 2, pipelined behind its refused
/// one) finds the gap at 1: the rule says NOT_LEADER_OR_FOLLOWER (retry both in order), the
/// broker answers OUT_OF_ORDER_SEQUENCE_NUMBER (librdkafka bumps its epoch: issue 4953).
#[test]
fn a_refusal_of_another_producer_on_the_connection_does_not_end_the_rule() {
    let etcd = Etcd::start();
    let shared = tempfile::tempdir().expect("tempdir");
    let log_dir = shared.path().display().to_string();
    let (a, b, p) = two_brokers_and_a_partition_of_b(&log_dir, &etcd, "proxied");
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let (p1, p2) = (7001_i64, 7002_i64);
    // Both producers wrote sequence 0 at the owner.
    let mut cb = b.connect();
    for pid in [p1, p2] {
        let r = produce_with(&mut cb, "proxied", p, batch(&["s0"], pid, 0, 0), -1);
        assert_eq!(r.error_code, 0);
    }
    // The proxy's one connection to broker 1 (not the owner): both sequence-1 batches refused.
    let mut proxy = a.connect();
    for pid in [p1, p2] {
        let r = produce_with(&mut proxy, "proxied", p, batch(&["s1"], pid, 0, 1), -1);
        assert_eq!(r.error_code, not_leader, "producer {pid}");
    }
    b_leaves_and_a_serves(&a, &b, "proxied", p);
    // Producer 1's sequence 2, pipelined behind its refused sequence 1 on the same connection.
    let r = produce_with(&mut proxy, "proxied", p, batch(&["s2"], p1, 0, 2), -1);
    assert_eq!(
        r.error_code, not_leader,
        "a batch pipelined behind one this connection refused NOT_LEADER_OR_FOLLOWER was \
         answered {} ({:?})",
        r.error_code, r.error_message
    );
}

/// The retry of a refused batch need not come back on its connection. Broker 1 refuses a
/// producer's sequence 1 (not the owner); the producer retries it at the owner (KIP-951's
/// hint), where it is written. Later broker 1 serves the partition and the producer's batch
/// on the old connection has a real gap (sequence 5 where 2 is expected): a fresh connection
/// gets OUT_OF_ORDER_SEQUENCE_NUMBER, and the old one too once at most a client's in-flight
/// window of batches was refused behind the refusal. (Found by an adversary: entries never
/// ended, and the client looped on NOT_LEADER_OR_FOLLOWER for as long as the connection
/// lived.)
#[test]
fn a_refusal_retried_elsewhere_hides_a_real_gap_only_for_the_in_flight_window() {
    let etcd = Etcd::start();
    let shared = tempfile::tempdir().expect("tempdir");
    let log_dir = shared.path().display().to_string();
    let (a, b, p) = two_brokers_and_a_partition_of_b(&log_dir, &etcd, "gapped");
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let out_of_order = ResponseError::OutOfOrderSequenceNumber.code();
    let pid = 7003_i64;
    let mut cb = b.connect();
    assert_eq!(
        produce_with(&mut cb, "gapped", p, batch(&["s0"], pid, 0, 0), -1).error_code,
        0
    );
    let mut old = a.connect();
    assert_eq!(
        produce_with(&mut old, "gapped", p, batch(&["s1"], pid, 0, 1), -1).error_code,
        not_leader
    );
    // The retry of the refused batch, at the owner.
    assert_eq!(
        produce_with(&mut cb, "gapped", p, batch(&["s1"], pid, 0, 1), -1).error_code,
        0
    );
    b_leaves_and_a_serves(&a, &b, "gapped", p);
    let gap = || batch(&["s5"], pid, 0, 5);
    let mut fresh = a.connect();
    assert_eq!(
        produce_with(&mut fresh, "gapped", p, gap(), -1).error_code,
        out_of_order,
        "the gap is real"
    );
    // Produce v12: the answers name no other leader (KIP-951), so the client finds broker 1
    // in Metadata again and retries here, on this connection. The rule holds for at most a
    // client's in-flight window of batches behind the refusal (five), then the gap is
    // answered as one: no endless loop.
    let answers: Vec<(i16, i32)> = (0..7)
        .map(|_| {
            let r = old.request(&produce_request("gapped", p, gap(), -1), 12);
            let part = &r.responses[0].partition_responses[0];
            (part.error_code, part.current_leader.leader_id.0)
        })
        .collect();
    let refused = answers.iter().take_while(|(c, _)| *c == not_leader).count();
    assert!(
        refused <= 5 && answers[refused..].iter().all(|(c, _)| *c == out_of_order),
        "a real gap on the connection that once refused this producer's sequence 1 (retried \
         and written elsewhere) was answered (code, named leader) {answers:?} (6: \
         NOT_LEADER_OR_FOLLOWER) by the partition's owner, broker 1: more than the in-flight \
         window, or never as a gap"
    );
}

/// A refusal whose batch was retried and written elsewhere does not refuse the producer's
/// next batch on the old connection when the log takes it in order: broker 1 refuses a
/// producer's sequence 1 (not the owner), the producer retries it at the owner, where it is
/// written; once broker 1 serves the partition, sequence 2 on the old connection is
/// appended. Before, it was refused as behind the stale refusal, leaving a gap at 2 that
/// the next batch was answered OUT_OF_ORDER_SEQUENCE_NUMBER for, and librdkafka bumped its
/// epoch and wrote its unacknowledged records again (fault runs of seeds 104 and 105).
#[test]
fn a_batch_in_order_after_a_refusal_retried_elsewhere_is_appended() {
    let etcd = Etcd::start();
    let shared = tempfile::tempdir().expect("tempdir");
    let log_dir = shared.path().display().to_string();
    let (a, b, p) = two_brokers_and_a_partition_of_b(&log_dir, &etcd, "stale");
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let pid = 7004_i64;
    let mut cb = b.connect();
    assert_eq!(
        produce_with(&mut cb, "stale", p, batch(&["s0"], pid, 0, 0), -1).error_code,
        0
    );
    let mut old = a.connect();
    assert_eq!(
        produce_with(&mut old, "stale", p, batch(&["s1"], pid, 0, 1), -1).error_code,
        not_leader
    );
    // The retry of the refused batch, at the owner.
    assert_eq!(
        produce_with(&mut cb, "stale", p, batch(&["s1"], pid, 0, 1), -1).error_code,
        0
    );
    b_leaves_and_a_serves(&a, &b, "stale", p);
    for seq in [2, 3] {
        let r = produce_with(&mut old, "stale", p, batch(&["next"], pid, 0, seq), -1);
        assert_eq!(
            r.error_code, 0,
            "sequence {seq}, in order for the log, on the connection that once refused \
             sequence 1 (retried and written elsewhere), was answered {} ({:?})",
            r.error_code, r.error_message
        );
    }
}

/// A produce request waits for an acquisition in progress until the partition is served.
/// Found by an adversary (fixed since): `Broker::prepare` decided once, when the request was
/// read, which of its partitions to wait for (`acquisitions_pending`), and its wait
/// re-checked only those. Two partitions assigned here whose acquisitions failed
/// (their directories' names taken by files, as ENOSPC refused seed 103's): `a-0`, whose
/// retry is due, and `z-0`, still backing off, whose file is gone meanwhile. A request for
/// both (librdkafka puts every partition it sends to one broker in one request) waits for
/// `a-0` alone. The next reconciliation round retries both, in topic order: `a-0` fails
/// again (it backs off: the wait ends), then `z`'s 16 partitions are acquired, and served
/// together at the end. The request is handled in
/// between, and `z-0`, whose acquisition is in progress, is answered NOT_LEADER_OR_FOLLOWER,
/// while a request for `z-0` alone read right then waits for it and is appended (seed 103's
/// answer "8 ms after the acquisition ended").
#[test]
fn a_partition_backing_off_when_its_request_was_read_is_waited_for_once_its_acquisition_starts() {
    let etcd = Etcd::start();
    let shared = tempfile::tempdir().expect("tempdir");
    let log_dir = shared.path().display().to_string();
    // Rounds come 5 s apart (or when etcd changes), and a failed acquisition is tried again
    // 5 s later.
    let b = TestBroker::start(&[
        ("node.id", "1"),
        ("log.dirs", &log_dir),
        ("sluice.cluster.etcd.endpoints", &etcd.endpoint),
        ("sluice.cluster.poll.ms", "5000"),
        ("connections.max.idle.ms", "600000"),
    ]);
    let mut c = b.connect();
    wait_for("the broker registered", || {
        c.request(&MetadataRequest::default().with_topics(None), 12)
            .brokers
            .len()
            == 1
    });
    let conn = sluice_broker::Connection {
        peer: std::net::IpAddr::from([127, 0, 0, 1]),
        listener: "PLAINTEXT".into(),
        principal: None,
        produce_refusals: Default::default(),
        share_sessions: Default::default(),
    };
    let broker = b.broker.clone();
    let rt = b.runtime.handle().clone();
    let request = |topics: &[&str]| {
        decoded(
            &ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(5000)
                .with_topic_data(
                    topics
                        .iter()
                        .map(|t| {
                            TopicProduceData::default()
                                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                                .with_partition_data(vec![PartitionProduceData::default()
                                    .with_index(0)
                                    .with_records(Some(batch(&["v"], -1, -1, -1)))])
                        })
                        .collect(),
                ),
            9,
        )
    };
    // Whether a request for `topics`, read now, would wait for an acquisition.
    let waits = |topics: &[&str]| broker.prepare(&request(topics), &conn).is_some();
    let run = |req: sluice_wire::Request| -> (bool, Vec<(String, i16)>) {
        let (gated, answer) = match broker.prepare(&req, &conn) {
            Some(gate) => {
                let verdicts = rt.block_on(gate);
                (
                    true,
                    rt.block_on(broker.handle_prepared(req, &conn, verdicts)),
                )
            }
            None => (false, rt.block_on(broker.handle(req, &conn))),
        };
        let Some(sluice_broker::Response::Body(ResponseKind::Produce(r))) = answer else {
            panic!("not a produce response: {answer:?}");
        };
        let codes = r
            .responses
            .iter()
            .map(|t| (t.name.0.to_string(), t.partition_responses[0].error_code))
            .collect();
        (gated, codes)
    };
    let not_leader = ResponseError::NotLeaderOrFollower.code();

    std::fs::write(shared.path().join("a-0"), b"squat").expect("squat");
    create_topic_with_partitions(&mut c, "a", 1);
    std::thread::sleep(Duration::from_millis(2000));
    // Topic z's partitions are acquired one after the other in a round, and the registry
    // takes them together at its end: z-0 is served only once all 16 are acquired.
    const Z_PARTITIONS: i32 = 16;
    for p in 0..Z_PARTITIONS {
        std::fs::write(shared.path().join(format!("z-{p}")), b"squat").expect("squat");
    }
    create_topic_with_partitions(&mut c, "z", Z_PARTITIONS);
    std::thread::sleep(Duration::from_millis(1000));
    for p in 0..Z_PARTITIONS {
        std::fs::remove_file(shared.path().join(format!("z-{p}"))).expect("unsquat");
    }
    assert!(
        !waits(&["a"]) && !waits(&["z"]),
        "both acquisitions failed and back off"
    );
    // a-0's retry is due (a request for it waits), z-0's not yet.
    wait_for("a-0's retry due", || {
        std::thread::sleep(Duration::from_millis(20));
        waits(&["a"])
    });
    assert!(!waits(&["z"]), "z-0 still backs off");
    let (gated, codes) = run(request(&["a", "z"]));
    assert!(gated, "the request waited for a-0's acquisition");
    let z = codes.iter().find(|(t, _)| t == "z").expect("z answered").1;
    let due_now = waits(&["z"]);
    let (_, alone) = run(request(&["z"]));
    assert!(
        !(z == not_leader && due_now),
        "a request that waited for an acquisition answered z-0 NOT_LEADER_OR_FOLLOWER ({codes:?}) \
         while z-0's acquisition was under way: a request for z-0 alone, read right after, \
         waited for it and was answered {alone:?}"
    );
}

/// ADVERSARY (claim: `ProduceRefusals` never acknowledges a batch that follows a gap, nor makes
/// the retry of a refused batch an OUT_OF_ORDER_SEQUENCE_NUMBER): a new producer's first
/// batch (sequence 0) reaches broker 1 before it serves the partition and is refused
/// NOT_LEADER_OR_FOLLOWER (an acquisition backing off, or a wait that ran out). Its next
/// batch (sequence 1), pipelined behind it on the same connection, is read once broker 1
/// serves the partition. The log knows no state of the producer and accepts any sequence
/// (`ProducerStates::check`, "unknown producer"), so sequence 1 is appended across the gap,
/// and `ProduceRefusals::answered` takes the success for "the client moved on" (the
/// `Some(_) if code == 0` arm) and acknowledges it. The client then retries sequence 0,
/// which the log now refuses as OUT_OF_ORDER_SEQUENCE_NUMBER (it expects 2): the pair is
/// reordered in the log (1 acknowledged before 0) and the client's retry of its head batch
/// gets the answer that makes librdkafka bump its epoch (or fail fatally).
#[test]
fn a_new_producers_batch_behind_its_refused_first_one_is_not_acknowledged_across_the_gap() {
    let etcd = Etcd::start();
    let shared = tempfile::tempdir().expect("tempdir");
    let log_dir = shared.path().display().to_string();
    let (a, b, p) = two_brokers_and_a_partition_of_b(&log_dir, &etcd, "fresh");
    let not_leader = ResponseError::NotLeaderOrFollower.code();
    let out_of_order = ResponseError::OutOfOrderSequenceNumber.code();
    let pid = 7005_i64;
    let mut conn = a.connect();
    assert_eq!(
        produce_with(&mut conn, "fresh", p, batch(&["s0"], pid, 0, 0), -1).error_code,
        not_leader,
        "broker 1 does not serve the partition yet"
    );
    b_leaves_and_a_serves(&a, &b, "fresh", p);
    // Sequence 1, sent before the client read the refusal of sequence 0.
    let behind = produce_with(&mut conn, "fresh", p, batch(&["s1"], pid, 0, 1), -1);
    // The client's retry of sequence 0, in order after the refusal.
    let retry = produce_with(&mut conn, "fresh", p, batch(&["s0"], pid, 0, 0), -1);
    assert!(
        behind.error_code != 0 && retry.error_code != out_of_order,
        "a batch pipelined behind its producer's refused first batch was answered {} (0: \
         appended at offset {}, across the gap at sequence 0), and the retry of the refused \
         batch was answered {} (45: OUT_OF_ORDER_SEQUENCE_NUMBER) {:?}",
        behind.error_code,
        behind.base_offset,
        retry.error_code,
        retry.error_message
    );
}

#[test]
fn list_config_resources_lists_topics_and_brokers() {
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic_with_partitions(&mut c, "lcr", 1);
    let list = |c: &mut Client, types: Vec<i8>, version: i16| {
        let r = c.request(
            &ListConfigResourcesRequest::default().with_resource_types(types),
            version,
        );
        let mut names: Vec<(i8, String)> = r
            .config_resources
            .iter()
            .map(|r| (r.resource_type, r.resource_name.to_string()))
            .collect();
        names.sort();
        (r.error_code, names)
    };
    let all = list(&mut c, vec![], 1);
    assert_eq!(all.0, 0);
    assert!(all.1.contains(&(2, "lcr".to_string())), "{all:?}");
    assert!(all.1.contains(&(4, "1".to_string())), "{all:?}");
    assert_eq!(list(&mut c, vec![4], 1), (0, vec![(4, "1".to_string())]));
    // Types with no resources here, and v0 (client metrics only).
    assert_eq!(list(&mut c, vec![16, 32, 8], 1), (0, vec![]));
    assert_eq!(list(&mut c, vec![], 0), (0, vec![]));
    // A type Kafka does not list (CLUSTER).
    let unsupported = ResponseError::UnsupportedVersion.code();
    assert_eq!(list(&mut c, vec![2, 1], 1).0, unsupported);
}

/// OffsetCommit and OffsetFetch v10 name topics by id (KIP-848): offsets committed by id are
/// read back by id and by name; an id not known is answered UNKNOWN_TOPIC_ID, partition by
/// partition, as Kafka answers it.
#[test]
fn offsets_committed_and_fetched_by_topic_id() {
    use offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
    use offset_fetch_request::{OffsetFetchRequestGroup, OffsetFetchRequestTopics};
    let broker = TestBroker::start(&[]);
    let mut c = broker.connect();
    create_topic_with_partitions(&mut c, "byid", 2);
    let md = c.request(&MetadataRequest::default().with_topics(None), 12);
    let id = md
        .topics
        .iter()
        .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "byid"))
        .map(|t| t.topic_id)
        .expect("topic in metadata");
    let unknown = uuid::Uuid::from_u128(42);
    let group = GroupId(StrBytes::from_static_str("g10"));
    let commit = OffsetCommitRequest::default()
        .with_group_id(group.clone())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_topic_id(id)
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(7)]),
            OffsetCommitRequestTopic::default()
                .with_topic_id(unknown)
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)]),
        ]);
    let r = c.request(&commit, 10);
    let mut answered: Vec<(uuid::Uuid, i32, i16)> = r
        .topics
        .iter()
        .flat_map(|t| {
            assert!(t.name.is_empty(), "no names at v10: {t:?}");
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.partition_index, p.error_code))
        })
        .collect();
    answered.sort();
    let unknown_id = ResponseError::UnknownTopicId.code();
    let mut expected = vec![(id, 1, 0), (unknown, 0, unknown_id)];
    expected.sort();
    assert_eq!(answered, expected);

    let fetch = |c: &mut Client, topics: Option<Vec<OffsetFetchRequestTopics>>| {
        let req =
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(group.clone())
                .with_topics(topics)]);
        let r = c.request(&req, 10);
        let mut out: Vec<(uuid::Uuid, i32, i64, i16)> = r.groups[0]
            .topics
            .iter()
            .flat_map(|t| {
                assert!(t.name.is_empty(), "no names at v10: {t:?}");
                t.partitions.iter().map(move |p| {
                    (
                        t.topic_id,
                        p.partition_index,
                        p.committed_offset,
                        p.error_code,
                    )
                })
            })
            .collect();
        out.sort();
        out
    };
    let mut expected = vec![(id, 1, 7, 0), (unknown, 0, -1, unknown_id)];
    expected.sort();
    let asked = vec![
        OffsetFetchRequestTopics::default()
            .with_topic_id(id)
            .with_partition_indexes(vec![1]),
        OffsetFetchRequestTopics::default()
            .with_topic_id(unknown)
            .with_partition_indexes(vec![0]),
    ];
    assert_eq!(fetch(&mut c, Some(asked)), expected);
    assert_eq!(fetch(&mut c, None), vec![(id, 1, 7, 0)]);
    // By name (v9), the same offset.
    let by_name =
        OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
            .with_group_id(group.clone())
            .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                .with_name(TopicName(StrBytes::from_static_str("byid")))
                .with_partition_indexes(vec![1])]))]);
    let r = c.request(&by_name, 9);
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, 7);

    // Deleted and created again: the old incarnation's id names nothing, and its offsets are
    // gone (Kafka's coordinator forgets a deleted partition's offsets).
    let deleted = c.request(
        &DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(StrBytes::from_static_str("byid"))])
            .with_timeout_ms(5000),
        5,
    );
    assert_eq!(deleted.responses[0].error_code, 0);
    create_topic_with_partitions(&mut c, "byid", 2);
    let old = vec![OffsetFetchRequestTopics::default()
        .with_topic_id(id)
        .with_partition_indexes(vec![1])];
    assert_eq!(fetch(&mut c, Some(old)), vec![(id, 1, -1, unknown_id)]);
    let r = c.request(&by_name, 9);
    assert_eq!(r.groups[0].topics[0].partitions[0].committed_offset, -1);
    assert_eq!(fetch(&mut c, None), vec![]);
}
