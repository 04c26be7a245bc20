//! Files of something else: another circuit, codec, kind of key or `k` is refused, naming
//! what it found.

use keycodec_core::{CodecId, Error, KeyCodec, KeyCodecExt, LoadOptions};

use super::files::{rewrite_header, small_pk_file};
use super::{Pk, Vk};
use crate::{standard_plonk, LookupCircuit, StandardPlonk, STANDARD_PLONK_K};

/// A key saved for one circuit does not load as another: [`Error::CircuitMismatch`].
pub fn wrong_circuit_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let file = small_pk_file(codec);
    let result = codec.read_slice::<LookupCircuit, Pk>(&file, (), &LoadOptions::default());
    assert!(
        matches!(result, Err(Error::CircuitMismatch { .. })),
        "{:?}",
        result.err()
    );
}

/// A file naming another codec is refused with [`Error::CodecMismatch`] naming both.
pub fn wrong_codec_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    let other = CodecId::new(codec.id().byte().wrapping_add(1));
    rewrite_header(&mut file, |header| header.codec = other);
    let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
    match result {
        Err(Error::CodecMismatch {
            expected,
            expected_name,
            found,
        }) => {
            assert_eq!(expected, codec.id());
            assert_eq!(expected_name, codec.name());
            assert_eq!(found, other);
        }
        other => panic!("expected CodecMismatch, got {:?}", other.err()),
    }
}

/// A proving-key file does not load as a verifying key, nor the reverse.
pub fn wrong_kind_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let fixture = standard_plonk();
    let options = LoadOptions::default();
    let pk_file = codec
        .to_vec::<StandardPlonk, _>(&fixture.pk, ())
        .expect("encode");
    let vk_file = codec
        .to_vec::<StandardPlonk, _>(fixture.vk(), ())
        .expect("encode");
    let as_vk = codec.read_slice::<StandardPlonk, Vk>(&pk_file, (), &options);
    assert!(
        matches!(as_vk, Err(Error::KindMismatch { .. })),
        "{:?}",
        as_vk.err()
    );
    let as_pk = codec.read_slice::<StandardPlonk, Pk>(&vk_file, (), &options);
    assert!(
        matches!(as_pk, Err(Error::KindMismatch { .. })),
        "{:?}",
        as_pk.err()
    );
}

/// A caller expecting another `k` gets [`Error::KMismatch`]; a forged impossible `k` gets
/// [`Error::KOutOfRange`].
pub fn wrong_k_is_refused<K: KeyCodec + ?Sized>(codec: &K) {
    let mut file = small_pk_file(codec);
    let options = LoadOptions {
        expected_k: Some(STANDARD_PLONK_K + 1),
        ..LoadOptions::default()
    };
    let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &options);
    assert!(
        matches!(result, Err(Error::KMismatch { expected, found }) if expected == STANDARD_PLONK_K + 1 && found == STANDARD_PLONK_K),
        "{:?}",
        result.err()
    );
    for k in [0, 29, 64, u32::MAX] {
        rewrite_header(&mut file, |header| header.k = k);
        let result = codec.read_slice::<StandardPlonk, Pk>(&file, (), &LoadOptions::default());
        assert!(
            matches!(result, Err(Error::KOutOfRange { .. })),
            "k={k}: {:?}",
            result.err()
        );
    }
}
