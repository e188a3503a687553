//! Kafka's small text files: checkpoint files, `partition.metadata`, `meta.properties`, and the
//! URL-safe base64 form of Kafka UUIDs.

use crate::FormatError;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// Kafka's `Uuid.toString()`: the 16 bytes (most significant first) in URL-safe base64
/// without padding (22 characters).
pub fn uuid_to_kafka_string(bytes: &[u8; 16]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Parse Kafka's 22-character URL-safe base64 UUID form (as Kafka's `Uuid.fromString`, with
/// the URL-safe alphabet only; the 4 unused bits of the last character must be zero, as in
/// a canonical encoding).
pub fn uuid_from_kafka_string(s: &str) -> Result<[u8; 16], FormatError> {
    let s = s.trim();
    let bad = || FormatError::Text(format!("invalid Kafka UUID {s:?}"));
    if s.len() != 22 {
        return Err(bad());
    }
    let mut out = [0u8; 16];
    match URL_SAFE_NO_PAD.decode_slice(s, &mut out) {
        Ok(16) => Ok(out),
        _ => Err(bad()),
    }
}

/// `partition.metadata` content: `version: 0\ntopic_id: <uuid>\n`.
pub fn format_partition_metadata(topic_id: &[u8; 16]) -> String {
    format!("version: 0\ntopic_id: {}\n", uuid_to_kafka_string(topic_id))
}

/// Parse `partition.metadata`; returns the topic id.
pub fn parse_partition_metadata(text: &str) -> Result<[u8; 16], FormatError> {
    let mut lines = text.lines();
    let version_line = lines
        .next()
        .ok_or_else(|| FormatError::Text("empty partition.metadata".into()))?;
    let version = version_line
        .strip_prefix("version:")
        .map(str::trim)
        .ok_or_else(|| FormatError::Text(format!("bad version line {version_line:?}")))?;
    if version != "0" {
        return Err(FormatError::Text(format!(
            "unsupported partition.metadata version {version}"
        )));
    }
    let id_line = lines
        .next()
        .ok_or_else(|| FormatError::Text("missing topic_id line".into()))?;
    let id = id_line
        .strip_prefix("topic_id:")
        .map(str::trim)
        .ok_or_else(|| FormatError::Text(format!("bad topic_id line {id_line:?}")))?;
    uuid_from_kafka_string(id)
}

fn checkpoint_body<'a>(text: &'a str, what: &str) -> Result<Vec<&'a str>, FormatError> {
    let mut lines = text.lines();
    let version = lines.next().map(str::trim).unwrap_or("");
    if version != "0" {
        return Err(FormatError::Text(format!(
            "{what}: unsupported version {version:?}"
        )));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| FormatError::Text(format!("{what}: bad entry count")))?;
    let entries: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
    if entries.len() != count {
        return Err(FormatError::Text(format!(
            "{what}: expected {count} entries, found {}",
            entries.len()
        )));
    }
    Ok(entries)
}

/// `recovery-point-offset-checkpoint` / `log-start-offset-checkpoint` content:
/// `0\n<n>\n<topic> <partition> <offset>\n...`.
pub fn format_offset_checkpoint(entries: &[(String, i32, i64)]) -> String {
    let mut s = format!("0\n{}\n", entries.len());
    for (t, p, o) in entries {
        s.push_str(&format!("{t} {p} {o}\n"));
    }
    s
}

/// Parse an offset checkpoint file.
pub fn parse_offset_checkpoint(text: &str) -> Result<Vec<(String, i32, i64)>, FormatError> {
    let mut out = Vec::new();
    for line in checkpoint_body(text, "offset checkpoint")? {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let bad = || FormatError::Text(format!("offset checkpoint: bad line {line:?}"));
        if parts.len() != 3 {
            return Err(bad());
        }
        let p: i32 = parts[1].parse().map_err(|_| bad())?;
        let o: i64 = parts[2].parse().map_err(|_| bad())?;
        out.push((parts[0].to_string(), p, o));
    }
    Ok(out)
}

/// `leader-epoch-checkpoint` content: `0\n<n>\n<epoch> <startOffset>\n...`.
pub fn format_leader_epoch_checkpoint(entries: &[(i32, i64)]) -> String {
    let mut s = format!("0\n{}\n", entries.len());
    for (e, o) in entries {
        s.push_str(&format!("{e} {o}\n"));
    }
    s
}

/// Parse a leader epoch checkpoint.
pub fn parse_leader_epoch_checkpoint(text: &str) -> Result<Vec<(i32, i64)>, FormatError> {
    let mut out = Vec::new();
    for line in checkpoint_body(text, "leader epoch checkpoint")? {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let bad = || FormatError::Text(format!("leader epoch checkpoint: bad line {line:?}"));
        if parts.len() != 2 {
            return Err(bad());
        }
        let e: i32 = parts[0].parse().map_err(|_| bad())?;
        let o: i64 = parts[1].parse().map_err(|_| bad())?;
        out.push((e, o));
    }
    Ok(out)
}

/// Parse a Java properties file in the simple form Kafka writes (`key=value` lines, `#` or `!`
/// comments, blank lines). Backslash escapes are resolved for the common cases.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        let mut key = String::new();
        let mut chars = line.chars();
        let mut escaped = false;
        let mut found_sep = false;
        for c in chars.by_ref() {
            if escaped {
                key.push(c);
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '=' || c == ':' {
                found_sep = true;
                break;
            } else {
                key.push(c);
            }
        }
        let rest: String = if found_sep {
            chars.collect()
        } else {
            String::new()
        };
        let value = unescape(rest.trim());
        out.push((key.trim().to_string(), value));
    }
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Format properties as `key=value` lines after a comment line, sorted by key like Kafka's
/// output. Values must not need escaping (cluster ids, numbers and UUIDs do not).
pub fn format_properties(comment: &str, props: &[(&str, String)]) -> String {
    let mut sorted: Vec<&(&str, String)> = props.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut s = format!("#\n#{comment}\n");
    for (k, v) in sorted {
        s.push_str(&format!("{k}={v}\n"));
    }
    s
}
