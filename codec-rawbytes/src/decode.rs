//! Reads halo2's key layout with every count, length and value checked.

use codec_core::circuit::{expect_count, PkParts, PkShape, VkParts};
use codec_core::field::{read_fr_vec, FieldEncoding};
use codec_core::halo2curves::bn256::Fr;
use codec_core::{DecodeContext, Error, Key, KeyKind, PayloadReader, Result, Validation};

use crate::encode::VK_VERSION;

pub(crate) fn read_key(
    input: &mut PayloadReader<'_>,
    context: &DecodeContext,
    encoding: FieldEncoding,
) -> Result<Key> {
    let vk_parts = read_vk_parts(input, context, encoding)?;
    match context.kind {
        // The evaluation domain is built on another thread while the polynomials are read.
        KeyKind::Proving => {
            context.assemble_proving_while_reading(vk_parts, input, |input, shape| {
                read_pk_polys(input, shape, encoding, context.validation)
            })
        }
        KeyKind::Verifying => context.assemble(vk_parts, None),
    }
}

fn read_vk_parts(
    input: &mut PayloadReader<'_>,
    context: &DecodeContext,
    encoding: FieldEncoding,
) -> Result<VkParts> {
    let version = input.read_u8("verifying key version")?;
    if version != VK_VERSION {
        return Err(Error::Malformed(format!(
            "halo2 verifying key version byte {version:#04x}, expected {VK_VERSION:#04x}"
        )));
    }
    codec_core::vk_layout::read(input, context, encoding)
}

fn read_pk_polys(
    input: &mut PayloadReader<'_>,
    shape: &PkShape,
    encoding: FieldEncoding,
    validation: Validation,
) -> Result<PkParts> {
    let mut poly = |what: &'static str| read_poly(input, shape.rows, encoding, validation, what);
    let l0 = poly("l0")?;
    let l_last = poly("l_last")?;
    let l_active_row = poly("l_active_row")?;
    let fixed_values = read_poly_list(
        input,
        shape.fixed_columns,
        shape.rows,
        encoding,
        validation,
        "fixed_values",
    )?;
    let fixed_polys = read_poly_list(
        input,
        shape.fixed_columns,
        shape.rows,
        encoding,
        validation,
        "fixed_polys",
    )?;
    let permutation_values = read_poly_list(
        input,
        shape.permutation_columns,
        shape.rows,
        encoding,
        validation,
        "permutation values",
    )?;
    let permutation_polys = read_poly_list(
        input,
        shape.permutation_columns,
        shape.rows,
        encoding,
        validation,
        "permutation polys",
    )?;
    Ok(PkParts {
        l0,
        l_last,
        l_active_row,
        fixed_values,
        fixed_polys,
        permutation_values,
        permutation_polys,
    })
}

fn read_poly_list(
    input: &mut PayloadReader<'_>,
    expected_count: usize,
    rows: usize,
    encoding: FieldEncoding,
    validation: Validation,
    what: &'static str,
) -> Result<Vec<Vec<Fr>>> {
    let count = input.read_u32_be(what)? as usize;
    expect_count(what, expected_count, count)?;
    (0..count)
        .map(|_| read_poly(input, rows, encoding, validation, what))
        .collect()
}

fn read_poly(
    input: &mut PayloadReader<'_>,
    rows: usize,
    encoding: FieldEncoding,
    validation: Validation,
    what: &'static str,
) -> Result<Vec<Fr>> {
    let len = input.read_u32_be(what)? as usize;
    expect_count("polynomial length (2^k)", rows, len)?;
    read_fr_vec(input, len, encoding, validation, what)
}
