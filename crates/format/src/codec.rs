//! The record-batch compression codecs (attribute bits 0-2), as Kafka frames them: gzip,
//! snappy (xerial framing, raw snappy accepted on input as Kafka's reader does), lz4 (the
//! LZ4 frame format, independent blocks) and zstd. Pure byte transforms, behind the `codecs`
//! feature (the log cleaner re-compresses the batches it rewrites with their own codec).
//!
//! Decompression is bounded: output past `max_len` bytes is an error, never an allocation.

use std::io::{Read, Write};

use crate::FormatError;

/// Codec ids of the batch attributes.
pub const NONE: u8 = 0;
pub const GZIP: u8 = 1;
pub const SNAPPY: u8 = 2;
pub const LZ4: u8 = 3;
pub const ZSTD: u8 = 4;

/// xerial snappy-java's stream header: magic, version 1, compatible version 1.
const SNAPPY_MAGIC: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
/// Uncompressed bytes per xerial block (snappy-java's default).
const SNAPPY_BLOCK: usize = 32 * 1024;
/// Kafka's default zstd level (`compression.zstd.level`).
const ZSTD_LEVEL: i32 = 3;
/// lz4 level used by the broker's recompression (the `kafka-protocol` crate's).
const LZ4_LEVEL: u32 = 4;

fn err(codec: u8, what: impl std::fmt::Display) -> FormatError {
    FormatError::Record(format!("codec {codec}: {what}"))
}

fn read_bounded(mut r: impl Read, codec: u8, max_len: usize) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::new();
    let limit = u64::try_from(max_len).unwrap_or(u64::MAX).saturating_add(1);
    (&mut r)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| err(codec, e))?;
    if out.len() > max_len {
        return Err(err(
            codec,
            format!("decompressed data exceeds the limit of {max_len} bytes"),
        ));
    }
    Ok(out)
}

fn snappy_raw(data: &[u8], max_len: usize, out: &mut Vec<u8>) -> Result<(), FormatError> {
    let len = snap::raw::decompress_len(data).map_err(|e| err(SNAPPY, e))?;
    if out.len().saturating_add(len) > max_len {
        return Err(err(
            SNAPPY,
            format!("decompressed data exceeds the limit of {max_len} bytes"),
        ));
    }
    let start = out.len();
    out.resize(start + len, 0);
    snap::raw::Decoder::new()
        .decompress(data, &mut out[start..])
        .map_err(|e| err(SNAPPY, e))?;
    Ok(())
}

/// Decompress the records section of a batch compressed with `codec`.
pub fn decompress(codec: u8, data: &[u8], max_len: usize) -> Result<Vec<u8>, FormatError> {
    match codec {
        NONE => {
            if data.len() > max_len {
                return Err(err(codec, "data exceeds the limit"));
            }
            Ok(data.to_vec())
        }
        GZIP => read_bounded(flate2::read::GzDecoder::new(data), codec, max_len),
        SNAPPY => {
            let mut out = Vec::new();
            if let Some(mut rest) = data.strip_prefix(&SNAPPY_MAGIC[..]) {
                while !rest.is_empty() {
                    let (len, tail) = rest
                        .split_first_chunk::<4>()
                        .ok_or_else(|| err(codec, "truncated block length"))?;
                    let len = u32::from_be_bytes(*len) as usize;
                    if len > tail.len() {
                        return Err(err(codec, "truncated block"));
                    }
                    snappy_raw(&tail[..len], max_len, &mut out)?;
                    rest = &tail[len..];
                }
            } else {
                snappy_raw(data, max_len, &mut out)?;
            }
            Ok(out)
        }
        LZ4 => {
            let d = lz4::Decoder::new(data).map_err(|e| err(codec, e))?;
            read_bounded(d, codec, max_len)
        }
        ZSTD => {
            let d = zstd::stream::read::Decoder::new(data).map_err(|e| err(codec, e))?;
            read_bounded(d, codec, max_len)
        }
        other => Err(err(other, "unknown compression codec")),
    }
}

