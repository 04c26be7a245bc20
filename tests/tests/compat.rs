//! The drop-in for snark-verifier-sdk (`keycodec::compat`) against files written exactly as
//! snark-verifier-sdk 0.2.7's `gen_pk` writes them (its write code reproduced below: the crate
//! itself is not a dev-dependency, its build pulls in an EVM toolchain's worth of crates), on a
//! real halo2-lib circuit (halo2-base's `BaseCircuitBuilder`).
#![cfg(feature = "rawbytes")]
// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{BufWriter, ErrorKind, Write};
use std::path::Path;

use keycodec::compat::{gen_pk, read_pk};
use keycodec::{save_key, Backend, KeyOptions};
use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_testkit::halo2_lib::{halo2_lib_keygen, Halo2LibCircuit};
use keycodec_testkit::{halo2_lib, pk_bytes, prove_and_verify, HALO2_LIB_ADVICE, HALO2_LIB_K};

/// snark-verifier-sdk 0.2.7's `gen_pk` write, as it is: `File::create`, a `BufWriter`,
/// `pk.write(.., RawBytesUnchecked)`, no fsync, no rename.
fn write_as_snark_verifier_sdk(pk: &ProvingKey<G1Affine>, path: &Path) {
    let mut f = BufWriter::new(std::fs::File::create(path).unwrap());
    pk.write(&mut f, SerdeFormat::RawBytesUnchecked).unwrap();
    f.flush().unwrap();
}

#[test]
fn the_drop_in_reads_what_snark_verifier_sdk_wrote_and_regenerates_a_torn_file() {
    let fixture = halo2_lib();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("halo2-lib.pk");
    write_as_snark_verifier_sdk(&fixture.pk, &path);
    let written = std::fs::read(&path).unwrap();

    // read_pk::<C>(path, circuit.params()), as snark-verifier-sdk's: the key, and it proves.
    let pk = read_pk::<Halo2LibCircuit>(&path, fixture.config.clone()).unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    prove_and_verify(&fixture.params, &pk, pk.get_vk(), &fixture.prover(), &[]).unwrap();
    // gen_pk finds it and leaves the file as it was.
    let keygen = halo2_lib_keygen(HALO2_LIB_K, HALO2_LIB_ADVICE);
    let pk = gen_pk(&fixture.params, &keygen, Some(&path));
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    assert!(std::fs::read(&path).unwrap() == written);

    // A torn file (a gen_pk killed mid-write): an io::Error, not a panic, and gen_pk
    // regenerates it, whole.
    std::fs::write(&path, &written[..written.len() / 2]).unwrap();
    let torn = read_pk::<Halo2LibCircuit>(&path, fixture.config.clone());
    let err = torn.err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidData, "{err}");
    assert!(
        err.get_ref()
            .is_some_and(|source| source.downcast_ref::<keycodec::Error>().is_some()),
        "the io::Error carries keycodec's"
    );
    let pk = gen_pk(&fixture.params, &keygen, Some(&path));
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    let again = read_pk::<Halo2LibCircuit>(&path, fixture.config.clone()).unwrap();
    assert_eq!(pk_bytes(&again), pk_bytes(&fixture.pk));
    prove_and_verify(
        &fixture.params,
        &again,
        again.get_vk(),
        &fixture.prover(),
        &[],
    )
    .unwrap();
    // Written in the same layout snark-verifier-sdk's own read_pk reads.
    let reread = ProvingKey::<G1Affine>::read::<_, Halo2LibCircuit>(
        &mut std::io::BufReader::new(std::fs::File::open(&path).unwrap()),
        SerdeFormat::RawBytesUnchecked,
        fixture.config.clone(),
    )
    .unwrap();
    assert_eq!(pk_bytes(&reread), pk_bytes(&fixture.pk));

    // A keycodec container (any backend) reads too; a missing file is NotFound and gen_pk
    // creates it, its folder too.
    let container = dir.path().join("halo2-lib.rkyv");
    save_key::<Halo2LibCircuit, _>(
        &container,
        &fixture.pk,
        fixture.config.clone(),
        &KeyOptions {
            backend: Some(Backend::RKYV),
            ..KeyOptions::default()
        },
    )
    .unwrap();
    let pk = read_pk::<Halo2LibCircuit>(&container, fixture.config.clone()).unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    let missing = dir.path().join("keys").join("new.pk");
    assert_eq!(
        read_pk::<Halo2LibCircuit>(&missing, fixture.config.clone())
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
    gen_pk(&fixture.params, &keygen, Some(&missing));
    assert!(read_pk::<Halo2LibCircuit>(&missing, fixture.config.clone()).is_ok());
    assert_eq!(
        keycodec_testkit::conformance::leftover_temp_files(dir.path()),
        0
    );
}

#[test]
fn read_params_follows_params_dir_and_never_loads_a_test_setup() {
    use keycodec_core::halo2_proofs::poly::commitment::Params as _;
    let dir = tempfile::tempdir().unwrap();
    // The one test in this binary that sets the environment.
    std::env::set_var("PARAMS_DIR", dir.path());
    let k = 9;
    let missing = keycodec::compat::read_params(k).unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    assert!(
        !keycodec::compat::params_path(k).exists(),
        "nothing generated"
    );
    // What halo2-base's gen_srs writes there: refused.
    halo2_base::utils::fs::gen_srs(k);
    let refused = keycodec::compat::read_params(k).unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidData);
    assert!(refused.to_string().contains("public seed"), "{refused}");
    // Real parameters (here, the fixture's own seed) load.
    let mut file = Vec::new();
    halo2_lib()
        .params
        .write_custom(&mut file, SerdeFormat::RawBytes)
        .unwrap();
    std::fs::write(keycodec::compat::params_path(k), &file).unwrap();
    assert_eq!(keycodec::compat::read_params(k).unwrap().k(), k);
}
