//! What an owner record says of a log's sealed segments, so that a takeover trusts them
//! without opening or reading them (docs/cluster.md, fencing point 5).
//!
//! A former owner that outlives its ownership can still land a write it began before its
//! deadline (a stalled append to its active segment, a roll that creates a segment inside
//! the new owner's offsets). A takeover used to read the tail and the first batch of every
//! sealed segment to find such writes, so its cost grew with the segment count. Instead the
//! owner records, with its recovery point, how many sealed segments lie below the newest
//! segment it published data in and a hash of their base offsets and sizes. A takeover
//! that lists the same set with the same sizes knows that nothing was appended to them and
//! that no segment was created among them since: it reads none of them. Any difference (a
//! former owner's late write, a retention or cleaning the record does not show yet) makes
//! it check every one, as before.

use crate::SealedDigest;

/// A 64-bit mixer (the finalizer of SplitMix64): fixed, so that every broker version
/// computes the same hash for the same files.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The digest of the segments among `segments` (base offset, size) whose base is below
/// `below`. The order does not matter; the set does.
pub(crate) fn digest(below: i64, segments: impl IntoIterator<Item = (i64, u64)>) -> SealedDigest {
    let mut count = 0u64;
    let mut hash = 0u64;
    for (base, size) in segments {
        if base < below {
            count += 1;
            hash = hash.wrapping_add(mix(mix(base as u64).wrapping_add(size)));
        }
    }
    SealedDigest { below, count, hash }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_segment_added_removed_or_resized_below_the_bound_changes_it() {
        let segs = [(0, 1000), (10, 2000), (25, 500), (40, 0)];
        let d = digest(40, segs);
        assert_eq!(d.count, 3);
        assert_eq!(d, digest(40, segs.iter().rev().copied()));
        // Past the bound: not covered.
        assert_eq!(d, digest(40, segs.iter().copied().chain([(41, 9)])));
        // A late write to one (a tail), a stray among them, one gone, a swap of sizes.
        assert_ne!(d, digest(40, [(0, 1000), (10, 2100), (25, 500)]));
        assert_ne!(d, digest(40, [(0, 1000), (10, 2000), (17, 0), (25, 500)]));
        assert_ne!(d, digest(40, [(0, 1000), (25, 500)]));
        assert_ne!(d, digest(40, [(0, 2000), (10, 1000), (25, 500)]));
    }
}
