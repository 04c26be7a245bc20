//! Damaged files: truncations, bit flips, forged payloads behind valid checksums, trailing
//! bytes and impossible lengths are refused, and never panic a decoder.

use std::panic::{catch_unwind, AssertUnwindSafe};

use keycodec_core::header::HEADER_LEN;
use keycodec_core::{Checksum, Error, KeyCodec, KeyCodecExt, LoadOptions, Result, Validation};

use super::files::{refresh_checksums, rewrite_header, small_pk_file};
use super::Pk;
use crate::{pk_bytes, standard_plonk, StandardPlonk, STANDARD_PLONK_K};

/// Every prefix of a small proving-key file is an error: [`Error::Truncated`] from a stream,
/// and `Truncated` or [`Error::LengthMismatch`] from a slice (whose real length is known).
pub fn every_truncation_is_an_error<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let options = LoadOptions::default();
    for end in 0..file.len() {
        let prefix = &file[..end];
        let streamed = codec.read::<StandardPlonk, Pk>(&mut &prefix[..], (), &options);
        assert!(
            matches!(streamed, Err(Error::Truncated { .. })),
            "stream prefix of {end} bytes: {:?}",
            streamed.err()
        );
        let sliced = codec.read_slice::<StandardPlonk, Pk>(prefix, (), &options);
        assert!(
            matches!(
                sliced,
                Err(Error::Truncated { .. } | Error::LengthMismatch { .. })
            ),
            "slice prefix of {end} bytes: {:?}",
            sliced.err()
        );
    }
}

/// Every single-bit flip of a small proving-key file is reported as corruption (header or
/// payload checksum, magic, version): none loads.
pub fn every_bit_flip_is_detected<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let options = LoadOptions::default();
    for bit in 0..file.len() * 8 {
        let mut flipped = file.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = codec.read_slice::<StandardPlonk, Pk>(&flipped, (), &options);
        assert!(
            reported_as_corruption(&result),
            "bit {bit}: {:?}",
            result.err()
        );
    }
}

/// The same damage through [`KeyCodecExt::load`] of a file (the path real users take: for
/// buffered codecs, parallel positioned reads straight into the key): a sample of single-bit
/// flips is reported as corruption, a sample of truncations as a length error, and forged
/// bytes behind valid checksums never panic.
pub fn damaged_files_are_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("damaged.key");
    let options = LoadOptions::default();
    let load = |bytes: &[u8]| {
        std::fs::write(&path, bytes).expect("write");
        codec.load::<StandardPlonk, Pk>(&path, (), &options)
    };
    let bits = file.len() * 8;
    for bit in (0..bits).step_by((bits / 256).max(1)) {
        let mut flipped = file.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = load(&flipped);
        assert!(
            reported_as_corruption(&result),
            "bit {bit}: {:?}",
            result.err()
        );
    }
    for end in (0..file.len()).step_by((file.len() / 64).max(1)) {
        let result = load(&file[..end]);
        assert!(
            matches!(
                result,
                Err(Error::Truncated { .. } | Error::LengthMismatch { .. })
            ),
            "prefix of {end} bytes: {:?}",
            result.err()
        );
    }
    for offset in (HEADER_LEN..file.len()).step_by(((file.len() - HEADER_LEN) / 64).max(1)) {
        for value in [0x00, 0xff, 0x80] {
            let mut forged = file.clone();
            forged[offset] = value;
            refresh_checksums(&mut forged);
            // Either outcome is fine; reaching this line (no panic) is the test.
            let _ = load(&forged);
        }
    }
}

/// Whether a load of a bit-flipped file failed the way corruption must: a checksum, the
/// magic or the version (the header fields checked before its checksum).
pub fn reported_as_corruption<T>(result: &Result<T>) -> bool {
    matches!(
        result,
        Err(Error::HeaderChecksum
            | Error::PayloadChecksum { .. }
            | Error::BadMagic
            | Error::UnsupportedVersion { .. })
    )
}

/// With [`Checksum::Skip`] a payload whose recorded checksum is wrong still loads (the
/// caller vouched for it); by default the same file is refused.
pub fn skipping_the_checksum_is_explicit<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    rewrite_header(&mut file, |header| header.payload_checksum ^= 1);
    let refused = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
    assert!(
        matches!(refused, Err(Error::PayloadChecksum { .. })),
        "{:?}",
        refused.err()
    );
    let skip = LoadOptions {
        checksum: Checksum::Skip,
        ..LoadOptions::default()
    };
    let loaded = codec
        .read_slice::<StandardPlonk, Pk>(&file, (), &skip)
        .expect("skip: slice");
    assert_eq!(pk_bytes(&loaded), pk_bytes(&standard_plonk().pk));
    let streamed = codec
        .read::<StandardPlonk, Pk>(&mut file.as_slice(), (), &skip)
        .expect("skip: stream");
    assert_eq!(pk_bytes(&streamed), pk_bytes(&standard_plonk().pk));
}

