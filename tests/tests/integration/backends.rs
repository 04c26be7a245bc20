//! Every compiled backend, chosen by name at run time, on real keys of both test circuits.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec::{load_key, Backend, Error, KeyOptions};
use keycodec_core::halo2_proofs::plonk::{Circuit, ProvingKey, VerifyingKey};
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::{KeyCodecExt, LoadOptions, SaveOptions};
use keycodec_testkit::{lookup, pk_bytes, prove_and_verify, standard_plonk, vk_bytes, Fixture};
use keycodec_testkit::{LookupCircuit, StandardPlonk};

fn file_round_trip<C: Circuit<Fr, Params = ()>>(backend: Backend, fixture: &Fixture<C>) {
    let dir = tempfile::tempdir().unwrap();
    let pk_path = dir.path().join(format!("{backend}.pk"));
    let vk_path = dir.path().join(format!("{backend}.vk"));
    let codec = backend.codec().unwrap();
    codec
        .save::<C, _>(&pk_path, &fixture.pk, (), &SaveOptions::default())
        .unwrap();
    codec
        .save::<C, _>(&vk_path, fixture.vk(), (), &SaveOptions::default())
        .unwrap();
    assert_eq!(Backend::of_file(&pk_path).unwrap(), backend);

    let pk: ProvingKey<G1Affine> = codec
        .load::<C, _>(&pk_path, (), &LoadOptions::default())
        .unwrap();
    let vk: VerifyingKey<G1Affine> =
        load_key::<C, _>(&vk_path, (), &KeyOptions::default()).unwrap();
    assert_eq!(
        pk_bytes(&pk),
        pk_bytes(&fixture.pk),
        "{backend}: pk differs"
    );
    assert_eq!(
        vk_bytes(&vk),
        vk_bytes(fixture.vk()),
        "{backend}: vk differs"
    );
    prove_and_verify(
        &fixture.params,
        &pk,
        &vk,
        &fixture.circuit,
        &fixture.instances,
    )
    .unwrap_or_else(|err| panic!("{backend}: {err}"));
}

#[test]
fn every_backend_round_trips_standard_plonk() {
    for backend in Backend::compiled() {
        file_round_trip(backend, standard_plonk());
    }
}

#[test]
fn every_backend_round_trips_the_lookup_circuit() {
    for backend in Backend::compiled() {
        file_round_trip(backend, lookup());
    }
}

/// Every backend's files are refused by every other backend, with the codec named.
#[test]
fn a_file_from_one_backend_is_refused_by_another() {
    let pk = &standard_plonk().pk;
    for writer in Backend::compiled() {
        let bytes = writer
            .codec()
            .unwrap()
            .to_vec::<StandardPlonk, _>(pk, ())
            .unwrap();
        for reader in Backend::compiled().filter(|reader| *reader != writer) {
            let result = reader
                .codec()
                .unwrap()
                .read_slice::<StandardPlonk, ProvingKey<G1Affine>>(
                    &bytes,
                    (),
                    &LoadOptions::default(),
                );
            assert!(
                matches!(result, Err(Error::CodecMismatch { expected, found, .. }) if expected == reader.id() && found == writer.id()),
                "{writer} -> {reader}: {:?}",
                result.err()
            );
        }
    }
}

/// The same key saved by every backend loads to identical keys.
#[test]
fn all_backends_load_identical_keys() {
    let pk = &lookup().pk;
    let loaded: Vec<Vec<u8>> = Backend::compiled()
        .map(|backend| {
            let codec = backend.codec().unwrap();
            let bytes = codec.to_vec::<LookupCircuit, _>(pk, ()).unwrap();
            let back: ProvingKey<G1Affine> = codec
                .read_slice::<LookupCircuit, _>(&bytes, (), &LoadOptions::default())
                .unwrap();
            pk_bytes(&back)
        })
        .collect();
    assert!(!loaded.is_empty());
    for bytes in &loaded {
        assert_eq!(bytes, &pk_bytes(pk));
    }
}

