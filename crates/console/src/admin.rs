//! Pages of the cluster's administration: transactions (list, describe, the open
//! transactions of a topic's partitions and aborting a hanging one, as `kafka-transactions`
//! does), client quotas, SCRAM users and ACLs, and the brokers' dynamic configs.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::extract::{Form, Query};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;
use maud::html;
use serde::Deserialize;

use crate::kafka::Res;
use crate::kafka_admin::{code_name, Acl, OPERATIONS, PATTERN_TYPES, PERMISSIONS, RESOURCE_TYPES};
use crate::pages::{error_page, now_ms, redirect, urlencode};
use crate::{layout, refusal, with_status, Console, Csrf};

/// States of a transaction its coordinator is still finishing (any other is over).
const IN_FLIGHT: &[&str] = &[
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "PrepareEpochFence",
];

/// An open transaction older than this is shown as hanging when its coordinator does not
/// list it as ongoing (Kafka's `transaction.max.timeout.ms` default, what `kafka-transactions
/// find-hanging` waits for by default).
const HANGING_AFTER_MS: i64 = 15 * 60 * 1000;

#[derive(Debug, Deserialize)]
pub(crate) struct TxnQuery {
    #[serde(default)]
    topic: String,
}

pub(crate) async fn transactions(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Query(q): Query<TxnQuery>,
) -> Response {
    let csrf = c.csrf(&headers);
    transactions_page(&c, &csrf, &q, None).await
}

