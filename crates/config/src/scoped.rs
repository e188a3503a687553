//! One listener's view of the broker properties, as Kafka reads listener-prefixed configs:
//! `listener.name.<listener>.<name>` before the plain `<name>`.

use std::collections::BTreeMap;

pub(crate) struct Scoped<'a> {
    props: &'a BTreeMap<String, String>,
    /// Tried in order before the plain name; the first is the listener's own.
    prefixes: Vec<String>,
}

impl<'a> Scoped<'a> {
    /// `listener.name.<listener>.` (lower-cased, as Kafka does), then the plain name.
    pub(crate) fn listener(props: &'a BTreeMap<String, String>, listener: &str) -> Self {
        Self::with_prefixes(
            props,
            vec![format!("listener.name.{}.", listener.to_ascii_lowercase())],
        )
    }

    pub(crate) fn with_prefixes(
        props: &'a BTreeMap<String, String>,
        prefixes: Vec<String>,
    ) -> Self {
        Self { props, prefixes }
    }

    /// The listener's own prefix, `listener.name.<listener>.` for [`Scoped::listener`].
    pub(crate) fn prefix(&self) -> &str {
        &self.prefixes[0]
    }

    /// The first of the prefixed names, then `base`, that is set: the name it was found
    /// under and its value, trimmed.
    pub(crate) fn get(&self, base: &str) -> Option<(String, String)> {
        self.prefixes
            .iter()
            .map(|p| format!("{p}{base}"))
            .chain(std::iter::once(base.to_string()))
            .find_map(|name| self.props.get(&name).map(|v| (name, v.trim().to_string())))
    }

    /// [`Scoped::get`], with an empty value taken for unset (an empty prefixed value hides
    /// the plain one: the listener's setting says "none").
    pub(crate) fn get_set(&self, base: &str) -> Option<(String, String)> {
        self.get(base).filter(|(_, v)| !v.is_empty())
    }

    /// A comma-separated list (items trimmed, empty ones dropped); empty when unset.
    pub(crate) fn list(&self, base: &str) -> Vec<String> {
        self.get_set(base)
            .map(|(_, v)| split_list(&v))
            .unwrap_or_default()
    }
}

/// A comma-separated value's items, trimmed, empty ones dropped.
pub(crate) fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::props;

    #[test]
    fn the_listener_prefix_comes_first_and_names_where_the_value_was_found() {
        let p = props(&[("a.b", " plain "), ("listener.name.ext.a.b", "mine")]);
        let ext = Scoped::listener(&p, "EXT");
        assert_eq!(
            ext.get("a.b"),
            Some(("listener.name.ext.a.b".into(), "mine".into()))
        );
        let other = Scoped::listener(&p, "OTHER");
        assert_eq!(other.get("a.b"), Some(("a.b".into(), "plain".into())));
        assert_eq!(other.get("c"), None);
    }

    #[test]
    fn an_empty_value_is_unset_for_get_set_and_hides_the_plain_one() {
        let p = props(&[("a", "x, ,y "), ("listener.name.ext.a", " ")]);
        let ext = Scoped::listener(&p, "ext");
        assert_eq!(
            ext.get("a"),
            Some(("listener.name.ext.a".into(), String::new()))
        );
        assert_eq!(ext.get_set("a"), None);
        let other = Scoped::listener(&p, "other");
        assert_eq!(other.list("a"), vec!["x".to_string(), "y".to_string()]);
    }

    #[test]
    fn several_prefixes_are_tried_in_order() {
        let p = props(&[("listener.name.l.k", "2"), ("k", "3")]);
        let s = Scoped::with_prefixes(
            &p,
            vec![
                "listener.name.l.oauthbearer.".into(),
                "listener.name.l.".into(),
            ],
        );
        assert_eq!(s.get("k").unwrap().1, "2");
        assert_eq!(s.prefix(), "listener.name.l.oauthbearer.");
    }
}
