//! Saving: the proof that every polynomial the layout does not store is what loading
//! will recompute, so that saving compactly never changes a key.

use keycodec_core::backend_api::{Error, Result};
use keycodec_core::halo2_proofs::arithmetic::Field;
use keycodec_core::halo2_proofs::halo2curves::ff::PrimeField;
use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use rayon::prelude::*;

use crate::domain_math::{inverse_of, powers, Base};

/// `p(x)` for coefficients `coeffs`, by Horner's rule over blocks evaluated in parallel:
/// `p(x) = Σ_b x^(b·S) · p_b(x)` for blocks `p_b` of `S` coefficients.
fn evaluate_parallel(coeffs: &[Fr], x: Fr) -> Fr {
    const BLOCK: usize = 1 << 14;
    let x_block = x.pow_vartime([BLOCK as u64]);
    let partial: Vec<Fr> = coeffs
        .par_chunks(BLOCK)
        .map(|block| block.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + c))
        .collect();
    partial
        .iter()
        .rev()
        .fold(Fr::ZERO, |acc, p| acc * x_block + p)
}

/// Refuses to save a key whose recomputable polynomials are not what loading would
/// recompute (a key assembled by hand, or corrupted in memory): saving it compactly would
/// silently change it.
///
/// Each coefficient-form polynomial `p` must be the inverse FFT of its Lagrange values `v`.
/// Both sides are evaluated at one point `x` outside the domain: `p(x)` by Horner, and the
/// interpolation `Σ v_j L_j(x)` with `L_j(x) = (x^n - 1)/n · ω^j/(x - ω^j)`. Two distinct
/// polynomials of degree < n agree at `x` with probability at most n/|F| (Schwartz–Zippel),
/// and `x` is derived from the key, so an accidental inconsistency cannot be aimed at it.
///
/// The interpolation costs one multiplication per row only for dense columns. A column
/// whose values are its base (zero for fixed columns, `δ^c · ω^j` for permutation column
/// `c`) except on a few rows is the base's value at `x` (`0`, or `δ^c · x`) plus the few
/// rows' terms; the basis over every row (one batch inversion of n elements) is built only
/// if some column is dense. `l_active_row` uses `Σ_j L_j(x) = 1`.
/// `omega_powers` are the domain's `n` powers of ω.
pub(crate) fn check_derivable(pk: &ProvingKey<G1Affine>, omega_powers: &[Fr]) -> Result<()> {
    let n = omega_powers.len();
    // A point derived from the key (its transcript representation), moved off the domain.
    let mut x = pk.get_vk().transcript_repr().square() + Fr::from(0x6b63_u64);
    while x.pow_vartime([n as u64]) == Fr::ONE {
        x += Fr::ONE;
    }
    let lagrange = Interpolator::new(omega_powers, x);
    let evaluate = |coeffs: &[Fr]| evaluate_parallel(coeffs, x);
    let refuse = |what: &str| Error::NotStorable {
        codec: "compact",
        reason: format!("{what} is not derivable the way halo2 keygen derives it"),
    };

    let blinding = pk.get_vk().cs().blinding_factors();
    let last = n
        .checked_sub(blinding + 1)
        .ok_or_else(|| refuse("l_last"))?;
    let ends = lagrange.basis_at_rows(&[0, last]);
    let inactive: Fr = lagrange
        .basis_at_rows(&(last..n).collect::<Vec<_>>())
        .iter()
        .sum();
    let checks = [
        (evaluate(pk.l0().values()), ends.first().copied(), "l0"),
        (
            evaluate(pk.l_last().values()),
            ends.get(1).copied(),
            "l_last",
        ),
        (
            evaluate(pk.l_active_row().values()),
            Some(Fr::ONE - inactive),
            "l_active_row",
        ),
    ];
    for (got, expected, what) in checks {
        if Some(got) != expected {
            return Err(refuse(what));
        }
    }
    let permutation = pk.permutation();
    let delta_powers = powers(Fr::DELTA, permutation.permutations().len())?;
    let pairs = pk
        .fixed_values()
        .iter()
        .zip(pk.fixed_polys())
        .map(|(v, p)| (v.values(), p.values(), Base::Zero, "a fixed polynomial"))
        .chain(
            permutation
                .permutations()
                .iter()
                .zip(permutation.polys())
                .zip(&delta_powers)
                .map(|((v, p), delta)| {
                    (
                        v.values(),
                        p.values(),
                        Base::Linear(*delta),
                        "a permutation polynomial",
                    )
                }),
        );
    for (values, coeffs, base, what) in pairs {
        if values.len() != n
            || coeffs.len() != n
            || evaluate(coeffs) != lagrange.interpolate(values, base)
        {
            return Err(refuse(what));
        }
    }
    if pk.fixed_polys().len() != pk.fixed_values().len()
        || permutation.polys().len() != permutation.permutations().len()
    {
        return Err(refuse("the polynomial counts"));
    }
    Ok(())
}

/// Interpolation at one point `x` off the domain of `n` rows: `Σ v_j L_j(x)` with
/// `L_j(x) = (x^n - 1)/n · ω^j/(x - ω^j)`.
struct Interpolator<'a> {
    x: Fr,
    n: usize,
    scale: Fr,
    /// The domain's powers of ω, `n` of them.
    omega_powers: &'a [Fr],
    /// The basis over every row, for dense columns: built at most once.
    full_basis: std::sync::OnceLock<Vec<Fr>>,
}

