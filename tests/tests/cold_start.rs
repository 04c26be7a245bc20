//! The prover's cold start: parameters from containers and halo2's files, keys loaded when
//! right and generated when not, safely under concurrent starts.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
// The parameter tests need the rawbytes backend; a build without it uses less of this file.
#![cfg_attr(not(feature = "rawbytes"), allow(unused_imports, dead_code))]

use codec_core::halo2_proofs::poly::commitment::Params as _;
use codec_core::halo2_proofs::SerdeFormat;
use codec_core::testing::conformance::leftover_temp_files;
use codec_core::testing::{lookup, pk_bytes, standard_plonk, vk_bytes, LookupCircuit};
use keycodec::start::{
    cold_start, load_or_generate_pk, load_or_generate_vk, open_params, Origin, StartOptions,
};
use keycodec::{Backend, Error, KeyCodecExt, KeyDigest, LoadOptions, Params, SaveOptions};

fn params_bytes(params: &Params) -> Vec<u8> {
    let mut bytes = Vec::new();
    params
        .write_custom(&mut bytes, SerdeFormat::RawBytes)
        .unwrap();
    bytes
}

#[test]
fn a_missing_or_wrong_key_is_generated_and_a_right_one_loaded() {
    let fixture = standard_plonk();
    let options = StartOptions::default();
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prover.pk");
        let (pk, origin) =
            load_or_generate_pk(codec, &path, &fixture.params, &fixture.circuit, &options).unwrap();
        assert_eq!(origin, Origin::Generated, "{backend}");
        assert_eq!(
            pk_bytes(&pk),
            pk_bytes(&fixture.pk),
            "{backend}: keygen is deterministic"
        );
        let (pk, origin) =
            load_or_generate_pk(codec, &path, &fixture.params, &fixture.circuit, &options).unwrap();
        assert_eq!(origin, Origin::Loaded, "{backend}");
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));

        // Damaged, or another circuit's key: regenerated over it.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let (_, origin) =
            load_or_generate_pk(codec, &path, &fixture.params, &fixture.circuit, &options).unwrap();
        assert_eq!(origin, Origin::Generated, "{backend}: damaged");
        codec
            .save::<LookupCircuit, _>(&path, &lookup().pk, (), &SaveOptions::default())
            .unwrap();
        let (pk, origin) =
            load_or_generate_pk(codec, &path, &fixture.params, &fixture.circuit, &options).unwrap();
        assert_eq!(origin, Origin::Generated, "{backend}: another circuit");
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
        assert_eq!(leftover_temp_files(dir.path()), 0);
    }
}

#[test]
fn a_generated_key_that_is_not_the_pinned_one_is_an_error_and_is_not_saved() {
    let fixture = standard_plonk();
    let codec = Backend::compiled().next().unwrap().codec().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prover.pk");
    let pinned = StartOptions {
        load: LoadOptions {
            expected_digest: Some(KeyDigest([3; 32])),
            ..LoadOptions::default()
        },
        ..StartOptions::default()
    };
    let result = load_or_generate_pk(codec, &path, &fixture.params, &fixture.circuit, &pinned);
    assert!(
        matches!(result, Err(Error::DigestMismatch { .. })),
        "{:?}",
        result.err()
    );
    assert!(!path.exists());
    let right = StartOptions {
        load: LoadOptions {
            expected_digest: Some(KeyDigest::of_pk(&fixture.pk).unwrap()),
            ..LoadOptions::default()
        },
        ..StartOptions::default()
    };
    let (_, origin) =
        load_or_generate_pk(codec, &path, &fixture.params, &fixture.circuit, &right).unwrap();
    assert_eq!(origin, Origin::Generated);
}

/// Eight threads start at once on one path: one generates, the others load what it saved;
/// every key is the same and the file is whole.
#[test]
fn concurrent_starts_generate_once() {
    let fixture = lookup();
    let codec = Backend::compiled().next().unwrap().codec().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.pk");
    let options = StartOptions {
        compress_selectors: true,
        ..StartOptions::default()
    };
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    load_or_generate_pk(codec, &path, &fixture.params, &fixture.circuit, &options)
                        .unwrap()
                })
            })
            .collect();
        starts.into_iter().map(|s| s.join().unwrap()).collect()
    });
    let generated = outcomes
        .iter()
        .filter(|(_, o)| *o == Origin::Generated)
        .count();
    assert_eq!(generated, 1, "keys generated");
    for (pk, _) in &outcomes {
        assert_eq!(pk_bytes(pk), pk_bytes(&fixture.pk));
    }
    assert_eq!(leftover_temp_files(dir.path()), 0);
}

