//! The self-describing container header every backend writes before its payload.
//!
//! Layout of versions 4 and 3 (128 bytes, little-endian), which this build writes (4 when the
//! circuit's record follows the payload, 3 otherwise):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `\x89KEYCDC\x1a` |
//! | 8 | 2 | container version (4 or 3) |
//! | 10 | 1 | codec id ([`CodecId`]) |
//! | 11 | 1 | codec wire mode ([`WireMode`](crate::WireMode), codec-specific) |
//! | 12 | 1 | key kind ([`ArtifactKind`]) |
//! | 13 | 1 | curve id (1 = BN254) |
//! | 14 | 2 | flags: bit 0 set when the key digest is recorded; the others zero |
//! | 16 | 4 | `k` (the circuit has `2^k` rows) |
//! | 20 | 4 | version 4: the length of the circuit's record after the payload (non-zero); version 3: reserved, zero |
//! | 24 | 8 | payload length in bytes |
//! | 32 | 8 | XXH3-64 of the payload |
//! | 40 | 16 | circuit [`Fingerprint`] |
//! | 56 | 32 | the [`KeyDigest`] (zero when not recorded) |
//! | 88 | 24 | who wrote it: the halo2 crate and version, ASCII, zero-padded ([`WrittenBy`]) |
//! | 112 | 8 | who wrote it: the keycodec version, ASCII, zero-padded |
//! | 120 | 8 | XXH3-64 of bytes 0..120 |
//!
//! In version 4 the payload is followed by the record section: the circuit's record
//! ([`crate::record::CircuitRecord`], as many bytes as the header says), then its XXH3-64.
//! Version 2 (96 bytes, still read) has no writer: its checksum (of bytes 0..88) is at 88.
//! Version 1 (64 bytes, still read) has no key digest either: bytes 14..16 are reserved and
//! zero, and its checksum (of bytes 0..56) is at 56. The magic and the version never move, so any
//! version can be recognised from the first 10 bytes ([`Header::len_of`]).

use crate::xxh3::xxh3_64;

use crate::error::{Error, Result};
use crate::ids::{ArtifactKind, CodecId, Fingerprint, KeyDigest};

/// Size in bytes of the container header this build writes (version 3), the longest there is.
pub const HEADER_LEN: usize = 128;

/// Size in bytes of a version 2 header.
pub const HEADER_LEN_V2: usize = 96;

/// Size in bytes of a version 1 header.
pub const HEADER_LEN_V1: usize = 64;

/// Bytes that name a header's version: the magic and the version field.
pub const PREFIX_LEN: usize = 10;

/// Flag bit: the key digest is recorded.
const FLAG_DIGEST: u16 = 1;

/// The magic bytes that open every container. The high first byte and the `0x1a` at the end
/// catch text-mode transfers, as PNG's signature does.
pub const MAGIC: [u8; 8] = *b"\x89KEYCDC\x1a";

/// The newest container version this build writes and reads (version 4: a record follows
/// the payload; it writes version 3 when none does, and reads 1, 2 and 3 too).
pub const CONTAINER_VERSION: u16 = 4;

/// The halo2 crate this build is compiled against, as headers record it (the workspace pins
/// it exactly; a test checks the lock file agrees).
pub const HALO2_CRATE: &str = "halo2-axiom 0.5.3";

/// Who wrote a container (version 3): the halo2 crate and the keycodec version, as short ASCII
/// strings. The circuit fingerprint hashes halo2's `Debug` form of the constraint system, so a
/// key written against another halo2 may fingerprint differently for the same circuit.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct WrittenBy {
    halo2: [u8; 24],
    keycodec: [u8; 8],
}

impl WrittenBy {
    /// This build.
    pub fn this_build() -> WrittenBy {
        WrittenBy {
            halo2: padded(HALO2_CRATE),
            keycodec: padded(env!("CARGO_PKG_VERSION")),
        }
    }

    /// The halo2 crate and version (`halo2-axiom 0.5.3`).
    pub fn halo2(&self) -> &str {
        unpadded(&self.halo2)
    }

    /// The keycodec version (`0.1.0`).
    pub fn keycodec(&self) -> &str {
        unpadded(&self.keycodec)
    }
}

impl std::fmt::Debug for WrittenBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} with keycodec {}", self.halo2(), self.keycodec())
    }
}

