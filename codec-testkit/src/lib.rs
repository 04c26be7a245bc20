//! Test support shared by every backend: circuits, cached key fixtures, proof checks, and
//! the conformance kit ([`conformance`], run in one line with [`crate::conformance_tests!`]).
//!
//! This module exists to assert: it panics on failure, as test code does.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    missing_docs
)]

pub mod circuits;
pub mod conformance;
pub mod halo2_lib;

use std::sync::OnceLock;

use halo2_proofs::plonk::{
    create_proof, keygen_pk, keygen_vk_custom, verify_proof, Circuit, ProvingKey, VerifyingKey,
};
use halo2_proofs::poly::commitment::ParamsProver;
use halo2_proofs::poly::kzg::commitment::{KZGCommitmentScheme, ParamsKZG};
use halo2_proofs::poly::kzg::multiopen::{ProverGWC, ProverSHPLONK, VerifierGWC};
use halo2_proofs::poly::kzg::strategy::SingleStrategy;
use halo2_proofs::transcript::{
    Blake2bRead, Blake2bWrite, Challenge255, TranscriptReadBuffer, TranscriptWriterBuffer,
};
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::{Bn256, Fr, G1Affine};
use rand::rngs::StdRng;
use rand::SeedableRng;

pub use circuits::{DenseCircuit, LookupCircuit, StandardPlonk};

/// `k` of the small `StandardPlonk` fixture (the smallest it fits in).
pub const STANDARD_PLONK_K: u32 = 4;
/// `k` of the small lookup fixture (its 16-row table plus blinding rows need 2^6).
pub const LOOKUP_K: u32 = 6;

/// A circuit instance with its parameters and keys.
pub struct Fixture<C> {
    /// The circuit, with the witness its proofs use.
    pub circuit: C,
    /// KZG parameters for `k`.
    pub params: ParamsKZG<Bn256>,
    /// The proving key (its verifying key inside).
    pub pk: ProvingKey<G1Affine>,
    /// Public inputs for a proof.
    pub instances: Vec<Vec<Fr>>,
}

impl<C> Fixture<C> {
    /// The fixture's verifying key.
    pub fn vk(&self) -> &VerifyingKey<G1Affine> {
        self.pk.get_vk()
    }
}

/// Generates a fixture: deterministic KZG setup, then halo2's own keygen.
pub fn generate<C: Circuit<Fr>>(
    k: u32,
    circuit: C,
    instances: Vec<Vec<Fr>>,
    compress_selectors: bool,
) -> Fixture<C> {
    let params = ParamsKZG::<Bn256>::setup(k, StdRng::seed_from_u64(u64::from(k)));
    let vk = keygen_vk_custom(&params, &circuit, compress_selectors).expect("keygen_vk");
    let pk = keygen_pk(&params, vk, &circuit).expect("keygen_pk");
    Fixture {
        circuit,
        params,
        pk,
        instances,
    }
}

/// The seed's `StandardPlonk` at [`STANDARD_PLONK_K`], generated once per process.
pub fn standard_plonk() -> &'static Fixture<StandardPlonk> {
    static FIXTURE: OnceLock<Fixture<StandardPlonk>> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let circuit = StandardPlonk(Fr::from(42u64));
        let instances = circuit.instances();
        generate(STANDARD_PLONK_K, circuit, instances, false)
    })
}

/// `StandardPlonk` at k = 10 (about 600 KiB in the full layouts): large enough that a load
/// takes a while, for tests that change a file during one. Generated once per process.
pub fn standard_plonk_k10() -> &'static Fixture<StandardPlonk> {
    static FIXTURE: OnceLock<Fixture<StandardPlonk>> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let circuit = StandardPlonk(Fr::from(10u64));
        let instances = circuit.instances();
        generate(10, circuit, instances, false)
    })
}

