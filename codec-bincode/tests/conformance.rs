//! The core's conformance kit, plus bincode-specific adversarial cases.

// Test code: failing loudly is its job.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use keycodec_bincode::BincodeCodec;

keycodec_testkit::conformance_tests!(BincodeCodec);

use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_core::header::HEADER_LEN;
use keycodec_core::{Error, KeyCodecExt, LoadOptions};
use keycodec_testkit::conformance::{refresh_checksums, small_pk_file};
use keycodec_testkit::StandardPlonk;

/// Offset of l0 in the payload: after k (4), the flag (1), the two point vectors (8-byte
/// length + 32 bytes per compressed point) and the selector list (8). l0 starts with its
/// chunk count (8), then the first chunk's byte length (8).
fn l0_len_offset() -> usize {
    let vk = standard_plonk_vk_counts();
    4 + 1 + (8 + 32 * vk.0) + (8 + 32 * vk.1) + 8
}

fn standard_plonk_vk_counts() -> (usize, usize) {
    let vk = keycodec_testkit::standard_plonk().vk();
    (
        vk.fixed_commitments().len(),
        vk.permutation().commitments().len(),
    )
}

/// The last polynomial chunk's length prefix forged to u64::MAX (and other huge values) in a
/// tiny file: bincode checks it against the byte limit first; nothing of the declared size
/// is allocated (the test would abort on OOM otherwise).
#[test]
fn forged_vector_length_is_refused_without_allocating() {
    let mut file = small_pk_file(&BincodeCodec);
    let rows = 1usize << keycodec_testkit::STANDARD_PLONK_K;
    let offset = file.len() - rows * 32 - 8;
    assert_eq!(file[offset..offset + 8], (rows as u64 * 32).to_le_bytes());
    for forged in [u64::MAX, u64::from(u32::MAX), 1 << 40] {
        file[offset..offset + 8].copy_from_slice(&forged.to_le_bytes());
        refresh_checksums(&mut file);
        let result = BincodeCodec.read_slice::<StandardPlonk, ProvingKey<G1Affine>>(
            &file,
            (),
            &LoadOptions::default(),
        );
        assert!(
            matches!(result, Err(Error::Truncated { .. })),
            "{forged}: {:?}",
            result.err()
        );
    }
}

/// A scalar whose canonical bytes are not below the modulus is refused by halo2curves'
/// `Deserialize`, reported as a bincode backend error.
#[test]
fn non_canonical_scalar_is_refused() {
    let mut file = small_pk_file(&BincodeCodec);
    let offset = HEADER_LEN + l0_len_offset() + 16;
    file[offset..offset + 32].fill(0xff);
    refresh_checksums(&mut file);
    let result = BincodeCodec.read_slice::<StandardPlonk, ProvingKey<G1Affine>>(
        &file,
        (),
        &LoadOptions::default(),
    );
    assert!(
        matches!(
            result,
            Err(Error::Backend {
                codec: "bincode",
                ..
            })
        ),
        "{:?}",
        result.err()
    );
}
