//! The verifying key's data in halo2-axiom 0.5.3's own layout: what `VerifyingKey::write`
//! puts after its version byte. `k` (u32 LE), the selector-compression flag (one byte, 0 or
//! 1), the fixed-commitment count (u32 LE), the fixed then the permutation commitments (in
//! the chosen [`FieldEncoding`]), then each selector packed 8 rows per byte. The rawbytes
//! backend writes it behind halo2's version byte; the compact backend stores it as is, with
//! raw points.

use crate::circuit::{permutation_columns, stored_selector_count};
use crate::codec::DecodeContext;
use crate::error::Result;
use crate::field::FieldEncoding;
use crate::payload::{read_vector, Digest, PayloadReader};
use crate::vk_parts::{packed_selector_len, VkParts};

pub use crate::vk_parts::write;

/// Reads what [`write()`] wrote: `k` is checked first ([`DecodeContext::check_payload_k`]),
/// every count against the bytes left before allocating, every point unless trusted. The
/// permutation-commitment and selector counts come from the circuit, as in halo2.
///
/// # Errors
///
/// [`Error::Truncated`](crate::Error::Truncated),
/// [`Error::LimitExceeded`](crate::Error::LimitExceeded),
/// [`Error::Malformed`](crate::Error::Malformed) (a flag other than 0 or 1),
/// [`Error::InvalidPoint`](crate::Error::InvalidPoint), and the errors of
/// [`DecodeContext::check_payload_k`].
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
        read_vector(
            input,
            count,
            encoding,
            context.validation,
            what,
            Digest::Not,
        )
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
