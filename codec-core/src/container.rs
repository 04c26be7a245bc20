//! Framing a backend's payload with the container header, and checking it on the way in:
//! one writer, and one reader for every source of bytes.

use std::io::{self, Read, Seek, SeekFrom, Write};

use halo2_proofs::plonk::{Circuit, ConstraintSystem};
use halo2curves::bn256::Fr;
use xxhash_rust::xxh3::{xxh3_64, Xxh3};

use crate::circuit::{check_k, fingerprint_of};
use crate::codec::{DecodeContext, KeyCodec};
use crate::digest;
use crate::error::{Error, IoContext, Result};
use crate::header::{Header, HEADER_LEN, PREFIX_LEN};
use crate::ids::{ArtifactKind, Fingerprint, KeyDigest, WireMode};
use crate::item::{Item, ItemRef, Key};
use crate::options::{Checksum, LoadOptions};
use crate::payload::PayloadReader;
use crate::record::RecordableParams;
use crate::source::ReadAt;

/// Where a container is read from.
pub enum Input<'a> {
    /// Bytes in memory, exactly one container.
    Memory(&'a [u8]),
    /// A stream, read in order from its current position; its length is unknown, so
    /// allocations grow with the data actually read, and it may continue after the container.
    Stream(&'a mut dyn Read),
    /// A source of `len` bytes read at explicit offsets (a file), exactly one container: small
    /// reads through a buffer of `buffer` bytes, bulk reads straight into the key's memory
    /// from several threads.
    At {
        /// The bytes.
        source: &'a dyn ReadAt,
        /// How many there are.
        len: u64,
        /// Bytes of the buffer small reads go through.
        buffer: usize,
    },
}

/// Writes header placeholder, payload, then seeks back to write the real header, which
/// records the digest (computed beside the encoding, on another thread); returns it.
/// What a container says of the circuit its key belongs to: the fingerprint, and the record
/// section that follows the payload (empty: none, as for parameters).
#[derive(Clone, Debug)]
pub struct Described {
    /// The circuit's fingerprint ([`Fingerprint::NONE`] for parameters).
    pub fingerprint: Fingerprint,
    /// The record section ([`CircuitRecord::to_section`](crate::record::CircuitRecord::to_section)), or empty.
    pub section: Vec<u8>,
}

impl Described {
    /// Parameters: no circuit.
    pub fn none() -> Described {
        Described {
            fingerprint: Fingerprint::NONE,
            section: Vec::new(),
        }
    }

    /// The circuit `C` with `circuit_params`: its fingerprint, and its record with those
    /// parameters when it can be recorded (see
    /// [`CircuitRecord::of`](crate::record::CircuitRecord::of); one that cannot, or whose
    /// record is over [`MAX_RECORD_BYTES`](crate::record::MAX_RECORD_BYTES), is described by
    /// its fingerprint alone).
    pub fn of<C: Circuit<Fr>>(circuit_params: C::Params) -> Described
    where
        C::Params: RecordableParams,
    {
        let params = circuit_params.to_recorded_json();
        let cs = crate::circuit::configure::<C>(circuit_params);
        let section = crate::record::CircuitRecord::of(&cs)
            .map(|record| record.with_params(params).to_section())
            .ok()
            .filter(|section| section.len() <= crate::record::MAX_RECORD_BYTES + 8)
            .unwrap_or_default();
        Described {
            fingerprint: fingerprint_of(&cs),
            section,
        }
    }

    /// This description without its record (the fingerprint alone).
    pub fn without_record(self) -> Described {
        Described {
            section: Vec::new(),
            ..self
        }
    }

    /// The record's length in the header (0: none).
    fn record_len(&self) -> u32 {
        u32::try_from(self.section.len().saturating_sub(8)).unwrap_or(0)
    }
}

pub(crate) fn write<K: KeyCodec + ?Sized>(
    codec: &K,
    item: ItemRef<'_>,
    circuit: &Described,
    writer: &mut (impl Write + Seek),
) -> Result<KeyDigest> {
    let start = writer.stream_position().during("seek in")?;
    writer.write_all(&[0u8; HEADER_LEN]).during("write")?;
    let (header, digest) = encode_beside_digest(codec, item, circuit, &mut *writer)?;
    writer.write_all(&circuit.section).during("write")?;
    writer.seek(SeekFrom::Start(start)).during("seek in")?;
    writer.write_all(&header.to_bytes()).during("write")?;
    writer
        .seek(SeekFrom::Start(start + header.container_len(HEADER_LEN)))
        .during("seek in")?;
    writer.flush().during("write")?;
    Ok(digest)
}

/// Writes a container to a writer that cannot seek back (an upload), in order: the payload
/// is encoded twice, first only to learn the header (length, checksum, digest), then to
/// `writer` behind that header. Nothing is held in memory but the codec's own buffers, except
/// for a codec whose encoding is costly ([`KeyCodec::costly_encoding`]): its first payload,
/// if it comes to at most `keep` bytes, is kept and written as it is, and the item is encoded
/// once. The second encoding must hash as the first did, or this fails before the writer has
/// all the bytes (a codec whose output is not deterministic).
///
/// # Errors
///
/// The codec's and the writer's; [`Error::Internal`] when the two encodings differ.
pub fn write_in_order<K: KeyCodec + ?Sized>(
    codec: &K,
    item: ItemRef<'_>,
    circuit: &Described,
    writer: &mut dyn Write,
    keep: usize,
) -> Result<KeyDigest> {
    let mut kept = Kept::within(match codec.costly_encoding() {
        true => keep,
        false => 0,
    });
    let (header, digest) = encode_beside_digest(codec, item, circuit, &mut kept)?;
    writer.write_all(&header.to_bytes()).during("write")?;
    if let Some(payload) = kept.bytes {
        // The very bytes the header's length and checksum were computed on.
        writer.write_all(&payload).during("write")?;
        writer.write_all(&circuit.section).during("write")?;
        writer.flush().during("write")?;
        return Ok(digest);
    }
    let mut hashing = HashingWriter {
        inner: &mut *writer,
        hasher: Xxh3::new(),
        written: 0,
    };
    match item {
        ItemRef::Key(key) => codec.encode(key, &mut hashing),
        ItemRef::Params(params) => codec.encode_params(params, &mut hashing),
    }?;
    let (written, checksum) = (hashing.written, hashing.hasher.digest());
    if (written, checksum) != (header.payload_len, header.payload_checksum) {
        return Err(Error::Internal(format!(
            "the {} codec encoded the same item twice differently",
            codec.name()
        )));
    }
    writer.write_all(&circuit.section).during("write")?;
    writer.flush().during("write")?;
    Ok(digest)
}

/// A first encoding's payload, kept while it comes to at most `limit` bytes (its memory never
/// more than that) and dropped once it would come to more; what is written to it is
/// otherwise discarded, as by [`io::sink`].
struct Kept {
    bytes: Option<Vec<u8>>,
    limit: usize,
}

impl Kept {
    /// Keeps up to `limit` bytes; none when `limit` is 0.
    fn within(limit: usize) -> Self {
        Kept {
            bytes: (limit > 0).then(Vec::new),
            limit,
        }
    }
}

impl Write for Kept {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(bytes) = &mut self.bytes {
            let needed = bytes.len().saturating_add(buf.len());
            // Grown by doubling, never past the limit; an allocation refused drops the bytes
            // (the item is encoded again) rather than fail the write.
            let grown = needed
                .max(bytes.capacity().saturating_mul(2))
                .min(self.limit);
            let room = needed <= self.limit
                && (needed <= bytes.capacity()
                    || bytes.try_reserve_exact(grown - bytes.len()).is_ok());
            match room {
                true => bytes.extend_from_slice(buf),
                false => self.bytes = None,
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Encodes `item`'s payload into `out` while its digest is computed on another thread;
/// returns the header that describes the payload, and the digest.
fn encode_beside_digest<K: KeyCodec + ?Sized>(
    codec: &K,
    item: ItemRef<'_>,
    circuit: &Described,
    out: impl Write,
) -> Result<(Header, KeyDigest)> {
    let mut hashing = HashingWriter {
        inner: out,
        hasher: Xxh3::new(),
        written: 0,
    };
    let (encoded, digest) = std::thread::scope(|scope| {
        let digest = std::thread::Builder::new()
            .name("keycodec-digest".into())
            .spawn_scoped(scope, || digest::of_item_ref(item));
        let encoded = match item {
            ItemRef::Key(key) => codec.encode(key, &mut hashing),
            ItemRef::Params(params) => codec.encode_params(params, &mut hashing),
        };
        let digest = match digest {
            Ok(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the digest thread panicked".into()))),
            // No thread to spare: compute it here.
            Err(_) => digest::of_item_ref(item),
        };
        (encoded, digest)
    });
    encoded?;
    let digest = digest?;
    let header = Header {
        codec: codec.id(),
        mode: codec.wire_mode().byte(),
        kind: item.kind(),
        k: item.k(),
        payload_len: hashing.written,
        payload_checksum: hashing.hasher.digest(),
        fingerprint: circuit.fingerprint,
        digest: Some(digest),
        written_by: Some(crate::header::WrittenBy::this_build()),
        record_len: circuit.record_len(),
    };
    Ok((header, digest))
}

/// What a load asks for.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    /// The kind wanted.
    pub kind: ArtifactKind,
    /// A verifying key may be read from a proving key's container (its prefix: the
    /// polynomials are not decoded).
    pub from_proving_key: bool,
    /// Compute the digest (it is computed anyway when the options pin one).
    pub digest: bool,
}

impl Request {
    /// `kind`, from a container of that kind.
    pub fn of(kind: ArtifactKind) -> Self {
        Request {
            kind,
            from_proving_key: false,
            digest: false,
        }
    }

    /// A key of `kind` from any container that holds one: a verifying key from a verifying
    /// key's container or a proving key's (as `KeyCodecExt::load_verifying_key` reads it).
    /// What a load through a cache or an object asks for, so that a verifying key is found
    /// the same way wherever it is.
    pub fn for_key(kind: ArtifactKind) -> Self {
        Request {
            from_proving_key: kind == ArtifactKind::Verifying,
            ..Request::of(kind)
        }
    }
}

/// What a container held and, when the load computed it, its digest.
pub struct Decoded {
    /// The key or parameters.
    pub item: Item,
    /// Their digest, when the load computed it.
    pub digest: Option<KeyDigest>,
}

/// Reads one container: checks the header (before anything is decoded: codec, wire mode,
/// kind, `k`, circuit, declared length against the real one where the source has one),
/// decodes the payload while hashing exactly the bytes handed to the decoder (in memory,
/// where they cannot change, before decoding them), and compares the checksum before
/// returning the key.
///
/// The key's digest is computed (its polynomials hashed as they are read) when `digest` is
/// set or the options pin one, and then checked against the pin and the digest the header
/// records.
///
/// `cs` is the circuit's constraint system for keys (its fingerprint must be the header's),
/// `None` for parameters (the header's fingerprint must be [`Fingerprint::NONE`]).
pub fn read<K: KeyCodec + ?Sized>(
    codec: &K,
    request: Request,
    cs: Option<ConstraintSystem<Fr>>,
    input: Input<'_>,
    options: &LoadOptions,
) -> Result<Decoded> {
    let Request {
        kind,
        from_proving_key,
        digest,
    } = request;
    // Bytes in memory cannot change while they are read: their checksum is verified before
    // decoding, which refuses a damaged payload without decoding it. Every other source is
    // hashed as the decoder reads it.
    let (mut reader, total, memory) = match input {
        Input::Memory(bytes) => (
            PayloadReader::from_slice(bytes),
            Some(bytes.len() as u64),
            Some(bytes),
        ),
        Input::Stream(stream) => (PayloadReader::new(stream, u64::MAX, false), None, None),
        Input::At {
            source,
            len,
            buffer,
        } => (PayloadReader::at(source, 0, len, buffer), Some(len), None),
    };
    let (header, header_len) = read_header(&mut reader, total)?;
    let fingerprint = cs.as_ref().map_or(Fingerprint::NONE, fingerprint_of);
    let prefix =
        from_proving_key && kind == ArtifactKind::Verifying && header.kind == ArtifactKind::Proving;
    let expected_kind = if prefix { ArtifactKind::Proving } else { kind };
    let mode = check_header(codec, expected_kind, &header, fingerprint, options)?;
    if let Some(total) = total {
        check_length(&header, total - header_len as u64)?;
    }
    let verify = options.checksum == Checksum::Verify;
    if let (true, Some(bytes)) = (verify, memory) {
        let payload = usize::try_from(header.payload_len)
            .ok()
            .and_then(|len| bytes.get(header_len..header_len.checked_add(len)?))
            .unwrap_or_default();
        verify_checksum(&header, xxh3_64(payload))?;
    }
    let hash_while_reading = verify && memory.is_none();
    let mut payload = reader.narrow(header.payload_len, total.is_some(), hash_while_reading)?;
    let context = DecodeContext {
        kind,
        payload_kind: header.kind,
        mode,
        k: Some(header.k),
        validation: codec.effective_validation(mode, options.validation),
        limits: options.limits,
        cs: cs.unwrap_or_default(),
    };
    let digest = digest || options.expected_digest.is_some();
    if digest {
        payload.record_polynomials();
    }
    let decoded = decode_item(codec, &mut payload, &context, options);
    // A pin authenticates a verifying key read from a proving key's container by itself: the
    // rest of it need not be read.
    let pinned = options.expected_digest.is_some() || options.expected_transcript.is_some();
    let item = if prefix {
        settle_prefix(
            decoded,
            &mut payload,
            &header,
            hash_while_reading && !pinned,
        )?
    } else {
        settle(decoded, &mut payload, &header, hash_while_reading)?
    };
    // The record section is checked whenever the payload's checksum is: every byte of the
    // container is then covered.
    if verify && !(prefix && pinned) && header.record_len > 0 {
        // Bounded: a stream's length is not known.
        if header.record_len as usize > crate::record::MAX_RECORD_BYTES {
            return Err(Error::Malformed(format!(
                "the circuit's record is {} bytes (at most {})",
                header.record_len,
                crate::record::MAX_RECORD_BYTES
            )));
        }
        let end = (header_len as u64).saturating_add(header.payload_len);
        let section = payload.read_after(header.record_section_len(), memory, end)?;
        crate::record::record_of_section(&section)?;
    }
    if item.kind() != kind {
        return Err(Error::Internal(format!(
            "the {} decoder returned {} for {kind}",
            codec.name(),
            item.kind()
        )));
    }
    if let Item::Key(key) = &item {
        check_transcript(key, options)?;
    }
    // A prefix's digest is the verifying key's; the header records the proving key's.
    let recorded = if prefix { None } else { header.digest };
    let digest = digest
        .then(|| check_digest(&item, payload.recorded_polynomials(), recorded, options))
        .transpose()?;
    Ok(Decoded { item, digest })
}

/// Reads the header from the reader's start: its first bytes say how long it is (a
/// version 1, 2 or 3 header). `total` is the source's length, when it has one.
fn read_header(reader: &mut PayloadReader<'_>, total: Option<u64>) -> Result<(Header, usize)> {
    let mut header_bytes = [0u8; HEADER_LEN];
    let (prefix, rest) = header_bytes.split_at_mut(PREFIX_LEN);
    reader.read_exact(prefix, "container header")?;
    let header_len = Header::len_of(prefix).map_err(|err| {
        // Fewer bytes than any header: too short to say more.
        if total.is_some_and(|total| total < HEADER_LEN as u64) {
            Error::Truncated {
                context: "container header",
            }
        } else {
            err
        }
    })?;
    let rest = rest.get_mut(..header_len - PREFIX_LEN).unwrap_or_default();
    reader.read_exact(rest, "container header")?;
    Ok((Header::from_bytes(&header_bytes)?, header_len))
}

/// The backend's decode of the payload as the context's kind (parameters made from a public
/// seed refused unless the options allow them).
fn decode_item<K: KeyCodec + ?Sized>(
    codec: &K,
    payload: &mut PayloadReader<'_>,
    context: &DecodeContext,
    options: &LoadOptions,
) -> Result<Item> {
    match context.kind {
        ArtifactKind::Params => {
            let params = codec.decode_params(payload, context)?;
            crate::test_setup::refuse_test_setup(&params, options.test_setup)?;
            Ok(Item::Params(params))
        }
        ArtifactKind::Proving | ArtifactKind::Verifying => {
            codec.decode(payload, context).map(Item::Key)
        }
    }
}

/// Checks the verifying key's `transcript_repr()` against the pin, if any.
fn check_transcript(key: &Key, options: &LoadOptions) -> Result<()> {
    let Some(expected) = options.expected_transcript else {
        return Ok(());
    };
    let found = match key {
        Key::Proving(pk) => pk.get_vk().transcript_repr(),
        Key::Verifying(vk) => vk.transcript_repr(),
    };
    if found != expected {
        return Err(Error::TranscriptMismatch { expected, found });
    }
    Ok(())
}

/// The digest, checked against what the header records and against the pin.
fn check_digest(
    item: &Item,
    polynomials: Option<Vec<[u8; 32]>>,
    recorded: Option<KeyDigest>,
    options: &LoadOptions,
) -> Result<KeyDigest> {
    let found = match item {
        Item::Key(key) => digest::of_decoded(key, polynomials)?,
        Item::Params(params) => digest::of_params(params, polynomials)?,
    };
    if let Some(expected) = options.expected_digest {
        if found != expected {
            return Err(Error::DigestMismatch {
                kind: item.kind(),
                path: None,
                expected,
                found,
            });
        }
    }
    if let Some(recorded) = recorded {
        if found != recorded {
            return Err(Error::RecordedDigestMismatch { recorded, found });
        }
    }
    Ok(found)
}

/// Turns a decoder's outcome into the load's: a key only when every byte of the payload was
/// decoded and (when the reader hashed them) their checksum matches; after a decode error
/// or a leftover payload, corruption (a checksum mismatch) is reported in preference, since
/// it explains both.
fn settle<T>(
    decoded: Result<T>,
    payload: &mut PayloadReader<'_>,
    header: &Header,
    verify: bool,
) -> Result<T> {
    let value = explained(decoded, payload, header, verify)?;
    let left = payload.remaining();
    if left > 0 {
        explain(payload, header, verify)?;
        return Err(Error::TrailingBytes { count: left });
    }
    if verify {
        let found = payload.digest().ok_or_else(|| {
            Error::Internal("the payload was decoded but its checksum was lost".into())
        })?;
        verify_checksum(header, found)?;
    }
    Ok(value)
}

/// As [`settle`], for a verifying key read from a proving key's container: the rest of the
/// payload (the polynomials) is left unread, or, when `verify` is set, read and hashed
/// without being decoded, so that the checksum covers the whole payload as always.
fn settle_prefix<T>(
    decoded: Result<T>,
    payload: &mut PayloadReader<'_>,
    header: &Header,
    verify: bool,
) -> Result<T> {
    let value = explained(decoded, payload, header, verify)?;
    if verify {
        let found = payload.digest_afresh_from_here().ok_or(Error::Truncated {
            context: "the proving key's polynomials",
        })?;
        verify_checksum(header, found)?;
    }
    Ok(value)
}

/// A decoder's outcome, with a decode error reported as the checksum mismatch that explains
/// it when there is one. An I/O failure of the source says nothing about the bytes.
fn explained<T>(
    decoded: Result<T>,
    payload: &mut PayloadReader<'_>,
    header: &Header,
    verify: bool,
) -> Result<T> {
    match decoded {
        Err(err @ Error::Io { .. }) => Err(err),
        Err(err) => {
            explain(payload, header, verify)?;
            Err(err)
        }
        ok => ok,
    }
}

/// Fails with the checksum mismatch, when verifying and the payload's checksum (hashed
/// afresh) is not the recorded one.
fn explain(payload: &mut PayloadReader<'_>, header: &Header, verify: bool) -> Result<()> {
    if !verify {
        return Ok(());
    }
    match payload.digest_afresh() {
        Some(found) => verify_checksum(header, found),
        None => Ok(()),
    }
}

/// Compares the declared payload length with the bytes actually after the header.
fn check_length(header: &Header, available: u64) -> Result<()> {
    // The payload, then the record section (version 4) when there is one.
    let expected = header
        .payload_len
        .saturating_add(header.record_section_len());
    if available < expected {
        return Err(Error::LengthMismatch {
            declared: header.payload_len,
            available: available.saturating_sub(header.record_section_len()),
        });
    }
    if available > expected {
        return Err(Error::TrailingBytes {
            count: available - expected,
        });
    }
    Ok(())
}

/// Checks what the header says against what the caller expects; returns the codec's own
/// wire mode for the header's mode byte.
fn check_header<K: KeyCodec + ?Sized>(
    codec: &K,
    kind: ArtifactKind,
    header: &Header,
    expected: Fingerprint,
    options: &LoadOptions,
) -> Result<WireMode> {
    if !options.codecs.contains(header.codec) {
        return Err(Error::CodecNotAllowed {
            found: header.codec,
        });
    }
    if header.codec != codec.id() {
        return Err(Error::CodecMismatch {
            expected: codec.id(),
            expected_name: codec.name(),
            found: header.codec,
        });
    }
    let mode = codec
        .wire_modes()
        .iter()
        .find(|mode| mode.byte() == header.mode)
        .copied()
        .ok_or(Error::UnsupportedMode {
            codec: codec.name(),
            mode: header.mode,
        })?;
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
    if header.fingerprint != expected {
        let this_build = crate::header::WrittenBy::this_build();
        return Err(match header.written_by {
            // Not proven another circuit: the fingerprint hashes halo2's Debug output.
            Some(writer) if writer.halo2() != this_build.halo2() => {
                Error::CircuitMismatchAcrossHalo2 {
                    expected,
                    found: header.fingerprint,
                    written_with: writer.halo2().to_owned(),
                    read_with: crate::header::HALO2_CRATE,
                }
            }
            _ => Error::CircuitMismatch {
                expected,
                found: header.fingerprint,
            },
        });
    }
    if header.payload_len > options.limits.max_payload_bytes {
        return Err(Error::LimitExceeded {
            what: "payload length",
            requested: header.payload_len,
            limit: options.limits.max_payload_bytes,
        });
    }
    Ok(mode)
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
            let inner = &mut self.inner;
            let overlapped = std::thread::scope(|scope| -> io::Result<bool> {
                let hashing = std::thread::Builder::new()
                    .name("keycodec-hash".into())
                    .spawn_scoped(scope, || hasher.update(buf));
                let Ok(hashing) = hashing else {
                    return Ok(false);
                };
                let written = inner.write_all(buf);
                let hashed = hashing.join();
                written?;
                hashed.map_err(|_| io::Error::other("payload hashing thread panicked"))?;
                Ok(true)
            })?;
            if !overlapped {
                // No thread to spare: hash here.
                self.inner.write_all(buf)?;
                self.hasher.update(buf);
            }
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
