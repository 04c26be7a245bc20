//! Polynomials read through the reader: one straight into the key's memory, or a run of
//! spans at once (the bulk read), or in order from a stream.

use super::*;

impl<'a> PayloadReader<'a> {
    /// Fills `buf` from the payload and runs `check` on every piece of it, pieces of
    /// 4 MiB (the last may be shorter) starting at multiples of it, each checked right after
    /// it was read, while it is in cache. Pieces are read and checked in parallel where the
    /// source allows: a positioned source (a file) is read at explicit offsets by several
    /// threads at once (which also spreads the cost of faulting in fresh destination memory
    /// over the cores); a stream is read in order and each piece checked in parallel parts.
    ///
    /// `check` must accept any piece length that is a multiple of its element size when
    /// `buf`'s length is.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_exact`], or the first error `check` returned.
    pub fn read_checked(
        &mut self,
        buf: &mut [u8],
        check: impl Fn(&[u8]) -> Result<()> + Sync,
        context: &'static str,
    ) -> Result<()> {
        self.read_checked_run(&mut [buf], check, context)
    }

    /// Fills `bufs`, the payload's next bytes one after the other, as
    /// [`PayloadReader::read_checked`] fills one (no piece spans two of them): one read, so
    /// that a file read in order keeps its requests in flight from one to the next.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_checked`].
    pub(crate) fn read_checked_run(
        &mut self,
        bufs: &mut [&mut [u8]],
        check: impl Fn(&[u8]) -> Result<()> + Sync,
        context: &'static str,
    ) -> Result<()> {
        let len: u64 = bufs.iter().map(|buf| buf.len() as u64).sum();
        if len > self.remaining {
            return Err(Error::Truncated { context });
        }
        if let Source::At { reader, .. } = &mut self.source {
            let mut hasher = self.hash.hasher();
            let read = reader.read_parallel(
                bufs,
                &check,
                &mut |piece| {
                    if let Some(hasher) = hasher.as_mut() {
                        hasher.update(piece);
                    }
                },
                context,
            );
            self.hash.after(read)?;
            self.remaining -= len;
            return Ok(());
        }
        for buf in bufs.iter_mut() {
            for piece in buf.chunks_mut(BULK_STEP) {
                self.read_exact(piece, context)?;
                piece.par_chunks(BULK_STEP / 64).try_for_each(&check)?;
            }
        }
        Ok(())
    }

    /// Reads one polynomial of the key, in its elements' raw encoding (Montgomery limbs, 32
    /// bytes each), into `buf`, as [`PayloadReader::read_checked`] does. Call it for the key's
    /// polynomials, in halo2's order, and for nothing else: when the key's digest is being
    /// computed, each piece is hashed here while in cache, and the polynomial's hash becomes
    /// the next in the digest.
    ///
    /// # Errors
    ///
    /// As [`PayloadReader::read_checked`].
    pub fn read_polynomial(
        &mut self,
        buf: &mut [u8],
        check: impl Fn(&[u8]) -> Result<()> + Sync,
        context: &'static str,
    ) -> Result<()> {
        let hasher = self.polynomial_hasher(buf.len());
        let base = buf.as_ptr() as usize;
        self.read_checked(
            buf,
            |piece| {
                check(piece)?;
                if let Some(hasher) = &hasher {
                    hasher.add(piece.as_ptr() as usize - base, piece);
                }
                Ok(())
            },
            context,
        )?;
        self.record_polynomial(hasher)
    }