/// [`LookupCircuit`] at [`LOOKUP_K`] with selector compression, generated once per process.
pub fn lookup() -> &'static Fixture<LookupCircuit> {
    static FIXTURE: OnceLock<Fixture<LookupCircuit>> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let circuit = LookupCircuit(2);
        let instances = circuit.instances();
        generate(LOOKUP_K, circuit, instances, true)
    })
}

/// [`LookupCircuit`] at [`LOOKUP_K`] without selector compression (each selector its own
/// fixed column), generated once per process.
pub fn lookup_uncompressed() -> &'static Fixture<LookupCircuit> {
    static FIXTURE: OnceLock<Fixture<LookupCircuit>> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let circuit = LookupCircuit(3);
        let instances = circuit.instances();
        generate(LOOKUP_K, circuit, instances, false)
    })
}

/// `k` of the small halo2-lib fixture ([`halo2_lib()`]).
pub const HALO2_LIB_K: u32 = 9;
/// Advice columns of the small halo2-lib fixture.
pub const HALO2_LIB_ADVICE: usize = 3;

/// A halo2-lib key (halo2-base's `BaseCircuitBuilder`: Poseidon hashes, 64-bit range checks
/// through a lookup table, constants in a fixed column) at [`HALO2_LIB_K`], with what a proof
/// needs. Generated once per process.
pub struct Halo2LibFixture {
    /// KZG parameters for its `k`.
    pub params: ParamsKZG<Bn256>,
    /// The proving key.
    pub pk: ProvingKey<G1Affine>,
    /// The circuit's configuration: what loading the key needs.
    pub config: halo2_base::gates::circuit::BaseCircuitParams,
    break_points: halo2_base::gates::flex_gate::MultiPhaseThreadBreakPoints,
}

impl Halo2LibFixture {
    /// A circuit with witnesses for a proof with the key (the builder is not `Sync`, so
    /// each test builds its own).
    pub fn prover(&self) -> halo2_lib::Halo2LibCircuit {
        halo2_lib::halo2_lib_prover(
            self.config.clone(),
            self.break_points.clone(),
            HALO2_LIB_ADVICE,
        )
    }
}

/// The small halo2-lib fixture, generated once per process.
pub fn halo2_lib() -> &'static Halo2LibFixture {
    static FIXTURE: OnceLock<Halo2LibFixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let keygen = halo2_lib::halo2_lib_keygen(HALO2_LIB_K, HALO2_LIB_ADVICE);
        let params = ParamsKZG::<Bn256>::setup(HALO2_LIB_K, StdRng::seed_from_u64(9));
        let vk = keygen_vk_custom(&params, &keygen, false).expect("keygen_vk");
        let pk = keygen_pk(&params, vk, &keygen).expect("keygen_pk");
        Halo2LibFixture {
            params,
            pk,
            config: keygen.config_params.clone(),
            break_points: keygen.break_points(),
        }
    })
}

/// `k` of the dense fixture.
pub const DENSE_K: u32 = 8;

/// [`DenseCircuit`] at [`DENSE_K`], generated once per process.
pub fn dense() -> &'static Fixture<DenseCircuit> {
    static FIXTURE: OnceLock<Fixture<DenseCircuit>> = OnceLock::new();
    FIXTURE.get_or_init(|| generate(DENSE_K, DenseCircuit::default(), vec![], false))
}

/// halo2's own `RawBytes` serialization of a proving key: the reference for key equality
/// (it covers every polynomial and the verifying key).
pub fn pk_bytes(pk: &ProvingKey<G1Affine>) -> Vec<u8> {
    pk.to_bytes(SerdeFormat::RawBytes)
}

/// halo2's own `RawBytes` serialization of a verifying key, plus its transcript
/// representation (which hashes the pinned constraint system).
pub fn vk_bytes(vk: &VerifyingKey<G1Affine>) -> Vec<u8> {
    let mut bytes = vk.to_bytes(SerdeFormat::RawBytes);
    bytes.extend_from_slice(&encode_transcript_repr(vk));
    bytes
}

