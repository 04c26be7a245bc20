//! KZG parameters through the rawbytes codec: containers, halo2's own files in every
//! `SerdeFormat`, damage, forgeries, pins.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_core::header::HEADER_LEN;
use keycodec_core::{
    downsize, Error, KeyCodecExt, KeyDigest, KzgParams, LoadOptions, SaveOptions, Validation,
};
use keycodec_rawbytes::RawBytesCodec;
use keycodec_testkit::conformance::refresh_checksums;
use keycodec_testkit::{standard_plonk, StandardPlonk};

const FORMATS: [SerdeFormat; 3] = [
    SerdeFormat::RawBytes,
    SerdeFormat::RawBytesUnchecked,
    SerdeFormat::Processed,
];

fn params() -> &'static KzgParams {
    &standard_plonk().params
}

fn halo2_bytes(params: &KzgParams, format: SerdeFormat) -> Vec<u8> {
    let mut bytes = Vec::new();
    params.write_custom(&mut bytes, format).unwrap();
    bytes
}

#[test]
fn parameters_round_trip_through_containers_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let expected = halo2_bytes(params(), SerdeFormat::RawBytes);
    for format in FORMATS {
        let codec = RawBytesCodec::new(format);
        let path = dir.path().join(format!("{format:?}.params"));
        let digest = codec
            .save_params(&path, params(), &SaveOptions::default())
            .unwrap();
        // The digest a save returns is the parameters' own, in every format.
        assert_eq!(
            digest,
            KeyDigest::of_params(params()).unwrap(),
            "{format:?}"
        );
        for validation in [Validation::Checked, Validation::Trusted] {
            let options = LoadOptions {
                validation,
                expected_digest: Some(digest),
                ..LoadOptions::default()
            };
            let loaded = codec.load_params(&path, &options).unwrap();
            assert_eq!(
                halo2_bytes(&loaded, SerdeFormat::RawBytes),
                expected,
                "{format:?}"
            );
            let bytes = std::fs::read(&path).unwrap();
            let sliced = codec.read_params_slice(&bytes, &options).unwrap();
            assert_eq!(halo2_bytes(&sliced, SerdeFormat::RawBytes), expected);
        }
    }
}

#[test]
fn the_payload_is_halo2s_own_file_and_halo2s_files_import() {
    for format in FORMATS {
        let codec = RawBytesCodec::new(format);
        let halo2 = halo2_bytes(params(), format);
        let mut exported = Vec::new();
        codec.export_params(params(), &mut exported).unwrap();
        assert_eq!(exported, halo2, "{format:?}");
        let container = {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p");
            codec
                .save_params(&path, params(), &SaveOptions::default())
                .unwrap();
            std::fs::read(path).unwrap()
        };
        assert_eq!(&container[HEADER_LEN..], &halo2[..]);
        let imported = codec
            .import_params(&mut halo2.as_slice(), &LoadOptions::default())
            .unwrap();
        assert_eq!(
            halo2_bytes(&imported, SerdeFormat::RawBytes),
            halo2_bytes(params(), SerdeFormat::RawBytes)
        );
        // halo2 reads what the import reads.
        let theirs = KzgParams::read_custom(&mut halo2.as_slice(), format).unwrap();
        assert_eq!(theirs.k(), imported.k());
    }
}

#[test]
fn damage_and_forgeries_are_refused() {
    let codec = RawBytesCodec::default();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p");
    codec
        .save_params(&path, params(), &SaveOptions::default())
        .unwrap();
    let file = std::fs::read(&path).unwrap();
    let options = LoadOptions::default();
    // Every truncation, and a spread of bit flips.
    for end in (0..file.len()).step_by(97) {
        assert!(
            codec.read_params_slice(&file[..end], &options).is_err(),
            "prefix {end}"
        );
    }
    for bit in (0..file.len() * 8).step_by(331) {
        let mut flipped = file.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = codec.read_params_slice(&flipped, &options);
        assert!(
            keycodec_testkit::conformance::reported_as_corruption(&result),
            "bit {bit}: {:?}",
            result.err()
        );
    }
    // A point moved off the curve behind valid checksums: checked refuses it.
    let mut forged = file.clone();
    forged[HEADER_LEN + 4 + 5 * 64 + 33] ^= 0x10;
    refresh_checksums(&mut forged);
    assert!(matches!(
        codec.read_params_slice(&forged, &options),
        Err(Error::InvalidPoint { .. })
    ));
    // A key is not parameters, and parameters are not a key.
    let pk_file = codec
        .to_vec::<StandardPlonk, _>(&standard_plonk().pk, ())
        .unwrap();
    assert!(matches!(
        codec.read_params_slice(&pk_file, &options),
        Err(Error::KindMismatch { .. })
    ));
    assert!(matches!(
        codec.read_slice::<StandardPlonk, ProvingKey<G1Affine>>(&file, (), &options),
        Err(Error::KindMismatch { .. })
    ));
    // A pin refuses other parameters.
    let pinned = LoadOptions {
        expected_digest: Some(KeyDigest([7; 32])),
        ..LoadOptions::default()
    };
    assert!(matches!(
        codec.read_params_slice(&file, &pinned),
        Err(Error::DigestMismatch { .. })
    ));
}

/// A headerless file claiming a large `k`: past the limit, refused by `k`; within it, by the
/// data ending (what it allocates meanwhile is measured in `tests/tests/bounded_memory.rs`).
#[test]
fn a_headerless_file_claiming_a_large_k_is_refused() {
    let codec = RawBytesCodec::default();
    let mut halo2 = halo2_bytes(params(), SerdeFormat::RawBytes);
    for k in [26u32, 31, 32, u32::MAX] {
        halo2[..4].copy_from_slice(&k.to_le_bytes());
        let result = codec.import_params(&mut halo2.as_slice(), &LoadOptions::default());
        let expected = if k <= 28 {
            matches!(result, Err(Error::Truncated { .. }))
        } else {
            matches!(result, Err(Error::KOutOfRange { .. }))
        };
        assert!(expected, "k {k}: {:?}", result.err());
    }
}

#[test]
fn downsizing_serves_smaller_circuits() {
    let params = params().clone();
    let k = params.k();
    let smaller = downsize(params, k - 1).unwrap();
    assert_eq!(smaller.k(), k - 1);
    assert_eq!(smaller.n(), 1 << (k - 1));
}
