//! The append path of a [`Log`], as the sequence of its steps (`Log::append_inner`):
//!
//! 1. [`Log::validate_append`]: the batches alone, before the writer lock (docs/log-format.md,
//!    "Validation on append");
//! 2. the writer lock, and [`Log::check_open`] again under it;
//! 3. [`Log::check_producers`]: sequences, epochs, KIP-890 verifications, open transactions;
//!    a retried batch ends the append here as a duplicate;
//! 4. [`Log::write_append`]: the write gate, a roll if due, the encoding of the batches, the
//!    data, the index entries due and the transaction index: every write of the append, each
//!    after the gate (docs/cluster.md, "Fencing", point 3);
//! 5. [`Log::publish_append`]: only now do readers see it (docs/log-format.md, "Write path");
//! 6. [`Log::note_leader_epoch`]: a new leader epoch starts at this append.

use sluice_format::batch::BatchRef;
use sluice_format::TimeIndexEntry;

use super::*;
use crate::producer::BatchMeta;

/// One append as its steps see it.
#[derive(Debug)]
pub(super) struct AppendReq<'a> {
    pub records: &'a [u8],
    pub batches: Vec<BatchRef>,
    /// A transaction marker built by [`Log::append_marker`], or None for client batches.
    pub marker: Option<MarkerArgs>,
    /// Appended by a coordinator: epochs are checked, sequences are not.
    pub coordinator: bool,
    /// None for [`Log::append`], else the guard of [`Log::append_verified`].
    pub verify: Option<Option<VerificationGuard>>,
    pub cfg: LogConfig,
    pub now_ms: i64,
}

/// The log's end when the writer was taken.
#[derive(Clone, Copy, Debug)]
pub(super) struct Tail {
    pub leo: i64,
    pub log_start: i64,
    /// Bytes of the active segment.
    pub active_size: u64,
}

/// What the producer checks admitted: the producer state after the append, not yet applied.
#[derive(Debug, Default)]
pub(super) struct Admitted {
    /// The producers' entries as they are after the append (its earlier batches included).
    pub overlay: Vec<(i64, ProducerEntry)>,
    /// Transactions this append opens: producer, first offset, batch number.
    pub started: Vec<(i64, i64, usize)>,
    /// The transaction a marker ends: producer, first offset, aborted.
    pub completed: Option<(i64, i64, bool)>,
    /// The last offset the append takes.
    pub last_offset: i64,
}

/// The verdict of [`Log::check_producers`].
#[derive(Debug)]
pub(super) enum Admission {
    /// A retry of batches already in the log: answered with the original's offsets.
    Duplicate(AppendOutcome),
    Admitted(Admitted),
}

/// The batches as they go into the files ([`Log::encode_append`]).
#[derive(Debug)]
pub(super) struct Encoded {
    /// LogAppendTime: the whole append, patched (the CRC recomputed).
    pub copy: Option<Vec<u8>>,
    /// Otherwise each batch's patched header; the rest is written from the request.
    pub headers: Vec<[u8; HEADER_LEN]>,
    /// The leader epoch stamped into every batch.
    pub epoch: i32,
    /// The index cursor after the append.
    pub cursor: IndexCursor,
    pub new_oi: Vec<OffsetIndexEntry>,
    pub new_ti: Vec<TimeIndexEntry>,
    /// The first batch's max timestamp.
    pub first_ts: Option<i64>,
    /// The batches for the active segment's recent list.
    pub recent: Vec<RecentBatch>,
    /// The offset after the append.
    pub end: i64,
}

impl Encoded {
    /// The data to write, in order: the copy, or each patched header then the rest of its
    /// batch straight from the request.
    fn parts<'a>(&'a self, records: &'a [u8], batches: &[BatchRef]) -> Vec<IoSlice<'a>> {
        let mut parts = Vec::with_capacity(2 * batches.len());
        match &self.copy {
            Some(buf) => parts.push(IoSlice::new(buf)),
            None => {
                for (b, head) in batches.iter().zip(&self.headers) {
                    let r = b.range();
                    parts.push(IoSlice::new(head));
                    let body = &records[r.start + HEADER_LEN..r.end];
                    if !body.is_empty() {
                        parts.push(IoSlice::new(body));
                    }
                }
            }
        }
        parts
    }
}

/// What [`Log::write_append`] put in the files.
#[derive(Debug)]
pub(super) struct Written {
    pub active: Arc<Segment>,
    /// Where in the active segment the append starts (0 after a roll).
    pub at: u64,
    /// Bytes written to the `.log`.
    pub len: usize,
    pub enc: Encoded,
    /// The index files got every entry held back and this append's.
    pub index_written: bool,
}

impl Log {
    /// Append client batches (`marker` None) or one transaction marker built by
    /// [`Log::append_marker`]. `verify`: see [`Log::append_impl`]. All batches or none.
    pub(super) fn append_inner(
        &self,
        records: &[u8],
        marker: Option<MarkerArgs>,
        origin: AppendOrigin,
        verify: Option<Option<VerificationGuard>>,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        let coordinator = origin == AppendOrigin::Coordinator;
        let (cfg, batches) = self.validate_append(records, marker.is_some(), coordinator)?;
        let req = AppendReq {
            records,
            batches,
            marker,
            coordinator,
            verify,
            cfg,
            now_ms,
        };
        let mut w = self.writer.lock();
        // Again under the lock: a hand-over or a close marks the log while holding it.
        self.check_open()?;
        let tail = self.tail();
        let admitted = match self.check_producers(&w, &req, tail)? {
            Admission::Duplicate(outcome) => return Ok(outcome),
            Admission::Admitted(a) => a,
        };
        let written = self.write_append(&mut w, &req, tail, &admitted)?;
        let epoch = written.enc.epoch;
        let last_offset = admitted.last_offset;
        let (flush_due, log_start) = self.publish_append(&mut w, &req, tail, admitted, written);
        self.note_leader_epoch(epoch, tail.leo);
        drop(w);
        self.appended
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        let lat = req.cfg.timestamp_type == TimestampType::LogAppendTime;
        Ok(AppendOutcome {
            base_offset: tail.leo,
            last_offset,
            log_append_time_ms: if lat { now_ms } else { -1 },
            log_start_offset: log_start,
            duplicate: false,
            flush_due,
        })
    }

