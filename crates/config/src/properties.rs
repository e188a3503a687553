//! Java `.properties` syntax, as `java.util.Properties::load` reads it.
//!
//! Natural lines end at `\n`, `\r` or `\r\n`. Leading whitespace (space, tab, form feed) is
//! skipped. Lines whose first non-blank character is `#` or `!` are comments. A line ending in
//! an odd number of backslashes continues on the next line, whose leading whitespace is
//! dropped. The key runs to the first unescaped `=`, `:` or whitespace; whitespace and at most
//! one `=`/`:` separate it from the value. Escapes: `\t`, `\n`, `\r`, `\f`, `\uXXXX` (UTF-16,
//! surrogate pairs combined) and `\` before any other character stands for that character.
//! Values keep their trailing whitespace, as in Java; the config parsers trim on use, as
//! Kafka's `ConfigDef` does. The last occurrence of a key wins.

use std::collections::BTreeMap;

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Split into natural lines on `\n`, `\r` and `\r\n`.
fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                lines.push(&text[start..i]);
                start = i + 1;
            }
            b'\r' => {
                lines.push(&text[start..i]);
                if bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < bytes.len() {
        lines.push(&text[start..]);
    }
    lines
}

fn trailing_backslashes(s: &str) -> usize {
    s.bytes().rev().take_while(|&b| b == b'\\').count()
}

/// Join natural lines into logical lines, dropping blanks and comments. Escapes stay raw.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in natural_lines(text) {
        let stripped = line.trim_start_matches(is_blank);
        let mut buf = match current.take() {
            Some(buf) => buf,
            None => {
                if stripped.is_empty() || stripped.starts_with('#') || stripped.starts_with('!') {
                    continue;
                }
                String::new()
            }
        };
        if trailing_backslashes(stripped) % 2 == 1 {
            buf.push_str(&stripped[..stripped.len() - 1]);
            current = Some(buf);
        } else {
            buf.push_str(stripped);
            out.push(buf);
        }
    }
    // A continuation at end of input: the dangling backslash has already been dropped.
    if let Some(buf) = current {
        out.push(buf);
    }
    out
}

/// Decode escapes in a raw key or value.
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let chars: Vec<char> = raw.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&next) = chars.get(i + 1) else {
            // A lone trailing backslash stands for nothing.
            break;
        };
        match next {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\u{c}'),
            'u' => match hex4(&chars, i + 2) {
                Some(unit) => {
                    i += 6;
                    if (0xD800..0xDC00).contains(&unit) {
                        // High surrogate: combine with a following \uDC00..\uDFFF if present.
                        if chars.get(i) == Some(&'\\') && chars.get(i + 1) == Some(&'u') {
                            if let Some(low) = hex4(&chars, i + 2) {
                                if (0xDC00..0xE000).contains(&low) {
                                    let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                                    out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                                    i += 6;
                                    continue;
                                }
                            }
                        }
                        out.push('\u{FFFD}');
                    } else {
                        out.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
                    }
                    continue;
                }
                None => {
                    // Malformed \u escape (Java throws): keep the text as written.
                    out.push('\\');
                    out.push('u');
                }
            },
            other => out.push(other),
        }
        i += 2;
    }
    out
}

fn hex4(chars: &[char], at: usize) -> Option<u32> {
    let digits = chars.get(at..at + 4)?;
    let mut v = 0u32;
    for d in digits {
        v = v * 16 + d.to_digit(16)?;
    }
    Some(v)
}

/// Split a logical line into raw key and raw value.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut key_end = line.len();
    let mut value_start = line.len();
    let mut has_separator = false;
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        if c == '\\' {
            escaped = true;
            continue;
        }
        if c == '=' || c == ':' {
            key_end = i;
            value_start = i + 1;
            has_separator = true;
            break;
        }
        if is_blank(c) {
            key_end = i;
            value_start = i + 1;
            break;
        }
    }
    let mut rest = line[value_start..].trim_start_matches(is_blank);
    if !has_separator {
        if let Some(r) = rest.strip_prefix(['=', ':']) {
            rest = r.trim_start_matches(is_blank);
        }
    }
    (&line[..key_end], rest)
}

