//! Records as the console shows them: decoded from the batches a Fetch returns (compressed
//! ones too), and rendered as text, pretty-printed JSON or hex.

use sluice_format::batch::{BatchHeader, HEADER_LEN};
use sluice_format::records::{parse_records, read_varint};

/// Largest decompressed records section the console decodes of one batch.
pub(crate) const MAX_SECTION_BYTES: usize = 64 << 20;

/// One record of a partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) offset: i64,
    pub(crate) timestamp: i64,
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) value: Option<Vec<u8>>,
    pub(crate) headers: Vec<(String, Option<Vec<u8>>)>,
}

/// The data records of `bytes` (whole batches; a partial batch at the end, as a Fetch may
/// return, is left out) at offsets `>= from`; control batches are skipped. Stops after
/// `limit` records. Err: a batch that cannot be read, with what was read before it.
pub(crate) fn decode(bytes: &[u8], from: i64, limit: usize) -> (Vec<Record>, Option<String>) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + HEADER_LEN <= bytes.len() && out.len() < limit {
        let h = match BatchHeader::parse(&bytes[pos..]) {
            Ok(h) => h,
            Err(e) => return (out, Some(format!("batch at byte {pos}: {e}"))),
        };
        let total = h.total_len();
        if pos + total > bytes.len() {
            break;
        }
        let batch = &bytes[pos..pos + total];
        pos += total;
        if h.is_control() || h.next_offset() <= from {
            continue;
        }
        let section = match sluice_format::codec::decompress(
            h.compression_codec(),
            &batch[HEADER_LEN..],
            MAX_SECTION_BYTES,
        ) {
            Ok(s) => s,
            Err(e) => return (out, Some(format!("batch at offset {}: {e}", h.base_offset))),
        };
        let records = match parse_records(&section, h.record_count) {
            Ok(r) => r,
            Err(e) => return (out, Some(format!("batch at offset {}: {e}", h.base_offset))),
        };
        for r in records {
            let offset = h.base_offset + i64::from(r.offset_delta);
            if offset < from {
                continue;
            }
            if out.len() >= limit {
                break;
            }
            let timestamp =
                if h.timestamp_type() == sluice_format::BatchTimestampType::LogAppendTime {
                    h.max_timestamp
                } else {
                    h.base_timestamp + r.timestamp_delta
                };
            out.push(Record {
                offset,
                timestamp,
                key: r.key.map(|k| section[k].to_vec()),
                value: r.value.map(|v| section[v].to_vec()),
                headers: headers(&section[r.headers]).unwrap_or_default(),
            });
        }
    }
    (out, None)
}

/// The offset after the last whole batch of `bytes`: where to read on when a fetch held only
/// batches with no record to show (control batches, records before the asked offset).
pub(crate) fn batches_end(bytes: &[u8]) -> Option<i64> {
    let mut pos = 0usize;
    let mut end = None;
    while pos + HEADER_LEN <= bytes.len() {
        let h = BatchHeader::parse(&bytes[pos..]).ok()?;
        if pos + h.total_len() > bytes.len() {
            break;
        }
        end = Some(h.next_offset());
        pos += h.total_len();
    }
    end
}

/// A record's headers section: a count, then key and value per header.
fn headers(buf: &[u8]) -> Option<Vec<(String, Option<Vec<u8>>)>> {
    let mut pos = 0;
    let n = read_varint(buf, &mut pos).ok()?;
    let mut out = Vec::new();
    for _ in 0..n.max(0) {
        let klen = usize::try_from(read_varint(buf, &mut pos).ok()?).ok()?;
        let key = String::from_utf8_lossy(buf.get(pos..pos + klen)?).into_owned();
        pos += klen;
        let vlen = read_varint(buf, &mut pos).ok()?;
        let value = if vlen < 0 {
            None
        } else {
            let vlen = usize::try_from(vlen).ok()?;
            let v = buf.get(pos..pos + vlen)?.to_vec();
            pos += vlen;
            Some(v)
        };
        out.push((key, value));
    }
    Some(out)
}

/// What a search looks for in a record's key, value, header names and header values.
#[derive(Debug)]
pub(crate) enum Matcher {
    /// These bytes, anywhere.
    Text(Vec<u8>),
    /// A match of this expression (RE2 syntax, on the raw bytes).
    Regex(regex::bytes::Regex),
}

/// Largest compiled search expression.
const REGEX_SIZE_MAX: usize = 1 << 20;

impl Matcher {
    pub(crate) fn new(text: &str, regex: bool) -> Result<Matcher, String> {
        if !regex {
            return Ok(Matcher::Text(text.as_bytes().to_vec()));
        }
        regex::bytes::RegexBuilder::new(text)
            .size_limit(REGEX_SIZE_MAX)
            .build()
            .map(Matcher::Regex)
            .map_err(|e| format!("not a regular expression: {e}"))
    }

    fn found(&self, bytes: &[u8]) -> bool {
        match self {
            Matcher::Text(t) => t.is_empty() || bytes.windows(t.len()).any(|w| w == t.as_slice()),
            Matcher::Regex(r) => r.is_match(bytes),
        }
    }