    /// Where the log ends now (the caller holds the writer, so nothing is appended past it).
    pub(super) fn tail(&self) -> Tail {
        let s = self.shared.read();
        Tail {
            leo: s.leo,
            log_start: s.log_start,
            active_size: s.active_size,
        }
    }

    /// Refuse a write to a log that was deleted or closed (a hand-over or a close marks it
    /// under the writer lock, so this is asked again once the writer is held).
    pub(super) fn check_open(&self) -> Result<(), AppendError> {
        if self.deleted.load(Ordering::Acquire) {
            return Err(self.aio(io::Error::new(
                io::ErrorKind::NotFound,
                "log has been deleted or closed",
            )));
        }
        Ok(())
    }

    /// The checks of an append that need nothing but its bytes, before the writer is taken:
    /// the log open and not failed (a failed log refuses every append until it is re-opened:
    /// ARCHITECTURE.md, "after a failed fsync"), whole valid batches (docs/log-format.md,
    /// "Validation on append": damage is *corrupt*, unacceptable content *invalid*), and the
    /// whole append within one segment. Returns the config the append runs under and its
    /// batches. Nothing is locked or written.
    pub(super) fn validate_append(
        &self,
        records: &[u8],
        marker: bool,
        coordinator: bool,
    ) -> Result<(LogConfig, Vec<BatchRef>), AppendError> {
        self.check_open()?;
        self.check_not_failed().map_err(|e| self.aio(e))?;
        let cfg = self.config.read().clone();
        let batches = parse_batches(records, None).map_err(|e| self.format_error(e))?;
        if batches.is_empty() {
            return Err(AppendError::Invalid {
                tp: self.tp.clone(),
                reason: "no record batches".into(),
            });
        }
        for b in &batches {
            self.validate_batch(&b.header, &cfg, marker, coordinator)?;
        }
        let total = records.len();
        if total as u64 > cfg.segment_bytes || total > i32::MAX as usize {
            return Err(AppendError::TooLarge {
                tp: self.tp.clone(),
                size: total,
                max: u32::try_from(cfg.segment_bytes).unwrap_or(u32::MAX),
            });
        }
        Ok((cfg, batches))
    }

    /// One batch of an append (docs/log-format.md, "Validation on append"): at most
    /// `max.message.bytes`, record counts that agree; and unless it is a marker the log
    /// built: not a control batch, and a producer id only with a sequence (a coordinator's
    /// batches carry none).
    fn validate_batch(
        &self,
        h: &BatchHeader,
        cfg: &LogConfig,
        marker: bool,
        coordinator: bool,
    ) -> Result<(), AppendError> {
        if h.total_len() > cfg.max_message_bytes as usize {
            return Err(AppendError::TooLarge {
                tp: self.tp.clone(),
                size: h.total_len(),
                max: cfg.max_message_bytes,
            });
        }
        check_client_counts(h).map_err(|e| self.format_error(e))?;
        if marker {
            return Ok(());
        }
        if h.is_control() {
            return Err(AppendError::Invalid {
                tp: self.tp.clone(),
                reason: "clients may not write control batches".into(),
            });
        }
        if h.has_producer_id() && h.base_sequence < 0 && !coordinator {
            return Err(AppendError::Invalid {
                tp: self.tp.clone(),
                reason: format!(
                    "invalid sequence number {} for producer {}",
                    h.base_sequence, h.producer_id
                ),
            });
        }
        Ok(())
    }

    /// The producer checks of an append, batch by batch against the state including its
    /// earlier batches (ARCHITECTURE.md, "Architecture invariant (transactions)"): a marker's
    /// producer and coordinator epochs, then each batch's sequence and epoch, its KIP-890
    /// verification and its transaction. Under the writer lock; nothing is applied yet (the
    /// publish applies [`Admitted::overlay`]). The first retried batch found ends the append
    /// as a duplicate.
    pub(super) fn check_producers(
        &self,
        w: &Writer,
        req: &AppendReq<'_>,
        tail: Tail,
    ) -> Result<Admission, AppendError> {
        let mut adm = Admitted::default();
        if let Some(m) = req.marker {
            let (entry, completed) = self.check_marker_producer(w, m, req.now_ms)?;
            adm.completed = completed;
            adm.overlay.push((m.producer_id, entry));
        }
        let mut next = tail.leo;
        for (bi, b) in req.batches.iter().enumerate() {
            let h = &b.header;
            if req.marker.is_none() && h.has_producer_id() {
                if let Some(meta) = self.check_batch_producer(w, req, &mut adm, h, bi, next)? {
                    let outcome = self.duplicate_outcome(&req.cfg, meta, tail.log_start);
                    return Ok(Admission::Duplicate(outcome));
                }
            }
            next += i64::from(h.last_offset_delta) + 1;
        }
        adm.last_offset = next - 1;
        Ok(Admission::Admitted(adm))
    }

    /// Kafka's `appendEndTxnMarker` checks for a marker (neither the producer epoch nor the
    /// coordinator epoch may go back: a marker of a deposed coordinator is refused), and the
    /// producer's entry after it, with the transaction it ends (producer, first offset,
    /// aborted).
    #[allow(clippy::type_complexity)]
    pub(super) fn check_marker_producer(
        &self,
        w: &Writer,
        m: MarkerArgs,
        now_ms: i64,
    ) -> Result<(ProducerEntry, Option<(i64, i64, bool)>), AppendError> {
        let current = w.producers.get(m.producer_id);
        match ProducerStates::check_marker(current, m.producer_epoch, m.coordinator_epoch) {
            Ok(()) => {}
            Err(MarkerError::Fenced { epoch, current }) => {
                return Err(AppendError::ProducerFenced {
                    tp: self.tp.clone(),
                    producer_id: m.producer_id,
                    epoch,
                    current,
                })
            }
            Err(MarkerError::CoordinatorFenced {
                coordinator_epoch,
                current,
            }) => {
                return Err(AppendError::CoordinatorFenced {
                    tp: self.tp.clone(),
                    producer_id: m.producer_id,
                    coordinator_epoch,
                    current,
                })
            }
        }
        let mut entry = current.cloned().unwrap_or_else(|| ProducerEntry {
            epoch: m.producer_epoch,
            ..ProducerEntry::default()
        });
        let completed =
            ProducerStates::apply_marker(&mut entry, m.producer_epoch, m.coordinator_epoch, now_ms)
                .map(|first| (m.producer_id, first, m.control == crate::ControlType::Abort));
        Ok((entry, completed))
    }

