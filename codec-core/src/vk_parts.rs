//! The verifying key's data, as every backend stores it.

use std::io::Write;

use halo2_proofs::plonk::VerifyingKey;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::G1Affine;

use crate::circuit::{rows, stored_selector_count};
use crate::error::{Error, IoContext, Result};
use crate::field::{encode_g1, FieldEncoding};

/// The verifying key's data, as every backend encodes and decodes it. Nothing here is
/// checked against a circuit yet: [`VkPlan::new`](crate::backend_api::VkPlan::new) does that.
#[derive(Debug)]
pub struct VkParts {
    /// The circuit has `2^k` rows.
    pub k: u32,
    /// Whether the key was generated with selector compression.
    pub compress_selectors: bool,
    /// Commitments to the fixed columns (selector columns included).
    pub fixed_commitments: Vec<G1Affine>,
    /// Commitments to the permutation's sigma polynomials.
    pub permutation_commitments: Vec<G1Affine>,
    /// Selector activations, one per selector with compression (none without): `2^k` bits
    /// packed 8 per byte, least significant bit first, as halo2 stores them.
    pub selectors: Vec<Vec<u8>>,
}

impl VkParts {
    /// Extracts the parts of an existing verifying key (for encoding).
    ///
    /// halo2-axiom has no accessor for the selector activations, so they are taken from the
    /// tail of the key's own `RawBytes` serialization, where halo2 packs them.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] if halo2's serialization is shorter than its selectors.
    pub fn of(vk: &VerifyingKey<G1Affine>) -> Result<Self> {
        let k = vk.get_domain().k();
        let count = stored_selector_count(vk.cs(), vk.compress_selectors());
        let selectors = if count == 0 {
            Vec::new()
        } else {
            let bytes = vk.to_bytes(SerdeFormat::RawBytes);
            let per_selector = packed_selector_len(k);
            let tail = bytes
                .len()
                .checked_sub(count * per_selector)
                .and_then(|start| bytes.get(start..))
                .ok_or_else(|| {
                    Error::Internal("halo2's verifying key is shorter than its selectors".into())
                })?;
            tail.chunks_exact(per_selector)
                .map(<[u8]>::to_vec)
                .collect()
        };
        Ok(VkParts {
            k,
            compress_selectors: vk.compress_selectors(),
            fixed_commitments: vk.fixed_commitments().clone(),
            permutation_commitments: vk.permutation().commitments().clone(),
            selectors,
        })
    }
}

/// Bytes of one packed selector of a key with `2^k` rows.
pub(crate) fn packed_selector_len(k: u32) -> usize {
    rows(k).div_ceil(8)
}

/// Unpacks `n` booleans stored 8 per byte, least significant bit first (halo2's packing).
pub(crate) fn unpack_bits(packed: &[u8], n: usize) -> Vec<bool> {
    packed
        .iter()
        .flat_map(|byte| (0..8).map(move |bit| (byte >> bit) & 1 == 1))
        .take(n)
        .collect()
}

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