/// `text` in `N` bytes, zero-padded (cut at `N` bytes, on a character boundary).
fn padded<const N: usize>(text: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let mut end = text.len().min(N);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if let (Some(dst), Some(src)) = (out.get_mut(..end), text.as_bytes().get(..end)) {
        dst.copy_from_slice(src);
    }
    out
}

/// The text before the padding; empty if it is not ASCII.
fn unpadded(bytes: &[u8]) -> &str {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    bytes
        .get(..end)
        .and_then(|text| std::str::from_utf8(text).ok())
        .filter(|text| text.is_ascii())
        .unwrap_or("")
}

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
    pub kind: ArtifactKind,
    /// The circuit has `2^k` rows.
    pub k: u32,
    /// Length of the payload that follows the header, in bytes.
    pub payload_len: u64,
    /// XXH3-64 of the payload bytes.
    pub payload_checksum: u64,
    /// Fingerprint of the circuit the key belongs to.
    pub fingerprint: Fingerprint,
    /// The key's digest, as the writer recorded it (`None` in version 1 files). A claim until
    /// a load recomputes it from the key's content.
    pub digest: Option<KeyDigest>,
    /// Who wrote it (`None` before version 3). [`Header::to_bytes`] writes this build.
    pub written_by: Option<WrittenBy>,
    /// The length of the circuit's record after the payload (version 4), 0 when there is
    /// none. The record section is these bytes and their XXH3-64.
    pub record_len: u32,
}

impl Header {
    /// The length of what follows the payload: the record and its checksum, or nothing; at
    /// most [`MAX_RECORD_BYTES`](crate::record::MAX_RECORD_BYTES) + 8 in a decoded header.
    pub fn record_section_len(&self) -> u64 {
        match self.record_len {
            0 => 0,
            len => u64::from(len) + 8,
        }
    }

    /// The whole container's length for a header of `header_len` bytes (saturating: a
    /// forged length is refused against the bytes there, never overflowed).
    pub fn container_len(&self, header_len: usize) -> u64 {
        (header_len as u64)
            .saturating_add(self.payload_len)
            .saturating_add(self.record_section_len())
    }

