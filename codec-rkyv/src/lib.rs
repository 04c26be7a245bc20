//! A keycodec backend that stores halo2 keys as rkyv archives.
//!
//! # Layout: one archive per section
//!
//! The payload is a sequence of *sections*, each an independent rkyv archive:
//! the verifying key's data first (`k`, the selector-compression flag, commitments as raw
//! 64-byte points, selectors packed 8 per byte), then, for a proving key, one section per
//! polynomial in halo2's order (`l0`, `l_last`, `l_active_row`, the fixed values, the fixed
//! polynomials, the permutation's values and polynomials). A polynomial is archived as a
//! vector of 32-byte elements holding the element's Montgomery limbs, little-endian (the
//! same bytes as halo2's `RawBytes`); how many sections follow is fixed by the circuit.
//!
//! Each section is framed as `[archive length: u64 LE][8 zero bytes][archive][zero padding
//! to 16 bytes]`, so every archive starts 16-byte aligned relative to the file (the container
//! header is 64 bytes). Sectioning keeps saves from copying the whole key: one polynomial is
//! archived at a time. rkyv's relative pointers are 64-bit (feature `pointer_width_64`), so a
//! single polynomial may exceed 2 GiB (k >= 26).
//!
//! # Loading
//!
//! [`KeyCodec::load`] memory-maps the file ([`LoadMode::Mapped`]): the payload checksum is
//! verified over the mapping, then each section is validated in place with `rkyv::access`
//! (bytecheck) and its elements are converted straight from the mapping into the key's
//! vectors. No heap buffer holds the file. A section whose bytes are not 16-byte aligned (a
//! caller's slice that happens to be misaligned) is copied into an aligned buffer first.
//!
//! # Validation
//!
//! [`Validation::Checked`] (the default) checks every field element (below the modulus) and
//! every commitment (on the curve): bytecheck checks structure, not values.
//! [`Validation::Trusted`] skips the value checks. It does not skip bytecheck: validating a
//! section's structure is a bounds check of one relative pointer and one length (elements are
//! plain bytes), so skipping it would save nothing measurable and would make a forged file
//! undefined behaviour instead of an error.

use std::borrow::Cow;
use std::io::Write;

use codec_core::circuit::{expect_count, pack_bits, rows, unpack_bits, PkParts, PkShape, VkParts};
use codec_core::field::{
    decode_fr_chunk, decode_g1, encode_fr_chunk, encode_g1, FieldEncoding, FR_BYTES,
};
use codec_core::halo2curves::bn256::{Fr, G1Affine};
use codec_core::{
    CodecId, DecodeContext, Error, Key, KeyCodec, KeyKind, KeyRef, LoadMode, PayloadReader, Result,
    Validation,
};
use rkyv::rancor;
use rkyv::util::AlignedVec;
use rkyv::vec::ArchivedVec;

/// The only wire mode: sectioned archives, 64-bit relative pointers.
pub const MODE_SECTIONS_P64: u8 = 0;

/// Alignment of every section's archive.
const SECTION_ALIGN: usize = 16;

/// The verifying key's data as archived.
#[derive(rkyv::Archive, rkyv::Serialize)]
struct VkSection {
    k: u32,
    compress_selectors: bool,
    fixed_commitments: Vec<[u8; 64]>,
    permutation_commitments: Vec<[u8; 64]>,
    selectors: Vec<Vec<u8>>,
}

/// One polynomial as archived: its elements' raw bytes.
type PolySection = Vec<[u8; FR_BYTES]>;

/// A borrowed polynomial's raw elements, archived exactly as a [`PolySection`] is (an
/// `ArchivedVec<[u8; 32]>`), without first copying them into a `Vec`.
struct PolyRef<'a>(&'a [[u8; FR_BYTES]]);

impl rkyv::Archive for PolyRef<'_> {
    type Archived = ArchivedVec<[u8; FR_BYTES]>;
    type Resolver = rkyv::vec::VecResolver;

    fn resolve(&self, resolver: Self::Resolver, out: rkyv::Place<Self::Archived>) {
        ArchivedVec::resolve_from_slice(self.0, resolver, out);
    }
}

impl<S> rkyv::Serialize<S> for PolyRef<'_>
where
    S: rancor::Fallible + rkyv::ser::Allocator + rkyv::ser::Writer + ?Sized,
{
    fn serialize(&self, serializer: &mut S) -> std::result::Result<Self::Resolver, S::Error> {
        ArchivedVec::serialize_from_slice(self.0, serializer)
    }
}

/// The rkyv codec.
#[derive(Clone, Copy, Debug, Default)]
pub struct RkyvCodec;