/// The length of a compressed records section once decompressed, when the compressed bytes
/// say it without decompressing them: gzip's trailer (ISIZE, the length modulo 2^32: exact
/// for any batch Kafka accepts), the length prefix of every snappy block, and the content
/// size of an lz4 frame or a single zstd frame when the producer wrote one (the Java client
/// and librdkafka usually do not: then None). Cost: a few header bytes (snappy: one varint
/// per 32 KiB block); never decompresses. `NONE` is the data's own length.
pub fn stated_len(codec: u8, data: &[u8]) -> Option<u64> {
    match codec {
        NONE => Some(data.len() as u64),
        GZIP => {
            // RFC 1952: ... CRC32 (4 bytes), ISIZE (4 bytes, little-endian). One member.
            if data.len() < 18 || data[..2] != [0x1f, 0x8b] {
                return None;
            }
            let isize = data.last_chunk::<4>()?;
            Some(u64::from(u32::from_le_bytes(*isize)))
        }
        SNAPPY => {
            let Some(mut rest) = data.strip_prefix(&SNAPPY_MAGIC[..]) else {
                return snap::raw::decompress_len(data).ok().map(|n| n as u64);
            };
            let mut total = 0u64;
            while !rest.is_empty() {
                let (len, tail) = rest.split_first_chunk::<4>()?;
                let len = u32::from_be_bytes(*len) as usize;
                let block = tail.get(..len)?;
                total += snap::raw::decompress_len(block).ok()? as u64;
                rest = &tail[len..];
            }
            Some(total)
        }
        LZ4 => {
            // LZ4 frame: magic (4, LE 0x184D2204), FLG (bit 3: content size present), BD,
            // then the content size (8 bytes, little-endian) when present.
            let (magic, rest) = data.split_first_chunk::<4>()?;
            if u32::from_le_bytes(*magic) != 0x184D_2204 {
                return None;
            }
            let flg = *rest.first()?;
            if flg & 0x08 == 0 {
                return None;
            }
            let size = rest.get(2..10)?;
            Some(u64::from_le_bytes(size.try_into().ok()?))
        }
        ZSTD => {
            let frame = zstd::zstd_safe::find_frame_compressed_size(data).ok()?;
            if frame != data.len() {
                return None; // several frames: the first one's size would not be the whole
            }
            zstd::zstd_safe::get_frame_content_size(data).ok().flatten()
        }
        _ => None,
    }
}

/// Compress a records section with `codec`, framed as Kafka's clients read it.
pub fn compress(codec: u8, data: &[u8]) -> Result<Vec<u8>, FormatError> {
    match codec {
        NONE => Ok(data.to_vec()),
        GZIP => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).map_err(|x| err(codec, x))?;
            e.finish().map_err(|x| err(codec, x))
        }
        SNAPPY => {
            let mut out = Vec::with_capacity(data.len() / 2 + 32);
            out.extend_from_slice(SNAPPY_MAGIC);
            let mut enc = snap::raw::Encoder::new();
            for block in data.chunks(SNAPPY_BLOCK) {
                let c = enc.compress_vec(block).map_err(|e| err(codec, e))?;
                let len = u32::try_from(c.len()).map_err(|e| err(codec, e))?;
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&c);
            }
            Ok(out)
        }
        LZ4 => {
            let mut e = lz4::EncoderBuilder::new()
                .level(LZ4_LEVEL)
                .block_mode(lz4::BlockMode::Independent)
                .build(Vec::new())
                .map_err(|x| err(codec, x))?;
            e.write_all(data).map_err(|x| err(codec, x))?;
            let (out, res) = e.finish();
            res.map_err(|x| err(codec, x))?;
            Ok(out)
        }
        ZSTD => zstd::bulk::compress(data, ZSTD_LEVEL).map_err(|e| err(codec, e)),
        other => Err(err(other, "unknown compression codec")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips_and_is_bounded() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        for codec in [NONE, GZIP, SNAPPY, LZ4, ZSTD] {
            let c = compress(codec, &data).unwrap();
            assert_eq!(
                decompress(codec, &c, data.len()).unwrap(),
                data,
                "codec {codec}"
            );
            assert!(
                decompress(codec, &c, data.len() - 1).is_err(),
                "codec {codec}"
            );
        }
        assert!(decompress(9, b"x", 10).is_err());
        assert!(decompress(GZIP, b"garbage", 10).is_err());
        // Raw snappy (no xerial header) is read too.
        let raw = snap::raw::Encoder::new().compress_vec(b"hello").unwrap();
        assert_eq!(decompress(SNAPPY, &raw, 5).unwrap(), b"hello");
    }

    #[test]
    fn stated_lengths_come_from_headers_or_are_none() {
        let data: Vec<u8> = (0..100_000u32)
            .flat_map(|i| (i % 251).to_be_bytes())
            .collect();
        let n = data.len() as u64;
        for codec in [NONE, GZIP, SNAPPY] {
            let c = compress(codec, &data).unwrap();
            assert_eq!(stated_len(codec, &c), Some(n), "codec {codec}");
        }
        // zstd's bulk compression states the content size; its streaming encoder (as the
        // Java client's) does not.
        let z = compress(ZSTD, &data).unwrap();
        assert_eq!(stated_len(ZSTD, &z), Some(n));
        let streamed = zstd::stream::encode_all(&data[..], 3).unwrap();
        assert_eq!(stated_len(ZSTD, &streamed), None);
        // Two frames: not the whole.
        let mut two = z.clone();
        two.extend_from_slice(&z);
        assert_eq!(stated_len(ZSTD, &two), None);
        // lz4 frames without a content size (the lz4 crate's and Kafka's clients').
        let l = compress(LZ4, &data).unwrap();
        assert_eq!(stated_len(LZ4, &l), None);
        let mut sized = l.clone();
        sized[4] |= 0x08;
        sized.splice(6..6, n.to_le_bytes());
        assert_eq!(stated_len(LZ4, &sized), Some(n));
        let raw = snap::raw::Encoder::new().compress_vec(b"hello").unwrap();
        assert_eq!(stated_len(SNAPPY, &raw), Some(5));
        for codec in [GZIP, LZ4, ZSTD, 9] {
            assert_eq!(stated_len(codec, b"garbage"), None, "codec {codec}");
        }
    }
}
