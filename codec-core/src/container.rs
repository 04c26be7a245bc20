//! Framing a backend's payload with the container header, and checking it on the way in.

use std::io::{self, Read, Seek, SeekFrom, Write};

use halo2_proofs::plonk::ConstraintSystem;
use halo2curves::bn256::Fr;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::circuit::{check_k, fingerprint_of};
use crate::codec::{DecodeContext, Key, KeyCodec, KeyRef};
use crate::error::{Error, Result};
use crate::header::{Fingerprint, Header, KeyKind, HEADER_LEN};
use crate::options::{Integrity, LoadOptions};
#[cfg(unix)]
use crate::payload::FileSource;
use crate::payload::{PayloadReader, Release, RELEASE_STEP};

/// Writes header placeholder, payload, then seeks back to write the real header.
pub(crate) fn write<K: KeyCodec + ?Sized>(
    codec: &K,
    key: KeyRef<'_>,
    fingerprint: Fingerprint,
    writer: &mut (impl Write + Seek),
) -> Result<()> {
    let start = writer.stream_position()?;
    writer.write_all(&[0u8; HEADER_LEN])?;
    let mut hashing = HashingWriter {
        inner: &mut *writer,
        hasher: Xxh3::new(),
        written: 0,
    };
    codec.encode(key, &mut hashing)?;
    let (payload_len, payload_checksum) = (hashing.written, hashing.hasher.digest());
    let header = Header {
        codec: codec.id(),
        mode: codec.wire_mode(),
        kind: key.kind(),
        k: key.vk().get_domain().k(),
        payload_len,
        payload_checksum,
        fingerprint,
    };
    writer.seek(SeekFrom::Start(start))?;
    writer.write_all(&header.to_bytes())?;
    writer.seek(SeekFrom::Start(start + HEADER_LEN as u64 + payload_len))?;
    writer.flush()?;
    Ok(())
}

/// Reads a container from a stream: checks the header, decodes the payload while hashing it,
/// then compares the checksum before returning the key. `total_len` is the real length of the
/// source (header included) when known (a file): the declared payload length is checked
/// against it before anything is decoded, and no bytes may follow the container.
pub(crate) fn read<K: KeyCodec + ?Sized>(
    codec: &K,
    kind: KeyKind,
    cs: ConstraintSystem<Fr>,
    reader: &mut impl Read,
    total_len: Option<u64>,
    options: &LoadOptions,
) -> Result<Key> {
    if total_len.is_some_and(|total| total < HEADER_LEN as u64) {
        return Err(Error::Truncated {
            context: "container header",
        });
    }
    let mut header_bytes = [0u8; HEADER_LEN];
    reader
        .read_exact(&mut header_bytes)
        .map_err(|err| Error::from_read(err, "container header"))?;
    let header = Header::from_bytes(&header_bytes)?;
    check_header(codec, kind, &header, &cs, options)?;
    if let Some(total) = total_len {
        check_length(&header, total - HEADER_LEN as u64)?;
    }

    let mut hashing = HashingReader {
        inner: reader.take(header.payload_len),
        hasher: Xxh3::new(),
        enabled: options.integrity == Integrity::Verify,
    };
    let context = decode_context(codec, kind, header, cs, options);
    let mut payload = PayloadReader::new(&mut hashing, header.payload_len, total_len.is_some());
    let decoded = codec.decode(&mut payload, &context);
    let left = payload.remaining();
    if matches!(decoded, Err(Error::Io(_))) {
        return decoded;
    }
    // Corruption explains most decode errors (and a leftover payload): when the checksum
    // disagrees, report that. Drain what is left of the declared payload to find out.
    if options.integrity == Integrity::Verify {
        let drained = io::copy(&mut hashing, &mut io::sink()).is_ok() && hashing.inner.limit() == 0;
        if drained {
            verify_checksum(&header, hashing.hasher.digest())?;
        }
    }
    let key = decoded?;
    if left > 0 {
        return Err(Error::TrailingBytes { count: left });
    }
    Ok(key)
}