async fn transactions_page(
    c: &Console,
    csrf: &Csrf,
    q: &TxnQuery,
    problem: Option<&str>,
) -> Response {
    let topic = q.topic.trim();
    let meta = match c
        .kafka
        .cluster(
            (!topic.is_empty())
                .then(|| vec![topic.to_string()])
                .as_deref(),
        )
        .await
    {
        Ok(m) => m,
        Err(e) => return error_page("Transactions", csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let listed = c.kafka.list_transactions(&meta).await;
    let producers = if topic.is_empty() {
        None
    } else {
        Some(c.kafka.producers(&meta, topic).await)
    };
    // Producers whose transaction a coordinator lists as in flight: not hanging. None when
    // the list could not be read (then no row is called hanging).
    let in_flight: Option<BTreeSet<i64>> = listed.as_ref().ok().map(|l| {
        l.iter()
            .filter(|t| IN_FLIGHT.contains(&t.state.as_str()))
            .map(|t| t.producer_id)
            .collect()
    });
    let now = now_ms();
    let body = html! {
        @if let Some(p) = problem { p.error #txn-error { (p) } }
        h2 { "Transactional ids" }
        @match &listed {
            Ok(listed) if listed.is_empty() => { p { "No transactional producer has used this cluster." } }
            Ok(listed) => {
                table #transactions {
                    thead { tr { th { "Transactional id" } th.num { "Coordinator" } th.num { "Producer id" } th { "State" } } }
                    tbody {
                        @for t in listed {
                            tr {
                                td { a href={"/transaction?id=" (urlencode(&t.id))} { (t.id) } }
                                td.num { (t.coordinator) }
                                td.num { (t.producer_id) }
                                td { (t.state) }
                            }
                        }
                    }
                }
            }
            Err(e) => { p.error { (e) } }
        }
        h2 { "Open transactions in a topic's partitions" }
        form.filter method="get" action="/transactions" {
            label { "Topic " input name="topic" value=(topic) required; }
            button type="submit" { "Show" }
        }
        @match &producers {
            None => {}
            Some(Err(e)) => { p.error { (e) } }
            Some(Ok(parts)) => {
                table #open-transactions {
                    thead { tr { th.num { "Partition" } th.num { "Producer id" } th.num { "Epoch" }
                        th.num { "Coordinator epoch" } th.num { "Start offset" } th.num { "Last sequence" }
                        th { "Last write" } th { "Coordinator lists it" } th {} } }
                    tbody {
                        @for (p, answer) in parts {
                            @match answer {
                                Err(e) => { tr { td.num { (p) } td.error colspan="8" { (e) } } }
                                Ok(list) => {
                                    @for a in list.iter().filter(|a| a.txn_start >= 0) {
                                        @let known = in_flight.as_ref().map(|s| s.contains(&a.producer_id));
                                        @let age = now - a.last_timestamp;
                                        tr.hanging[known == Some(false) && age >= HANGING_AFTER_MS] {
                                            td.num { (p) }
                                            td.num { (a.producer_id) }
                                            td.num { (a.epoch) }
                                            td.num { (a.coordinator_epoch) }
                                            td.num { (a.txn_start) }
                                            td.num { (a.last_sequence) }
                                            td { (age / 1000) " s ago" }
                                            td { @match known { Some(true) => { "yes" } Some(false) => { "no" } None => { "unknown" } } }
                                            td {
                                                @if !c.read_only {
                                                    form method="post" action="/transactions/abort" {
                                                        input type="hidden" name="csrf" value=(csrf.token);
                                                        input type="hidden" name="topic" value=(topic);
                                                        input type="hidden" name="partition" value=(p);
                                                        input type="hidden" name="start" value=(a.txn_start);
                                                        button type="submit" { "Abort" }
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                p.null { "A transaction no coordinator lists as in flight (to a user allowed to describe its transactional id), open for longer than 15 minutes, is hanging: it holds back read_committed consumers (the last stable offset) until it is aborted. Abort writes an ABORT marker for it, as kafka-transactions abort does; aborting a transaction its coordinator is still running aborts it in this partition only." }
            }
        }
    };
    layout("Transactions", csrf, body)
}

#[derive(Debug, Deserialize)]
pub(crate) struct TxnIdQuery {
    id: String,
}

pub(crate) async fn transaction(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Query(q): Query<TxnIdQuery>,
) -> Response {
    let csrf = c.csrf(&headers);
    let title = format!("Transaction {}", q.id);
    let result = async {
        let meta = c.kafka.cluster(Some(&[])).await?;
        c.kafka.describe_transaction(&meta, &q.id).await
    }
    .await;
    let t = match result {
        Ok(t) => t,
        Err(e) => return error_page(&title, &csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let body = html! {
        table #transaction {
            tbody {
                tr { th { "Coordinator" } td { (t.coordinator) } }
                tr { th { "State" } td { (t.state) } }
                tr { th { "Producer id" } td { (t.producer_id) } }
                tr { th { "Producer epoch" } td { (t.producer_epoch) } }
                tr { th { "Timeout" } td { (t.timeout_ms) " ms" } }
                tr { th { "Started" } td { @if t.start_ms >= 0 { (t.start_ms) " (" ((now_ms() - t.start_ms) / 1000) " s ago)" } @else { "-" } } }
                tr { th { "Partitions" } td {
                    @for (topic, p) in &t.partitions {
                        a href={"/transactions?topic=" (urlencode(topic))} { (topic) "-" (p) } " "
                    }
                } }
            }
        }
    };
    layout(&title, &csrf, body)
}

#[derive(Debug, Deserialize)]
pub(crate) struct Abort {
    csrf: String,
    topic: String,
    partition: i32,
    start: i64,
}

pub(crate) async fn abort(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<Abort>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let result: Res<i64> = async {
        let meta = c
            .kafka
            .cluster(Some(std::slice::from_ref(&form.topic)))
            .await?;
        c.kafka
            .abort_transaction(&meta, &form.topic, form.partition, form.start)
            .await
    }
    .await;
    match result {
        Ok(producer) => {
            tracing::info!(
                "console{}: aborted the transaction of producer {producer} starting at {}-{} offset {}",
                c.user.as_deref().map(|u| format!(" ({u})")).unwrap_or_default(),
                form.topic,
                form.partition,
                form.start
            );
            redirect(&format!("/transactions?topic={}", urlencode(&form.topic)))
        }
        Err(e) => {
            let q = TxnQuery {
                topic: form.topic.clone(),
            };
            with_status(
                transactions_page(&c, &csrf, &q, Some(&format!("Not aborted: {e}"))).await,
                StatusCode::BAD_REQUEST,
            )
        }
    }
}

// ---- Quotas, users and ACLs ----

pub(crate) async fn security(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
) -> Response {
    let csrf = c.csrf(&headers);
    security_page(&c, &csrf, None).await
}

async fn security_page(c: &Console, csrf: &Csrf, problem: Option<&str>) -> Response {
    let (quotas, users, acls) =
        tokio::join!(c.kafka.quotas(), c.kafka.scram_users(), c.kafka.acls());
    let body = html! {
        @if let Some(p) = problem { p.error #security-error { (p) } }
        h2 { "Client quotas" }
        @match &quotas {
            Ok(q) if q.is_empty() => { p { "No client quota is set." } }
            Ok(q) => {
                table #quotas {
                    thead { tr { th { "Entity" } th { "Quotas" } } }
                    tbody {
                        @for e in q {
                            tr {
                                td { @for (kind, name) in &e.entity { span.tag { (kind) } " " (name.as_deref().unwrap_or("(default)")) " " } }
                                td { @for (k, v) in &e.values { (k) "=" (v) " " } }
                            }
                        }
                    }
                }
            }
            Err(e) => { p.error { (e) } }
        }
        @if !c.read_only {
            form.action #set-quota method="post" action="/quotas" {
                input type="hidden" name="csrf" value=(csrf.token);
                label { "Entity " select name="entity_type" {
                    option value="user" { "user" } option value="client-id" { "client-id" } } }
                label { "Name (empty: the default) " input name="entity_name"; }
                label { "Quota " select name="key" { @for k in QUOTA_KEYS { option value=(k) { (k) } } } }
                label { "Value (empty: remove) " input name="value"; }
                button type="submit" { "Set quota" }
            }
        }
        h2 { "SCRAM users" }
        @match &users {
            Ok(u) if u.is_empty() => { p { "No SCRAM credential is stored." } }
            Ok(u) => {
                table #users {
                    thead { tr { th { "User" } th { "Credentials" } } }
                    tbody {
                        @for user in u {
                            tr { td { (user.user) } td { @for (m, i) in &user.credentials { (m) " (" (i) " iterations) " } } }
                        }
                    }
                }
            }
            Err(e) => { p.error { (e) } }
        }
        h2 { "ACLs" }
        @match &acls {
            Ok(None) => { p { "The brokers have no authorizer (authorizer.class.name is unset): every client may do everything." } }
            Ok(Some(list)) => {
                table #acls {
                    thead { tr { th { "Resource" } th { "Pattern" } th { "Principal" } th { "Host" } th { "Operation" } th { "Permission" } th {} } }
                    tbody {
                        @for a in list {
                            tr {
                                td { span.tag { (code_name(RESOURCE_TYPES, a.resource_type)) } " " (a.resource_name) }
                                td { (code_name(PATTERN_TYPES, a.pattern_type)) }
                                td { (a.principal) }
                                td { (a.host) }
                                td { (code_name(OPERATIONS, a.operation)) }
                                td { (code_name(PERMISSIONS, a.permission)) }
                                td {
                                    @if !c.read_only {
                                        form method="post" action="/acls" {
                                            input type="hidden" name="csrf" value=(csrf.token);
                                            input type="hidden" name="op" value="delete";
                                            (acl_fields(a))
                                            button type="submit" { "Delete" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if !c.read_only {
                    form.action #create-acl method="post" action="/acls" {
                        input type="hidden" name="csrf" value=(csrf.token);
                        input type="hidden" name="op" value="create";
                        label { "Resource type " (choice("resource_type", RESOURCE_TYPES)) }
                        label { "Resource name " input name="resource_name" required; }
                        label { "Pattern " (choice("pattern_type", PATTERN_TYPES)) }
                        label { "Principal " input name="principal" value="User:" required; }
                        label { "Host " input name="host" value="*" required; }
                        label { "Operation " (choice("operation", OPERATIONS)) }
                        label { "Permission " (choice("permission", &PERMISSIONS[1..])) }
                        button type="submit" { "Add ACL" }
                    }
                }
            }
            Err(e) => { p.error { (e) } }
        }
    };
    layout("Quotas, users & ACLs", csrf, body)
}

/// The client quotas the brokers enforce (`kafka-configs --entity-type users|clients`).
const QUOTA_KEYS: &[&str] = &[
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
];

#[derive(Debug, Deserialize)]
pub(crate) struct QuotaForm {
    csrf: String,
    entity_type: String,
    #[serde(default)]
    entity_name: String,
    key: String,
    #[serde(default)]
    value: String,
}

pub(crate) async fn set_quota(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<QuotaForm>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let result: Res<()> = async {
        let value = match form.value.trim() {
            "" => None,
            v => Some(
                v.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| format!("\"{v}\" is not a number"))?,
            ),
        };
        let name = form.entity_name.trim();
        let meta = c.kafka.cluster(Some(&[])).await?;
        c.kafka
            .alter_quota(
                &meta,
                (&form.entity_type, (!name.is_empty()).then_some(name)),
                &form.key,
                value,
            )
            .await
    }
    .await;
    match result {
        Ok(()) => redirect("/security"),
        Err(e) => with_status(
            security_page(&c, &csrf, Some(&format!("Quota not set: {e}"))).await,
            StatusCode::BAD_REQUEST,
        ),
    }
}

fn choice(name: &str, names: &[(i8, &str)]) -> maud::Markup {
    html! { select name=(name) { @for (code, n) in names { option value=(code) { (n) } } } }
}

fn acl_fields(a: &Acl) -> maud::Markup {
    html! {
        input type="hidden" name="resource_type" value=(a.resource_type);
        input type="hidden" name="resource_name" value=(a.resource_name);
        input type="hidden" name="pattern_type" value=(a.pattern_type);
        input type="hidden" name="principal" value=(a.principal);
        input type="hidden" name="host" value=(a.host);
        input type="hidden" name="operation" value=(a.operation);
        input type="hidden" name="permission" value=(a.permission);
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct AclForm {
    csrf: String,
    op: String,
    resource_type: i8,
    resource_name: String,
    pattern_type: i8,
    principal: String,
    host: String,
    operation: i8,
    permission: i8,
}

pub(crate) async fn acl_action(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<AclForm>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let acl = Acl {
        resource_type: form.resource_type,
        resource_name: form.resource_name.trim().to_string(),
        pattern_type: form.pattern_type,
        principal: form.principal.trim().to_string(),
        host: form.host.trim().to_string(),
        operation: form.operation,
        permission: form.permission,
    };
    let result: Res<()> = async {
        let meta = c.kafka.cluster(Some(&[])).await?;
        match form.op.as_str() {
            "create" => c.kafka.create_acl(&meta, &acl).await,
            "delete" => match c.kafka.delete_acl(&meta, &acl).await? {
                0 => Err("no such ACL".into()),
                _ => Ok(()),
            },
            other => Err(format!("\"{other}\" is not an action")),
        }
    }
    .await;
    match result {
        Ok(()) => redirect("/security"),
        Err(e) => with_status(
            security_page(&c, &csrf, Some(&format!("ACL not changed: {e}"))).await,
            StatusCode::BAD_REQUEST,
        ),
    }
}

// ---- Broker configs ----

pub(crate) async fn broker_configs(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
) -> Response {
    let csrf = c.csrf(&headers);
    broker_configs_page(&c, &csrf, None).await
}

async fn broker_configs_page(c: &Console, csrf: &Csrf, problem: Option<&str>) -> Response {
    let meta = match c.kafka.cluster(Some(&[])).await {
        Ok(m) => m,
        Err(e) => return error_page("Broker configs", csrf, StatusCode::BAD_GATEWAY, &e),
    };
    let ids: Vec<i32> = meta.nodes.keys().copied().collect();
    let configs = crate::kafka::join_all(
        ids.iter()
            .map(|id| async { (*id, c.kafka.configs(&meta, 4, &id.to_string()).await) }),
    )
    .await;
    let dynamic = |source: &str| source.starts_with("DYNAMIC_");
    let body = html! {
        @if let Some(p) = problem { p.error #configs-error { (p) } }
        p { "The configs set at run time (kafka-configs --entity-type brokers), cluster-wide (DYNAMIC_DEFAULT_BROKER_CONFIG) or for one broker (DYNAMIC_BROKER_CONFIG), over those of each broker's properties file." }
        @for (id, answer) in &configs {
            h2 { "Broker " (id) }
            @match answer {
                Err(e) => { p.error { (e) } }
                Ok(list) => {
                    @let set: Vec<_> = list.iter().filter(|cfg| dynamic(cfg.source)).collect();
                    @if set.is_empty() {
                        p { "No dynamic config." }
                    } @else {
                        table.broker-configs id={"broker-" (id)} {
                            thead { tr { th { "Name" } th { "Value" } th { "Source" } } }
                            tbody {
                                @for cfg in set {
                                    tr {
                                        td { (cfg.name) }
                                        td { @if cfg.sensitive { "(sensitive)" } @else { (cfg.value.clone().unwrap_or_else(|| "null".into())) } }
                                        td { (cfg.source) }
                                    }
                                }
                            }
                        }
                    }
                    details {
                        summary { "All " (list.len()) " configs" }
                        table {
                            tbody {
                                @for cfg in list {
                                    tr.set[dynamic(cfg.source)] {
                                        td { (cfg.name) }
                                        td { @if cfg.sensitive { "(sensitive)" } @else { (cfg.value.clone().unwrap_or_else(|| "null".into())) } }
                                        td { (cfg.source) @if cfg.read_only { " (read-only)" } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !c.read_only {
            form.action #set-broker-config method="post" action="/brokers/configs" {
                input type="hidden" name="csrf" value=(csrf.token);
                label { "Broker " select name="broker" {
                    option value="" { "all (cluster-wide default)" }
                    @for id in &ids { option value=(id) { (id) } }
                } }
                label { "Config " input name="config" required; }
                label { "Value (empty: delete the dynamic value) " input name="value"; }
                button type="submit" { "Set config" }
            }
        }
    };
    layout("Broker configs", csrf, body)
}

#[derive(Debug, Deserialize)]
pub(crate) struct BrokerConfigForm {
    csrf: String,
    #[serde(default)]
    broker: String,
    config: String,
    #[serde(default)]
    value: String,
}

pub(crate) async fn set_broker_config(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Form(form): Form<BrokerConfigForm>,
) -> Response {
    if let Some(r) = refusal(&c, &headers, &form.csrf) {
        return r;
    }
    let csrf = c.csrf(&headers);
    let result: Res<()> = async {
        let broker = form.broker.trim();
        if !broker.is_empty() && broker.parse::<i32>().is_err() {
            return Err(format!("{broker} is not a broker id"));
        }
        let meta = c.kafka.cluster(Some(&[])).await?;
        let value = form.value.trim();
        c.kafka
            .alter_config(
                &meta,
                4,
                broker,
                form.config.trim(),
                (!value.is_empty()).then_some(value),
            )
            .await
    }
    .await;
    match result {
        Ok(()) => redirect("/brokers/configs"),
        Err(e) => with_status(
            broker_configs_page(&c, &csrf, Some(&format!("Config not set: {e}"))).await,
            StatusCode::BAD_REQUEST,
        ),
    }
}
