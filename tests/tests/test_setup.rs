//! No test setup in production: parameters written by halo2-base's own `gen_srs` (from its
//! public seed, under the ceremony file's name `kzg_bn254_{k}.srs`) are refused by every load
//! (a halo2 file, a container, a cold start) unless the option for tests allows them; the
//! command says INSECURE. The project's own fixtures use other seeds and load.
#![cfg(feature = "rawbytes")]
// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec::{open_params, save_params, Backend, Error, KeyOptions, ParamsOptions, Start};
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::{KeyCodecExt, LoadOptions};
use keycodec_rawbytes::RawBytesCodec;
use keycodec_testkit::standard_plonk;

#[test]
fn parameters_from_gen_srs_are_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    // The one test in this binary that sets the environment: gen_srs reads PARAMS_DIR.
    std::env::set_var("PARAMS_DIR", dir.path());
    let k = 4;
    let generated = halo2_base::utils::fs::gen_srs(k);
    let file = dir.path().join(format!("kzg_bn254_{k}.srs"));
    assert!(file.exists(), "gen_srs wrote the ceremony file's name");

    let refused = open_params(&file, &ParamsOptions::default());
    let message = keycodec_tests::error_text(&refused);
    assert!(
        matches!(&refused, Err(Error::TestSetup { origin }) if origin.contains("gen_srs"))
            && message.contains("TestSetup::Allowed"),
        "{message}"
    );
    let allowed = ParamsOptions {
        test_setup: keycodec::TestSetup::Allowed,
        ..ParamsOptions::default()
    };
    let params = open_params(&file, &allowed).unwrap();
    assert_eq!(params.k(), generated.k());

    // As a container too, and straight through the codec.
    let container = dir.path().join("params.kc");
    save_params(&container, &params, Backend::RAWBYTES).unwrap();
    assert!(matches!(
        open_params(&container, &ParamsOptions::default()),
        Err(Error::TestSetup { .. })
    ));
    assert!(open_params(&container, &allowed).is_ok());
    assert!(matches!(
        RawBytesCodec::default().load_params(&container, &LoadOptions::default()),
        Err(Error::TestSetup { .. })
    ));
    assert!(RawBytesCodec::default()
        .load_params(
            &container,
            &LoadOptions {
                test_setup: keycodec::TestSetup::Allowed,
                ..LoadOptions::default()
            }
        )
        .is_ok());

    // A cold start on them fails, and generates nothing.
    let fixture = standard_plonk();
    let pk_path = dir.path().join("prover.pk");
    let start = Start {
        key_options: KeyOptions {
            backend: Some(Backend::RAWBYTES),
            ..KeyOptions::default()
        },
        ..Start::new(&file, &pk_path, k)
    }
    .run(&fixture.circuit);
    assert!(
        matches!(start, Err(Error::TestSetup { .. })),
        "{:?}",
        start.err()
    );
    assert!(!pk_path.exists());

    // The project's own fixtures (other seeds) load as ever.
    let own = dir.path().join("own.kc");
    save_params(&own, &fixture.params, Backend::RAWBYTES).unwrap();
    assert!(open_params(&own, &ParamsOptions::default()).is_ok());
}