    /// Encodes the header in version 4 when a record follows the payload and version 3 when
    /// none does, header checksum included, recording this build as its writer (whatever
    /// `written_by` says).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        let mut writer = FieldWriter {
            buf: &mut out,
            pos: 0,
        };
        let flags = if self.digest.is_some() {
            FLAG_DIGEST
        } else {
            0
        };
        let version: u16 = if self.record_len > 0 { 4 } else { 3 };
        writer.put(&MAGIC);
        writer.put(&version.to_le_bytes());
        writer.put(&[self.codec.byte(), self.mode, self.kind.byte(), CURVE_BN254]);
        writer.put(&flags.to_le_bytes());
        writer.put(&self.k.to_le_bytes());
        writer.put(&self.record_len.to_le_bytes());
        writer.put(&self.payload_len.to_le_bytes());
        writer.put(&self.payload_checksum.to_le_bytes());
        writer.put(&self.fingerprint.0);
        writer.put(&self.digest.map_or([0u8; 32], |digest| digest.0));
        let written_by = WrittenBy::this_build();
        writer.put(&written_by.halo2);
        writer.put(&written_by.keycodec);
        let (body, _) = out.split_at(HEADER_LEN - 8);
        let checksum = xxh3_64(body);
        let mut writer = FieldWriter {
            buf: &mut out,
            pos: HEADER_LEN - 8,
        };
        writer.put(&checksum.to_le_bytes());
        out
    }

    /// The length of the header whose first [`PREFIX_LEN`] (or more) bytes are `prefix`:
    /// [`HEADER_LEN`] for version 2, [`HEADER_LEN_V1`] for version 1.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`], [`Error::BadMagic`] or [`Error::UnsupportedVersion`].
    pub fn len_of(prefix: &[u8]) -> Result<usize> {
        let mut fields = FieldReader { rest: prefix };
        if fields.take::<8>()? != MAGIC {
            return Err(Error::BadMagic);
        }
        match u16::from_le_bytes(fields.take()?) {
            1 => Ok(HEADER_LEN_V1),
            2 => Ok(HEADER_LEN_V2),
            3 | 4 => Ok(HEADER_LEN),
            found => Err(Error::UnsupportedVersion {
                found,
                supported: CONTAINER_VERSION,
            }),
        }
    }

    /// Decodes and checks a whole header of either version: magic, version, header checksum,
    /// reserved fields and flags, curve, and the key kind byte. Codec, `k` and fingerprint are
    /// left for the caller to compare with what it expects.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] unless `bytes` is as long as [`Header::len_of`] says,
    /// [`Error::BadMagic`], [`Error::UnsupportedVersion`], [`Error::HeaderChecksum`],
    /// [`Error::ReservedField`], [`Error::CurveMismatch`] or [`Error::UnknownKeyKind`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let len = Header::len_of(bytes)?;
        let bytes = bytes.get(..len).ok_or(Error::Truncated {
            context: "container header",
        })?;
        let (body, stored) = bytes.split_at(len - 8);
        if stored != xxh3_64(body).to_le_bytes() {
            return Err(Error::HeaderChecksum);
        }
        let version_4 = body.get(8..PREFIX_LEN) == Some(&4u16.to_le_bytes()[..]);
        let mut fields = FieldReader {
            rest: body.get(PREFIX_LEN..).unwrap_or_default(),
        };
        let [codec, mode, kind, curve] = fields.take()?;
        let flags = u16::from_le_bytes(fields.take()?);
        let version_2 = len >= HEADER_LEN_V2;
        if flags & !FLAG_DIGEST != 0 || (flags != 0 && !version_2) {
            return Err(Error::ReservedField { field: "flags" });
        }
        let k = u32::from_le_bytes(fields.take()?);
        let record_len = u32::from_le_bytes(fields.take()?);
        if version_4 != (record_len > 0) {
            return Err(Error::ReservedField { field: "reserved1" });
        }
        // The one bound on the record section every reader of it relies on: a header
        // declaring more is refused before anything is allocated for it.
        if record_len as usize > crate::record::MAX_RECORD_BYTES {
            return Err(Error::Malformed(format!(
                "the circuit's record is {record_len} bytes (at most {})",
                crate::record::MAX_RECORD_BYTES
            )));
        }
        let payload_len = u64::from_le_bytes(fields.take()?);
        let payload_checksum = u64::from_le_bytes(fields.take()?);
        let fingerprint = Fingerprint(fields.take()?);
        let digest = if version_2 {
            let bytes: [u8; 32] = fields.take()?;
            match flags & FLAG_DIGEST {
                0 if bytes != [0; 32] => return Err(Error::ReservedField { field: "digest" }),
                0 => None,
                _ => Some(KeyDigest(bytes)),
            }
        } else {
            None
        };
        let written_by = if len == HEADER_LEN {
            let halo2: [u8; 24] = fields.take()?;
            let keycodec: [u8; 8] = fields.take()?;
            Some(WrittenBy { halo2, keycodec })
        } else {
            None
        };
        if curve != CURVE_BN254 {
            return Err(Error::CurveMismatch { found: curve });
        }
        Ok(Header {
            codec: CodecId::new(codec),
            mode,
            kind: ArtifactKind::from_byte(kind).ok_or(Error::UnknownKeyKind { found: kind })?,
            k,
            payload_len,
            payload_checksum,
            fingerprint,
            digest,
            written_by,
            record_len,
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

/// The header at the start of `file`, and its length in bytes (by version: [`HEADER_LEN`],
/// [`HEADER_LEN_V2`] or [`HEADER_LEN_V1`]), read with positioned reads (the file's cursor
/// does not move): the one way a tool or a load reads a file's header. A file shorter than
/// the header it starts is [`Error::Truncated`]; one that starts no header is
/// [`Error::BadMagic`].
///
/// # Errors
///
/// The header's errors, [`Error::Truncated`], and [`Error::Io`] reading it.
pub fn read_header(file: &std::fs::File) -> Result<(Header, usize)> {
    use crate::source::ReadAt;
    let len = file
        .metadata()
        .map_err(|err| Error::io("read the metadata of", err))?
        .len();
    let mut bytes = [0u8; HEADER_LEN];
    let got = usize::try_from(len.min(HEADER_LEN as u64)).unwrap_or(HEADER_LEN);
    let head = bytes.get_mut(..got).unwrap_or_default();
    file.read_exact_at(head, 0)
        .map_err(|err| Error::from_read(err, "container header"))?;
    let header_len = Header::len_of(head)?;
    if head.len() < header_len {
        return Err(Error::Truncated {
            context: "container header",
        });
    }
    Ok((Header::from_bytes(head)?, header_len))
}

/// The container version a header of `len` bytes is (3 or 4, 2 or 1: 3 stands for both of
/// the 128-byte versions), if it is one.
pub const fn version_of_len(len: usize) -> Option<u16> {
    match len {
        HEADER_LEN => Some(3),
        HEADER_LEN_V2 => Some(2),
        HEADER_LEN_V1 => Some(1),
        _ => None,
    }
}

/// The XXH3-64 of the `len` bytes of `file` from offset `at` (a container's payload, as
/// its header's checksum is computed), read in 4 MiB steps; `progress` is told the bytes of
/// each step as it is hashed.
///
/// # Errors
///
/// The file's read errors (`UnexpectedEof` when it ends first).
pub fn payload_checksum(
    file: &std::fs::File,
    at: u64,
    len: u64,
    progress: &mut dyn FnMut(u64),
) -> std::io::Result<u64> {
    use crate::source::ReadAt;
    const STEP: u64 = 4 << 20;
    let mut hasher = crate::xxh3::Xxh3::new();
    let mut buffer = vec![0u8; usize::try_from(len.min(STEP)).unwrap_or(0)];
    let mut done = 0;
    while done < len {
        let step = usize::try_from((len - done).min(STEP)).unwrap_or(0);
        let chunk = buffer.get_mut(..step).unwrap_or_default();
        file.read_exact_at(chunk, at.saturating_add(done))?;
        hasher.update(chunk);
        done += step as u64;
        progress(step as u64);
    }
    Ok(hasher.digest())
}

/// Reads and checks the container in `file` without decoding it (no circuit needed): its
/// header, its length (exactly the header and the payload it declares), and the payload's
/// XXH3-64 checksum; returns the header. What `keycodec verify` and a manifest's fetch check
/// before a file is kept; a load checks all of it again, and recomputes a pinned digest from
/// the key itself (the header's recorded digest is a claim).
///
/// # Errors
///
/// The header's errors ([`Error::BadMagic`], [`Error::HeaderChecksum`]...),
/// [`Error::LengthMismatch`], [`Error::PayloadChecksum`], and [`Error::Io`] reading it.
pub fn verify_file(file: &std::fs::File) -> Result<Header> {
    let len = file
        .metadata()
        .map_err(|err| Error::io("read the metadata of", err))?
        .len();
    let (header, header_len) = read_header(file)?;
    let header_len = header_len as u64;
    let available = len.saturating_sub(header_len);
    if available
        != header
            .payload_len
            .saturating_add(header.record_section_len())
    {
        return Err(Error::LengthMismatch {
            declared: header.payload_len,
            available: available.saturating_sub(header.record_section_len()),
        });
    }
    let found = payload_checksum(file, header_len, header.payload_len, &mut |_| {})
        .map_err(|err| Error::from_read(err, "payload"))?;
    if found != header.payload_checksum {
        return Err(Error::PayloadChecksum {
            expected: header.payload_checksum,
            found,
        });
    }
    read_record_section(file, &header, header_len)?;
    Ok(header)
}

/// The circuit's record in the container in `file` (the header `header` of `header_len`
/// bytes), checked against its checksum and decoded; `None` when the container has none.
///
/// # Errors
///
/// [`Error::Truncated`] for a record section the file does not hold whole,
/// [`Error::PayloadChecksum`] for a record whose checksum is not its bytes', the record's
/// own errors ([`Error::Malformed`]), and [`Error::Io`] reading it.
pub fn read_record_section(
    file: &std::fs::File,
    header: &Header,
    header_len: u64,
) -> Result<Option<crate::record::CircuitRecord>> {
    use crate::source::ReadAt;
    if header.record_len == 0 {
        return Ok(None);
    }
    // At most MAX_RECORD_BYTES + 8: the header's decoding refuses more.
    let mut bytes = vec![0u8; header.record_section_len() as usize];
    file.read_exact_at(&mut bytes, header_len.saturating_add(header.payload_len))
        .map_err(|err| Error::from_read(err, "the circuit's record"))?;
    crate::record::CircuitRecord::from_section(&bytes).map(Some)
}

#[cfg(test)]
mod tests;