impl KeyCodec for RkyvCodec {
    fn id(&self) -> CodecId {
        CodecId::Rkyv
    }

    fn wire_mode(&self) -> u8 {
        MODE_SECTIONS_P64
    }

    fn load_mode(&self) -> LoadMode {
        LoadMode::Mapped
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        let parts = VkParts::of(key.vk())?;
        let raw_point = |point: &G1Affine| -> Result<[u8; 64]> {
            encode_g1(point, FieldEncoding::Raw)
                .try_into()
                .map_err(|_| Error::Malformed("raw point is not 64 bytes".into()))
        };
        let section = VkSection {
            k: parts.k,
            compress_selectors: parts.compress_selectors,
            fixed_commitments: parts
                .fixed_commitments
                .iter()
                .map(raw_point)
                .collect::<Result<_>>()?,
            permutation_commitments: parts
                .permutation_commitments
                .iter()
                .map(raw_point)
                .collect::<Result<_>>()?,
            selectors: parts.selectors.iter().map(|s| pack_bits(s)).collect(),
        };
        write_section(out, &archive(&section)?)?;
        if let KeyRef::Proving(pk) = key {
            // One polynomial's elements and archive at a time, in buffers reused across
            // polynomials: the save never holds a second copy of the key.
            // Where `Fr`'s memory is its raw encoding (codec_core::raw_view), a polynomial is
            // archived straight from the key's memory, without the staging copy.
            let mut elements: PolySection = Vec::new();
            let mut archived = AlignedVec::<SECTION_ALIGN>::new();
            for values in codec_core::circuit::polynomials(pk) {
                archived.clear();
                archived = match codec_core::raw_view::as_raw_elements(values) {
                    Some(raw) => {
                        rkyv::api::high::to_bytes_in::<_, rancor::Error>(&PolyRef(raw), archived)
                    }
                    None => {
                        encode_fr_chunk(values, FieldEncoding::Raw, &mut elements);
                        rkyv::api::high::to_bytes_in::<_, rancor::Error>(&elements, archived)
                    }
                }
                .map_err(rkyv_error)?;
                write_section(out, &archived)?;
            }
        }
        Ok(())
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        if context.mode != MODE_SECTIONS_P64 {
            return Err(Error::UnsupportedMode {
                codec: CodecId::Rkyv,
                mode: context.mode,
            });
        }
        let vk_parts = read_vk_parts(input, context)?;
        match context.kind {
            // The evaluation domain is built on another thread while the polynomials are
            // read; every element takes 32 bytes here too, as that helper requires.
            KeyKind::Proving => {
                context.assemble_proving_while_reading(vk_parts, input, |input, shape| {
                    read_pk_polys(input, shape, context.validation)
                })
            }
            KeyKind::Verifying => context.assemble(vk_parts, None),
        }
    }
}

fn archive<T>(value: &T) -> Result<AlignedVec>
where
    T: for<'a> rkyv::Serialize<
        rkyv::api::high::HighSerializer<
            AlignedVec,
            rkyv::ser::allocator::ArenaHandle<'a>,
            rancor::Error,
        >,
    >,
{
    rkyv::to_bytes::<rancor::Error>(value).map_err(rkyv_error)
}

fn write_section(out: &mut dyn Write, bytes: &[u8]) -> Result<()> {
    out.write_all(&(bytes.len() as u64).to_le_bytes())?;
    out.write_all(&[0u8; 8])?;
    out.write_all(bytes)?;
    let zeros = [0u8; SECTION_ALIGN];
    out.write_all(zeros.get(..padding(bytes.len())).unwrap_or_default())?;
    Ok(())
}

fn padding(len: usize) -> usize {
    (SECTION_ALIGN - len % SECTION_ALIGN) % SECTION_ALIGN
}

fn rkyv_error(err: rancor::Error) -> Error {
    Error::Backend {
        codec: CodecId::Rkyv,
        source: Box::new(err),
    }
}

/// A section's archive bytes, 16-byte aligned: borrowed from the payload when they already
/// are, copied into an aligned buffer otherwise.
enum SectionBytes<'a> {
    Borrowed(&'a [u8]),
    Aligned(AlignedVec<SECTION_ALIGN>),
}

impl SectionBytes<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            SectionBytes::Borrowed(bytes) => bytes,
            SectionBytes::Aligned(vec) => vec.as_slice(),
        }
    }
}

