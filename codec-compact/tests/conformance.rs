//! The core's conformance kit, plus the compact layout's own cases.

// Test code: failing loudly is its job.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use keycodec_compact::CompactCodec;

keycodec_testkit::conformance_tests!(CompactCodec);

use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_core::{Error, KeyCodecExt, LoadOptions};
use keycodec_testkit::conformance::{refresh_checksums, small_pk_file};
use keycodec_testkit::StandardPlonk;

/// StandardPlonk's copy cycle through a[2], b[3] and c[4] leaves one exception in the last
/// permutation column (row 4 maps to column 1, row 3): the payload ends with its varints
/// `gap = 4, column = 1, row = 3`. Forged to point outside the domain (row 16 of 16, column
/// 3 of 3), the file is refused.
#[test]
fn forged_permutation_index_outside_the_domain_is_refused() {
    let file = small_pk_file(&CompactCodec);
    let end = file.len();
    assert_eq!(
        &file[end - 3..],
        &[4, 1, 3],
        "the layout this test forges changed"
    );
    for (offset, value) in [(1, 16u8), (2, 3u8)] {
        let mut forged = file.clone();
        forged[end - offset] = value;
        refresh_checksums(&mut forged);
        let result = CompactCodec.read_slice::<StandardPlonk, ProvingKey<G1Affine>>(
            &forged,
            (),
            &LoadOptions::default(),
        );
        assert!(
            matches!(result, Err(Error::Malformed(_))),
            "{:?}",
            result.err()
        );
    }
}
