#![allow(clippy::unwrap_used)]

//! Unknown broker properties produce exactly one warning each, naming the property.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<String>>>);

struct Message<'a>(&'a mut String);

impl Visit for Message<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0.push_str(&format!("{value:?}"));
        }
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        if *event.metadata().level() == Level::WARN {
            let mut text = String::new();
            event.record(&mut Message(&mut text));
            self.0.lock().unwrap().push(text);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn one_warning_per_unknown_property_and_none_for_known_ones() {
    let capture = Capture::default();
    let props: BTreeMap<String, String> = [
        ("typo.num.partitions", "3"),
        ("made.up", "x"),
        ("num.partitions", "2"),
        ("process.roles", "broker,controller"),
        ("controller.quorum.voters", "1@localhost:9093"),
        ("zookeeper.connect", "localhost:2181"),
        ("log.retention.check.interval.ms", "300000"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let config = tracing::subscriber::with_default(capture.clone(), || {
        sluice_config::BrokerConfig::from_properties(props).unwrap()
    });
    let warnings = capture.0.lock().unwrap().clone();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("made.up"), "{warnings:?}");
    assert!(warnings[1].contains("typo.num.partitions"), "{warnings:?}");
    assert_eq!(
        config.unknown,
        vec!["made.up".to_string(), "typo.num.partitions".to_string()]
    );
    assert_eq!(config.num_partitions, 2);
}
