//! Byte encodings of BN254 field elements and G1 points, checked or trusted, one at a time
//! and in bulk.
//!
//! Two encodings exist in halo2's world and both are here:
//! - *raw* (`SerdeFormat::RawBytes`): the element's internal Montgomery limbs, little-endian,
//!   copied without conversion; points as raw `x || y`.
//! - *canonical* (`SerdeFormat::Processed`): `PrimeField::to_repr` (little-endian, reduced),
//!   points compressed to 32 bytes.
//!
//! Single elements are converted through halo2curves' own `SerdeObject` and `PrimeField`
//! APIs. The bulk [`write_fr_slice`] (and the payload reader's reads of polynomials) move
//! raw-encoded polynomials without conversion where [`raw_view`](crate::backend_api::raw_view)
//! has proven that `Fr`'s memory is its raw encoding, and fall back to the conversions
//! otherwise.

use std::io::{self, Write};

use halo2_proofs::halo2curves::ff::{Field, PrimeField};
use halo2_proofs::halo2curves::group::GroupEncoding;
use halo2curves::bn256::{Fq, Fr, G1Affine};
use halo2curves::serde::SerdeObject;

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::memory::PlainLimbs;
use crate::options::Validation;

/// Bytes of one encoded scalar field element (either encoding).
pub use crate::memory::FR_BYTES;
/// Bytes of one raw (uncompressed, Montgomery) G1 point.
pub(crate) const G1_RAW_BYTES: usize = 64;
/// Bytes of one compressed G1 point.
pub(crate) const G1_COMPRESSED_BYTES: usize = 32;

/// Elements converted per bulk step: 2 MiB of encoded data, small enough to stay in cache
/// between the read and the conversion, large enough that spreading it over threads costs
/// little.
pub(crate) const CHUNK_ELEMENTS: usize = 1 << 16;

/// How field elements and points are laid out in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldEncoding {
    /// Montgomery limbs as stored in memory; points uncompressed. halo2's `RawBytes`.
    Raw,
    /// Reduced little-endian representation; points compressed. halo2's `Processed`.
    Canonical,
}

impl FieldEncoding {
    /// Bytes of one encoded point.
    pub fn point_bytes(self) -> usize {
        match self {
            FieldEncoding::Raw => G1_RAW_BYTES,
            FieldEncoding::Canonical => G1_COMPRESSED_BYTES,
        }
    }
}

/// Encodes a scalar.
pub fn encode_fr(value: &Fr, encoding: FieldEncoding) -> [u8; FR_BYTES] {
    match encoding {
        FieldEncoding::Raw => {
            let mut out = [0u8; FR_BYTES];
            let mut cursor: &mut [u8] = &mut out;
            // Writing 32 bytes into a 32-byte slice cannot fail; the round-trip tests check
            // the result.
            let _ = value.write_raw(&mut cursor);
            out
        }
        FieldEncoding::Canonical => value.to_repr(),
    }
}

