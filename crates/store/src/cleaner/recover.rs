//! What opening a log does with the leftovers of a cleaning cut short (a crash, a failed
//! rename, a switch the write gate refused), after Kafka's `LogLoader` rules for `.cleaned` and
//! `.swap` files, with one difference: a `.swap` is completed only when the switch had begun.
//!
//! - `*.cleaned` (any writer's token): an unfinished cleaned segment; removed.
//! - `<base>.log.swap` whose switch had begun (the segment at `base`, the first of the group
//!   it replaces, is renamed aside to `<base>.log.<tag>.deleted` under a tag naming `base`,
//!   and not there under its own name): complete; the segments it covers (base offsets in
//!   `[base, its next offset)`) are removed and it takes its segment name, its
//!   `.index.swap`/`.timeindex.swap`/`.txnindex.swap` with it (a missing index is rebuilt
//!   from the data, as always).
//! - a swap whose switch an earlier open blocked (a directory under the name of its first
//!   rename aside, [`block_late_switch`]): removed; it never began and never will.
//! - any other `<base>.log.swap`: removed, with its index `.swap` files. The segments it was
//!   made from were all still in place when it was left (a crash before the switch, or a
//!   switch refused by the write gate), so nothing is lost; but they may have changed since:
//!   in a shared log dir a former owner's refused swap stays behind, and the next owner may
//!   have deleted those segments (retention, DeleteRecords) or cleaned them again. Completing
//!   it would bring back deleted records below the log start, or replace newer segments.
//! - an index `.swap` without its `.log.swap`: the `.log` was renamed in already; removed.
//!
//! Kafka also drops `.swap` files above a leftover `.cleaned` one (its segment splits make
//! several files per operation); each of Sluice's swaps stands alone. `*.deleted` files are
//! removed by the loader itself, after this.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::Path;

use sluice_format::names::parse_segment_file_name;
use sluice_format::SegmentFileKind;

use sluice_format::names::DELETED_SUFFIX;

use super::swap::{swap_path, swap_tag_names, CLEANED_SUFFIX, SWAP_SUFFIX};
use crate::fsutil::sync_dir;
use crate::segment::{seg_path, BatchScanner, ScanError, SEGMENT_KINDS};
use crate::TopicPartition;

/// Remove or complete the cleaner's leftovers in the partition directory `dir`.
/// `shared`: a directory shared by the brokers of a cluster, where a former owner's switch
/// may still be in flight ([`block_late_switch`]); `announced`: the last switch a former owner
/// recorded before it began (`WriteGate::announce_switch`).
/// `listing`: the directory's entries as listed just before (one listing serves the whole
/// open); returns whether anything was removed or renamed (the listing is then out of date).
pub(crate) fn complete_swaps(
    dir: &Path,
    tp: &TopicPartition,
    shared: bool,
    announced: Option<crate::CleanerSwitch>,
    listing: &[std::fs::DirEntry],
) -> io::Result<bool> {
    complete_swaps_listed(dir, tp, shared, announced, listing, &mut Vec::new())
}

/// [`complete_swaps`] on a listing of its own, noting in `removed` every file it asks to
/// remove by name (whether or not it was there): what a deposed opener's removals stalled in
/// flight could land on.
#[cfg(test)]
pub(crate) fn complete_swaps_removing(
    dir: &Path,
    tp: &TopicPartition,
    shared: bool,
    announced: Option<crate::CleanerSwitch>,
    removed: &mut Vec<std::path::PathBuf>,
) -> io::Result<()> {
    let listing = std::fs::read_dir(dir)?.collect::<io::Result<Vec<_>>>()?;
    complete_swaps_listed(dir, tp, shared, announced, &listing, removed).map(|_| ())
}

