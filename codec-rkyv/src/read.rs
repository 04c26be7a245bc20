//! Reading a payload: the verifying key's section, then each polynomial's, straight into
//! the key's vectors and validated there where the section is laid out as this codec writes
//! it (see the crate docs).

use std::borrow::Cow;

use keycodec_core::backend_api::circuit::expect_count;
use keycodec_core::backend_api::field::{
    check_raw_elements, decode_fr_chunk, decode_g1, FieldEncoding, FR_BYTES,
};
use keycodec_core::backend_api::{
    DecodeContext, Error, PayloadReader, PkParts, PkShape, PolyGroup, Result, Span, Validation,
    VkParts,
};
use keycodec_core::halo2_proofs::halo2curves::ff::Field;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use rkyv::rancor;
use rkyv::util::AlignedVec;
use rkyv::vec::ArchivedVec;

use crate::section::{padding, rkyv_error, ArchivedVkSection, SECTION_ALIGN};

pub(crate) fn read_vk_parts(
    input: &mut PayloadReader<'_>,
    context: &DecodeContext,
) -> Result<VkParts> {
    let what = "verifying key section";
    let (len, pad) = read_frame(input, what)?;
    let section = read_section(input, len, what)?;
    read_padding(input, pad, what)?;
    let archived =
        rkyv::access::<ArchivedVkSection, rancor::Error>(section.bytes()).map_err(rkyv_error)?;
    let k = archived.k.to_native();
    context.check_payload_k(k)?;
    let points = |archived: &ArchivedVec<[u8; 64]>, what| -> Result<Vec<G1Affine>> {
        archived
            .iter()
            .map(|bytes| decode_g1(bytes, FieldEncoding::Raw, context.validation, what))
            .collect()
    };
    Ok(VkParts {
        k,
        compress_selectors: archived.compress_selectors,
        fixed_commitments: points(&archived.fixed_commitments, "fixed commitment")?,
        permutation_commitments: points(
            &archived.permutation_commitments,
            "permutation commitment",
        )?,
        selectors: archived
            .selectors
            .iter()
            .map(|packed| packed.as_slice().to_vec())
            .collect(),
    })
}

pub(crate) fn read_pk_polys(
    input: &mut PayloadReader<'_>,
    shape: &PkShape,
    validation: Validation,
) -> Result<PkParts> {
    let groups = PolyGroup::ALL.map(|group| group.count(shape));
    let total: usize = groups.iter().sum();
    if total == 0 {
        return PkParts::read_groups(|_| Ok(Vec::new()));
    }
    // The first section's frame says whether the sections are laid out as this codec writes
    // them (each polynomial's archive its elements, then its root): then they are read as
    // one run of spans, straight into the key's vectors on every core; otherwise one by one.
    let what = "polynomial section";
    let (len, pad) = read_frame(input, what)?;
    if Some(len) != in_place_len(shape.rows) {
        let mut first = Some(read_poly_after_frame(
            input, shape.rows, validation, len, pad,
        )?);
        return PkParts::read_groups(|group| {
            (0..group.count(shape))
                .map(|_| match first.take() {
                    Some(poly) => Ok(poly),
                    None => read_poly(input, shape.rows, validation),
                })
                .collect()
        });
    }
    // Each section: its frame (the first one's already read), its elements into a vector
    // with room for the root behind them, its root. Such an archive's length is a multiple
    // of 16: no padding follows.
    let mut spans = Vec::with_capacity(3 * total);
    for index in 0..total {
        if index > 0 {
            spans.push(Span::Bytes(FRAME_LEN));
        }
        spans.push(Span::Polynomial {
            count: shape.rows,
            spare: 1,
        });
        spans.push(Span::Bytes(ROOT_LEN));
    }
    let frame = frame_of(len);
    // A span's bytes: a root (checked with its elements, once read) or a later frame
    // (spans: elements, root, then frame, elements, root for each later section).
    let check = |index: usize, bytes: &[u8]| {
        let is_frame = index % 3 == 2;
        if is_frame && bytes != frame {
            return Err(Error::Malformed(format!(
                "{what}: a frame unlike the first section's (this codec writes every \
                 polynomial section alike)"
            )));
        }
        Ok(())
    };
    let data = input.read_spans(&spans, &groups, validation, check, "polynomial")?;
    // The bytes read: the first root, then a frame and a root per later section.
    let root = |section: usize| -> Result<[u8; ROOT_LEN]> {
        data.bytes
            .get(2 * ROOT_LEN * section..2 * ROOT_LEN * section + ROOT_LEN)
            .and_then(|root| root.try_into().ok())
            .ok_or_else(|| Error::Internal("a section's root outside the bytes read".into()))
    };
    let mut section = 0;
    let mut groups = data.groups.into_iter();
    PkParts::read_groups(|_| {
        let group = groups.next().unwrap_or_default();
        group
            .into_iter()
            .map(|values| {
                let root = root(section)?;
                section += 1;
                validate_in_place(values, shape.rows, &root)
            })
            .collect()
    })
}