/// Reads a container from a file at explicit offsets: as [`read`], but large reads go
/// straight into the key's memory from several threads ([`FileSource`]), and small ones
/// through a buffer of `buffer` bytes.
#[cfg(unix)]
pub(crate) fn read_file<K: KeyCodec + ?Sized>(
    codec: &K,
    kind: KeyKind,
    cs: ConstraintSystem<Fr>,
    file: &std::fs::File,
    buffer: usize,
    options: &LoadOptions,
) -> Result<Key> {
    use std::os::unix::fs::FileExt;

    let total = file.metadata()?.len();
    if total < HEADER_LEN as u64 {
        return Err(Error::Truncated {
            context: "container header",
        });
    }
    let mut header_bytes = [0u8; HEADER_LEN];
    file.read_exact_at(&mut header_bytes, 0)
        .map_err(|err| Error::from_read(err, "container header"))?;
    let header = Header::from_bytes(&header_bytes)?;
    check_header(codec, kind, &header, &cs, options)?;
    check_length(&header, total - HEADER_LEN as u64)?;

    let verify = options.integrity == Integrity::Verify;
    let source = FileSource::new(file, HEADER_LEN as u64, buffer, verify);
    let context = decode_context(codec, kind, header, cs, options);
    let mut payload = PayloadReader::from_file(source, header.payload_len);
    let decoded = codec.decode(&mut payload, &context);
    let left = payload.remaining();
    if matches!(decoded, Err(Error::Io(_))) {
        return decoded;
    }
    // As in `read`: a checksum mismatch explains a decode error or a leftover payload. After
    // a decode error the reader may have stopped inside a bulk read, so the payload is hashed
    // afresh from the file.
    if verify {
        let digest = match decoded {
            Ok(_) => payload.drain_and_digest(),
            Err(_) => hash_file_range(file, HEADER_LEN as u64, header.payload_len),
        };
        if let Some(digest) = digest {
            verify_checksum(&header, digest)?;
        }
    }
    let key = decoded?;
    if left > 0 {
        return Err(Error::TrailingBytes { count: left });
    }
    Ok(key)
}

/// XXH3-64 of `len` bytes of `file` from `offset`, or `None` if they cannot be read.
#[cfg(unix)]
fn hash_file_range(file: &std::fs::File, offset: u64, len: u64) -> Option<u64> {
    use std::os::unix::fs::FileExt;

    let mut hasher = Xxh3::new();
    let mut buffer = vec![0u8; RELEASE_STEP.min(usize::try_from(len).unwrap_or(usize::MAX))];
    let mut done = 0u64;
    while done < len {
        let step = buffer
            .len()
            .min(usize::try_from(len - done).unwrap_or(usize::MAX));
        let chunk = buffer.get_mut(..step)?;
        file.read_exact_at(chunk, offset + done).ok()?;
        hasher.update(chunk);
        done += step as u64;
    }
    Some(hasher.digest())
}

/// Reads a container held in memory: header and length checks, then the payload checksum,
/// all before decoding; the slice must hold exactly one container. With `release` (a memory
/// mapping's), bytes are handed back to the kernel once hashed and once decoded, so that the
/// mapping never keeps much of the file resident.
pub(crate) fn read_slice<K: KeyCodec + ?Sized>(
    codec: &K,
    kind: KeyKind,
    cs: ConstraintSystem<Fr>,
    bytes: &[u8],
    release: Option<Release<'_>>,
    options: &LoadOptions,
) -> Result<Key> {
    let (header_bytes, rest) = bytes
        .split_first_chunk::<HEADER_LEN>()
        .ok_or(Error::Truncated {
            context: "container header",
        })?;
    let header = Header::from_bytes(header_bytes)?;
    check_header(codec, kind, &header, &cs, options)?;
    check_length(&header, rest.len() as u64)?;
    if options.integrity == Integrity::Verify {
        verify_checksum(&header, checksum_releasing(rest, HEADER_LEN, release))?;
    }
    let context = decode_context(codec, kind, header, cs, options);
    // The payload reader counts from the payload's start; the mapping from the file's.
    let shifted =
        release.map(|release| move |offset: usize, len: usize| release(HEADER_LEN + offset, len));
    let mut payload = match &shifted {
        Some(shifted) => PayloadReader::from_mapped(rest, shifted),
        None => PayloadReader::from_slice(rest),
    };
    let key = codec.decode(&mut payload, &context)?;
    match payload.remaining() {
        0 => Ok(key),
        left => Err(Error::TrailingBytes { count: left }),
    }
}