    /// Check batch `bi` (header `h`, first offset `next`) of a producer and add its state
    /// after it to `adm`. Some: the batch is a retry of one in the log (its offsets).
    fn check_batch_producer(
        &self,
        w: &Writer,
        req: &AppendReq<'_>,
        adm: &mut Admitted,
        h: &BatchHeader,
        bi: usize,
        next: i64,
    ) -> Result<Option<BatchMeta>, AppendError> {
        let current = adm
            .overlay
            .iter()
            .find(|(p, _)| *p == h.producer_id)
            .map(|(_, e)| e)
            .or_else(|| w.producers.get(h.producer_id));
        match sequence_verdict(current, h, req.coordinator) {
            Ok(SeqCheck::Accept) => {}
            Ok(SeqCheck::Duplicate(meta)) => return Ok(Some(meta)),
            Err(SeqError::OutOfOrder { expected, got }) => {
                if let Some(e) = self.failed_write_gap(w, h, expected) {
                    return Err(e);
                }
                return Err(AppendError::OutOfOrderSequence {
                    tp: self.tp.clone(),
                    producer_id: h.producer_id,
                    expected,
                    got,
                });
            }
            Err(SeqError::Fenced { epoch, current }) => {
                return Err(AppendError::ProducerFenced {
                    tp: self.tp.clone(),
                    producer_id: h.producer_id,
                    epoch,
                    current,
                });
            }
        }
        self.check_verification(w, h, current, req.verify)?;
        if let Err(reason) = ProducerStates::check_txn(current, h) {
            return Err(AppendError::InvalidTxnState {
                tp: self.tp.clone(),
                producer_id: h.producer_id,
                reason,
            });
        }
        let mut entry = current.cloned().unwrap_or_default();
        if current.is_none() {
            entry.epoch = h.producer_epoch;
        }
        if ProducerStates::apply(&mut entry, h, next, req.now_ms) {
            adm.started.push((h.producer_id, next, bi));
        }
        if let Some(slot) = adm.overlay.iter_mut().find(|(p, _)| *p == h.producer_id) {
            slot.1 = entry;
        } else {
            adm.overlay.push((h.producer_id, entry));
        }
        Ok(None)
    }

    /// KIP-890: a transactional batch of an append through [`Log::append_verified`]
    /// (`verify` Some) opens a transaction only with the verdict of a verification no marker
    /// has ended since it started (ARCHITECTURE.md, "Architecture invariant (transactions)"),
    /// and not before a batch with a lower sequence still waiting for its verdict (Kafka's
    /// `lowestSequence`). A batch of a transaction already open here passes.
    pub(super) fn check_verification(
        &self,
        w: &Writer,
        h: &BatchHeader,
        current: Option<&ProducerEntry>,
        verify: Option<Option<VerificationGuard>>,
    ) -> Result<(), AppendError> {
        let opens = h.is_transactional()
            && !current.is_some_and(|e| e.txn_first.is_some() && e.epoch == h.producer_epoch);
        let Some(guard) = verify.filter(|_| opens) else {
            return Ok(());
        };
        let verifying = w.verifying.get(&h.producer_id);
        if let Some(lowest) = verifying
            .and_then(|v| v.lowest_seq)
            .filter(|l| h.base_sequence > *l)
        {
            return Err(AppendError::OutOfOrderSequence {
                tp: self.tp.clone(),
                producer_id: h.producer_id,
                expected: lowest,
                got: h.base_sequence,
            });
        }
        let current_guard = verifying.map(|v| v.guard);
        if guard.is_none() || guard != current_guard {
            return Err(AppendError::InvalidTxnState {
                tp: self.tp.clone(),
                producer_id: h.producer_id,
                reason: "the batch is not part of an ongoing transaction: no verdict \
                         of the transaction coordinator since its last marker"
                    .into(),
            });
        }
        Ok(())
    }

    /// The answer to a retried batch whose original (`meta`) is in the log. The original's
    /// answer may never have arrived (a timeout, a failed flush round): under a flush policy
    /// the retry waits, as the original did, for an fsync covering it, unless one already
    /// has (ARCHITECTURE.md, the acks=all invariant: "a retried batch that the idempotence
    /// check calls a duplicate is answered under the same rule").
    pub(super) fn duplicate_outcome(
        &self,
        cfg: &LogConfig,
        meta: BatchMeta,
        log_start: i64,
    ) -> AppendOutcome {
        let flush_policy = cfg.flush_messages != i64::MAX || cfg.flush_ms != i64::MAX;
        let synced = self.shared.read().synced;
        AppendOutcome {
            base_offset: meta.first_offset,
            last_offset: meta.last_offset,
            log_append_time_ms: -1,
            log_start_offset: log_start,
            duplicate: true,
            flush_due: flush_policy && meta.last_offset >= synced,
        }
    }

