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

use crate::kafka::Kafka;
use crate::pages::{time_ms, urlencode};
use crate::records::{self, Show};
use crate::{layout, Console, MESSAGES_MAX};

/// How long the tail waits after a fetch that found nothing new.
const TAIL_POLL: Duration = Duration::from_millis(500);
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

/// A live tail's side of its events: the console it runs in, the client it reads with (the
/// login's, renewed when the login's password is checked again) and the browser's channel.
struct Follower {
    c: Arc<Console>,
    kafka: Kafka,
    tx: tokio::sync::mpsc::Sender<Event>,
}

impl Follower {
    /// Whether the tail goes on: the browser listens, the broker is not stopping, and the
    /// login it runs as (with logins) still holds, its password checked again when due as
    /// for a page.
    async fn going(&mut self) -> bool {
        if self.tx.is_closed() || *self.c.stop.borrow() {
            return false;
        }
        let (Some(logins), Some(token)) = (&self.c.logins, &self.c.session) else {
            return true;
        };
        match logins.current(token, self.kafka.bootstrap()).await {
            Some((_, kafka)) => {
                self.kafka = kafka;
                true
            }
            None => false,
        }
    }

    /// Send an event, waiting while the browser is slow to read, for as long as the tail
    /// goes on. False: it ended.
    async fn send(&mut self, event: Event) -> bool {
        loop {
            match tokio::time::timeout(RETRY, self.tx.clone().reserve_owned()).await {
                Ok(Ok(permit)) => {
                    permit.send(event);
                    return true;
                }
                Ok(Err(_)) => return false,
                Err(_) => {
                    if !self.going().await {
                        return false;
                    }
                }
            }
        }
    }

    /// Wait `d` unless the tail ends meanwhile (the broker stopping ends the wait).
    async fn pause(&mut self, d: Duration) -> bool {
        let mut stop = self.c.stop.clone();
        tokio::select! {
            _ = tokio::time::sleep(d) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
        self.going().await
    }
}

/// Fetch the partition's new records and send each as an event, until the browser goes, the
/// login ends or the broker stops.
async fn follow(
    c: Arc<Console>,
    topic: String,
    partition: i32,
    show: Show,
    resume: Option<i64>,
    tx: tokio::sync::mpsc::Sender<Event>,
) {
    let kafka = c.kafka.clone();
    let mut f = Follower { c, kafka, tx };
    let mut next = resume;
    let problem = |e: String| Event::default().event("problem").data(e);
    while f.going().await {
        let meta = match f.kafka.cluster(Some(std::slice::from_ref(&topic))).await {
            Ok(m) => m,
            Err(e) => {
                if !f.send(problem(e)).await || !f.pause(RETRY).await {
                    return;
                }
                continue;
            }
        };
        let from = match next {
            Some(n) => n,
            None => {
                let tp = vec![(topic.clone(), partition)];
                match f.kafka.list_offsets(&meta, &tp, -1).await.remove(&tp[0]) {
                    Some(Ok(end)) => end,
                    other => {
                        let e = match other {
                            Some(Err(e)) => e,
                            _ => "no answer".into(),
                        };
                        if !f.send(problem(e)).await || !f.pause(RETRY).await {
                            return;
                        }
                        continue;
                    }
                }
            }
        };
        next = Some(from);
        if !f
            .send(Event::default().event("live").data(from.to_string()))
            .await
        {
            return;
        }
        // Fetch with the same metadata until a fetch fails (then read it again). Each fetch
        // answers at once (no long poll: the client's connection to a broker carries one
        // request at a time, and the pages of the same login share it).
        let mut at = from;
        loop {
            let fetched = f
                .kafka
                .fetch(&meta, &topic, partition, at, TAIL_FETCH_BYTES)
                .await;
            let (data, _hw, start) = match fetched {
                Ok(fetched) => fetched,
                Err(e) => {
                    if !f.send(problem(e)).await || !f.pause(RETRY).await {
                        return;
                    }
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
                    .id(r.offset.saturating_add(1).to_string())
                    .data(record_json(r, show));
                if !f.send(event).await {
                    return;
                }
            }
            if let Some(e) = decoded.problem {
                let _ = f.send(problem(e)).await;
                return;
            }
            let before = at;
            match decoded.next {
                Some(n) if n > at => at = n,
                // Records deleted below the tail's place: go on from the log start.
                _ if start > at => at = start,
                _ => {}
            }
            next = Some(at);
            // Nothing new: wait a little before asking again.
            if at == before && !f.pause(TAIL_POLL).await {
                return;
            }
            if !f.going().await {
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
