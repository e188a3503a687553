//! The consumer group pages and actions: the list, a group's members, committed offsets and
//! lag, and, for a group with no active member, resetting its offsets and deleting it.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Form, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;
use maud::html;
use serde::Deserialize;

use crate::kafka::{Cluster, Res};
use crate::pages::{error_page, pager, redirect, urlencode, ListQuery, PAGE_ROWS};
use crate::{layout, refusal, with_status, Console, Csrf};

pub(crate) async fn groups(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Query(query): Query<ListQuery>,
) -> Response {
    let csrf = c.csrf(&headers);
    let listed = async {
        let meta = c.kafka.cluster(Some(&[])).await?;
        c.kafka.list_groups(&meta).await
    }
    .await;
    let groups = match listed {
        Ok(g) => g,
        Err(e) => return error_page("Consumer groups", &csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let filter = query.q.trim();
    let matching: Vec<_> = groups
        .iter()
        .filter(|g| filter.is_empty() || g.id.contains(filter))
        .collect();
    let page = query.page.unwrap_or(1).max(1);
    let body = html! {
        form.filter method="get" action="/groups" {
            input type="search" name="q" value=(filter) placeholder="id contains";
            button type="submit" { "Filter" }
        }
        table #groups {
            thead { tr { th { "Group" } th { "Type" } th { "Protocol type" } th { "State" } } }
            tbody {
                @for g in matching.iter().skip((page - 1).saturating_mul(PAGE_ROWS)).take(PAGE_ROWS) {
                    tr {
                        td { a href={"/group?id=" (urlencode(&g.id))} { (g.id) } }
                        td { (g.kind) }
                        td { (g.protocol_type) }
                        td { (g.state) }
                    }
                }
            }
        }
        (pager("/groups", filter, page, matching.len()))
    };
    layout("Consumer groups", &csrf, body)
}

#[derive(Debug, Deserialize)]
pub(crate) struct GroupQuery {
    id: String,
}

pub(crate) async fn group(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Query(q): Query<GroupQuery>,
) -> Response {
    let csrf = c.csrf(&headers);
    group_page(&c, &csrf, &q, None).await
}

async fn group_page(c: &Console, csrf: &Csrf, q: &GroupQuery, problem: Option<&str>) -> Response {
    let title = format!("Group {}", q.id);
    let found = async {
        let meta = c.kafka.cluster(None).await?;
        let coordinator = c.kafka.coordinator(&meta, &q.id).await?;
        Ok::<_, String>((meta, coordinator))
    }
    .await;
    let (meta, coordinator) = match found {
        Ok(v) => v,
        Err(e) => return error_page(&title, csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let listed = c.kafka.group_state(&meta, coordinator, &q.id).await;
    let kind = listed
        .as_ref()
        .ok()
        .and_then(|g| g.as_ref())
        .map(|g| g.kind.to_ascii_lowercase())
        .unwrap_or_default();
    let share = kind == "share";
    // Each protocol's own describe: KIP-848 consumer groups and share groups have members
    // DescribeGroups does not show.
    let described = match kind.as_str() {
        "consumer" => {
            c.kafka
                .describe_consumer_group(&meta, coordinator, &q.id)
                .await
        }
        "share" => {
            c.kafka
                .describe_share_group(&meta, coordinator, &q.id)
                .await
        }
        _ => c.kafka.describe_group(&meta, coordinator, &q.id).await,
    };
    // A share group has a start offset per share partition (and its coordinator's lag)
    // instead of committed offsets.
    let (committed, share_lag) = if share {
        match c.kafka.share_offsets(&meta, coordinator, &q.id).await {
            Ok(o) => (
                Ok(o.iter()
                    .map(|(tp, (start, _))| (tp.clone(), *start))
                    .collect()),
                o.into_iter().map(|(tp, (_, lag))| (tp, lag)).collect(),
            ),
            Err(e) => (Err(e), BTreeMap::new()),
        }
    } else {
        (
            c.kafka.committed(&meta, coordinator, &q.id).await,
            BTreeMap::new(),
        )
    };
    let committed: BTreeMap<(String, i32), i64> = match committed {
        Ok(v) => v,
        Err(e) => return error_page(&title, csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let partitions: Vec<(String, i32)> = committed.keys().cloned().collect();
    let ends = c.kafka.list_offsets(&meta, &partitions, -1).await;
    let lag_of = |tp: &(String, i32)| -> Option<i64> {
        match share_lag.get(tp) {
            Some(l) if *l >= 0 => Some(*l),
            _ => Some(
                ends.get(tp)?
                    .as_ref()
                    .ok()?
                    .saturating_sub(*committed.get(tp)?)
                    .max(0),
            ),
        }
    };
    // Lag in seconds: how long ago the first record not yet consumed was written, for the
    // first LAG_SECONDS_PARTITIONS lagging partitions.
    let lagging: Vec<((String, i32), i64)> = committed
        .iter()
        .filter(|(tp, _)| lag_of(tp).is_some_and(|l| l > 0))
        .take(LAG_SECONDS_PARTITIONS)
        .map(|(tp, o)| (tp.clone(), *o))
        .collect();
    let behind = c.kafka.timestamps_at(&meta, &lagging).await;
    let now = crate::pages::now_ms();
    // The offsets a reset sets: every partition of each topic the group has offsets for,
    // as kafka-consumer-groups --reset-offsets --all-topics.
    let resettable = reset_partitions(&meta, &committed);
    let state = listed.ok().flatten().map(|g| g.state);
    let empty = matches!(state.as_deref(), Some("Empty") | Some("Dead"));
    let mut owners: BTreeMap<(String, i32), String> = BTreeMap::new();
    if let Ok(d) = &described {
        for m in &d.members {
            for tp in &m.assignment {
                owners.insert(tp.clone(), m.client_id.clone());
            }
        }
    }
    let total_lag: i64 = partitions
        .iter()
        .filter_map(&lag_of)
        .fold(0, i64::saturating_add);
    let body = html! {
        p { "Coordinator: broker " (coordinator) ". "
            "State " b #state { (state.clone().unwrap_or_else(|| "unknown".into())) } "." }
        @if let Some(p) = problem { p.error #group-error { (p) } }
        @match &described {
            Ok(d) => {
                p #group-members { (d.members.len()) " member(s)"
                    @if !d.protocol_type.is_empty() { ", protocol type " (d.protocol_type) }
                    @if !d.protocol.is_empty() { ", assignor " (d.protocol) } "." }
                @if !d.members.is_empty() {
                    h2 { "Members" }
                    table #members {
                        thead { tr { th { "Member" } th { "Client id" } th { "Host" } th { "Assigned" } } }
                        tbody {
                            @for m in &d.members {
                                tr {
                                    td { (m.id) @if let Some(i) = &m.instance_id { " (" (i) ")" } }
                                    td { (m.client_id) }
                                    td { (m.host) }
                                    td { @for (t, p) in &m.assignment { (t) "-" (p) " " } }
                                }
                            }
                        }
                    }
                }
            }
            Err(e) => { p.error { (e) } }
        }
        h2 { @if share { "Share partitions and lag" } @else { "Committed offsets and lag" } }
        p #total-lag { "Lag, all partitions: " (total_lag) " record(s)." }
        table #offsets {
            thead { tr { th { "Partition" } th.num { @if share { "Start" } @else { "Committed" } } th.num { "End" } th.num { "Lag" }
                th.num { "Lag (s)" } th { "Consumer" } } }
            tbody {
                @for (tp, off) in &committed {
                    @let end = ends.get(tp).and_then(|e| e.as_ref().ok()).copied();
                    tr {
                        td { (tp.0) "-" (tp.1) }
                        td.num { (off) }
                        td.num { (end.map_or("?".to_string(), |e| e.to_string())) }
                        td.num { (lag_of(tp).map_or("?".to_string(), |l| l.to_string())) }
                        td.num { @match (lag_of(tp), behind.get(tp)) {
                            (Some(0), _) => { "0" }
                            (_, Some(ts)) => { ((now.saturating_sub(*ts).max(0) / 1000)) }
                            _ => { "?" }
                        } }
                        td { (owners.get(tp).cloned().unwrap_or_else(|| "-".into())) }
                    }
                }
            }
        }
        @if share && !c.read_only {
            p.null { "A share group's start offsets are reset with kafka-share-groups --reset-offsets while it is empty." }
        }
        @if !c.read_only && !share {
            h2 { "Reset offsets" }
            @if !empty {
                p #reset-closed { "Offsets can be reset only while the group has no active member (state Empty), as kafka-consumer-groups insists." }
            } @else {
                form.action #reset method="post" action="/group/reset" {
                    input type="hidden" name="csrf" value=(csrf.token);
                    input type="hidden" name="id" value=(q.id);
                    label { "To " select name="to" {
                        option value="exact" { "the offsets below" }
                        option value="earliest" { "earliest" }
                        option value="latest" { "latest" }
                        option value="timestamp" { "the first record at or after a time" } } }
                    label { "Time (ms since 1970) " input name="timestamp" size="14"; }
                    table.wide #reset-offsets {
                        thead { tr { th { "Partition" } th { "Offset" } } }
                        tbody {
                            @for tp in &resettable {
                                tr {
                                    td { (tp.0) "-" (tp.1) }
                                    @let was = committed.get(tp).map_or(String::new(), |o| o.to_string());
                                    td { input name={"offset:" (tp.1) ":" (tp.0)} size="12" value=(was);
                                        input type="hidden" name={"was:" (tp.1) ":" (tp.0)} value=(was); }
                                }
                            }
                        }
                    }
                    button type="submit" { "Reset offsets" }
                }
            }
            h2 { "Delete the group" }
            form.action #delete method="post" action="/group/delete" {
                input type="hidden" name="csrf" value=(csrf.token);
                input type="hidden" name="id" value=(q.id);
                button type="submit" { "Delete group " (q.id) }
            }
        }
    };
    layout(&title, csrf, body)
}

/// Lagging partitions whose lag in seconds a group's page reads (one small fetch each).
const LAG_SECONDS_PARTITIONS: usize = 20;

/// Every partition of each topic `committed` names, by the metadata.
fn reset_partitions(
    meta: &Cluster,
    committed: &BTreeMap<(String, i32), i64>,
) -> Vec<(String, i32)> {
    let topics: std::collections::BTreeSet<&String> = committed.keys().map(|(t, _)| t).collect();
    let mut out: Vec<(String, i32)> = committed.keys().cloned().collect();
    for t in topics {
        if let Some(m) = meta.topics.get(t) {
            out.extend(m.leaders.keys().map(|p| (t.clone(), *p)));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Where a reset moves a group's offsets.
#[derive(Debug, Deserialize)]
pub(crate) struct Reset {
    csrf: String,
    id: String,
    to: String,
    #[serde(default)]
    timestamp: String,
    /// `offset:<partition>:<topic>` fields (the topic last: it may hold ':').
    #[serde(flatten)]
    offsets: std::collections::HashMap<String, String>,
}

pub(crate) async fn reset(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<Reset>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let result: Res<()> = async {
        let meta = c.kafka.cluster(None).await?;
        let coordinator = c.kafka.coordinator(&meta, &form.id).await?;
        // Checked here as kafka-consumer-groups checks it; the coordinator also refuses an
        // offset commit without a member while the group has members.
        let state = c
            .kafka
            .group_state(&meta, coordinator, &form.id)
            .await?
            .map(|g| g.state);
        if !matches!(state.as_deref(), Some("Empty") | Some("Dead")) {
            return Err(format!(
                "offsets can be reset only while the group has no active member, but its state is {}",
                state.unwrap_or_else(|| "unknown".into())
            ));
        }
        let committed = c.kafka.committed(&meta, coordinator, &form.id).await?;
        let partitions = reset_partitions(&meta, &committed);
        let targets: BTreeMap<(String, i32), i64> = match form.to.as_str() {
            "earliest" | "latest" | "timestamp" => {
                let ts = match form.to.as_str() {
                    "earliest" => -2,
                    "latest" => -1,
                    _ => form.timestamp.trim().parse::<i64>().ok().filter(|t| *t >= 0).ok_or_else(|| {
                        format!("\"{}\" is not a time in milliseconds since 1970", form.timestamp)
                    })?,
                };
                let found = c.kafka.list_offsets(&meta, &partitions, ts).await;
                let ends = if ts >= 0 {
                    c.kafka.list_offsets(&meta, &partitions, -1).await
                } else {
                    BTreeMap::new()
                };
                let mut out = BTreeMap::new();
                for tp in &partitions {
                    let o = match found.get(tp) {
                        Some(Ok(o)) if *o >= 0 => *o,
                        // No record at or after the time: the end, as Kafka's tool does.
                        Some(Ok(_)) => match ends.get(tp) {
                            Some(Ok(e)) => *e,
                            _ => return Err(format!("{}-{}: no end offset", tp.0, tp.1)),
                        },
                        Some(Err(e)) => return Err(format!("{}-{}: {e}", tp.0, tp.1)),
                        None => return Err(format!("{}-{}: no answer", tp.0, tp.1)),
                    };
                    out.insert(tp.clone(), o);
                }
                out
            }
            "exact" => {
                let mut out = BTreeMap::new();
                for (k, v) in &form.offsets {
                    let Some(rest) = k.strip_prefix("offset:") else { continue };
                    let Some((p, t)) = rest.split_once(':') else { continue };
                    let v = v.trim();
                    // Only the offsets changed on the page: the others stay as they are now,
                    // even if a consumer moved them since the page was read.
                    let was = form.offsets.get(&format!("was:{rest}")).map(|w| w.trim());
                    if v.is_empty() || was == Some(v) {
                        continue;
                    }
                    let p: i32 = p.parse().map_err(|_| format!("\"{p}\" is not a partition"))?;
                    let o: i64 = v
                        .parse()
                        .ok()
                        .filter(|o| *o >= 0)
                        .ok_or_else(|| format!("{t}-{p}: \"{v}\" is not an offset"))?;
                    if !partitions.contains(&(t.to_string(), p)) {
                        return Err(format!("{t}-{p} is not a partition of the group's topics"));
                    }
                    out.insert((t.to_string(), p), o);
                }
                // Clamped into each partition's log, as Kafka's tool does.
                let ps: Vec<(String, i32)> = out.keys().cloned().collect();
                let bounds = c.kafka.offsets(&meta, &ps).await;
                for (tp, o) in out.iter_mut() {
                    match bounds.get(tp) {
                        Some(Ok(b)) => *o = (*o).max(b.start).min(b.end),
                        Some(Err(e)) => return Err(format!("{}-{}: {e}", tp.0, tp.1)),
                        None => return Err(format!("{}-{}: no offsets", tp.0, tp.1)),
                    }
                }
                out
            }
            other => return Err(format!("\"{other}\" is not a reset")),
        };
        if targets.is_empty() {
            return Err("no offset was changed".into());
        }
        c.kafka.commit(&meta, coordinator, &form.id, &targets).await
    }
    .await;
    match result {
        Ok(()) => redirect(&format!("/group?id={}", urlencode(&form.id))),
        Err(e) => {
            let q = GroupQuery {
                id: form.id.clone(),
            };
            with_status(
                group_page(&c, &csrf, &q, Some(&format!("Offsets not reset: {e}"))).await,
                StatusCode::BAD_REQUEST,
            )
        }
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct Delete {
    csrf: String,
    id: String,
}

pub(crate) async fn delete(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<Delete>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let result: Res<()> = async {
        let meta = c.kafka.cluster(Some(&[])).await?;
        let coordinator = c.kafka.coordinator(&meta, &form.id).await?;
        c.kafka.delete_group(&meta, coordinator, &form.id).await
    }
    .await;
    match result {
        Ok(()) => redirect("/groups"),
        Err(e) => {
            let q = GroupQuery {
                id: form.id.clone(),
            };
            with_status(
                group_page(&c, &csrf, &q, Some(&format!("Group not deleted: {e}"))).await,
                StatusCode::BAD_REQUEST,
            )
        }
    }
}
