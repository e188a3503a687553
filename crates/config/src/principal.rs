//! `ssl.principal.mapping.rules`: how a client certificate's subject (its distinguished name
//! as Java prints an `X500Principal` in RFC 2253, `CN=alice,OU=eng,O=Acme,C=US`) becomes the
//! name of its principal, with the behaviour of Kafka's `SslPrincipalMapper`.
//!
//! The value is a comma-separated list of rules, tried in order; the first that gives a name
//! wins, and a subject no rule gives a name to has no principal (the connection is refused):
//!
//! - `DEFAULT`: the whole distinguished name.
//! - `RULE:pattern/replacement/` with an optional `L` or `U` after the last slash: when
//!   `pattern` matches the whole name, every match of it in the name is replaced by
//!   `replacement` (`$1` is a group, `\/` a slash), then the result is lower- or upper-cased.
//!   A comma inside a rule's pattern or replacement belongs to the rule.
//!
//! The list is split and each rule read exactly as Kafka does (the same splitting and rule
//! grammar, leftmost-first as Java's regular expressions take them), so a value Kafka refuses
//! is refused here, with Kafka's words. Where Sluice differs, it refuses at startup what Kafka
//! would only fail on at the first matching connection: a pattern that is not a valid regular
//! expression for the `regex` crate (Java's look-around, back-references and possessive
//! quantifiers are not served), and a replacement Java's `Matcher` would throw on (a group it
//! lacks, `$` not followed by a group, a trailing `\`). `\w`, `\d`, `\s` and `\b` are Unicode
//! classes here and ASCII in Java.

use regex::{Captures, Regex};

/// The rules of `ssl.principal.mapping.rules`, parsed and compiled.
#[derive(Clone, Debug)]
pub struct SslPrincipalMapper {
    /// The value as given (what the mapper is compared and shown by).
    text: String,
    rules: Vec<Rule>,
}

impl PartialEq for SslPrincipalMapper {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for SslPrincipalMapper {}

impl Default for SslPrincipalMapper {
    /// Kafka's default, `DEFAULT`: the distinguished name as it is.
    fn default() -> Self {
        SslPrincipalMapper {
            text: "DEFAULT".into(),
            rules: vec![Rule::Default],
        }
    }
}

#[derive(Clone, Debug)]
enum Rule {
    Default,
    Rewrite {
        /// The pattern, anchored at both ends: Java's `Matcher.matches()`.
        whole: Regex,
        /// The pattern as written: Java's `String.replaceAll`.
        pattern: Regex,
        replacement: Vec<Piece>,
        case: Case,
    },
}

/// One part of a replacement, as Java's `Matcher.appendReplacement` reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Group(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// Java's `.`: any character but a line terminator.
const JAVA_DOT: &str = r"[^\n\r\x{85}\x{2028}\x{2029}]";
/// Java's `\s`.
const JAVA_SPACE: &str = r"[ \t\n\x0B\x0C\r]";

/// Kafka's rule grammar: group 1 `DEFAULT`; groups 2 and 4 a rule's pattern and replacement
/// (`\` escapes any character, `/` ends each); group 6 `L` or `U`; group 7 anything else.
fn rule_pattern() -> String {
    format!(
        r"(DEFAULT)|RULE:((\\{JAVA_DOT}|[^\\/])*)/((\\{JAVA_DOT}|[^\\/])*)/([LU]?){JAVA_DOT}*?|({JAVA_DOT}*?)"
    )
}

/// The regexes that split the value into rules and read one rule. Both are constants: their
/// compilation cannot fail (a unit test compiles them).
fn grammar() -> (Regex, Regex) {
    let rule = rule_pattern();
    let splitter = format!(r"{JAVA_SPACE}*({rule}){JAVA_SPACE}*(,{JAVA_SPACE}*|$)");
    let parser = format!(r"^(?:{rule})");
    (
        Regex::new(&splitter).expect("the rule splitter is a valid regex"),
        Regex::new(&parser).expect("the rule parser is a valid regex"),
    )
}

impl SslPrincipalMapper {
    /// Parse `ssl.principal.mapping.rules`; the error is a sentence naming the rule.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (splitter, parser) = grammar();
        // Java's String.trim: every character up to U+0020 at either end.
        let trimmed = text.trim_matches(|c: char| c <= ' ');
        let mut rules = Vec::new();
        for split in java_find_all(&splitter, trimmed) {
            let rule = split.get(1).map_or("", |m| m.as_str());
            let Some(caps) = parser.captures(rule) else {
                return Err(format!("Invalid rule: {rule}"));
            };
            let end = caps.get(0).map_or(0, |m| m.end());
            if end != rule.len() {
                return Err(format!(
                    "Invalid rule: `{rule}`, unmatched substring: `{}`",
                    &rule[end..]
                ));
            }
            if caps.get(1).is_some() {
                rules.push(Rule::Default);
            } else if let Some(pattern) = caps.get(2) {
                let replacement = caps.get(4).map_or("", |m| m.as_str());
                let case = match caps.get(6).map(|m| m.as_str()) {
                    Some("L") => Case::Lower,
                    Some("U") => Case::Upper,
                    _ => Case::Keep,
                };
                rules.push(
                    Rule::rewrite(pattern.as_str(), replacement, case)
                        .map_err(|reason| format!("Invalid rule: `{rule}`: {reason}"))?,
                );
            }
            // Anything else is an empty rule (between two commas, or at the end): ignored.
        }
        Ok(SslPrincipalMapper {
            text: text.to_string(),
            rules,
        })
    }

