//! Every metric name Sluice exports, in one place (docs/operations.md lists them with their
//! meaning).
//!
//! Kafka's names are those the Prometheus JMX exporter's standard Kafka rules
//! (`example_configs/kafka-2_0_0.yml`, the rules Strimzi ships) make of Kafka's MBeans:
//! `kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T` `Count` becomes
//! `kafka_server_brokertopicmetrics_bytesin_total{topic="T"}`, a `Value` a gauge, and a
//! histogram's `99thPercentile` a gauge with `quantile="0.99"` beside its `_count`. Consumer
//! lag uses kafka_exporter's names. Sluice's own start with `sluice_`.

// BrokerTopicMetrics (per topic with label `topic`, broker-wide without it).
pub const BYTES_IN: &str = "kafka_server_brokertopicmetrics_bytesin_total";
pub const BYTES_OUT: &str = "kafka_server_brokertopicmetrics_bytesout_total";
pub const MESSAGES_IN: &str = "kafka_server_brokertopicmetrics_messagesin_total";
pub const TOTAL_PRODUCE_REQUESTS: &str =
    "kafka_server_brokertopicmetrics_totalproducerequests_total";
pub const FAILED_PRODUCE_REQUESTS: &str =
    "kafka_server_brokertopicmetrics_failedproducerequests_total";
pub const TOTAL_FETCH_REQUESTS: &str = "kafka_server_brokertopicmetrics_totalfetchrequests_total";
pub const FAILED_FETCH_REQUESTS: &str = "kafka_server_brokertopicmetrics_failedfetchrequests_total";

// RequestMetrics.
pub const REQUESTS: &str = "kafka_network_requestmetrics_requests_total";
pub const ERRORS: &str = "kafka_network_requestmetrics_errors_total";
pub const TOTAL_TIME_MS: &str = "kafka_network_requestmetrics_totaltimems";
pub const TOTAL_TIME_MS_COUNT: &str = "kafka_network_requestmetrics_totaltimems_count";

// ReplicaManager, controller, logs.
pub const PARTITION_COUNT: &str = "kafka_server_replicamanager_partitioncount";
pub const LEADER_COUNT: &str = "kafka_server_replicamanager_leadercount";
pub const UNDER_REPLICATED: &str = "kafka_server_replicamanager_underreplicatedpartitions";
pub const ACTIVE_CONTROLLER: &str = "kafka_controller_kafkacontroller_activecontrollercount";
pub const OFFLINE_PARTITIONS: &str = "kafka_controller_kafkacontroller_offlinepartitionscount";
pub const LOG_SIZE: &str = "kafka_log_log_size";
pub const LOG_END_OFFSET: &str = "kafka_log_log_logendoffset";
pub const LOG_START_OFFSET: &str = "kafka_log_log_logstartoffset";
pub const LOG_SEGMENTS: &str = "kafka_log_log_numlogsegments";
pub const OFFLINE_LOG_DIRS: &str = "kafka_log_logmanager_offlinelogdirectorycount";
pub const CONNECTION_COUNT: &str = "kafka_server_socket_server_metrics_connection_count";
pub const FAILED_AUTHENTICATION: &str =
    "kafka_server_socket_server_metrics_failed_authentication_total";

// kafka_exporter's consumer-group names, and lag in seconds.
pub const GROUP_CURRENT_OFFSET: &str = "kafka_consumergroup_current_offset";
pub const GROUP_CURRENT_OFFSET_SUM: &str = "kafka_consumergroup_current_offset_sum";
pub const GROUP_LAG: &str = "kafka_consumergroup_lag";
pub const GROUP_MEMBERS: &str = "kafka_consumergroup_members";
pub const GROUP_LAG_SUM: &str = "kafka_consumergroup_lag_sum";
pub const GROUP_LAG_SECONDS: &str = "kafka_consumergroup_lag_seconds";
pub const GROUP_LAG_SECONDS_MAX: &str = "kafka_consumergroup_lag_seconds_max";
pub const PARTITION_CURRENT_OFFSET: &str = "kafka_topic_partition_current_offset";
pub const PARTITION_OLDEST_OFFSET: &str = "kafka_topic_partition_oldest_offset";

// The process.
pub const PROCESS_CPU_SECONDS: &str = "process_cpu_seconds_total";
pub const PROCESS_RESIDENT_MEMORY: &str = "process_resident_memory_bytes";
pub const PROCESS_VIRTUAL_MEMORY: &str = "process_virtual_memory_bytes";
pub const PROCESS_OPEN_FDS: &str = "process_open_fds";
pub const PROCESS_MAX_FDS: &str = "process_max_fds";
pub const PROCESS_START_TIME: &str = "process_start_time_seconds";

pub const FETCH_SESSIONS: &str = "kafka_server_fetchsessioncache_numincrementalfetchsessions";
pub const FETCH_SESSION_PARTITIONS: &str =
    "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached";
pub const FETCH_SESSION_EVICTIONS: &str =
    "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total";

