//! The console's pages and actions.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Form, Path, Query};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use maud::{html, Markup};
use serde::Deserialize;

use crate::kafka::{Cluster, Res};
use crate::records::{self, Show};
use crate::{layout, refusal, with_status, Console, Csrf, FETCHES_MAX, MESSAGES_MAX};

/// Rows per page of the topic and group lists.
pub(crate) const PAGE_ROWS: usize = 50;
/// Bytes one Fetch of the messages page asks for.
const FETCH_BYTES: i32 = 1 << 20;
/// Committed offsets (groups × partitions shown) the topic list reads at most for its lag.
const LAG_OFFSETS_MAX: usize = 100_000;

/// Records a search reads unless the page asks for another bound, and the most it may ask.
const SEARCH_RECORDS: u64 = 100_000;
const SEARCH_RECORDS_MAX: u64 = 10_000_000;
/// Seconds a search reads unless the page asks for another bound, and the most it may ask.
const SEARCH_SECONDS: u64 = 5;
const SEARCH_SECONDS_MAX: u64 = 60;

pub(crate) fn error_page(title: &str, csrf: &Csrf, status: StatusCode, message: &str) -> Response {
    with_status(layout(title, csrf, html! { p.error { (message) } }), status)
}

fn bytes(n: i64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

pub(crate) fn time_ms(ms: i64) -> String {
    if ms < 0 {
        return "-".into();
    }
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Upper bound of the bucket holding quantile `q` of a Prometheus-style histogram.
pub(crate) fn quantile(s: &sluice_metrics::histogram::HistogramSnapshot, q: f64) -> Option<u64> {
    if s.count == 0 {
        return None;
    }
    let rank = (q * s.count as f64).ceil() as u64;
    s.buckets
        .iter()
        .find(|(_, cumulative)| *cumulative >= rank)
        .map(|(bound, _)| *bound)
}

pub(crate) fn pager(base: &str, q: &str, page: usize, total: usize) -> Markup {
    let pages = total.div_ceil(PAGE_ROWS).max(1);
    let link = |p: usize| {
        let mut url = format!("{base}?page={p}");
        if !q.is_empty() {
            url.push_str("&q=");
            url.push_str(&urlencode(q));
        }
        url
    };
    html! {
        p.pager {
            @if page > 1 { a href=(link(page - 1)) { "← previous" } " " }
            "page " (page) " of " (pages) " (" (total) ")"
            @if page < pages { " " a href=(link(page + 1)) { "next →" } }
        }
    }
}

pub(crate) fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---- Cluster ----

/// This broker's own figures as JSON, for the other brokers' cluster pages.
pub(crate) async fn broker_figures(Extension(c): Extension<Arc<Console>>) -> Response {
    let body = serde_json::to_string(&crate::figures::Figures::of(&c.broker)).unwrap_or_default();
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}

pub(crate) async fn cluster(Extension(c): Extension<Arc<Console>>, headers: HeaderMap) -> Response {
    let csrf = c.csrf(&headers);
    let meta = match c.kafka.cluster(None).await {
        Ok(m) => m,
        Err(e) => return error_page("Cluster", &csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let led = meta.led();
    let dirs = c.kafka.log_dirs(&meta).await;
    // Log growth per directory: the change of its partitions' bytes between two views.
    let growth = c.rates.sample(dirs.iter().flat_map(|(node, d)| {
        d.iter()
            .flatten()
            .map(move |d| ((format!("\u{0}dir {}", d.path), *node), d.bytes))
    }));
    let view = c.broker.cluster_view();
    let this = c.broker.node_id();
    // Every broker's own figures: this one's, and the others' from their consoles (cluster
    // mode, at the addresses they registered).
    let peers = meta.nodes.keys().filter(|n| **n != this).map(|n| {
        let addr = view
            .as_ref()
            .and_then(|v| v.brokers.get(n))
            .and_then(|i| i.console.clone());
        async move {
            let got = match addr {
                Some(a) => crate::figures::of_peer(&a).await,
                None => Err("no console".to_string()),
            };
            (*n, got)
        }
    });
    let mut figures: BTreeMap<i32, Res<crate::figures::Figures>> =
        crate::kafka::join_all(peers).await.into_iter().collect();
    figures.insert(this, Ok(crate::figures::Figures::of(&c.broker)));
    let traffic = c.rates.sample(figures.iter().flat_map(|(n, f)| {
        f.iter().flat_map(move |f| {
            [
                (("\u{0}in".to_string(), *n), f.bytes_in as i64),
                (("\u{0}out".to_string(), *n), f.bytes_out as i64),
                (("\u{0}msgs".to_string(), *n), f.messages_in as i64),
            ]
        })
    }));
    let rate = |what: &str, n: i32, unit: fn(f64) -> String| {
        traffic
            .get(&(format!("\u{0}{what}"), n))
            .map_or("-".to_string(), |r| unit(*r))
    };
    let partitions: usize = meta.topics.values().map(|t| t.leaders.len()).sum();
    let moves: Vec<_> = view
        .iter()
        .flat_map(|v| v.owners.iter())
        .filter(|(_, r)| r.owner.from.is_some() || r.owner.to.is_some())
        // Only topics the visitor may see (those Metadata named).
        .filter(|((t, _), _)| meta.topics.contains_key(t))
        .collect();
    // Who owns how many partitions on each volume (cluster mode), of the topics the visitor
    // may see.
    let mut ownership: BTreeMap<Option<u16>, BTreeMap<i32, usize>> = BTreeMap::new();
    for ((t, _), r) in view.iter().flat_map(|v| v.owners.iter()) {
        if meta.topics.contains_key(t) {
            *ownership
                .entry(r.owner.volume)
                .or_default()
                .entry(r.owner.node)
                .or_default() += 1;
        }
    }
    let body = html! {
        p {
            "Cluster id " code { (meta.cluster_id.clone().unwrap_or_default()) }
            ", " (meta.nodes.len()) " broker(s), " (meta.topics.len()) " topic(s), "
            (partitions) " partition(s). This page is served by broker " (this)
            @if view.is_none() { " (one broker, embedded metadata)" } @else { " (cluster on etcd)" } "."
        }
        h2 { "Brokers" }
        table #brokers {
            thead { tr { th { "Id" } th { "Address" } th { "Rack" } th { "Role" } th.num { "Partitions led" }
                @if view.is_some() { th { "Reads from the volume" } th.num { "Partition budget" } } } }
            tbody {
                @for n in meta.nodes.values() {
                    @let info = view.as_ref().and_then(|v| v.brokers.get(&n.id));
                    tr {
                        td { (n.id) }
                        td { (n.host) ":" (n.port) }
                        td { (n.rack.clone().unwrap_or_else(|| "-".into())) }
                        td { @if n.id == meta.controller { "controller" } @else { "broker" } }
                        td.num { (led.get(&n.id).copied().unwrap_or(0)) }
                        @if view.is_some() {
                            td { @if info.is_some_and(|i| i.reads) { "yes" } @else { "no" } }
                            td.num { (info.and_then(|i| i.partitions_max).map_or("-".to_string(), |m| m.to_string())) }
                        }
                    }
                }
            }
        }
        @if view.is_some() {
            h2 { "Ownership by volume" }
            table #ownership {
                thead { tr { th { "Volume" } th { "Owner" } th.num { "Partitions" } } }
                tbody {
                    @for (volume, owners) in &ownership {
                        @for (node, n) in owners {
                            tr {
                                td { @match volume { Some(v) => { (v) } None => { "not recorded yet" } } }
                                td { (node) }
                                td.num { (n) }
                            }
                        }
                    }
                }
            }
            h2 { "Moves in flight" }
            @if moves.is_empty() {
                p #moves { "None: every partition is with its owner." }
            } @else {
                table #moves {
                    thead { tr { th { "Partition" } th { "Owner" } th { "From" } th { "Handing over to" } } }
                    tbody {
                        @for ((t, p), r) in &moves {
                            tr {
                                td { (t) "-" (p) }
                                td { (r.owner.node) }
                                td { (r.owner.from.map_or("-".to_string(), |f| f.to_string())) }
                                td { (r.owner.to.map_or("-".to_string(), |f| f.to_string())) }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Log directories" }
        table #log-dirs {
            thead { tr { th { "Broker" } th { "Directory" } th.num { "Partitions' bytes" }
                th.num title="Change of the partitions' bytes per second between two views of this page" { "Growth/s" }
                th.num { "Volume used" } th.num { "Volume size" } } }
            tbody {
                @for (node, answer) in &dirs {
                    @match answer {
                        Err(e) => { tr { td { (node) } td.error colspan="5" { (e) } } }
                        Ok(list) => {
                            @for d in list {
                                tr {
                                    td { (node) }
                                    td { (d.path) @if d.error != 0 { " " span.error { (crate::kafka::error_name(d.error)) } } }
                                    td.num { (bytes(d.bytes)) }
                                    td.num { (growth.get(&(format!("\u{0}dir {}", d.path), *node)).map_or("-".to_string(), |g| format!("{}/s", bytes(*g as i64)))) }
                                    td.num { @if d.total >= 0 && d.usable >= 0 {
                                        (bytes(d.total - d.usable)) " (" (format!("{:.0}", (d.total - d.usable) as f64 * 100.0 / (d.total.max(1)) as f64)) "%)"
                                    } @else { "-" } }
                                    td.num { @if d.total >= 0 { (bytes(d.total)) } @else { "-" } }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Traffic, fsyncs and group commit" }
        table #broker-figures {
            thead { tr { th { "Broker" }
                th.num title="Between two views of this page" { "Bytes in/s" } th.num { "Bytes out/s" } th.num { "Messages in/s" }
                th.num { "Bytes in" } th.num { "Bytes out" } th.num { "fsyncs" } th.num { "fsync failures" }
                th.num { "fsync mean" } th.num { "fsync p99 (at most)" } th.num { "Requests per group-commit round" } } }
            tbody {
                @for (n, f) in &figures {
                    @match f {
                        Err(e) => { tr { td { (n) } td.null colspan="10" { (e) } } }
                        Ok(f) => {
                            tr {
                                td { (n) @if *n == this { " (this one)" } }
                                td.num { (rate("in", *n, |r| format!("{}/s", bytes(r as i64)))) }
                                td.num { (rate("out", *n, |r| format!("{}/s", bytes(r as i64)))) }
                                td.num { (rate("msgs", *n, |r| format!("{r:.1}"))) }
                                td.num { (bytes(f.bytes_in as i64)) }
                                td.num { (bytes(f.bytes_out as i64)) }
                                td.num { (f.fsyncs) }
                                td.num { (f.fsync_failures) }
                                td.num { (f.fsync_mean_us.map_or("-".to_string(), |us| format!("{:.2} ms", us / 1000.0))) }
                                td.num { (f.fsync_p99_us.map_or("-".to_string(), |us| format!("{:.1} ms", us as f64 / 1000.0))) }
                                td.num { (f.requests_per_round.map_or("-".to_string(), |r| format!("{r:.1}"))) }
                            }
                        }
                    }
                }
            }
        }
    };
    layout("Cluster", &csrf, body)
}

// ---- Topics ----

#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    #[serde(default)]
    pub(crate) q: String,
    pub(crate) page: Option<usize>,
}

pub(crate) async fn topics(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    let csrf = c.csrf(&headers);
    topics_page(&c, &csrf, &query, None).await
}

async fn topics_page(
    c: &Console,
    csrf: &Csrf,
    query: &ListQuery,
    problem: Option<&str>,
) -> Response {
    let meta = match c.kafka.cluster(None).await {
        Ok(m) => m,
        Err(e) => return error_page("Topics", csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let filter = query.q.trim();
    let names: Vec<&String> = meta
        .topics
        .keys()
        .filter(|n| filter.is_empty() || n.contains(filter))
        .collect();
    let page = query.page.unwrap_or(1).max(1);
    let shown: Vec<String> = names
        .iter()
        .skip((page - 1).saturating_mul(PAGE_ROWS))
        .take(PAGE_ROWS)
        .map(|n| (*n).clone())
        .collect();
    let partitions: Vec<(String, i32)> = shown
        .iter()
        .flat_map(|t| meta.topics[t].leaders.keys().map(move |p| (t.clone(), *p)))
        .collect();
    let (offsets, sizes, groups) = tokio::join!(
        c.kafka.offsets(&meta, &partitions),
        c.kafka.sizes(&meta, &shown),
        c.kafka.list_groups_by_coordinator(&meta)
    );
    // Consumer lag of the shown topics: every group's committed offsets in them (share
    // groups commit none).
    let groups: Vec<(i32, String)> = groups
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, g)| !g.kind.eq_ignore_ascii_case("share"))
        .map(|(node, g)| (node, g.id))
        .collect();
    // Bounded: groups × the shown partitions at most LAG_OFFSETS_MAX (beyond, no lag).
    let lag_known = groups.len().saturating_mul(partitions.len()) <= LAG_OFFSETS_MAX;
    let committed = if lag_known {
        c.kafka.committed_of_groups(&meta, &groups, &shown).await
    } else {
        Default::default()
    };
    let mut lag: HashMap<&str, i64> = HashMap::new();
    for ((_, (t, p)), off) in &committed {
        if let Some(Ok(o)) = offsets.get(&(t.clone(), *p)) {
            let l = lag.entry(t.as_str()).or_default();
            *l = l.saturating_add(o.end.saturating_sub(*off).max(0));
        }
    }
    let rates = c.rates.sample(
        offsets
            .iter()
            .filter_map(|(tp, o)| Some((tp.clone(), o.as_ref().ok()?.end))),
    );
    let body = html! {
        form.filter method="get" action="/topics" {
            input type="search" name="q" value=(filter) placeholder="name contains";
            button type="submit" { "Filter" }
        }
        table #topics {
            thead { tr { th { "Topic" } th.num { "Partitions" } th.num { "Messages" } th.num { "Size" }
                th.num title="Records appended per second between two views of this page" { "Messages/s" }
                th.num title="Records not yet consumed, over every consumer group with offsets in the topic" { "Consumer lag" } } }
            tbody {
                @for t in &shown {
                    @let m = &meta.topics[t];
                    @let msgs: Option<i64> = m.leaders.keys().map(|p| offsets.get(&(t.clone(), *p))
                        .and_then(|o| o.as_ref().ok()).map(|o| o.end - o.start)).sum();
                    @let size: i64 = m.leaders.keys().filter_map(|p| sizes.get(&(t.clone(), *p))).sum();
                    tr {
                        td { a href={"/topics/" (urlencode(t))} { (t) } @if m.internal { " " span.tag { "internal" } } }
                        td.num { (m.leaders.len()) }
                        td.num { (msgs.map_or("?".to_string(), |n| n.to_string())) }
                        td.num { (bytes(size)) }
                        td.num { @match m.leaders.keys().map(|p| rates.get(&(t.clone(), *p)).copied()).sum::<Option<f64>>() {
                            Some(r) => { (format!("{r:.1}")) }
                            None => { "-" }
                        } }
                        td.num { (lag.get(t.as_str()).map_or("-".to_string(), |l| l.to_string())) }
                    }
                }
            }
        }
        (pager("/topics", filter, page, names.len()))
        @if !lag_known {
            p.null #lag-unknown { "Consumer lag is not summed on this page: " (groups.len()) " groups × "
                (partitions.len()) " partitions is over " (LAG_OFFSETS_MAX) " offsets (filter the list to fewer topics)." }
        }
        @if !c.read_only {
            h2 { "Create a topic" }
            @if let Some(p) = problem { p.error #create-error { (p) } }
            form.action method="post" action="/topics" {
                input type="hidden" name="csrf" value=(csrf.token);
                label { "Name " input name="name" required pattern="[a-zA-Z0-9._-]+" maxlength="249"; }
                label { "Partitions " input name="partitions" type="number" min="1" value="1"; }
                label.wide { "Configs (one name=value per line) " textarea name="configs" rows="3" {} }
                button type="submit" { "Create" }
            }
        }
    };
    layout("Topics", csrf, body)
}

#[derive(Debug, Deserialize)]
pub(crate) struct CreateTopic {
    csrf: String,
    name: String,
    partitions: Option<i32>,
    #[serde(default)]
    configs: String,
}

fn parse_lines(text: &str) -> Result<Vec<(String, String)>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("\"{l}\" is not name=value"))
        })
        .collect()
}

pub(crate) async fn create_topic(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<CreateTopic>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let configs = match parse_lines(&form.configs) {
        Ok(v) => v,
        Err(e) => return create_failed(&c, &csrf, &e).await,
    };
    let name = form.name.trim();
    let result: Res<()> = async {
        let meta = c.kafka.cluster(Some(&[])).await?;
        c.kafka
            .create_topic(&meta, name, form.partitions.unwrap_or(1), &configs)
            .await
    }
    .await;
    match result {
        Ok(()) => redirect(&format!("/topics/{}", urlencode(name))),
        Err(e) => create_failed(&c, &csrf, &format!("Topic {name} was not created: {e}")).await,
    }
}

async fn create_failed(c: &Console, csrf: &Csrf, why: &str) -> Response {
    let query = ListQuery {
        q: String::new(),
        page: None,
    };
    with_status(
        topics_page(c, csrf, &query, Some(why)).await,
        StatusCode::BAD_REQUEST,
    )
}

pub(crate) fn redirect(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_string())]).into_response()
}

pub(crate) async fn topic(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Response {
    let csrf = c.csrf(&headers);
    topic_page(&c, &csrf, &name, None).await
}

async fn topic_page(c: &Console, csrf: &Csrf, name: &str, problem: Option<&str>) -> Response {
    let name = name.to_string();
    let meta = match c.kafka.cluster(Some(std::slice::from_ref(&name))).await {
        Ok(m) => m,
        Err(e) => return error_page(&name, csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let Some(t) = meta.topics.get(&name).filter(|t| t.error == 0) else {
        let why = meta
            .topics
            .get(&name)
            .map(|t| crate::kafka::error_name(t.error))
            .unwrap_or_else(|| "UNKNOWN_TOPIC_OR_PARTITION".into());
        return error_page(
            &name,
            csrf,
            StatusCode::NOT_FOUND,
            &format!("No topic {name}: {why}"),
        );
    };
    let partitions: Vec<(String, i32)> = t.leaders.keys().map(|p| (name.clone(), *p)).collect();
    let (offsets, sizes, configs) = tokio::join!(
        c.kafka.offsets(&meta, &partitions),
        c.kafka.sizes(&meta, std::slice::from_ref(&name)),
        c.kafka.configs(&meta, 2, &name)
    );
    let enc = urlencode(&name);
    let body = html! {
        p { a href={"/topics/" (enc) "/messages"} { "Messages" } }
        h2 { "Partitions" }
        table #partitions {
            thead { tr { th.num { "Partition" } th.num { "Leader" } th.num { "Leader epoch" }
                th.num { "Start offset" } th.num { "End offset" } th.num { "Messages" } th.num { "Size" } } }
            tbody {
                @for (p, leader) in &t.leaders {
                    @let o = offsets.get(&(name.clone(), *p));
                    tr {
                        td.num { a href={"/topics/" (enc) "/messages?partition=" (p)} { (p) } }
                        td.num { (leader) }
                        td.num { (t.epochs.get(p).copied().unwrap_or(-1)) }
                        @match o {
                            Some(Ok(o)) => {
                                td.num { (o.start) } td.num { (o.end) } td.num { (o.end - o.start) }
                            }
                            Some(Err(e)) => { td.error colspan="3" { (e) } }
                            None => { td colspan="3" { "?" } }
                        }
                        td.num { (sizes.get(&(name.clone(), *p)).map_or("?".to_string(), |s| bytes(*s))) }
                    }
                }
            }
        }
        h2 { "Configs" }
        @match &configs {
            Ok(configs) => {
                table #configs {
                    thead { tr { th { "Name" } th { "Value" } th { "Source" } } }
                    tbody {
                        @for cfg in configs {
                            tr.set[cfg.source == "DYNAMIC_TOPIC_CONFIG"] {
                                td { (cfg.name) }
                                td { @if cfg.sensitive { "(sensitive)" } @else { (cfg.value.clone().unwrap_or_else(|| "null".into())) } }
                                td { (cfg.source) @if cfg.read_only { " (read-only)" } }
                            }
                        }
                    }
                }
            }
            Err(e) => { p.error { (e) } }
        }
        @if !c.read_only {
            h2 { "Administer" }
            @if let Some(p) = problem { p.error #admin-error { (p) } }
            form.action #set-config method="post" action={"/topics/" (enc) "/admin"} {
                input type="hidden" name="csrf" value=(csrf.token);
                input type="hidden" name="op" value="config";
                label { "Config " input name="config" required; }
                label { "Value (empty: back to the default) " input name="value"; }
                button type="submit" { "Set config" }
            }
            form.action #add-partitions method="post" action={"/topics/" (enc) "/admin"} {
                input type="hidden" name="csrf" value=(csrf.token);
                input type="hidden" name="op" value="partitions";
                label { "Partitions in all " input name="count" type="number" min=(t.leaders.len() + 1) value=(t.leaders.len() + 1); }
                button type="submit" { "Add partitions" }
            }
            form.action #delete-records method="post" action={"/topics/" (enc) "/admin"} {
                input type="hidden" name="csrf" value=(csrf.token);
                input type="hidden" name="op" value="delete-records";
                label { "Partition " select name="partition" { @for p in t.leaders.keys() { option value=(p) { (p) } } } }
                label { "Delete records before offset (-1: all) " input name="offset" value="-1"; }
                button type="submit" { "Delete records" }
            }
            form.action #delete-topic method="post" action={"/topics/" (enc) "/admin"} {
                input type="hidden" name="csrf" value=(csrf.token);
                input type="hidden" name="op" value="delete";
                label { "Type the topic's name to delete it " input name="confirm" required; }
                button type="submit" { "Delete topic" }
            }
        }
    };
    layout(&format!("Topic {name}"), csrf, body)
}

#[derive(Debug, Deserialize)]
pub(crate) struct TopicAdmin {
    csrf: String,
    op: String,
    #[serde(default)]
    config: String,
    #[serde(default)]
    value: String,
    count: Option<i32>,
    partition: Option<i32>,
    #[serde(default)]
    offset: String,
    #[serde(default)]
    confirm: String,
}

pub(crate) async fn topic_admin(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Form(form): Form<TopicAdmin>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let result: Res<String> = async {
        let meta = c.kafka.cluster(Some(std::slice::from_ref(&name))).await?;
        match form.op.as_str() {
            "config" => {
                let config = form.config.trim();
                let value = form.value.trim();
                c.kafka
                    .alter_config(
                        &meta,
                        2,
                        &name,
                        config,
                        (!value.is_empty()).then_some(value),
                    )
                    .await?;
                Ok(format!("/topics/{}", urlencode(&name)))
            }
            "partitions" => {
                let count = form.count.ok_or("the number of partitions is missing")?;
                c.kafka.add_partitions(&meta, &name, count).await?;
                Ok(format!("/topics/{}", urlencode(&name)))
            }
            "delete-records" => {
                let partition = form.partition.ok_or("the partition is missing")?;
                let offset: i64 = form
                    .offset
                    .trim()
                    .parse()
                    .map_err(|_| format!("\"{}\" is not an offset", form.offset))?;
                c.kafka
                    .delete_records(&meta, &name, partition, offset)
                    .await?;
                Ok(format!("/topics/{}", urlencode(&name)))
            }
            "delete" => {
                if form.confirm.trim() != name {
                    return Err(format!("the name typed is not {name}: nothing was deleted"));
                }
                c.kafka.delete_topic(&meta, &name).await?;
                Ok("/topics".to_string())
            }
            other => Err(format!("\"{other}\" is not an action")),
        }
    }
    .await;
    match result {
        Ok(to) => redirect(&to),
        Err(e) => with_status(
            topic_page(&c, &csrf, &name, Some(&e)).await,
            StatusCode::BAD_REQUEST,
        ),
    }
}

// ---- Messages ----

#[derive(Debug, Deserialize)]
pub(crate) struct MessagesQuery {
    partition: Option<i32>,
    /// An offset to read from; empty: the last `limit` records.
    offset: Option<String>,
    /// Read from the first record at or after this time (ms since the epoch).
    timestamp: Option<String>,
    limit: Option<usize>,
    format: Option<String>,
    /// Search: shown are only records whose key, value or headers hold this.
    search: Option<String>,
    /// `on`: `search` is a regular expression.
    regex: Option<String>,
    /// Search: most records read.
    scan: Option<u64>,
    /// Search: most seconds spent.
    seconds: Option<u64>,
}

pub(crate) async fn messages(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<MessagesQuery>,
) -> Response {
    let csrf = c.csrf(&headers);
    messages_page(&c, &csrf, &name, &q, None).await
}

async fn messages_page(
    c: &Console,
    csrf: &Csrf,
    name: &str,
    q: &MessagesQuery,
    problem: Option<&str>,
) -> Response {
    let title = format!("Messages of {name}");
    let meta = match c.kafka.cluster(Some(&[name.to_string()])).await {
        Ok(m) => m,
        Err(e) => return error_page(&title, csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let Some(t) = meta.topics.get(name).filter(|t| t.error == 0) else {
        return error_page(
            &title,
            csrf,
            StatusCode::NOT_FOUND,
            &format!("No topic {name}"),
        );
    };
    let partition = q.partition.unwrap_or(0);
    if !t.leaders.contains_key(&partition) {
        return error_page(
            &title,
            csrf,
            StatusCode::NOT_FOUND,
            &format!("{name} has no partition {partition}"),
        );
    }
    let limit = q.limit.unwrap_or(50).clamp(1, MESSAGES_MAX);
    let show = Show::parse(q.format.as_deref());
    let offset_text = q.offset.clone().unwrap_or_default();
    let timestamp_text = q.timestamp.clone().unwrap_or_default();
    let search_text = q.search.clone().unwrap_or_default();
    let regex = q.regex.as_deref() == Some("on");
    let scan = q
        .scan
        .unwrap_or(SEARCH_RECORDS)
        .clamp(1, SEARCH_RECORDS_MAX);
    let seconds = q
        .seconds
        .unwrap_or(SEARCH_SECONDS)
        .clamp(1, SEARCH_SECONDS_MAX);
    let search = if search_text.is_empty() {
        Ok(None)
    } else {
        records::Matcher::new(&search_text, regex).map(|m| {
            Some(Search {
                matcher: m,
                records: scan,
                time: Duration::from_secs(seconds),
            })
        })
    };
    let read = match search {
        Ok(search) => {
            read_messages(
                c,
                &meta,
                (name, partition),
                (&offset_text, &timestamp_text),
                limit,
                search.as_ref(),
            )
            .await
        }
        Err(e) => Err(e),
    };
    let enc = urlencode(name);
    let body = html! {
        p { a href={"/topics/" (enc)} { "← topic " (name) } " · "
            a #tail-link href={"/topics/" (enc) "/tail?partition=" (partition) "&format=" (show.name())} { "Live tail of partition " (partition) } }
        form.filter method="get" action={"/topics/" (enc) "/messages"} {
            label { "Partition " select name="partition" {
                @for p in t.leaders.keys() { option value=(p) selected[*p == partition] { (p) } } } }
            label { "From offset " input name="offset" value=(offset_text) placeholder="last records" size="10"; }
            label { "or time (ms) " input name="timestamp" value=(timestamp_text) size="14"; }
            label { "Records " input name="limit" type="number" min="1" max=(MESSAGES_MAX) value=(limit); }
            label { "Show as " select name="format" {
                @for f in [Show::Text, Show::Json, Show::Hex] { option value=(f.name()) selected[f == show] { (f.name()) } } } }
            label { "Search key, value, headers " input type="search" name="search" value=(search_text) size="24"; }
            label { "Regular expression " input type="checkbox" name="regex" checked[regex]; }
            label { "Read at most (records) " input name="scan" type="number" min="1" max=(SEARCH_RECORDS_MAX) value=(scan); }
            label { "for at most (s) " input name="seconds" type="number" min="1" max=(SEARCH_SECONDS_MAX) value=(seconds); }
            button type="submit" { "Read" }
        }
        @match &read {
            Err(e) => { p.error #read-error { (e) } }
            Ok(r) => {
                p #read-summary { "Offsets " (r.start) " to " (r.end) " of partition " (partition) "; "
                    (r.records.len()) " record(s) from offset " (r.from) "." }
                @if let Some(s) = &r.scanned {
                    p #search-summary { "Scanned " (s.records) " of " (r.end - r.from) " record(s) (offsets "
                        (r.from) " to " (s.next) ") in " (s.millis) " ms: " (r.records.len()) " match(es)"
                        @if let Some(why) = s.stopped { "; stopped at " (why) } "." }
                }
                @if let Some(e) = &r.problem { p.error { (e) } }
                table #messages {
                    thead { tr { th.num { "Offset" } th { "Timestamp" } th { "Key" } th { "Headers" } th { "Value" } } }
                    tbody {
                        @for rec in &r.records {
                            tr {
                                td.num { (rec.offset) }
                                td { (time_ms(rec.timestamp)) }
                                td { @match &rec.key { Some(k) => { pre { (records::render(k, show)) } } None => { span.null { "null" } } } }
                                td { @for (k, v) in &rec.headers {
                                    div { b { (k) } ": " @match v { Some(v) => { (records::render(v, Show::Text)) } None => { span.null { "null" } } } } } }
                                td { @match &rec.value { Some(v) => { pre { (records::render(v, show)) } } None => { span.null { "null" } } } }
                            }
                        }
                    }
                }
            }
        }
        @if !c.read_only {
            h2 { "Produce a record" }
            @if let Some(p) = problem { p.error #produce-error { (p) } }
            form.action method="post" action={"/topics/" (enc) "/messages"} {
                input type="hidden" name="csrf" value=(csrf.token);
                input type="hidden" name="partition" value=(partition);
                label { "Key " input name="key" placeholder="(null when empty)"; }
                label.wide { "Headers (one name=value per line) " textarea name="headers" rows="2" {} }
                label.wide { "Value " textarea name="value" rows="4" {} }
                button type="submit" { "Produce to partition " (partition) }
            }
        }
    };
    layout(&title, csrf, body)
}

struct Read {
    start: i64,
    end: i64,
    from: i64,
    records: Vec<records::Record>,
    problem: Option<String>,
    /// What a search read.
    scanned: Option<Scanned>,
}

/// A search: the records it shows, and how much it may read.
struct Search {
    matcher: records::Matcher,
    records: u64,
    time: Duration,
}

struct Scanned {
    records: u64,
    /// The offset after the last record read.
    next: i64,
    millis: u128,
    /// The limit that ended the search before the end of the partition.
    stopped: Option<&'static str>,
}

/// Records of `topic`-`partition` from an offset (`position.0`), a time (`position.1`) or,
/// with neither, the last `limit` ones; with `search`, the first `limit` that match, from
/// that position (or the log start), reading at most the search's records and time.
async fn read_messages(
    c: &Console,
    meta: &Cluster,
    (topic, partition): (&str, i32),
    (offset, timestamp): (&str, &str),
    limit: usize,
    search: Option<&Search>,
) -> Res<Read> {
    let tp = vec![(topic.to_string(), partition)];
    let o = c
        .kafka
        .offsets(meta, &tp)
        .await
        .remove(&tp[0])
        .unwrap_or_else(|| Err("no offsets".into()))?;
    let from = match (offset.trim(), timestamp.trim()) {
        ("", "") if search.is_some() => o.start,
        ("", "") => o.end.saturating_sub(limit as i64).max(o.start),
        (off, "") => off
            .parse::<i64>()
            .map_err(|_| format!("\"{off}\" is not an offset"))?
            .max(o.start)
            .min(o.end),
        (_, ts) => {
            let ts = ts
                .parse::<i64>()
                .map_err(|_| format!("\"{ts}\" is not a time in milliseconds since 1970"))?;
            match c.kafka.list_offsets(meta, &tp, ts).await.remove(&tp[0]) {
                Some(Ok(found)) if found >= 0 => found,
                Some(Ok(_)) => o.end,
                Some(Err(e)) => return Err(e),
                None => return Err("no answer".into()),
            }
        }
    };
    let started = Instant::now();
    let mut records = Vec::new();
    let mut problem = None;
    let mut next = from;
    let mut read: u64 = 0;
    let mut stopped = None;
    let mut fetches = 0;
    loop {
        if records.len() >= limit || next >= o.end {
            break;
        }
        match search {
            None if fetches >= FETCHES_MAX => break,
            Some(s) if read >= s.records => {
                stopped = Some("the records limit");
                break;
            }
            Some(s) if started.elapsed() >= s.time => {
                stopped = Some("the time limit");
                break;
            }
            _ => {}
        }
        fetches += 1;
        let (data, _hw, _start) = c
            .kafka
            .fetch(meta, topic, partition, next, FETCH_BYTES)
            .await?;
        let bounds = records::Bounds {
            keep: limit - records.len(),
            read: search.map_or(u64::MAX, |s| s.records - read),
            matcher: search.map(|s| &s.matcher),
            until: search.map(|s| started + s.time),
        };
        // Decompressing and matching take CPU time: off the runtime's workers.
        let decoded = tokio::task::block_in_place(|| records::decode(&data, next, &bounds));
        read += decoded.read;
        records.extend(decoded.records);
        if let Some(e) = decoded.problem {
            problem = Some(e);
            break;
        }
        if decoded.timed_out {
            stopped = Some("the time limit");
            break;
        }
        // A fetch that moves nothing ends the read.
        match decoded.next {
            Some(n) if n > next => next = n,
            _ => break,
        }
    }
    Ok(Read {
        start: o.start,
        end: o.end,
        from,
        records,
        problem,
        scanned: search.map(|_| Scanned {
            records: read,
            next,
            millis: started.elapsed().as_millis(),
            stopped,
        }),
    })
}

#[derive(Debug, Deserialize)]
pub(crate) struct Produce {
    csrf: String,
    partition: i32,
    #[serde(default)]
    key: String,
    #[serde(default)]
    headers: String,
    #[serde(default)]
    value: String,
}

pub(crate) async fn produce(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Form(form): Form<Produce>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let q = MessagesQuery {
        partition: Some(form.partition),
        offset: None,
        timestamp: None,
        limit: None,
        format: None,
        search: None,
        regex: None,
        scan: None,
        seconds: None,
    };
    let record_headers = match parse_lines(&form.headers) {
        Ok(h) => h
            .into_iter()
            .map(|(k, v)| (k, Some(v.into_bytes())))
            .collect(),
        Err(e) => {
            return with_status(
                messages_page(&c, &csrf, &name, &q, Some(&e)).await,
                StatusCode::BAD_REQUEST,
            );
        }
    };
    let key = (!form.key.is_empty()).then_some(form.key.as_bytes());
    let batch = records::batch(key, Some(form.value.as_bytes()), record_headers, now_ms());
    let result = async {
        let meta = c.kafka.cluster(Some(std::slice::from_ref(&name))).await?;
        c.kafka.produce(&meta, &name, form.partition, batch).await
    }
    .await;
    match result {
        Ok(offset) => redirect(&format!(
            "/topics/{}/messages?partition={}&offset={offset}",
            urlencode(&name),
            form.partition
        )),
        Err(e) => {
            let why = format!("Not produced: {e}");
            with_status(
                messages_page(&c, &csrf, &name, &q, Some(&why)).await,
                StatusCode::BAD_REQUEST,
            )
        }
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
