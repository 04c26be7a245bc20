//! Field elements and points read through the reader: the one way backends read
//! polynomials ([`read_polynomial`]) and every other vector of elements.

use super::*;

/// Reads one point from the payload.
///
/// # Errors
///
/// [`Error::Truncated`] or [`Error::InvalidPoint`].
fn read_g1(
    reader: &mut PayloadReader<'_>,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<G1Affine> {
    let mut buf = [0u8; G1_RAW_BYTES];
    let bytes = buf
        .get_mut(..encoding.point_bytes())
        .ok_or(Error::InvalidPoint { context })?;
    reader.read_exact(bytes, context)?;
    decode_g1(bytes, encoding, validation, context)
}

/// Reads `count` points, after checking the payload can hold them.
///
/// # Errors
///
/// [`Error::LimitExceeded`], [`Error::Truncated`] or [`Error::InvalidPoint`].
pub(crate) fn read_g1_vec(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<Vec<G1Affine>> {
    reader.ensure_available(count as u128 * encoding.point_bytes() as u128, context)?;
    (0..count)
        .map(|_| read_g1(reader, encoding, validation, context))
        .collect()
}

/// Reads `count` field elements, after checking the payload can hold them.
///
/// Raw elements (on targets where `Fr`'s memory is its raw encoding, see
/// [`raw_view`](crate::backend_api::raw_view)) are read straight into the vector's memory with
/// [`PayloadReader::read_checked`], each piece checked below the modulus while in cache
/// (unless trusted): no staging buffer, no per-element conversion, and from a file several
/// threads at once. Otherwise data is read in 2 MiB steps and converted in parallel by
/// [`decode_fr_chunk`].
///
/// # Errors
///
/// [`Error::LimitExceeded`] if the payload cannot hold `count` elements, [`Error::Truncated`],
/// or [`Error::InvalidFieldElement`].
pub fn read_fr_vec(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<Vec<Fr>> {
    read_elements(reader, count, encoding, validation, context, false)
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
    read_elements(reader, count, encoding, validation, context, true)
}

fn read_elements(
    reader: &mut PayloadReader<'_>,
    count: usize,
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
    polynomial: bool,
) -> Result<Vec<Fr>> {
    reader.ensure_available(count as u128 * FR_BYTES as u128, context)?;
    if encoding == FieldEncoding::Raw && reader.prealloc(count) == count {
        if let Some(mut values) = crate::memory::zeroed(count)? {
            let bytes = crate::memory::as_raw_bytes_mut(&mut values)
                .ok_or(Error::InvalidFieldElement { context })?;
            let check = |piece: &[u8]| check_raw_elements(piece, validation, context);
            if polynomial {
                reader.read_polynomial(bytes, check, context)?;
            } else {
                reader.read_checked(bytes, check, context)?;
            }
            return Ok(values);
        }
    }
    // Converted in steps; a polynomial's steps are hashed as they are converted.
    let hasher = polynomial
        .then(|| reader.polynomial_hasher(count * FR_BYTES))
        .flatten();
    let mut values = Vec::new();
    values
        .try_reserve_exact(reader.prealloc(count))
        .map_err(|_| Error::OutOfMemory {
            what: context,
            bytes: (reader.prealloc(count) as u64).saturating_mul(FR_BYTES as u64),
        })?;
    let mut staging = vec![0u8; count.min(CHUNK_ELEMENTS) * FR_BYTES];
    let mut encoded = Vec::new();
    let mut left = count;
    while left > 0 {
        let step = left.min(CHUNK_ELEMENTS);
        let bytes = staging
            .get_mut(..step * FR_BYTES)
            .ok_or(Error::Truncated { context })?;
        reader.read_exact(bytes, context)?;
        let start = values.len();
        decode_fr_chunk(bytes, encoding, validation, context, &mut values)?;
        if let Some(hasher) = &hasher {
            let new = values.get(start..).unwrap_or_default();
            match crate::memory::as_raw_bytes(new) {
                Some(raw) => hasher.add(start * FR_BYTES, raw),
                None => {
                    encode_fr_chunk(new, FieldEncoding::Raw, &mut encoded);
                    hasher.add(start * FR_BYTES, encoded.as_flattened());
                }
            }
        }
        left -= step;
    }
    if polynomial {
        reader.record_polynomial(hasher)?;
    }
    Ok(values)
}
