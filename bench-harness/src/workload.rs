//! The circuits the harness measures keys of, and what a load needs to know about each: its
//! configuration parameters (halo2-lib's `BaseCircuitParams`; nothing for the others), which
//! the fixture caches beside the key and child processes receive as JSON.

use halo2_base::gates::circuit::builder::BaseCircuitBuilder;
use halo2_proofs::plonk::Circuit;
use halo2curves::bn256::Fr;
use keycodec_testkit::halo2_lib::{halo2_lib_keygen, Halo2LibCircuit};
use keycodec_testkit::{DenseCircuit, StandardPlonk};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Advice columns of the halo2-lib workload: about what users' circuits have (a 71 MB key
/// at k = 14, doubling with each k).
pub const HALO2_LIB_ADVICE: usize = 30;

/// A circuit the harness can benchmark.
pub trait Workload: Circuit<Fr, Params: Serialize + DeserializeOwned + Clone> {
    /// Name in the report and in the cache files' names.
    const NAME: &'static str;

    /// The instance whose key is generated at `k`.
    fn keygen(k: u32) -> Self;

    /// A circuit value carrying only its configuration: what a load needs (and a cold start
    /// whose key is there, which never runs keygen).
    fn with_params(params: Self::Params) -> Self;

    /// The smallest `k` the circuit fits in.
    const MIN_K: u32 = 1;
}

/// The seed's workload: mostly zero fixed columns, a permutation close to the identity.
impl Workload for StandardPlonk {
    const NAME: &'static str = "standard-plonk";

    fn keygen(_k: u32) -> Self {
        StandardPlonk(Fr::from(42u64))
    }

    fn with_params((): ()) -> Self {
        StandardPlonk(Fr::from(42u64))
    }
}

/// The worst case for the compact layout: a full-size constant in every usable row and one
/// copy chain through every used cell.
impl Workload for DenseCircuit {
    const NAME: &'static str = "dense";

    fn keygen(k: u32) -> Self {
        let blinding =
            keycodec_core::backend_api::circuit::configure::<DenseCircuit>(()).blinding_factors();
        DenseCircuit {
            rows: (1usize << k).saturating_sub(blinding + 1),
        }
    }

    fn with_params((): ()) -> Self {
        DenseCircuit::default()
    }
}

/// Keys shaped like users': halo2-lib's builder with [`HALO2_LIB_ADVICE`] advice columns of
/// Poseidon hashes and 64-bit range checks (`keycodec_testkit::halo2_lib`).
impl Workload for Halo2LibCircuit {
    const NAME: &'static str = "halo2-lib";
    // Below, halo2-base runs out of rows for its gates beside the blinding rows.
    const MIN_K: u32 = 9;

    fn keygen(k: u32) -> Self {
        halo2_lib_keygen(k, HALO2_LIB_ADVICE)
    }

    fn with_params(params: Self::Params) -> Self {
        BaseCircuitBuilder::new(false).use_params(params)
    }
}

/// A workload's configuration as JSON (for the fixture cache and child processes).
///
/// # Errors
///
/// serde_json's, as text.
pub fn params_to_json<C: Workload>(params: &C::Params) -> Result<String, String> {
    serde_json::to_string(params).map_err(|e| e.to_string())
}

/// A workload's configuration from JSON.
///
/// # Errors
///
/// serde_json's, as text.
pub fn params_from_json<C: Workload>(json: &str) -> Result<C::Params, String> {
    serde_json::from_str(json).map_err(|e| format!("circuit configuration: {e}"))
}
