//! Loading: every polynomial the layout does not store, recomputed exactly as halo2-axiom's
//! keygen computes it.

use keycodec_core::backend_api::circuit::{expect_count, rows};
use keycodec_core::backend_api::field::zeros;
use keycodec_core::backend_api::{Error, PkParts, Result};
use keycodec_core::halo2_proofs::arithmetic::Field;
use keycodec_core::halo2_proofs::fft;
use keycodec_core::halo2_proofs::halo2curves::ff::PrimeField;
use keycodec_core::halo2_proofs::plonk::VerifyingKey;
use keycodec_core::halo2_proofs::poly::EvaluationDomain;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use rayon::prelude::*;

use crate::domain_math::{inverse_of, powers, Base};
use crate::wire::StoredPk;

/// Lagrange vectors with at most this many entries off their base are converted to
/// coefficients term by term (each term costs two multiplications per coefficient) instead
/// of by a full inverse FFT: below roughly k terms that is cheaper.
fn sparse_limit(k: u32) -> usize {
    k as usize
}

/// The coefficients of the polynomial whose Lagrange values are `base` plus `terms`
/// (row, added value): `Σ_j v_j · ω^(-ij) / n` per coefficient `i`, a geometric sequence per
/// term. Exact field arithmetic, so identical to halo2's inverse FFT of the same values.
fn sparse_to_coeff(n: usize, omega_inv: Fr, base: Base, terms: &[(usize, Fr)]) -> Result<Vec<Fr>> {
    const CHUNK: usize = 1 << 14;
    let n_inv = inverse_of(n);
    let terms: Vec<(Fr, Fr)> = terms
        .iter()
        .map(|(row, value)| (omega_inv.pow_vartime([*row as u64]), *value * n_inv))
        .collect();
    let mut coeffs = zeros(n)?;
    coeffs
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(index, chunk)| {
            let first = (index * CHUNK) as u64;
            for (ratio, scaled) in &terms {
                let mut current = *scaled * ratio.pow_vartime([first]);
                for coeff in chunk.iter_mut() {
                    *coeff += current;
                    current *= ratio;
                }
            }
        });
    match base {
        Base::Zero => {}
        Base::Constant(c) => {
            if let Some(first) = coeffs.get_mut(0) {
                *first += c;
            }
        }
        Base::Linear(d) => {
            if let Some(second) = coeffs.get_mut(1) {
                *second += d;
            }
        }
    }
    Ok(coeffs)
}

/// The coefficients of the polynomial with Lagrange values `values`: what halo2's
/// `EvaluationDomain::lagrange_to_coeff` returns (exact field arithmetic: any inverse FFT of
/// the same values gives the same coefficients), through halo2-axiom's other public FFT,
/// `fft::recursive::fft`, over the twiddle tables the domain already holds. On x86-64
/// `lagrange_to_coeff` uses `fft::parallel`, which recomputes its twiddles as it goes: at
/// k = 22 on the 2-core project machine the recursive one takes 1.13 s against 1.65 s.
///
/// # Errors
///
/// [`Error::Structure`] unless `values` has the domain's `2^k` elements (halo2 would panic).
pub(crate) fn inverse_fft(domain: &EvaluationDomain<Fr>, values: &[Fr]) -> Result<Vec<Fr>> {
    let n = values.len();
    expect_count("polynomial length (2^k)", rows(domain.k()), n)?;
    let mut coeffs = zeros(n)?;
    coeffs.copy_from_slice(values);
    fft::recursive::fft(
        &mut coeffs,
        domain.get_omega_inv(),
        domain.k(),
        domain.get_fft_data(n),
        true,
    );
    let n_inv = inverse_of(n);
    coeffs.par_iter_mut().for_each(|c| *c *= n_inv);
    Ok(coeffs)
}

/// Recomputes every polynomial, exactly as halo2-axiom 0.5.3's `keygen_pk` computes it:
/// through closed forms and sparse sums where the values allow, halo2's own inverse FFT
/// otherwise.
pub(crate) fn recompute(vk: &VerifyingKey<G1Affine>, stored: StoredPk) -> Result<PkParts> {
    let domain = vk.get_domain();
    let n = rows(domain.k());
    let limit = sparse_limit(domain.k());
    let omega_inv = domain.get_omega_inv();
    let full_ifft = |values: &Vec<Fr>| inverse_fft(domain, values);
    let omega_powers = powers(domain.get_omega(), n)?;
    let delta_powers = powers(Fr::DELTA, stored.exceptions.len())?;

    let blinding = vk.cs().blinding_factors();
    let last = n.checked_sub(blinding + 1).ok_or(Error::Structure {
        what: "rows against blinding factors",
        expected: blinding as u64 + 1,
        found: n as u64,
    })?;
    let inactive: Vec<(usize, Fr)> = (last..n).map(|row| (row, -Fr::ONE)).collect();
    let l0 = sparse_to_coeff(n, omega_inv, Base::Zero, &[(0, Fr::ONE)])?;
    let l_last = sparse_to_coeff(n, omega_inv, Base::Zero, &[(last, Fr::ONE)])?;
    let l_active_row = sparse_to_coeff(n, omega_inv, Base::Constant(Fr::ONE), &inactive)?;

    expect_count(
        "fixed columns",
        vk.cs().num_fixed_columns(),
        stored.fixed_values.len(),
    )?;
    // Column by column on every core (each column's own work is parallel too, but its scans
    // and sparse sums are not all so).
    let fixed_polys = stored
        .fixed_values
        .par_iter()
        .map(|values| {
            let nonzero: Vec<(usize, Fr)> = values
                .iter()
                .enumerate()
                .filter(|(_, v)| !bool::from(v.is_zero()))
                .take(limit + 1)
                .map(|(row, v)| (row, *v))
                .collect();
            if nonzero.len() <= limit {
                sparse_to_coeff(n, omega_inv, Base::Zero, &nonzero)
            } else {
                full_ifft(values)
            }
        })
        .collect::<Result<_>>()?;

    let permutation: Vec<(Vec<Fr>, Vec<Fr>)> = stored
        .exceptions
        .par_iter()
        .enumerate()
        .map(|(column, exceptions)| {
            let delta = delta_powers.get(column).copied().unwrap_or(Fr::ONE);
            let mut values = zeros(n)?;
            values
                .par_iter_mut()
                .zip(omega_powers.par_iter())
                .for_each(|(value, w)| *value = delta * w);
            let mut changes = Vec::with_capacity(exceptions.len().min(limit + 1));
            for &(row, to_column, to_row) in exceptions {
                let target = delta_powers.get(to_column).zip(omega_powers.get(to_row));
                if let (Some(cell), Some((d, w))) = (values.get_mut(row), target) {
                    let new = *d * w;
                    if changes.len() <= limit {
                        changes.push((row, new - *cell));
                    }
                    *cell = new;
                }
            }
            let poly = if changes.len() <= limit {
                sparse_to_coeff(n, omega_inv, Base::Linear(delta), &changes)?
            } else {
                full_ifft(&values)?
            };
            Ok((values, poly))
        })
        .collect::<Result<_>>()?;
    let (permutation_values, permutation_polys) = permutation.into_iter().unzip();
    Ok(PkParts {
        l0,
        l_last,
        l_active_row,
        fixed_values: stored.fixed_values,
        fixed_polys,
        permutation_values,
        permutation_polys,
    })
}
