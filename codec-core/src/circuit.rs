//! What identifies a circuit and bounds its size: its constraint system, its fingerprint,
//! and the rules for `k` and counts every decoder checks before it allocates.

use halo2_proofs::plonk::{Circuit, ConstraintSystem};
use halo2curves::bn256::Fr;

use crate::error::{Error, Result};
use crate::ids::Fingerprint;
use crate::options::{Limits, MAX_K};
use crate::xxh3::xxh3_128;

/// Runs the circuit's `configure_with_params` on a fresh constraint system, as halo2's key
/// readers do.
pub fn configure<C: Circuit<Fr>>(circuit_params: C::Params) -> ConstraintSystem<Fr> {
    let mut cs = ConstraintSystem::default();
    let _config = C::configure_with_params(&mut cs, circuit_params);
    cs
}

/// The fingerprint of a configured constraint system (before selectors are turned into
/// fixed columns): a hash of the `Debug` form of its pinned representation.
pub(crate) fn fingerprint_of(cs: &ConstraintSystem<Fr>) -> Fingerprint {
    let pinned = format!("{:?}", cs.pinned());
    Fingerprint(xxh3_128(pinned.as_bytes()).to_le_bytes())
}

/// The fingerprint of circuit type `C` configured with `circuit_params`.
pub fn fingerprint<C: Circuit<Fr>>(circuit_params: C::Params) -> Fingerprint {
    fingerprint_of(&configure::<C>(circuit_params))
}

/// Checks `k` against the field's two-adicity and the caller's limit.
///
/// # Errors
///
/// [`Error::KOutOfRange`] when `k` is 0 or above `min(limits.max_k, 28)`.
pub(crate) fn check_k(k: u32, limits: &Limits) -> Result<()> {
    let max = limits.max_k.min(MAX_K);
    if k == 0 || k > max {
        return Err(Error::KOutOfRange { k, max });
    }
    Ok(())
}

/// Number of rows, `2^k`, for a `k` already checked against the limits (at most 28).
pub fn rows(k: u32) -> usize {
    1usize << k.min(MAX_K)
}

/// Fails with [`Error::Structure`] unless `found == expected`.
///
/// # Errors
///
/// [`Error::Structure`] naming `what`.
pub fn expect_count(what: &'static str, expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::Structure {
            what,
            expected: expected as u64,
            found: found as u64,
        })
    }
}

/// How many selector vectors a verifying key of `cs` stores: one per selector when
/// `compress_selectors` is set, none otherwise.
pub(crate) fn stored_selector_count(cs: &ConstraintSystem<Fr>, compress_selectors: bool) -> usize {
    if compress_selectors {
        cs.num_selectors()
    } else {
        0
    }
}

/// Number of permutation columns of the circuit.
pub(crate) fn permutation_columns(cs: &ConstraintSystem<Fr>) -> usize {
    cs.permutation().get_columns().len()
}