    /// Reads a run of spans, in payload order: the small fields a decoder checks itself
    /// ([`Span::Bytes`], each handed to `check_bytes` with its index among `spans` as soon
    /// as read: before any polynomial is read, except from an object store or a file read
    /// from the disk, where every byte is read in payload order and each small field is
    /// checked as it arrives) and the key's polynomials
    /// ([`Span::Polynomial`], raw elements, in halo2's order, checked below the modulus
    /// unless `validation` trusts them, and hashed for the key's digest when it is
    /// computed), as the decoder expects them laid out for its circuit.
    ///
    /// From a file, an object or memory (a source whose length is verified) every
    /// polynomial is read straight into its own new vector, never zeroed first, in pieces
    /// spread over the cores, while this thread hashes the pieces in payload order as they
    /// land. From a stream, span after span, each vector growing with the bytes that arrive
    /// (as [`read_polynomial`](crate::backend_api::field::read_polynomial) does).
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] when the payload is shorter than the spans,
    /// [`Error::OutOfMemory`], [`Error::Truncated`], [`Error::InvalidFieldElement`], and
    /// `check_bytes`'s errors.
    pub fn read_spans(
        &mut self,
        spans: &[Span],
        groups: &[usize],
        validation: Validation,
        mut check_bytes: impl FnMut(usize, &[u8]) -> Result<()>,
        context: &'static str,
    ) -> Result<SpanData> {
        let total: u128 = spans.iter().map(Span::len).sum();
        self.ensure_available(total, context)?;
        let total = u64::try_from(total).map_err(|_| Error::Truncated { context })?;
        let bulk = self.length_verified && crate::memory::layout_matches();
        let check = |piece: &[u8]| check_raw_elements(piece, validation, context);
        let record = self.polynomials.is_some();
        let memory;
        let (source, start): (&dyn ReadAt, u64) = match (&self.source, bulk) {
            (Source::At { reader, .. }, true) => (reader.source(), reader.position()),
            (Source::Memory { rest, .. }, true) => {
                memory = Memory(rest);
                (&memory, 0)
            }
            _ => return self.read_spans_in_order(spans, groups, validation, check_bytes, context),
        };
        let (pool, piece) = match source.bulk_plan() {
            Some((piece, pool)) => (Some(pool), piece),
            None => (None, BULK_STEP),
        };
        let workers = Workers {
            pool,
            piece,
            coalesce: source.costly_requests() || source.reads_in_order(),
            lanes: source.requests_at_once(),
            pool_only: source.reads_in_order() && pool.is_some(),
            huge_pages: !source.reads_in_order(),
        };
        let read = bulk::read_spans(
            source,
            start,
            spans,
            groups,
            &mut check_bytes,
            Hooks {
                hash: self.hash.hasher(),
                check: &check,
                record,
                context,
            },
            &workers,
        );
        if read.is_ok() {
            match &mut self.source {
                Source::At { reader, .. } => reader.advance_to(start + total),
                Source::Memory { rest, .. } => {
                    let all: &'a [u8] = rest;
                    *rest = all
                        .get(usize::try_from(total).unwrap_or(usize::MAX)..)
                        .unwrap_or_default();
                }
                Source::Stream(_) => {}
            }
        }
        let (data, recorded) = self.hash.after(read)?;
        self.remaining -= total;
        if let (Some(recorded), Some(polynomials)) = (recorded, &mut self.polynomials) {
            polynomials.extend(recorded);
        }
        Ok(data)
    }

    /// [`PayloadReader::read_spans`] span after span, in order.
    fn read_spans_in_order(
        &mut self,
        spans: &[Span],
        groups: &[usize],
        validation: Validation,
        mut check_bytes: impl FnMut(usize, &[u8]) -> Result<()>,
        context: &'static str,
    ) -> Result<SpanData> {
        let mut data = SpanData::default();
        let mut polynomials = Vec::new();
        for (index, span) in spans.iter().enumerate() {
            match *span {
                Span::Bytes(len) => {
                    let start = data.bytes.len();
                    data.bytes.resize(start + len, 0);
                    let bytes = data.bytes.get_mut(start..).unwrap_or_default();
                    self.read_exact(bytes, context)?;
                    check_bytes(index, bytes)?;
                }
                Span::Polynomial { count, spare } => {
                    let mut values =
                        read_polynomial(self, count, FieldEncoding::Raw, validation, context)?;
                    values
                        .try_reserve_exact(spare)
                        .map_err(|_| Error::OutOfMemory {
                            what: context,
                            bytes: ((count + spare) as u64).saturating_mul(FR_BYTES as u64),
                        })?;
                    polynomials.push(values);
                }
            }
        }
        let mut polynomials = polynomials.into_iter();
        data.groups = groups
            .iter()
            .map(|&members| polynomials.by_ref().take(members).collect())
            .collect();
        if polynomials.next().is_some()
            || data.groups.iter().map(Vec::len).ne(groups.iter().copied())
        {
            return Err(Error::Internal(
                "bulk read groups do not cover its polynomials".into(),
            ));
        }
        Ok(data)
    }
}