/// [`complete_swaps`], noting in `removed` every file it asks to remove by name.
///
/// The steps: go through the listing for the leftovers, removing every `.cleaned`
/// ([`Leftovers::list`]); refuse a stale listing that misses an announced switch's swap
/// ([`check_announced_swap_listed`]); then for each swap, in order of base: remove index
/// swaps left without their `.log` swap ([`remove_index_swaps`]), remove a swap whose switch
/// had not begun ([`remove_unbegun_swap`]), complete any other ([`complete_swap`]); last,
/// fsync the directory if anything changed.
fn complete_swaps_listed(
    dir: &Path,
    tp: &TopicPartition,
    shared: bool,
    announced: Option<crate::CleanerSwitch>,
    listing: &[std::fs::DirEntry],
    removed: &mut Vec<std::path::PathBuf>,
) -> io::Result<bool> {
    let mut left = Leftovers::list(listing, tp, removed)?;
    if let Some(switch) = announced.filter(|_| shared) {
        check_announced_swap_listed(dir, switch, &left)?;
    }
    for ((base, tag), kinds) in std::mem::take(&mut left.swaps) {
        left.changed = true;
        let tag = tag.as_deref();
        if !kinds.contains(SegmentFileKind::Log.suffix()) {
            remove_index_swaps(dir, base, tag, removed)?;
        } else if left.logs.contains(&base) || !switch_had_begun(&left, base, tag) {
            remove_unbegun_swap(dir, tp, shared, base, tag, removed)?;
        } else {
            complete_swap(dir, tp, &mut left.logs, base, tag, &kinds, removed)?;
        }
    }
    if left.changed {
        sync_dir(dir)?;
    }
    Ok(left.changed)
}

/// What one listing of a partition directory shows of the cleaner's switches.
#[derive(Debug, Default)]
struct Leftovers {
    /// (base, the switch's tag: None for Kafka's untagged names) -> the kinds of its `.swap`
    /// files left.
    swaps: BTreeMap<(i64, Option<String>), BTreeSet<&'static str>>,
    /// Bases of the segments' `.log` files.
    logs: BTreeSet<i64>,
    /// (base, tag) of `.log` files renamed aside by a switch whose tag names the swap's base.
    aside: BTreeSet<(i64, String)>,
    /// Bases of `.log` files Kafka renamed aside (`<base>.log.deleted`, untagged).
    kafka_aside: BTreeSet<i64>,
    /// (base, tag) of switches an earlier open blocked ([`block_late_switch`]: a directory
    /// under the name of their first rename aside, made over nothing): they never began and
    /// never will, so their swaps are removed, never completed.
    blocked: BTreeSet<(i64, String)>,
    /// Something was removed or renamed: the directory is fsynced at the end.
    changed: bool,
}

impl Leftovers {
    /// Goes through the listing of a directory, removing every `*.cleaned` file as it goes
    /// (any writer's token: an unfinished cleaned segment, which no switch took up;
    /// docs/compaction.md, "Recovery"). Entries an NFS client hides
    /// (`fsutil::listing_hides`) are not looked at.
    fn list(
        listing: &[std::fs::DirEntry],
        tp: &TopicPartition,
        removed: &mut Vec<std::path::PathBuf>,
    ) -> io::Result<Leftovers> {
        let mut left = Leftovers::default();
        for entry in listing {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if crate::fsutil::listing_hides(name) {
                continue;
            }
            if name.ends_with(CLEANED_SUFFIX) {
                tracing::info!(?tp, file = name, "removing an unfinished cleaned segment");
                removed.push(entry.path());
                std::fs::remove_file(entry.path())?;
                left.changed = true;
            } else if let Some(stem) = name.strip_suffix(SWAP_SUFFIX) {
                match parse_swap_stem(stem) {
                    Some((base, kind, tag)) => {
                        left.swaps
                            .entry((base, tag))
                            .or_default()
                            .insert(kind.suffix());
                    }
                    None => tracing::warn!(?tp, file = name, "ignoring an unknown .swap file"),
                }
            } else if let Some((base, SegmentFileKind::Log)) = parse_segment_file_name(name) {
                left.logs.insert(base);
            } else if let Some(switched) = switched_aside(name) {
                if entry.file_type()?.is_dir() {
                    left.blocked.insert(switched);
                } else {
                    left.aside.insert(switched);
                }
            } else if let Some((base, SegmentFileKind::Log)) = name
                .strip_suffix(DELETED_SUFFIX)
                .and_then(parse_segment_file_name)
            {
                left.kafka_aside.insert(base);
            }
        }
        Ok(left)
    }
}

