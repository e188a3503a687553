//! KIP-848 regular expression subscriptions (`SubscribedTopicRegex`).
//!
//! Kafka compiles the expression with RE2/J and subscribes a member to every topic whose
//! whole name it matches (`Matcher.matches()`), internal topics included. Sluice uses the
//! `regex` crate, whose syntax is RE2's as well: the same classes, repetition, groups (named
//! ones as `(?P<n>..)` or `(?<n>..)`), flags (`(?i)`, `(?s)`, ...), Unicode classes and
//! `[[:alpha:]]`, and likewise no backreferences or lookaround. Differences from RE2/J (see
//! docs/compatibility.md): `\Q...\E` quoting and `\C` are refused as invalid here.
//!
//! An expression is validated as given (so that an unbalanced `)` cannot escape the anchors)
//! and then compiled anchored at both ends for whole-name matching.

use regex::Regex;

/// Limit on the compiled size of one expression (the `regex` crate's default is 10 MiB;
/// topic-name expressions are small, and a heartbeat must not be able to build a huge one).
const COMPILED_BYTES_MAX: usize = 1 << 20;

/// A subscription expression, compiled for whole-name matching.
#[derive(Clone, Debug)]
pub(crate) struct TopicRegex(Regex);

impl TopicRegex {
    /// Compile `pattern`; the error reads as a sentence for the client.
    pub(crate) fn new(pattern: &str) -> Result<TopicRegex, String> {
        let build = |p: &str| {
            regex::RegexBuilder::new(p)
                .size_limit(COMPILED_BYTES_MAX)
                .build()
        };
        build(pattern).map_err(|e| {
            format!("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e}")
        })?;
        let anchored = build(&format!("^(?:{pattern})$")).map_err(|e| {
            format!("SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e}")
        })?;
        Ok(TopicRegex(anchored))
    }

    /// Whether the expression matches the whole of `topic`.
    pub(crate) fn matches(&self, topic: &str) -> bool {
        self.0.is_match(topic)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn matches_whole_names_only() {
        let r = TopicRegex::new("orders-.*").unwrap();
        assert!(r.matches("orders-1"));
        assert!(!r.matches("x-orders-1"));
        let r = TopicRegex::new("a|ab").unwrap();
        assert!(
            r.matches("ab"),
            "the alternation must be tried against the whole name"
        );
        let r = TopicRegex::new("__.*").unwrap();
        assert!(r.matches("__consumer_offsets"));
        let r = TopicRegex::new("(?i)T[0-9]+").unwrap();
        assert!(r.matches("t12"));
    }

    #[test]
    fn invalid_expressions_are_refused() {
        for bad in ["a)|(b", "(", "[a-", "a{2,1}", "(?=x)", "\\1", "\\Qa.b\\E"] {
            assert!(TopicRegex::new(bad).is_err(), "{bad} should be refused");
        }
    }
}
