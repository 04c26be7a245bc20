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

use keycodec::halo2_proofs::plonk::{Circuit, ProvingKey, VerifyingKey};
use keycodec::halo2curves::bn256::{Fr, G1Affine};
use keycodec::{
    load_or_generate, open_params, save_key, save_params, Backend, Error, KeyDigest, KeyOptions,
    KeyPin, Keygen, KzgParams, Origin, ParamsOptions, ParamsPin, Selectors, Start,
};
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_testkit::conformance::leftover_temp_files;
use keycodec_testkit::{lookup, pk_bytes, standard_plonk, vk_bytes, LookupCircuit};

/// Parameters fitted to `k` and pinned by `pin`, points checked.
fn params_options(k: Option<u32>, pin: Option<ParamsPin>) -> ParamsOptions {
    ParamsOptions {
        k,
        pin,
        ..ParamsOptions::default()
    }
}

fn params_bytes(params: &KzgParams) -> Vec<u8> {
    let mut bytes = Vec::new();
    params
        .write_custom(&mut bytes, SerdeFormat::RawBytes)
        .unwrap();
    bytes
}

/// Key options that load and save with `backend` only.
fn with_backend(backend: Backend) -> KeyOptions {
    KeyOptions {
        backend: Some(backend),
        ..KeyOptions::default()
    }
}

/// The proving key at `path`, loaded or generated.
fn pk_at<C: Circuit<Fr, Params: keycodec::RecordableParams>>(
    path: &std::path::Path,
    params: &KzgParams,
    circuit: &C,
    options: &KeyOptions,
    keygen: &Keygen,
) -> keycodec::Result<(ProvingKey<G1Affine>, Origin)> {
    load_or_generate(path, params, circuit, options, keygen)
}

/// The verifying key at `path`, loaded or generated.
fn vk_at<C: Circuit<Fr, Params: keycodec::RecordableParams>>(
    path: &std::path::Path,
    params: &KzgParams,
    circuit: &C,
    options: &KeyOptions,
    keygen: &Keygen,
) -> keycodec::Result<(VerifyingKey<G1Affine>, Origin)> {
    load_or_generate(path, params, circuit, options, keygen)
}

/// A prover starting from `params` and `key` at `k`, loading and saving its key with rawbytes.
fn rawbytes_prover(params: &std::path::Path, key: &std::path::Path, k: u32) -> Start {
    Start {
        key_options: with_backend(Backend::RAWBYTES),
        ..Start::new(params, key, k)
    }
}

#[test]
fn a_missing_or_wrong_key_is_generated_and_a_right_one_loaded() {
    let fixture = standard_plonk();
    let keygen = Keygen::default();
    for backend in Backend::compiled() {
        let options = with_backend(backend);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("prover.pk");
        let (pk, origin) =
            pk_at(&path, &fixture.params, &fixture.circuit, &options, &keygen).unwrap();
        assert_eq!(origin, Origin::Generated, "{backend}");
        assert_eq!(
            pk_bytes(&pk),
            pk_bytes(&fixture.pk),
            "{backend}: keygen is deterministic"
        );
        assert_eq!(Backend::of_file(&path).unwrap(), backend, "saved with it");
        let (pk, origin) =
            pk_at(&path, &fixture.params, &fixture.circuit, &options, &keygen).unwrap();
        assert_eq!(origin, Origin::Loaded, "{backend}");
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));

        // Damaged, or another circuit's key: regenerated over it.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let (_, origin) =
            pk_at(&path, &fixture.params, &fixture.circuit, &options, &keygen).unwrap();
        assert_eq!(origin, Origin::Generated, "{backend}: damaged");
        save_key::<LookupCircuit, _>(&path, &lookup().pk, (), &options).unwrap();
        let (pk, origin) =
            pk_at(&path, &fixture.params, &fixture.circuit, &options, &keygen).unwrap();
        assert_eq!(origin, Origin::Generated, "{backend}: another circuit");
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
        assert_eq!(leftover_temp_files(dir.path()), 0);
    }
}

