//! Saving: which permutation cells do not map to themselves, and where they map.

use std::collections::HashMap;

use keycodec_core::backend_api::field::{encode_fr, FieldEncoding};
use keycodec_core::backend_api::{Error, Result};
use keycodec_core::halo2_proofs::arithmetic::Field;
use keycodec_core::halo2_proofs::halo2curves::ff::PrimeField;
use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use rayon::prelude::*;

use crate::domain_math::powers;
use crate::wire::Exceptions;

/// Finds, for every permutation cell whose value is not its own `δ^column · ω^row`, the
/// (column, row) it maps to. `omega_powers` are the domain's `n` powers of ω, and every
/// permutation column has `n` values ([`check_derivable`] checked it).
pub(crate) fn permutation_exceptions(
    pk: &ProvingKey<G1Affine>,
    omega_powers: &[Fr],
) -> Result<Exceptions> {
    let values = pk.permutation().permutations();
    let n = omega_powers.len();
    let delta_powers = powers(Fr::DELTA, values.len())?;
    let delta_inverses: Vec<Fr> = delta_powers
        .iter()
        .map(|d| Option::<Fr>::from(d.invert()).unwrap_or(Fr::ZERO))
        .collect();
    // Cells whose value is not their own δ^column · ω^row, with that value.
    let mut odd_cells: Vec<Vec<(usize, Fr)>> = Vec::with_capacity(values.len());
    for (column, poly) in values.iter().enumerate() {
        let delta = delta_powers.get(column).copied().unwrap_or(Fr::ONE);
        odd_cells.push(
            poly.values()
                .par_iter()
                .zip(omega_powers.par_iter())
                .enumerate()
                .filter(|(_, (value, omega))| **value != delta * **omega)
                .map(|(row, (value, _))| (row, *value))
                .collect(),
        );
    }
    // Each odd value is δ^c · ω^r for some (c, r): for every column c, the ω power it would
    // need is `value / δ^c`, found through an index of ω powers by their first raw limb.
    let odd_total: usize = odd_cells.iter().map(Vec::len).sum();
    if odd_total == 0 {
        // The identity permutation (or none): nothing to look up.
        return Ok(vec![Vec::new(); values.len()]);
    }
    let index = if odd_total.saturating_mul(delta_inverses.len()) >= n / 8 {
        // Dense permutation: index every ω power.
        OmegaIndex::new(
            omega_powers
                .iter()
                .enumerate()
                .map(|(row, w)| (row, limb(w))),
        )
    } else {
        // Sparse: one parallel pass over the ω powers finds the rows of the few candidates
        // (the index holds the candidates, not the n powers).
        let candidates: LimbMap<()> = odd_cells
            .iter()
            .flatten()
            .flat_map(|(_, value)| {
                delta_inverses
                    .iter()
                    .map(move |inv| (limb(&(*value * inv)), ()))
            })
            .collect();
        let rows: Vec<(usize, u64)> = omega_powers
            .par_iter()
            .enumerate()
            .map(|(row, w)| (row, limb(w)))
            .filter(|(_, key)| candidates.contains_key(key))
            .collect();
        OmegaIndex::new(rows.into_iter())
    };
    odd_cells
        .iter()
        .map(|cells| {
            cells
                .par_iter()
                .map(|(row, value)| {
                    delta_inverses
                        .iter()
                        .enumerate()
                        .find_map(|(to_column, inverse)| {
                            index
                                .row_of(&(*value * inverse), omega_powers)
                                .map(|to_row| (*row, to_column, to_row))
                        })
                        .ok_or_else(|| Error::NotStorable {
                            codec: "compact",
                            reason: "a permutation value is not δ^column · ω^row".into(),
                        })
                })
                .collect::<Result<Vec<_>>>()
        })
        .collect()
}

/// The first limb of a field element's raw (Montgomery) form: for the powers of ω, a
/// pseudo-random 64-bit value, used as its own hash.
fn limb(value: &Fr) -> u64 {
    let raw = encode_fr(value, FieldEncoding::Raw);
    let mut first = [0u8; 8];
    first.copy_from_slice(raw.get(..8).unwrap_or(&[0u8; 8]));
    u64::from_le_bytes(first)
}

/// A `Hasher` for keys that are already uniformly distributed ([`limb`]s): the key is the
/// hash. SipHash over 32-byte keys made indexing 2^22 ω powers the bulk of a dense save.
#[derive(Default)]
struct LimbHasher(u64);

impl std::hash::Hasher for LimbHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

type LimbMap<V> = HashMap<u64, V, std::hash::BuildHasherDefault<LimbHasher>>;

/// Rows of ω powers by their first raw limb. Two powers may share a limb (about one chance
/// in 10^6 at k = 22): the first row of a limb is in `first`, any other in `more`, and
/// every lookup compares the whole value, so the index is exact.
struct OmegaIndex {
    first: LimbMap<usize>,
    more: LimbMap<Vec<usize>>,
}

impl OmegaIndex {
    fn new(rows: impl ExactSizeIterator<Item = (usize, u64)>) -> Self {
        let mut first = LimbMap::with_capacity_and_hasher(rows.len(), Default::default());
        let mut more: LimbMap<Vec<usize>> = LimbMap::default();
        for (row, key) in rows {
            if let Some(previous) = first.insert(key, row) {
                first.insert(key, previous);
                more.entry(key).or_default().push(row);
            }
        }
        OmegaIndex { first, more }
    }

    /// The row `r` with `ω^r == value`, if indexed.
    fn row_of(&self, value: &Fr, omega_powers: &[Fr]) -> Option<usize> {
        let key = limb(value);
        self.first
            .get(&key)
            .into_iter()
            .chain(self.more.get(&key).into_iter().flatten())
            .copied()
            .find(|&row| omega_powers.get(row) == Some(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows sharing a limb: the lookup compares whole values, so it finds the row whose
    /// power it is, whether that row was indexed first or not, and no row for a value
    /// that only shares the limb.
    #[test]
    fn omega_index_is_exact_when_limbs_collide() {
        let omega_powers = powers(Fr::from(5u64), 4).unwrap();
        let shared = limb(&omega_powers[1]);
        let index = OmegaIndex::new([(0, shared), (1, shared), (2, shared)].into_iter());
        assert_eq!(index.row_of(&omega_powers[1], &omega_powers), Some(1));
        assert_eq!(index.row_of(&omega_powers[2], &omega_powers), None);
        let index = OmegaIndex::new([(2, shared), (0, shared), (1, shared)].into_iter());
        assert_eq!(index.row_of(&omega_powers[1], &omega_powers), Some(1));
        let all = OmegaIndex::new(omega_powers.iter().enumerate().map(|(r, w)| (r, limb(w))));
        for (row, w) in omega_powers.iter().enumerate() {
            assert_eq!(all.row_of(w, &omega_powers), Some(row));
        }
        assert_eq!(all.row_of(&Fr::from(7u64), &omega_powers), None);
    }
}
