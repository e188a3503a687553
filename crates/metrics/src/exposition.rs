//! Prometheus text exposition format 0.0.4: `# HELP`, `# TYPE`, then one line per sample,
//! every sample of a family together.

use std::fmt::Write as _;

use crate::histogram::HistogramSnapshot;

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A page of metrics being written.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    pub fn new() -> Exposition {
        Exposition::default()
    }

    /// Start a family: its help text and type. Its samples must follow before the next one.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
    }

    /// One sample.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        write_labels(&mut self.out, labels);
        self.out.push(' ');
        write_value(&mut self.out, value);
        self.out.push('\n');
    }

    /// One sample of an integer value (written exactly).
    pub fn sample_u64(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.out.push_str(name);
        write_labels(&mut self.out, labels);
        let _ = writeln!(self.out, " {value}");
    }

    /// A whole family with a single unlabelled sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A histogram's `_bucket`, `_sum` and `_count` samples; recorded units are divided by
    /// `per_unit` (1e6 for microseconds exported as seconds).
    pub fn histogram(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        h: &HistogramSnapshot,
        per_unit: f64,
    ) {
        let bucket = format!("{name}_bucket");
        for (bound, cumulative) in &h.buckets {
            let le = format_value(*bound as f64 / per_unit);
            let mut with_le: Vec<(&str, &str)> = labels.to_vec();
            with_le.push(("le", &le));
            self.sample_u64(&bucket, &with_le, *cumulative);
        }
        let mut with_le: Vec<(&str, &str)> = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample_u64(&bucket, &with_le, h.count);
        self.sample(&format!("{name}_sum"), labels, h.sum as f64 / per_unit);
        self.sample_u64(&format!("{name}_count"), labels, h.count);
    }

    pub fn finish(self) -> String {
        self.out
    }
}

fn write_labels(out: &mut String, labels: &[(&str, &str)]) {
    if labels.is_empty() {
        return;
    }
    out.push('{');
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
}

fn write_value(out: &mut String, v: f64) {
    out.push_str(&format_value(v));
}

/// A float as the text format writes it (`+Inf`, `-Inf`, `NaN`; no exponent needed).
pub fn format_value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_families_typed() {
        let mut e = Exposition::new();
        e.family("x_total", Kind::Counter, "a\nb");
        e.sample_u64("x_total", &[("topic", "a\"b\\c\nd")], 3);
        e.single("y", Kind::Gauge, "y", f64::INFINITY);
        assert_eq!(
            e.finish(),
            "# HELP x_total a\\nb\n# TYPE x_total counter\nx_total{topic=\"a\\\"b\\\\c\\nd\"} 3\n\
             # HELP y y\n# TYPE y gauge\ny +Inf\n"
        );
    }

    #[test]
    fn histograms_have_cumulative_buckets_sum_and_count() {
        let h = HistogramSnapshot {
            buckets: vec![(1000, 1), (10_000, 3)],
            sum: 12_500,
            count: 4,
        };
        let mut e = Exposition::new();
        e.histogram("f_seconds", &[("a", "b")], &h, 1e6);
        assert_eq!(
            e.finish(),
            "f_seconds_bucket{a=\"b\",le=\"0.001\"} 1\nf_seconds_bucket{a=\"b\",le=\"0.01\"} 3\n\
             f_seconds_bucket{a=\"b\",le=\"+Inf\"} 4\nf_seconds_sum{a=\"b\"} 0.0125\n\
             f_seconds_count{a=\"b\"} 4\n"
        );
    }
}
