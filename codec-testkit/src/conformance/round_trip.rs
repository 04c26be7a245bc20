//! Round trips: real keys through memory, streams and files, checked and trusted, each
//! loaded key proving against its loaded verifying key.

use halo2_proofs::plonk::Circuit;
use halo2_proofs::poly::kzg::commitment::ParamsKZG;
use halo2curves::bn256::{Bn256, Fr};
use keycodec_core::record::RecordableParams;
use keycodec_core::{KeyCodec, KeyCodecExt, LoadOptions, SaveOptions, Validation};

use super::files::leftover_temp_files;
use super::{Pk, Vk};
use crate::{halo2_lib, lookup, pk_bytes, prove_and_verify, standard_plonk, vk_bytes, Fixture};
use crate::{LookupCircuit, StandardPlonk};

fn check_fixture<K: KeyCodec + ?Sized, C: Circuit<Fr, Params = ()>>(
    codec: &K,
    fixture: &Fixture<C>,
    options: &LoadOptions,
) {
    check_keys(
        codec,
        (&fixture.params, &fixture.pk),
        &fixture.circuit,
        &fixture.instances,
        options,
    );
}

/// A key of `circuit` round-trips through memory and a stream (its verifying key alone too)
/// and proves with what was loaded.
fn check_keys<K: KeyCodec + ?Sized, C: Circuit<Fr>>(
    codec: &K,
    (params, pk): (&ParamsKZG<Bn256>, &Pk),
    circuit: &C,
    instances: &[Vec<Fr>],
    options: &LoadOptions,
) where
    C::Params: RecordableParams,
{
    let bytes = codec
        .to_vec::<C, _>(pk, circuit.params())
        .expect("encode pk");
    let loaded: Pk = codec
        .read_slice::<C, _>(&bytes, circuit.params(), options)
        .expect("decode pk");
    assert_eq!(
        pk_bytes(&loaded),
        pk_bytes(pk),
        "pk differs after round trip"
    );
    assert_eq!(
        vk_bytes(loaded.get_vk()),
        vk_bytes(pk.get_vk()),
        "embedded vk differs"
    );

    let vk_file = codec
        .to_vec::<C, _>(pk.get_vk(), circuit.params())
        .expect("encode vk");
    let loaded_vk: Vk = codec
        .read_slice::<C, _>(&vk_file, circuit.params(), options)
        .expect("decode vk");
    assert_eq!(
        vk_bytes(&loaded_vk),
        vk_bytes(pk.get_vk()),
        "vk differs after round trip"
    );

    let streamed: Pk = codec
        .read::<C, _>(&mut bytes.as_slice(), circuit.params(), options)
        .expect("read pk");
    assert_eq!(pk_bytes(&streamed), pk_bytes(pk), "streamed pk differs");

    prove_and_verify(params, &loaded, &loaded_vk, circuit, instances)
        .expect("a proof made with the loaded pk verifies against the loaded vk");
}

/// Real keys of the test circuits (StandardPlonk, a lookup circuit, a halo2-lib circuit)
/// round-trip exactly (halo2 `RawBytes` equality, transcript representation included), and a
/// proof made with the loaded proving key verifies against the loaded verifying key.
pub fn round_trip_real_keys<K: KeyCodec + ?Sized>(codec: &K) {
    check_fixture(codec, standard_plonk(), &LoadOptions::default());
    check_fixture(codec, lookup(), &LoadOptions::default());
    let fixture = halo2_lib();
    check_keys(
        codec,
        (&fixture.params, &fixture.pk),
        &fixture.prover(),
        &[],
        &LoadOptions::default(),
    );
}

/// `save` then `load` through the file system, including saving over an existing file.
pub fn round_trip_through_files<K: KeyCodec + ?Sized>(codec: &K) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("key.pk");
    let fixture = lookup();
    let plonk = standard_plonk();
    // First a different key, then the real one over it: the second save replaces the first.
    codec
        .save::<StandardPlonk, _>(&path, &plonk.pk, (), &SaveOptions::default())
        .expect("save");
    codec
        .save::<LookupCircuit, _>(&path, &fixture.pk, (), &SaveOptions::default())
        .expect("save over");
    let loaded: Pk = codec
        .load::<LookupCircuit, _>(&path, (), &LoadOptions::default())
        .expect("load");
    assert_eq!(pk_bytes(&loaded), pk_bytes(&fixture.pk));
    assert_eq!(leftover_temp_files(dir.path()), 0);
}

/// Loading with [`Validation::Trusted`] yields the same key.
pub fn trusted_mode_round_trips<K: KeyCodec + ?Sized>(codec: &K) {
    let options = LoadOptions {
        validation: Validation::Trusted,
        ..LoadOptions::default()
    };
    check_fixture(codec, standard_plonk(), &options);
}
