//! Property tests: random polynomials and random keys (StandardPlonk's and a halo2-lib
//! circuit's) round-trip exactly through every backend and both field encodings; random bytes,
//! from nothing, behind a valid header or edited into one, never panic a decoder or load
//! another key.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec::Backend;
use keycodec_core::backend_api::field::{read_fr_vec, write_fr_slice, FieldEncoding};
use keycodec_core::backend_api::{PayloadReader, Validation};
use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2curves::bn256::G1Affine;
use keycodec_core::header::{Header, HEADER_LEN, MAGIC};
use keycodec_core::{KeyCodecExt, LoadOptions, SaveOptions};
use keycodec_testkit::conformance::{refresh_checksums, rewrite_header};
use keycodec_testkit::halo2_lib::Halo2LibCircuit;
use keycodec_testkit::{halo2_lib, pk_bytes, standard_plonk, StandardPlonk};
use keycodec_tests::{fr, fr_vec, with_values};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any vector of field elements (empty, one element, 0, 1, p - 1, random lengths)
    /// survives both encodings, checked and trusted, through a length-bounded reader.
    #[test]
    fn field_vectors_round_trip(values in fr_vec(300)) {
        for encoding in [FieldEncoding::Raw, FieldEncoding::Canonical] {
            let mut bytes = Vec::new();
            write_fr_slice(&mut bytes, &values, encoding).unwrap();
            prop_assert_eq!(bytes.len(), values.len() * 32);
            for validation in [Validation::Checked, Validation::Trusted] {
                let mut source = bytes.as_slice();
                let mut reader = PayloadReader::new(&mut source, bytes.len() as u64, true);
                let back = read_fr_vec(&mut reader, values.len(), encoding, validation, "test").unwrap();
                prop_assert_eq!(&back, &values);
                prop_assert_eq!(reader.remaining(), 0);
            }
        }
    }

    /// Asking for more elements than the payload holds is an error, whatever the count.
    #[test]
    fn field_vectors_never_read_past_the_payload(values in fr_vec(40), extra in 1usize..1 << 40) {
        let mut bytes = Vec::new();
        write_fr_slice(&mut bytes, &values, FieldEncoding::Raw).unwrap();
        let mut source = bytes.as_slice();
        let mut reader = PayloadReader::new(&mut source, bytes.len() as u64, true);
        let result = read_fr_vec(&mut reader, values.len() + extra, FieldEncoding::Raw, Validation::Checked, "test");
        prop_assert!(result.is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A key with random polynomial values round-trips exactly through every backend.
    #[test]
    fn random_keys_round_trip(values in proptest::collection::vec(fr(), 1..1024)) {
        let pk = with_values(&standard_plonk().pk, &values);
        for backend in Backend::compiled() {
            if backend.name() == "compact" {
                // Random polynomials are not halo2 keygen's derivations: the compact layout,
                // which recomputes them, must refuse to save rather than change the key.
                let refused = backend.codec().unwrap().to_vec::<StandardPlonk, _>(&pk, ());
                let refused_as_not_storable = matches!(refused, Err(keycodec::Error::NotStorable { .. }));
                prop_assert!(refused_as_not_storable);
                continue;
            }
            let bytes = backend.codec().unwrap().to_vec::<StandardPlonk, _>(&pk, ()).unwrap();
            let back: ProvingKey<G1Affine> = backend
                .codec()
                .unwrap()
                .read_slice::<StandardPlonk, _>(&bytes, (), &LoadOptions::default())
                .unwrap();
            prop_assert_eq!(pk_bytes(&back), pk_bytes(&pk));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// A halo2-lib key (many polynomials, each loaded in pieces by every core) with random
    /// values round-trips exactly through every backend that stores any key, from memory, a
    /// stream and a file, checked and trusted.
    #[test]
    fn random_halo2_lib_keys_round_trip(values in proptest::collection::vec(fr(), 1..1024)) {
        let fixture = halo2_lib();
        let pk = with_values(&fixture.pk, &values);
        let config = || fixture.config.clone();
        let dir = tempfile::tempdir().unwrap();
        for backend in Backend::compiled().filter(|backend| backend.name() != "compact") {
            let codec = backend.codec().unwrap();
            let bytes = codec.to_vec::<Halo2LibCircuit, _>(&pk, config()).unwrap();
            let path = dir.path().join(backend.name());
            codec.save::<Halo2LibCircuit, _>(&path, &pk, config(), &SaveOptions::default()).unwrap();
            for validation in [Validation::Checked, Validation::Trusted] {
                let options = LoadOptions { validation, ..LoadOptions::default() };
                let sliced: ProvingKey<G1Affine> = codec.read_slice::<Halo2LibCircuit, _>(&bytes, config(), &options).unwrap();
                let streamed: ProvingKey<G1Affine> = codec.read::<Halo2LibCircuit, _>(&mut bytes.as_slice(), config(), &options).unwrap();
                let loaded: ProvingKey<G1Affine> = codec.load::<Halo2LibCircuit, _>(&path, config(), &options).unwrap();
                for back in [&sliced, &streamed, &loaded] {
                    prop_assert_eq!(pk_bytes(back), pk_bytes(&pk), "{}", backend);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random payload edits behind a valid checksum (a forger's file) never panic a decoder,
    /// checked or trusted, from a slice or a stream.
    #[test]
    fn forged_payloads_never_panic(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
        for backend in Backend::compiled() {
            let codec_file = backend.codec().unwrap().to_vec::<StandardPlonk, _>(&standard_plonk().pk, ()).unwrap();
            let mut file = codec_file.clone();
            let payload = file.len() - keycodec_core::header::HEADER_LEN;
            for (index, byte) in &edits {
                file[keycodec_core::header::HEADER_LEN + index.index(payload)] = *byte;
            }
            refresh_checksums(&mut file);
            for validation in [Validation::Checked, Validation::Trusted] {
                let options = LoadOptions { validation, ..LoadOptions::default() };
                let _ = backend.codec().unwrap().read_slice::<StandardPlonk, ProvingKey<G1Affine>>(&file, (), &options);
            }
        }
    }

    /// Arbitrary bytes are never a key.
    #[test]
    fn arbitrary_bytes_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        for backend in Backend::compiled() {
            let result = backend.codec().unwrap().read_slice::<StandardPlonk, ProvingKey<G1Affine>>(&bytes, (), &LoadOptions::default());
            prop_assert!(result.is_err());
        }
    }

    /// Arbitrary bytes behind a valid header of each backend (its codec, mode, kind, k and
    /// fingerprint; the payload's length and checksum made to match them): the decoder itself
    /// meets them, past every check the container makes, and refuses them without panicking,
    /// checked or trusted.
    #[test]
    fn arbitrary_payloads_behind_valid_headers_are_refused(payload in proptest::collection::vec(any::<u8>(), 0..4096)) {
        for backend in Backend::compiled() {
            let valid = backend.codec().unwrap().to_vec::<StandardPlonk, _>(&standard_plonk().pk, ()).unwrap();
            let mut file = valid[..HEADER_LEN].to_vec();
            file.extend_from_slice(&payload);
            rewrite_header(&mut file, |header| header.payload_len = payload.len() as u64);
            refresh_checksums(&mut file);
            prop_assert!(Header::from_bytes(&file).is_ok(), "{}: the header must pass for the payload to be reached", backend);
            for validation in [Validation::Checked, Validation::Trusted] {
                let options = LoadOptions { validation, ..LoadOptions::default() };
                let result = backend.codec().unwrap().read_slice::<StandardPlonk, ProvingKey<G1Affine>>(&file, (), &options);
                prop_assert!(result.is_err(), "{} {:?}", backend, validation);
            }
        }
    }

    /// Edits to a header's fields past its magic, behind a valid header checksum, never panic
    /// and never load another key: the load is refused or is the original key.
    #[test]
    fn edited_headers_are_refused_or_the_original(edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        let original = pk_bytes(&standard_plonk().pk);
        for backend in Backend::compiled() {
            let mut file = backend.codec().unwrap().to_vec::<StandardPlonk, _>(&standard_plonk().pk, ()).unwrap();
            // The fields between the magic and the header's own checksum.
            let fields = MAGIC.len()..HEADER_LEN - 8;
            for (index, byte) in &edits {
                file[fields.start + index.index(fields.len())] = *byte;
            }
            let len = Header::len_of(&file).unwrap_or(HEADER_LEN).min(file.len());
            let checksum = xxhash_rust::xxh3::xxh3_64(&file[..len - 8]);
            file[len - 8..len].copy_from_slice(&checksum.to_le_bytes());
            for validation in [Validation::Checked, Validation::Trusted] {
                let options = LoadOptions { validation, ..LoadOptions::default() };
                if let Ok(pk) = backend.codec().unwrap().read_slice::<StandardPlonk, ProvingKey<G1Affine>>(&file, (), &options) {
                    prop_assert_eq!(pk_bytes(&pk), original.clone(), "{} {:?}", backend, validation);
                }
            }
        }
    }
}

/// The small file the forged-payload property starts from is a valid key in every backend.
#[test]
fn forged_payload_baseline_is_valid() {
    for backend in Backend::compiled() {
        let file = backend
            .codec()
            .unwrap()
            .to_vec::<StandardPlonk, _>(&standard_plonk().pk, ())
            .unwrap();
        let pk: ProvingKey<G1Affine> = backend
            .codec()
            .unwrap()
            .read_slice::<StandardPlonk, _>(&file, (), &LoadOptions::default())
            .unwrap();
        assert_eq!(pk_bytes(&pk), pk_bytes(&standard_plonk().pk));
    }
}