/// Corruption behind a *valid* checksum (a forger's file) never panics the decoder. Flips one
/// bit in each of a spread of payload bytes and in every byte of the first 1 KiB, then fixes
/// the checksum; each load must return (an error, or a key of the right shape).
pub fn forged_corruption_never_panics<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let payload_len = file.len() - HEADER_LEN;
    let step = (payload_len / 512).max(1);
    let positions = (0..payload_len.min(1024)).chain((1024..payload_len).step_by(step));
    for validation in [Validation::Checked, Validation::Trusted] {
        let options = LoadOptions {
            validation,
            ..LoadOptions::default()
        };
        for (n, offset) in positions.clone().enumerate() {
            let mut forged = file.clone();
            forged[HEADER_LEN + offset] ^= 1 << (n % 8);
            refresh_checksums(&mut forged);
            let result = catch_unwind(AssertUnwindSafe(|| {
                codec.read_slice::<StandardPlonk, Pk>(&forged, (), &options)
            }));
            match result {
                Err(_) => panic!("decoder panicked on payload byte {offset} ({validation:?})"),
                Ok(Ok(pk)) => assert_eq!(pk.get_vk().get_domain().k(), STANDARD_PLONK_K),
                Ok(Err(_)) => {}
            }
        }
    }
}

/// Bytes after a complete container are refused (slice and file).
pub fn trailing_bytes_are_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    file.push(0);
    let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
    assert!(
        matches!(result, Err(Error::TrailingBytes { count: 1 })),
        "{:?}",
        result.err()
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trailing.pk");
    std::fs::write(&path, &file).expect("write");
    let result = codec.load::<StandardPlonk, Pk>(&path, (), &LoadOptions::default());
    assert!(
        matches!(result, Err(Error::TrailingBytes { count: 1 })),
        "{:?}",
        result.err()
    );
}

/// An empty input, or one shorter than the header, is [`Error::Truncated`]; a header with
/// wrong magic is [`Error::BadMagic`].
pub fn empty_and_short_inputs_are_truncated<K: KeyCodec + ?Sized>(codec: &K) {
    let options = LoadOptions::default();
    for input in [&[][..], &[0x89u8; 10][..], &[0u8; HEADER_LEN - 1][..]] {
        let result = codec.read_slice::<StandardPlonk, Pk>(input, (), &options);
        assert!(
            matches!(result, Err(Error::Truncated { .. })),
            "{:?}",
            result.err()
        );
    }
    let mut file = small_pk_file(codec);
    file[0] = b'P';
    let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &options);
    assert!(matches!(result, Err(Error::BadMagic)), "{:?}", result.err());
}

/// A header declaring a payload of `u64::MAX` (or just above the limit) is refused before
/// anything is allocated, from a slice and from a stream.
pub fn huge_declared_payload_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    let options = LoadOptions::default();
    rewrite_header(&mut file, |header| header.payload_len = u64::MAX);
    let sliced = codec.read_slice::<StandardPlonk, Pk>(&file, (), &options);
    assert!(
        matches!(sliced, Err(Error::LimitExceeded { .. })),
        "{:?}",
        sliced.err()
    );
    let limit = options.limits.max_payload_bytes;
    rewrite_header(&mut file, |header| header.payload_len = limit + 1);
    let streamed = codec.read::<StandardPlonk, Pk>(&mut file.as_slice(), (), &options);
    assert!(
        matches!(streamed, Err(Error::LimitExceeded { .. })),
        "{:?}",
        streamed.err()
    );
    // Within the limit but beyond the real data: a slice knows, a stream runs dry.
    rewrite_header(&mut file, |header| header.payload_len = limit);
    let sliced = codec.read_slice::<StandardPlonk, Pk>(&file, (), &options);
    assert!(
        matches!(sliced, Err(Error::LengthMismatch { .. })),
        "{:?}",
        sliced.err()
    );
    let streamed = codec.read::<StandardPlonk, Pk>(&mut file.as_slice(), (), &options);
    assert!(
        streamed.is_err(),
        "a stream shorter than its declared payload must fail"
    );
}
