//! Shared proptest strategies for keycodec's integration and property tests, and the
//! stable-toolchain fuzzer ([`fuzz`]).

// Only the counting allocator (`counting`) needs `unsafe`.
#![deny(unsafe_code)]
// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

pub mod counting;
#[cfg(feature = "remote")]
pub mod faulty;
pub mod fuzz;
pub mod link;
pub mod lying;
#[cfg(feature = "remote")]
pub mod s3;

use keycodec_core::halo2_proofs::halo2curves::ff::{Field, FromUniformBytes};
use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2_proofs::poly::Polynomial;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use proptest::prelude::*;

/// Field elements with the edge cases weighted in: 0, 1, p - 1, small integers, and uniform
/// random elements.
pub fn fr() -> impl Strategy<Value = Fr> {
    prop_oneof![
        Just(Fr::ZERO),
        Just(Fr::ONE),
        Just(-Fr::ONE),
        any::<u64>().prop_map(Fr::from),
        proptest::array::uniform32(any::<u8>()).prop_map(|half| {
            let mut wide = [0u8; 64];
            wide[..32].copy_from_slice(&half);
            wide[32..].copy_from_slice(&half);
            Fr::from_uniform_bytes(&wide)
        }),
    ]
}

/// Vectors of field elements: empty, one element, or random lengths up to `max_len`.
pub fn fr_vec(max_len: usize) -> impl Strategy<Value = Vec<Fr>> {
    prop_oneof![
        Just(Vec::new()),
        fr().prop_map(|x| vec![x]),
        proptest::collection::vec(fr(), 0..=max_len),
    ]
}

/// A copy of `pk` whose polynomial values are replaced by values drawn from `values`
/// (cycled), keeping every shape: a key no circuit produced, which every backend must still
/// store and restore exactly.
pub fn with_values(pk: &ProvingKey<G1Affine>, values: &[Fr]) -> ProvingKey<G1Affine> {
    let mut source = values.iter().copied().cycle();
    let mut refill = |poly_len: usize| -> Vec<Fr> {
        (0..poly_len)
            .map(|_| source.next().unwrap_or(Fr::ZERO))
            .collect()
    };
    let n = pk.l0().len();
    let l0 = Polynomial::new(refill(n));
    let l_last = Polynomial::new(refill(n));
    let l_active_row = Polynomial::new(refill(n));
    let fixed_values = pk
        .fixed_values()
        .iter()
        .map(|p| Polynomial::new(refill(p.len())))
        .collect();
    let fixed_polys = pk
        .fixed_polys()
        .iter()
        .map(|p| Polynomial::new(refill(p.len())))
        .collect();
    let permutation = pk.permutation();
    let permutation_values = permutation
        .permutations()
        .iter()
        .map(|p| Polynomial::new(refill(p.len())))
        .collect();
    let permutation_polys = permutation
        .polys()
        .iter()
        .map(|p| Polynomial::new(refill(p.len())))
        .collect();
    ProvingKey::from_parts(
        pk.get_vk().clone(),
        l0,
        l_last,
        l_active_row,
        fixed_values,
        fixed_polys,
        keycodec_core::halo2_proofs::plonk::permutation::ProvingKey::from_parts(
            permutation_values,
            permutation_polys,
        ),
    )
}

/// The error's message, or nothing for a success: what an assertion on a refusal prints.
pub fn error_text<T, E: std::fmt::Display>(result: &Result<T, E>) -> String {
    result
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default()
}
