//! The self-describing container header every backend writes before its payload.
//!
//! Layout (64 bytes, little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `\x89KEYCDC\x1a` |
//! | 8 | 2 | container version (currently 1) |
//! | 10 | 1 | codec id ([`CodecId`]) |
//! | 11 | 1 | codec wire mode ([`WireMode`](crate::WireMode), codec-specific) |
//! | 12 | 1 | key kind ([`KeyKind`]) |
//! | 13 | 1 | curve id (1 = BN254) |
//! | 14 | 2 | reserved, zero |
//! | 16 | 4 | `k` (the circuit has `2^k` rows) |
//! | 20 | 4 | reserved, zero |
//! | 24 | 8 | payload length in bytes |
//! | 32 | 8 | XXH3-64 of the payload |
//! | 40 | 16 | circuit [`Fingerprint`] |
//! | 56 | 8 | XXH3-64 of bytes 0..56 |
//!
//! The magic and the version never move, so any future version can be recognised.

use xxhash_rust::xxh3::xxh3_64;

use crate::error::{Error, Result};
use crate::ids::{CodecId, Fingerprint, KeyKind};

/// Size in bytes of the container header.
pub const HEADER_LEN: usize = 64;

/// The magic bytes that open every container. The high first byte and the `0x1a` at the end
/// catch text-mode transfers, as PNG's signature does.
pub const MAGIC: [u8; 8] = *b"\x89KEYCDC\x1a";

/// The container version this build writes and reads.
pub const CONTAINER_VERSION: u16 = 1;

/// The curve id of BN254, the only curve this build supports.
pub const CURVE_BN254: u8 = 1;

/// The decoded container header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The backend that wrote the payload.
    pub codec: CodecId,
    /// The backend's wire mode byte (for example halo2's `RawBytes` or `Processed`); the
    /// container checks it against the codec's [`WireMode`](crate::WireMode)s.
    pub mode: u8,
    /// Proving or verifying key.
    pub kind: KeyKind,
    /// The circuit has `2^k` rows.
    pub k: u32,
    /// Length of the payload that follows the header, in bytes.
    pub payload_len: u64,
    /// XXH3-64 of the payload bytes.
    pub payload_checksum: u64,
    /// Fingerprint of the circuit the key belongs to.
    pub fingerprint: Fingerprint,
}

impl Header {
    /// Encodes the header into its 64-byte form, header checksum included.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        let mut writer = FieldWriter {
            buf: &mut out,
            pos: 0,
        };
        writer.put(&MAGIC);
        writer.put(&CONTAINER_VERSION.to_le_bytes());
        writer.put(&[self.codec.byte(), self.mode, self.kind.byte(), CURVE_BN254]);
        writer.put(&[0u8; 2]);
        writer.put(&self.k.to_le_bytes());
        writer.put(&[0u8; 4]);
        writer.put(&self.payload_len.to_le_bytes());
        writer.put(&self.payload_checksum.to_le_bytes());
        writer.put(&self.fingerprint.0);
        let (body, _) = out.split_at(HEADER_LEN - 8);
        let checksum = xxh3_64(body);
        let mut writer = FieldWriter {
            buf: &mut out,
            pos: HEADER_LEN - 8,
        };
        writer.put(&checksum.to_le_bytes());
        out
    }

    /// Decodes and checks a header: magic, version, header checksum, reserved fields, curve,
    /// and the key kind byte. Codec, `k` and fingerprint are left for the caller to compare
    /// with what it expects.
    ///
    /// # Errors
    ///
    /// [`Error::BadMagic`], [`Error::UnsupportedVersion`], [`Error::HeaderChecksum`],
    /// [`Error::ReservedField`], [`Error::CurveMismatch`] or [`Error::UnknownKeyKind`].
    pub fn from_bytes(bytes: &[u8; HEADER_LEN]) -> Result<Self> {
        let mut fields = FieldReader { rest: bytes };
        if fields.take::<8>()? != MAGIC {
            return Err(Error::BadMagic);
        }
        let version = u16::from_le_bytes(fields.take()?);
        if version != CONTAINER_VERSION {
            return Err(Error::UnsupportedVersion {
                found: version,
                supported: CONTAINER_VERSION,
            });
        }
        let (body, stored) = bytes.split_at(HEADER_LEN - 8);
        if stored != xxh3_64(body).to_le_bytes() {
            return Err(Error::HeaderChecksum);
        }
        let [codec, mode, kind, curve] = fields.take()?;
        if fields.take::<2>()? != [0; 2] {
            return Err(Error::ReservedField { field: "reserved0" });
        }
        let k = u32::from_le_bytes(fields.take()?);
        if fields.take::<4>()? != [0; 4] {
            return Err(Error::ReservedField { field: "reserved1" });
        }
        let payload_len = u64::from_le_bytes(fields.take()?);
        let payload_checksum = u64::from_le_bytes(fields.take()?);
        let fingerprint = Fingerprint(fields.take()?);
        if curve != CURVE_BN254 {
            return Err(Error::CurveMismatch { found: curve });
        }
        Ok(Header {
            codec: CodecId::new(codec),
            mode,
            kind: KeyKind::from_byte(kind).ok_or(Error::UnknownKeyKind { found: kind })?,
            k,
            payload_len,
            payload_checksum,
            fingerprint,
        })
    }
}

