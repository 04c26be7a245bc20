//! Proofs of the test circuits checked with their recorded verifying keys alone
//! (`ProofVerifier`): no circuit code; wrong proofs, wrong instances and another key refused.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec::halo2_proofs::plonk::{Circuit, ProvingKey};
use keycodec::halo2curves::bn256::{Fr, G1Affine};
use keycodec::{save_key, Error, KeyOptions, KeyPin, KzgParams, ProofVerifier, Scheme};
use keycodec_testkit::halo2_lib::Halo2LibCircuit;
use keycodec_testkit::{halo2_lib, lookup, proof, standard_plonk, LookupCircuit};

/// Saves `pk`'s verifying key (with its record), proves `circuit`, and checks the proof with
/// the key's file alone, pinned by its transcript; then damage and another key.
fn verifies<C: Circuit<Fr, Params: keycodec::RecordableParams>>(
    params: &KzgParams,
    pk: &ProvingKey<G1Affine>,
    circuit: &C,
    circuit_params: C::Params,
    instances: &[Vec<Fr>],
    scheme: Scheme,
) {
    let dir = tempfile::tempdir().unwrap();
    let vk_path = dir.path().join("verifier.vk");
    save_key::<C, _>(
        &vk_path,
        pk.get_vk(),
        circuit_params,
        &KeyOptions::default(),
    )
    .unwrap();
    let proof = proof(params, pk, circuit, instances, scheme == Scheme::Gwc).unwrap();
    let pin = KeyPin::Transcript(pk.get_vk().transcript_repr());
    let verifier = ProofVerifier::load(&vk_path, pin, params.clone(), scheme).unwrap();
    verifier.verify(&proof, instances).unwrap();

    // A byte of the proof changed: refused.
    let mut forged = proof.clone();
    let middle = forged.len() / 2;
    forged[middle] ^= 1;
    let refused = verifier.verify(&forged, instances);
    assert!(
        matches!(refused, Err(Error::ProofRejected { .. })),
        "{refused:?}"
    );
    // Other instances: refused.
    if let Some(first) = instances.first().and_then(|column| column.first()) {
        let mut other = instances.to_vec();
        other[0][0] = *first + Fr::one();
        let refused = verifier.verify(&proof, &other);
        assert!(
            matches!(refused, Err(Error::ProofRejected { .. })),
            "{refused:?}"
        );
    }
    // The other scheme's verifier: refused.
    let other = if scheme == Scheme::Gwc {
        Scheme::Shplonk
    } else {
        Scheme::Gwc
    };
    let refused = ProofVerifier::load(&vk_path, pin, params.clone(), other)
        .unwrap()
        .verify(&proof, instances);
    assert!(refused.is_err());
    // Pinned to another key: refused before any proof is read.
    let refused = ProofVerifier::load(
        &vk_path,
        KeyPin::Transcript(Fr::from(7)),
        params.clone(),
        scheme,
    );
    assert!(
        matches!(refused, Err(ref err) if matches!(err.cause(), Error::TranscriptMismatch { .. })),
        "{:?}",
        refused.err()
    );
}

#[test]
fn proofs_of_every_test_circuit_verify_with_the_recorded_key_alone() {
    let plonk = standard_plonk();
    verifies(
        &plonk.params,
        &plonk.pk,
        &plonk.circuit,
        (),
        &plonk.instances,
        Scheme::Shplonk,
    );
    verifies(
        &plonk.params,
        &plonk.pk,
        &plonk.circuit,
        (),
        &plonk.instances,
        Scheme::Gwc,
    );
    let lookups = lookup();
    verifies::<LookupCircuit>(
        &lookups.params,
        &lookups.pk,
        &lookups.circuit,
        (),
        &lookups.instances,
        Scheme::Shplonk,
    );
    let lib = halo2_lib();
    verifies::<Halo2LibCircuit>(
        &lib.params,
        &lib.pk,
        &lib.prover(),
        lib.config.clone(),
        &[],
        Scheme::Shplonk,
    );
}
