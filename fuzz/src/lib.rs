//! Fuzz target bodies for Sluice, shared by the libFuzzer binaries (`fuzz_targets/*.rs`, run by
//! `cargo +nightly fuzz run <target>`) and the stable fallback runner (`src/bin/smoke.rs`).
//!
//! Contract of every target: it must not panic (nor abort) on any input. Besides "no panic"
//! the targets assert a few properties the crates document (a successfully parsed batch stays
//! valid after the header patches, index entries round-trip, ...); a failed assertion is a bug
//! in the crate under test (or in the documented contract), not in the fuzz target.

pub mod seeds;

/// Every target: (name, body). The name is the cargo-fuzz target name and the corpus
/// directory name under `fuzz/corpus/`.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("decode_request", targets::decode_request),
    ("record_batches", targets::record_batches),
    ("index_entries", targets::index_entries),
    ("text_files", targets::text_files),
    ("principal_rules", targets::principal_rules),
    ("oauthbearer", targets::oauthbearer),
    ("sasl", targets::sasl),
];

/// Look a target up by name.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

pub mod targets {
    use bytes::{BufMut, Bytes, BytesMut};
    use sluice_format::batch::{
        check_client_counts, BatchHeader, BatchTimestampType, CRC_OFFSET, LOG_OVERHEAD,
        MIN_BATCH_LENGTH,
    };
    use sluice_format::index::{
        decode_offset_index, decode_time_index, lookup_offset, lookup_time,
        valid_offset_index_prefix, valid_time_index_prefix,
    };
    use sluice_format::records::record_timestamps;
    use sluice_format::{
        compute_crc, parse_batches, set_base_offset, set_max_timestamp,
        set_partition_leader_epoch, validate_batch, OffsetIndexEntry, TimeIndexEntry,
        HEADER_LEN, OFFSET_INDEX_ENTRY_LEN, TIME_INDEX_ENTRY_LEN,
    };
    use sluice_wire::kafka_protocol::messages::RequestKind;
    use sluice_wire::{WireError, SUPPORTED_APIS};

    // ------------------------------------------------------------------------------------
    // decode_request
    // ------------------------------------------------------------------------------------

    /// Target `decode_request`: the input is one frame (without its size prefix) as the server
    /// hands it to `sluice_wire::decode_request`. A second view of the same input
    /// ([`typed_frame`]) forces a supported API key and version so that the body decoders of
    /// every supported API are reached even from random bytes. Record sets inside a decoded
    /// Produce request go through the same checks as target `record_batches`, as on the real
    /// produce path.
    pub fn decode_request(data: &[u8]) {
        decode_frame(Bytes::copy_from_slice(data));
        if let Some(frame) = typed_frame(data) {
            decode_frame(frame);
        }
    }

    /// The frame of the second view of a `decode_request` input: byte 0 selects an entry of
    /// `SUPPORTED_APIS`, byte 1 a version within its range; the rest of the input follows
    /// (correlation id, client id, ..., body). Public so a crash can be reproduced as the
    /// exact frame the broker would have received.
    pub fn typed_frame(data: &[u8]) -> Option<Bytes> {
        let (&sel, rest) = data.split_first()?;
        let (&ver, rest) = rest.split_first()?;
        let (key, min, max) = SUPPORTED_APIS[usize::from(sel) % SUPPORTED_APIS.len()];
        let span = i32::from(max) - i32::from(min) + 1;
        let version = i32::from(min) + i32::from(ver) % span;
        let mut f = BytesMut::with_capacity(rest.len() + 4);
        f.put_i16(key as i16);
        f.put_i16(version as i16);
        f.put_slice(rest);
        Some(f.freeze())
    }

