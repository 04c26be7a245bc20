//! Vectors of field elements and points read through the reader, one way for all of them
//! ([`read_vector`]): a key's polynomials (hashed for its digest), other vectors of
//! elements, and the points of parameters and verifying keys.
//!
//! A run of many polynomials from a file, an object or memory is read at once instead
//! ([`PayloadReader::read_spans`]); a stream's run comes back here, span by span.

use super::*;
use crate::field::{decode_chunk, Element};

/// Whether a vector joins the key's digest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Digest {
    /// One of the key's polynomials, in halo2's order: hashed into the digest when it is
    /// computed ([`PayloadReader::read_polynomial`]).
    Polynomial,
    /// Anything else.
    Not,
}

/// Reads `count` field elements, after checking the payload can hold them. Every vector of
/// the payload (scalars, and the points of parameters and verifying keys) is read this way.
///
/// Raw values, where their memory is their raw encoding
/// ([`raw_view`](crate::backend_api::raw_view)) and the count is backed by the payload's
/// verified length, are read straight into the vector's memory with
/// [`PayloadReader::read_checked`]: each piece checked in place while in cache (unless
/// trusted), no staging buffer, no conversion, and from a file several threads at once.
/// Otherwise they are read in 2 MiB steps and decoded in parallel (compressed points are
/// always checked: decompression needs a valid x), the vector growing as bytes arrive.
/// A polynomial ([`read_polynomial`]) is hashed for the key's digest piece by piece, in
/// its raw encoding, whichever way it was read.
///
/// # Errors
///
/// [`Error::LimitExceeded`] if the payload cannot hold `count` elements, [`Error::Truncated`],
/// [`Error::InvalidFieldElement`], or [`Error::OutOfMemory`].
pub fn read_fr_vec(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<Vec<Fr>> {
    read_vector(reader, count, encoding, validation, context, Digest::Not)
}

/// Reads one polynomial of the key, `count` elements, as [`read_fr_vec`] does, and, when the
/// key's digest is being computed, hashes it while reading
/// ([`PayloadReader::read_polynomial`]). Read the key's polynomials with it, in halo2's order,
/// and nothing else.
///
/// # Errors
///
/// As [`read_fr_vec`].
pub fn read_polynomial(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<Vec<Fr>> {
    read_vector(
        reader,
        count,
        encoding,
        validation,
        context,
        Digest::Polynomial,
    )
}

/// Reads `count` values (scalars or points) in `encoding`, after checking the payload can
/// hold them, as [`read_fr_vec`] describes.
///
/// # Errors
///
/// [`Error::LimitExceeded`] if the payload cannot hold `count` values, [`Error::Truncated`],
/// [`Error::InvalidFieldElement`], [`Error::InvalidPoint`], [`Error::OutOfMemory`].
pub(crate) fn read_vector<E: Element>(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
    digest: Digest,
) -> Result<Vec<E>> {
    let encoded = E::encoded_bytes(encoding);
    reader.ensure_available(count as u128 * encoded as u128, context)?;
    if encoding == FieldEncoding::Raw && reader.prealloc(count) == count {
        if let Some(mut values) = crate::memory::zeroed_of::<E>(count)? {
            let bytes = crate::memory::raw_bytes_mut_of(&mut values)
                .ok_or_else(|| Error::Internal("raw view of a zeroed vector".into()))?;
            let check = |piece: &[u8]| E::check_raw(piece, validation, context);
            match digest {
                Digest::Polynomial => reader.read_polynomial(bytes, check, context)?,
                Digest::Not => reader.read_checked(bytes, check, context)?,
            }
            return Ok(values);
        }
    }
    let hasher = match digest {
        Digest::Polynomial => reader.polynomial_hasher(count * E::BYTES),
        Digest::Not => None,
    };
    let mut values = Vec::new();
    values
        .try_reserve_exact(reader.prealloc(count))
        .map_err(|_| Error::OutOfMemory {
            what: context,
            bytes: (reader.prealloc(count) as u64).saturating_mul(E::BYTES as u64),
        })?;
    let step_values = (STEP_BYTES / encoded).max(1);
    let mut staging = vec![0u8; count.min(step_values) * encoded];
    let mut raw = Vec::new();
    let mut left = count;
    while left > 0 {
        let step = left.min(step_values);
        let bytes = staging
            .get_mut(..step * encoded)
            .ok_or(Error::Truncated { context })?;
        reader.read_exact(bytes, context)?;
        let start = values.len();
        decode_chunk(bytes, encoding, validation, context, &mut values)?;
        if let Some(hasher) = &hasher {
            raw.clear();
            E::append_raw(values.get(start..).unwrap_or_default(), &mut raw);
            hasher.add(start * E::BYTES, &raw);
        }
        left -= step;
    }
    if digest == Digest::Polynomial {
        reader.record_polynomial(hasher)?;
    }
    Ok(values)
}

/// Reads `N` vectors of `count` values each, one after the other in the payload (each with
/// its own context), as [`read_vector`] reads one; where they are read straight into memory,
/// with one read of the reader for all of them, so that a file read from the disk keeps its
/// requests in flight from one vector to the next (read one by one, each would wait for its
/// last piece before the next asked for its first). For [`Digest::Polynomial`], each vector
/// is hashed as the next polynomial, in order.
///
/// # Errors
///
/// As [`read_vector`].
pub(crate) fn read_vectors<E: Element, const N: usize>(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    contexts: [&'static str; N],
    digest: Digest,
) -> Result<[Vec<E>; N]> {
    let Some(&first) = contexts.first() else {
        return Ok(std::array::from_fn(|_| Vec::new()));
    };
    let bytes = count as u128 * E::encoded_bytes(encoding) as u128;
    reader.ensure_available(N as u128 * bytes, first)?;
    let straight = encoding == FieldEncoding::Raw && reader.prealloc(count) == count;
    let zeroed: Option<Vec<Vec<E>>> = match straight {
        true => (0..N)
            .map(|_| crate::memory::zeroed_of::<E>(count))
            .collect::<Result<_>>()?,
        false => None,
    };
    let Some(mut values) = zeroed else {
        let mut vectors = Vec::with_capacity(N);
        for context in contexts {
            vectors.push(read_vector(
                reader, count, encoding, validation, context, digest,
            )?);
        }
        return vectors
            .try_into()
            .map_err(|_| Error::Internal("read_vectors read another count".into()));
    };
    let hashers: Vec<Option<crate::poly_hash::PolyHasher>> = (0..N)
        .map(|_| match digest {
            Digest::Polynomial => reader.polynomial_hasher(count * E::BYTES),
            Digest::Not => None,
        })
        .collect();
    let mut bufs = Vec::with_capacity(N);
    for vector in &mut values {
        bufs.push(
            crate::memory::raw_bytes_mut_of(vector)
                .ok_or_else(|| Error::Internal("raw view of a zeroed vector".into()))?,
        );
    }
    // Where each vector's bytes start: a piece belongs to the vector whose bytes hold it.
    let starts: Vec<usize> = bufs.iter().map(|buf| buf.as_ptr() as usize).collect();
    let len = count * E::BYTES;
    let check = |piece: &[u8]| {
        let at = piece.as_ptr() as usize;
        let (vector, start) = starts
            .iter()
            .copied()
            .enumerate()
            .find(|&(_, start)| (start..start + len).contains(&at))
            .ok_or_else(|| Error::Internal("a piece of no vector".into()))?;
        let context = contexts.get(vector).copied().unwrap_or(first);
        E::check_raw(piece, validation, context)?;
        if let Some(Some(hasher)) = hashers.get(vector) {
            hasher.add(at - start, piece);
        }
        Ok(())
    };
    reader.read_checked_run(&mut bufs, check, first)?;
    if digest == Digest::Polynomial {
        for hasher in hashers {
            reader.record_polynomial(hasher)?;
        }
    }
    values
        .try_into()
        .map_err(|_| Error::Internal("read_vectors read another count".into()))
}

/// Encoded bytes read and decoded per step when values are converted: small enough to stay
/// in cache between the read and the decoding, large enough that spreading it over threads
/// costs little.
const STEP_BYTES: usize = CHUNK_ELEMENTS * FR_BYTES;
