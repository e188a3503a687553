//! The result files: a JSON document (machine-readable, read by bench/compare) and a
//! self-contained HTML page with inline SVG charts (no scripts, no external resources).

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::run::{Interval, Outcome};
use crate::stats::Percentiles;

/// A figure rounded to 3 decimals (what the results need), null when not finite.
fn num(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}

fn pct_json(p: &Percentiles) -> Value {
    json!({
        "count": p.count,
        "avg_ms": num(p.avg),
        "p50_ms": num(p.p50),
        "p99_ms": num(p.p99),
        "p999_ms": num(p.p999),
        "max_ms": num(p.max),
    })
}

/// The JSON result (serde_json; keys in alphabetical order).
pub fn json(o: &Outcome) -> String {
    let w = &o.plan.workload;
    let d = &o.plan.driver;
    let topic_config: serde_json::Map<String, Value> = d
        .topic_config
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
        .collect();
    let backlog = o.backlog.map_or(Value::Null, |b| {
        json!({
            "target_bytes": b.target_bytes,
            "built_bytes": b.built_bytes,
            "build_s": num(b.build_s),
            "drain_s": num(b.drain_s),
            "drain_rate_msgs": num(b.drain_msgs_per_s),
            "drain_mb_s": num(b.drain_mb_per_s),
        })
    });
    let held = o.held.as_ref().map_or(Value::Null, |h| {
        json!({
            "target_rate_msgs": num(h.target),
            "attempts": h.attempts,
            "sustained": h.sustained,
            "remeasured": h.remeasured,
            "missed_at_target": h.missed_at_target,
            "max_at_target_ms": num(h.max_at_target_ms),
            "paced_seconds": h.paced_seconds,
            "paced_seconds_over": h.paced_seconds_over,
            "latency_bound_ms": num(h.latency_bound_ms),
            "latency_percentile": h.latency_percentile.label(),
        })
    });
    let intervals: Vec<Value> = o
        .intervals
        .iter()
        .map(|i| {
            json!({
                "phase": i.phase,
                "t": num(i.t),
                "publish_rate_msgs": num(i.publish_rate),
                "publish_mb_s": num(i.publish_mb),
                "consume_rate_msgs": num(i.consume_rate),
                "consume_mb_s": num(i.consume_mb),
                "backlog_msgs": i.backlog_msgs,
                "publish_errors": i.publish_errors,
                "publish_latency": pct_json(&i.publish_latency),
                "e2e_latency": pct_json(&i.e2e_latency),
            })
        })
        .collect();
    let doc = json!({
        "workload": w.name,
        "driver": d.name,
        "bootstrap": o.plan.bootstrap,
        "started_unix_s": o.started_unix_s,
        "shape": {
            "topics": w.topics,
            "partitions_per_topic": w.partitions_per_topic,
            "message_size": w.message_size,
            "producers_per_topic": w.producers_per_topic,
            "subscriptions_per_topic": w.subscriptions_per_topic,
            "consumer_per_subscription": w.consumer_per_subscription,
            "producer_rate": num(w.producer_rate),
            "acks": d.acks.wire(),
            "linger_ms": d.linger.as_millis() as u64,
            "batch_size": d.batch_bytes,
            "topic_config": topic_config,
        },
        "warmup_s": num(w.warmup_duration.as_secs_f64()),
        "measured_s": num(o.measured_s),
        "publish_rate_msgs": num(o.publish_rate),
        "publish_mb_s": num(o.publish_mb),
        "consume_rate_msgs": num(o.consume_rate),
        "consume_mb_s": num(o.consume_mb),
        "publish_errors": o.publish_errors,
        "skipped_msgs": o.skipped_msgs,
        "total_publish_bytes": o.total_publish_bytes,
        "publish_latency": pct_json(&o.publish_latency),
        "e2e_latency": pct_json(&o.e2e_latency),
        "held": held,
        "backlog": backlog,
        "intervals": intervals,
    });
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

fn esc_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const W: f64 = 640.0;
const H: f64 = 220.0;
const PAD_L: f64 = 60.0;
const PAD_B: f64 = 30.0;

/// One line of a chart: legend, colour, value of an interval.
type Series<'a> = (&'a str, &'a str, fn(&Interval) -> f64);

/// A line chart of one or more series over the intervals.
fn chart(title: &str, unit: &str, intervals: &[Interval], series: &[Series<'_>]) -> String {
    let mut s = String::new();
    let _ = write!(s, "<figure><figcaption>{}</figcaption><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\">", esc_html(title));
    if intervals.is_empty() {
        s.push_str("<text x=\"20\" y=\"40\">no intervals recorded</text></svg></figure>");
        return s;
    }
    let tmax = intervals.iter().map(|i| i.t).fold(1e-9, f64::max);
    let vmax = intervals
        .iter()
        .flat_map(|i| series.iter().map(move |(_, _, f)| f(i)))
        .filter(|v| v.is_finite())
        .fold(1e-9, f64::max)
        * 1.1;
    let x = |t: f64| PAD_L + (W - PAD_L - 10.0) * t / tmax;
    let y = |v: f64| (H - PAD_B) - (H - PAD_B - 10.0) * (v / vmax);
    let _ = write!(
        s,
        "<line x1=\"{PAD_L}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/>",
        H - PAD_B,
        W - 10.0,
        H - PAD_B
    );
    let _ = write!(
        s,
        "<line x1=\"{PAD_L}\" y1=\"10\" x2=\"{PAD_L}\" y2=\"{}\" stroke=\"#888\"/>",
        H - PAD_B
    );
    for k in 0..=4 {
        let v = vmax * f64::from(k) / 4.0;
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{}</text>",
            PAD_L - 4.0,
            y(v) + 3.0,
            short(v)
        );
        let _ = write!(
            s,
            "<line x1=\"{PAD_L}\" y1=\"{:.1}\" x2=\"{}\" y2=\"{:.1}\" stroke=\"#eee\"/>",
            y(v),
            W - 10.0,
            y(v)
        );
    }
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" font-size=\"10\" text-anchor=\"end\">{:.0} s</text>",
        W - 10.0,
        H - 8.0,
        tmax
    );
    let _ = write!(
        s,
        "<text x=\"4\" y=\"12\" font-size=\"10\">{}</text>",
        esc_html(unit)
    );
    for (k, (name, color, f)) in series.iter().enumerate() {
        let pts: Vec<String> = intervals
            .iter()
            .map(|i| format!("{:.1},{:.1}", x(i.t), y(f(i).max(0.0))))
            .collect();
        let _ = write!(
            s,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>",
            pts.join(" ")
        );
        let lx = PAD_L + 10.0 + 150.0 * k as f64;
        let _ = write!(s, "<rect x=\"{lx}\" y=\"{}\" width=\"10\" height=\"3\" fill=\"{color}\"/><text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>", H - 12.0, lx + 14.0, H - 8.0, esc_html(name));
    }
    s.push_str("</svg></figure>");
    s
}

fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

pub fn html(o: &Outcome) -> String {
    let w = &o.plan.workload;
    let d = &o.plan.driver;
    let mut s = String::new();
    let _ = write!(
        s,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>sluice bench: {}</title><style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}figure{{display:inline-block;margin:0 1em 1em 0}}figcaption{{font-weight:bold}}</style></head><body>",
        esc_html(&w.name)
    );
    let _ = write!(
        s,
        "<h1>sluice bench: {}</h1><p>driver <b>{}</b> (acks={}, linger.ms={}, batch.size={}), broker <b>{}</b>, {} topic(s) × {} partitions, {} B messages, {} producer(s) and {} × {} consumer(s) per topic, target rate {}. Measured {:.1} s after {:.0} s of warm-up.</p>",
        esc_html(&w.name),
        esc_html(&d.name),
        d.acks.wire(),
        d.linger.as_millis(),
        d.batch_bytes,
        esc_html(&o.plan.bootstrap),
        w.topics,
        w.partitions_per_topic,
        w.message_size,
        w.producers_per_topic,
        w.subscriptions_per_topic,
        w.consumer_per_subscription,
        if w.producer_rate > 0.0 { format!("{} msg/s", w.producer_rate) } else { "max".into() },
        o.measured_s,
        w.warmup_duration.as_secs_f64()
    );
    s.push_str("<table><tr><th></th><th>msg/s</th><th>MB/s</th><th>avg ms</th><th>p50 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th></tr>");
    let p = &o.publish_latency;
    let e = &o.e2e_latency;
    let _ = write!(s, "<tr><th>publish</th><td>{:.0}</td><td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>", o.publish_rate, o.publish_mb, p.avg, p.p50, p.p99, p.p999, p.max);
    let _ = write!(s, "<tr><th>consume / end-to-end</th><td>{:.0}</td><td>{:.1}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr></table>", o.consume_rate, o.consume_mb, e.avg, e.p50, e.p99, e.p999, e.max);
    let _ = write!(s, "<p>publish errors: {}</p>", o.publish_errors);
    if let Some(b) = &o.backlog {
        let _ = write!(s, "<p>backlog: {:.2} GB built in {:.1} s, drained in {:.1} s at {:.0} msg/s ({:.1} MB/s)</p>", b.built_bytes as f64 / 1e9, b.build_s, b.drain_s, b.drain_msgs_per_s, b.drain_mb_per_s);
    }
    let iv = &o.intervals;
    s.push_str(&chart(
        "Throughput",
        "msg/s",
        iv,
        &[
            ("publish", "#1f77b4", |i| i.publish_rate),
            ("consume", "#ff7f0e", |i| i.consume_rate),
        ],
    ));
    s.push_str(&chart(
        "Publish latency",
        "ms",
        iv,
        &[
            ("p50", "#2ca02c", |i| i.publish_latency.p50),
            ("p99", "#d62728", |i| i.publish_latency.p99),
            ("p99.9", "#9467bd", |i| i.publish_latency.p999),
        ],
    ));
    s.push_str(&chart(
        "End-to-end latency",
        "ms",
        iv,
        &[
            ("p50", "#2ca02c", |i| i.e2e_latency.p50),
            ("p99", "#d62728", |i| i.e2e_latency.p99),
            ("p99.9", "#9467bd", |i| i.e2e_latency.p999),
        ],
    ));
    s.push_str(&chart(
        "Backlog",
        "messages",
        iv,
        &[("backlog", "#8c564b", |i| i.backlog_msgs as f64)],
    ));
    s.push_str("<h2>Intervals</h2><table><tr><th>phase</th><th>t s</th><th>pub msg/s</th><th>pub MB/s</th><th>cons msg/s</th><th>backlog</th><th>pub p50</th><th>pub p99</th><th>e2e p50</th><th>e2e p99</th></tr>");
    for i in iv {
        let _ = write!(s, "<tr><td>{}</td><td>{:.1}</td><td>{:.0}</td><td>{:.1}</td><td>{:.0}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>", i.phase, i.t, i.publish_rate, i.publish_mb, i.consume_rate, i.backlog_msgs, i.publish_latency.p50, i.publish_latency.p99, i.e2e_latency.p50, i.e2e_latency.p99);
    }
    s.push_str("</table></body></html>\n");
    s
}