    /// Every write of an admitted append, each after the write gate: the gate's home on the
    /// append path (docs/cluster.md, "Fencing", point 3; `gate.rs`). It is asked before
    /// anything is written; a roll due asks it again before the seal and before its new
    /// files (`roll_locked`); and when the data goes into a new segment, it is asked once
    /// more immediately before the data, since the roll's writes may have waited on the
    /// volume. The writer lock is held throughout, so nothing but the writes of this step
    /// lies between a check and a write. The data is one positional write at the segment's
    /// recorded end, then the index entries due, then the ABORT's transaction index entry; a
    /// failure of any of them cuts the `.log` back to that end (`write_failed`) and nothing
    /// is published (docs/log-format.md, "Write path").
    pub(super) fn write_append(
        &self,
        w: &mut Writer,
        req: &AppendReq<'_>,
        tail: Tail,
        adm: &Admitted,
    ) -> Result<Written, AppendError> {
        self.gate()?;
        let at = self.maybe_roll(
            w,
            &req.cfg,
            req.now_ms,
            req.records.len() as u64,
            req.batches.len(),
            adm.last_offset,
            tail.active_size,
            tail.leo,
        )?;
        let segs = self.shared.read().segments.clone();
        let active = segs
            .last()
            .cloned()
            .ok_or_else(|| self.aio(io_err("no active segment".into())))?;
        let enc = self.encode_append(w.cursor, req, tail.leo, at)?;
        if at == 0 {
            self.gate()?;
        }
        let len = self
            .write_data(&active, &mut enc.parts(req.records, &req.batches), at)
            .map_err(|e| self.write_failed(&active, at, e))?;
        let index_written = self.write_index_due(&active, at, &enc.new_oi, &enc.new_ti)?;
        if let Some((pid, first, true)) = adm.completed {
            self.index_aborted_txn(&active, at, pid, first, tail.leo)?;
        }
        Ok(Written {
            active,
            at,
            len,
            enc,
            index_written,
        })
    }

    /// The append's batches as they go into the files, written nowhere yet: offsets from
    /// `leo` on and the log's leader epoch patched into each header, both outside the CRC,
    /// in copies of the 61-byte headers (the rest is written straight from the request);
    /// under LogAppendTime, which rewrites the max timestamp and so the CRC, in a copy of
    /// the whole append (ARCHITECTURE.md: "the produce path does no per-record work"). With
    /// the index entries due from `cursor` on and the recent batches, at the positions the
    /// batches take from `at` in the active segment.
    pub(super) fn encode_append(
        &self,
        mut cursor: IndexCursor,
        req: &AppendReq<'_>,
        leo: i64,
        at: u64,
    ) -> Result<Encoded, AppendError> {
        let epoch = self.leader_epoch.load(Ordering::Acquire);
        let lat = req.cfg.timestamp_type == TimestampType::LogAppendTime;
        let mut copy = lat.then(|| req.records.to_vec());
        let mut headers: Vec<[u8; HEADER_LEN]> = Vec::with_capacity(req.batches.len());
        let mut off = leo;
        let interval = u64::from(req.cfg.index_interval_bytes);
        let mut new_oi = Vec::new();
        let mut new_ti = Vec::new();
        let mut first_ts = None;
        let mut recent = Vec::with_capacity(req.batches.len());
        for b in &req.batches {
            let r = b.range();
            let fe = |e: FormatError| self.format_error(e);
            let h = if let Some(buf) = copy.as_mut() {
                let slice = &mut buf[r.clone()];
                set_base_offset(slice, off).map_err(fe)?;
                set_partition_leader_epoch(slice, epoch).map_err(fe)?;
                set_max_timestamp(slice, BatchTimestampType::LogAppendTime, req.now_ms)
                    .map_err(fe)?;
                BatchHeader::decode(slice).map_err(fe)?
            } else {
                let mut head = [0u8; HEADER_LEN];
                head.copy_from_slice(&req.records[r.start..r.start + HEADER_LEN]);
                set_base_offset(&mut head, off).map_err(fe)?;
                set_partition_leader_epoch(&mut head, epoch).map_err(fe)?;
                headers.push(head);
                BatchHeader::decode(&head).map_err(fe)?
            };
            first_ts.get_or_insert(h.max_timestamp);
            recent.push(RecentBatch {
                base_offset: h.base_offset,
                last_offset: h.last_offset(),
                position: at + b.position as u64,
                len: u32::try_from(h.total_len()).unwrap_or(u32::MAX),
            });
            let (o, t) = cursor.observe(at + b.position as u64, &h, interval);
            new_oi.extend(o);
            new_ti.extend(t);
            off = h.next_offset();
        }
        Ok(Encoded {
            copy,
            headers,
            epoch,
            cursor,
            new_oi,
            new_ti,
            first_ts,
            recent,
            end: off,
        })
    }

    /// Index entries go to the files in groups (docs/log-format.md, "Write path"): once the
    /// entries held back and this append's (`new_oi`, `new_ti`) reach `INDEX_WRITE_ENTRIES`,
    /// all of them are written, before the append is published; a failed write fails the
    /// append and cuts its data back (from `at`). The active segment's files may lag behind
    /// its in-memory indexes: recovery rebuilds that segment's. Returns whether it wrote. The
    /// in-memory indexes are only borrowed here: a handle kept to the publish would make it
    /// copy them.
    pub(super) fn write_index_due(
        &self,
        active: &Arc<Segment>,
        at: u64,
        new_oi: &[OffsetIndexEntry],
        new_ti: &[TimeIndexEntry],
    ) -> Result<bool, AppendError> {
        let m = active.meta.read();
        let (d_oi, d_ti) = m.index_on_disk;
        let oi = m.offset_index.as_deref().map_or(&[][..], |v| v.as_slice());
        let ti = m.time_index.as_deref().map_or(&[][..], |v| v.as_slice());
        let held = oi.len().saturating_sub(d_oi) + ti.len().saturating_sub(d_ti);
        let due = held + new_oi.len() + new_ti.len() >= INDEX_WRITE_ENTRIES;
        if due {
            let bytes: Vec<u8> = oi[d_oi.min(oi.len())..]
                .iter()
                .chain(new_oi)
                .flat_map(|e| e.encode())
                .collect();
            let tbytes: Vec<u8> = ti[d_ti.min(ti.len())..]
                .iter()
                .chain(new_ti)
                .flat_map(|e| e.encode())
                .collect();
            drop(m);
            self.write_index(active, (d_oi, &bytes), (d_ti, &tbytes))
                .map_err(|e| self.write_failed(active, at, e))?;
        }
        Ok(due)
    }