    pub(crate) fn matches(&self, r: &Record) -> bool {
        r.key.as_deref().is_some_and(|k| self.found(k))
            || r.value.as_deref().is_some_and(|v| self.found(v))
            || r.headers.iter().any(|(k, v)| {
                self.found(k.as_bytes()) || v.as_deref().is_some_and(|v| self.found(v))
            })
    }
}

/// How the console shows a record's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Show {
    /// UTF-8 text; bytes that are not are shown as hex.
    #[default]
    Text,
    /// JSON pretty-printed when it parses, else as text.
    Json,
    Hex,
}

impl Show {
    pub(crate) fn parse(s: Option<&str>) -> Show {
        match s {
            Some("json") => Show::Json,
            Some("hex") => Show::Hex,
            _ => Show::Text,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Show::Text => "text",
            Show::Json => "json",
            Show::Hex => "hex",
        }
    }
}

/// Largest part of a value shown on a page; the rest is cut with a note.
pub(crate) const SHOWN_BYTES: usize = 64 * 1024;

/// `bytes` as `show` asks (the page escapes the result).
pub(crate) fn render(bytes: &[u8], show: Show) -> String {
    let (shown, cut) = if bytes.len() > SHOWN_BYTES {
        (&bytes[..SHOWN_BYTES], bytes.len() - SHOWN_BYTES)
    } else {
        (bytes, 0)
    };
    let mut s = match show {
        Show::Hex => hex(shown),
        Show::Json if cut == 0 => match serde_json::from_slice::<serde_json::Value>(shown) {
            Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_else(|_| text(shown)),
            Err(_) => text(shown),
        },
        Show::Json | Show::Text => text(shown),
    };
    if cut > 0 {
        s.push_str(&format!("\n… {cut} more bytes not shown"));
    }
    s
}

fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => format!("(not UTF-8) {}", hex(bytes)),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(if i % 16 == 0 { '\n' } else { ' ' });
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// A batch of one record to produce, stamped now.
pub(crate) fn batch(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    now_ms: i64,
) -> Vec<u8> {
    let mut b = sluice_format::BatchBuilder::new();
    b.records.push(sluice_format::SimpleRecord {
        timestamp: now_ms,
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers,
    });
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_batch_decodes_to_its_record_with_headers() {
        let b = batch(
            Some(b"k"),
            Some(b"{\"a\":1}"),
            vec![("h".into(), Some(b"v".to_vec())), ("n".into(), None)],
            1000,
        );
        let (records, err) = decode(&b, 0, 10);
        assert_eq!(err, None);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].key.as_deref(), Some(&b"k"[..]));
        assert_eq!(records[0].timestamp, 1000);
        assert_eq!(
            records[0].headers,
            vec![("h".into(), Some(b"v".to_vec())), ("n".into(), None)]
        );
        assert_eq!(
            render(records[0].value.as_deref().unwrap_or_default(), Show::Json),
            "{\n  \"a\": 1\n}"
        );
    }

    #[test]
    fn a_partial_batch_at_the_end_is_left_out_and_limits_hold() {
        let mut bytes = batch(None, Some(b"one"), vec![], 1);
        let second = batch(None, Some(b"two"), vec![], 2);
        bytes.extend_from_slice(&second[..second.len() - 3]);
        let (records, err) = decode(&bytes, 0, 10);
        assert_eq!((records.len(), err), (1, None));
        let (records, _) = decode(&bytes, 0, 0);
        assert!(records.is_empty());
        // Records before the asked offset are left out.
        let (records, _) = decode(&bytes, 1, 10);
        assert!(records.is_empty());
    }

    #[test]
    fn a_search_finds_text_and_expressions_in_keys_values_and_headers() {
        let b = batch(
            Some(b"order-17"),
            Some(b"{\"sku\":\"A-9\"}"),
            vec![("trace".into(), Some(b"t-42".to_vec()))],
            1,
        );
        let (records, _) = decode(&b, 0, 1);
        let r = &records[0];
        let found = |text: &str, regex: bool| Matcher::new(text, regex).map(|m| m.matches(r));
        assert_eq!(found("order-1", false), Ok(true));
        assert_eq!(found("A-9", false), Ok(true));
        assert_eq!(found("t-42", false), Ok(true));
        assert_eq!(found("trace", false), Ok(true));
        assert_eq!(found("missing", false), Ok(false));
        assert_eq!(found(r"^order-\d+$", true), Ok(true));
        assert_eq!(found(r"^order-\d$", true), Ok(false));
        assert!(found("(", true).is_err());
    }

    #[test]
    fn bytes_that_are_not_text_are_shown_as_hex() {
        assert_eq!(render(&[0xff, 0x00], Show::Text), "(not UTF-8) ff 00");
        assert_eq!(render(b"ab", Show::Hex), "61 62");
        assert_eq!(render(b"not json", Show::Json), "not json");
    }
}
