//! The verifying key's data in halo2-axiom 0.5.3's own layout: what `VerifyingKey::write`
//! puts after its version byte. `k` (u32 LE), the selector-compression flag (one byte, 0 or
//! 1), the fixed-commitment count (u32 LE), the fixed then the permutation commitments (in
//! the chosen [`FieldEncoding`]), then each selector packed 8 rows per byte. The rawbytes
//! backend writes it behind halo2's version byte; the compact backend stores it as is, with
//! raw points.

use std::io::Write;

use crate::circuit::{permutation_columns, stored_selector_count};
use crate::codec::DecodeContext;
use crate::error::{Error, IoContext, Result};
use crate::field::{encode_g1, FieldEncoding};
use crate::payload::read_g1_vec;
use crate::payload::PayloadReader;
use crate::vk_parts::{packed_selector_len, VkParts};

/// Writes `parts` in halo2's layout: one write for the header and points, one per selector.
///
/// # Errors
///
/// [`Error::LimitExceeded`] if there are more fixed commitments than halo2's `u32` count
/// holds; the writer's I/O errors.
pub fn write(parts: &VkParts, encoding: FieldEncoding, out: &mut dyn Write) -> Result<()> {
    let points = parts.fixed_commitments.len() + parts.permutation_commitments.len();
    let mut head = Vec::with_capacity(16 + encoding.point_bytes() * points);
    head.extend_from_slice(&parts.k.to_le_bytes());
    head.push(u8::from(parts.compress_selectors));
    let count = parts.fixed_commitments.len();
    let count = u32::try_from(count).map_err(|_| Error::LimitExceeded {
        what: "fixed commitment count in halo2's u32 field",
        requested: count as u64,
        limit: u64::from(u32::MAX),
    })?;
    head.extend_from_slice(&count.to_le_bytes());
    for point in parts
        .fixed_commitments
        .iter()
        .chain(&parts.permutation_commitments)
    {
        head.extend_from_slice(&encode_g1(point, encoding));
    }
    out.write_all(&head).during("write")?;
    for packed in &parts.selectors {
        out.write_all(packed).during("write")?;
    }
    Ok(())
}

/// Reads what [`write()`] wrote: `k` is checked first ([`DecodeContext::check_payload_k`]),
/// every count against the bytes left before allocating, every point unless trusted. The
/// permutation-commitment and selector counts come from the circuit, as in halo2.
///
/// # Errors
///
/// [`Error::Truncated`], [`Error::LimitExceeded`], [`Error::Malformed`] (a flag other than 0
/// or 1), [`Error::InvalidPoint`], and the errors of [`DecodeContext::check_payload_k`].
pub fn read(
    input: &mut PayloadReader<'_>,
    context: &DecodeContext,
    encoding: FieldEncoding,
) -> Result<VkParts> {
    let k = input.read_u32_le("verifying key k")?;
    context.check_payload_k(k)?;
    let compress_selectors = input.read_flag("compress_selectors flag")?;
    let num_fixed = input.read_u32_le("fixed commitment count")? as usize;
    let points = |input: &mut PayloadReader<'_>, count, what| {
        read_g1_vec(input, count, encoding, context.validation, what)
    };
    let fixed_commitments = points(input, num_fixed, "fixed commitment")?;
    let num_permutation = permutation_columns(&context.cs);
    let permutation_commitments = points(input, num_permutation, "permutation commitment")?;
    let num_selectors = stored_selector_count(&context.cs, compress_selectors);
    let per_selector = packed_selector_len(k);
    input.ensure_available(num_selectors as u128 * per_selector as u128, "selectors")?;
    let selectors = (0..num_selectors)
        .map(|_| Ok(input.read_borrowed(per_selector, "selectors")?.into_owned()))
        .collect::<Result<_>>()?;
    Ok(VkParts {
        k,
        compress_selectors,
        fixed_commitments,
        permutation_commitments,
        selectors,
    })
}
