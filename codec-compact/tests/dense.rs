//! The compact layout on its worst case (dense fixed constants, one long copy chain) and on
//! the seed's StandardPlonk: identical keys, proofs, and the sizes against halo2's RawBytes.

// Test code: failing loudly is its job.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use keycodec_compact::CompactCodec;
use keycodec_core::halo2_proofs::plonk::{Circuit, ProvingKey};
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::{KeyCodecExt, LoadOptions};
use keycodec_testkit::{
    dense, generate, pk_bytes, prove_and_verify, standard_plonk, DenseCircuit, Fixture,
    StandardPlonk,
};

fn round_trip<C: Circuit<Fr, Params = ()>>(name: &str, fixture: &Fixture<C>) -> f64 {
    let file = CompactCodec.to_vec::<C, _>(&fixture.pk, ()).unwrap();
    let loaded: ProvingKey<G1Affine> = CompactCodec
        .read_slice::<C, _>(&file, (), &LoadOptions::default())
        .unwrap();
    assert_eq!(
        pk_bytes(&loaded),
        pk_bytes(&fixture.pk),
        "{name}: key differs"
    );
    prove_and_verify(
        &fixture.params,
        &loaded,
        loaded.get_vk(),
        &fixture.circuit,
        &fixture.instances,
    )
    .unwrap();
    let raw = fixture.pk.to_bytes(SerdeFormat::RawBytes).len();
    let ratio = file.len() as f64 / raw as f64;
    println!(
        "{name}: compact {} bytes, halo2 RawBytes {raw} bytes: {:.2}%",
        file.len(),
        100.0 * ratio
    );
    ratio
}

#[test]
fn dense_circuit_round_trips_and_stays_under_35_percent() {
    let fixture = dense();
    // The premise: the permutation really is dense. A cell maps to itself when its value is
    // its own delta^column * omega^row; count those that do not.
    use keycodec_core::halo2_proofs::halo2curves::ff::{Field, PrimeField};
    let omega = fixture.pk.get_vk().get_domain().get_omega();
    let moved: usize = fixture
        .pk
        .permutation()
        .permutations()
        .iter()
        .enumerate()
        .map(|(column, poly)| {
            let delta = Fr::DELTA.pow_vartime([column as u64]);
            (0..poly.len())
                .filter(|&row| poly[row] != delta * omega.pow_vartime([row as u64]))
                .count()
        })
        .sum();
    assert!(
        moved >= 2 * keycodec_testkit::circuits::DENSE_ROWS - 2,
        "only {moved} cells move"
    );
    let ratio = round_trip("dense k=8", fixture);
    assert!(
        ratio <= 0.35,
        "dense circuit: {:.1}% of RawBytes",
        100.0 * ratio
    );
}

#[test]
fn standard_plonk_is_tiny() {
    let fixture = generate(
        12,
        StandardPlonk(Fr::from(3u64)),
        vec![vec![Fr::from(3u64)]],
        false,
    );
    let ratio = round_trip("StandardPlonk k=12", &fixture);
    assert!(
        ratio <= 0.01,
        "StandardPlonk: {:.2}% of RawBytes",
        100.0 * ratio
    );
}

#[test]
fn dense_circuit_constants_are_full_size() {
    // Guard the test's premise: the constants are not small integers.
    let repr = keycodec_core::halo2_proofs::halo2curves::ff::PrimeField::to_repr(
        &DenseCircuit::constant(5),
    );
    assert!(repr[8..].iter().any(|b| *b != 0));
}

/// One coefficient of one fixed polynomial changed: a compact save must refuse the key (a
/// load would otherwise recompute the original coefficient and silently change the key).
#[test]
fn a_single_inconsistent_coefficient_is_refused() {
    use keycodec_core::halo2_proofs::plonk::permutation;
    use keycodec_core::halo2_proofs::poly::Polynomial;
    let pk = &dense().pk;
    let mut fixed_polys: Vec<_> = pk.fixed_polys().to_vec();
    let mut coeffs = fixed_polys[0].values().to_vec();
    coeffs[5] += Fr::from(1u64);
    fixed_polys[0] = Polynomial::new(coeffs);
    let altered = ProvingKey::from_parts(
        pk.get_vk().clone(),
        pk.l0().clone(),
        pk.l_last().clone(),
        pk.l_active_row().clone(),
        pk.fixed_values().to_vec(),
        fixed_polys,
        permutation::ProvingKey::from_parts(
            pk.permutation().permutations().to_vec(),
            pk.permutation().polys().to_vec(),
        ),
    );
    let result = CompactCodec.to_vec::<DenseCircuit, _>(&altered, ());
    assert!(
        matches!(result, Err(keycodec_core::Error::NotStorable { .. })),
        "{:?}",
        result.err()
    );
}

/// StandardPlonk's sparse columns take the sparse interpolation: a changed fixed value, a
/// changed permutation value or a changed `l_active_row` coefficient is refused too.
#[test]
fn sparse_columns_with_one_inconsistency_are_refused() {
    use keycodec_core::halo2_proofs::plonk::permutation;
    use keycodec_core::halo2_proofs::poly::Polynomial;
    let pk = &standard_plonk().pk;
    for case in 0..3 {
        let mut fixed_values: Vec<_> = pk.fixed_values().to_vec();
        let mut permutations: Vec<_> = pk.permutation().permutations().to_vec();
        let mut l_active_row = pk.l_active_row().values().to_vec();
        match case {
            0 => {
                let mut values = fixed_values[0].values().to_vec();
                values[3] += Fr::from(1u64);
                fixed_values[0] = Polynomial::new(values);
            }
            1 => {
                let mut values = permutations[1].values().to_vec();
                values[2] += Fr::from(1u64);
                permutations[1] = Polynomial::new(values);
            }
            _ => l_active_row[0] += Fr::from(1u64),
        }
        let altered = ProvingKey::from_parts(
            pk.get_vk().clone(),
            pk.l0().clone(),
            pk.l_last().clone(),
            Polynomial::new(l_active_row),
            fixed_values,
            pk.fixed_polys().to_vec(),
            permutation::ProvingKey::from_parts(permutations, pk.permutation().polys().to_vec()),
        );
        let result = CompactCodec.to_vec::<StandardPlonk, _>(&altered, ());
        assert!(
            matches!(result, Err(keycodec_core::Error::NotStorable { .. })),
            "case {case}: {:?}",
            result.err()
        );
    }
    // The unaltered key is accepted.
    assert!(CompactCodec.to_vec::<StandardPlonk, _>(pk, ()).is_ok());
}