/// Reads fixed-size fields off the front of a byte slice without indexing.
struct FieldReader<'a> {
    rest: &'a [u8],
}

impl FieldReader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let (field, rest) = self.rest.split_first_chunk::<N>().ok_or(Error::Truncated {
            context: "container header",
        })?;
        self.rest = rest;
        Ok(*field)
    }
}

/// Writes fields into a fixed buffer; the layout is static, so an overrun is a bug caught by
/// the round-trip test, and is ignored rather than panicking.
struct FieldWriter<'a> {
    buf: &'a mut [u8; HEADER_LEN],
    pos: usize,
}

impl FieldWriter<'_> {
    fn put(&mut self, bytes: &[u8]) {
        let end = self.pos + bytes.len();
        if let Some(dst) = self.buf.get_mut(self.pos..end) {
            dst.copy_from_slice(bytes);
        }
        self.pos = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            codec: CodecId::new(1),
            mode: 0,
            kind: KeyKind::Proving,
            k: 12,
            payload_len: 123_456,
            payload_checksum: 0xdead_beef,
            fingerprint: Fingerprint([7; 16]),
        }
    }

    #[test]
    fn header_round_trips() {
        let header = sample();
        assert_eq!(Header::from_bytes(&header.to_bytes()).ok(), Some(header));
    }

    #[test]
    fn header_layout_is_stable() {
        let bytes = sample().to_bytes();
        assert_eq!(bytes.get(..8), Some(&MAGIC[..]));
        assert_eq!(bytes.get(8..10), Some(&[1u8, 0][..]));
        assert_eq!(bytes.get(16..20), Some(&12u32.to_le_bytes()[..]));
        assert_eq!(bytes.get(24..32), Some(&123_456u64.to_le_bytes()[..]));
    }

    #[test]
    fn every_header_bit_flip_is_rejected() {
        let bytes = sample().to_bytes();
        for bit in 0..HEADER_LEN * 8 {
            let mut flipped = bytes;
            if let Some(byte) = flipped.get_mut(bit / 8) {
                *byte ^= 1 << (bit % 8);
            }
            let result = Header::from_bytes(&flipped);
            assert!(
                matches!(
                    result,
                    Err(Error::BadMagic | Error::UnsupportedVersion { .. } | Error::HeaderChecksum)
                ),
                "bit {bit}: {result:?}"
            );
        }
    }

    #[test]
    fn wrong_curve_is_named() {
        let mut bytes = sample().to_bytes();
        bytes[13] = 2;
        let checksum = xxh3_64(&bytes[..56]);
        bytes[56..].copy_from_slice(&checksum.to_le_bytes());
        assert!(matches!(
            Header::from_bytes(&bytes),
            Err(Error::CurveMismatch { found: 2 })
        ));
    }

    #[test]
    fn newer_version_is_named() {
        let mut bytes = sample().to_bytes();
        bytes[8] = 9;
        assert!(matches!(
            Header::from_bytes(&bytes),
            Err(Error::UnsupportedVersion {
                found: 9,
                supported: 1
            })
        ));
    }
}
