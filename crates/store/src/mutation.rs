//! Deliberately broken variants of the broker, for the fault suite's self-test only
//! (`scripts/faults --self-test`, docs/reliability.md): each one breaks a guarantee, and the
//! suite must catch every one, or one of its checks cannot fail.
//!
//! Compiled only with the `mutations` feature (`cargo build -p sluice --features
//! sluice/mutations`); a build without it has no trace of them (`active` is a constant
//! `false`). With the feature, the variant is named by the `SLUICE_MUTATION` environment
//! variable, read once.

/// The variants, by the name `SLUICE_MUTATION` gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Flushes report success without calling `fdatasync`: acks=all is answered before the
    /// data is on storage.
    SkipFsync,
    /// Directory fsyncs report success without syncing: a new segment, a partition directory,
    /// a rename (an atomic rewrite, a cleaner's swap) is not durable when the broker thinks it
    /// is.
    SkipDirFsync,
    /// The process exits when a write meets a full disk (ENOSPC) instead of failing the
    /// append and going on.
    ExitOnEnospc,
    /// A failed log is never re-opened (or acquired again): its partition stays offline.
    NoReopen,
    /// The write gate lets every write through: a broker that lost a partition, or passed its
    /// write deadline, goes on writing the partition's files.
    OpenGate,
    /// A transaction's COMMIT marker to a data partition is reported written but is not: the
    /// transaction stays open there and its records are never read committed.
    ForgetCommitMarker,
    /// A transaction marker on `__consumer_offsets` follows the partition's flush policy (none)
    /// instead of being fsynced before its transaction completes: a crash after the commit
    /// loses it, and the transaction's offsets stay pending.
    UnsyncedOffsetsMarker,
    /// A share partition's state written to `__share_group_state` is not fsynced before the
    /// acknowledgement that changed it is answered: a crash after the answer loses it, and
    /// accepted records are delivered again.
    UnsyncedShareState,
}

impl Mutation {
    pub const ALL: [Mutation; 8] = [
        Mutation::SkipFsync,
        Mutation::SkipDirFsync,
        Mutation::ExitOnEnospc,
        Mutation::NoReopen,
        Mutation::OpenGate,
        Mutation::ForgetCommitMarker,
        Mutation::UnsyncedOffsetsMarker,
        Mutation::UnsyncedShareState,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mutation::SkipFsync => "skip-fsync",
            Mutation::SkipDirFsync => "skip-dir-fsync",
            Mutation::ExitOnEnospc => "exit-on-enospc",
            Mutation::NoReopen => "no-reopen",
            Mutation::OpenGate => "open-gate",
            Mutation::ForgetCommitMarker => "forget-commit-marker",
            Mutation::UnsyncedOffsetsMarker => "unsynced-offsets-marker",
            Mutation::UnsyncedShareState => "unsynced-share-state",
        }
    }
}

/// True if this process runs the broken variant `m`.
#[cfg(feature = "mutations")]
pub fn active(m: Mutation) -> bool {
    static ACTIVE: std::sync::OnceLock<Option<Mutation>> = std::sync::OnceLock::new();
    *ACTIVE.get_or_init(|| {
        let name = std::env::var("SLUICE_MUTATION").ok()?;
        let found = Mutation::ALL.into_iter().find(|v| v.name() == name);
        match found {
            Some(v) => tracing::warn!(mutation = v.name(), "running a deliberately broken variant"),
            None => tracing::error!(%name, "SLUICE_MUTATION names no variant; running unbroken"),
        }
        found
    }) == Some(m)
}

/// Without the `mutations` feature no variant is ever active.
#[cfg(not(feature = "mutations"))]
#[inline(always)]
pub fn active(_m: Mutation) -> bool {
    false
}