/// The base, kind and tag of a `.swap` file, from its name without the `.swap`: Kafka's
/// `<base>.<kind>` (no tag), or a switch's `<base>.<kind>.<tag>` whose tag names `base`
/// (`swap::swap_tag_names`). None for anything else: such a file is no switch's and is left
/// alone.
fn parse_swap_stem(stem: &str) -> Option<(i64, SegmentFileKind, Option<String>)> {
    match parse_segment_file_name(stem) {
        Some((base, kind)) => Some((base, kind, None)),
        None => stem.rsplit_once('.').and_then(|(file, tag)| {
            parse_segment_file_name(file)
                .filter(|(base, _)| swap_tag_names(tag, *base))
                .map(|(base, kind)| (base, kind, Some(tag.to_string())))
        }),
    }
}

/// In a shared directory, the switch a former owner announced (`WriteGate::announce_switch`),
/// when the listing `left` shows no swap of it: looked up by name (a lookup asks the server;
/// a listing may be an NFS client's cached one). With no swap file it never made one (its
/// first rename aside comes after the swap exists, and after a gate check that a deposed
/// owner fails) or it completed (its swap renamed in): nothing of it can still take a
/// segment. With one, the listing is stale: refused, to be tried again, so that the open
/// that goes on sees the swap and blocks the switch or completes it (docs/compaction.md,
/// "Recovery"; `an_open_whose_listing_misses_the_swap_still_blocks_the_announced_switch`).
fn check_announced_swap_listed(
    dir: &Path,
    switch: crate::CleanerSwitch,
    left: &Leftovers,
) -> io::Result<()> {
    let tag = super::swap::switch_tag(switch);
    let listed = left.swaps.contains_key(&(switch.base, Some(tag.clone())));
    let swap = swap_path(dir, switch.base, SegmentFileKind::Log, Some(&tag));
    if !listed && !left.blocked.contains(&(switch.base, tag.clone())) && swap.exists() {
        return Err(io::Error::other(format!(
            "{} is not in the listing of its directory: a stale view; opening again",
            swap.display()
        )));
    }
    Ok(())
}

/// True if the switch of the swap at `base` tagged `tag` had begun, by the listing `left`:
/// a tagged switch, when its first old segment's `.log` is aside under its tag and no
/// earlier open blocked it; one of Kafka's names, when one is aside under any tag naming its
/// base, or under Kafka's own `.deleted` name (a Kafka log dir whose cleaning stopped
/// mid-switch: Kafka completes it, so does this). Only a switch that had begun is completed
/// (docs/compaction.md, "Recovery").
fn switch_had_begun(left: &Leftovers, base: i64, tag: Option<&str>) -> bool {
    !tag.is_some_and(|t| left.blocked.contains(&(base, t.to_string())))
        && (left
            .aside
            .iter()
            .any(|(b, t)| *b == base && tag.is_none_or(|tag| tag == t))
            || (tag.is_none() && left.kafka_aside.contains(&base)))
}

/// Removes the index `.swap` files at `base` of a swap whose `.log.swap` is gone: the `.log`
/// was renamed in already (docs/compaction.md, "Recovery").
fn remove_index_swaps(
    dir: &Path,
    base: i64,
    tag: Option<&str>,
    removed: &mut Vec<std::path::PathBuf>,
) -> io::Result<()> {
    for kind in [
        SegmentFileKind::Index,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::TxnIndex,
    ] {
        remove_if_exists(&swap_path(dir, base, kind, tag), removed)?;
    }
    Ok(())
}

