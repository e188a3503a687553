//! OpenMessaging Benchmark files: YAML read by the `serde_yaml_ng` crate (a maintained
//! successor of `serde_yaml`), reduced to the shape those files have: top-level `key: scalar`,
//! `key: |` text blocks, and `key:` maps of `name: scalar` (one level). Lists and deeper
//! nesting are an error naming the key; YAML syntax errors name the line.

use std::collections::BTreeMap;

/// Every limit the parser enforces.
pub const MAX_FILE_BYTES: usize = 1 << 20;
pub const MAX_KEYS: usize = 256;

/// One top-level value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Scalar(String),
    /// A `|` / `>` block: the lines with their common indentation removed, joined by `\n`.
    Block(String),
    /// An indented `name: value` map.
    Map(BTreeMap<String, String>),
}

impl Value {
    /// The value as Java-properties-like pairs: a block is parsed as `name=value` lines, a map
    /// is taken as is.
    pub fn as_properties(&self) -> Result<BTreeMap<String, String>, YamlError> {
        match self {
            Value::Map(m) => Ok(m.clone()),
            Value::Block(text) | Value::Scalar(text) => {
                let mut out = BTreeMap::new();
                for line in text.lines() {
                    let line = line.trim();
                    if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                        continue;
                    }
                    let (k, v) = line
                        .split_once('=')
                        .or_else(|| line.split_once(':'))
                        .ok_or_else(|| YamlError {
                            line: 0,
                            reason: format!("{line:?} is not name=value"),
                        })?;
                    out.insert(k.trim().to_string(), v.trim().to_string());
                }
                Ok(out)
            }
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct YamlError {
    pub line: usize,
    pub reason: String,
}

fn err(line: usize, reason: impl Into<String>) -> YamlError {
    YamlError {
        line,
        reason: reason.into(),
    }
}

/// A scalar as text (numbers and booleans as written in canonical form), or None for a
/// collection.
fn scalar(v: &serde_yaml_ng::Value) -> Option<String> {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::Null => Some(String::new()),
        Y::Bool(b) => Some(b.to_string()),
        Y::Number(n) => Some(n.to_string()),
        Y::String(s) => Some(s.clone()),
        Y::Sequence(_) | Y::Mapping(_) | Y::Tagged(_) => None,
    }
}

/// Parse a document (YAML, read by the `serde_yaml_ng` crate) into its top-level keys. The
/// shape OMB files have is required: a map whose values are scalars, text blocks, or maps of
/// scalars; anything else is an error naming the key.
pub fn parse(text: &str) -> Result<BTreeMap<String, Value>, YamlError> {
    use serde_yaml_ng::Value as Y;
    if text.len() > MAX_FILE_BYTES {
        return Err(err(
            0,
            format!("file is larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    let doc: Y = serde_yaml_ng::from_str(text).map_err(|e| YamlError {
        line: e.location().map_or(0, |l| l.line()),
        reason: e.to_string(),
    })?;
    let top = match doc {
        Y::Null => return Ok(BTreeMap::new()),
        Y::Mapping(m) => m,
        _ => return Err(err(1, "expected a map of `key: value` lines")),
    };
    if top.len() > MAX_KEYS {
        return Err(err(0, format!("more than {MAX_KEYS} keys")));
    }
    let mut out = BTreeMap::new();
    for (k, v) in top {
        let key = scalar(&k).ok_or_else(|| err(0, "a key is not a scalar"))?;
        let value = match v {
            Y::Null => Value::Map(BTreeMap::new()),
            Y::Mapping(m) => {
                let mut map = BTreeMap::new();
                for (mk, mv) in m {
                    let (Some(mk), Some(mv)) = (scalar(&mk), scalar(&mv)) else {
                        return Err(err(
                            0,
                            format!("{key}: only one level of nesting is supported"),
                        ));
                    };
                    map.insert(mk, mv);
                }
                Value::Map(map)
            }
            Y::String(s) if s.contains('\n') => Value::Block(s.trim_end().to_string()),
            other => Value::Scalar(
                scalar(&other).ok_or_else(|| err(0, format!("{key}: lists are not supported")))?,
            ),
        };
        out.insert(key, value);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn scalars_blocks_and_maps() {
        let doc = "\
# comment
name: \"1 topic / 100 partitions\"   # trailing
topics: 1
payloadFile: 'payload/payload-1Kb.data'
topicConfig: |
  min.insync.replicas=2
  flush.messages=1

producerConfig:
  acks: all
  linger.ms: 1
";
        let v = parse(doc).unwrap();
        assert_eq!(v["name"], Value::Scalar("1 topic / 100 partitions".into()));
        assert_eq!(v["topics"], Value::Scalar("1".into()));
        assert_eq!(
            v["payloadFile"],
            Value::Scalar("payload/payload-1Kb.data".into())
        );
        let tc = v["topicConfig"].as_properties().unwrap();
        assert_eq!(tc["flush.messages"], "1");
        assert_eq!(tc.len(), 2);
        let pc = v["producerConfig"].as_properties().unwrap();
        assert_eq!(pc["acks"], "all");
        assert_eq!(pc["linger.ms"], "1");
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for doc in [
            "  indented: 1",
            "- a\n- b",
            "a: [1, 2]",
            "a: \"open",
            "a: 1\na: 2",
            "m:\n  x:\n    y: 1",
            "just text",
            "\u{1F600}: \u{1F600}\n  \u{1F600}",
        ] {
            let _ = parse(doc); // must not panic
        }
        assert!(parse("a: 1\na: 2").is_err());
        assert!(parse("a: [1, 2]").is_err());
        assert!(parse("just text").is_err());
        assert!(parse("m:\n  x:\n    y: 1").is_err());
        assert_eq!(parse("a: \"open").unwrap_err().line, 1);
        // Flow maps and anchors are YAML: read as such.
        let v = parse("base: &b {acks: all}\nproducerConfig: *b").unwrap();
        assert_eq!(v["producerConfig"].as_properties().unwrap()["acks"], "all");
    }
}