impl<'a> Interpolator<'a> {
    fn new(omega_powers: &'a [Fr], x: Fr) -> Self {
        let n = omega_powers.len();
        Interpolator {
            x,
            n,
            scale: (x.pow_vartime([n as u64]) - Fr::ONE) * inverse_of(n),
            omega_powers,
            full_basis: std::sync::OnceLock::new(),
        }
    }

    fn omega_at(&self, row: usize) -> Fr {
        self.omega_powers.get(row).copied().unwrap_or(Fr::ZERO)
    }

    /// `L_j(x)` for the given rows, with one batch inversion.
    fn basis_at_rows(&self, rows: &[usize]) -> Vec<Fr> {
        let mut inverses: Vec<Fr> = rows
            .par_iter()
            .map(|&j| self.x - self.omega_at(j))
            .collect();
        inverses.par_chunks_mut(1 << 16).for_each(|chunk| {
            keycodec_core::halo2_proofs::halo2curves::ff::BatchInvert::batch_invert(
                chunk.iter_mut(),
            );
        });
        rows.par_iter()
            .zip(inverses.par_iter())
            .map(|(&j, inv)| self.scale * self.omega_at(j) * inv)
            .collect()
    }

    /// `Σ v_j L_j(x)`. Where `values` equal `base` on all but an eighth of the rows, the
    /// base's own value at `x` plus the other rows' terms (one multiplication per row to
    /// compare with a linear base, none for zero); otherwise over every row, with the full
    /// basis.
    fn interpolate(&self, values: &[Fr], base: Base) -> Fr {
        let base_at = |row: usize| match base {
            Base::Zero => Fr::ZERO,
            Base::Constant(c) => c,
            Base::Linear(d) => d * self.omega_at(row),
        };
        // At most an eighth of the rows are collected: one more means the column is dense
        // (and stops the search early).
        let limit = self.n / 8;
        let off: Vec<(usize, Fr)> = values
            .par_iter()
            .enumerate()
            .filter_map(|(row, v)| {
                let b = base_at(row);
                (*v != b).then(|| (row, *v - b))
            })
            .take_any(limit + 1)
            .collect();
        if off.len() <= limit {
            let at_x = match base {
                Base::Zero => Fr::ZERO,
                Base::Constant(c) => c,
                Base::Linear(d) => d * self.x,
            };
            let rows: Vec<usize> = off.iter().map(|(row, _)| *row).collect();
            let basis = self.basis_at_rows(&rows);
            at_x + off
                .par_iter()
                .zip(basis.par_iter())
                .map(|((_, difference), l)| *difference * l)
                .sum::<Fr>()
        } else {
            self.interpolate_dense(values)
        }
    }

    /// `Σ v_j L_j(x)` over every row.
    fn interpolate_dense(&self, values: &[Fr]) -> Fr {
        let basis = self
            .full_basis
            .get_or_init(|| self.basis_at_rows(&(0..self.n).collect::<Vec<_>>()));
        values
            .par_iter()
            .zip(basis.par_iter())
            .map(|(v, l)| *v * l)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain_math::powers;
    use crate::recompute::inverse_fft;
    use keycodec_core::halo2_proofs::poly::EvaluationDomain;

    #[test]
    fn parallel_horner_agrees_with_plain_horner() {
        let x = Fr::from(0x1234_5678_u64);
        for len in [0usize, 1, 5, (1 << 14) - 1, 1 << 14, (1 << 14) + 1, 3 << 14] {
            let coeffs: Vec<Fr> = (0..len as u64).map(|i| Fr::from(i * i + 7)).collect();
            let plain = coeffs.iter().rev().fold(Fr::ZERO, |acc, c| acc * x + c);
            assert_eq!(evaluate_parallel(&coeffs, x), plain, "len {len}");
        }
    }

    /// The sparse interpolation (base value plus the differing rows) equals the one over
    /// every row, and both equal the inverse FFT's polynomial evaluated at `x`.
    #[test]
    fn sparse_and_dense_interpolation_agree_with_the_inverse_fft() {
        let k = 6;
        let n = 1usize << k;
        let domain = EvaluationDomain::<Fr>::new(3, k);
        let x = Fr::from(0xdead_beef_u64);
        let omega_powers = powers(domain.get_omega(), n).unwrap();
        let lagrange = Interpolator::new(&omega_powers, x);
        let delta = Fr::from(5u64);
        let linear: Vec<Fr> = omega_powers.iter().map(|w| delta * w).collect();
        for (base, base_values) in [
            (Base::Zero, vec![Fr::ZERO; n]),
            (Base::Constant(Fr::from(3u64)), vec![Fr::from(3u64); n]),
            (Base::Linear(delta), linear),
        ] {
            // 0, a few (sparse path) and many (dense path) rows off the base.
            for changed in [0usize, 1, 3, n / 8, n / 8 + 1, n] {
                let mut values = base_values.clone();
                for (i, value) in values.iter_mut().enumerate().take(changed) {
                    *value += Fr::from(i as u64 * 7 + 1);
                }
                let coeffs = inverse_fft(&domain, &values).unwrap();
                let expected = evaluate_parallel(&coeffs, x);
                assert_eq!(lagrange.interpolate(&values, base), expected, "{changed}");
                assert_eq!(lagrange.interpolate_dense(&values), expected, "{changed}");
            }
        }
    }
}
