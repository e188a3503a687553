//! Records as the console shows them: decoded from the batches a Fetch returns (compressed
//! ones too), and rendered as text, pretty-printed JSON or hex.

use sluice_format::batch::{BatchHeader, HEADER_LEN};
use sluice_format::records::{parse_records, read_varint};

/// Largest decompressed records section the console decodes of one batch: one such section
/// is in memory at a time per page (a batch that decompresses past it is reported, not read).
pub(crate) const MAX_SECTION_BYTES: usize = 16 << 20;

/// One record of a partition, its fields cut to [`SHOWN_BYTES`] (the page shows no more).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) offset: i64,
    pub(crate) timestamp: i64,
    pub(crate) key: Option<Field>,
    pub(crate) value: Option<Field>,
    pub(crate) headers: Vec<(String, Option<Field>)>,
}

/// A field's first [`SHOWN_BYTES`] bytes and its whole length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) bytes: Vec<u8>,
    pub(crate) len: usize,
}

impl Field {
    fn of(b: &[u8]) -> Field {
        Field {
            bytes: b[..b.len().min(SHOWN_BYTES)].to_vec(),
            len: b.len(),
        }
    }
}

/// What one call of [`decode`] may do.
#[derive(Debug)]
pub(crate) struct Bounds<'a> {
    /// Records kept, at most.
    pub(crate) keep: usize,
    /// Records read, at most (a search's bound).
    pub(crate) read: u64,
    /// Keep only the records this matches (a search).
    pub(crate) matcher: Option<&'a Matcher>,
    /// Stop reading at this moment (a search's time bound), checked at every record.
    pub(crate) until: Option<std::time::Instant>,
}

/// What [`decode`] read.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    /// The records kept.
    pub(crate) records: Vec<Record>,
    /// Records read (kept or not).
    pub(crate) read: u64,
    /// The offset after the last record read, or after the last whole batch skipped.
    pub(crate) next: Option<i64>,
    /// The deadline passed.
    pub(crate) timed_out: bool,
    /// A batch that could not be read, with what was read before it.
    pub(crate) problem: Option<String>,
}

/// The data records of `bytes` (whole batches; a partial batch at the end, as a Fetch may
/// return, is left out) at offsets `>= from`, within `bounds`; control batches are skipped.
pub(crate) fn decode(bytes: &[u8], from: i64, bounds: &Bounds<'_>) -> Decoded {
    let mut out = Decoded::default();
    let mut pos = 0usize;
    while pos + HEADER_LEN <= bytes.len() {
        if out.records.len() >= bounds.keep || out.read >= bounds.read {
            break;
        }
        let h = match BatchHeader::parse(&bytes[pos..]) {
            Ok(h) => h,
            Err(e) => {
                out.problem = Some(format!("batch at byte {pos}: {e}"));
                break;
            }
        };
        let total = h.total_len();
        if pos + total > bytes.len() {
            break;
        }
        let batch = &bytes[pos..pos + total];
        pos += total;
        if h.is_control() || h.next_offset() <= from {
            out.next = Some(h.next_offset());
            continue;
        }
        let section = match sluice_format::codec::decompress(
            h.compression_codec(),
            &batch[HEADER_LEN..],
            MAX_SECTION_BYTES,
        ) {
            Ok(s) => s,
            Err(e) => {
                out.problem = Some(format!(
                    "batch at offset {} not read (more than {} MiB uncompressed, or damaged): {e}",
                    h.base_offset,
                    MAX_SECTION_BYTES >> 20
                ));
                break;
            }
        };
        let records = match parse_records(&section, h.record_count) {
            Ok(r) => r,
            Err(e) => {
                out.problem = Some(format!("batch at offset {}: {e}", h.base_offset));
                break;
            }
        };
        for r in records {
            let offset = h.base_offset.saturating_add(i64::from(r.offset_delta));
            if offset < from {
                continue;
            }
            if out.records.len() >= bounds.keep || out.read >= bounds.read {
                break;
            }
            if bounds.until.is_some_and(|t| std::time::Instant::now() >= t) {
                out.timed_out = true;
                return out;
            }
            out.read += 1;
            out.next = Some(offset.saturating_add(1));
            let key = r.key.map(|k| &section[k]);
            let value = r.value.map(|v| &section[v]);
            let headers = headers(&section[r.headers]).unwrap_or_default();
            if let Some(m) = bounds.matcher {
                if !m.matches(key, value, &headers) {
                    continue;
                }
            }
            let timestamp =
                if h.timestamp_type() == sluice_format::BatchTimestampType::LogAppendTime {
                    h.max_timestamp
                } else {
                    h.base_timestamp.saturating_add(r.timestamp_delta)
                };
            out.records.push(Record {
                offset,
                timestamp,
                key: key.map(Field::of),
                value: value.map(Field::of),
                headers: headers
                    .into_iter()
                    .map(|(k, v)| (k, v.map(Field::of)))
                    .collect(),
            });
        }
    }
    out
}