/// Reads one section's frame and returns its archive bytes, aligned.
fn next_section<'a>(input: &mut PayloadReader<'a>, what: &'static str) -> Result<SectionBytes<'a>> {
    let len = u64::from_le_bytes(input.read_array(what)?);
    if input.read_array::<8>(what)? != [0; 8] {
        return Err(Error::Malformed(format!(
            "{what}: non-zero section frame padding"
        )));
    }
    let len = usize::try_from(len).map_err(|_| Error::LimitExceeded {
        what,
        requested: len,
        limit: usize::MAX as u64,
    })?;
    let padded = len
        .checked_add(padding(len))
        .ok_or(Error::Truncated { context: what })?;
    input.ensure_available(padded as u128, what)?;
    let framed = input.read_borrowed(padded, what)?;
    let (archive, pad) = framed
        .split_at_checked(len)
        .ok_or(Error::Truncated { context: what })?;
    if pad.iter().any(|&byte| byte != 0) {
        return Err(Error::Malformed(format!(
            "{what}: non-zero section padding"
        )));
    }
    if let Cow::Borrowed(all) = &framed {
        let all: &'a [u8] = all;
        if (all.as_ptr() as usize) % SECTION_ALIGN == 0 {
            return Ok(SectionBytes::Borrowed(all.get(..len).unwrap_or_default()));
        }
    }
    let mut aligned = AlignedVec::<SECTION_ALIGN>::with_capacity(len);
    aligned.extend_from_slice(archive);
    Ok(SectionBytes::Aligned(aligned))
}

fn read_vk_parts(input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<VkParts> {
    let section = next_section(input, "verifying key section")?;
    let archived =
        rkyv::access::<ArchivedVkSection, rancor::Error>(section.bytes()).map_err(rkyv_error)?;
    let k = archived.k.to_native();
    context.check_payload_k(k)?;
    let n = rows(k);
    let points = |archived: &ArchivedVec<[u8; 64]>, what| -> Result<Vec<G1Affine>> {
        archived
            .iter()
            .map(|bytes| decode_g1(bytes, FieldEncoding::Raw, context.validation, what))
            .collect()
    };
    let selectors = archived
        .selectors
        .iter()
        .map(|packed| {
            expect_count("packed selector bytes", n.div_ceil(8), packed.len())
                .map(|()| unpack_bits(packed.as_slice(), n))
        })
        .collect::<Result<_>>()?;
    Ok(VkParts {
        k,
        compress_selectors: archived.compress_selectors,
        fixed_commitments: points(&archived.fixed_commitments, "fixed commitment")?,
        permutation_commitments: points(
            &archived.permutation_commitments,
            "permutation commitment",
        )?,
        selectors,
    })
}

fn read_pk_polys(
    input: &mut PayloadReader<'_>,
    shape: &PkShape,
    validation: Validation,
) -> Result<PkParts> {
    let mut poly = || read_poly(input, shape.rows, validation);
    let l0 = poly()?;
    let l_last = poly()?;
    let l_active_row = poly()?;
    let mut polys = |count: usize| (0..count).map(|_| poly()).collect::<Result<Vec<_>>>();
    Ok(PkParts {
        l0,
        l_last,
        l_active_row,
        fixed_values: polys(shape.fixed_columns)?,
        fixed_polys: polys(shape.fixed_columns)?,
        permutation_values: polys(shape.permutation_columns)?,
        permutation_polys: polys(shape.permutation_columns)?,
    })
}

fn read_poly(
    input: &mut PayloadReader<'_>,
    rows: usize,
    validation: Validation,
) -> Result<Vec<Fr>> {
    let section = next_section(input, "polynomial section")?;
    let archived = rkyv::access::<ArchivedVec<[u8; FR_BYTES]>, rancor::Error>(section.bytes())
        .map_err(rkyv_error)?;
    expect_count("polynomial length (2^k)", rows, archived.len())?;
    let mut values = Vec::with_capacity(rows);
    decode_fr_chunk(
        archived.as_slice().as_flattened(),
        FieldEncoding::Raw,
        validation,
        "polynomial",
        &mut values,
    )?;
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_polynomial_archives_to_the_same_bytes_as_a_vector() {
        let values: Vec<Fr> = (0..1000u64)
            .map(|i| Fr::from(i * 0x9e37_79b9 + 1))
            .collect();
        let raw = codec_core::raw_view::as_raw_elements(&values).unwrap_or_default();
        assert_eq!(raw.len(), values.len());
        let owned: PolySection = raw.to_vec();
        let from_vec = rkyv::to_bytes::<rancor::Error>(&owned).map_err(rkyv_error);
        let from_slice = rkyv::to_bytes::<rancor::Error>(&PolyRef(raw)).map_err(rkyv_error);
        assert_eq!(
            from_vec.ok().map(|bytes| bytes.to_vec()),
            from_slice.ok().map(|bytes| bytes.to_vec())
        );
    }
}
