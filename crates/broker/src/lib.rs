//! The broker: one module per Kafka API, on top of the log store and the metadata store.
//!
//! Layout:
//! - [`Broker`] (this file): start-up (open metadata, adopt partition directories found on
//!   disk, take ownership of every partition, open its log), request dispatch, shutdown.
//! - `registry`: topics as this broker serves them (metadata + effective config + open logs).
//! - `cluster`: cluster mode (etcd): lease, acquiring and releasing partitions, the
//!   controller's assignments, ownership confirmation before acks.
//! - `flusher`: group commit; one fsync round for every producer waiting on acks=all.
//! - `cache`: page-cache drop-behind schedule (`sluice.log.cache.bytes`).
//! - `sessions`: incremental fetch sessions (KIP-227).
//! - `groups`: the group coordinator driver (`__consumer_offsets`, timers, parked replies).
//! - `quotas`: client quotas (rates per user and client id, throttle times).
//! - `sasl`: SASL authentication of a connection (Kafka's `SaslServerAuthenticator`) and the
//!   SCRAM credentials it checks.
//! - `authz`: the authorizer (ACLs in force, Kafka's StandardAuthorizer semantics); what each
//!   API must be allowed is `apis/access.rs`, asked before every handler.
//! - `errors`: the only place store/meta errors become Kafka error codes.
//! - `apis/*`: one file per Kafka API.
//!
//! Does not own: sockets and framing (the server and wire crates), file formats (the store).
//!
//! A request is handled in two phases. [`Broker::handle`] runs the ordered part at once, on
//! the connection's task, in request order (e.g. the append of a produce request), and returns
//! a future for the rest (waiting for a group-commit fsync, long-polling a fetch). The server
//! pipelines those futures and writes their responses in request order.

mod admin;
mod apis;
mod authz;
mod cache;
mod client;
mod cluster;
mod dynamic;
mod errors;
mod features;
mod flusher;
mod group_configs;
mod groups;
mod lag;
mod load;
mod locality;
mod log_limit;
mod markers;
mod metrics;
mod oauth;
mod peers;
mod quotas;
mod readers;
mod recompress;
mod refusals;
mod registry;
mod sasl;
mod sessions;
mod shares;
pub use shares::ConnSessions;
#[cfg(test)]
mod testutil;
mod txns;
mod waiters;
mod wire;
mod writeback;

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::{FetchResponse, RequestKind, ResponseKind};
use sluice_config::BrokerConfig;
use sluice_meta::{EmbeddedStore, EtcdStore, Meta};
pub use sluice_store::FileSlice;
use sluice_store::{DeleteRetry, DeletionStats, LogManager, MetaProperties, Sharing};
use sluice_wire::Request;

pub use cache::{CacheDropTotals, CACHE_CHECK_INTERVAL, CACHE_MIN_STEP_BYTES};
pub use dynamic::ListenerCertificates;
pub use groups::OFFSETS_TOPIC;
pub use log_limit::LogLimiter;
pub use oauth::JwksFetcher;
pub use peers::{PeerClient, PeerReply, Probe, PEER_REQUEST_TIMEOUT};
pub use sasl::{Authenticator, Step as AuthStep, USER_PRINCIPAL};
pub use shares::SHARE_STATE_TOPIC;
pub use txns::TXN_TOPIC;
pub use writeback::WritebackTotals;

/// A `flush.messages=1` log just opened: fsync what recovery kept past the recovery point,
/// so its readers (who see only what is fsynced) see it.
fn sync_for_readers(log: &Arc<sluice_store::Log>) {
    if log.sync_bounded() && log.synced_offset() < log.log_end_offset() {
        if let Err(e) = log.flush() {
            tracing::warn!(tp = ?log.topic_partition(), "fsyncing a recovered log failed: {e}");
        }
    }
}

/// Kafka's `Topic.isInternal`: the topics Kafka's own coordinators keep.
pub(crate) fn is_internal_topic(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TXN_TOPIC || name == SHARE_STATE_TOPIC
}

/// How often logs are checked for a due `flush.ms` (Kafka's log.flush.scheduler.interval.ms).
pub const FLUSH_CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// What an API handler yields: the response body (or none, for acks=0 produce).
pub(crate) type Reply = Pin<Box<dyn Future<Output = Option<ResponseKind>> + Send>>;

/// The transaction coordinator's answers for the partitions of a transactional produce
/// request, by (topic, partition).
pub type Verdicts = HashMap<(String, i32), Verdict>;

/// The transaction coordinator's answer for one partition of a transactional produce
/// request ([`Broker::prepare`]), and the verification guard it must be appended with.
#[derive(Debug)]
pub struct Verdict {
    /// 0: the partition is in the producer's transaction; else why not.
    pub(crate) code: i16,
    /// The partition's log, as it was when the coordinator was asked.
    pub(crate) log: Arc<sluice_store::Log>,
    /// The guard taken on `log` before the coordinator was asked (None: the producer's
    /// transaction was open there then, at the batch's epoch).
    pub(crate) guard: Option<sluice_store::VerificationGuard>,
}

/// Work to finish before a request's ordered part ([`Broker::prepare`]).
pub type Gate = Pin<Box<dyn Future<Output = Verdicts> + Send>>;

/// What [`Broker::handle`] yields: the response to write (or none, for acks=0 produce).
/// One client connection as the broker sees it: where it comes from and the listener it
/// came in on (Metadata, FindCoordinator and DescribeCluster answer with that listener's
/// addresses).
#[derive(Clone, Debug)]
pub struct Connection {
    pub peer: IpAddr,
    /// The listener's name (`PLAINTEXT`, `INTERNAL`, ...).
    pub listener: Arc<str>,
    /// The principal SASL authenticated (`User:alice`); None: Kafka's `User:ANONYMOUS`.
    pub principal: Option<Arc<str>>,
    /// The idempotent batches this connection's produce answers refused as not written
    /// (`refusals::ProduceRefusals`).
    pub produce_refusals: Arc<refusals::ProduceRefusals>,
    /// The share sessions opened over this connection, closed with it (`shares::ConnSessions`).
    pub share_sessions: Arc<shares::ConnSessions>,
}

pub type Answer = Pin<Box<dyn Future<Output = Option<Response>> + Send>>;

/// A response, as the server is to write it.
#[derive(Debug)]
pub enum Response {
    /// A response body, encoded as it is.
    Body(ResponseKind),
    /// A Fetch response whose record data is still in the segment files, so the server can
    /// send it without copying it through memory. Each region pairs a partition's ordinal in
    /// `body` (counting `responses[*].partitions[*]` in order; strictly increasing) with the
    /// file region holding that partition's records (their `records` field is replaced when
    /// the frame is encoded).
    Fetch {
        body: FetchResponse,
        regions: Vec<(usize, FileSlice)>,
    },
    /// No response (acks=0 produce), but the connection is throttled for `throttle_ms`.
    Silent { throttle_ms: i32 },
}

impl Response {
    /// How long the connection must read nothing more after this response (client quotas:
    /// Kafka mutes a throttled client's channel for the throttle time it answers with).
    pub fn throttle_time_ms(&mut self) -> i32 {
        match self {
            Response::Body(body) => quotas::throttle_slot(body).map_or(0, |t| *t),
            Response::Fetch { body, .. } => body.throttle_time_ms,
            Response::Silent { throttle_ms } => *throttle_ms,
        }
    }
}