/// Removes the swap at `base` whose switch had not begun (no first segment aside under its
/// tag, [`switch_had_begun`], or the segment at `base` still under its name), with its index
/// swaps: the segments it was made from were all in place when it was left (a crash before
/// the switch, or a switch the write gate refused), so nothing is lost, and they may have
/// changed since (a later owner's retention, DeleteRecords or cleaning), so completing it
/// could bring deleted records back. In a shared directory its switch is first blocked for
/// good ([`block_late_switch`]): a deposed owner's first rename aside, stalled in flight,
/// then lands on nothing (docs/compaction.md, "Recovery").
fn remove_unbegun_swap(
    dir: &Path,
    tp: &TopicPartition,
    shared: bool,
    base: i64,
    tag: Option<&str>,
    removed: &mut Vec<std::path::PathBuf>,
) -> io::Result<()> {
    if let Some(tag) = tag.filter(|_| shared) {
        block_late_switch(dir, base, tag)?;
    }
    tracing::info!(?tp, segment = base,
        "removing a cleaned segment whose switch had not begun (its segments were in place when it was left)");
    for kind in SEGMENT_KINDS {
        remove_if_exists(&swap_path(dir, base, kind, tag), removed)?;
    }
    Ok(())
}

/// Completes the swap at `base` tagged `tag`, whose switch had begun, with its `.swap`
/// files of `kinds`: the segments of `logs` whose base lies in `[base, its next offset)` are
/// removed and the swap takes its segment names, indexes first, the `.log` last, so that
/// `logs` then lists it (docs/compaction.md, "Recovery"). Nothing at `base` that the swap
/// brings is removed by name first: its renames replace those files.
fn complete_swap(
    dir: &Path,
    tp: &TopicPartition,
    logs: &mut BTreeSet<i64>,
    base: i64,
    tag: Option<&str>,
    kinds: &BTreeSet<&'static str>,
    removed: &mut Vec<std::path::PathBuf>,
) -> io::Result<()> {
    let next = swap_next_offset(dir, base, tag, tp)?;
    let covered: Vec<i64> = logs.range(base..next.max(base + 1)).copied().collect();
    tracing::info!(?tp, segment = base, next_offset = next, replaces = ?covered,
        "completing the swap of a cleaned segment");
    // The first old segment's files too, while the switch had not begun renaming the
    // swap's files in (its `.index.swap`, which every cleaning makes and renames in
    // first, is still there): its `.log` is aside, but a switch that failed after that
    // rename may have left its indexes under their names, and the cleaned segment has a
    // `.txnindex` only if it keeps aborted transactions (a stale one would hide committed
    // records). Once renaming in had begun, every old file had been renamed aside (step 4
    // renames the swap's files only then), and what is at `base` is the cleaned segment's.
    //
    // Nothing at `base` that the swap brings is removed by name: its rename replaces the
    // old file in one step. A removal by name at `base` issued by an opener deposed since
    // and stalled in flight would land on the cleaned segment's file that the next owner
    // renamed into place meanwhile (adversary on 5a48f52); its `.log` is aside anyway
    // (the switch had begun). What the swap does not bring (an index it lacks, a
    // `.txnindex` when it keeps no aborted transaction) is removed: no later owner makes
    // those files at `base`. The segments it covers past `base` lie inside the cleaned
    // segment's offsets, where no segment is made again.
    let renaming_in = !kinds.contains(SegmentFileKind::Index.suffix());
    if !renaming_in {
        for kind in SEGMENT_KINDS {
            if kind != SegmentFileKind::Log && !kinds.contains(kind.suffix()) {
                remove_if_exists(&seg_path(dir, base, kind), removed)?;
            }
        }
    }
    for old in covered {
        for kind in SEGMENT_KINDS {
            remove_if_exists(&seg_path(dir, old, kind), removed)?;
        }
        logs.remove(&old);
    }
    for kind in [
        SegmentFileKind::Index,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::TxnIndex,
        SegmentFileKind::Log,
    ] {
        if kinds.contains(kind.suffix()) {
            std::fs::rename(swap_path(dir, base, kind, tag), seg_path(dir, base, kind))?;
        }
    }
    logs.insert(base);
    Ok(())
}