/// XXH3-64 of `payload`, releasing each hashed window (`base` is the payload's offset in the
/// mapping).
fn checksum_releasing(payload: &[u8], base: usize, release: Option<Release<'_>>) -> u64 {
    let Some(release) = release else {
        return xxh3_64(payload);
    };
    let mut hasher = Xxh3::new();
    for (index, window) in payload.chunks(RELEASE_STEP).enumerate() {
        hasher.update(window);
        release(base + index * RELEASE_STEP, window.len());
    }
    hasher.digest()
}

fn decode_context<K: KeyCodec + ?Sized>(
    codec: &K,
    kind: KeyKind,
    header: Header,
    cs: ConstraintSystem<Fr>,
    options: &LoadOptions,
) -> DecodeContext {
    DecodeContext {
        kind,
        mode: header.mode,
        k: Some(header.k),
        validation: codec.effective_validation(options.validation),
        limits: options.limits,
        cs,
    }
}

/// Compares the declared payload length with the bytes actually after the header.
fn check_length(header: &Header, available: u64) -> Result<()> {
    if available < header.payload_len {
        return Err(Error::LengthMismatch {
            declared: header.payload_len,
            available,
        });
    }
    if available > header.payload_len {
        return Err(Error::TrailingBytes {
            count: available - header.payload_len,
        });
    }
    Ok(())
}

fn check_header<K: KeyCodec + ?Sized>(
    codec: &K,
    kind: KeyKind,
    header: &Header,
    cs: &ConstraintSystem<Fr>,
    options: &LoadOptions,
) -> Result<()> {
    if header.codec != codec.id() {
        return Err(Error::CodecMismatch {
            expected: codec.id(),
            found: header.codec,
        });
    }
    if header.kind != kind {
        return Err(Error::KindMismatch {
            expected: kind,
            found: header.kind,
        });
    }
    if let Some(expected) = options.expected_k {
        if header.k != expected {
            return Err(Error::KMismatch {
                expected,
                found: header.k,
            });
        }
    }
    check_k(header.k, &options.limits)?;
    let expected = fingerprint_of(cs);
    if header.fingerprint != expected {
        return Err(Error::CircuitMismatch {
            expected,
            found: header.fingerprint,
        });
    }
    if header.payload_len > options.limits.max_payload_bytes {
        return Err(Error::LimitExceeded {
            what: "payload length",
            requested: header.payload_len,
            limit: options.limits.max_payload_bytes,
        });
    }
    Ok(())
}

fn verify_checksum(header: &Header, found: u64) -> Result<()> {
    if found != header.payload_checksum {
        return Err(Error::PayloadChecksum {
            expected: header.payload_checksum,
            found,
        });
    }
    Ok(())
}

/// Counts and hashes what passes through to the inner writer.
struct HashingWriter<W> {
    inner: W,
    hasher: Xxh3,
    written: u64,
}

/// Writes at least this large are hashed on a second thread while they are written.
const PARALLEL_HASH_MIN: usize = 16 << 20;

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() >= PARALLEL_HASH_MIN {
            // A whole polynomial handed over at once: hash it while the kernel copies it.
            // Only the hasher and the bytes cross threads; the writer stays on this one.
            let hasher = &mut self.hasher;
            std::thread::scope(|scope| {
                let hashing = scope.spawn(|| hasher.update(buf));
                let written = self.inner.write_all(buf);
                let hashed = hashing.join();
                written?;
                hashed.map_err(|_| io::Error::other("payload hashing thread panicked"))
            })?;
            self.written += buf.len() as u64;
            return Ok(buf.len());
        }
        let n = self.inner.write(buf)?;
        let done = buf.get(..n).unwrap_or(buf);
        self.hasher.update(done);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Hashes what is read through it.
struct HashingReader<R> {
    inner: io::Take<R>,
    hasher: Xxh3,
    enabled: bool,
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if self.enabled {
            self.hasher.update(buf.get(..n).unwrap_or(buf));
        }
        Ok(n)
    }
}