    /// The ABORT of producer `pid`'s transaction (first offset `first`) at `marker_offset`
    /// into the active segment's `.txnindex`, before the marker is published
    /// (docs/log-format.md, "Transactions"): a read_committed reader must never see the
    /// marker without the entry. A failure fails the append as an index write does.
    pub(super) fn index_aborted_txn(
        &self,
        active: &Arc<Segment>,
        at: u64,
        pid: i64,
        first: i64,
        marker_offset: i64,
    ) -> Result<(), AppendError> {
        let entry = sluice_format::txn::TxnIndexEntry {
            producer_id: pid,
            first_offset: first,
            last_offset: marker_offset,
            last_stable_offset: self.shared.read().txns.stable_after(pid, marker_offset),
        };
        #[cfg(test)]
        crate::faults::fire(&mut self.faults.lock().index_write, rustix::io::Errno::IO)
            .map_err(|e| self.write_failed(active, at, e))?;
        active
            .txn
            .lock()
            .append(&active.dir, active.base_offset, entry)
            .map_err(|e| self.write_failed(active, at, e))?;
        Ok(())
    }

    /// Make a written append visible, in this order: the active segment's indexes, size,
    /// next offset and recent batches; the writer's index cursor; the verifications it ends;
    /// the producers' state; then the log end, the transactions it opened or ended and the
    /// last stable offset. Readers never see a partial append and never wait for the writer
    /// (docs/log-format.md, "Write path"). Returns whether a flush is due
    /// (`flush.messages` / `flush.ms`, counted from the synced offset) and the log start.
    pub(super) fn publish_append(
        &self,
        w: &mut Writer,
        req: &AppendReq<'_>,
        tail: Tail,
        adm: Admitted,
        written: Written,
    ) -> (bool, i64) {
        let Written {
            active,
            at,
            len,
            enc,
            index_written,
        } = written;
        let new_size = at + len as u64;
        let (cursor, end) = (enc.cursor, enc.end);
        publish_segment(&active, enc, new_size, index_written, req.now_ms);
        w.cursor = cursor;
        end_verifications(w, &req.batches);
        for (pid, entry) in adm.overlay {
            w.producers.insert(pid, entry);
        }
        let mut s = self.shared.write();
        s.leo = end;
        s.active_size = new_size;
        self.cache_work.store(true, Ordering::Release);
        self.flush_work.store(true, Ordering::Release);
        for &(pid, first, bi) in &adm.started {
            let pos = at + req.batches[bi].position as u64;
            s.txns.start(
                pid,
                SyncedMark {
                    offset: first,
                    base: active.base_offset,
                    pos,
                },
            );
        }
        let hw = high_watermark_of(&s);
        if let Some((_, first, _)) = adm.completed {
            s.txns.complete(first, tail.leo, hw);
        }
        s.txns.published_to(hw);
        let since = *s.unflushed_since.get_or_insert(req.now_ms);
        let unflushed = s.leo - s.synced;
        let due = unflushed >= req.cfg.flush_messages
            || req.now_ms.saturating_sub(since) >= req.cfg.flush_ms;
        (due, s.log_start)
    }

    /// A new leader epoch starts at this append (at `leo`): into the epoch cache, and
    /// `leader-epoch-checkpoint` written through the gate (`persist_epochs`). Epochs only
    /// grow along the log (docs/log-format.md, `leader-epoch-checkpoint`; docs/cluster.md,
    /// "Fencing", point 3): an older or equal epoch changes nothing.
    pub(super) fn note_leader_epoch(&self, epoch: i32, leo: i64) {
        if epoch < 0 {
            return;
        }
        let assigned = {
            let mut ep = self.epochs.lock();
            ep.latest_epoch().is_none_or(|l| epoch > l) && ep.assign(epoch, leo)
        };
        if assigned {
            self.persist_epochs();
        }
    }
}

/// The sequence verdict on batch `h` against its producer's entry `current`: a
/// coordinator's batches carry no sequences, so only their epoch is checked (an older one
/// is fenced); a client's go through [`ProducerStates::check`].
pub(super) fn sequence_verdict(
    current: Option<&ProducerEntry>,
    h: &BatchHeader,
    coordinator: bool,
) -> Result<SeqCheck, SeqError> {
    match current {
        Some(e) if coordinator && h.producer_epoch < e.epoch => Err(SeqError::Fenced {
            epoch: h.producer_epoch,
            current: e.epoch,
        }),
        _ if coordinator => Ok(SeqCheck::Accept),
        _ => ProducerStates::check(current, h),
    }
}

/// The active segment's part of a publish: its in-memory indexes (and how many of their
/// entries the files hold, when the append wrote them), size, next offset, recent batches,
/// largest timestamp, and the time it started being written (the first batch's timestamp,
/// for `segment.ms`).
fn publish_segment(
    active: &Segment,
    enc: Encoded,
    new_size: u64,
    index_written: bool,
    now_ms: i64,
) {
    let mut m = active.meta.write();
    if !enc.new_oi.is_empty() {
        Arc::make_mut(m.offset_index.get_or_insert_with(Default::default)).extend(enc.new_oi);
    }
    if !enc.new_ti.is_empty() {
        Arc::make_mut(m.time_index.get_or_insert_with(Default::default)).extend(enc.new_ti);
    }
    if m.size == 0 {
        m.rolling_ts = enc.first_ts.filter(|t| *t >= 0).unwrap_or(now_ms);
    }
    if index_written {
        m.index_on_disk = (
            m.offset_index.as_ref().map_or(0, |v| v.len()),
            m.time_index.as_ref().map_or(0, |v| v.len()),
        );
    }
    m.size = new_size;
    m.next_offset = enc.end;
    for b in enc.recent {
        m.recent.push(b);
    }
    m.max_ts = enc.cursor.max_ts;
    m.off_max_ts = enc.cursor.off_max_ts;
    m.mtime_ms = now_ms;
}