/// A header's key, and its value (None: null).
type Header<'a> = (String, Option<&'a [u8]>);

/// A record's headers section: a count, then key and value per header.
fn headers(buf: &[u8]) -> Option<Vec<Header<'_>>> {
    let mut pos = 0;
    let n = read_varint(buf, &mut pos).ok()?;
    let mut out = Vec::new();
    for _ in 0..n.max(0) {
        let klen = usize::try_from(read_varint(buf, &mut pos).ok()?).ok()?;
        let key = String::from_utf8_lossy(buf.get(pos..pos.checked_add(klen)?)?).into_owned();
        pos += klen;
        let vlen = read_varint(buf, &mut pos).ok()?;
        let value = if vlen < 0 {
            None
        } else {
            let vlen = usize::try_from(vlen).ok()?;
            let v = buf.get(pos..pos.checked_add(vlen)?)?;
            pos += vlen;
            Some(v)
        };
        out.push((key, value));
    }
    Some(out)
}

/// What a search looks for in a record's key, value, header names and header values: a
/// regular expression (RE2 syntax, on the raw bytes), or text, searched as an expression of
/// that literal. Either way the time is linear in the bytes searched.
#[derive(Debug)]
pub(crate) struct Matcher(regex::bytes::Regex);

/// Largest compiled search expression.
const REGEX_SIZE_MAX: usize = 1 << 20;

impl Matcher {
    pub(crate) fn new(text: &str, regex: bool) -> Result<Matcher, String> {
        let pattern = if regex {
            text.to_string()
        } else {
            regex::escape(text)
        };
        regex::bytes::RegexBuilder::new(&pattern)
            .size_limit(REGEX_SIZE_MAX)
            .build()
            .map(Matcher)
            .map_err(|e| format!("not a regular expression: {e}"))
    }

