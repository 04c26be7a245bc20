//! Reads halo2's key layout with every count, length and value checked.

use keycodec_core::backend_api::circuit::expect_count;
use keycodec_core::backend_api::field::{read_polynomial, FieldEncoding};
use keycodec_core::backend_api::{
    DecodeContext, Error, Key, PayloadReader, PkParts, PkShape, PolyGroup, Result, Span, Validation,
};
use keycodec_core::halo2curves::bn256::Fr;

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
    let vk = keycodec_core::backend_api::vk_layout::read(input, context, encoding)?;
    context.assemble(vk, input, |input, shape| {
        read_pk_polys(input, shape, encoding, context.validation)
    })
}

/// The polynomials in halo2's order: single polynomials as they are, the fixed and
/// permutation columns behind their count, each polynomial behind its length (`u32`
/// big-endian). Raw layouts are read as one run of spans (every core, straight into the
/// key's vectors), the compressed one polynomial by polynomial.
fn read_pk_polys(
    input: &mut PayloadReader<'_>,
    shape: &PkShape,
    encoding: FieldEncoding,
    validation: Validation,
) -> Result<PkParts> {
    if encoding != FieldEncoding::Raw {
        return PkParts::read_groups(|group| {
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
        });
    }
    // The layout halo2 writes for this circuit, and the value each prefix must hold.
    let mut spans = Vec::new();
    let mut prefixes = Vec::new();
    for group in PolyGroup::ALL {
        let count = group.count(shape);
        if group.is_list() {
            prefixes.push(Some((group.name(), count)));
            spans.push(Span::Bytes(4));
        }
        for _ in 0..count {
            prefixes.push(Some(("polynomial length (2^k)", shape.rows)));
            spans.push(Span::Bytes(4));
            prefixes.push(None);
            spans.push(Span::Polynomial {
                count: shape.rows,
                spare: 0,
            });
        }
    }
    let check_prefix = |index: usize, bytes: &[u8]| {
        let (what, expected) = prefixes
            .get(index)
            .copied()
            .flatten()
            .ok_or_else(|| Error::Internal("a prefix outside the layout".into()))?;
        let found = <[u8; 4]>::try_from(bytes)
            .map(u32::from_be_bytes)
            .map_err(|_| Error::Internal("a prefix of another length".into()))?;
        expect_count(what, expected, found as usize)
    };
    let groups = PolyGroup::ALL.map(|group| group.count(shape));
    let data = input.read_spans(&spans, &groups, validation, check_prefix, "polynomial")?;
    let mut groups = data.groups.into_iter();
    PkParts::read_groups(|_| Ok(groups.next().unwrap_or_default()))
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
        use keycodec_core::backend_api::PolyGroup;
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
