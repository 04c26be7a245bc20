//! KZG parameters in about a minute instead of halo2's ~18 at k = 22.
//!
//! `ParamsKZG::setup` multiplies the generator by every power of the secret `s` (and by every
//! Lagrange basis value at `s`) with a general double-and-add, one point at a time: two
//! 256-bit scalar multiplications per row. Because the secret is known here (these are test
//! parameters, exactly as `setup`'s are), every point is a *fixed-base* multiple of the same
//! generator, so this module precomputes `d · 2^(16j) · G` for all 16-bit digits `d` and
//! windows `j` once (1 Mi points, 64 MiB), after which each multiplication is at most 16
//! mixed additions; points are normalised to affine in batches (one inversion per batch),
//! and both halves run in parallel with rayon.
//!
//! The result is bit-for-bit what `ParamsKZG::setup` produces for the same secret: the test
//! `fast_params_equal_halo2_setup` compares the two.

use halo2_proofs::arithmetic::Field;
use halo2_proofs::halo2curves::ff::{BatchInvert, PrimeField};
use halo2_proofs::halo2curves::group::prime::PrimeCurveAffine;
use halo2_proofs::halo2curves::group::{Curve, Group};
use halo2_proofs::poly::kzg::commitment::ParamsKZG;
use halo2curves::bn256::{Bn256, Fr, G1Affine, G2Affine, G1};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rayon::prelude::*;

/// Bits per window of the fixed-base table.
const WINDOW_BITS: usize = 16;
/// Windows covering a 256-bit scalar.
const WINDOWS: usize = 256 / WINDOW_BITS;
/// Points normalised per batch (one field inversion each).
const BATCH: usize = 1 << 14;

/// The toxic secret of the benchmark parameters, drawn exactly as `ParamsKZG::setup` draws it
/// from the same seeded generator.
pub fn secret(seed: u64) -> Fr {
    Fr::random(StdRng::seed_from_u64(seed))
}

/// `d · 2^(16j) · G` for every window `j` and 16-bit digit `d`.
struct FixedBaseTable {
    windows: Vec<Vec<G1Affine>>,
}

impl FixedBaseTable {
    fn new(base: G1) -> Self {
        let window_bases: Vec<G1> = (0..WINDOWS)
            .scan(base, |current, _| {
                let this = *current;
                for _ in 0..WINDOW_BITS {
                    *current = current.double();
                }
                Some(this)
            })
            .collect();
        let windows = window_bases
            .into_par_iter()
            .map(|window_base| {
                let projective: Vec<G1> = (0..1usize << WINDOW_BITS)
                    .scan(G1::identity(), |acc, _| {
                        let this = *acc;
                        *acc += window_base;
                        Some(this)
                    })
                    .collect();
                let mut affine = vec![G1Affine::identity(); projective.len()];
                G1::batch_normalize(&projective, &mut affine);
                affine
            })
            .collect();
        FixedBaseTable { windows }
    }

    fn mul(&self, scalar: &Fr) -> G1 {
        let repr = scalar.to_repr();
        let mut acc = G1::identity();
        for (window, digit) in self.windows.iter().zip(repr.chunks_exact(2)) {
            let digit = digit
                .iter()
                .rev()
                .fold(0usize, |acc, byte| acc << 8 | usize::from(*byte));
            if let Some(point) = window.get(digit).filter(|_| digit != 0) {
                acc += point;
            }
        }
        acc
    }

    /// Multiplies the base by every scalar, in parallel, normalised to affine.
    fn mul_all(&self, scalars: &[Fr], on_batch: &(dyn Fn(u64) + Sync)) -> Vec<G1Affine> {
        let mut out = vec![G1Affine::identity(); scalars.len()];
        out.par_chunks_mut(BATCH)
            .zip(scalars.par_chunks(BATCH))
            .for_each(|(affine, scalars)| {
                let projective: Vec<G1> = scalars.iter().map(|s| self.mul(s)).collect();
                G1::batch_normalize(&projective, affine);
                on_batch(scalars.len() as u64);
            });
        out
    }
}

/// `[1, s, s^2, ..., s^(n-1)]`.
fn powers(s: Fr, n: usize) -> Vec<Fr> {
    std::iter::successors(Some(Fr::ONE), |x| Some(*x * s))
        .take(n)
        .collect()
}

/// The Lagrange basis polynomials of the size-`n` domain evaluated at `s`:
/// `L_i(s) = (s^n - 1) / n · ω^i / (s - ω^i)`, exactly as `ParamsKZG::setup` computes them.
fn lagrange_at(s: Fr, k: u32) -> Vec<Fr> {
    let n = 1usize << k;
    let mut root = Fr::ROOT_OF_UNITY;
    for _ in k..Fr::S {
        root = root.square();
    }
    let roots = powers(root, n);
    let n_inv = Fr::from(n as u64).invert().unwrap_or(Fr::ZERO);
    let multiplier = (s.pow_vartime([n as u64]) - Fr::ONE) * n_inv;
    let mut denominators: Vec<Fr> = roots.iter().map(|w| s - w).collect();
    denominators.iter_mut().batch_invert();
    roots
        .iter()
        .zip(&denominators)
        .map(|(w, inv)| multiplier * w * inv)
        .collect()
}

/// KZG parameters for `2^k` rows with the secret of `seed`, equal to
/// `ParamsKZG::<Bn256>::setup(k, StdRng::seed_from_u64(seed))`. `on_points` is called with
/// the number of points finished, for progress reporting (`2 · 2^k` in all).
pub fn fast_setup(k: u32, seed: u64, on_points: &(dyn Fn(u64) + Sync)) -> ParamsKZG<Bn256> {
    let s = secret(seed);
    let n = 1usize << k;
    let table = FixedBaseTable::new(G1::generator());
    let g = table.mul_all(&powers(s, n), on_points);
    let g_lagrange = table.mul_all(&lagrange_at(s, k), on_points);
    drop(table);
    let g2 = G2Affine::generator();
    let s_g2 = (g2 * s).to_affine();
    // `from_parts` is a method of an existing instance (whose fields it ignores): a k = 1
    // setup costs two points.
    ParamsKZG::<Bn256>::setup(1, StdRng::seed_from_u64(seed)).from_parts(
        k,
        g,
        Some(g_lagrange),
        g2,
        s_g2,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo2_proofs::poly::commitment::Params;

    #[test]
    fn fast_params_equal_halo2_setup() {
        for k in [4, 7] {
            let mut ours = Vec::new();
            fast_setup(k, 11, &|_| {}).write(&mut ours).unwrap();
            let mut theirs = Vec::new();
            ParamsKZG::<Bn256>::setup(k, StdRng::seed_from_u64(11))
                .write(&mut theirs)
                .unwrap();
            assert!(
                ours == theirs,
                "k = {k}: fast parameters differ from halo2's setup"
            );
        }
    }
}
