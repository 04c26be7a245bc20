//! Writing a container: the header placeholder, the payload with its checksum and the key's
//! digest computed beside it, the record, then the header; or all of it in order, for a
//! writer that cannot seek back.

use super::*;

/// Writes a header placeholder and the payload, then the record section, then seeks back to
/// write the real header, which records the digest (computed beside the encoding, on another
/// thread); returns it.
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
        // Flushed before waiting for the digest: a file's bytes then go to the disk meanwhile
        // (see `Writeback`).
        let encoded = encoded.and_then(|()| hashing.flush().during("write"));
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