#[test]
fn a_generated_key_that_is_not_the_pinned_one_is_an_error_and_is_not_saved() {
    let fixture = standard_plonk();
    let backend = Backend::compiled().next().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prover.pk");
    let pinned = KeyOptions {
        pin: Some(KeyPin::Digest(KeyDigest([3; 32]))),
        ..with_backend(backend)
    };
    let result = pk_at(
        &path,
        &fixture.params,
        &fixture.circuit,
        &pinned,
        &Keygen::default(),
    );
    assert!(
        matches!(result, Err(Error::DigestMismatch { .. })),
        "{:?}",
        result.err()
    );
    assert!(!path.exists());
    let right = KeyOptions {
        pin: Some(KeyPin::Digest(KeyDigest::of_pk(&fixture.pk).unwrap())),
        ..with_backend(backend)
    };
    let (_, origin) = pk_at(
        &path,
        &fixture.params,
        &fixture.circuit,
        &right,
        &Keygen::default(),
    )
    .unwrap();
    assert_eq!(origin, Origin::Generated);
}

/// Eight threads start at once on one path: one generates, the others load what it saved;
/// every key is the same and the file is whole.
#[test]
fn concurrent_starts_generate_once() {
    let fixture = lookup();
    let options = with_backend(Backend::compiled().next().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.pk");
    let keygen = Keygen {
        selectors: Selectors::Compressed,
        ..Keygen::default()
    };
    let outcomes: Vec<_> = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..8)
            .map(|_| {
                scope.spawn(|| {
                    pk_at(&path, &fixture.params, &fixture.circuit, &options, &keygen).unwrap()
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
    let keygen = Keygen {
        selectors: Selectors::Compressed,
        ..Keygen::default()
    };
    let options = with_backend(Backend::compiled().next().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("verifier.vk");
    let (vk, origin) = vk_at(&path, &fixture.params, &fixture.circuit, &options, &keygen).unwrap();
    assert_eq!(origin, Origin::Generated);
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    let pk_path = dir.path().join("prover.pk");
    save_key::<LookupCircuit, _>(&pk_path, &fixture.pk, (), &options).unwrap();
    let (vk, origin) = vk_at(
        &pk_path,
        &fixture.params,
        &fixture.circuit,
        &options,
        &keygen,
    )
    .unwrap();
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
    save_params(&container, params, Backend::RAWBYTES).unwrap();
    let loaded = open_params(&container, &params_options(None, None)).unwrap();
    assert_eq!(params_bytes(&loaded), expected);
    for format in [SerdeFormat::RawBytes, SerdeFormat::Processed] {
        let path = dir.path().join(format!("kzg_bn254_{format:?}.srs"));
        let mut file = Vec::new();
        params.write_custom(&mut file, format).unwrap();
        std::fs::write(&path, &file).unwrap();
        let loaded = open_params(&path, &params_options(None, None)).unwrap();
        assert_eq!(params_bytes(&loaded), expected, "{format:?}");
        let smaller = open_params(&path, &params_options(Some(params.k() - 1), None)).unwrap();
        assert_eq!(smaller.k(), params.k() - 1);
        let mut expected_smaller = params.clone();
        expected_smaller.downsize(params.k() - 1);
        assert_eq!(params_bytes(&smaller), params_bytes(&expected_smaller));
    }
    let too_large = open_params(&container, &params_options(Some(params.k() + 1), None));
    assert!(
        matches!(too_large, Err(Error::KMismatch { .. })),
        "{:?}",
        too_large.err()
    );
    let junk = dir.path().join("junk.srs");
    std::fs::write(&junk, [4u8, 0, 0, 0, 1, 2, 3]).unwrap();
    assert!(open_params(&junk, &params_options(None, None)).is_err());
}

#[cfg(feature = "rawbytes")]
#[test]
fn a_cold_start_loads_both_or_generates_the_key() {
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let params_path = dir.path().join("params.kc");
    save_params(&params_path, &fixture.params, Backend::RAWBYTES).unwrap();
    let pk_path = dir.path().join("prover.pk");
    let k = fixture.params.k();
    let prover = rawbytes_prover(&params_path, &pk_path, k);
    let first = prover.run(&fixture.circuit).unwrap();
    assert_eq!(first.origin, Origin::Generated);
    let second = prover.run(&fixture.circuit).unwrap();
    assert_eq!(second.origin, Origin::Loaded);
    assert_eq!(pk_bytes(&second.pk), pk_bytes(&fixture.pk));
    assert_eq!(params_bytes(&second.params), params_bytes(&fixture.params));
}

/// Pins are per artifact. Two circuits with one `configure` (the dense circuit with other
/// constants) share a fingerprint: unpinned, the other circuit's key at the path loads; with
/// the key pinned, it is regenerated and saved over, and the next start loads it; the
/// parameters' pin, by their digest, lets the right ones through.
#[cfg(feature = "rawbytes")]
#[test]
fn a_pinned_cold_start_loads_the_right_key_and_regenerates_another() {
    use keycodec_testkit::circuits::DENSE_ROWS;
    use keycodec_testkit::{dense, DenseCircuit};
    let fixture = dense();
    let other_circuit = DenseCircuit {
        rows: DENSE_ROWS - 7,
    };
    let other =
        keycodec_testkit::generate(fixture.params.k(), other_circuit.clone(), vec![], false);
    assert_ne!(pk_bytes(&other.pk), pk_bytes(&fixture.pk), "another key");
    let rawbytes = with_backend(Backend::RAWBYTES);
    let dir = tempfile::tempdir().unwrap();
    let params_path = dir.path().join("params.kc");
    let params_digest = save_params(&params_path, &fixture.params, Backend::RAWBYTES).unwrap();
    let pk_path = dir.path().join("prover.pk");
    save_key::<DenseCircuit, _>(&pk_path, &other.pk, (), &rawbytes).unwrap();
    let k = fixture.params.k();

    let unpinned = rawbytes_prover(&params_path, &pk_path, k)
        .run(&fixture.circuit)
        .unwrap();
    assert_eq!(unpinned.origin, Origin::Loaded);
    assert_eq!(
        pk_bytes(&unpinned.pk),
        pk_bytes(&other.pk),
        "unpinned, the other circuit's key loads: why keys are pinned"
    );

    let pinned_key = KeyOptions {
        pin: Some(KeyPin::Digest(KeyDigest::of_pk(&fixture.pk).unwrap())),
        ..rawbytes
    };
    let pinned = Start {
        key_options: pinned_key,
        params_options: ParamsOptions {
            pin: Some(ParamsPin::Digest(params_digest)),
            ..ParamsOptions::default()
        },
        ..Start::new(&params_path, &pk_path, k)
    };
    let start = pinned.run(&fixture.circuit).unwrap();
    assert_eq!(start.origin, Origin::Generated);
    assert_eq!(pk_bytes(&start.pk), pk_bytes(&fixture.pk));
    assert_eq!(params_bytes(&start.params), params_bytes(&fixture.params));
    let again = pinned.run(&fixture.circuit).unwrap();
    assert_eq!(
        again.origin,
        Origin::Loaded,
        "the regenerated key was saved"
    );
    assert_eq!(pk_bytes(&again.pk), pk_bytes(&fixture.pk));
    assert_eq!(leftover_temp_files(dir.path()), 0);

    // load_or_generate, of a proving and of a verifying key, follows the same rule.
    save_key::<DenseCircuit, _>(&pk_path, &other.pk, (), &rawbytes).unwrap();
    let keygen = Keygen::default();
    let (_, origin) = pk_at(
        &pk_path,
        &fixture.params,
        &fixture.circuit,
        &pinned_key,
        &keygen,
    )
    .unwrap();
    assert_eq!(origin, Origin::Generated);
    let vk_pinned = KeyOptions {
        pin: Some(KeyPin::Digest(KeyDigest::of_vk(fixture.vk()).unwrap())),
        ..rawbytes
    };
    let (vk, origin) = vk_at(
        &pk_path,
        &fixture.params,
        &fixture.circuit,
        &vk_pinned,
        &keygen,
    )
    .unwrap();
    assert_eq!(
        origin,
        Origin::Loaded,
        "the verifying key from the proving key's file"
    );
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    save_key::<DenseCircuit, _>(&pk_path, &other.pk, (), &rawbytes).unwrap();
    let others = std::fs::read(&pk_path).unwrap();
    let refused = vk_at(
        &pk_path,
        &fixture.params,
        &fixture.circuit,
        &vk_pinned,
        &keygen,
    );
    // The other key's verifying key is not the pinned one; but the file is someone's proving
    // key, and a verifying key is never written over it.
    assert!(
        matches!(
            refused.as_ref().map_err(Error::cause),
            Err(Error::DigestMismatch { .. })
        ),
        "{:?}",
        refused.err()
    );
    assert_eq!(std::fs::read(&pk_path).unwrap(), others, "the file stays");
}

/// The key's pin pins the key only: a pinned start succeeds (it failed on the parameters'
/// digest before pins were per artifact).
#[cfg(feature = "rawbytes")]
#[test]
fn the_key_pin_pins_only_the_key() {
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let params_path = dir.path().join("params.kc");
    save_params(&params_path, &fixture.params, Backend::RAWBYTES).unwrap();
    let pk_path = dir.path().join("prover.pk");
    let k = fixture.params.k();
    let prover = Start {
        key_options: KeyOptions {
            pin: Some(KeyPin::Digest(KeyDigest::of_pk(&fixture.pk).unwrap())),
            ..with_backend(Backend::RAWBYTES)
        },
        ..Start::new(&params_path, &pk_path, k)
    };
    for expected in [Origin::Generated, Origin::Loaded] {
        let start = prover.run(&fixture.circuit).unwrap();
        assert_eq!(start.origin, expected);
    }
}

/// A wrong parameters pin refuses them, naming the parameters and their file: by digest
/// (a container or a halo2 file) and by the SHA-256 of halo2's file as published (checked
/// before the file is read); the right SHA-256 opens them.
#[cfg(feature = "rawbytes")]
#[test]
fn a_wrong_parameters_pin_is_refused_naming_the_file() {
    use sha2::Digest as _;
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let container = dir.path().join("params.kc");
    save_params(&container, &fixture.params, Backend::RAWBYTES).unwrap();
    let published = dir.path().join("kzg_bn254_4.srs");
    let bytes = params_bytes(&fixture.params);
    std::fs::write(&published, &bytes).unwrap();
    let wrong = ParamsPin::Digest(KeyDigest([7; 32]));
    for path in [&container, &published] {
        let refused = open_params(path, &params_options(None, Some(wrong)));
        let message = keycodec_tests::error_text(&refused);
        assert!(
            matches!(&refused, Err(Error::DigestMismatch { kind: keycodec::ArtifactKind::Params, path: Some(named), .. }) if named == path),
            "{message}"
        );
        assert!(
            message.contains("KZG parameters") && message.contains(&path.display().to_string()),
            "{message}"
        );
        let pk_path = dir.path().join("prover.pk");
        let start = Start {
            params_options: ParamsOptions {
                pin: Some(wrong),
                ..ParamsOptions::default()
            },
            ..rawbytes_prover(path, &pk_path, fixture.params.k())
        }
        .run(&fixture.circuit);
        assert!(
            matches!(start, Err(Error::DigestMismatch { .. })),
            "{:?}",
            start.err()
        );
        assert!(
            !pk_path.exists(),
            "nothing generated for refused parameters"
        );
    }
    let sha256: [u8; 32] = sha2::Sha256::digest(&bytes).into();
    let opened = open_params(
        &published,
        &params_options(None, Some(ParamsPin::Sha256(sha256))),
    )
    .unwrap();
    assert_eq!(params_bytes(&opened), bytes);
    let mut other = sha256;
    other[0] ^= 1;
    let refused = open_params(
        &published,
        &params_options(None, Some(ParamsPin::Sha256(other))),
    );
    assert!(
        matches!(&refused, Err(Error::FileHashMismatch { file, .. }) if file.contains("kzg_bn254_4.srs")),
        "{:?}",
        refused.err()
    );
}

/// A pin proves the parameters' points (`ParamsOptions::pin`): a file with a point off the
/// curve is refused when its points are checked, and opened, the same bytes, when pinned by
/// its published hash; pinned by digest, a container opens as its checked load does.
#[cfg(feature = "rawbytes")]
#[test]
fn a_pin_proves_the_parameters_points() {
    use sha2::Digest as _;
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = params_bytes(&fixture.params);
    // halo2's raw file: k (4 bytes), then 64-byte points; the low byte of g[1]'s y.
    bytes[4 + 64 + 32] ^= 1;
    let published = dir.path().join("kzg_bn254_4.srs");
    std::fs::write(&published, &bytes).unwrap();
    let checked = open_params(&published, &params_options(None, None));
    assert!(
        matches!(checked, Err(Error::InvalidPoint { .. })),
        "{:?}",
        checked.err()
    );
    let sha256: [u8; 32] = sha2::Sha256::digest(&bytes).into();
    let pinned = open_params(
        &published,
        &params_options(None, Some(ParamsPin::Sha256(sha256))),
    )
    .unwrap();
    assert_eq!(params_bytes(&pinned), bytes);

    let container = dir.path().join("params.kc");
    let digest = save_params(&container, &fixture.params, Backend::RAWBYTES).unwrap();
    let by_digest = open_params(
        &container,
        &params_options(None, Some(ParamsPin::Digest(digest))),
    )
    .unwrap();
    let by_check = open_params(&container, &params_options(None, None)).unwrap();
    assert_eq!(params_bytes(&by_digest), params_bytes(&by_check));
    assert_eq!(params_bytes(&by_digest), params_bytes(&fixture.params));
}