    fn decode_frame(frame: Bytes) {
        let len = frame.len();
        match sluice_wire::decode_request(frame) {
            Ok(req) => {
                let (min, max) = sluice_wire::supported_versions(req.api_key)
                    .expect("decode_request returned an API outside SUPPORTED_APIS");
                assert!(
                    (min..=max).contains(&req.version()),
                    "decoded version outside the supported range"
                );
                assert_eq!(req.header.request_api_key, req.api_key as i16);
                let _ = req.correlation_id();
                // The server logs requests with Debug at trace level.
                let _ = format!("{req:?}");
                if let RequestKind::Produce(p) = &req.body {
                    for topic in &p.topic_data {
                        for part in &topic.partition_data {
                            if let Some(records) = &part.records {
                                check_record_set(records, true);
                            }
                        }
                    }
                }
            }
            Err(e) => {
                let _ = e.to_string();
                match e {
                    WireError::Truncated { len: l } => assert_eq!(l, len),
                    WireError::UnsupportedApiVersions { correlation_id, .. } => {
                        let resp = sluice_wire::unsupported_api_versions_response(correlation_id)
                            .expect("the ApiVersions fallback always encodes");
                        assert!(resp.len() > 4, "empty ApiVersions fallback response");
                    }
                    _ => {}
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------
    // record_batches
    // ------------------------------------------------------------------------------------

    /// Target `record_batches`: the input is a buffer of concatenated RecordBatch v2 (a produce
    /// request's record set, or a chunk of a `.log` file). It is checked as is, and once more
    /// after [`fix_crcs`], so that the fuzzer also reaches everything behind the CRC check.
    pub fn record_batches(data: &[u8]) {
        // Single-batch and header-only entry points on the raw bytes (a log scan reads a
        // header first, then the whole batch).
        let _ = BatchHeader::decode(data);
        let _ = BatchHeader::parse(data);
        let _ = validate_batch(data);
        let _ = record_timestamps(data);
        let _ = compute_crc(data);
        let mut copy = data.to_vec();
        let _ = set_base_offset(&mut copy, 7);
        let _ = set_partition_leader_epoch(&mut copy, 3);
        let _ = set_max_timestamp(&mut copy, BatchTimestampType::LogAppendTime, 1_700_000_000_000);
        let _ = set_max_timestamp(&mut copy, BatchTimestampType::CreateTime, -1);

        check_record_set(data, false);
        let fixed = fix_crcs(data);
        if fixed != data {
            check_record_set(&fixed, false);
        }
    }

    /// Rewrite the CRC of every batch the buffer's length fields delimit, so that mutated
    /// inputs get past the CRC check. Stops at the first length that does not fit.
    pub fn fix_crcs(data: &[u8]) -> Vec<u8> {
        let mut out = data.to_vec();
        let mut pos = 0usize;
        while out.len() - pos >= HEADER_LEN {
            let len = i32::from_be_bytes([out[pos + 8], out[pos + 9], out[pos + 10], out[pos + 11]]);
            if len < MIN_BATCH_LENGTH {
                break;
            }
            let total = len as usize + LOG_OVERHEAD;
            if total > out.len() - pos {
                break;
            }
            let crc = compute_crc(&out[pos..pos + total]);
            out[pos + CRC_OFFSET..pos + CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
            pos += total;
        }
        out
    }

    /// What the log store does with a record set, plus the properties it relies on.
    /// `from_client`: also apply the client-side count checks (produce path).
    fn check_record_set(buf: &[u8], from_client: bool) {
        let parsed = parse_batches(buf, None);
        // A size bound never turns an error into success, and only ever adds LengthTooLarge.
        let bound = buf.len() / 2 + 1;
        let bounded = parse_batches(buf, Some(bound));
        match (&parsed, &bounded) {
            (Err(_), Ok(_)) => panic!("parse_batches accepted with a bound what it rejects without"),
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Ok(a), Err(e)) => assert!(
                a.iter().any(|b| b.header.total_len() > bound),
                "bounded parse failed ({e}) though every batch fits the bound"
            ),
            (Err(_), Err(_)) => {}
        }
        let Ok(batches) = parsed else { return };

        // The batches tile the buffer exactly.
        let mut expect = 0usize;
        for b in &batches {
            assert_eq!(b.position, expect, "batches do not tile the buffer");
            let r = b.range();
            assert!(r.end <= buf.len(), "batch range past the buffer end");
            let again = validate_batch(&buf[r.clone()]).expect("parsed batch fails validate_batch");
            assert_eq!(again, b.header);
            assert_eq!(BatchHeader::parse(&buf[r.clone()]).ok(), Some(b.header));
            expect = r.end;
        }
        assert_eq!(expect, buf.len(), "batches do not cover the buffer");

        // The produce path: client checks, then offsets, epoch and (LogAppendTime) the max
        // timestamp patched in place; every patched batch must still validate.
        let mut patched = buf.to_vec();
        let mut next_offset: i64 = 1 << 40;
        for (i, b) in batches.iter().enumerate() {
            let h = b.header;
            let _ = (h.last_offset(), h.next_offset(), h.last_sequence(), h.compression_codec());
            let _ = (h.timestamp_type(), h.is_transactional(), h.is_control(), h.has_producer_id());
            let counts_ok = check_client_counts(&h).is_ok();
            if from_client && !counts_ok {
                return;
            }
            let _ = record_timestamps(&buf[b.range()]);
            let slice = &mut patched[b.range()];
            let epoch = i as i32 ^ 0x5a5a;
            set_base_offset(slice, next_offset).expect("set_base_offset on a parsed batch");
            set_partition_leader_epoch(slice, epoch).expect("set_partition_leader_epoch on a parsed batch");
            let after = validate_batch(slice).expect("batch invalid after base offset/epoch patch");
            assert_eq!(after.base_offset, next_offset);
            assert_eq!(after.partition_leader_epoch, epoch);
            assert_eq!(after.crc, h.crc, "offset/epoch patch changed the CRC");

            let ts = 1_700_000_000_000 + i as i64;
            set_max_timestamp(slice, BatchTimestampType::LogAppendTime, ts)
                .expect("set_max_timestamp on a parsed batch");
            let lat = validate_batch(slice).expect("batch invalid after LogAppendTime patch");
            assert_eq!(lat.max_timestamp, ts);
            assert_eq!(lat.timestamp_type(), BatchTimestampType::LogAppendTime);
            assert_eq!(lat.attributes & !0x08, h.attributes & !0x08, "patch touched other attribute bits");
            assert_eq!(lat.record_count, h.record_count);
            assert_eq!(lat.last_offset_delta, h.last_offset_delta);
            if let Ok(recs) = record_timestamps(slice) {
                assert!(recs.iter().all(|&(_, t)| t == ts), "LogAppendTime records must carry maxTimestamp");
            }
            // And back to the original timestamp fields: byte-identical to the offset/epoch
            // patched batch.
            let orig_type = h.timestamp_type();
            set_max_timestamp(slice, orig_type, h.max_timestamp).expect("set_max_timestamp back");
            let back = validate_batch(slice).expect("batch invalid after restoring timestamps");
            assert_eq!(back.crc, h.crc, "restoring the timestamp fields did not restore the CRC");
            assert_eq!(&slice[HEADER_LEN.min(slice.len())..], &buf[b.range()][HEADER_LEN..]);

            next_offset = after.next_offset();
        }
        let reparsed = parse_batches(&patched, None).expect("patched buffer no longer parses");
        assert_eq!(reparsed.len(), batches.len());
    }

    // ------------------------------------------------------------------------------------
    // index_entries
    // ------------------------------------------------------------------------------------

    /// Target `index_entries`: the input is the content of an `.index` file and, read again,
    /// of a `.timeindex` file (what segment loading does with index files of any content).
    /// The first 8 bytes also serve as the log size and lookup targets.
    pub fn index_entries(data: &[u8]) {
        let word = |at: usize| -> i64 {
            let mut a = [0u8; 8];
            for (i, b) in data.iter().skip(at).take(8).enumerate() {
                a[i] = *b;
            }
            i64::from_be_bytes(a)
        };
        let log_size = word(0) as u64;
        let target = word(8);

        let oi = decode_offset_index(data);
        assert_eq!(oi.len(), data.len() / OFFSET_INDEX_ENTRY_LEN);
        for (e, raw) in oi.iter().zip(data.chunks_exact(OFFSET_INDEX_ENTRY_LEN)) {
            assert_eq!(&e.encode()[..], raw, "offset index entry does not round-trip");
            assert_eq!(OffsetIndexEntry::decode(raw), Some(*e));
        }
        for size in [log_size, data.len() as u64, 0, u64::MAX] {
            let n = valid_offset_index_prefix(&oi, size);
            assert!(n <= oi.len());
            let valid = &oi[..n];
            for t in [target, i64::from(target as i32), -1, 0, i64::MAX, i64::MIN] {
                check_offset_lookup(valid, t);
            }
            for e in valid {
                check_offset_lookup(valid, i64::from(e.relative_offset));
            }
        }

        let ti = decode_time_index(data);
        assert_eq!(ti.len(), data.len() / TIME_INDEX_ENTRY_LEN);
        for (e, raw) in ti.iter().zip(data.chunks_exact(TIME_INDEX_ENTRY_LEN)) {
            assert_eq!(&e.encode()[..], raw, "time index entry does not round-trip");
            assert_eq!(TimeIndexEntry::decode(raw), Some(*e));
        }
        let n = valid_time_index_prefix(&ti);
        assert!(n <= ti.len());
        let valid = &ti[..n];
        for t in [target, -1, 0, i64::MAX, i64::MIN] {
            check_time_lookup(valid, t);
        }
        for e in valid {
            check_time_lookup(valid, e.timestamp);
        }
        // Unsorted input must not panic either (a caller might look up before validating).
        let _ = lookup_offset(&oi, target);
        let _ = lookup_time(&ti, target);
        let _ = OffsetIndexEntry::decode(data);
        let _ = TimeIndexEntry::decode(data);
    }

    fn check_offset_lookup(valid: &[OffsetIndexEntry], t: i64) {
        match lookup_offset(valid, t) {
            Some(i) => {
                assert!(i64::from(valid[i].relative_offset) <= t);
                if let Some(next) = valid.get(i + 1) {
                    assert!(i64::from(next.relative_offset) > t);
                }
            }
            None => assert!(valid.first().map_or(true, |e| i64::from(e.relative_offset) > t)),
        }
    }

    fn check_time_lookup(valid: &[TimeIndexEntry], t: i64) {
        match lookup_time(valid, t) {
            Some(i) => {
                assert!(valid[i].timestamp <= t);
                if let Some(next) = valid.get(i + 1) {
                    assert!(next.timestamp > t);
                }
            }
            None => assert!(valid.first().map_or(true, |e| e.timestamp > t)),
        }
    }

    // ------------------------------------------------------------------------------------
    // text_files
    // ------------------------------------------------------------------------------------

    /// Target `text_files`: the small text files of a log directory (checkpoints,
    /// `partition.metadata`, `meta.properties`) and segment file names, all of which are read
    /// back from a possibly damaged disk. Parsed content must survive format -> parse.
    pub fn text_files(data: &[u8]) {
        use sluice_format::names::{parse_offset_stem, parse_segment_file_name, segment_file_name};
        use sluice_format::text::*;

        let text = String::from_utf8_lossy(data);
        let text = text.as_ref();

        if let Ok(entries) = parse_offset_checkpoint(text) {
            let again = parse_offset_checkpoint(&format_offset_checkpoint(&entries))
                .expect("formatted offset checkpoint does not parse");
            assert_eq!(again, entries);
        }
        if let Ok(entries) = parse_leader_epoch_checkpoint(text) {
            let again = parse_leader_epoch_checkpoint(&format_leader_epoch_checkpoint(&entries))
                .expect("formatted leader epoch checkpoint does not parse");
            assert_eq!(again, entries);
        }
        if let Ok(id) = parse_partition_metadata(text) {
            let again = parse_partition_metadata(&format_partition_metadata(&id))
                .expect("formatted partition.metadata does not parse");
            assert_eq!(again, id);
        }
        if let Ok(id) = uuid_from_kafka_string(text) {
            assert_eq!(uuid_from_kafka_string(&uuid_to_kafka_string(&id)), Ok(id));
        }
        if data.len() >= 16 {
            let mut id = [0u8; 16];
            id.copy_from_slice(&data[..16]);
            let s = uuid_to_kafka_string(&id);
            assert_eq!(s.len(), 22);
            assert_eq!(uuid_from_kafka_string(&s), Ok(id), "Kafka UUID does not round-trip");
        }
        let _ = parse_properties(text);

        for line in text.lines() {
            if let Some((off, kind)) = parse_segment_file_name(line) {
                assert!(off >= 0, "negative base offset from a file name");
                assert_eq!(parse_segment_file_name(&segment_file_name(off, kind)), Some((off, kind)));
            }
            if let Some(off) = parse_offset_stem(line) {
                assert!(off >= 0);
            }
        }
    }

    // ------------------------------------------------------------------------------------
    // principal_rules
    // ------------------------------------------------------------------------------------

    /// Target `principal_rules`: `ssl.principal.mapping.rules` as an operator writes them (the
    /// input's first line) and a certificate subject to map (the rest). Parsing either refuses
    /// the rules or gives rules that map any subject without panicking, the same way twice.
    pub fn principal_rules(data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        let (rules, dn) = text.split_once('\n').unwrap_or((text.as_ref(), "CN=alice,O=Acme"));
        if let Ok(mapper) = sluice_config::SslPrincipalMapper::parse(rules) {
            let name = mapper.name(dn);
            assert_eq!(mapper.name(dn), name, "mapping is not deterministic");
        }
    }

    // ------------------------------------------------------------------------------------
    // oauthbearer
    // ------------------------------------------------------------------------------------

    /// The key set the `oauthbearer` target validates signed tokens against (an RSA and an
    /// EC key; nothing signs with them, so only the paths up to the signature check and the
    /// refusals are reached).
    pub const FUZZ_JWKS: &str = r#"{"keys":[
        {"kty":"RSA","kid":"r1","alg":"RS256","use":"sig","e":"AQAB","n":"wAvhYfZDk3tmR3jWwzvyhrQ2dsPtpWm7OKo6IztSMfaWhldpVyRmT8C8JKfDOG8u4ryE6Ppr-oTN3T1qHbDEj0-XGz_AVUYi1KZoCR2Me1iQrYr3vSRJUnl7XQw3uIHzn6nWMKzRFxbEoQKFGwLV9CUmxzEFJbKH6pclJ0Hxr20mPqHgW8dwLahFewbOBUyTJWNDw-QVlUW9F06rp6QVaXXNHaOEQsdCpWpKdRnmcoHNkgHxUY8LA0gtA-ik72jJ9sjz5nZ7oo2wQzf4xGEUK5GSJm0HPzrbPfuE0c7pJAtDRYp6hDnqMUB19kBb9mF6X8xAo0oJSmkUnmm6cpazxw"},
        {"kty":"EC","crv":"P-256","kid":"e1","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;

    /// Target `oauthbearer`: the OAUTHBEARER client first message (the first SASL token of an
    /// unauthenticated client). Parsing it, and validating its token as Kafka's unsecured and
    /// broker JWT validators do, never panics; a parsed message rebuilt by the client encoder
    /// parses back the same; every refusal's challenge is one JSON object. The input is also
    /// read as a JSON Web Key Set and, whole, as a token.
    pub fn oauthbearer(data: &[u8]) {
        use sluice_sasl::oauthbearer::{
            client_first, parse_client_first, Jwks, JwtValidator, UnsecuredValidator,
        };
        const NOW_MS: i64 = 1_700_000_000_000;
        let unsecured = UnsecuredValidator {
            required_scope: vec!["kafka".into()],
            clock_skew_ms: 1000,
            ..UnsecuredValidator::default()
        };
        let secured = JwtValidator {
            expected_audience: vec!["kafka".into()],
            expected_issuer: Some("https://idp".into()),
            ..JwtValidator::default()
        };
        let keys = Jwks::parse(FUZZ_JWKS.as_bytes()).unwrap_or_default();
        let _ = Jwks::parse(data);
        let mut tokens = vec![String::from_utf8_lossy(data).into_owned()];
        if let Ok(first) = parse_client_first(data) {
            let again = parse_client_first(&client_first(&first.token, &first.extensions));
            if first.authzid.is_empty() {
                assert_eq!(again.as_ref().ok(), Some(&first), "round trip");
            }
            tokens.push(first.token);
        }
        for token in tokens {
            if let Err(r) = unsecured.validate(&token, NOW_MS) {
                let json: Result<serde_json::Value, _> = serde_json::from_str(&r.challenge());
                assert!(json.is_ok_and(|v| v.is_object()), "challenge {}", r.challenge());
            }
            let _ = secured.validate(&token, &keys, NOW_MS);
        }
    }

    // ------------------------------------------------------------------------------------
    // sasl
    // ------------------------------------------------------------------------------------

    /// Target `sasl`: the SASL/PLAIN and SCRAM messages a client (or, for the broker's own
    /// SCRAM client, a peer) sends before it is authenticated. The whole input is a PLAIN
    /// message: parsing and checking it never panics, and a parsed message rebuilt by the
    /// client encoder parses back the same user and password. Split at its first newline, it
    /// is a SCRAM client-first then client-final message for the server side of both
    /// mechanisms (a known user, so the proof check is reached), and a server-first then
    /// server-final message for the client side.
    pub fn sasl(data: &[u8]) {
        use sluice_sasl::plain;
        use sluice_sasl::{ScramClient, ScramCredential, ScramMechanism, ScramServer};
        if let Ok(m) = plain::parse(data) {
            let _ = plain::authenticate(&m, Some("secret"));
            let _ = plain::authenticate(&m, None);
            let again = plain::parse(&plain::client_message(&m.username, &m.password));
            let again = again.expect("a PLAIN client message of a parsed user parses");
            assert_eq!(
                (again.username.as_str(), again.password.as_str()),
                (m.username.as_str(), m.password.as_str()),
                "round trip"
            );
        }
        let (first, last) = match data.iter().position(|b| *b == b'\n') {
            Some(i) => (&data[..i], &data[i + 1..]),
            None => (data, &b""[..]),
        };
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let salted = vec![7u8; m.hash_len()];
            let credential = ScramCredential::from_salted_password(m, b"salt", &salted, 4096);
            let mut server = ScramServer::with_nonce(m, "servernonce");
            if server.client_first(first, |_| Some(credential.clone())).is_ok() {
                let _ = server.client_final(last);
            }
            let _ = server.client_final(last);
            let mut client = ScramClient::with_nonce(m, "user", "pw", "clientnonce");
            if client.client_final(first).is_ok() {
                let _ = client.verify_server_final(last);
            }
        }
    }
}
