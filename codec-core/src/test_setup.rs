//! KZG parameters made from a public seed: their toxic waste `s` is known, so anyone can
//! forge proofs for every circuit set up with them, and a verifier (or contract) generated
//! from them accepts the forgeries. They are recognised by `s_g2 = s * G2`, which does not
//! depend on `k`: recorded here for each known seed rather than multiplied by every new
//! process's first load (`docs/performance-history.md` says what that cost); the test
//! `the_recorded_points_are_the_seeds_multiples` computes them again.
//!
//! The seeds known (from halo2-lib's, snark-verifier's and the zkEVM circuits' test
//! utilities; `docs/testing.md` lists where each is used):
//!
//! - `ParamsKZG::setup(k, ChaCha20Rng::from_seed(Default::default()))`: halo2-base's
//!   `gen_srs` (and so snark-verifier-sdk's examples and tests), which writes them under the
//!   ceremony file's name `kzg_bn254_{k}.srs` when the file is missing;
//! - `s = 1` (`s_g2` is the generator): a degenerate setup.

use std::sync::OnceLock;

use halo2curves::bn256::G2Affine;
use halo2curves::serde::SerdeObject;

use crate::error::{Error, Result};
use crate::item::KzgParams;
use crate::options::TestSetup;
use crate::params::G2_RAW_BYTES;

/// A setup whose secret is public.
#[derive(Clone, Debug)]
pub struct KnownSetup {
    /// Where it comes from, as an error or a report names it.
    pub origin: &'static str,
    /// Its `s * G2`.
    pub s_g2: G2Affine,
}

/// Every setup this build recognises.
pub fn known_setups() -> &'static [KnownSetup] {
    static KNOWN: OnceLock<Vec<KnownSetup>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let recorded = |origin, s_g2: &str| {
            let bytes = crate::hex::decode::<G2_RAW_BYTES>(s_g2)?;
            let s_g2 = G2Affine::from_raw_bytes(&bytes)?;
            Some(KnownSetup { origin, s_g2 })
        };
        [
            recorded(GEN_SRS, GEN_SRS_S_G2),
            Some(KnownSetup {
                origin: "a degenerate setup with s = 1",
                s_g2: G2Affine::generator(),
            }),
        ]
        .into_iter()
        .flatten()
        .collect()
    })
}

/// halo2-base's `gen_srs`, as errors and reports name it.
const GEN_SRS: &str = "halo2-base's gen_srs: ParamsKZG::setup(k, ChaCha20Rng::from_seed([0; 32]))";

/// `s * G2` of [`GEN_SRS`], `s` the same draw as `ParamsKZG::setup`'s (`Fr::random` of the
/// generator), in halo2's `RawBytes` layout of a point.
const GEN_SRS_S_G2: &str = "c6028acf442000db193bcafb62458dfa8be0661c78d1be3827b86ead1025f604\
                            f77752bd0d0f9473b4ffd38b4dad54330c0655ab98caf32abe9786dca00c9f26\
                            2d6ff2a651a32a8d583df27a8b76fd73043de566a2113970ddd5739de5cb1516\
                            7c858b5b5a0ef256d3c5e0fb49c6b0f0b083128a5f5c4a42e34f7397d6664515";

/// The known setup `params` were made from, if any.
pub fn known_setup_of(params: &KzgParams) -> Option<&'static KnownSetup> {
    let s_g2 = params.s_g2();
    known_setups().iter().find(|known| known.s_g2 == s_g2)
}

/// The known setup whose `s_g2` ends `tail`, the last bytes of a parameters file (halo2's
/// layout ends with `s_g2`, raw or compressed; a container's payload is that layout): for
/// tools that look at a file without decoding it.
pub fn known_setup_in_tail(tail: &[u8]) -> Option<&'static KnownSetup> {
    use halo2_proofs::{SerdeCurveAffine, SerdeFormat};
    known_setups().iter().find(|known| {
        [SerdeFormat::RawBytes, SerdeFormat::Processed]
            .into_iter()
            .any(|format| {
                let mut encoded = Vec::new();
                known.s_g2.write(&mut encoded, format).is_ok() && tail.ends_with(&encoded)
            })
    })
}

/// Refuses parameters made from a known public seed, unless `test_setup` allows them (tests).
///
/// # Errors
///
/// [`Error::TestSetup`] naming the seed's origin.
pub fn refuse_test_setup(params: &KzgParams, test_setup: TestSetup) -> Result<()> {
    match known_setup_of(params) {
        Some(known) if test_setup == TestSetup::Refused => Err(Error::TestSetup {
            origin: known.origin,
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use halo2_proofs::halo2curves::ff::Field;
    use halo2curves::bn256::Fr;
    use rand_chacha::rand_core::SeedableRng;

    /// Each recorded point is its seed's `s` times the generator, computed here again.
    #[test]
    fn the_recorded_points_are_the_seeds_multiples() {
        let s = Fr::random(rand_chacha::ChaCha20Rng::from_seed([0; 32]));
        let expected = [
            (GEN_SRS, (G2Affine::generator() * s).into()),
            ("a degenerate setup with s = 1", G2Affine::generator()),
        ];
        let known: Vec<(&str, G2Affine)> = known_setups()
            .iter()
            .map(|known| (known.origin, known.s_g2))
            .collect();
        assert_eq!(known, expected);
    }

    #[test]
    fn gen_srs_parameters_are_recognised_at_every_k_and_others_are_not() {
        for k in [2, 5] {
            let gen_srs =
                KzgParams::setup(k, rand_chacha::ChaCha20Rng::from_seed(Default::default()));
            let known = known_setup_of(&gen_srs).map(|known| known.origin);
            assert!(
                known.is_some_and(|origin| origin.contains("gen_srs")),
                "{k}"
            );
            assert!(matches!(
                refuse_test_setup(&gen_srs, TestSetup::Refused),
                Err(Error::TestSetup { .. })
            ));
            assert!(refuse_test_setup(&gen_srs, TestSetup::Allowed).is_ok());
        }
        let other = KzgParams::setup(5, rand_chacha::ChaCha20Rng::from_seed([7; 32]));
        assert!(known_setup_of(&other).is_none());
        // From a file's last bytes, in both of halo2's layouts.
        let gen_srs = KzgParams::setup(3, rand_chacha::ChaCha20Rng::from_seed(Default::default()));
        for format in [
            halo2_proofs::SerdeFormat::RawBytes,
            halo2_proofs::SerdeFormat::Processed,
        ] {
            let (mut file, mut other_file) = (Vec::new(), Vec::new());
            assert!(gen_srs.write_custom(&mut file, format).is_ok());
            assert!(other.write_custom(&mut other_file, format).is_ok());
            assert!(known_setup_in_tail(&file).is_some(), "{format:?}");
            assert!(known_setup_in_tail(&other_file).is_none(), "{format:?}");
        }
    }
}
