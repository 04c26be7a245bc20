//! What the reader computes beside the bytes it hands out: the payload's stream hash, the
//! polynomials' digest hashes, and the record section read after the payload.

use super::*;

impl PayloadReader<'_> {
    /// The `len` bytes that follow the payload (a container's record section), read outside
    /// the payload's length and hash: from a stream, its next bytes (the payload must have
    /// been read whole; memory grows with the bytes that arrive, not with `len`); from a
    /// positioned source, the bytes after the payload's `end`; from memory, those of the
    /// container's bytes given. The caller has checked that a source of known length holds
    /// them.
    pub(crate) fn read_after(
        &mut self,
        len: u64,
        memory: Option<&[u8]>,
        end: u64,
    ) -> Result<Vec<u8>> {
        let eof = || io::Error::from(io::ErrorKind::UnexpectedEof);
        let read = match (&mut self.source, memory) {
            (_, Some(bytes)) => usize::try_from(end)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(start, len)| bytes.get(start..start.checked_add(len)?))
                .map(<[u8]>::to_vec)
                .ok_or_else(eof),
            (Source::Stream(inner), None) => {
                let mut bytes = Vec::new();
                inner.take(len).read_to_end(&mut bytes).and_then(|n| {
                    if n as u64 == len {
                        Ok(bytes)
                    } else {
                        Err(eof())
                    }
                })
            }
            (Source::At { reader, .. }, None) => {
                let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
                reader
                    .source()
                    .read_exact_at(&mut bytes, end)
                    .map(|()| bytes)
            }
            (Source::Memory { .. }, None) => Err(eof()),
        };
        read.map_err(|err| Error::from_read(err, "the circuit's record"))
    }

    /// From now on, hashes every polynomial read with [`PayloadReader::read_polynomial`] (or
    /// [`read_polynomial`](crate::backend_api::field::read_polynomial)), for the key's digest.
    pub(crate) fn record_polynomials(&mut self) {
        self.polynomials = Some(Vec::new());
    }

    /// The hashes of the polynomials read since [`PayloadReader::record_polynomials`], in
    /// order.
    pub(crate) fn recorded_polynomials(&mut self) -> Option<Vec<[u8; 32]>> {
        self.polynomials.take()
    }

    /// A hasher for the next polynomial, `len` bytes of raw elements, when recording.
    pub(crate) fn polynomial_hasher(&self, len: usize) -> Option<PolyHasher> {
        self.polynomials.as_ref().map(|_| PolyHasher::new(len))
    }

    /// Records the hash of the next polynomial.
    ///
    /// # Errors
    ///
    /// Those of [`PolyHasher::finish`].
    pub(crate) fn record_polynomial(&mut self, hasher: Option<PolyHasher>) -> Result<()> {
        if let (Some(hasher), Some(polynomials)) = (hasher, &mut self.polynomials) {
            polynomials.push(hasher.finish()?);
        }
        Ok(())
    }

    /// The XXH3-64 of every byte handed out, when hashing and every byte of the payload has
    /// been handed out; `None` otherwise.
    pub(crate) fn digest(&self) -> Option<u64> {
        match &self.hash {
            Hash::On(hasher) if self.remaining == 0 => Some(hasher.digest()),
            _ => None,
        }
    }

    /// The XXH3-64 of the whole payload, for telling corruption from other errors after a
    /// decode failed: hashed afresh from the source where it can be read again (memory, a
    /// positioned source), otherwise by handing out and hashing what is left. `None` if the
    /// bytes cannot be read.
    pub(crate) fn digest_afresh(&mut self) -> Option<u64> {
        match &self.source {
            Source::Memory { whole, .. } => return Some(xxh3_64(whole)),
            Source::At {
                reader,
                origin,
                len,
            } => {
                return hash_range(reader.source(), *origin, *len);
            }
            Source::Stream(_) => {}
        }
        io::copy(self, &mut io::sink()).ok()?;
        self.digest()
    }

    /// Reads what is left of the payload without handing it out (hashing it when hashing),
    /// then returns the digest of the whole payload, as [`PayloadReader::digest`]; `None` if
    /// the rest cannot be read.
    pub(crate) fn digest_afresh_from_here(&mut self) -> Option<u64> {
        io::copy(self, &mut io::sink()).ok()?;
        self.digest()
    }
}