/// Make sure the switch tagged `tag` never begins, in a shared directory: a directory takes the name its first
/// rename would move `<base>.log` to (`<base>.log.<tag>.deleted`), before its swap files go.
///
/// A deposed owner's switch asks the write gate before each rename aside, so it stops after
/// at most one; but that one, the first, can stall in flight and land after this open found
/// `<base>.log` in place (the switch had not begun) and removed the swap: it would take the
/// segment this owner keeps and serves from under its name, and the next open would remove
/// it as a leftover. A rename of a file onto a directory fails (EISDIR, at the server on
/// NFS), so that late rename finds the name taken and moves nothing. The directory stays:
/// the rename may land at any time. Kafka's log loading lists files only and skips it; the
/// deferred deletion of a deleted partition removes it with the rest. If a file is already
/// there, the rename landed after this open's listing: the switch had begun after all, and
/// the open fails to be tried again, when its listing shows it.
fn block_late_switch(dir: &Path, base: i64, tag: &str) -> io::Result<()> {
    let path = blocker_path(dir, base, tag);
    match std::fs::create_dir(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(io::Error::other(format!(
            "{} appeared during the open (a switch's late rename aside); opening again",
            path.display()
        ))),
        Err(e) => Err(e),
    }
}

fn blocker_path(dir: &Path, base: i64, tag: &str) -> std::path::PathBuf {
    let mut name = seg_path(dir, base, SegmentFileKind::Log).into_os_string();
    name.push(format!(".{tag}{DELETED_SUFFIX}"));
    std::path::PathBuf::from(name)
}

/// The base offset and tag of a `<base>.log.<tag>.deleted` file that a cleaned segment's
/// switch renamed aside as the first segment of the group it replaced: the tag names that
/// base (`swap::swap_tag_names`).
pub(crate) fn switched_aside(name: &str) -> Option<(i64, String)> {
    let stem = name.strip_suffix(DELETED_SUFFIX)?;
    let (file, tag) = stem.rsplit_once('.')?;
    match parse_segment_file_name(file) {
        Some((base, SegmentFileKind::Log)) if swap_tag_names(tag, base) => {
            Some((base, tag.to_string()))
        }
        _ => None,
    }
}