    /// The principal name of the distinguished name `dn`: the first rule's that gives one;
    /// None when no rule applies (Kafka's `NoMatchingRule`).
    pub fn name(&self, dn: &str) -> Option<String> {
        self.rules.iter().find_map(|r| r.apply(dn))
    }

    /// The value the rules were parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl Rule {
    fn rewrite(pattern: &str, replacement: &str, case: Case) -> Result<Rule, String> {
        let compiled = Regex::new(pattern)
            .map_err(|e| format!("the pattern is not a regular expression Sluice reads: {e}"))?;
        let whole = Regex::new(&format!(r"^(?:{pattern})\z"))
            .map_err(|e| format!("the pattern is not a regular expression Sluice reads: {e}"))?;
        let groups = compiled.captures_len() - 1;
        let escaped = escape_literal_back_references(replacement, groups);
        let replacement = parse_replacement(&escaped, &compiled)?;
        Ok(Rule::Rewrite {
            whole,
            pattern: compiled,
            replacement,
            case,
        })
    }

    fn apply(&self, dn: &str) -> Option<String> {
        let (whole, pattern, replacement, case) = match self {
            Rule::Default => return Some(dn.to_string()),
            Rule::Rewrite {
                whole,
                pattern,
                replacement,
                case,
            } => (whole, pattern, replacement, *case),
        };
        if !whole.is_match(dn) {
            return None;
        }
        // Java's replaceAll: every match, found as Matcher.find finds them.
        let mut out = String::with_capacity(dn.len());
        let mut copied = 0;
        for caps in java_find_all(pattern, dn) {
            let Some(m) = caps.get(0) else { continue };
            out.push_str(&dn[copied..m.start()]);
            expand(replacement, &caps, &mut out);
            copied = m.end();
        }
        out.push_str(&dn[copied..]);
        Some(match case {
            Case::Keep => out,
            Case::Lower => out.to_lowercase(),
            Case::Upper => out.to_uppercase(),
        })
    }
}

fn expand(replacement: &[Piece], caps: &Captures<'_>, out: &mut String) {
    for piece in replacement {
        match piece {
            Piece::Literal(s) => out.push_str(s),
            // A group that took no part in the match adds nothing (Java's behaviour).
            Piece::Group(g) => out.push_str(caps.get(*g).map_or("", |m| m.as_str())),
        }
    }
}

/// Every match of `re` in `hay` as Java's `Matcher.find` finds them one after the other: the
/// next search starts where the last match ended, one character further after an empty one.
fn java_find_all<'h>(re: &Regex, hay: &'h str) -> Vec<Captures<'h>> {
    let mut found = Vec::new();
    let mut from = 0;
    while from <= hay.len() {
        let Some(caps) = re.captures_at(hay, from) else {
            break;
        };
        let Some(m) = caps.get(0) else { break };
        from = if m.is_empty() {
            match hay[m.end()..].chars().next() {
                Some(c) => m.end() + c.len_utf8(),
                None => hay.len() + 1,
            }
        } else {
            m.end()
        };
        found.push(caps);
    }
    found
}

