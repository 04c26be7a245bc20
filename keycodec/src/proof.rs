//! Proofs checked with a recorded verifying key and no circuit code: what a verifier service
//! does with a key file, its parameters, a proof and its instances.

use keycodec_core::halo2_proofs::plonk::{verify_proof, VerifyingKey};
use keycodec_core::halo2_proofs::poly::commitment::{Params as _, Verifier};
use keycodec_core::halo2_proofs::poly::kzg::commitment::KZGCommitmentScheme;
use keycodec_core::halo2_proofs::poly::kzg::msm::DualMSM;
use keycodec_core::halo2_proofs::poly::kzg::multiopen::{VerifierGWC, VerifierSHPLONK};
use keycodec_core::halo2_proofs::poly::kzg::strategy::{GuardKZG, SingleStrategy};
use keycodec_core::halo2_proofs::transcript::{Blake2bRead, Challenge255, TranscriptReadBuffer};
use keycodec_core::halo2curves::bn256::{Bn256, Fr, G1Affine};
use keycodec_core::{downsize, Error, KzgParams, Result};

use crate::location::Location;
use crate::options::{KeyOptions, KeyPin};

/// The multi-open scheme a proof was made with (its transcript is Blake2b with 255-bit
/// challenges, as halo2-lib's `gen_proof` and snark-verifier-sdk's native proofs write it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Scheme {
    /// SHPLONK: halo2-lib's `gen_proof` / `check_proof` (the default).
    #[default]
    Shplonk,
    /// GWC (`ProverGWC` / `VerifierGWC`).
    Gwc,
}

/// A verifying key, loaded from its container with the circuit its container records (no
/// circuit code) and pinned, with the parameters its proofs are checked against.
#[derive(Debug)]
pub struct ProofVerifier {
    vk: VerifyingKey<G1Affine>,
    params: KzgParams,
    scheme: Scheme,
}

impl ProofVerifier {
    /// The verifying key at `vk` (a verifying key's container or a proving key's) loaded with
    /// its record, every value checked, and refused unless it is `pin` (a record authenticates
    /// nothing: an edited gate list would make a forged proof verify); `params` fitted to its
    /// `k` (downsized when larger).
    ///
    /// # Errors
    ///
    /// Those of [`crate::read_record`] and [`crate::load_key`] (the pin's among them);
    /// [`Error::KMismatch`] for parameters smaller than the key's `k`.
    pub fn load(
        vk: impl Into<Location>,
        pin: KeyPin,
        params: KzgParams,
        scheme: Scheme,
    ) -> Result<ProofVerifier> {
        let at = vk.into();
        let record = crate::key::read_record(at.clone())?;
        let options = KeyOptions {
            pin: Some(pin),
            ..KeyOptions::default()
        };
        let vk: VerifyingKey<G1Affine> =
            crate::key::load_key::<keycodec_core::record::Recorded, _>(at, record, &options)?;
        ProofVerifier::new(vk, params, scheme)
    }

    /// A verifier of `vk`'s proofs (a key you loaded and pinned yourself) with `params`
    /// fitted to its `k` (downsized when larger).
    ///
    /// # Errors
    ///
    /// [`Error::KMismatch`] for parameters smaller than the key's `k`; a downsize's errors.
    pub fn new(
        vk: VerifyingKey<G1Affine>,
        params: KzgParams,
        scheme: Scheme,
    ) -> Result<ProofVerifier> {
        let k = vk.get_domain().k();
        let params = match params.k() {
            found if found == k => params,
            found if found > k => downsize(params, k)?,
            found => return Err(Error::KMismatch { expected: k, found }),
        };
        Ok(ProofVerifier { vk, params, scheme })
    }

    /// The verifying key.
    pub fn vk(&self) -> &VerifyingKey<G1Affine> {
        &self.vk
    }

    /// Checks `proof` (the transcript's bytes) of the circuit with `instances` (one list of
    /// values per instance column).
    ///
    /// # Errors
    ///
    /// [`Error::ProofRejected`] with halo2's reason: a proof that does not verify, instances
    /// of another count of columns or too many for the circuit, a proof cut short.
    pub fn verify(&self, proof: &[u8], instances: &[Vec<Fr>]) -> Result<()> {
        let columns: Vec<&[Fr]> = instances.iter().map(Vec::as_slice).collect();
        let mut transcript = Blake2bRead::<&[u8], G1Affine, Challenge255<G1Affine>>::init(proof);
        let verified = match self.scheme {
            Scheme::Shplonk => self.check::<VerifierSHPLONK<'_, Bn256>>(&columns, &mut transcript),
            Scheme::Gwc => self.check::<VerifierGWC<'_, Bn256>>(&columns, &mut transcript),
        };
        verified.map_err(|err| Error::ProofRejected {
            reason: format!("{err:?}"),
        })
    }

    /// halo2's `verify_proof` with the multi-open verifier `V`.
    fn check<'p, V>(
        &'p self,
        columns: &[&[Fr]],
        transcript: &mut Blake2bRead<&[u8], G1Affine, Challenge255<G1Affine>>,
    ) -> std::result::Result<(), keycodec_core::halo2_proofs::plonk::Error>
    where
        V: Verifier<
            'p,
            KZGCommitmentScheme<Bn256>,
            MSMAccumulator = DualMSM<'p, Bn256>,
            Guard = GuardKZG<'p, Bn256>,
        >,
    {
        verify_proof::<
            KZGCommitmentScheme<Bn256>,
            V,
            Challenge255<G1Affine>,
            _,
            SingleStrategy<'p, Bn256>,
        >(
            &self.params,
            &self.vk,
            SingleStrategy::new(&self.params),
            &[columns],
            transcript,
        )
    }
}
