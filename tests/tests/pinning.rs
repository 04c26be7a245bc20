//! Pinning against substitution: two circuits with one `configure` (and so one fingerprint)
//! and different constants. Unpinned, the other circuit's key loads (the checksum and the
//! fingerprint cannot tell them apart); pinned by digest or by `transcript_repr`, it is
//! refused. The digest is the same whatever backend stored the key.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec::{Backend, Error, KeyCodecExt, KeyDigest, LoadOptions, SaveOptions};
use keycodec_core::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_testkit::{generate, pk_bytes, DenseCircuit, Fixture};

type Pk = ProvingKey<G1Affine>;
type Vk = VerifyingKey<G1Affine>;

/// One circuit type, two instances with different fixed constants, at `k`.
fn dense(rows: usize, k: u32) -> Fixture<DenseCircuit> {
    generate(k, DenseCircuit { rows }, vec![], false)
}

#[test]
fn another_circuits_key_with_the_same_configure_is_refused_only_when_pinned() {
    let (a, b) = (dense(100, 8), dense(60, 8));
    let b_other_k = dense(60, 9);
    let digest_a = KeyDigest::of_pk(&a.pk).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let path_a = dir.path().join(format!("{backend}-a.pk"));
        let path_b = dir.path().join(format!("{backend}-b.pk"));
        let path_b9 = dir.path().join(format!("{backend}-b9.pk"));
        assert_eq!(
            codec
                .save::<DenseCircuit, _>(&path_a, &a.pk, (), &SaveOptions::default())
                .unwrap(),
            digest_a,
            "{backend}: the digest depends on the backend"
        );
        let digest_b = codec
            .save::<DenseCircuit, _>(&path_b, &b.pk, (), &SaveOptions::default())
            .unwrap();
        codec
            .save::<DenseCircuit, _>(&path_b9, &b_other_k.pk, (), &SaveOptions::default())
            .unwrap();
        assert_ne!(digest_a, digest_b);

        // Unpinned, the substitute loads: the hazard pinning exists for.
        let substitute: Pk = codec
            .load::<DenseCircuit, _>(&path_b, (), &LoadOptions::default())
            .unwrap();
        assert_eq!(pk_bytes(&substitute), pk_bytes(&b.pk));
        let other_k: Pk = codec
            .load::<DenseCircuit, _>(&path_b9, (), &LoadOptions::default())
            .unwrap();
        assert_eq!(other_k.get_vk().get_domain().k(), 9);

        let pinned = LoadOptions {
            expected_digest: Some(digest_a),
            ..LoadOptions::default()
        };
        let loaded: Pk = codec.load::<DenseCircuit, _>(&path_a, (), &pinned).unwrap();
        assert_eq!(pk_bytes(&loaded), pk_bytes(&a.pk));
        for path in [&path_b, &path_b9] {
            let refused = codec.load::<DenseCircuit, Pk>(path, (), &pinned);
            assert!(
                matches!(refused, Err(Error::DigestMismatch { .. })),
                "{backend} {}: {:?}",
                path.display(),
                refused.err()
            );
        }

        // The transcript pin a verifier carries refuses the other verifying key.
        let by_transcript = LoadOptions {
            expected_transcript: Some(a.vk().transcript_repr()),
            ..LoadOptions::default()
        };
        let refused = codec.load::<DenseCircuit, Pk>(&path_b, (), &by_transcript);
        assert!(
            matches!(refused, Err(Error::TranscriptMismatch { .. })),
            "{backend}: {:?}",
            refused.err()
        );
        codec
            .load::<DenseCircuit, Pk>(&path_a, (), &by_transcript)
            .unwrap();
    }
}

#[test]
fn verifying_keys_have_their_own_digest_and_pin() {
    let (a, b) = (dense(100, 8), dense(60, 8));
    let dir = tempfile::tempdir().unwrap();
    let vk_digest = KeyDigest::of_vk(a.vk()).unwrap();
    assert_ne!(vk_digest, KeyDigest::of_pk(&a.pk).unwrap());
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let path = dir.path().join(format!("{backend}.vk"));
        let other = dir.path().join(format!("{backend}-other.vk"));
        assert_eq!(
            codec
                .save::<DenseCircuit, _>(&path, a.vk(), (), &SaveOptions::default())
                .unwrap(),
            vk_digest
        );
        codec
            .save::<DenseCircuit, _>(&other, b.vk(), (), &SaveOptions::default())
            .unwrap();
        let pinned = LoadOptions {
            expected_digest: Some(vk_digest),
            ..LoadOptions::default()
        };
        codec.load::<DenseCircuit, Vk>(&path, (), &pinned).unwrap();
        let refused = codec.load::<DenseCircuit, Vk>(&other, (), &pinned);
        assert!(
            matches!(refused, Err(Error::DigestMismatch { .. })),
            "{backend}: {:?}",
            refused.err()
        );
    }
}
