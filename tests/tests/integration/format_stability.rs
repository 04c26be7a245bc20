//! The committed corpus was written by earlier builds (`*-v1-*`: container version 1, before
//! the key digest; `*-v2-*`: version 2, before the writer's versions; the rest version 3):
//! every file still loads, to exactly the keys the test fixtures generate (keygen is
//! deterministic). A change to any backend's file format fails here.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use keycodec::Backend;
use keycodec_core::halo2_proofs::plonk::{Circuit, ProvingKey, VerifyingKey};
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::header::{Header, HEADER_LEN};
use keycodec_core::{KeyCodec, KeyCodecExt, LoadOptions};
use keycodec_testkit::{lookup, lookup_uncompressed, pk_bytes, standard_plonk, vk_bytes, Fixture};
use keycodec_tests::fuzz::corpus;

fn check<C: Circuit<Fr, Params = ()>>(
    name: &str,
    codec: &dyn KeyCodec,
    bytes: &[u8],
    fixture: &Fixture<C>,
) {
    let options = LoadOptions::default();
    if name.ends_with(".pk") {
        let pk: ProvingKey<G1Affine> = codec
            .read_slice::<C, _>(bytes, (), &options)
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk), "{name}");
    } else {
        let vk: VerifyingKey<G1Affine> = codec
            .read_slice::<C, _>(bytes, (), &options)
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()), "{name}");
    }
}

#[test]
fn every_corpus_container_loads_as_the_key_it_was_written_from() {
    let mut checked = 0;
    // (backend, header length) of every container checked: each backend's files of every
    // older version must be there and parse, or the test fails.
    let mut versions = std::collections::BTreeSet::new();
    for (name, bytes) in corpus() {
        if !bytes.starts_with(&keycodec_core::header::MAGIC) {
            assert!(
                name.starts_with("halo2-headerless"),
                "{name}: not a container"
            );
            continue; // the headerless halo2 file: see the next test
        }
        let head = &bytes[..HEADER_LEN.min(bytes.len())];
        let header = Header::from_bytes(head).unwrap_or_else(|err| panic!("{name}: {err}"));
        let header_len = Header::len_of(head).unwrap();
        let backend = Backend::of_id(header.codec).unwrap_or_else(|| panic!("{name}: codec"));
        let Ok(codec) = backend.codec() else {
            continue; // compiled out of this build
        };
        assert!(
            name.starts_with(backend.name()),
            "{name} is a {backend} file"
        );
        let named = if name.contains("-v1-") {
            keycodec_core::header::HEADER_LEN_V1
        } else if name.contains("-v2-") {
            keycodec_core::header::HEADER_LEN_V2
        } else {
            HEADER_LEN
        };
        assert_eq!(
            named, header_len,
            "{name}: its name and its header's version agree"
        );
        versions.insert((backend.name(), header_len));
        if name.contains("standard-plonk") {
            check(&name, codec, &bytes, standard_plonk());
        } else if name.contains("lookup-uncompressed") {
            check(&name, codec, &bytes, lookup_uncompressed());
        } else {
            check(&name, codec, &bytes, lookup());
        }
        checked += 1;
    }
    for backend in Backend::compiled() {
        for len in [
            keycodec_core::header::HEADER_LEN_V1,
            keycodec_core::header::HEADER_LEN_V2,
            HEADER_LEN,
        ] {
            assert!(
                versions.contains(&(backend.name(), len)),
                "{backend}: no {len}-byte-header file in the corpus was checked"
            );
        }
    }
    assert!(
        checked >= Backend::compiled().count() * 6,
        "{checked} files"
    );
}

#[cfg(feature = "rawbytes")]
#[test]
fn the_headerless_halo2_file_imports() {
    use keycodec_testkit::StandardPlonk;
    let (name, bytes) = corpus()
        .into_iter()
        .find(|(name, _)| name.starts_with("halo2-headerless"))
        .expect("the headerless corpus file");
    let pk: ProvingKey<G1Affine> = keycodec_rawbytes::RawBytesCodec::default()
        .import::<StandardPlonk, _>(&mut bytes.as_slice(), (), &LoadOptions::default())
        .unwrap_or_else(|err| panic!("{name}: {err}"));
    assert_eq!(pk_bytes(&pk), pk_bytes(&standard_plonk().pk));
}
