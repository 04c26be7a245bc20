//! Reads halo2's key layout with every count, length and value checked.

use codec_core::backend_api::circuit::expect_count;
use codec_core::backend_api::field::{read_polynomial, FieldEncoding};
use codec_core::backend_api::{
    DecodeContext, Error, Key, PayloadReader, PkParts, PkShape, Result, Validation,
};
use codec_core::halo2curves::bn256::Fr;

use crate::encode::VK_VERSION;

pub(crate) fn read_key(
    input: &mut PayloadReader<'_>,
    context: &DecodeContext,
    encoding: FieldEncoding,
) -> Result<Key> {
    let version = input.read_u8("verifying key version")?;
    if version != VK_VERSION {
        return Err(Error::Malformed(format!(
            "halo2 verifying key version byte {version:#04x}, expected {VK_VERSION:#04x}"
        )));
    }
    let vk = codec_core::backend_api::vk_layout::read(input, context, encoding)?;
    context.assemble(vk, input, |input, shape| {
        read_pk_polys(input, shape, encoding, context.validation)
    })
}

/// The polynomials in halo2's order: single polynomials as they are, the fixed and
/// permutation columns behind their count.
fn read_pk_polys(
    input: &mut PayloadReader<'_>,
    shape: &PkShape,
    encoding: FieldEncoding,
    validation: Validation,
) -> Result<PkParts> {
    PkParts::read_groups(|group| {
        let what = group.name();
        let count = if group.is_list() {
            let count = input.read_u32_be(what)? as usize;
            expect_count(what, group.count(shape), count)?;
            count
        } else {
            1
        };
        (0..count)
            .map(|_| read_poly(input, shape.rows, encoding, validation, what))
            .collect()
    })
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
    read_polynomial(input, len, encoding, validation, what)
}

#[cfg(test)]
mod tests {
    /// The groups are read in halo2's order, which is what `PolyGroup::ALL` lists.
    #[test]
    fn groups_follow_halo2s_order() {
        use codec_core::backend_api::PolyGroup;
        let names: Vec<_> = PolyGroup::ALL.iter().map(|g| g.name()).collect();
        assert_eq!(
            names,
            [
                "l0",
                "l_last",
                "l_active_row",
                "fixed_values",
                "fixed_polys",
                "permutation values",
                "permutation polys"
            ]
        );
    }
}