/// `Backend::of_file` names what it cannot read.
#[test]
fn of_file_rejects_non_containers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-key");
    std::fs::write(&path, b"hello").unwrap();
    assert!(matches!(
        Backend::of_file(&path),
        Err(Error::Truncated { .. })
    ));
    std::fs::write(&path, [0u8; 100]).unwrap();
    assert!(matches!(Backend::of_file(&path), Err(Error::BadMagic)));
}

/// Backends without a layout for KZG parameters refuse to save them (and leave no file);
/// those with one round-trip them.
#[test]
fn parameters_are_stored_by_the_backends_that_have_a_layout_for_them() {
    let params = &standard_plonk().params;
    let dir = tempfile::tempdir().unwrap();
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let path = dir.path().join(format!("{backend}.params"));
        let saved = codec.save_params(&path, params, &SaveOptions::default());
        if codec.stores_params() {
            saved.unwrap();
            let loaded = codec.load_params(&path, &LoadOptions::default()).unwrap();
            let bytes = |p: &keycodec::KzgParams| {
                let mut out = Vec::new();
                p.write_custom(&mut out, keycodec_core::halo2_proofs::SerdeFormat::RawBytes)
                    .unwrap();
                out
            };
            assert_eq!(bytes(&loaded), bytes(params), "{backend}");
        } else {
            assert!(
                matches!(saved, Err(Error::KindNotSupported { .. })),
                "{backend}: {:?}",
                saved.err()
            );
            assert!(!path.exists(), "{backend} left a file");
        }
    }
}

/// `file` with its header's recorded payload checksum wrong and its payload intact.
fn relabelled(file: &[u8]) -> Vec<u8> {
    let mut file = file.to_vec();
    keycodec_testkit::conformance::rewrite_header(&mut file, |header| {
        header.payload_checksum ^= 1;
    });
    file
}

/// `file` with one bit of the byte at `at` flipped.
fn flipped(file: &[u8], at: usize) -> Vec<u8> {
    let mut file = file.to_vec();
    file[at] ^= 0x40;
    file
}

/// The middle byte of `file`'s payload.
fn payload_middle(file: &[u8]) -> usize {
    use keycodec_core::header::HEADER_LEN;
    HEADER_LEN + (file.len() - HEADER_LEN) / 2
}

/// Asserts that a load was refused as a damaged payload.
#[track_caller]
fn assert_named_damage<T>(backend: Backend, loaded: keycodec_core::Result<T>) {
    assert!(
        matches!(loaded, Err(Error::PayloadChecksum { .. })),
        "{backend}: {:?}",
        loaded.err()
    );
}

/// Parameters pinned by digest are proven by the pin: a load succeeds without the payload's
/// checksum (a header whose recorded checksum alone is wrong loads pinned, and is refused
/// unpinned), yet a damaged payload is still reported as damage, from a file and from
/// memory, and other parameters as a digest mismatch.
#[test]
fn pinned_parameters_are_proven_by_the_pin_and_damage_is_still_named() {
    let params = &standard_plonk().params;
    let dir = tempfile::tempdir().unwrap();
    let pinned = |digest| LoadOptions {
        expected_digest: Some(digest),
        ..LoadOptions::default()
    };
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        if !codec.stores_params() {
            continue;
        }
        let path = dir.path().join(format!("{backend}.params"));
        let digest = codec
            .save_params(&path, params, &SaveOptions::default())
            .unwrap();
        let good = std::fs::read(&path).unwrap();
        codec.load_params(&path, &pinned(digest)).unwrap();

        // The recorded checksum wrong, the payload intact.
        let relabelled = relabelled(&good);
        std::fs::write(&path, &relabelled).unwrap();
        let unpinned = codec.load_params(&path, &LoadOptions::default());
        assert_named_damage(backend, unpinned);
        codec.load_params(&path, &pinned(digest)).unwrap();
        codec
            .read_params_slice(&relabelled, &pinned(digest))
            .unwrap();

        // One payload byte flipped: damage, pinned or not, from a file or from memory.
        let damaged = flipped(&good, payload_middle(&good));
        std::fs::write(&path, &damaged).unwrap();
        // Trusted, as a pin opens parameters: the flipped bit decodes, the digest differs.
        let trusted = LoadOptions {
            validation: keycodec_core::Validation::Trusted,
            ..pinned(digest)
        };
        for options in [LoadOptions::default(), pinned(digest), trusted] {
            let from_file = codec.load_params(&path, &options);
            assert_named_damage(backend, from_file);
            let from_memory = codec.read_params_slice(&damaged, &options);
            assert_named_damage(backend, from_memory);
        }

        // Intact parameters that are not the pinned ones.
        std::fs::write(&path, &good).unwrap();
        let other = keycodec_core::KeyDigest([0xab; 32]);
        let refused = codec.load_params(&path, &pinned(other));
        assert!(
            matches!(refused, Err(Error::DigestMismatch { .. })),
            "{backend}: {:?}",
            refused.err()
        );
    }
}