    pub(crate) fn matches(
        &self,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[(String, Option<&[u8]>)],
    ) -> bool {
        key.is_some_and(|k| self.0.is_match(k))
            || value.is_some_and(|v| self.0.is_match(v))
            || headers.iter().any(|(k, v)| {
                self.0.is_match(k.as_bytes()) || v.is_some_and(|v| self.0.is_match(v))
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

/// A field as `show` asks (the page escapes the result), with a note of what was cut.
pub(crate) fn render(f: &Field, show: Show) -> String {
    let cut = f.len - f.bytes.len();
    let shown = f.bytes.as_slice();
    let mut s = match show {
        Show::Hex => hex(shown),
        Show::Json if cut == 0 => match serde_json::from_slice::<serde_json::Value>(shown) {
            Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_else(|_| text(shown)),
            Err(_) => text(shown),
        },
        Show::Json | Show::Text if cut > 0 => match std::str::from_utf8(shown) {
            // Cut inside a character: the text up to it.
            Err(e) if e.error_len().is_none() => text(&shown[..e.valid_up_to()]),
            _ => text(shown),
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

    fn all() -> Bounds<'static> {
        Bounds {
            keep: 10,
            read: u64::MAX,
            matcher: None,
            until: None,
        }
    }

    #[test]
    fn a_built_batch_decodes_to_its_record_with_headers() {
        let b = batch(
            Some(b"k"),
            Some(b"{\"a\":1}"),
            vec![("h".into(), Some(b"v".to_vec())), ("n".into(), None)],
            1000,
        );
        let d = decode(&b, 0, &all());
        assert_eq!(d.problem, None);
        assert_eq!((d.records.len(), d.read, d.next), (1, 1, Some(1)));
        let r = &d.records[0];
        assert_eq!(r.key.as_ref().map(|k| k.bytes.as_slice()), Some(&b"k"[..]));
        assert_eq!(r.timestamp, 1000);
        assert_eq!(r.headers[0].0, "h");
        assert_eq!(r.headers[1], ("n".into(), None));
        let value = r.value.as_ref().map(|v| render(v, Show::Json));
        assert_eq!(value.as_deref(), Some("{\n  \"a\": 1\n}"));
    }

    #[test]
    fn a_partial_batch_at_the_end_is_left_out_and_limits_hold() {
        let mut bytes = batch(None, Some(b"one"), vec![], 1);
        let second = batch(None, Some(b"two"), vec![], 2);
        bytes.extend_from_slice(&second[..second.len() - 3]);
        let d = decode(&bytes, 0, &all());
        assert_eq!((d.records.len(), d.problem), (1, None));
        let none = Bounds { keep: 0, ..all() };
        assert!(decode(&bytes, 0, &none).records.is_empty());
        // Records before the asked offset are left out, and their batch is passed.
        let d = decode(&bytes, 1, &all());
        assert!(d.records.is_empty());
        assert_eq!(d.next, Some(1));
    }

    #[test]
    fn a_value_past_what_a_page_shows_is_kept_cut_and_a_search_still_sees_it_whole() {
        let mut big = vec![b'a'; SHOWN_BYTES + 10];
        big.extend_from_slice(b"needle");
        let b = batch(None, Some(&big), vec![], 1);
        let m = Matcher::new("needle", false).expect("a literal");
        let d = decode(
            &b,
            0,
            &Bounds {
                matcher: Some(&m),
                ..all()
            },
        );
        let v = d.records[0].value.as_ref().expect("a value");
        assert_eq!((v.bytes.len(), v.len), (SHOWN_BYTES, SHOWN_BYTES + 16));
        assert!(render(v, Show::Text).ends_with("… 16 more bytes not shown"));
    }

    #[test]
    fn a_batch_that_decompresses_past_the_bound_is_reported_not_read() {
        let mut b = sluice_format::BatchBuilder::new();
        b.records.push(sluice_format::SimpleRecord {
            timestamp: 1,
            value: Some(vec![0; MAX_SECTION_BYTES + 1]),
            ..Default::default()
        });
        let plain = b.build();
        let section = sluice_format::codec::compress(4, &plain[HEADER_LEN..]).expect("zstd");
        let mut bomb = plain[..HEADER_LEN].to_vec();
        bomb.extend_from_slice(&section);
        let len = (bomb.len() - 12) as i32;
        bomb[8..12].copy_from_slice(&len.to_be_bytes());
        bomb[21..23].copy_from_slice(&4i16.to_be_bytes());
        let d = decode(&bomb, 0, &all());
        assert!(d.records.is_empty());
        assert!(d.problem.is_some_and(|p| p.contains("not read")));
    }

    #[test]
    fn a_search_finds_text_and_expressions_in_keys_values_and_headers() {
        let headers = [("trace".to_string(), Some(&b"t-42"[..]))];
        let found = |text: &str, regex: bool| {
            Matcher::new(text, regex)
                .map(|m| m.matches(Some(b"order-17"), Some(b"{\"sku\":\"A-9\"}"), &headers))
        };
        assert_eq!(found("order-1", false), Ok(true));
        assert_eq!(found("A-9", false), Ok(true));
        assert_eq!(found("t-42", false), Ok(true));
        assert_eq!(found("trace", false), Ok(true));
        assert_eq!(found("missing", false), Ok(false));
        assert_eq!(found("(", false), Ok(false));
        assert_eq!(found(r"^order-\d+$", true), Ok(true));
        assert_eq!(found(r"^order-\d$", true), Ok(false));
        assert!(found("(", true).is_err());
    }

    #[test]
    fn bytes_that_are_not_text_are_shown_as_hex() {
        let f = |b: &[u8]| Field::of(b);
        assert_eq!(render(&f(&[0xff, 0x00]), Show::Text), "(not UTF-8) ff 00");
        assert_eq!(render(&f(b"ab"), Show::Hex), "61 62");
        assert_eq!(render(&f(b"not json"), Show::Json), "not json");
    }
}