/// See the module documentation for the accepted syntax.
pub(crate) fn parse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in logical_lines(text) {
        let (key, value) = split_key_value(&line);
        out.insert(unescape(key), unescape(value));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::parse;

    fn one(text: &str) -> (String, String) {
        let map = parse(text);
        assert_eq!(map.len(), 1, "{map:?}");
        map.into_iter().next().unwrap()
    }

    #[test]
    fn separators() {
        assert_eq!(one("a=b"), ("a".into(), "b".into()));
        assert_eq!(one("a:b"), ("a".into(), "b".into()));
        assert_eq!(one("a b"), ("a".into(), "b".into()));
        assert_eq!(one("  a \t =  b"), ("a".into(), "b".into()));
        assert_eq!(one("a  :  b"), ("a".into(), "b".into()));
        assert_eq!(one("a:=b"), ("a".into(), "=b".into()));
        assert_eq!(one("a = = b"), ("a".into(), "= b".into()));
        assert_eq!(one("a"), ("a".into(), "".into()));
        assert_eq!(one("a="), ("a".into(), "".into()));
        assert_eq!(one("a=b "), ("a".into(), "b ".into()));
    }

    #[test]
    fn comments_and_blank_lines() {
        let map = parse("# c\n! c\n\n   \n  # indented\na=1\n");
        assert_eq!(map.len(), 1);
        assert_eq!(map["a"], "1");
        // A comment line ending in a backslash does not continue.
        let map = parse("# c \\\na=1");
        assert_eq!(map["a"], "1");
        // # inside a value is not a comment.
        assert_eq!(one("a=b # c"), ("a".into(), "b # c".into()));
    }

    #[test]
    fn continuations() {
        assert_eq!(one("a=b\\\n   c"), ("a".into(), "bc".into()));
        assert_eq!(
            one("a=b, \\\r\n   c, \\\r   d"),
            ("a".into(), "b, c, d".into())
        );
        // An even number of backslashes is an escaped backslash, not a continuation.
        let map = parse("a=b\\\\\nc=d");
        assert_eq!(map["a"], "b\\");
        assert_eq!(map["c"], "d");
        // A continuation line starting with # is part of the value.
        assert_eq!(one("a=b\\\n #c"), ("a".into(), "b#c".into()));
        // Continuation at end of input.
        assert_eq!(one("a=b\\"), ("a".into(), "b".into()));
        // An empty continuation line ends the logical line.
        let map = parse("a=b\\\n\nc=d");
        assert_eq!(map["a"], "b");
        assert_eq!(map["c"], "d");
        // Continued key.
        assert_eq!(one("ke\\\n  y=v"), ("key".into(), "v".into()));
    }

    #[test]
    fn escapes() {
        assert_eq!(
            one("a=x\\ty\\nz\\rw\\f"),
            ("a".into(), "x\ty\nz\rw\u{c}".into())
        );
        assert_eq!(one("a=\\u0041\\u00e9"), ("a".into(), "Aé".into()));
        assert_eq!(one("a=\\uD83D\\uDE00"), ("a".into(), "😀".into()));
        assert_eq!(one("a=\\uD83D"), ("a".into(), "\u{FFFD}".into()));
        assert_eq!(one("a=\\uZZ"), ("a".into(), "\\uZZ".into()));
        assert_eq!(one("a=\\q\\\\"), ("a".into(), "q\\".into()));
        assert_eq!(one("k\\=ey=v"), ("k=ey".into(), "v".into()));
        assert_eq!(one("k\\:ey:v"), ("k:ey".into(), "v".into()));
        assert_eq!(one("k\\ ey v"), ("k ey".into(), "v".into()));
        assert_eq!(one("a=\\  b"), ("a".into(), "  b".into()));
    }

    #[test]
    fn last_wins_and_crlf() {
        let map = parse("a=1\r\na=2\rb=3");
        assert_eq!(map["a"], "2");
        assert_eq!(map["b"], "3");
    }
}
