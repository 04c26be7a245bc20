//! serde mirrors of the key's data: borrowed for writing, owned for reading.

use keycodec_core::backend_api::{DecodeContext, PkParts, Result, VkParts};
use keycodec_core::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use serde::{Deserialize, Serialize};

use crate::scalars::{Scalars, ScalarsRef};

/// The verifying key's data. Selectors are packed 8 per byte, as halo2 stores them.
#[derive(Serialize)]
pub(crate) struct VkRef {
    k: u32,
    compress_selectors: bool,
    fixed_commitments: Vec<G1Affine>,
    permutation_commitments: Vec<G1Affine>,
    selectors: Vec<Vec<u8>>,
}

impl VkRef {
    pub(crate) fn of(vk: &VerifyingKey<G1Affine>) -> Result<Self> {
        let parts = VkParts::of(vk)?;
        Ok(VkRef {
            k: parts.k,
            compress_selectors: parts.compress_selectors,
            fixed_commitments: parts.fixed_commitments,
            permutation_commitments: parts.permutation_commitments,
            selectors: parts.selectors,
        })
    }
}

/// The proving key's data, every polynomial borrowed.
#[derive(Serialize)]
pub(crate) struct PkRef<'a> {
    vk: VkRef,
    l0: ScalarsRef<'a>,
    l_last: ScalarsRef<'a>,
    l_active_row: ScalarsRef<'a>,
    fixed_values: Vec<ScalarsRef<'a>>,
    fixed_polys: Vec<ScalarsRef<'a>>,
    permutation_values: Vec<ScalarsRef<'a>>,
    permutation_polys: Vec<ScalarsRef<'a>>,
}

impl<'a> PkRef<'a> {
    pub(crate) fn of(vk: VkRef, pk: &'a ProvingKey<G1Affine>) -> Self {
        let permutation = pk.permutation();
        PkRef {
            vk,
            l0: ScalarsRef(pk.l0().values()),
            l_last: ScalarsRef(pk.l_last().values()),
            l_active_row: ScalarsRef(pk.l_active_row().values()),
            fixed_values: borrow_all(pk.fixed_values().iter().map(|p| p.values())),
            fixed_polys: borrow_all(pk.fixed_polys().iter().map(|p| p.values())),
            permutation_values: borrow_all(permutation.permutations().iter().map(|p| p.values())),
            permutation_polys: borrow_all(permutation.polys().iter().map(|p| p.values())),
        }
    }
}

fn borrow_all<'a>(polys: impl Iterator<Item = &'a [Fr]>) -> Vec<ScalarsRef<'a>> {
    polys.map(ScalarsRef).collect()
}

/// The verifying key's data as decoded (same field order as [`VkRef`]).
#[derive(Deserialize)]
pub(crate) struct VkOwned {
    k: u32,
    compress_selectors: bool,
    fixed_commitments: Vec<G1Affine>,
    permutation_commitments: Vec<G1Affine>,
    selectors: Vec<Vec<u8>>,
}

impl VkOwned {
    /// Checks `k`; the circuit checks happen on assembly.
    pub(crate) fn into_parts(self, context: &DecodeContext) -> Result<VkParts> {
        context.check_payload_k(self.k)?;
        Ok(VkParts {
            k: self.k,
            compress_selectors: self.compress_selectors,
            fixed_commitments: self.fixed_commitments,
            permutation_commitments: self.permutation_commitments,
            selectors: self.selectors,
        })
    }
}

/// The proving key's data as decoded (same field order as [`PkRef`]).
#[derive(Deserialize)]
pub(crate) struct PkOwned {
    vk: VkOwned,
    l0: Scalars,
    l_last: Scalars,
    l_active_row: Scalars,
    fixed_values: Vec<Scalars>,
    fixed_polys: Vec<Scalars>,
    permutation_values: Vec<Scalars>,
    permutation_polys: Vec<Scalars>,
}

impl PkOwned {
    pub(crate) fn into_parts(self, context: &DecodeContext) -> Result<(VkParts, PkParts)> {
        let vk = self.vk.into_parts(context)?;
        let pk = PkParts {
            l0: self.l0.0,
            l_last: self.l_last.0,
            l_active_row: self.l_active_row.0,
            fixed_values: unwrap_all(self.fixed_values),
            fixed_polys: unwrap_all(self.fixed_polys),
            permutation_values: unwrap_all(self.permutation_values),
            permutation_polys: unwrap_all(self.permutation_polys),
        };
        Ok((vk, pk))
    }
}

fn unwrap_all(polys: Vec<Scalars>) -> Vec<Vec<Fr>> {
    polys.into_iter().map(|p| p.0).collect()
}