/// Keys pinned by digest are proven by the pin, as parameters are: a proving key loads pinned
/// without its payload's checksum, checked or trusted, from a file and from memory, and so
/// does its verifying key read from its container; a stream is still hashed; a damaged
/// payload is still reported as damage (also when the transcript is pinned too), and another
/// key as a digest mismatch.
#[test]
fn pinned_keys_are_proven_by_the_pin_and_damage_is_still_named() {
    use keycodec_core::header::HEADER_LEN;
    use keycodec_core::{KeyDigest, Validation};
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let pinned = |digest, validation| LoadOptions {
        expected_digest: Some(digest),
        validation,
        ..LoadOptions::default()
    };
    let vk_digest = KeyDigest::of_vk(fixture.vk()).unwrap();
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let path = dir.path().join(format!("{backend}.pk"));
        let digest = codec
            .save::<StandardPlonk, _>(&path, &fixture.pk, (), &SaveOptions::default())
            .unwrap();
        let good = std::fs::read(&path).unwrap();
        let load = |options: &LoadOptions| {
            codec.load::<StandardPlonk, ProvingKey<G1Affine>>(&path, (), options)
        };
        let read = |bytes: &[u8], options: &LoadOptions| {
            codec.read_slice::<StandardPlonk, ProvingKey<G1Affine>>(bytes, (), options)
        };
        let load_vk =
            |options: &LoadOptions| codec.load_verifying_key::<StandardPlonk>(&path, (), options);
        let stream = |bytes: &[u8], options: &LoadOptions| {
            codec.read::<StandardPlonk, ProvingKey<G1Affine>>(&mut &bytes[..], (), options)
        };

        // The recorded checksum wrong, the payload intact.
        let relabelled = relabelled(&good);
        std::fs::write(&path, &relabelled).unwrap();
        let unpinned = load(&LoadOptions::default());
        assert_named_damage(backend, unpinned);
        for validation in [Validation::Checked, Validation::Trusted] {
            let loaded = load(&pinned(digest, validation)).unwrap();
            assert_eq!(pk_bytes(&loaded), pk_bytes(&fixture.pk), "{backend}");
            read(&relabelled, &pinned(digest, validation)).unwrap();
            load_vk(&pinned(vk_digest, validation)).unwrap();
        }
        // A stream cannot be read again to name damage: it is hashed as always.
        let streamed = stream(&relabelled, &pinned(digest, Validation::Trusted));
        assert_named_damage(backend, streamed);

        // One payload byte flipped, past the verifying key: damage, pinned or not.
        let damaged = flipped(&good, payload_middle(&good));
        std::fs::write(&path, &damaged).unwrap();
        for options in [
            LoadOptions::default(),
            pinned(digest, Validation::Checked),
            pinned(digest, Validation::Trusted),
        ] {
            let from_file = load(&options);
            assert_named_damage(backend, from_file);
            let from_memory = read(&damaged, &options);
            assert_named_damage(backend, from_memory);
            let streamed = stream(&damaged, &options);
            assert_named_damage(backend, streamed);
        }

        // One byte flipped near the payload's start, in the verifying key: damage, also for
        // the verifying key read alone.
        let early = flipped(&good, HEADER_LEN + 64);
        std::fs::write(&path, &early).unwrap();
        for validation in [Validation::Checked, Validation::Trusted] {
            let pk = load(&pinned(digest, validation));
            assert_named_damage(backend, pk);
        }
        // Read alone, the verifying key has no digest of its own in the header: its damage
        // is named when it fails to decode (checked), a digest mismatch when it decodes.
        let vk = load_vk(&pinned(vk_digest, Validation::Checked));
        assert_named_damage(backend, vk);
        let vk = load_vk(&pinned(vk_digest, Validation::Trusted));
        assert!(
            matches!(
                vk,
                Err(Error::PayloadChecksum { .. } | Error::DigestMismatch { .. })
            ),
            "{backend}: {:?}",
            vk.err()
        );
        // Pinned by transcript too: damage is still named as damage.
        let both = LoadOptions {
            expected_transcript: Some(fixture.vk().transcript_repr()),
            ..pinned(digest, Validation::Trusted)
        };
        let pk = load(&both);
        assert_named_damage(backend, pk);

        // Intact, but not the pinned key.
        std::fs::write(&path, &good).unwrap();
        let refused = load(&pinned(KeyDigest([0xab; 32]), Validation::Trusted));
        assert!(
            matches!(refused, Err(Error::DigestMismatch { .. })),
            "{backend}: {:?}",
            refused.err()
        );
    }
}