#[test]
fn a_verifying_key_comes_from_its_file_or_a_proving_keys_or_keygen() {
    let fixture = lookup();
    let options = StartOptions {
        compress_selectors: true,
        ..StartOptions::default()
    };
    let codec = Backend::compiled().next().unwrap().codec().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("verifier.vk");
    let (vk, origin) =
        load_or_generate_vk(codec, &path, &fixture.params, &fixture.circuit, &options).unwrap();
    assert_eq!(origin, Origin::Generated);
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    let pk_path = dir.path().join("prover.pk");
    codec
        .save::<LookupCircuit, _>(&pk_path, &fixture.pk, (), &SaveOptions::default())
        .unwrap();
    let (vk, origin) =
        load_or_generate_vk(codec, &pk_path, &fixture.params, &fixture.circuit, &options).unwrap();
    assert_eq!(origin, Origin::Loaded, "from the proving key's file");
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
}

#[cfg(feature = "rawbytes")]
#[test]
fn parameters_open_from_containers_and_halo2_files_in_every_format() {
    let params = &standard_plonk().params;
    let expected = params_bytes(params);
    let dir = tempfile::tempdir().unwrap();
    let container = dir.path().join("params.kc");
    keycodec::RawBytesCodec::default()
        .save_params(&container, params, &SaveOptions::default())
        .unwrap();
    let loaded = open_params(&container, None, &LoadOptions::default()).unwrap();
    assert_eq!(params_bytes(&loaded), expected);
    for format in [SerdeFormat::RawBytes, SerdeFormat::Processed] {
        let path = dir.path().join(format!("kzg_bn254_{format:?}.srs"));
        let mut file = Vec::new();
        params.write_custom(&mut file, format).unwrap();
        std::fs::write(&path, &file).unwrap();
        let loaded = open_params(&path, None, &LoadOptions::default()).unwrap();
        assert_eq!(params_bytes(&loaded), expected, "{format:?}");
        let smaller = open_params(&path, Some(params.k() - 1), &LoadOptions::default()).unwrap();
        assert_eq!(smaller.k(), params.k() - 1);
        let mut expected_smaller = params.clone();
        expected_smaller.downsize(params.k() - 1);
        assert_eq!(params_bytes(&smaller), params_bytes(&expected_smaller));
    }
    let too_large = open_params(&container, Some(params.k() + 1), &LoadOptions::default());
    assert!(
        matches!(too_large, Err(Error::KMismatch { .. })),
        "{:?}",
        too_large.err()
    );
    let junk = dir.path().join("junk.srs");
    std::fs::write(&junk, [4u8, 0, 0, 0, 1, 2, 3]).unwrap();
    assert!(open_params(&junk, None, &LoadOptions::default()).is_err());
}

#[cfg(feature = "rawbytes")]
#[test]
fn a_cold_start_loads_both_or_generates_the_key() {
    let fixture = standard_plonk();
    let codec = keycodec::RawBytesCodec::default();
    let dir = tempfile::tempdir().unwrap();
    let params_path = dir.path().join("params.kc");
    codec
        .save_params(&params_path, &fixture.params, &SaveOptions::default())
        .unwrap();
    let pk_path = dir.path().join("prover.pk");
    let k = fixture.params.k();
    let options = StartOptions::default();
    let first = cold_start(
        &codec,
        &params_path,
        &pk_path,
        k,
        &fixture.circuit,
        &options,
    )
    .unwrap();
    assert_eq!(first.origin, Origin::Generated);
    let second = cold_start(
        &codec,
        &params_path,
        &pk_path,
        k,
        &fixture.circuit,
        &options,
    )
    .unwrap();
    assert_eq!(second.origin, Origin::Loaded);
    assert_eq!(pk_bytes(&second.pk), pk_bytes(&fixture.pk));
    assert_eq!(params_bytes(&second.params), params_bytes(&fixture.params));
}