/// Shown with its source (`{:#}` in the binary): the variants name only where it failed.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    #[error("metadata store")]
    Meta(#[from] sluice_meta::MetaError),
    #[error("log store")]
    Store(#[from] sluice_store::StoreError),
    #[error("{0}")]
    Startup(String),
}

/// The broker: shared by every connection.
#[derive(Debug)]
pub struct Broker {
    /// The static configuration (server.properties); the one in force, with the dynamic
    /// broker configs, is [`Broker::effective_config`].
    config: BrokerConfig,
    dynamic: dynamic::DynamicConfig,
    /// The finalized feature levels (`features.rs`), taken up with the dynamic configs.
    features: parking_lot::RwLock<features::Finalized>,
    /// How the open-files limit is shared (partition files, connections, the partition
    /// budget topic creation is checked against).
    fds: sluice_store::fds::FdBudget,
    /// Partitions of topics being created (or partitions being added) whose logs are not
    /// open yet: counted against the partition budget with the open ones, so that concurrent
    /// CreateTopics cannot each pass the check and together exceed it.
    budget_reserved: parking_lot::Mutex<u64>,
    node_id: i32,
    cluster_id: String,
    meta: Arc<Meta>,
    /// Cluster mode (`sluice.cluster.etcd.endpoints`); None for a single broker.
    cluster: Option<Arc<cluster::Cluster>>,
    logs: LogManager,
    registry: registry::Registry,
    flusher: flusher::Flusher,
    /// Page-cache drop-behind (its task runs while the broker lives).
    cache: cache::DropBehind,
    /// Write-behind and produce backpressure (its task runs while the broker lives).
    writeback: Arc<writeback::WriteBehind>,
    /// Long-polling fetches, woken by appends to the logs they watch.
    fetch_waiters: waiters::FetchWaiters,
    /// KIP-392: partitions other brokers own, read here from the shared volume.
    pub(crate) readers: readers::Readers,
    /// Fetch reads that waited for the volume (on a blocking thread).
    cold_reads: apis::fetch::ColdReads,
    sessions: sessions::FetchSessions,
    groups: groups::Groups,
    shares: Arc<shares::Shares>,
    /// The transaction coordinator (`__transaction_state`).
    txns: txns::Txns,
    /// Client quotas and the rates measured against them.
    quotas: quotas::Quotas,
    /// SCRAM credentials (SASL/SCRAM logins check them).
    scram: sasl::ScramStore,
    /// The authorizer (`authorizer.class.name`) and the ACLs in force.
    authz: authz::Authz,
    /// The SASL settings of each SASL listener, by name.
    sasl_listeners: HashMap<String, Arc<sluice_config::SaslConfig>>,
    /// How each listener that enables OAUTHBEARER validates tokens, by name.
    oauth_listeners: HashMap<String, Arc<oauth::OAuthValidation>>,
    /// What the request path counts (`metrics.rs` exports it with the state gauges).
    metrics: Arc<sluice_metrics::Metrics>,
    /// Failed logs whose re-open failed: when to try again, and the wait after that.
    reopen_retry: parking_lot::Mutex<HashMap<sluice_store::TopicPartition, (Instant, Duration)>>,
    /// When the broker last said that a log dir's volume is not there (said once every
    /// [`VOLUME_MISSING_LOG_EVERY`] while it lasts).
    volume_missing_logged: parking_lot::Mutex<Option<Instant>>,
    /// Carries requests to other brokers (set by the server at start).
    peers: std::sync::OnceLock<Arc<dyn PeerClient>>,
    /// A second client to the peers, for the read replicas' long polls (which would hold
    /// the one connection `peers` has to each peer for up to `readers::POLL_WAIT`).
    reader_peers: std::sync::OnceLock<Arc<dyn PeerClient>>,
    /// The TLS listeners' certificates, which a keystore change at run time replaces (set by
    /// the server at start; `dynamic.rs`).
    certs: std::sync::OnceLock<Arc<dyn ListenerCertificates>>,
    /// Consumer lag of partitions other brokers own, as the last scrape computed it.
    remote_lag: lag::RemoteLagCache,
    /// This broker, for work started from threads that hold only a reference (the cluster
    /// thread loading `__transaction_state`), and the runtime such work runs on.
    this: std::sync::OnceLock<std::sync::Weak<Broker>>,
    runtime: tokio::runtime::Handle,
}

/// Longest wait between two attempts to re-open a failed log (storage still refuses).
const REOPEN_RETRY_MAX: Duration = Duration::from_secs(30);
/// Longest a produce request waits for partitions assigned here to be acquired
/// ([`Broker::prepare`]); then it is answered as it would have been at once.
const ACQUISITION_WAIT_MAX: Duration = Duration::from_secs(5);
/// How often the broker repeats that a log dir's volume is not there.
const VOLUME_MISSING_LOG_EVERY: Duration = Duration::from_secs(10);

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Connect to etcd (cluster mode). A broker started while etcd does not answer (it is
/// starting too, or briefly unreachable) keeps trying, as a Kafka broker waits for its
/// controller quorum, until `initial.broker.registration.timeout.ms`; then it exits. One
/// that etcd refuses (an untrusted certificate, a wrong password: `MetaError::EtcdRefused`)
/// exits at once: waiting would not change the answer.
fn open_etcd(
    c: &sluice_config::ClusterSettings,
    node_id: i32,
    fresh_id: impl FnOnce() -> String,
) -> Result<EtcdStore, BrokerError> {
    let deadline = Instant::now() + Duration::from_millis(c.registration_timeout_ms);
    let link = sluice_meta::EtcdLink {
        endpoints: c.etcd_endpoints.clone(),
        tls: c.etcd_tls.clone(),
        login: c.etcd_login.clone(),
        timeout: Duration::from_millis(c.etcd_timeout_ms),
    };
    let mut fresh = Some(fresh_id);
    let mut id: Option<String> = None;
    let mut wait = Duration::from_millis(100);
    loop {
        let attempt = EtcdStore::open(&link, &c.etcd_prefix, node_id, || {
            id.get_or_insert_with(|| fresh.take().map_or_else(String::new, |f| f()))
                .clone()
        });
        match attempt {
            Ok(store) => return Ok(store),
            Err(sluice_meta::MetaError::Etcd(e)) if Instant::now() + wait < deadline => {
                tracing::warn!(
                    "etcd does not answer yet ({e}); trying again in {} ms (initial.broker.registration.timeout.ms)",
                    wait.as_millis()
                );
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

impl Broker {
    /// Open the broker's stores and every partition. Must run inside a tokio runtime (it
    /// starts the group-commit and page-cache drop-behind tasks).
    pub fn open(config: BrokerConfig) -> Result<Arc<Broker>, BrokerError> {
        // OAUTHBEARER key sets first: one that does not load stops startup before any
        // partition opens.
        let oauth_listeners = oauth::listeners(&config)?;
        let fds = sluice_store::fds::FdBudget::new(
            sluice_store::fds::open_files_limit(),
            config.log_open_files_max,
            u64::from(config.max_connections),
            config.broker_partitions_max,
        );
        // Before any partition opens: its files are opened under the cap.
        sluice_store::fds::set_partition_files_max(fds.files);
        let dirs = config.log_dirs.clone();
        let first = dirs
            .first()
            .cloned()
            .ok_or_else(|| BrokerError::Startup("log.dirs is empty".into()))?;
        let configured = config.cluster_id.clone();
        let node_id = config.node_id;
        let fresh_id = {
            let dirs = dirs.clone();
            move || {
                configured
                    .or_else(|| sluice_store::existing_cluster_id(&dirs))
                    .unwrap_or_else(sluice_meta::new_cluster_id)
            }
        };
        let (meta, sharing) = match &config.cluster {
            Some(c) => (
                Meta::Etcd(open_etcd(c, node_id, fresh_id)?),
                Sharing::Shared,
            ),
            None => (
                Meta::Embedded {
                    store: EmbeddedStore::open(&first.join("__sluice_meta"), fresh_id)?,
                    node_id,
                },
                Sharing::Exclusive,
            ),
        };
        let meta = Arc::new(meta);
        let cluster_id = meta.cluster_id();
        let logs = LogManager::open_sharing(
            dirs,
            MetaProperties {
                node_id,
                cluster_id: cluster_id.clone(),
            },
            DeleteRetry {
                initial_ms: config.delete_retry_initial_ms,
                max_ms: config.delete_retry_max_ms,
            },
            sharing,
        )?;
        let mut volumes = locality::Volumes::default();
        if let Some(store) = meta.etcd() {
            // Before anything is imported or acquired: these dirs are the cluster's volume
            // (not a bare mount point, where the open above just wrote a fresh
            // meta.properties).
            let ids = logs.directory_ids()?;
            match ids.iter().cloned().collect::<Option<Vec<String>>>() {
                Some(ids) => store.check_volume(&ids)?,
                None => tracing::warn!(
                    "a log dir's meta.properties has no directory.id: the shared volume is not checked against the cluster's"
                ),
            }
            volumes = locality::Volumes::of(&config, &ids);
            if volumes.declared() {
                for d in volumes.dirs() {
                    tracing::info!(
                        log_dir = %d.path.display(),
                        volume = ?d.volume,
                        storage_node = d.node.as_deref().unwrap_or("-"),
                        direct = d.direct,
                        "log dir's storage node"
                    );
                }
            }
            logs.prefer_dirs(volumes.direct_dirs());
            registry::import_into_cluster(store, &first, &logs)?;
        }
        let registry = registry::Registry::default();
        let cluster = config
            .cluster
            .clone()
            .map(|c| Arc::new(cluster::Cluster::new(c, volumes)));
        let effective = dynamic::effective(&config, &meta.broker_configs());
        let features = features::Finalized::of(&config, &meta.broker_configs());
        sluice_store::recovery::set_follow_policy(
            effective.log_recovery_point_bytes,
            effective.log_recovery_point_interval_ms,
        );
        if cluster.is_none() {
            registry::adopt_discovered(&meta, &logs)?;
            let threads = effective.recovery_threads_per_data_dir * effective.log_dirs.len();
            registry.open_topics(&effective, &logs, meta.acquire_all()?, threads)?;
            // What recovery found past the recovery point becomes readable once fsynced.
            for log in logs.logs() {
                sync_for_readers(&log);
            }
        }
        tracing::info!(
            node_id,
            cluster_id = %cluster_id,
            topics = registry.len(),
            cluster = cluster.is_some(),
            "broker opened its log directories"
        );
        // Cluster mode: each flush round ends with the ownership check, which publishes the
        // round's data to readers; fetches waiting on those logs are woken then.
        let myself: Arc<std::sync::OnceLock<std::sync::Weak<Broker>>> = Arc::default();
        let listener_names: Vec<&str> = config.listeners.iter().map(|l| l.name.as_str()).collect();
        let metrics = metrics::new_metrics(&listener_names);
        let flusher = match (&cluster, meta.etcd()) {
            (Some(c), Some(_)) => {
                let (c, meta, myself) = (c.clone(), meta.clone(), myself.clone());
                flusher::Flusher::start(
                    Some(Arc::new(move |logs: &[Arc<sluice_store::Log>]| {
                        let Some(store) = meta.etcd() else {
                            return vec![Ok(()); logs.len()];
                        };
                        let outcomes = c.confirm(store, logs);
                        if let Some(b) = myself.get().and_then(std::sync::Weak::upgrade) {
                            for (log, ok) in logs.iter().zip(&outcomes) {
                                if ok.is_ok() {
                                    b.fetch_waiters.wake(log);
                                }
                            }
                        }
                        outcomes
                    })),
                    None,
                    metrics.clone(),
                )
            }
            _ => {
                // One broker: a `flush.messages=1` log's readers see what a round fsynced.
                let myself = myself.clone();
                flusher::Flusher::start(
                    None,
                    Some(Arc::new(move |logs: &[Arc<sluice_store::Log>]| {
                        if let Some(b) = myself.get().and_then(std::sync::Weak::upgrade) {
                            for log in logs {
                                b.fetch_waiters.wake(log);
                            }
                        }
                    })),
                    metrics.clone(),
                )
            }
        };
        let groups = groups::Groups::new(&config);
        let broker = Arc::new(Broker {
            fds,
            budget_reserved: parking_lot::Mutex::new(0),
            node_id,
            cluster_id,
            meta,
            logs,
            registry,
            cluster,
            flusher,
            cache: cache::DropBehind::new(&config),
            writeback: Arc::new(writeback::WriteBehind::new(&config)),
            fetch_waiters: waiters::FetchWaiters::default(),
            readers: readers::Readers::default(),
            cold_reads: apis::fetch::ColdReads::default(),
            sessions: sessions::FetchSessions::default(),
            groups,
            shares: Arc::new(shares::Shares::new(&config)),
            txns: txns::Txns::new(&config, features.level(features::TRANSACTION_VERSION)),
            features: parking_lot::RwLock::new(features),
            quotas: quotas::Quotas::new(&config.quotas),
            scram: sasl::ScramStore::default(),
            authz: authz::Authz::new(config.authorizer.clone()),
            sasl_listeners: config
                .listener_sasl
                .iter()
                .map(|(name, c)| (name.clone(), Arc::new(c.clone())))
                .collect(),
            oauth_listeners,
            metrics,
            reopen_retry: parking_lot::Mutex::new(HashMap::new()),
            volume_missing_logged: parking_lot::Mutex::new(None),
            peers: std::sync::OnceLock::new(),
            reader_peers: std::sync::OnceLock::new(),
            certs: std::sync::OnceLock::new(),
            remote_lag: parking_lot::Mutex::new(None),
            this: std::sync::OnceLock::new(),
            runtime: tokio::runtime::Handle::current(),
            config,
            dynamic: dynamic::DynamicConfig::new(effective),
        });
        // Groups of an existing __consumer_offsets are loaded now (this broker owns it); in a
        // cluster, as their partitions are acquired.
        if broker.cluster.is_none() && broker.registry.get(OFFSETS_TOPIC).is_some() {
            broker.ensure_offsets_topic();
        }
        broker.quotas.load(&broker.meta)?;
        broker.scram.load(&broker.meta)?;
        broker.authz.load(&broker.meta)?;
        let _ = myself.set(Arc::downgrade(&broker));
        let _ = broker.this.set(Arc::downgrade(&broker));
        // In a cluster every write to a partition's files (appends of every origin, rolls,
        // snapshots, retention, DeleteRecords, the cleaner's swaps) asks the cluster, under
        // the log's writer lock, whether this broker still may write it (`cluster::Gate`).
        if let Some(cluster) = &broker.cluster {
            broker.logs.set_write_gate(Arc::new(cluster::Gate(
                cluster.clone(),
                Arc::downgrade(&broker),
            )));
        }
        broker
            .logs
            .start_cleaner(dynamic::cleaner_config(&broker.effective_config()));
        cluster::Cluster::start(&broker)?;
        Broker::start_group_timers(&broker);
        Broker::start_share_timers(&broker);
        Broker::start_txn_timers(&broker);
        // Transactions of an existing __transaction_state are loaded now (this broker owns
        // it), and their markers resumed; in a cluster, as its partitions are acquired.
        if broker.cluster.is_none() && broker.registry.get(TXN_TOPIC).is_some() {
            broker.ensure_txn_topic();
        }
        // Share state likewise.
        if broker.cluster.is_none() && broker.registry.get(SHARE_STATE_TOPIC).is_some() {
            broker.ensure_share_state_topic();
        }
        cache::start(&broker);
        writeback::start(&broker);
        Ok(broker)
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    /// How the open-files limit is shared ([`sluice_store::fds::FdBudget`]).
    pub fn fd_budget(&self) -> sluice_store::fds::FdBudget {
        self.fds
    }

    /// The cluster's records as this broker last read them from etcd; None on one broker.
    pub fn cluster_view(&self) -> Option<Arc<sluice_meta::ClusterView>> {
        Some(self.meta.etcd()?.view())
    }

    /// Partitions open on this broker.
    pub fn partition_count(&self) -> usize {
        self.logs.logs().len()
    }

    /// Handle one request from a client on connection `conn`: the ordered part runs now,
    /// the returned future does the rest.
    pub fn handle(self: &Arc<Self>, request: Request, conn: &Connection) -> Answer {
        self.handle_prepared(request, conn, Verdicts::new())
    }

    /// What must be done before `request`'s ordered part may run, if anything: a
    /// transactional produce whose partitions the transaction coordinator must first verify
    /// (or, transaction version 2, add). The caller waits for it, reading nothing more from
    /// the connection meanwhile (the order of appends is kept), then calls
    /// [`Broker::handle_prepared`] with its answer.
    pub fn prepare(self: &Arc<Self>, request: &Request, conn: &Connection) -> Option<Gate> {
        match &request.body {
            RequestKind::Produce(r) => {
                // A partition the producer may not write is never added to its transaction
                // (the request is refused whole, or the partition left out, by `access.rs`).
                let txn = if self.authz.enabled() && r.transactional_id.is_some() {
                    let client = client::Client::new(&request.header, conn);
                    apis::access::produce_allowed(self, r, &client).and_then(|allowed| {
                        apis::produce::prepare(self, r, request.version(), Some(&allowed))
                    })
                } else {
                    apis::produce::prepare(self, r, request.version(), None)
                };
                let timeout = Duration::from_millis(u64::try_from(r.timeout_ms).unwrap_or(0));
                let pending = apis::produce::acquisitions_pending(self, r, request.version());
                if pending.iter().any(|tp| self.awaiting_acquisition(tp)) {
                    // Partitions assigned here and being acquired: the request waits while any
                    // of its partitions assigned here and not served is awaited (one backing
                    // off now may be acquired meanwhile), at most the request's timeout and
                    // ACQUISITION_WAIT_MAX, reading nothing more from the connection, then is
                    // handled as usual (`acquisitions_pending`). No transactional id: `txn`
                    // is None.
                    let broker = self.clone();
                    let room = self.writeback.admit(timeout);
                    let wait = timeout.min(ACQUISITION_WAIT_MAX);
                    // Both waits together stay within the bound.
                    let until = Instant::now() + wait;
                    return Some(Box::pin(async move {
                        if let Some(room) = room {
                            room.await;
                        }
                        while Instant::now() < until
                            && pending.iter().any(|tp| broker.awaiting_acquisition(tp))
                        {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Verdicts::new()
                    }));
                }
                match (self.writeback.admit(timeout), txn) {
                    (None, txn) => txn,
                    (Some(room), None) => Some(Box::pin(async move {
                        room.await;
                        Verdicts::new()
                    })),
                    (Some(room), Some(txn)) => Some(Box::pin(async move {
                        room.await;
                        txn.await
                    })),
                }
            }
            _ => None,
        }
    }

    /// [`Broker::handle`], with the answer of [`Broker::prepare`].
    pub fn handle_prepared(
        self: &Arc<Self>,
        request: Request,
        conn: &Connection,
        verdicts: Verdicts,
    ) -> Answer {
        if !self.quotas.enabled() {
            return self.answer(request, conn, verdicts);
        }
        // Client quotas: the time worked on the request and, for produce, its size count
        // against the client's quotas once it is answered (as Kafka records them).
        let client = quotas::Who::new(&request.header, conn);
        let api = request.api_key;
        let size_bytes = request.size_bytes;
        let acks_zero = matches!(&request.body, RequestKind::Produce(r) if r.acks == 0);
        let started = Instant::now();
        let inner = self.answer(request, conn, verdicts);
        let busy = quotas::Busy {
            inner,
            busy: started.elapsed(),
        };
        let broker = self.clone();
        Box::pin(async move {
            let (response, busy) = busy.await;
            broker.throttle(api, &client, size_bytes, acks_zero, busy, response)
        })
    }

    fn answer(self: &Arc<Self>, request: Request, conn: &Connection, verdicts: Verdicts) -> Answer {
        let version = request.version();
        if let RequestKind::Fetch(r) = request.body {
            let client = client::Client::new(&request.header, conn);
            let (r, denied) = apis::access::fetch(self, r, &client);
            let who = quotas::Who::new(&request.header, conn);
            let answer = apis::fetch::handle(self, r, version, who, conn.listener.clone());
            if denied.is_empty() {
                return answer;
            }
            // Appended after the served partitions: the ordinals of the file regions stay.
            return Box::pin(async move {
                let mut response = answer.await;
                match &mut response {
                    Some(Response::Fetch { body, .. })
                    | Some(Response::Body(ResponseKind::Fetch(body))) => {
                        body.responses.extend(denied)
                    }
                    _ => {}
                }
                response
            });
        }
        let reply = self.dispatch(request, conn, verdicts);
        Box::pin(async move { reply.await.map(Response::Body) })
    }

    /// Record a finished request against the client's quotas and set the throttle time of
    /// its answer (Kafka's `KafkaApis`: the larger of the byte-rate and the request-time
    /// throttle). A fetch throttled for request time is answered empty and its bytes are
    /// taken back, as Kafka does (the byte-rate check is the fetch handler's).
    fn throttle(
        &self,
        api: kafka_protocol::messages::ApiKey,
        client: &quotas::Who,
        size_bytes: usize,
        acks_zero: bool,
        busy: Duration,
        response: Option<Response>,
    ) -> Option<Response> {
        use kafka_protocol::messages::ApiKey;
        let now = now_ms();
        let bytes_throttle = if api == ApiKey::Produce {
            self.quotas
                .record(quotas::QuotaKind::Produce, client, size_bytes as f64, now)
        } else {
            0
        };
        // Percent of one thread, times seconds: the rate is a percentage.
        let percent_seconds = busy.as_nanos() as f64 * 100.0 / 1e9;
        let exempt = acks_zero || api == ApiKey::WriteTxnMarkers;
        let request_throttle = if exempt {
            0
        } else {
            self.quotas
                .record(quotas::QuotaKind::Request, client, percent_seconds, now)
        };
        let throttle = bytes_throttle.max(request_throttle);
        match response {
            None if throttle > 0 => Some(Response::Silent {
                throttle_ms: throttle,
            }),
            None => None,
            Some(Response::Body(mut body)) => {
                if let Some(slot) = quotas::throttle_slot(&mut body) {
                    *slot = (*slot).max(throttle);
                }
                Some(Response::Body(body))
            }
            Some(Response::Fetch {
                mut body,
                mut regions,
            }) => {
                if request_throttle > body.throttle_time_ms && !body.responses.is_empty() {
                    let bytes = quotas::fetch_response_bytes(&body, &regions);
                    self.quotas
                        .unrecord(quotas::QuotaKind::Fetch, client, bytes as f64, now);
                    body.responses.clear();
                    regions.clear();
                }
                body.throttle_time_ms = body.throttle_time_ms.max(throttle);
                Some(Response::Fetch { body, regions })
            }
            Some(silent @ Response::Silent { .. }) => Some(silent),
        }
    }

    fn dispatch(
        self: &Arc<Self>,
        request: Request,
        conn: &Connection,
        verdicts: Verdicts,
    ) -> Reply {
        let version = request.version();
        let header = request.header;
        let client = client::Client::new(&header, conn);
        // Topic ids become names first (OffsetCommit and OffsetFetch v10); their patch gives
        // the answer, served or refused, the ids back, after the access patch.
        let (body, ids) = apis::topic_ids::resolve(self, request.body, version);
        let (body, fix) = match apis::access::admit(self, body, version, &client) {
            apis::access::Admission::Refuse(mut answer) => {
                if let Some(ids) = ids {
                    ids.apply(&mut answer, true);
                }
                return ready(Some(answer));
            }
            apis::access::Admission::Serve(body, fix) => (body, fix),
        };
        let reply = self.dispatch_admitted(body, version, &header, &client, verdicts);
        if fix.is_none() && ids.is_none() {
            return reply;
        }
        Box::pin(async move {
            let mut answer = reply.await;
            if let Some(answer) = answer.as_mut() {
                if let Some(fix) = fix {
                    fix(answer);
                }
                if let Some(ids) = ids {
                    ids.apply(answer, false);
                }
            }
            answer
        })
    }

    /// Hand a request that [`apis::access::admit`] let through to its API's handler: each
    /// family of APIs in turn takes the requests it handles and gives back the others
    /// ([`Broker::dispatch_partitions`], [`Broker::dispatch_admin`],
    /// [`Broker::dispatch_groups`], [`Broker::dispatch_txns`], [`Broker::dispatch_security`]).
    /// Fetch never comes here ([`Broker::answer`]).
    fn dispatch_admitted(
        self: &Arc<Self>,
        body: RequestKind,
        version: i16,
        header: &kafka_protocol::messages::RequestHeader,
        client: &client::Client,
        verdicts: Verdicts,
    ) -> Reply {
        let unhandled = self
            .dispatch_partitions(body, version, client, verdicts)
            .or_else(|body| self.dispatch_admin(body, version, client))
            .or_else(|body| self.dispatch_groups(body, version, client))
            .or_else(|body| self.dispatch_txns(body, version))
            .or_else(|body| self.dispatch_security(body, version));
        match unhandled {
            Ok(reply) => reply,
            Err(_) => {
                // The wire layer only decodes APIs listed in SUPPORTED_APIS, all handled by a
                // family; reaching this is a bug, answered by closing nothing and replying
                // nothing.
                tracing::error!(
                    api_key = header.request_api_key,
                    "no handler for a decoded request"
                );
                ready(None)
            }
        }
    }

    /// The APIs that read or write partitions' data and logs (Fetch aside): ApiVersions and
    /// Metadata too, the first requests of every client. A request of another family is given
    /// back.
    fn dispatch_partitions(
        self: &Arc<Self>,
        body: RequestKind,
        version: i16,
        client: &client::Client,
        verdicts: Verdicts,
    ) -> Result<Reply, RequestKind> {
        Ok(match body {
            RequestKind::ApiVersions(r) => ready(apis::api_versions::handle(self, r, version)),
            RequestKind::Metadata(r) => {
                ready(apis::metadata::handle(self, r, version, &client.listener))
            }
            RequestKind::Produce(r) => apis::produce::handle(self, r, version, &verdicts, client),
            RequestKind::ListOffsets(r) => ready(apis::list_offsets::handle(self, r, version)),
            RequestKind::DescribeLogDirs(r) => {
                ready(apis::describe_log_dirs::handle(self, r, version))
            }
            RequestKind::DeleteRecords(r) => apis::delete_records::handle(self, r, version),
            RequestKind::AlterReplicaLogDirs(r) => {
                ready(apis::alter_replica_log_dirs::handle(self, r, version))
            }
            RequestKind::OffsetForLeaderEpoch(r) => {
                ready(apis::offset_for_leader_epoch::handle(self, r, version))
            }
            RequestKind::DescribeProducers(r) => {
                ready(apis::describe_producers::handle(self, r, version))
            }
            other => return Err(other),
        })
    }

    /// The APIs that administer topics, configs, the cluster and partition ownership; those
    /// that change metadata run off the runtime ([`Broker::off_runtime`]: they wait for etcd
    /// or write files). A request of another family is given back.
    fn dispatch_admin(
        self: &Arc<Self>,
        body: RequestKind,
        version: i16,
        client: &client::Client,
    ) -> Result<Reply, RequestKind> {
        Ok(match body {
            RequestKind::CreateTopics(r) => {
                self.off_runtime(move |b| apis::create_topics::handle(b, r, version))
            }
            RequestKind::DeleteTopics(r) => {
                self.off_runtime(move |b| apis::delete_topics::handle(b, r, version))
            }
            RequestKind::CreatePartitions(r) => {
                self.off_runtime(move |b| apis::create_partitions::handle(b, r, version))
            }
            RequestKind::DescribeConfigs(r) => ready(apis::configs::describe(self, r, version)),
            RequestKind::AlterConfigs(r) => {
                self.off_runtime(move |b| apis::configs::alter(b, r, version))
            }
            RequestKind::IncrementalAlterConfigs(r) => {
                self.off_runtime(move |b| apis::configs::incremental_alter(b, r, version))
            }
            RequestKind::DescribeCluster(r) => ready(apis::describe_cluster::handle(
                self,
                r,
                version,
                &client.listener,
            )),
            RequestKind::AlterPartitionReassignments(r) => self
                .off_runtime(move |b| apis::alter_partition_reassignments::handle(b, r, version)),
            RequestKind::ListPartitionReassignments(r) => {
                ready(apis::list_partition_reassignments::handle(self, r, version))
            }
            RequestKind::ElectLeaders(r) => {
                self.off_runtime(move |b| apis::elect_leaders::handle(b, r, version))
            }
            RequestKind::DescribeTopicPartitions(r) => {
                ready(apis::describe_topic_partitions::handle(self, r, version))
            }
            RequestKind::ListConfigResources(r) => ready(apis::configs::list_resources(
                self,
                r,
                version,
                &client.listener,
            )),
            RequestKind::UpdateFeatures(r) => {
                self.off_runtime(move |b| features::update(b, r, version))
            }
            RequestKind::UnregisterBroker(r) => {
                self.off_runtime(move |b| apis::unregister_broker::handle(b, r, version))
            }
            other => return Err(other),
        })
    }

    /// The consumer-group APIs (classic and KIP-848) and FindCoordinator. A request of
    /// another family is given back.
    fn dispatch_groups(
        self: &Arc<Self>,
        body: RequestKind,
        version: i16,
        client: &client::Client,
    ) -> Result<Reply, RequestKind> {
        Ok(match body {
            RequestKind::FindCoordinator(r) => ready(apis::find_coordinator::handle(
                self,
                r,
                version,
                &client.listener,
            )),
            RequestKind::JoinGroup(r) => apis::join_group::handle(self, r, version, client),
            RequestKind::SyncGroup(r) => apis::sync_group::handle(self, r, version),
            RequestKind::Heartbeat(r) => ready(apis::heartbeat::handle(self, r, version)),
            RequestKind::LeaveGroup(r) => apis::leave_group::handle(self, r, version),
            RequestKind::OffsetCommit(r) => apis::offset_commit::handle(self, r, version),
            RequestKind::OffsetFetch(r) => ready(apis::offset_fetch::handle(self, r, version)),
            RequestKind::DescribeGroups(r) => {
                ready(apis::describe_groups::handle(self, r, version))
            }
            RequestKind::ListGroups(r) => ready(apis::list_groups::handle(self, r, version)),
            RequestKind::DeleteGroups(r) => apis::delete_groups::handle(self, r, version),
            RequestKind::OffsetDelete(r) => apis::offset_delete::handle(self, r, version),
            RequestKind::ConsumerGroupHeartbeat(r) => {
                apis::consumer_group_heartbeat::handle(self, r, version, client)
            }
            RequestKind::ConsumerGroupDescribe(r) => {
                ready(apis::consumer_group_describe::handle(self, r, version))
            }
            RequestKind::ShareGroupHeartbeat(r) => ready(apis::share::heartbeat(self, r, client)),
            RequestKind::ShareGroupDescribe(r) => ready(apis::share::describe(self, r)),
            RequestKind::ShareFetch(r) => apis::share::fetch(self, r, version, client),
            RequestKind::ShareAcknowledge(r) => apis::share::acknowledge(self, r, version),
            RequestKind::ReadShareGroupState(r) => apis::share_state::read(self, r),
            RequestKind::WriteShareGroupState(r) => apis::share_state::write(self, r),
            RequestKind::ReadShareGroupStateSummary(r) => apis::share_state::summary(self, r),
            RequestKind::DescribeShareGroupOffsets(r) => apis::share::describe_offsets(self, r),
            RequestKind::AlterShareGroupOffsets(r) => apis::share::alter_offsets(self, r),
            RequestKind::DeleteShareGroupOffsets(r) => apis::share::delete_offsets(self, r),
            RequestKind::InitializeShareGroupState(r) => apis::share_state::initialize(self, r),
            RequestKind::DeleteShareGroupState(r) => apis::share_state::delete(self, r),
            other => return Err(other),
        })
    }

    /// The producer-id and transaction APIs: InitProducerId with a transactional id goes to
    /// the transaction coordinator, without one it allocates off the runtime. A request of
    /// another family is given back.
    fn dispatch_txns(
        self: &Arc<Self>,
        body: RequestKind,
        version: i16,
    ) -> Result<Reply, RequestKind> {
        Ok(match body {
            RequestKind::InitProducerId(r) if r.transactional_id.is_some() => {
                apis::txn::init_producer_id(self, r, version)
            }
            RequestKind::InitProducerId(r) => {
                self.off_runtime(move |b| apis::init_producer_id::handle(b, r, version))
            }
            RequestKind::AddPartitionsToTxn(r) => apis::txn::add_partitions(self, r, version),
            RequestKind::AddOffsetsToTxn(r) => apis::txn::add_offsets(self, r, version),
            RequestKind::EndTxn(r) => apis::txn::end_txn(self, r, version),
            RequestKind::TxnOffsetCommit(r) => apis::txn_offset_commit::handle(self, r, version),
            RequestKind::WriteTxnMarkers(r) => apis::write_txn_markers::handle(self, r, version),
            RequestKind::DescribeTransactions(r) => ready(apis::txn::describe(self, r, version)),
            RequestKind::ListTransactions(r) => ready(apis::txn::list(self, r, version)),
            other => return Err(other),
        })
    }

    /// The APIs of quotas, credentials, ACLs and delegation tokens, and the SASL requests
    /// that reach the broker after authentication. A request of another family is given
    /// back.
    fn dispatch_security(
        self: &Arc<Self>,
        body: RequestKind,
        version: i16,
    ) -> Result<Reply, RequestKind> {
        Ok(match body {
            RequestKind::DescribeClientQuotas(r) => {
                ready(apis::client_quotas::describe(self, r, version))
            }
            RequestKind::AlterClientQuotas(r) => {
                self.off_runtime(move |b| apis::client_quotas::alter(b, r, version))
            }
            RequestKind::DescribeUserScramCredentials(r) => {
                ready(apis::scram_credentials::describe(self, r))
            }
            RequestKind::AlterUserScramCredentials(r) => {
                self.off_runtime(move |b| apis::scram_credentials::alter(b, r))
            }
            // A SASL request reaching here comes after authentication, or on a listener without
            // SASL (the server's authenticator takes them before): Kafka's `KafkaApis` answer.
            RequestKind::SaslHandshake(_) => {
                ready(apis::scram_credentials::sasl_handshake_refused())
            }
            RequestKind::SaslAuthenticate(_) => {
                ready(apis::scram_credentials::sasl_authenticate_refused())
            }
            RequestKind::DescribeAcls(r) => ready(apis::acls::describe(self, r, version)),
            RequestKind::CreateAcls(r) => {
                self.off_runtime(move |b| apis::acls::create(b, r, version))
            }
            RequestKind::DeleteAcls(r) => {
                self.off_runtime(move |b| apis::acls::delete(b, r, version))
            }
            RequestKind::CreateDelegationToken(_) => ready(apis::delegation_tokens::create()),
            RequestKind::RenewDelegationToken(_) => ready(apis::delegation_tokens::renew()),
            RequestKind::ExpireDelegationToken(_) => ready(apis::delegation_tokens::expire()),
            RequestKind::DescribeDelegationToken(_) => ready(apis::delegation_tokens::describe()),
            other => return Err(other),
        })
    }

    /// This broker as an `Arc` (None while it is being dropped).
    pub(crate) fn arc(&self) -> Option<Arc<Broker>> {
        self.this.get().and_then(std::sync::Weak::upgrade)
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    /// Install the client that carries requests to other brokers (the server's).
    pub fn set_peers(&self, peers: Arc<dyn PeerClient>) {
        let _ = self.peers.set(peers);
    }

    /// Install a second client to the other brokers, with connections of its own, for the
    /// read replicas' long polls to the owners (`readers.rs`).
    pub fn set_reader_peers(&self, peers: Arc<dyn PeerClient>) {
        let _ = self.reader_peers.set(peers);
    }

    /// A read replica's poll to `node`, the owner, on the reader connections: within
    /// [`PEER_REQUEST_TIMEOUT`] (the owner holds it at most `readers::POLL_WAIT`).
    pub(crate) async fn call_reader_peer(
        &self,
        node: i32,
        body: RequestKind,
    ) -> Result<ResponseKind, String> {
        let Some(peers) = self.reader_peers.get().cloned() else {
            return Err("no client for read replicas' polls".into());
        };
        let (api, version) = readers::poll_call();
        self.call_with(peers, node, api, version, body).await
    }

    /// The topic id, owner and leader epoch the cluster's records name for a partition now
    /// (the owner may be away: its partitions are being failed over). None on a single
    /// broker, or for a partition the records do not name.
    pub(crate) fn owner_of(&self, topic: &str, partition: i32) -> Option<(uuid::Uuid, i32, i32)> {
        let view = self.meta.etcd()?.view();
        let id = view.topics.get(topic)?.id;
        let rec = view.owners.get(&(topic.to_string(), partition))?.owner;
        Some((id, rec.node, rec.epoch))
    }

    /// KIP-392: the live brokers with an endpoint on `listener` that serve reads of
    /// partitions they do not own, with their racks (`replica.selector.class` rack-aware and
    /// `broker.rack` set: the rack-aware selector only ever sends a consumer to a broker in
    /// its rack). Empty on a single broker, and when this broker's own selector is the
    /// leader's.
    pub(crate) fn read_replicas(&self, listener: &str) -> Vec<(i32, String)> {
        if !self.config.read_replicas {
            return Vec::new();
        }
        let Some(store) = self.meta.etcd() else {
            return Vec::new();
        };
        // Only those a client on `listener` can reach (Metadata on it lists no other).
        store
            .view()
            .brokers
            .values()
            .filter(|b| b.reads && b.endpoint(listener).is_some())
            .filter_map(|b| b.rack.clone().map(|r| (b.node_id, r)))
            .collect()
    }

    /// Send `body` to broker `node` (its advertised endpoint), within
    /// [`PEER_REQUEST_TIMEOUT`].
    pub(crate) async fn call_peer(
        &self,
        node: i32,
        api: kafka_protocol::messages::ApiKey,
        version: i16,
        body: RequestKind,
    ) -> Result<ResponseKind, String> {
        let Some(peers) = self.peers.get().cloned() else {
            return Err("no client for broker-to-broker requests".into());
        };
        self.call_with(peers, node, api, version, body).await
    }

    /// Send `body` to live broker `node` through `peers`, within [`PEER_REQUEST_TIMEOUT`].
    async fn call_with(
        &self,
        peers: Arc<dyn PeerClient>,
        node: i32,
        api: kafka_protocol::messages::ApiKey,
        version: i16,
        body: RequestKind,
    ) -> Result<ResponseKind, String> {
        let Some((_, host, port)) = self
            .live_brokers()
            .into_iter()
            .find(|(id, _, _)| *id == node)
        else {
            return Err(format!("broker {node} is not registered"));
        };
        match tokio::time::timeout(
            PEER_REQUEST_TIMEOUT,
            peers.call(&host, port, api, version, body),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(format!(
                "broker {node} did not answer {api:?} within {PEER_REQUEST_TIMEOUT:?}"
            )),
        }
    }

    /// Run an administrative handler (topic and config changes, producer-id blocks,
    /// reassignments) on tokio's blocking pool, so that produce and fetch requests go on
    /// meanwhile: in a cluster it talks to etcd, and on any broker it writes and removes files
    /// (a topic's deletion unlinks every file of its partitions, which on a volume mounted with
    /// `discard` held a runtime thread for seconds).
    fn off_runtime(
        self: &Arc<Self>,
        handler: impl FnOnce(&Arc<Broker>) -> Option<ResponseKind> + Send + 'static,
    ) -> Reply {
        let broker = self.clone();
        Box::pin(async move {
            match tokio::task::spawn_blocking(move || handler(&broker)).await {
                Ok(body) => body,
                Err(e) => {
                    tracing::error!("an administrative request failed: {e}");
                    None
                }
            }
        })
    }

    /// Periodic work: retention, time-based roll, pending deletions, checkpoints.
    pub fn maintain(&self) {
        self.logs.maintain(now_ms());
        if let Err(e) = self.logs.checkpoint() {
            tracing::warn!("writing checkpoints failed: {e}");
        }
        self.sessions.expire();
        self.fetch_waiters.sweep();
        self.quotas.expire(now_ms());
    }

    /// Re-open every log that failed (a failed fsync, or a failed write that could not be cut
    /// back) from what storage holds, as a restart would, so that its partition serves again
    /// without one (docs/reliability.md). In a cluster the recovered data is published once an
    /// ownership confirmation covers it.
    fn reopen_failed_logs(&self) {
        use sluice_store::mutation::{active, Mutation};
        if active(Mutation::NoReopen) {
            return;
        }
        if self.log_dir_volume_missing("failed logs are re-opened") {
            // Nothing to re-open from until it is back: no attempt, no backoff growing, so the
            // first check after it returns (within FLUSH_CHECK_INTERVAL) re-opens them.
            return;
        }
        for log in self.logs.logs_snapshot().iter() {
            let Some(failure) = log.failure() else {
                continue;
            };
            let tp = log.topic_partition().clone();
            let Some(state) = self.registry.get(&tp.topic) else {
                continue;
            };
            if state
                .log(tp.partition)
                .is_none_or(|l| !Arc::ptr_eq(l, &log))
            {
                continue;
            }
            if self
                .reopen_retry
                .lock()
                .get(&tp)
                .is_some_and(|(at, _)| Instant::now() < *at)
            {
                continue;
            }
            if let Some(cluster) = &self.cluster {
                // In a cluster a failed log is acquired again, its epoch bumped in etcd before
                // its files are read, as any acquisition: the recovery that rewrites them is
                // fenced by the acquisition, and what it recovered is published by it.
                cluster.acquire_again(&tp, &failure);
                continue;
            }
            let config = registry::log_config(&state.config);
            // A re-open is a new acquisition: a new epoch, stamped into what the new log
            // writes and, for `__transaction_state`, into the markers its coordinator writes
            // (a marker job of the failed log's load is then refused by every partition that
            // has seen the new one, as Kafka bumps the coordinator epoch at every load).
            let reopened = self
                .meta
                .acquire_partition(&tp.topic, tp.partition)
                .map_err(|e| e.to_string())
                .and_then(|epoch| {
                    let new = self
                        .logs
                        .reopen_log(&tp, config)
                        .map_err(|e| e.to_string())?;
                    if let Some(new) = &new {
                        new.set_leader_epoch(epoch);
                    }
                    Ok(new)
                });
            let new = match reopened {
                Ok(Some(new)) => new,
                Ok(None) => continue,
                Err(e) => {
                    let mut retry = self.reopen_retry.lock();
                    let wait = retry.get(&tp).map_or(FLUSH_CHECK_INTERVAL, |(_, w)| {
                        (*w * 2).min(REOPEN_RETRY_MAX)
                    });
                    retry.insert(tp.clone(), (Instant::now() + wait, wait));
                    tracing::error!(?tp, retry_ms = wait.as_millis() as u64, "re-opening a failed log failed; it stays offline until a later attempt succeeds: {e}");
                    continue;
                }
            };
            self.reopen_retry.lock().remove(&tp);
            tracing::warn!(
                ?tp,
                %failure,
                log_end = new.log_end_offset(),
                "re-opened a failed log: recovered from what storage holds"
            );
            if self.registry.replace_log(new.clone()) {
                #[cfg(test)]
                crate::admin::tests::after_replace_log();
                // The topic's configs may have changed since they were read for the open.
                self.apply_topic_config(&tp.topic);
                sync_for_readers(&new);
                self.load_coordinator_partition(&tp, &new, true);
            } else {
                sync_for_readers(&new);
            }
            self.fetch_waiters.wake(&log);
        }
    }

    /// Give an open log a new configuration; a `flush.messages=1` log's readers see only what
    /// is fsynced, so what they saw until now is fsynced at once.
    pub(crate) fn configure_log(
        &self,
        log: &Arc<sluice_store::Log>,
        config: sluice_store::LogConfig,
    ) {
        let was = log.sync_bounded();
        log.set_config(config);
        // Turned on, on one broker (in a cluster the published mark bounds reads anyway).
        if !was && log.sync_bounded() && self.cluster.is_none() {
            let waiting = self.flusher.request(log.clone());
            drop(waiting); // the request joins the next round; nobody waits for it here
        }
    }

    /// Load the coordinator state a `__consumer_offsets` or `__transaction_state` partition
    /// holds, from `log`, which this broker now holds: when `fresh` (the log was just opened:
    /// an acquisition or a re-open), or when nothing is loaded for it, or (transactions) when
    /// it is loaded at another epoch than the log's (the partition was acquired again in
    /// place): its marker jobs then carry the new epoch, and those of the earlier load stop.
    pub(crate) fn load_coordinator_partition(
        &self,
        tp: &sluice_store::TopicPartition,
        log: &Arc<sluice_store::Log>,
        fresh: bool,
    ) {
        let p = tp.partition;
        if tp.topic == OFFSETS_TOPIC && p < self.groups.partition_count() {
            if fresh {
                self.groups.unload(p);
            }
            if !fresh && !self.groups.is_loaded(p) && log.synced_offset() < log.log_end_offset() {
                // Acquired again in place, with records whose flush has not settled: loaded
                // once they are on storage, so that no offset is served that a failed fsync
                // then takes back (a failed flush fails the log, which is acquired again and
                // loaded from storage). Nothing is appended while it is not loaded.
                if let Some(me) = self.arc() {
                    let flushed = self.flusher.request(log.clone());
                    let (tp, log) = (tp.clone(), log.clone());
                    self.runtime.spawn(async move {
                        let flushed = flushed.await;
                        // Still this broker's, from this log (not let go meanwhile).
                        let current = me.logs.get(&tp).is_some_and(|l| Arc::ptr_eq(&l, &log));
                        if !current || log.failure().is_some() || !me.may_write(&tp) {
                            return;
                        }
                        match flushed {
                            Ok(()) => me.load_coordinator_partition(&tp, &log, false),
                            // A failed confirmation fails no log by itself: this one fails,
                            // so that it is acquired again and loaded from storage.
                            Err(e) => log.mark_failed(format!(
                                "a flush of {OFFSETS_TOPIC} before its load failed ({e}); it is loaded again from storage"
                            )),
                        }
                    });
                }
                return;
            }
            if fresh || !self.groups.is_loaded(p) {
                self.groups.load(p, log.clone());
            }
        } else if tp.topic == SHARE_STATE_TOPIC && p < self.shares.state_partition_count() {
            if fresh || !self.shares.state_loaded(p) {
                self.shares.load_state(p, log.clone());
            }
        } else if tp.topic == TXN_TOPIC && p < self.txns.partition_count() {
            let loaded_at = self.txns.coordinator_epoch(p);
            if fresh || loaded_at != Some(log.leader_epoch()) {
                self.load_txn_partition(p, log.clone());
            }
        }
    }

    /// True while a log dir's `meta.properties` is gone (its volume is not mounted), said
    /// in the log at most every [`VOLUME_MISSING_LOG_EVERY`], with what waits for it.
    pub(crate) fn log_dir_volume_missing(&self, waiting: &str) -> bool {
        let Some(dir) = self.logs.volume_missing() else {
            *self.volume_missing_logged.lock() = None;
            return false;
        };
        let mut logged = self.volume_missing_logged.lock();
        if logged.is_none_or(|at| at.elapsed() >= VOLUME_MISSING_LOG_EVERY) {
            *logged = Some(Instant::now());
            tracing::error!(
                dir = %dir.display(),
                "the log dir has no meta.properties: its volume is not mounted (the bare mount point?); {waiting} once it is back"
            );
        }
        true
    }

    /// Re-open the logs that failed, then flush every log whose `flush.ms` has passed since
    /// its oldest unflushed append, and (one broker) the segments sealed since the last
    /// flush; make the next segment's files of each log whose active segment is half full.
    /// Runs every [`FLUSH_CHECK_INTERVAL`].
    pub fn flush_due_logs(&self) {
        self.reopen_failed_logs();
        let now = now_ms();
        let mut moved = false;
        for log in self.logs.logs_snapshot().iter() {
            // An idle log costs this check one atomic swap (at 100,000 partitions, the look at
            // each log's state twice a second was most of an idle broker's CPU).
            if !log.take_flush_work() {
                continue;
            }
            if log.flush_due_by_time(now) {
                let started = Instant::now();
                let flushed = log.flush();
                self.metrics.fsync(started.elapsed(), flushed.is_ok());
                match flushed {
                    Ok(_) => moved = true,
                    Err(e) => {
                        tracing::error!(tp = ?log.topic_partition(), "periodic flush failed: {e}")
                    }
                }
            } else if self.cluster.is_none() && log.has_unflushed_sealed() {
                // As Kafka flushes a segment once it has rolled: the recovery point follows,
                // so a restart after a crash validates the active segments only, however
                // much was written without a flush policy. (In a cluster every append joins a
                // group-commit round, which syncs sealed segments and records the recovery
                // point in etcd.)
                let started = Instant::now();
                let flushed = log.flush_sealed();
                self.metrics.fsync(started.elapsed(), flushed.is_ok());
                match flushed {
                    Ok(_) => moved = true,
                    Err(e) => {
                        tracing::error!(tp = ?log.topic_partition(), "flushing sealed segments failed: {e}")
                    }
                }
            }
            {
                // The recovery point follows the log end (`sluice.log.recovery.point.*`; in a
                // cluster the next confirmed round records it, and the snapshot there, in the
                // owner record).
                let started = Instant::now();
                match log.advance_recovery_point(now) {
                    Ok(false) => {}
                    Ok(true) => {
                        self.metrics.fsync(started.elapsed(), true);
                        moved = true;
                    }
                    Err(e) => {
                        self.metrics.fsync(started.elapsed(), false);
                        tracing::error!(tp = ?log.topic_partition(), "moving the recovery point to the log end failed: {e}")
                    }
                }
            }
            // The next segment's files, ahead of its roll on the append path.
            let spare_later = log.prepare_spare();
            if spare_later
                || log.flush_pending_by_time()
                || (self.cluster.is_none() && log.has_unflushed_sealed())
            {
                log.keep_flush_work();
            }
        }
        // Recovery points moved: write them down now rather than at the next periodic
        // checkpoint (`log.flush.offset.checkpoint.interval.ms`), so the bound holds.
        if moved {
            if let Err(e) = self.logs.checkpoint() {
                tracing::warn!("writing checkpoints failed: {e}");
            }
        }
    }

    /// What the page-cache drop-behind did since start-up, for metrics.
    pub fn page_cache_drops(&self) -> CacheDropTotals {
        self.cache.totals()
    }

    /// Fetch reads that waited for the volume since start-up: (fetch requests read on a
    /// blocking thread, partition reads among them that waited, their bytes).
    pub fn cold_reads(&self) -> (u64, u64, u64) {
        let c = &self.cold_reads;
        (
            c.fetches.load(std::sync::atomic::Ordering::Relaxed),
            c.partitions.load(std::sync::atomic::Ordering::Relaxed),
            c.bytes.load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// What the write-behind did since start-up, for metrics.
    pub fn writeback_totals(&self) -> WritebackTotals {
        self.writeback.totals()
    }

    /// Counters of deferred deletions (pending, retries, ...), for the metrics module.
    pub fn deletion_stats(&self) -> DeletionStats {
        self.logs.deletion_stats()
    }

    /// How often [`Broker::maintain`] should run.
    pub fn maintenance_interval(&self) -> Duration {
        let ms = self
            .config
            .log_retention_check_interval_ms
            .min(self.config.log_flush_offset_checkpoint_interval_ms);
        Duration::from_millis(ms.max(100))
    }

    /// In a cluster, hand every partition over and leave the cluster (controlled shutdown),
    /// once; nothing on one broker. Called before the listener closes: a broker whose
    /// listener refuses connections while it is still registered is taken for dead by its
    /// peers (`sluice.cluster.death.probe.enable`).
    pub fn leave_cluster(&self) {
        if let Some(c) = &self.cluster {
            c.shutdown(self);
        }
    }

    /// Flush every log, write checkpoints and the clean-shutdown marker. In a cluster, first
    /// hand every partition over (controlled shutdown), unless [`Broker::leave_cluster`]
    /// did.
    pub fn shutdown(&self) -> Result<(), BrokerError> {
        self.leave_cluster();
        // As many threads as a start opens the logs on (`num.recovery.threads.per.data.dir`
        // per log dir).
        let config = self.effective_config();
        let threads = config.recovery_threads_per_data_dir.max(1) * config.log_dirs.len();
        self.logs.shutdown_on(threads)?;
        Ok(())
    }
}

fn ready(body: Option<ResponseKind>) -> Reply {
    Box::pin(std::future::ready(body))
}

impl Broker {
    /// Brokers alive now, at their inter-broker listeners: this one alone, or the cluster's
    /// registered members.
    pub(crate) fn live_brokers(&self) -> Vec<(i32, String, u16)> {
        match self.meta.etcd() {
            Some(store) => store
                .view()
                .brokers
                .values()
                .map(|b| (b.node_id, b.host.clone(), b.port))
                .collect(),
            None => {
                let l = self.inter_broker();
                vec![(self.node_id, l.host, l.port)]
            }
        }
    }

    /// Brokers alive now, at their addresses on listener `listener` (the one a client came
    /// in on); a broker without that listener is left out, as Kafka leaves it out.
    pub(crate) fn live_endpoints(&self, listener: &str) -> Vec<(i32, String, u16)> {
        match self.meta.etcd() {
            Some(store) => store
                .view()
                .brokers
                .values()
                .filter_map(|b| b.endpoint(listener).map(|(h, p)| (b.node_id, h, p)))
                .collect(),
            None => self
                .advertised_on(listener)
                .map(|l| vec![(self.node_id, l.host, l.port)])
                .unwrap_or_default(),
        }
    }

    /// The brokers clients are given in Metadata and DescribeCluster, at their addresses on
    /// `listener`, with their racks: the live ones, and in a cluster those whose lease ended
    /// less than `broker.session.timeout.ms` ago, as Kafka keeps a broker that stopped
    /// heartbeating until its session times out. Their partitions are led elsewhere already;
    /// clients keep their connection objects, and one restarted meanwhile never leaves
    /// their view (librdkafka 2.10+ drops the object of a broker gone from Metadata, and a
    /// transactional request waiting for it is never woken again: librdkafka issues 5456
    /// and 5511).
    pub(crate) fn listed_brokers(&self, listener: &str) -> Vec<(i32, String, u16, Option<String>)> {
        let (Some(store), Some(settings)) = (self.meta.etcd(), self.config.cluster.as_ref()) else {
            return self
                .live_endpoints(listener)
                .into_iter()
                .map(|(id, host, port)| (id, host, port, self.broker_rack(id)))
                .collect();
        };
        let within = std::time::Duration::from_millis(settings.broker_session_timeout_ms);
        store
            .listed_brokers(within)
            .into_iter()
            .filter_map(|b| {
                let (host, port) = b.endpoint(listener)?;
                Some((b.node_id, host, port, b.rack))
            })
            .collect()
    }

    /// The `broker.rack` of a live broker (this one, or in a cluster any registered one).
    pub(crate) fn broker_rack(&self, id: i32) -> Option<String> {
        match self.meta.etcd() {
            Some(store) => store.view().brokers.get(&id).and_then(|b| b.rack.clone()),
            None => (id == self.node_id)
                .then(|| self.config.rack.clone())
                .flatten(),
        }
    }

    /// KIP-951: where a client should send requests for a partition this broker does not
    /// serve: the owner the cluster's records name (or the broker a planned move hands it
    /// to), with the leader epoch it has, or will have once it acquired the partition. None
    /// on a single broker, or when that is this broker or not a live one.
    pub(crate) fn leader_hint(&self, topic: &str, partition: i32) -> Option<(i32, i32)> {
        let view = self.meta.etcd()?.view();
        let rec = view.owners.get(&(topic.to_string(), partition))?.owner;
        let (leader, epoch) = match rec.to {
            Some(to) => (to, rec.epoch + 1),
            // Assigned, not acquired yet: acquiring bumps the epoch.
            None if rec.from.is_some() => (rec.node, rec.epoch + 1),
            None => (rec.node, rec.epoch),
        };
        (leader != self.node_id && view.brokers.contains_key(&leader)).then_some((leader, epoch))
    }

    /// The addresses on `listener` of the live brokers among `ids` (KIP-951's
    /// NodeEndpoints).
    pub(crate) fn endpoints_of(&self, ids: &[i32], listener: &str) -> Vec<(i32, String, u16)> {
        let mut out: Vec<_> = self
            .live_endpoints(listener)
            .into_iter()
            .filter(|(id, _, _)| ids.contains(id))
            .collect();
        out.sort_unstable_by_key(|(id, _, _)| *id);
        out
    }

    pub(crate) fn live_broker_count(&self) -> i32 {
        match self.meta.etcd() {
            Some(store) => store.view().brokers.len() as i32,
            None => 1,
        }
    }

    /// The controller Kafka clients are told about: this broker, or the cluster's.
    pub(crate) fn controller_id(&self) -> i32 {
        match self.meta.etcd() {
            Some(store) => store.view().controller_id().unwrap_or(-1),
            None => self.node_id,
        }
    }

    /// The broker that Metadata and DescribeCluster name as the controller, where clients send
    /// CreateTopics, DeleteTopics and the other admin requests: this one. Every broker applies
    /// those itself through the metadata store, and naming the etcd controller would send them
    /// to a broker that may be dead while this one has not seen its lease end yet (librdkafka's
    /// admin client then retries the dead address until its next metadata refresh). Kafka's
    /// brokers also name a live broker rather than the active controller (KIP-590).
    pub(crate) fn controller_for_clients(&self) -> i32 {
        self.node_id
    }

    /// In cluster mode, false if this broker may not append to `tp` now (another broker owns
    /// it, the lease may be lapsing, or it is shutting down).
    pub(crate) fn may_write(&self, tp: &sluice_store::TopicPartition) -> bool {
        self.cluster.as_ref().is_none_or(|c| c.may_write(tp))
    }

    /// Whether a produce to `tp` should wait for this broker to acquire it (cluster mode): it
    /// is assigned here, an acquisition may come soon ([`cluster::Cluster::may_acquire_soon`]:
    /// not one backing off after a failure), and it is not served yet. Served means held,
    /// writable and its open log in the registry (the registry takes a topic's logs once a
    /// reconciliation round has been through all of its partitions, after the acquisition
    /// itself): a wait that ended at the acquisition answered NOT_LEADER_OR_FOLLOWER anyway.
    pub(crate) fn awaiting_acquisition(&self, tp: &sluice_store::TopicPartition) -> bool {
        self.acquisition_candidate(tp)
            && self
                .cluster
                .as_ref()
                .is_some_and(|c| c.may_acquire_soon(tp))
    }

    /// Whether `tp` is assigned here and not served yet (cluster mode), whether or not an
    /// acquisition may come soon: a partition backing off when a request is read may be
    /// acquired while the request waits for another one, and is then waited for too.
    pub(crate) fn acquisition_candidate(&self, tp: &sluice_store::TopicPartition) -> bool {
        if self.cluster.is_none() {
            return false;
        }
        let served = self.may_write(tp)
            && self
                .registry
                .get(&tp.topic)
                .and_then(|s| s.log(tp.partition).cloned())
                .is_some_and(|log| !log.is_closed());
        !served && self.assigned_here(tp)
    }

    /// Whether the cluster's records assign `tp` to this broker (acquired or not yet).
    pub(crate) fn assigned_here(&self, tp: &sluice_store::TopicPartition) -> bool {
        self.meta.etcd().is_some_and(|s| {
            s.view()
                .owners
                .get(&(tp.topic.clone(), tp.partition))
                .is_some_and(|r| r.owner.node == self.node_id)
        })
    }

    /// Where this broker's listener `name` is advertised, if it has one.
    pub(crate) fn advertised_on(&self, name: &str) -> Option<sluice_config::Listener> {
        self.config
            .advertised_listeners
            .iter()
            .find(|l| l.name == name)
            .cloned()
    }

    /// The listener other brokers reach this one on (`inter.broker.listener.name`).
    pub(crate) fn inter_broker(&self) -> sluice_config::Listener {
        self.advertised_on(&self.config.inter_broker_listener)
            .or_else(|| self.config.advertised_listeners.first().cloned())
            .unwrap_or(sluice_config::Listener {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
            })
    }
}

/// Run `pass` on a blocking thread (it may do file I/O), one pass at a time, each starting at
/// least `interval` after the previous one started (later if a pass takes longer), while the
/// broker lives. A pass that panics (a bug) is logged and the schedule goes on.
fn spawn_passes(broker: &Arc<Broker>, interval: Duration, what: &'static str, pass: fn(&Broker)) {
    let weak = Arc::downgrade(broker);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(b) = weak.upgrade() else { return };
            if let Err(e) = tokio::task::spawn_blocking(move || pass(&b)).await {
                tracing::error!(error = %e, "{what} pass failed");
            }
        }
    });
}

/// `f` of every item, by up to `threads` threads at once (the caller's among them), each
/// taking the next item; the results in the items' order.
pub(crate) fn parallel_map<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let results: Vec<parking_lot::Mutex<Option<R>>> = items
        .iter()
        .map(|_| parking_lot::Mutex::new(None))
        .collect();
    let work = || loop {
        let k = next.fetch_add(1, Ordering::Relaxed);
        let Some(item) = items.get(k) else { return };
        *results[k].lock() = Some(f(item));
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.clamp(1, items.len().max(1)) {
            scope.spawn(work);
        }
        work();
    });
    results
        .into_iter()
        .map(|r| r.into_inner().expect("every item is mapped"))
        .collect()
}

#[cfg(test)]
mod dispatch_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use kafka_protocol::messages::{
        ApiVersionsRequest, CreateDelegationTokenRequest, DescribeAclsRequest,
        DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
        DescribeTransactionsRequest, FetchRequest, ListGroupsRequest, ListOffsetsRequest,
        ListTransactionsRequest, RequestHeader, SaslHandshakeRequest,
    };

    fn client() -> client::Client {
        client::Client {
            id: "client".into(),
            host: "/127.0.0.1".into(),
            listener: Arc::from("PLAINTEXT"),
            principal: Arc::from(client::ANONYMOUS),
            address: "127.0.0.1".into(),
            api_key: 0,
            produce_refusals: Arc::new(refusals::ProduceRefusals::default()),
            share_sessions: Default::default(),
        }
    }

    /// Each request is claimed by one family of the dispatch, and every other family gives
    /// it back unchanged, so the chain in `dispatch_admitted` reaches its handler; a request
    /// no family handles (Fetch, answered before the dispatch) is answered with nothing.
    #[test]
    fn each_request_is_handled_by_exactly_one_family() {
        let dir = tempfile::tempdir().unwrap();
        let rt = testutil::runtime();
        let _in_runtime = rt.enter();
        let broker = testutil::single_broker(dir.path());
        let client = client();
        // (request, version, the family that handles it: partitions, admin, groups,
        // transactions, security)
        let samples = [
            (
                RequestKind::ApiVersions(ApiVersionsRequest::default()),
                0,
                0,
            ),
            (
                RequestKind::ListOffsets(ListOffsetsRequest::default()),
                1,
                0,
            ),
            (
                RequestKind::DescribeConfigs(DescribeConfigsRequest::default()),
                1,
                1,
            ),
            (
                RequestKind::DescribeCluster(DescribeClusterRequest::default()),
                0,
                1,
            ),
            (RequestKind::ListGroups(ListGroupsRequest::default()), 0, 2),
            (
                RequestKind::DescribeGroups(DescribeGroupsRequest::default()),
                0,
                2,
            ),
            (
                RequestKind::ListTransactions(ListTransactionsRequest::default()),
                0,
                3,
            ),
            (
                RequestKind::DescribeTransactions(DescribeTransactionsRequest::default()),
                0,
                3,
            ),
            (
                RequestKind::DescribeAcls(DescribeAclsRequest::default()),
                1,
                4,
            ),
            (
                RequestKind::SaslHandshake(SaslHandshakeRequest::default()),
                0,
                4,
            ),
            (
                RequestKind::CreateDelegationToken(CreateDelegationTokenRequest::default()),
                1,
                4,
            ),
        ];
        for (body, version, family) in samples {
            let results = [
                broker.dispatch_partitions(body.clone(), version, &client, Verdicts::new()),
                broker.dispatch_admin(body.clone(), version, &client),
                broker.dispatch_groups(body.clone(), version, &client),
                broker.dispatch_txns(body.clone(), version),
                broker.dispatch_security(body.clone(), version),
            ];
            for (i, result) in results.into_iter().enumerate() {
                match result {
                    Ok(_) => assert_eq!(i, family, "family {i} claimed {body:?}"),
                    Err(back) => {
                        assert_ne!(i, family, "family {i} gave back {body:?}");
                        assert_eq!(back, body, "family {i} changed what it gave back");
                    }
                }
            }
        }
        let fetch = RequestKind::Fetch(FetchRequest::default());
        let header = RequestHeader::default().with_request_api_key(1);
        let answer =
            rt.block_on(broker.dispatch_admitted(fetch, 4, &header, &client, Verdicts::new()));
        assert!(answer.is_none(), "{answer:?}");
    }
}
