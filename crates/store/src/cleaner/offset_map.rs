//! The key -> latest offset map of one cleaning (Kafka's SkimpyOffsetMap): a fixed-size
//! open-addressing table of 16-byte key hashes and 8-byte offsets, so its memory is bounded
//! whatever the keys (`log.cleaner.dedupe.buffer.size` split over the cleaner threads). Two
//! keys whose 128-bit hashes collide would count as one key (the older record of either
//! could be dropped); the hash is keyed at random per map, so colliding keys cannot be chosen
//! in advance (Kafka takes the same risk with MD5).

use std::hash::{BuildHasher, Hasher};

/// Bytes of one slot: the 16-byte hash and the 8-byte offset.
pub(crate) const SLOT_BYTES: usize = 24;

#[derive(Debug)]
pub(crate) struct OffsetMap {
    hashes: Vec<[u8; 16]>,
    offsets: Vec<i64>,
    entries: usize,
    /// Entries the map takes before it counts as full (slots x load factor).
    max_entries: usize,
    /// The last offset the map covers (records after it were not looked at).
    latest_offset: i64,
    k1: std::collections::hash_map::RandomState,
    k2: std::collections::hash_map::RandomState,
}

impl OffsetMap {
    /// A map using at most `memory_bytes` for its slots, full at `load_factor` of them.
    pub(crate) fn new(memory_bytes: usize, load_factor: f64) -> OffsetMap {
        let slots = (memory_bytes / SLOT_BYTES).max(2);
        let max_entries = ((slots as f64) * load_factor.clamp(0.01, 0.99)) as usize;
        OffsetMap {
            // Zeroed allocations: pages no key touches are never made resident.
            hashes: vec![[0u8; 16]; slots],
            offsets: vec![0; slots],
            entries: 0,
            max_entries: max_entries.clamp(1, slots - 1),
            latest_offset: -1,
            k1: Default::default(),
            k2: Default::default(),
        }
    }

    fn hash(&self, key: &[u8]) -> [u8; 16] {
        let mut a = self.k1.build_hasher();
        a.write(key);
        let mut b = self.k2.build_hasher();
        b.write(key);
        let mut h = [0u8; 16];
        h[..8].copy_from_slice(&a.finish().to_be_bytes());
        h[8..].copy_from_slice(&b.finish().to_be_bytes());
        // All zeroes marks an empty slot.
        if h == [0u8; 16] {
            h[15] = 1;
        }
        h
    }

    /// Slot of `h`: linear probing from a position taken from the hash.
    fn slot(&self, h: &[u8; 16]) -> usize {
        let n = self.hashes.len();
        let mut i = (u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]])
            % n as u64) as usize;
        // The map never fills every slot (max_entries < slots), so this ends.
        loop {
            let s = &self.hashes[i];
            if s == h || *s == [0u8; 16] {
                return i;
            }
            i = (i + 1) % n;
        }
    }

    pub(crate) fn is_full(&self) -> bool {
        self.entries >= self.max_entries
    }

    /// Record `offset` as the latest of `key`. Returns false (and records nothing) when the
    /// map is full and the key is new.
    pub(crate) fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let h = self.hash(key);
        let i = self.slot(&h);
        if self.hashes[i] == [0u8; 16] {
            if self.is_full() {
                return false;
            }
            self.hashes[i] = h;
            self.entries += 1;
        }
        self.offsets[i] = offset;
        true
    }

    /// The latest offset of `key`, or -1.
    pub(crate) fn get(&self, key: &[u8]) -> i64 {
        let h = self.hash(key);
        let i = self.slot(&h);
        if self.hashes[i] == h {
            self.offsets[i]
        } else {
            -1
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries
    }

    pub(crate) fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    pub(crate) fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    /// Empty the map for the next cleaning. A used map is allocated anew (zeroed memory from
    /// the system) rather than overwritten, so that only the pages its keys touch are resident.
    pub(crate) fn clear(&mut self) {
        if self.entries > 0 {
            let n = self.hashes.len();
            self.hashes = vec![[0u8; 16]; n];
            self.offsets = vec![0; n];
        }
        self.entries = 0;
        self.latest_offset = -1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_hash_map_until_full() {
        let mut m = OffsetMap::new(SLOT_BYTES * 1000, 0.9);
        let mut model = HashMap::new();
        for i in 0..5000i64 {
            let key = format!("key-{}", i % 700);
            assert!(m.put(key.as_bytes(), i));
            model.insert(key, i);
        }
        assert_eq!(m.len(), 700);
        for (k, v) in &model {
            assert_eq!(m.get(k.as_bytes()), *v);
        }
        assert_eq!(m.get(b"absent"), -1);
        // Fills at 900 entries: a new key is refused, a known one still updates.
        for i in 700..900 {
            assert!(m.put(format!("key-{i}").as_bytes(), i));
        }
        assert!(m.is_full());
        assert!(!m.put(b"one more", 1));
        assert!(m.put(b"key-1", 99_999));
        assert_eq!(m.get(b"key-1"), 99_999);
        m.clear();
        assert_eq!((m.len(), m.get(b"key-1")), (0, -1));
    }
}