/// Counts a codec's encodings; says its encoding is costly when told to.
struct CountingEncodes<'c> {
    codec: &'c dyn keycodec_core::KeyCodec,
    costly: bool,
    encodes: std::sync::atomic::AtomicUsize,
}

impl keycodec_core::KeyCodec for CountingEncodes<'_> {
    fn name(&self) -> &'static str {
        self.codec.name()
    }
    fn id(&self) -> keycodec_core::CodecId {
        self.codec.id()
    }
    fn wire_modes(&self) -> &'static [keycodec_core::WireMode] {
        self.codec.wire_modes()
    }
    fn wire_mode(&self) -> keycodec_core::WireMode {
        self.codec.wire_mode()
    }
    fn encode(
        &self,
        key: keycodec_core::backend_api::KeyRef<'_>,
        out: &mut dyn std::io::Write,
    ) -> keycodec_core::Result<()> {
        self.encodes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.codec.encode(key, out)
    }
    fn decode(
        &self,
        input: &mut keycodec_core::backend_api::PayloadReader<'_>,
        context: &keycodec_core::backend_api::DecodeContext,
    ) -> keycodec_core::Result<keycodec_core::backend_api::Key> {
        self.codec.decode(input, context)
    }
    fn costly_encoding(&self) -> bool {
        self.costly
    }
}

/// A container written in order (to a writer that cannot seek back, as an upload is) is
/// the file's bytes whether the item is encoded once or twice: once for a costly codec
/// whose payload fits what the caller lets it keep, twice otherwise.
#[test]
fn a_container_written_in_order_encodes_a_costly_codec_once() {
    use keycodec_core::transport::{write_in_order, Described, ItemRef};
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let path = dir.path().join(format!("{backend}.pk"));
        codec
            .save::<StandardPlonk, _>(&path, &fixture.pk, (), &SaveOptions::default())
            .unwrap();
        let file = std::fs::read(&path).unwrap();
        // (costly, bytes it may keep, encodings expected)
        for (costly, keep, encodes) in
            [(true, usize::MAX, 1), (true, 64, 2), (false, usize::MAX, 2)]
        {
            let counting = CountingEncodes {
                codec,
                costly,
                encodes: 0.into(),
            };
            let mut out = Vec::new();
            let item = ItemRef::Key(keycodec_core::HaloKey::as_key_ref(&fixture.pk));
            write_in_order(
                &counting,
                item,
                &Described::of::<StandardPlonk>(()),
                &mut out,
                keep,
            )
            .unwrap();
            assert_eq!(out, file, "{backend}, costly {costly}, keep {keep}");
            assert_eq!(
                counting.encodes.into_inner(),
                encodes,
                "{backend}, costly {costly}, keep {keep}"
            );
        }
    }
}