fn encode_transcript_repr(vk: &VerifyingKey<G1Affine>) -> [u8; 32] {
    use halo2_proofs::halo2curves::ff::PrimeField;
    vk.transcript_repr().to_repr()
}

/// BN254's scalar modulus r, little-endian: the smallest 32-byte value a checked decoder
/// must refuse (r + 1 and 2^256 - 1 are the other classic cases).
pub fn scalar_modulus_le() -> [u8; 32] {
    let hex = "30644e72e131a029b85045b68181585d2833e84879b9709143e1f593f0000001";
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().rev().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex");
    }
    bytes
}

/// A proof of `circuit` with `pk` and a Blake2b transcript, SHPLONK (as halo2-lib's
/// `gen_proof` makes it) or, with `gwc`, GWC: the transcript's bytes.
pub fn proof<C: Circuit<Fr>>(
    params: &ParamsKZG<Bn256>,
    pk: &ProvingKey<G1Affine>,
    circuit: &C,
    instances: &[Vec<Fr>],
    gwc: bool,
) -> Result<Vec<u8>, String> {
    if gwc {
        proof_with::<ProverGWC<'_, Bn256>, C>(params, pk, circuit, instances)
    } else {
        proof_with::<ProverSHPLONK<'_, Bn256>, C>(params, pk, circuit, instances)
    }
}

/// [`proof`] with the multi-open prover `P`.
fn proof_with<'p, P, C>(
    params: &'p ParamsKZG<Bn256>,
    pk: &ProvingKey<G1Affine>,
    circuit: &C,
    instances: &[Vec<Fr>],
) -> Result<Vec<u8>, String>
where
    P: halo2_proofs::poly::commitment::Prover<'p, KZGCommitmentScheme<Bn256>>,
    C: Circuit<Fr>,
{
    let instance_refs: Vec<&[Fr]> = instances.iter().map(Vec::as_slice).collect();
    let mut transcript = Blake2bWrite::<_, G1Affine, Challenge255<_>>::init(vec![]);
    create_proof::<KZGCommitmentScheme<Bn256>, P, _, _, _, _>(
        params,
        pk,
        std::slice::from_ref(circuit),
        &[instance_refs.as_slice()],
        StdRng::seed_from_u64(7),
        &mut transcript,
    )
    .map_err(|err| format!("create_proof: {err:?}"))?;
    Ok(transcript.finalize())
}

/// Makes a proof with `pk` and checks it against `vk`.
pub fn prove_and_verify<C: Circuit<Fr>>(
    params: &ParamsKZG<Bn256>,
    pk: &ProvingKey<G1Affine>,
    vk: &VerifyingKey<G1Affine>,
    circuit: &C,
    instances: &[Vec<Fr>],
) -> Result<(), String> {
    let instance_refs: Vec<&[Fr]> = instances.iter().map(Vec::as_slice).collect();
    let all_instances = [instance_refs.as_slice()];
    let mut transcript = Blake2bWrite::<_, G1Affine, Challenge255<_>>::init(vec![]);
    create_proof::<KZGCommitmentScheme<Bn256>, ProverGWC<'_, Bn256>, _, _, _, _>(
        params,
        pk,
        std::slice::from_ref(circuit),
        &all_instances,
        StdRng::seed_from_u64(7),
        &mut transcript,
    )
    .map_err(|err| format!("create_proof: {err:?}"))?;
    let proof = transcript.finalize();
    let verifier_params = params.verifier_params();
    let strategy = SingleStrategy::new(verifier_params);
    let mut transcript = Blake2bRead::<_, G1Affine, Challenge255<_>>::init(&proof[..]);
    verify_proof::<KZGCommitmentScheme<Bn256>, VerifierGWC<'_, Bn256>, _, _, _>(
        verifier_params,
        vk,
        strategy,
        &all_instances,
        &mut transcript,
    )
    .map(|_| ())
    .map_err(|err| format!("verify_proof: {err:?}"))
}