// Sluice's own.
pub const BROKER_INFO: &str = "sluice_broker_info";
pub const STORAGE_READ_BYTES: &str = "sluice_process_storage_read_bytes_total";
pub const STORAGE_WRITE_BYTES: &str = "sluice_process_storage_write_bytes_total";
pub const FSYNC_SECONDS: &str = "sluice_log_fsync_seconds";
pub const FSYNC_FAILURES: &str = "sluice_log_fsync_failures_total";
pub const GROUP_COMMIT_ROUND_SIZE: &str = "sluice_group_commit_round_requests";
pub const DELETIONS_PENDING: &str = "sluice_deletions_pending";
pub const DELETIONS_DEFERRED: &str = "sluice_deletions_deferred_total";
pub const DELETION_RETRIES: &str = "sluice_deletion_retries_total";
pub const DELETIONS_COMPLETED: &str = "sluice_deletions_completed_total";
pub const LEFTOVERS_RECLAIMED: &str = "sluice_silly_rename_leftovers_reclaimed_total";
pub const CACHE_DROPPED_BYTES: &str = "sluice_page_cache_dropped_bytes_total";
pub const CACHE_READ_BACK_DROPPED_BYTES: &str = "sluice_page_cache_read_back_dropped_bytes_total";
pub const CACHE_DROP_FDATASYNCS: &str = "sluice_page_cache_drop_fdatasyncs_total";
pub const CACHE_DROP_ERRORS: &str = "sluice_page_cache_drop_errors_total";
pub const FETCH_COLD_REQUESTS: &str = "sluice_fetch_cold_requests_total";
pub const FETCH_COLD_PARTITIONS: &str = "sluice_fetch_cold_partition_reads_total";
pub const FETCH_COLD_BYTES: &str = "sluice_fetch_cold_bytes_total";
pub const READ_REPLICA_PARTITIONS: &str = "sluice_read_replica_partitions";
pub const READ_REPLICA_BYTES: &str = "sluice_read_replica_bytes_total";
pub const READ_REPLICA_POLLS: &str = "sluice_read_replica_polls_total";
pub const PREFERRED_REPLICA_REDIRECTS: &str = "sluice_preferred_replica_redirects_total";
pub const WRITEBACK_BYTES: &str = "sluice_writeback_bytes_total";
pub const WRITEBACK_ERRORS: &str = "sluice_writeback_errors_total";
pub const UNWRITTEN_BYTES: &str = "sluice_log_unwritten_bytes";
pub const PRODUCE_BACKPRESSURE_WAITS: &str = "sluice_produce_backpressure_waits_total";
pub const PRODUCE_BACKPRESSURE_SECONDS: &str = "sluice_produce_backpressure_seconds_total";
pub const FAILED_LOGS: &str = "sluice_log_failed_partitions";
pub const LOG_FILES_OPEN: &str = "sluice_log_open_files";
pub const LOG_FILES_MAX: &str = "sluice_log_open_files_max";
pub const LOG_FILES_REOPENED: &str = "sluice_log_files_reopened_total";
pub const LOG_FILES_CLOSED: &str = "sluice_log_files_closed_total";
pub const LOG_FILES_OVER_CAP: &str = "sluice_log_files_over_cap_total";
pub const LOG_RECOVERED_BYTES: &str = "sluice_log_recovered_bytes_total";
pub const LOG_RECOVERY_SECONDS: &str = "sluice_log_recovery_seconds_total";
pub const ACQUISITIONS: &str = "sluice_partition_acquisitions_total";
pub const ACQUIRE_SECONDS: &str = "sluice_partition_acquire_seconds";
pub const RELEASES: &str = "sluice_partition_releases_total";
pub const HANDOVERS: &str = "sluice_partition_handovers_total";
pub const VOLUME_TOTAL_BYTES: &str = "sluice_log_dir_total_bytes";
pub const VOLUME_USABLE_BYTES: &str = "sluice_log_dir_usable_bytes";
// Storage-aware ownership (cluster mode, when log dirs declare their storage node).
pub const LOG_DIR_DIRECT: &str = "sluice_log_dir_direct";
pub const PARTITION_DIRECT: &str = "sluice_partition_direct";
pub const PARTITIONS_INDIRECT: &str = "sluice_partitions_indirect";
pub const TOPIC_PHYSICAL_BYTES: &str = "sluice_topic_physical_bytes";
// Per topic (label `topic`) and broker-wide, like BrokerTopicMetrics.
pub const LOGICAL_BYTES_IN: &str = "sluice_topic_logical_bytes_in_total";
pub const PHYSICAL_BYTES_IN: &str = "sluice_topic_physical_bytes_in_total";

/// Authorizer decisions (Kafka's `authorizer-metrics` group counts them as per-minute rates;
/// counters here, from which Prometheus computes any rate).
pub const AUTHORIZATION_ALLOWED: &str =
    "kafka_server_authorizer_metrics_authorization_allowed_total";
pub const AUTHORIZATION_DENIED: &str = "kafka_server_authorizer_metrics_authorization_denied_total";
/// Kafka's `acls-total-count`.
pub const ACLS_TOTAL: &str = "kafka_server_authorizer_metrics_acls_total_count";