/// Bytes of a polynomial archive's root (`ArchivedVec`: a 64-bit relative pointer and a
/// 64-bit length), which this codec's archives end with.
const ROOT_LEN: usize = 16;

/// Bytes of a section's frame: the archive's length (u64 LE) and 8 zero bytes.
const FRAME_LEN: usize = 16;

/// The frame of an archive of `len` bytes.
fn frame_of(len: usize) -> [u8; FRAME_LEN] {
    let mut frame = [0u8; FRAME_LEN];
    let (length, _zeros) = frame.split_at_mut(8);
    length.copy_from_slice(&(len as u64).to_le_bytes());
    frame
}

/// The length of a polynomial archive this codec writes for `rows` elements: the elements,
/// then the root.
fn in_place_len(rows: usize) -> Option<usize> {
    rows.checked_mul(FR_BYTES)?.checked_add(ROOT_LEN)
}

/// Reads a section's frame: the archive's length, and the padding that follows it.
fn read_frame(input: &mut PayloadReader<'_>, what: &'static str) -> Result<(usize, usize)> {
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
    Ok((len, padding(len)))
}

/// Reads the zero padding after an archive.
fn read_padding(input: &mut PayloadReader<'_>, pad: usize, what: &'static str) -> Result<()> {
    let mut zeros = [0u8; SECTION_ALIGN];
    let zeros = zeros.get_mut(..pad).unwrap_or_default();
    input.read_exact(zeros, what)?;
    if zeros.iter().any(|&byte| byte != 0) {
        return Err(Error::Malformed(format!(
            "{what}: non-zero section padding"
        )));
    }
    Ok(())
}

/// Reads one polynomial section.
fn read_poly(
    input: &mut PayloadReader<'_>,
    rows: usize,
    validation: Validation,
) -> Result<Vec<Fr>> {
    let (len, pad) = read_frame(input, "polynomial section")?;
    read_poly_after_frame(input, rows, validation, len, pad)
}

/// Reads one polynomial section whose frame (archive length `len`, then `pad` bytes of
/// padding after it) was read. The layout this codec writes (the elements, then the root) is
/// read straight into the key's vector and validated there; any other archive of the right
/// type goes through an aligned buffer.
fn read_poly_after_frame(
    input: &mut PayloadReader<'_>,
    rows: usize,
    validation: Validation,
    len: usize,
    pad: usize,
) -> Result<Vec<Fr>> {
    let what = "polynomial section";
    // The vector has room for the root behind the elements; `len` bytes are in the payload.
    let in_place = match in_place_len(rows) == Some(len) {
        true => keycodec_core::backend_api::raw_view::zeroed(rows + 1)?,
        false => None,
    };
    let values = match in_place {
        Some(values) => read_poly_in_place(input, values, rows, validation)?,
        None => {
            let section = read_section(input, len, what)?;
            let archived =
                rkyv::access::<ArchivedVec<[u8; FR_BYTES]>, rancor::Error>(section.bytes())
                    .map_err(rkyv_error)?;
            expect_count("polynomial length (2^k)", rows, archived.len())?;
            let mut values = Vec::new();
            decode_fr_chunk(
                archived.as_slice().as_flattened(),
                FieldEncoding::Raw,
                validation,
                "polynomial",
                &mut values,
            )?;
            values
        }
    };
    read_padding(input, pad, what)?;
    Ok(values)
}

