//! A parser for the small subset of YAML that OpenMessaging Benchmark files use.
//!
//! Accepted: `# comments`, top-level `key: scalar` lines (scalars may be quoted with `"` or
//! `'`), `key: |` (or `|-`, `>`) followed by an indented block of text, and `key:` followed by
//! an indented map of `name: scalar` lines (one level). Anything else (lists, flow maps,
//! anchors, deeper nesting) is an error naming the line, never a panic.

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

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn strip_comment(s: &str) -> &str {
    // A '#' starts a comment when it begins the value or follows a space, outside quotes.
    let mut quote: Option<char> = None;
    let mut prev_space = true;
    for (i, c) in s.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev_space => return &s[..i],
            None => {}
        }
        prev_space = c == ' ' || c == '\t';
    }
    s
}

fn unquote(s: &str, line: usize) -> Result<String, YamlError> {
    let s = s.trim();
    for q in ['"', '\''] {
        if let Some(rest) = s.strip_prefix(q) {
            let inner = rest
                .strip_suffix(q)
                .ok_or_else(|| err(line, format!("unterminated quote in {s:?}")))?;
            return Ok(inner.to_string());
        }
    }
    if s.starts_with('[') || s.starts_with('{') || s.starts_with('&') || s.starts_with('*') {
        return Err(err(
            line,
            format!("{s:?}: flow collections and anchors are not supported"),
        ));
    }
    Ok(s.to_string())
}

fn split_key(line: &str, n: usize) -> Result<(&str, &str), YamlError> {
    let (k, v) = line
        .split_once(':')
        .ok_or_else(|| err(n, format!("expected `key: value`, found {:?}", line.trim())))?;
    let k = k.trim();
    if k.is_empty() || k.starts_with('-') {
        return Err(err(
            n,
            format!("expected `key: value`, found {:?}", line.trim()),
        ));
    }
    Ok((k, v))
}

/// Parse a document into its top-level keys.
pub fn parse(text: &str) -> Result<BTreeMap<String, Value>, YamlError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(err(
            0,
            format!("file is larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let n = i + 1;
        let raw = lines[i].trim_end();
        if raw.contains('\t') && raw.trim_start().len() != raw.trim_start_matches('\t').len() {
            return Err(err(n, "tabs are not allowed for indentation"));
        }
        let content = strip_comment(raw);
        if content.trim().is_empty() || content.trim() == "---" {
            i += 1;
            continue;
        }
        if indent_of(content) != 0 {
            return Err(err(n, "unexpected indentation"));
        }
        let (key, rest) = split_key(content, n)?;
        let rest = rest.trim();
        i += 1;
        let value = if rest.is_empty() {
            // An indented map (or nothing: an empty map).
            let mut map = BTreeMap::new();
            while i < lines.len() {
                let c = strip_comment(lines[i].trim_end());
                if c.trim().is_empty() {
                    i += 1;
                    continue;
                }
                if indent_of(c) == 0 {
                    break;
                }
                let (k, v) = split_key(c, i + 1)?;
                if v.trim().is_empty() {
                    return Err(err(i + 1, "only one level of nesting is supported"));
                }
                map.insert(k.to_string(), unquote(v, i + 1)?);
                i += 1;
            }
            Value::Map(map)
        } else if matches!(rest, "|" | "|-" | "|+" | ">" | ">-") {
            let mut block: Vec<&str> = Vec::new();
            while i < lines.len() {
                let l = lines[i].trim_end();
                if !l.is_empty() && indent_of(l) == 0 {
                    break;
                }
                block.push(l);
                i += 1;
            }
            let common = block
                .iter()
                .filter(|l| !l.trim().is_empty())
                .map(|l| indent_of(l))
                .min()
                .unwrap_or(0);
            let joined: Vec<&str> = block
                .iter()
                .map(|l| if l.len() >= common { &l[common..] } else { "" })
                .collect();
            let sep = if rest.starts_with('>') { " " } else { "\n" };
            Value::Block(joined.join(sep).trim_end().to_string())
        } else {
            Value::Scalar(unquote(rest, n)?)
        };
        if out.len() >= MAX_KEYS {
            return Err(err(n, format!("more than {MAX_KEYS} keys")));
        }
        if out.insert(key.to_string(), value).is_some() {
            return Err(err(n, format!("duplicate key {key:?}")));
        }
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
    }
}