/// A transactional append (data or marker) ends the producer's verification: its
/// transaction is open here now, or ended (Kafka's `updateProducers`). Except a marker
/// ending a transaction of an older epoch than the verification's: with transaction version
/// 2 the next transaction (at the bumped epoch) can start verifying before the previous
/// one's marker lands, and that marker ends the previous transaction, not the one the
/// verdict will be about (`keeps_verification`). Runs before the append's producer state is
/// applied.
fn end_verifications(w: &mut Writer, batches: &[BatchRef]) {
    for b in batches.iter().filter(|b| b.header.is_transactional()) {
        let pid = b.header.producer_id;
        let keep = b.header.is_control()
            && w.verifying
                .get(&pid)
                .is_some_and(|v| keeps_verification(w.producers.get(pid), v.epoch));
        if !keep {
            w.verifying.remove(&pid);
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used)]

    use std::path::Path;
    use std::sync::atomic::AtomicUsize;

    use sluice_format::{validate_batch, BatchBuilder};

    use super::*;
    use crate::tests::{cfg, NOW};
    use crate::{LogManager, MetaProperties, WriteGate};

    /// A manager over `dir` and a log of partition `a-0` opened in it at leader epoch 3.
    pub(in crate::log) fn open_log(dir: &Path, c: LogConfig) -> (LogManager, Arc<Log>) {
        let m = LogManager::open(
            vec![dir.to_path_buf()],
            MetaProperties {
                node_id: 1,
                cluster_id: "test-cluster-id-00000A".into(),
            },
        )
        .unwrap();
        let tp = TopicPartition {
            topic: "a".into(),
            partition: 0,
        };
        let log = m.open_log(&tp, uuid::Uuid::from_u128(7), c, 3).unwrap();
        (m, log)
    }

    /// A batch of `n` records, each with a key.
    pub(in crate::log) fn batch(n: usize, tag: &str) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for i in 0..n {
            b = b.record(
                NOW + i as i64,
                Some(b"k"),
                Some(format!("{tag}-{i}").as_bytes()),
            );
        }
        b.build()
    }

    /// A one-record batch of producer `pid`.
    pub(in crate::log) fn pbatch(pid: i64, epoch: i16, seq: i32, transactional: bool) -> Vec<u8> {
        let mut b = BatchBuilder::new().producer(pid, epoch, seq);
        b.transactional = transactional;
        b.record(NOW, None, Some(b"v")).build()
    }

    fn header(bytes: &[u8]) -> BatchHeader {
        BatchHeader::decode(bytes).unwrap()
    }

    fn req<'a>(log: &Log, records: &'a [u8]) -> AppendReq<'a> {
        let (cfg, batches) = log.validate_append(records, false, false).unwrap();
        AppendReq {
            records,
            batches,
            marker: None,
            coordinator: false,
            verify: None,
            cfg,
            now_ms: NOW,
        }
    }

    #[test]
    fn validate_append_refuses_what_the_bytes_alone_refuse() {
        let d = tempfile::tempdir().unwrap();
        let c = LogConfig {
            max_message_bytes: 200,
            segment_bytes: 300,
            ..cfg()
        };
        let (_m, log) = open_log(d.path(), c);
        type Validated = Result<(LogConfig, Vec<BatchRef>), AppendError>;
        let invalid = |r: Validated| matches!(r, Err(AppendError::Invalid { .. }));
        let too_large = |r: Validated| matches!(r, Err(AppendError::TooLarge { .. }));
        assert!(invalid(log.validate_append(&[], false, false)));
        assert!(too_large(log.validate_append(
            &batch(20, "big"),
            false,
            false
        )));
        // Batches each within max.message.bytes, together over one segment.
        let many: Vec<u8> = (0..5).flat_map(|i| batch(1, &format!("m{i}"))).collect();
        assert!(batch(1, "m0").len() <= 200 && many.len() > 300);
        assert!(
            too_large(log.validate_append(&many, false, false)),
            "over one segment"
        );
        // A control batch: a client may not write one; the marker the log built passes.
        let marker = sluice_format::txn::build_marker(5, 0, 0, 1, NOW);
        assert!(invalid(log.validate_append(&marker, false, false)));
        assert!(log.validate_append(&marker, true, false).is_ok());
        // A producer id with no sequence: a coordinator's only.
        let unsequenced = pbatch(5, 0, -1, false);
        assert!(invalid(log.validate_append(&unsequenced, false, false)));
        assert!(log.validate_append(&unsequenced, false, true).is_ok());
        // A damaged batch is corrupt.
        let mut torn = batch(1, "t");
        let last = torn.len() - 1;
        torn[last] ^= 0xff;
        assert!(matches!(
            log.validate_append(&torn, false, false),
            Err(AppendError::Corrupt { .. })
        ));
        // A closed log refuses before anything else.
        log.mark_deleted();
        assert!(matches!(
            log.validate_append(&batch(1, "x"), false, false),
            Err(AppendError::Io { .. })
        ));
        assert_eq!(log.log_end_offset(), 0);
    }

    #[test]
    fn sequence_verdict_checks_only_the_epoch_of_a_coordinators_batches() {
        let mut entry = ProducerEntry {
            epoch: 5,
            ..ProducerEntry::default()
        };
        ProducerStates::apply(&mut entry, &header(&pbatch(9, 5, 0, false)), 0, NOW);
        let gap = header(&pbatch(9, 5, 7, false));
        assert_eq!(
            sequence_verdict(Some(&entry), &gap, false),
            Err(SeqError::OutOfOrder {
                expected: 1,
                got: 7
            })
        );
        assert_eq!(
            sequence_verdict(Some(&entry), &gap, true),
            Ok(SeqCheck::Accept)
        );
        let old = header(&pbatch(9, 4, 1, false));
        for coordinator in [false, true] {
            assert_eq!(
                sequence_verdict(Some(&entry), &old, coordinator),
                Err(SeqError::Fenced {
                    epoch: 4,
                    current: 5
                })
            );
        }
        let retry = header(&pbatch(9, 5, 0, false));
        assert!(matches!(
            sequence_verdict(Some(&entry), &retry, false),
            Ok(SeqCheck::Duplicate(_))
        ));
        assert_eq!(sequence_verdict(None, &gap, false), Ok(SeqCheck::Accept));
    }

    #[test]
    fn check_verification_wants_the_current_guard_and_the_lowest_sequence_first() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        let guard = VerificationGuard::new();
        let mut w = log.writer.lock();
        w.verifying.insert(
            9,
            crate::producer::Verifying {
                guard,
                started_ms: NOW,
                lowest_seq: Some(3),
                epoch: 0,
            },
        );
        let h = |seq| header(&pbatch(9, 0, seq, true));
        let txn_state =
            |r: Result<(), AppendError>| matches!(r, Err(AppendError::InvalidTxnState { .. }));
        assert!(log
            .check_verification(&w, &h(3), None, Some(Some(guard)))
            .is_ok());
        assert!(matches!(
            log.check_verification(&w, &h(4), None, Some(Some(guard))),
            Err(AppendError::OutOfOrderSequence {
                expected: 3,
                got: 4,
                ..
            })
        ));
        assert!(txn_state(log.check_verification(
            &w,
            &h(3),
            None,
            Some(None)
        )));
        let other = VerificationGuard::new();
        assert!(txn_state(log.check_verification(
            &w,
            &h(3),
            None,
            Some(Some(other))
        )));
        // Not through `append_verified`: nothing to check.
        assert!(log.check_verification(&w, &h(3), None, None).is_ok());
        // A batch of the transaction already open here opens nothing.
        let open = ProducerEntry {
            epoch: 0,
            txn_first: Some(0),
            ..ProducerEntry::default()
        };
        assert!(log
            .check_verification(&w, &h(4), Some(&open), Some(None))
            .is_ok());
        // A non-transactional batch neither.
        let plain = header(&pbatch(9, 0, 4, false));
        assert!(log.check_verification(&w, &plain, None, Some(None)).is_ok());
    }

    #[test]
    fn check_marker_producer_refuses_a_deposed_coordinator_and_ends_the_transaction() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        log.append(
            Bytes::from(pbatch(9, 0, 0, true)),
            AppendOrigin::Client,
            NOW,
        )
        .unwrap();
        let marker = |epoch, coordinator_epoch, control| MarkerArgs {
            producer_id: 9,
            producer_epoch: epoch,
            coordinator_epoch,
            control,
        };
        let w = log.writer.lock();
        let (entry, completed) = log
            .check_marker_producer(&w, marker(0, 2, crate::ControlType::Abort), NOW)
            .unwrap();
        assert_eq!(completed, Some((9, 0, true)));
        assert_eq!((entry.coordinator_epoch, entry.txn_first), (2, None));
        drop(w);
        log.append_marker(9, 0, 2, crate::ControlType::Commit, NOW)
            .unwrap();
        let w = log.writer.lock();
        assert!(matches!(
            log.check_marker_producer(&w, marker(0, 1, crate::ControlType::Commit), NOW),
            Err(AppendError::CoordinatorFenced {
                coordinator_epoch: 1,
                current: 2,
                ..
            })
        ));
        assert!(matches!(
            log.check_marker_producer(&w, marker(-1, 2, crate::ControlType::Commit), NOW),
            Err(AppendError::ProducerFenced { .. })
        ));
        let (_, completed) = log
            .check_marker_producer(&w, marker(0, 2, crate::ControlType::Commit), NOW)
            .unwrap();
        assert_eq!(completed, None, "no transaction open any more");
    }

    #[test]
    fn check_producers_stops_at_the_first_retry_and_applies_nothing() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        log.append(
            Bytes::from(pbatch(9, 0, 0, false)),
            AppendOrigin::Client,
            NOW,
        )
        .unwrap();
        let mut records = pbatch(9, 0, 1, false);
        records.extend(pbatch(9, 0, 2, true));
        let r = req(&log, &records);
        let w = log.writer.lock();
        let Admission::Admitted(adm) = log.check_producers(&w, &r, log.tail()).unwrap() else {
            panic!("not a retry");
        };
        assert_eq!(adm.last_offset, 2);
        assert_eq!(adm.started, vec![(9, 2, 1)]);
        assert_eq!(adm.overlay.len(), 1);
        assert_eq!(
            w.producers.get(9).unwrap().batches.len(),
            1,
            "nothing applied"
        );
        let retried = pbatch(9, 0, 0, false);
        let r = req(&log, &retried);
        let Admission::Duplicate(outcome) = log.check_producers(&w, &r, log.tail()).unwrap() else {
            panic!("a retry");
        };
        assert_eq!((outcome.base_offset, outcome.duplicate), (0, true));
    }

    #[test]
    fn a_duplicate_waits_for_an_fsync_only_while_its_original_is_unsynced() {
        let d = tempfile::tempdir().unwrap();
        let synced_each = LogConfig {
            flush_messages: 1,
            ..cfg()
        };
        let (_m, log) = open_log(d.path(), synced_each.clone());
        log.append(Bytes::from(batch(3, "a")), AppendOrigin::Client, NOW)
            .unwrap();
        let meta = BatchMeta {
            first_seq: 0,
            last_seq: 2,
            first_offset: 0,
            last_offset: 2,
        };
        assert!(log.duplicate_outcome(&synced_each, meta, 0).flush_due);
        assert!(
            !log.duplicate_outcome(&cfg(), meta, 0).flush_due,
            "no flush policy"
        );
        log.flush().unwrap();
        let out = log.duplicate_outcome(&synced_each, meta, 0);
        assert!(!out.flush_due, "its original is synced");
        assert_eq!(
            (out.base_offset, out.last_offset, out.duplicate),
            (0, 2, true)
        );
    }

    #[test]
    fn encode_append_patches_copies_and_writes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        let mut records = batch(2, "a");
        let first_len = records.len();
        records.extend(batch(3, "b"));
        let original = records.clone();
        let r = req(&log, &records);
        let enc = log.encode_append(IndexCursor::new(0), &r, 10, 100).unwrap();
        assert!(enc.copy.is_none());
        let heads: Vec<BatchHeader> = enc.headers.iter().map(|h| header(h)).collect();
        assert_eq!((heads[0].base_offset, heads[1].base_offset), (10, 12));
        assert!(heads.iter().all(|h| h.partition_leader_epoch == 3));
        assert_eq!(enc.end, 15);
        let positions: Vec<(i64, u64)> = enc
            .recent
            .iter()
            .map(|b| (b.base_offset, b.position))
            .collect();
        assert_eq!(positions, vec![(10, 100), (12, 100 + first_len as u64)]);
        assert_eq!(records, original, "the request is left as it came");
        // Each patched header then the rest of its batch from the request.
        let parts: Vec<u8> = enc
            .parts(&records, &r.batches)
            .iter()
            .flat_map(|p| p.iter().copied())
            .collect();
        assert_eq!(parts.len(), records.len());
        assert_eq!(
            parse_batches(&parts, None).unwrap().len(),
            2,
            "CRCs still hold"
        );
        // LogAppendTime: a whole copy with the time in it, the CRC recomputed.
        let lat = AppendReq {
            cfg: LogConfig {
                timestamp_type: TimestampType::LogAppendTime,
                ..cfg()
            },
            now_ms: NOW + 5000,
            ..req(&log, &records)
        };
        let enc = log.encode_append(IndexCursor::new(0), &lat, 0, 0).unwrap();
        let copy = enc.copy.as_deref().unwrap();
        let h = validate_batch(&copy[..first_len]).unwrap();
        assert_eq!(h.max_timestamp, NOW + 5000);
        assert_eq!(log.log_end_offset(), 0);
        assert_eq!(log.size_bytes(), 0, "nothing written");
    }

    #[test]
    fn write_index_due_writes_the_entries_in_groups() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        let active = log.shared.read().segments.last().cloned().unwrap();
        let path = seg_path(&active.dir, 0, SegmentFileKind::Index);
        let entries: Vec<OffsetIndexEntry> = (0..INDEX_WRITE_ENTRIES as i32)
            .map(|i| OffsetIndexEntry {
                relative_offset: i,
                position: i * 10,
            })
            .collect();
        let held_back = &entries[..INDEX_WRITE_ENTRIES - 1];
        assert!(!log.write_index_due(&active, 0, held_back, &[]).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        assert!(log.write_index_due(&active, 0, &entries, &[]).unwrap());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            (INDEX_WRITE_ENTRIES * OFFSET_INDEX_ENTRY_LEN) as u64
        );
    }

    #[test]
    fn index_aborted_txn_lists_the_abort() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        let active = log.shared.read().segments.last().cloned().unwrap();
        log.index_aborted_txn(&active, 0, 9, 0, 5).unwrap();
        let listed = active.aborted_txns().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (
                listed[0].producer_id,
                listed[0].first_offset,
                listed[0].last_offset
            ),
            (9, 0, 5)
        );
    }

    #[test]
    fn note_leader_epoch_only_moves_forward() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        log.note_leader_epoch(3, 0);
        log.note_leader_epoch(2, 5);
        log.note_leader_epoch(3, 6);
        log.note_leader_epoch(-1, 7);
        assert_eq!(log.epoch_entries(), vec![(3, 0)]);
        log.note_leader_epoch(4, 8);
        assert_eq!(log.epoch_entries(), vec![(3, 0), (4, 8)]);
        let text =
            std::fs::read_to_string(log.dir().join(crate::epoch::LEADER_EPOCH_CHECKPOINT)).unwrap();
        assert!(text.ends_with("4 8\n"), "{text}");
    }

    /// Lets `allow` checks pass, then refuses every one; counts them.
    #[derive(Debug)]
    struct CountingGate {
        checks: AtomicUsize,
        allow: AtomicUsize,
    }

    impl WriteGate for CountingGate {
        fn check(&self, _: &TopicPartition, _: uuid::Uuid, _: i32) -> Result<(), String> {
            let n = self.checks.fetch_add(1, Ordering::SeqCst);
            if n < self.allow.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err(format!("check {n} refused"))
            }
        }
    }

    /// An append that rolls, through `write_append` under a gate that lets `allow` checks
    /// pass: its result, the checks asked, and the sizes of the segments' `.log` files.
    fn rolling_write(allow: usize) -> (Result<(), AppendError>, usize, Vec<u64>) {
        let d = tempfile::tempdir().unwrap();
        let first = batch(3, "a");
        let c = LogConfig {
            segment_bytes: first.len() as u64 * 3 / 2,
            ..cfg()
        };
        let (m, log) = open_log(d.path(), c);
        let gate = Arc::new(CountingGate {
            checks: AtomicUsize::new(0),
            allow: AtomicUsize::new(usize::MAX),
        });
        m.set_write_gate(gate.clone());
        log.append(Bytes::from(first), AppendOrigin::Client, NOW)
            .unwrap();
        gate.checks.store(0, Ordering::SeqCst);
        gate.allow.store(allow, Ordering::SeqCst);
        let second = batch(3, "b");
        let r = req(&log, &second);
        let mut w = log.writer.lock();
        let tail = log.tail();
        let Admission::Admitted(adm) = log.check_producers(&w, &r, tail).unwrap() else {
            panic!("not a retry");
        };
        let written = log.write_append(&mut w, &r, tail, &adm).map(|_| ());
        drop(w);
        let sizes = log
            .shared
            .read()
            .segments
            .iter()
            .map(|s| {
                std::fs::metadata(seg_path(&s.dir, s.base_offset, SegmentFileKind::Log))
                    .unwrap()
                    .len()
            })
            .collect();
        (written, gate.checks.load(Ordering::SeqCst), sizes)
    }

    #[test]
    fn write_append_asks_the_gate_before_the_roll_and_again_before_data_in_a_new_segment() {
        let (written, checks, sizes) = rolling_write(usize::MAX);
        assert!(written.is_ok(), "{written:?}");
        assert_eq!(sizes.len(), 2, "the append rolled");
        assert!(sizes[1] > 0);
        // Refused at the first check: nothing rolled, nothing written.
        let (written, _, sizes) = rolling_write(0);
        assert!(
            matches!(written, Err(AppendError::Fenced(_))),
            "{written:?}"
        );
        assert_eq!(sizes.len(), 1);
        // Refused at the last check, after the roll: the new segment gets no data.
        let (written, last_checks, sizes) = rolling_write(checks - 1);
        assert!(
            matches!(written, Err(AppendError::Fenced(_))),
            "{written:?}"
        );
        assert_eq!(last_checks, checks);
        assert_eq!(sizes.len(), 2, "the roll went through");
        assert_eq!(sizes[1], 0, "no data after the refused check");
    }
}