/// Reads an archive of `rows` elements followed by its root into `values` (`rows + 1`
/// zeroed elements: the root lands in the last one) and validates it there.
fn read_poly_in_place(
    input: &mut PayloadReader<'_>,
    mut values: Vec<Fr>,
    rows: usize,
    validation: Validation,
) -> Result<Vec<Fr>> {
    let context = "polynomial";
    let bytes = keycodec_core::backend_api::raw_view::as_raw_bytes_mut(&mut values)
        .ok_or_else(|| Error::Internal("raw view unavailable for a zeroed vector".into()))?;
    let (elements, _) = bytes.split_at_mut(rows * FR_BYTES);
    input.read_polynomial(
        elements,
        |piece| check_raw_elements(piece, validation, context),
        context,
    )?;
    let root = input.read_array::<ROOT_LEN>("polynomial section root")?;
    values.truncate(rows);
    validate_in_place(values, rows, &root)
}

/// Validates the archive made of `values`' `rows` elements followed by `root`, in the
/// vector's own memory (the root written right behind the elements, in its spare capacity),
/// with bytecheck; keeps the elements.
fn validate_in_place(mut values: Vec<Fr>, rows: usize, root: &[u8; ROOT_LEN]) -> Result<Vec<Fr>> {
    expect_count("polynomial length (2^k)", rows, values.len())?;
    values.push(Fr::ZERO);
    let bytes = keycodec_core::backend_api::raw_view::as_raw_bytes_mut(&mut values)
        .ok_or_else(|| Error::Internal("raw view unavailable for field elements".into()))?;
    let archive = bytes
        .get_mut(..rows * FR_BYTES + ROOT_LEN)
        .ok_or_else(|| Error::Internal("archive outside its vector".into()))?;
    archive
        .get_mut(rows * FR_BYTES..)
        .ok_or_else(|| Error::Internal("no room for the archive root".into()))?
        .copy_from_slice(root);
    let archive: &[u8] = archive;
    let archived =
        rkyv::access::<ArchivedVec<[u8; FR_BYTES]>, rancor::Error>(archive).map_err(rkyv_error)?;
    expect_count("polynomial length (2^k)", rows, archived.len())?;
    // A valid archive of `rows` elements in `rows * 32 + 16` bytes holds them at its start;
    // what bytecheck validated is what the vector keeps.
    if !std::ptr::eq(
        archived.as_slice().as_flattened().as_ptr(),
        archive.as_ptr(),
    ) {
        return Err(Error::Malformed(
            "polynomial section: the archive's root points away from its elements".into(),
        ));
    }
    values.truncate(rows);
    Ok(values)
}

/// A section's archive bytes, 16-byte aligned: borrowed from the payload when they already
/// are, copied into an aligned buffer otherwise.
enum SectionBytes<'a> {
    /// As the payload reader handed them out (borrowed, or read into a vector of their own),
    /// already aligned (the system allocator's large blocks are): used as they are.
    Read(Cow<'a, [u8]>),
    Aligned(AlignedVec<SECTION_ALIGN>),
}

impl SectionBytes<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            SectionBytes::Read(bytes) => bytes,
            SectionBytes::Aligned(vec) => vec.as_slice(),
        }
    }
}

/// Reads an archive of `len` bytes (its frame read, its length checked against the payload).
fn read_section<'a>(
    input: &mut PayloadReader<'a>,
    len: usize,
    what: &'static str,
) -> Result<SectionBytes<'a>> {
    let archive = input.read_borrowed(len, what)?;
    if (archive.as_ptr() as usize).is_multiple_of(SECTION_ALIGN) {
        return Ok(SectionBytes::Read(archive));
    }
    // The bytes are here, so their length is justified; a second copy of them is what an
    // unaligned buffer costs.
    let mut aligned = AlignedVec::<SECTION_ALIGN>::with_capacity(len);
    aligned.extend_from_slice(&archive);
    Ok(SectionBytes::Aligned(aligned))
}