/// Decodes a scalar. Canonical decoding is always checked (it must reduce the value);
/// raw decoding is checked unless `validation` is [`Validation::Trusted`].
///
/// # Errors
///
/// [`Error::InvalidFieldElement`] when a checked value is not below the modulus.
#[cfg(test)]
fn decode_fr(
    bytes: &[u8; FR_BYTES],
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<Fr> {
    let decoded = match (encoding, validation) {
        (FieldEncoding::Raw, Validation::Checked) => Fr::from_raw_bytes(bytes),
        (FieldEncoding::Raw, Validation::Trusted) => Some(Fr::from_raw_bytes_unchecked(bytes)),
        (FieldEncoding::Canonical, _) => Option::from(Fr::from_repr(*bytes)),
    };
    decoded.ok_or(Error::InvalidFieldElement { context })
}

/// Encodes a point: 64 raw bytes, or 32 compressed.
pub fn encode_g1(point: &G1Affine, encoding: FieldEncoding) -> Vec<u8> {
    match encoding {
        FieldEncoding::Raw => {
            let mut out = Vec::with_capacity(G1_RAW_BYTES);
            // Writing into a Vec cannot fail.
            let _ = point.write_raw(&mut out);
            out
        }
        FieldEncoding::Canonical => point.to_bytes().as_ref().to_vec(),
    }
}

/// Decodes a point from exactly [`FieldEncoding::point_bytes`] bytes. Compressed points are
/// always checked (decompression needs a valid x); raw points are checked for canonical
/// coordinates and being on the curve unless `validation` is [`Validation::Trusted`].
///
/// # Errors
///
/// [`Error::InvalidPoint`] when the point is malformed or off the curve.
pub fn decode_g1(
    bytes: &[u8],
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
) -> Result<G1Affine> {
    if bytes.len() != encoding.point_bytes() {
        return Err(Error::InvalidPoint { context });
    }
    let decoded = match (encoding, validation) {
        // Both coordinates below the modulus and the point on the curve (the identity is
        // encoded as (0, 0)), as `from_raw_bytes` checks.
        (FieldEncoding::Raw, Validation::Checked) => {
            raw_point_on_curve(bytes).then(|| G1Affine::from_raw_bytes_unchecked(bytes))
        }
        (FieldEncoding::Raw, Validation::Trusted) => {
            Some(G1Affine::from_raw_bytes_unchecked(bytes))
        }
        (FieldEncoding::Canonical, _) => {
            let mut compressed = <G1Affine as GroupEncoding>::Repr::default();
            compressed.as_mut().copy_from_slice(bytes);
            Option::from(G1Affine::from_bytes(&compressed))
        }
    };
    decoded.ok_or(Error::InvalidPoint { context })
}

/// Decodes a whole chunk of encoded scalars, appending them to `out`, in parallel (rayon).
///
/// The elements are written straight into `out`'s spare capacity (no zero-fill, no staging
/// vector); every element is checked unless `validation` is [`Validation::Trusted`] (the
/// canonical encoding is always checked).
///
/// # Errors
///
/// [`Error::InvalidFieldElement`] if any element is invalid (or `bytes` is not a whole number
/// of elements); `out` then holds an unspecified prefix. [`Error::OutOfMemory`] if `out`
/// cannot grow.
pub fn decode_fr_chunk(
    bytes: &[u8],
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
    out: &mut Vec<Fr>,
) -> Result<()> {
    decode_chunk(bytes, encoding, validation, context, out)
}

/// Decodes a whole chunk of encoded values (scalars or points), appending them to `out`, in
/// parallel (rayon), as [`decode_fr_chunk`] describes for scalars.
///
/// # Errors
///
/// The values' [`Element::invalid`] error if any is invalid (or `bytes` is not a whole
/// number of them); [`Error::OutOfMemory`] if `out` cannot grow.
pub(crate) fn decode_chunk<E: Element>(
    bytes: &[u8],
    encoding: FieldEncoding,
    validation: Validation,
    context: &'static str,
    out: &mut Vec<E>,
) -> Result<()> {
    let size = E::encoded_bytes(encoding);
    if !bytes.len().is_multiple_of(size) {
        return Err(E::invalid(context));
    }
    out.try_reserve(bytes.len() / size)
        .map_err(|_| Error::OutOfMemory {
            what: context,
            bytes: out.len().saturating_add(bytes.len() / size) as u64 * E::BYTES as u64,
        })?;
    let invalid = AtomicBool::new(false);
    out.par_extend(bytes.par_chunks_exact(size).map(|chunk| {
        E::from_encoded(chunk, encoding, validation).unwrap_or_else(|| {
            invalid.store(true, Ordering::Relaxed);
            E::zero()
        })
    }));
    if invalid.load(Ordering::Relaxed) {
        return Err(E::invalid(context));
    }
    Ok(())
}

/// What the payload reader reads vectors of ([`read_vector`](crate::payload::read_vector)):
/// scalars (polynomials, other vectors of elements) and G1 points (parameters, a verifying
/// key's commitments). Its memory is its raw encoding where the layout check passed
/// ([`PlainLimbs`]), so a raw vector is read straight into it and checked in place.
pub(crate) trait Element: PlainLimbs + Send + Sync {
    /// Bytes of one value in `encoding`.
    fn encoded_bytes(encoding: FieldEncoding) -> usize;
    /// Checks raw values in place: canonical (and, for points, on the curve); nothing when
    /// trusted.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidFieldElement`] or [`Error::InvalidPoint`].
    fn check_raw(bytes: &[u8], validation: Validation, context: &'static str) -> Result<()>;
    /// One value decoded from exactly [`Element::encoded_bytes`] bytes, checked unless
    /// trusted (compressed points always); `None` when invalid.
    fn from_encoded(bytes: &[u8], encoding: FieldEncoding, validation: Validation) -> Option<Self>;
    /// The error that names an invalid value.
    fn invalid(context: &'static str) -> Error;
    /// Appends the raw encoding of `values` to `out` (what the digest hashes).
    fn append_raw(values: &[Self], out: &mut Vec<u8>) {
        match crate::memory::raw_bytes_of(values) {
            Some(raw) => out.extend_from_slice(raw),
            None => values.iter().for_each(|value| out.extend(value.encode())),
        }
    }
}

impl Element for Fr {
    fn encoded_bytes(_: FieldEncoding) -> usize {
        FR_BYTES
    }

    fn check_raw(bytes: &[u8], validation: Validation, context: &'static str) -> Result<()> {
        check_raw_elements(bytes, validation, context)
    }

    fn from_encoded(bytes: &[u8], encoding: FieldEncoding, validation: Validation) -> Option<Self> {
        match (encoding, validation) {
            (FieldEncoding::Raw, Validation::Checked) => Fr::from_raw_bytes(bytes),
            (FieldEncoding::Raw, Validation::Trusted) => Some(Fr::from_raw_bytes_unchecked(bytes)),
            (FieldEncoding::Canonical, _) => <[u8; FR_BYTES]>::try_from(bytes)
                .ok()
                .and_then(|repr| Option::from(Fr::from_repr(repr))),
        }
    }

    fn invalid(context: &'static str) -> Error {
        Error::InvalidFieldElement { context }
    }
}

impl Element for G1Affine {
    fn encoded_bytes(encoding: FieldEncoding) -> usize {
        encoding.point_bytes()
    }

    /// Coordinates below the modulus and on the curve. BN254's G1 has cofactor 1: on the
    /// curve is in the group.
    fn check_raw(bytes: &[u8], validation: Validation, context: &'static str) -> Result<()> {
        if validation == Validation::Trusted {
            return Ok(());
        }
        if raw_points_on_curve(bytes) {
            Ok(())
        } else {
            Err(Error::InvalidPoint { context })
        }
    }

    fn from_encoded(bytes: &[u8], encoding: FieldEncoding, validation: Validation) -> Option<Self> {
        decode_g1(bytes, encoding, validation, "").ok()
    }

    fn invalid(context: &'static str) -> Error {
        Error::InvalidPoint { context }
    }
}

/// Encodes scalars into `out` (cleared first), in parallel.
pub fn encode_fr_chunk(values: &[Fr], encoding: FieldEncoding, out: &mut Vec<[u8; FR_BYTES]>) {
    out.clear();
    out.par_extend(values.par_iter().map(|value| encode_fr(value, encoding)));
}

/// `count` zeros to compute into, their memory written on every core before it is
/// returned.
///
/// Why written: the allocator's zeroed pages are mapped lazily, to one shared page of
/// zeros, until written. A buffer computed into (an FFT's, a sparse fill's) is read before
/// it is written, and a page read first costs a copy-on-write fault and a TLB shootdown on
/// every core when it is written later: at k = 22 that made a compact key's load 2.4x
/// slower. Buffers a file is read into are written first and need none of this
/// ([`raw_view::zeroed`](crate::backend_api::raw_view::zeroed)).
///
/// # Errors
///
/// [`Error::OutOfMemory`] when the allocator cannot provide it (instead of aborting).
pub fn zeros(count: usize) -> Result<Vec<Fr>> {
    if let Some(mut values) = crate::memory::zeroed(count)? {
        values
            .par_chunks_mut(1 << 14)
            .for_each(|chunk| chunk.fill(Fr::ZERO));
        return Ok(values);
    }
    let mut values = Vec::new();
    values
        .try_reserve_exact(count)
        .map_err(|_| Error::OutOfMemory {
            what: "field elements",
            bytes: (count as u64).saturating_mul(FR_BYTES as u64),
        })?;
    values.resize(count, Fr::ZERO);
    Ok(values)
}

/// The scalar field's modulus as little-endian `u64` limbs: `(-1).to_repr() + 1`.
fn modulus_limbs() -> [u64; 4] {
    limbs_of_modulus::<Fr>()
}

/// The base field's (the coordinates') modulus as little-endian limbs.
fn base_modulus_limbs() -> [u64; 4] {
    limbs_of_modulus::<Fq>()
}

/// `q^-1 mod 2^64` for the base field's modulus `q`: the constant of its Montgomery
/// reductions (`-q^-1`).
fn base_modulus_inverse() -> u64 {
    let q = base_modulus_limbs();
    // Newton's iteration (q is odd): each step doubles the bits that are right.
    let mut inverse: u64 = 1;
    for _ in 0..6 {
        inverse = inverse.wrapping_mul(2u64.wrapping_sub(q[0].wrapping_mul(inverse)));
    }
    inverse
}

/// `times` the base field's modulus `q` in 64-bit limbs, for a product below `2^256` (`4q`
/// is): the values the wide checks' differences take when a point is on the curve.
#[cfg(target_arch = "x86_64")]
fn modulus_times(times: u64) -> [u64; 4] {
    let mut out = [0u64; 4];
    let mut carry = 0u128;
    for (out, limb) in out.iter_mut().zip(base_modulus_limbs()) {
        let product = u128::from(limb) * u128::from(times) + carry;
        *out = product as u64;
        carry = product >> 64;
    }
    out
}

/// Raw points' 64-bit limbs transposed for the wide checks, a point a lane: `columns[c][p]` is
/// limb `c` (x's four, then y's four) of point `p` of `points`, `LANES` points.
#[cfg(target_arch = "x86_64")]
#[inline] // into each wide check: called apart, it copied its result through memory
fn limb_columns<const LANES: usize>(points: &[u8]) -> [[i64; LANES]; 8] {
    let mut columns = [[0i64; LANES]; 8];
    for (point, bytes) in points.chunks_exact(G1_RAW_BYTES).enumerate() {
        for (column, limb) in bytes.chunks_exact(8).enumerate() {
            let mut le = [0u8; 8];
            le.copy_from_slice(limb);
            if let Some(slot) = columns.get_mut(column).and_then(|c| c.get_mut(point)) {
                *slot = i64::from_le_bytes(le);
            }
        }
    }
    columns
}

/// A prime field's modulus as little-endian limbs: its largest element's value plus one.
fn limbs_of_modulus<F: PrimeField>() -> [u64; 4] {
    let mut limbs = canonical_limbs(&-F::ONE);
    let mut carry = true;
    for limb in &mut limbs {
        (*limb, carry) = limb.overflowing_add(u64::from(carry));
    }
    limbs
}

/// A field element's value (not its Montgomery form) as little-endian 64-bit limbs, from its
/// canonical encoding (little-endian for both BN254 fields).
pub(crate) fn canonical_limbs<F: PrimeField>(value: &F) -> [u64; 4] {
    limbs_le(value.to_repr().as_ref())
}

/// The little-endian 64-bit limbs of 32 little-endian bytes (the first 32 of `bytes`; zeros
/// for any missing): a canonical encoding, or a raw one (Montgomery limbs) as read.
#[inline(always)]
fn limbs_le(bytes: &[u8]) -> [u64; 4] {
    let (words, _) = bytes.as_chunks::<8>();
    std::array::from_fn(|i| words.get(i).map_or(0, |word| u64::from_le_bytes(*word)))
}

/// Whether a raw element (Montgomery limbs, little-endian) is below the modulus: what
/// halo2curves' `from_raw_bytes` checks, without building the element. The most significant
/// limb decides for all but about 2^-60 of uniformly random values.
fn raw_below_modulus(element: &[u8], modulus: &[u64; 4]) -> bool {
    let limb = |index: usize| {
        element
            .get(8 * index..8 * index + 8)
            .and_then(|bytes| bytes.try_into().ok())
            .map(u64::from_le_bytes)
    };
    for index in (0..4).rev() {
        match (limb(index), modulus.get(index)) {
            (Some(value), Some(bound)) if value < *bound => return true,
            (Some(value), Some(bound)) if value == *bound => continue,
            _ => return false,
        }
    }
    false // equal to the modulus
}

/// Whether `bytes` are whole raw G1 points, each of which [`raw_point_on_curve`] accepts:
/// several at a time where the CPU has the instructions ([`wide`]: eight with AVX-512 IFMA,
/// four with AVX2), which only confirm (a group not confirmed is checked point by point).
fn raw_points_on_curve(bytes: &[u8]) -> bool {
    if !bytes.len().is_multiple_of(G1_RAW_BYTES) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    match wide::check() {
        Some(wide::Wide::Ifma(ifma)) => {
            return in_groups::<{ ifma::GROUP_BYTES }>(bytes, |group| ifma.all_on_curve(group))
        }
        Some(wide::Wide::Avx2(avx2)) => {
            return in_groups::<{ avx2::GROUP_BYTES }>(bytes, |group| avx2.all_on_curve(group))
        }
        None => {}
    }
    bytes.chunks_exact(G1_RAW_BYTES).all(raw_point_on_curve)
}

/// Whether whole raw G1 points `bytes` are each on the curve, by groups of `GROUP` bytes that
/// `all_on_curve` confirms (given coordinates below the modulus), the rest and every group it
/// does not confirm point by point ([`raw_point_on_curve`]).
#[cfg(target_arch = "x86_64")]
fn in_groups<const GROUP: usize>(
    bytes: &[u8],
    all_on_curve: impl Fn(&[u8; GROUP]) -> bool,
) -> bool {
    let modulus = base_modulus_limbs();
    let (groups, rest) = bytes.as_chunks::<GROUP>();
    let groups_valid = groups.iter().all(|group| {
        let in_range = group
            .chunks_exact(FR_BYTES)
            .all(|coordinate| raw_below_modulus(coordinate, &modulus));
        (in_range && all_on_curve(group))
            || group.chunks_exact(G1_RAW_BYTES).all(raw_point_on_curve)
    });
    groups_valid && rest.chunks_exact(G1_RAW_BYTES).all(raw_point_on_curve)
}

/// Whether a raw G1 point (`x || y`, Montgomery limbs) is what halo2curves'
/// `G1Affine::from_raw_bytes` accepts: both coordinates below the modulus, and
/// `y^2 = x^3 + b` or the identity (encoded as `(0, 0)`). The same answer at a fraction of
/// its cost: the coordinates are public, so nothing here need be constant-time (plain limb
/// comparisons), and the products are [`mont`]'s. The test
/// `the_fast_point_check_answers_as_halo2curves` compares the two.
fn raw_point_on_curve(point: &[u8]) -> bool {
    let curve = mont::Mont::get();
    if point.len() != G1_RAW_BYTES {
        return false;
    }
    let (x, y) = point.split_at(FR_BYTES);
    if !raw_below_modulus(x, curve.modulus()) || !raw_below_modulus(y, curve.modulus()) {
        return false;
    }
    let (x, y) = (limbs_le(x), limbs_le(y));
    curve.on_curve(&x, &y) || (x == [0; 4] && y == [0; 4])
}

/// Checks that raw-encoded elements (Montgomery limbs, little-endian, 32 bytes each) are
/// below the modulus, as halo2curves' `from_raw_bytes` does (nothing, when trusted).
///
/// # Errors
///
/// [`Error::InvalidFieldElement`] if one is not, or `bytes` is not a whole number of
/// elements.
pub fn check_raw_elements(
    bytes: &[u8],
    validation: Validation,
    context: &'static str,
) -> Result<()> {
    if validation == Validation::Trusted {
        return Ok(());
    }
    let modulus = modulus_limbs();
    let canonical = bytes.len().is_multiple_of(FR_BYTES)
        && bytes
            .chunks_exact(FR_BYTES)
            .all(|element| raw_below_modulus(element, &modulus));
    if canonical {
        Ok(())
    } else {
        Err(Error::InvalidFieldElement { context })
    }
}

/// Writes field elements in `encoding`: raw elements straight from memory in one write where
/// [`raw_view`](crate::backend_api::raw_view) allows, otherwise encoded in parallel in 2 MiB blocks so that the
/// writer sees few, large writes.
///
/// # Errors
///
/// The writer's I/O errors.
pub fn write_fr_slice(
    out: &mut dyn Write,
    values: &[Fr],
    encoding: FieldEncoding,
) -> io::Result<()> {
    if encoding == FieldEncoding::Raw {
        if let Some(bytes) = crate::memory::as_raw_bytes(values) {
            return out.write_all(bytes);
        }
    }
    let mut staging = Vec::with_capacity(values.len().min(CHUNK_ELEMENTS));
    for block in values.chunks(CHUNK_ELEMENTS) {
        encode_fr_chunk(block, encoding, &mut staging);
        out.write_all(staging.as_flattened())?;
    }
    Ok(())
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // CPU-specific instructions, behind their detection
mod avx2;
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // CPU-specific instructions, behind their detection
mod ifma;
mod mont;
mod wide;
pub use wide::{points_checked_at_once, WIDE_POINT_CHECK_ENV};
#[cfg(test)]
mod tests;