fn remove_if_exists(path: &Path, removed: &mut Vec<std::path::PathBuf>) -> io::Result<()> {
    removed.push(path.to_path_buf());
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The offset after the last valid batch of a `.log.swap` (its base if it has none); a
/// damaged tail is cut.
fn swap_next_offset(
    dir: &Path,
    base: i64,
    tag: Option<&str>,
    tp: &TopicPartition,
) -> io::Result<i64> {
    let path = swap_path(dir, base, SegmentFileKind::Log, tag);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)?;
    let size = file.metadata()?.len();
    let mut scanner = BatchScanner::new(&file, 0, size, true);
    let mut next = base;
    let mut valid = 0;
    loop {
        match scanner.next_batch() {
            Ok(Some((pos, h))) => {
                next = h.next_offset();
                valid = pos + h.total_len() as u64;
            }
            Ok(None) => break,
            Err(ScanError::Io(e)) => return Err(e),
            Err(ScanError::Corrupt { pos, err }) => {
                tracing::warn!(?tp, segment = base, position = pos, error = %err,
                    "damaged cleaned segment; keeping its valid part");
                break;
            }
        }
    }
    if valid < size {
        file.set_len(valid)?;
        file.sync_all()?;
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAG: &str = "17-0123456789ab";

    #[test]
    fn a_swap_name_is_kafkas_or_tagged_with_its_own_base() {
        assert_eq!(
            parse_swap_stem("00000000000000000017.log"),
            Some((17, SegmentFileKind::Log, None))
        );
        assert_eq!(
            parse_swap_stem(&format!("00000000000000000017.index.{TAG}")),
            Some((17, SegmentFileKind::Index, Some(TAG.to_string())))
        );
        // A tag naming another base, an empty random part, no segment name: no switch's.
        for stem in [
            "00000000000000000017.log.5-0123456789ab",
            "00000000000000000017.log.17-",
            "00000000000000000017.log.cleaned",
            "x.log",
        ] {
            assert_eq!(parse_swap_stem(stem), None, "{stem}");
        }
    }

    #[test]
    fn the_listing_removes_cleaned_files_and_tells_asides_from_blockers() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let touch = |name: &str| std::fs::write(dir.join(name), b"x").unwrap();
        touch("00000000000000000000.log");
        touch("00000000000000000000.log.1234-5.cleaned");
        touch(&format!("00000000000000000017.log.{TAG}.swap"));
        touch(&format!("00000000000000000017.index.{TAG}.swap"));
        touch(&format!("00000000000000000017.log.{TAG}.deleted"));
        std::fs::create_dir(dir.join("00000000000000000030.log.30-0123456789ab.deleted")).unwrap();
        touch("00000000000000000040.log.deleted");
        touch("junk.swap");
        let tp = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        let mut removed = Vec::new();
        let listing: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        let left = Leftovers::list(&listing, &tp, &mut removed).unwrap();
        assert!(left.changed);
        assert_eq!(
            removed,
            vec![dir.join("00000000000000000000.log.1234-5.cleaned")]
        );
        assert!(!removed[0].exists());
        assert_eq!(left.logs, BTreeSet::from([0]));
        let kinds = left.swaps.get(&(17, Some(TAG.to_string())));
        assert_eq!(kinds, Some(&BTreeSet::from([".log", ".index"])));
        assert_eq!(left.swaps.len(), 1, "junk.swap is no switch's");
        assert_eq!(left.aside, BTreeSet::from([(17, TAG.to_string())]));
        assert_eq!(
            left.blocked,
            BTreeSet::from([(30, "30-0123456789ab".to_string())])
        );
        assert_eq!(left.kafka_aside, BTreeSet::from([40]));
    }

    #[test]
    fn a_switch_had_begun_once_its_first_segment_went_aside_under_its_tag() {
        let left = Leftovers {
            aside: BTreeSet::from([(17, TAG.to_string())]),
            kafka_aside: BTreeSet::from([40]),
            blocked: BTreeSet::from([(60, "60-0123456789ab".to_string())]),
            ..Leftovers::default()
        };
        assert!(switch_had_begun(&left, 17, Some(TAG)));
        assert!(
            !switch_had_begun(&left, 17, Some("17-ba9876543210")),
            "another switch's"
        );
        assert!(
            switch_had_begun(&left, 17, None),
            "Kafka's name: any tag naming its base"
        );
        assert!(switch_had_begun(&left, 40, None), "Kafka's own .deleted");
        assert!(!switch_had_begun(&left, 40, Some("40-0123456789ab")));
        assert!(
            !switch_had_begun(&left, 60, Some("60-0123456789ab")),
            "blocked"
        );
        assert!(!switch_had_begun(&left, 99, None));
    }

    #[test]
    fn a_listing_that_misses_the_announced_swap_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let switch = crate::CleanerSwitch {
            base: 17,
            id: 0x0123_4567_89ab,
        };
        assert_eq!(super::super::swap::switch_tag(switch), TAG);
        let listed_none = Leftovers::default();
        // No swap file: the switch never made one, or it completed.
        check_announced_swap_listed(dir, switch, &listed_none).unwrap();
        std::fs::write(swap_path(dir, 17, SegmentFileKind::Log, Some(TAG)), b"x").unwrap();
        let err = check_announced_swap_listed(dir, switch, &listed_none).unwrap_err();
        assert!(err.to_string().contains("a stale view"), "{err}");
        let listed = Leftovers {
            swaps: BTreeMap::from([((17, Some(TAG.to_string())), BTreeSet::from([".log"]))]),
            ..Leftovers::default()
        };
        check_announced_swap_listed(dir, switch, &listed).unwrap();
        let blocked = Leftovers {
            blocked: BTreeSet::from([(17, TAG.to_string())]),
            ..Leftovers::default()
        };
        check_announced_swap_listed(dir, switch, &blocked).unwrap();
    }
}
