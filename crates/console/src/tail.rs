//! Live tail: a partition's new records as they are appended, sent to the page over
//! server-sent events (`/assets/console.js` adds each as a row, its fields set as text). Each
//! event's id is the offset after its record, so a browser that reconnects (EventSource does
//! by itself) resumes where it was (`Last-Event-ID`) instead of at the end.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use maud::html;
use serde::Deserialize;

use crate::pages::{time_ms, urlencode};
use crate::records::{self, Show};
use crate::{layout, Console, MESSAGES_MAX};

/// How long a fetch of the tail waits on the leader for new records.
const TAIL_WAIT_MS: i32 = 1000;
/// Bytes one fetch of the tail reads at most.
const TAIL_FETCH_BYTES: i32 = 1 << 20;
/// Pause after a failed fetch before metadata is read again and the fetch retried.
const RETRY: Duration = Duration::from_secs(1);

#[derive(Debug, Deserialize)]
pub(crate) struct TailQuery {
    #[serde(default)]
    partition: i32,
    format: Option<String>,
}

pub(crate) async fn page(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<TailQuery>,
) -> Response {
    let csrf = c.csrf(&headers);
    let show = Show::parse(q.format.as_deref());
    let enc = urlencode(&name);
    let events = format!(
        "/topics/{enc}/tail/events?partition={}&format={}",
        q.partition,
        show.name()
    );
    let body = html! {
        p { a href={"/topics/" (enc) "/messages?partition=" (q.partition)} { "Messages" } " · partition " (q.partition) " · " (show.name()) }
        p #tail-status { "Connecting…" }
        table #tail data-events=(events) data-rows=(MESSAGES_MAX) {
            thead { tr { th.num { "Offset" } th { "Timestamp" } th { "Key" } th { "Headers" } th { "Value" } } }
            tbody {}
        }
        noscript { p.error { "The live tail needs JavaScript; the messages page works without it." } }
    };
    layout(&format!("Live tail of {name}"), &csrf, body)
}

/// The record events of one partition from its end (or from `Last-Event-ID`), for as long as
/// the browser listens.
pub(crate) async fn events(
    Extension(c): Extension<Arc<Console>>,
    headers: HeaderMap,
    Path(name): Path<String>,
    Query(q): Query<TailQuery>,
) -> Response {
    let show = Show::parse(q.format.as_deref());
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|o| *o >= 0);
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(MESSAGES_MAX);
    tokio::spawn(follow(c, name, q.partition, show, resume, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<Event, Infallible>(e), rx))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// Fetch the partition's new records and send each as an event, until the browser goes
/// (the channel closes).
async fn follow(
    c: Arc<Console>,
    topic: String,
    partition: i32,
    show: Show,
    resume: Option<i64>,
    tx: tokio::sync::mpsc::Sender<Event>,
) {
    let mut next = resume;
    let problem = |e: String| Event::default().event("problem").data(e);
    // Stops when the browser goes or the login it runs as ends.
    let ended = || {
        tx.is_closed()
            || c.alive
                .as_ref()
                .is_some_and(|a| !a.load(std::sync::atomic::Ordering::Relaxed))
    };
    loop {
        if ended() {
            return;
        }
        let meta = match c.kafka.cluster(Some(std::slice::from_ref(&topic))).await {
            Ok(m) => m,
            Err(e) => {
                if tx.send(problem(e)).await.is_err() {
                    return;
                }
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let from = match next {
            Some(n) => n,
            None => {
                let tp = vec![(topic.clone(), partition)];
                match c.kafka.list_offsets(&meta, &tp, -1).await.remove(&tp[0]) {
                    Some(Ok(end)) => end,
                    Some(Err(e)) => {
                        if tx.send(problem(e)).await.is_err() {
                            return;
                        }
                        tokio::time::sleep(RETRY).await;
                        continue;
                    }
                    None => continue,
                }
            }
        };
        next = Some(from);
        if tx
            .send(Event::default().event("live").data(from.to_string()))
            .await
            .is_err()
        {
            return;
        }
        // Fetch with the same metadata until a fetch fails (then read it again).
        let mut at = from;
        loop {
            let fetched = c
                .kafka
                .fetch_waiting(
                    &meta,
                    (&topic, partition),
                    at,
                    TAIL_FETCH_BYTES,
                    TAIL_WAIT_MS,
                )
                .await;
            let (data, _hw, start) = match fetched {
                Ok(f) => f,
                Err(e) => {
                    if tx.send(problem(e)).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(RETRY).await;
                    break;
                }
            };
            let bounds = records::Bounds {
                keep: MESSAGES_MAX,
                read: u64::MAX,
                matcher: None,
                until: None,
            };
            let decoded = tokio::task::block_in_place(|| records::decode(&data, at, &bounds));
            for r in &decoded.records {
                let event = Event::default()
                    .event("record")
                    .id((r.offset + 1).to_string())
                    .data(record_json(r, show));
                if tx.send(event).await.is_err() {
                    return;
                }
            }
            if let Some(e) = decoded.problem {
                let _ = tx.send(problem(e)).await;
                return;
            }
            match decoded.next {
                Some(n) if n > at => at = n,
                // Records deleted below the tail's place: go on from the log start.
                _ if start > at => at = start,
                _ => {}
            }
            next = Some(at);
            if ended() {
                return;
            }
        }
    }
}

/// A record as the page's script shows it: each field already rendered as the format asks
/// (the script sets them as text).
fn record_json(r: &records::Record, show: Show) -> String {
    let field = |f: &Option<records::Field>, show| f.as_ref().map(|f| records::render(f, show));
    serde_json::json!({
        "offset": r.offset,
        "timestamp": time_ms(r.timestamp),
        "key": field(&r.key, show),
        "headers": r.headers.iter().map(|(k, v)| (k, field(v, Show::Text))).collect::<Vec<_>>(),
        "value": field(&r.value, show),
    })
    .to_string()
}