/// Kafka's `escapeLiteralBackReferences`: a `$n` naming a group the pattern lacks is made a
/// literal `\$n` (after trying fewer of its digits, `$12` with 3 groups being `$1` and `2`).
/// Kept as Kafka writes it: the positions found in the original string are used in the string
/// as already changed.
fn escape_literal_back_references(unescaped: &str, groups: usize) -> String {
    if groups == 0 {
        return unescaped.to_string();
    }
    let back_reference = Regex::new(r"\$([0-9]+)").expect("a valid regex");
    let mut value = unescaped.to_string();
    for caps in java_find_all(&back_reference, unescaped) {
        let Some(digits) = caps.get(1) else { continue };
        if digits.as_str().starts_with('0') {
            continue;
        }
        // Java's Integer.parseInt: a number past i32 fails there; here, it names no group.
        let mut index: u64 = digits.as_str().parse().unwrap_or(u64::MAX);
        while index > groups as u64 && index >= 10 {
            index /= 10;
        }
        if index > groups as u64 {
            let at = digits.start() - 1;
            if at <= value.len() && value.is_char_boundary(at) {
                value.insert(at, '\\');
            }
        }
    }
    value
}

/// A replacement as Java's `Matcher.appendReplacement` reads it: `\c` is `c`, `$n` group n
/// (as many digits as still name a group), `${name}` a named group. What Java would throw on
/// when the rule is applied is an error here.
fn parse_replacement(text: &str, pattern: &Regex) -> Result<Vec<Piece>, String> {
    let groups = pattern.captures_len() - 1;
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) => literal.push(escaped),
                None => {
                    return Err("the replacement ends in a \\ with nothing to escape".into());
                }
            },
            '$' => {
                let group = match chars.next() {
                    Some('{') => {
                        let mut name = String::new();
                        loop {
                            match chars.next() {
                                Some('}') => break,
                                Some(c) if c.is_ascii_alphanumeric() => name.push(c),
                                _ => {
                                    return Err(
                                        "the replacement has a ${ without a group name and }"
                                            .into(),
                                    )
                                }
                            }
                        }
                        pattern
                            .capture_names()
                            .position(|n| n == Some(name.as_str()))
                            .ok_or_else(|| format!("the pattern has no group named {name}"))?
                    }
                    Some(d) if d.is_ascii_digit() => {
                        let mut group = d as usize - '0' as usize;
                        if group > groups {
                            return Err(format!("the pattern has no group {group}"));
                        }
                        while let Some(&next) = chars.peek() {
                            let Some(digit) = next.to_digit(10) else { break };
                            let wider = group * 10 + digit as usize;
                            if wider > groups {
                                break;
                            }
                            group = wider;
                            chars.next();
                        }
                        group
                    }
                    _ => {
                        return Err(
                            "the replacement has a $ that is not a group reference (write \\$ for a dollar sign)"
                                .into(),
                        )
                    }
                };
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Group(group));
            }
            c => literal.push(c),
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(rules: &str, dn: &str) -> Option<String> {
        SslPrincipalMapper::parse(rules)
            .unwrap_or_else(|e| panic!("{rules}: {e}"))
            .name(dn)
    }

    #[test]
    fn default_is_the_distinguished_name() {
        let dn = "CN=alice,OU=eng,O=Acme,C=US";
        assert_eq!(SslPrincipalMapper::default().name(dn).as_deref(), Some(dn));
        assert_eq!(map("DEFAULT", dn).as_deref(), Some(dn));
    }

    // The examples of Kafka's documentation and of its SslPrincipalMapperTest, as behaviour.
    #[test]
    fn rules_as_kafka_applies_them() {
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT";
        for (dn, want) in [
            ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
            ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
            ("CN=Duke,OU=JavaSoft,O=Sun Microsystems", "duke"),
            (
                "OU=JavaSoft,O=Sun Microsystems,C=US",
                "OU=JavaSoft,O=Sun Microsystems,C=US",
            ),
        ] {
            assert_eq!(map(rules, dn).as_deref(), Some(want), "{dn}");
        }
        assert_eq!(
            map("RULE:^CN=(.*),OU=.*$/$1/U", "CN=alice,OU=eng").as_deref(),
            Some("ALICE")
        );
        // Rules split over lines, with spaces around the commas.
        let rules = "RULE:^CN=([^,]*),.*$/$1/ ,\n DEFAULT";
        assert_eq!(map(rules, "CN=a,O=b").as_deref(), Some("a"));
        assert_eq!(map(rules, "O=b").as_deref(), Some("O=b"));
    }

    /// The table of docs/security.md.
    #[test]
    fn the_documented_examples() {
        let dn = "CN=Alice,OU=eng,O=Acme,C=US";
        for (rule, want) in [
            ("DEFAULT", Some(dn)),
            (
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/",
                Some("Alice@eng"),
            ),
            (
                "RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/L",
                Some("alice@eng"),
            ),
            ("RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L", Some("alice")),
            ("RULE:^CN=([^,]+),OU=ops,.*$/$1/", None),
        ] {
            assert_eq!(map(rule, dn).as_deref(), want, "{rule}");
        }
        let recipe = "RULE:^CN=([^,]+),OU=eng,O=Acme,C=US$/$1/L,DEFAULT";
        assert_eq!(
            map(recipe, "CN=alice,OU=eng,O=Acme,C=US").as_deref(),
            Some("alice")
        );
    }

    #[test]
    fn no_rule_applies() {
        assert_eq!(map("RULE:^CN=(.*),O=x$/$1/", "CN=a,O=y"), None);
        assert_eq!(
            map("RULE:^CN=(.*),O=x$/$1/,DEFAULT", "CN=a,O=y").as_deref(),
            Some("CN=a,O=y")
        );
    }

    #[test]
    fn escaped_slashes_and_commas_in_rules() {
        assert_eq!(
            map(r"RULE:^CN=(.*?),OU=(.*)$/$1\/$2/", "CN=a,OU=b").as_deref(),
            Some("a/b")
        );
        // Kafka's testCommaWithWhitespace.
        let rules = r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT";
        assert_eq!(
            map(rules, r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz").as_deref(),
            Some(r"Tkac\, Adam")
        );
    }

    #[test]
    fn replacements_as_java_reads_them() {
        // $4 with three groups is a literal; $12 with 3 groups is group 1 then "2".
        let rule = "RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$4.$12/";
        assert_eq!(map(rule, "CN=a,OU=b,O=c").as_deref(), Some("a@$4.a2"));
        assert_eq!(
            map("RULE:^CN=(?<user>[^,]*).*$/${user}!/", "CN=a,O=c").as_deref(),
            Some("a!")
        );
        assert_eq!(map("RULE:^CN=(.*)$/$1$2/", "CN=a").as_deref(), Some("a$2"));
        // replaceAll replaces each match, the empty one at the end too.
        assert_eq!(map("RULE:(.*)/x$1/", "ab").as_deref(), Some("xabx"));
    }

    #[test]
    fn bad_rules_are_refused_in_kafkas_words() {
        for (rules, want) in [
            (
                "RULE:abc",
                "Invalid rule: `RULE:abc`, unmatched substring: `RULE:abc`",
            ),
            ("DEFAULTS", "unmatched substring: `S`"),
            ("RULE:^CN=(.*)$/$1/X", "unmatched substring: `X`"),
            ("RULE:^CN=(.*)$/$1/L/", "unmatched substring: `/`"),
            ("DEFAULT,nonsense", "unmatched substring: `nonsense`"),
            ("RULE:^CN=(.*$/$1/", "not a regular expression"),
            ("RULE:^CN=(?=a)(.*)$/$1/", "not a regular expression"),
            ("RULE:^CN=.*$/$1/", "no group 1"),
            ("RULE:^CN=(.*)$/a$b/", "not a group reference"),
        ] {
            let err = SslPrincipalMapper::parse(rules).expect_err(rules);
            assert!(err.contains(want), "{rules}: {err}");
        }
    }

    #[test]
    fn empty_rules_are_ignored() {
        assert_eq!(map("DEFAULT,,", "CN=a").as_deref(), Some("CN=a"));
        assert_eq!(map(" , DEFAULT", "CN=a").as_deref(), Some("CN=a"));
    }

    #[test]
    fn any_text_parses_or_is_refused_without_panicking() {
        for text in [
            "",
            ",",
            "RULE:",
            "RULE:/",
            "RULE://",
            "RULE:///",
            "RULE:\\",
            "RULE:a/\\",
            "$",
            "é,RULE:é/é/",
        ] {
            if let Ok(m) = SslPrincipalMapper::parse(text) {
                let _ = m.name("CN=é,O=x");
            }
        }
    }
}
