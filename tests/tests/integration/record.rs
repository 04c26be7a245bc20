//! A circuit's record: every test circuit's constraint system recorded and replayed equal (its
//! pinned form, what keys and fingerprints hash), its keys loaded with `Recorded` and no
//! circuit code, byte for byte; damaged or edited records refused.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use halo2_base::gates::circuit::BaseCircuitParams;
use keycodec::{load_key, read_record, save_key, Backend, KeyOptions, KeyPin};
use keycodec_core::backend_api::circuit::configure;
use keycodec_core::halo2_proofs::circuit::{Layouter, SimpleFloorPlanner};
use keycodec_core::halo2_proofs::plonk::{
    Circuit, ConstraintSystem, Error as PlonkError, FirstPhase, ProvingKey, SecondPhase,
    VerifyingKey,
};
use keycodec_core::halo2_proofs::poly::Rotation;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::header::{Header, HEADER_LEN};
use keycodec_core::record::{CircuitRecord, RecordableParams, Recorded};
use keycodec_core::{Error, KeyCodecExt, LoadOptions, SaveOptions};
use keycodec_testkit::halo2_lib::Halo2LibCircuit;
use keycodec_testkit::{
    dense, halo2_lib, lookup, lookup_uncompressed, pk_bytes, standard_plonk, vk_bytes,
    DenseCircuit, LookupCircuit, StandardPlonk,
};

/// The record of `C`'s constraint system, through its bytes, checked to replay equal.
fn recorded<C: Circuit<Fr>>(circuit_params: C::Params) -> CircuitRecord {
    let cs = configure::<C>(circuit_params);
    let record = CircuitRecord::of(&cs)
        .unwrap_or_else(|err| panic!("{}: {err}", std::any::type_name::<C>()));
    let back = CircuitRecord::from_bytes(&record.to_bytes()).unwrap();
    assert_eq!(back, record);
    assert_eq!(
        format!("{:?}", back.replay().pinned()),
        format!("{:?}", cs.pinned())
    );
    back
}

/// A circuit with what the kit's circuits lack: advice in two phases, a challenge, an
/// instance column, complex selectors, a lookup of expressions, constants, a minimum degree,
/// equality enabled between gates, and cells queried in another order than the expressions
/// use them. Configured only (no key).
#[derive(Clone, Default)]
struct Phased;

impl Circuit<Fr> for Phased {
    type Config = ();
    type FloorPlanner = SimpleFloorPlanner;
    type Params = ();

    fn without_witnesses(&self) -> Self {
        Phased
    }

    fn configure(meta: &mut ConstraintSystem<Fr>) {
        let a = meta.advice_column();
        let b = meta.advice_column();
        let constants = meta.fixed_column();
        meta.enable_constant(constants);
        let challenge = meta.challenge_usable_after(FirstPhase);
        let c = meta.advice_column_in(SecondPhase);
        let instance = meta.instance_column();
        let table = meta.fixed_column();
        let s = meta.complex_selector();
        let t = meta.selector();
        meta.enable_equality(b);
        meta.create_gate("mixed", |cells| {
            let next = cells.query_advice(a, Rotation::next());
            let c = cells.query_advice(c, Rotation::cur());
            let a = cells.query_advice(a, Rotation::cur());
            let s = cells.query_selector(s);
            let r = cells.query_challenge(challenge);
            let x = cells.query_instance(instance, Rotation::cur());
            vec![
                ("rlc", s.clone() * (a.clone() * r - c + x)),
                ("step", s * (next - a * Fr::from(3))),
            ]
        });
        meta.enable_equality(instance);
        meta.lookup_any("in table", |cells| {
            let s = cells.query_selector(s);
            let b = cells.query_advice(b, Rotation::prev());
            let table = cells.query_fixed(table, Rotation::cur());
            vec![(s * b, table)]
        });
        meta.create_gate("simple", |cells| {
            let t = cells.query_selector(t);
            let b = cells.query_advice(b, Rotation::cur());
            vec![t * (b.clone() * b.clone() - b)]
        });
        meta.enable_equality(c);
        meta.set_minimum_degree(5);
    }

    fn synthesize(&self, _config: (), _layouter: impl Layouter<Fr>) -> Result<(), PlonkError> {
        Ok(())
    }
}

/// A gate that queries a cell its constraints do not use: halo2 numbers the query, and no
/// expression shows it.
#[derive(Clone, Default)]
struct UnusedQuery;

impl Circuit<Fr> for UnusedQuery {
    type Config = ();
    type FloorPlanner = SimpleFloorPlanner;
    type Params = ();

    fn without_witnesses(&self) -> Self {
        UnusedQuery
    }

    fn configure(meta: &mut ConstraintSystem<Fr>) {
        let a = meta.advice_column();
        let s = meta.selector();
        meta.create_gate("unused", |cells| {
            let _unused = cells.query_advice(a, Rotation::next());
            let s = cells.query_selector(s);
            vec![s * cells.query_advice(a, Rotation::cur())]
        });
    }

    fn synthesize(&self, _config: (), _layouter: impl Layouter<Fr>) -> Result<(), PlonkError> {
        Ok(())
    }
}

#[test]
fn a_query_no_expression_shows_cannot_be_recorded() {
    let cs = configure::<UnusedQuery>(());
    let refused = CircuitRecord::of(&cs);
    assert!(matches!(refused, Err(Error::Malformed(_))), "{refused:?}");
}

#[test]
fn every_test_circuit_replays_into_its_constraint_system() {
    recorded::<StandardPlonk>(());
    assert_eq!(recorded::<LookupCircuit>(()).gates_and_lookups().1, 1);
    recorded::<DenseCircuit>(());
    assert_eq!(recorded::<Phased>(()).gates_and_lookups(), (2, 1));
    let (gates, _) = recorded::<Halo2LibCircuit>(halo2_lib().config.clone()).gates_and_lookups();
    assert!(gates > 0);
}

/// Saves `pk` (and its verifying key) with every backend, then loads both with the record
/// their files carry and no circuit code: the same bytes, the same transcript; the record
/// carries the circuit's parameters, and a key loaded by its record and saved again carries
/// the same record.
fn loads_with_the_record<C: Circuit<Fr>>(pk: &ProvingKey<G1Affine>, circuit_params: C::Params)
where
    C::Params: Clone + RecordableParams,
{
    let record =
        recorded::<C>(circuit_params.clone()).with_params(circuit_params.to_recorded_json());
    assert!(record.circuit_params_json().is_some());
    let dir = tempfile::tempdir().unwrap();
    for backend in Backend::compiled() {
        let options = KeyOptions {
            backend: Some(backend),
            ..KeyOptions::default()
        };
        let path = dir.path().join(format!("{backend}.pk"));
        let digest = save_key::<C, _>(&path, pk, circuit_params.clone(), &options).unwrap();
        assert_eq!(read_record(&path).unwrap(), record, "{backend}");
        let pinned = KeyOptions {
            pin: Some(KeyPin::Digest(digest)),
            ..options
        };
        let loaded: ProvingKey<G1Affine> =
            load_key::<Recorded, _>(&path, read_record(&path).unwrap(), &pinned).unwrap();
        assert_eq!(pk_bytes(&loaded), pk_bytes(pk), "{backend}");
        assert_eq!(
            loaded.get_vk().transcript_repr(),
            pk.get_vk().transcript_repr()
        );
        let again = dir.path().join(format!("{backend}-again.pk"));
        save_key::<Recorded, _>(&again, &loaded, read_record(&path).unwrap(), &options).unwrap();
        assert_eq!(read_record(&again).unwrap(), record, "{backend}");
        // The same key by its circuit type, record or not.
        let by_type: ProvingKey<G1Affine> =
            load_key::<C, _>(&path, circuit_params.clone(), &pinned).unwrap();
        assert_eq!(pk_bytes(&by_type), pk_bytes(pk), "{backend}");
        let vk_path = dir.path().join(format!("{backend}.vk"));
        save_key::<C, _>(&vk_path, pk.get_vk(), circuit_params.clone(), &options).unwrap();
        let by_transcript = KeyOptions {
            pin: Some(KeyPin::Transcript(pk.get_vk().transcript_repr())),
            ..options
        };
        let vk: VerifyingKey<G1Affine> =
            load_key::<Recorded, _>(&vk_path, read_record(&vk_path).unwrap(), &by_transcript)
                .unwrap();
        assert_eq!(vk_bytes(&vk), vk_bytes(pk.get_vk()), "{backend}");
        // And a verifying key from the proving key's file, by the record.
        let from_pk: VerifyingKey<G1Affine> =
            load_key::<Recorded, _>(&path, record.clone(), &by_transcript).unwrap();
        assert_eq!(vk_bytes(&from_pk), vk_bytes(pk.get_vk()), "{backend}");
    }
}

/// A container without a record (as earlier versions wrote them: version 3) says so, and
/// loads by its circuit type; a record section damaged is refused by a check of the file and
/// by a read of the record.
#[test]
fn containers_without_a_record_or_with_a_damaged_one() {
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key.pk");
    save_key::<StandardPlonk, _>(&path, &fixture.pk, (), &KeyOptions::default()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let header = Header::from_bytes(&bytes).unwrap();
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 4);
    assert!(header.record_len > 0);
    let payload_end = HEADER_LEN + header.payload_len as usize;

    // Without its record: a version 3 container.
    let mut bare = Header {
        record_len: 0,
        ..header
    }
    .to_bytes()
    .to_vec();
    bare.extend_from_slice(&bytes[HEADER_LEN..payload_end]);
    let bare_path = dir.path().join("bare.pk");
    std::fs::write(&bare_path, &bare).unwrap();
    assert!(
        matches!(read_record(&bare_path), Err(ref err) if matches!(err.cause(), Error::NotRecorded))
    );
    let loaded: ProvingKey<G1Affine> =
        load_key::<StandardPlonk, _>(&bare_path, (), &KeyOptions::default()).unwrap();
    assert_eq!(pk_bytes(&loaded), pk_bytes(&fixture.pk));
    // A save told to omit the record writes that same container.
    let omitted_path = dir.path().join("omitted.pk");
    let omit = SaveOptions {
        recording: keycodec_core::Recording::Omit,
        ..SaveOptions::default()
    };
    Backend::of_file(&path)
        .unwrap()
        .codec()
        .unwrap()
        .save::<StandardPlonk, _>(&omitted_path, &fixture.pk, (), &omit)
        .unwrap();
    assert_eq!(std::fs::read(&omitted_path).unwrap(), bare);

    // A byte of the record flipped: its checksum refuses it.
    let mut damaged = bytes.clone();
    damaged[payload_end + 3] ^= 0x10;
    let damaged_path = dir.path().join("damaged.pk");
    std::fs::write(&damaged_path, &damaged).unwrap();
    assert!(read_record(&damaged_path).is_err());
    let file = std::fs::File::open(&damaged_path).unwrap();
    assert!(keycodec_core::header::verify_file(&file).is_err());

    // Every flip of a sample of the record section's bits is refused by a load by type too
    // (it checks the record's checksum as it checks the payload's).
    let section = payload_end..bytes.len();
    for bit in (section.start * 8..section.end * 8).step_by(13) {
        let mut flipped = bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let refused = Backend::of_file(&path)
            .unwrap()
            .codec()
            .unwrap()
            .read_slice::<StandardPlonk, ProvingKey<G1Affine>>(
                &flipped,
                (),
                &LoadOptions::default(),
            );
        assert!(
            matches!(refused, Err(Error::PayloadChecksum { .. })),
            "bit {bit}: {:?}",
            refused.err()
        );
    }

    // The record section cut short: the container's length refuses it.
    let short_path = dir.path().join("short.pk");
    std::fs::write(&short_path, &bytes[..bytes.len() - 4]).unwrap();
    assert!(load_key::<StandardPlonk, ProvingKey<G1Affine>>(
        &short_path,
        (),
        &KeyOptions::default()
    )
    .is_err());
    assert!(read_record(&short_path).is_err());
}

#[test]
fn keys_load_with_their_record_and_no_circuit() {
    loads_with_the_record::<StandardPlonk>(&standard_plonk().pk, ());
    loads_with_the_record::<LookupCircuit>(&lookup().pk, ());
    loads_with_the_record::<LookupCircuit>(&lookup_uncompressed().pk, ());
    loads_with_the_record::<DenseCircuit>(&dense().pk, ());
    let fixture = halo2_lib();
    loads_with_the_record::<Halo2LibCircuit>(&fixture.pk, fixture.config.clone());
}

/// A halo2-lib key's file carries its `BaseCircuitParams`: the key loads by its circuit type
/// with the parameters read from the file alone.
#[test]
fn a_halo2_lib_key_carries_its_circuit_params() {
    let fixture = halo2_lib();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("halo2-lib.pk");
    let digest = save_key::<Halo2LibCircuit, _>(
        &path,
        &fixture.pk,
        fixture.config.clone(),
        &KeyOptions::default(),
    )
    .unwrap();
    let params: BaseCircuitParams = read_record(&path).unwrap().circuit_params().unwrap();
    assert_eq!(
        serde_json::to_value(&params).unwrap(),
        serde_json::to_value(&fixture.config).unwrap()
    );
    let pinned = KeyOptions {
        pin: Some(KeyPin::Digest(digest)),
        ..KeyOptions::default()
    };
    let pk: ProvingKey<G1Affine> = load_key::<Halo2LibCircuit, _>(&path, params, &pinned).unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    // Parameters of another type are refused, naming them.
    let wrong = read_record(&path).unwrap().circuit_params::<Vec<u64>>();
    assert!(matches!(wrong, Err(Error::CircuitParams(_))), "{wrong:?}");
    // A record without parameters says so.
    let bare = recorded::<StandardPlonk>(());
    assert!(matches!(
        bare.circuit_params::<()>(),
        Err(Error::CircuitParams(_))
    ));
}

#[test]
fn an_edited_record_is_another_circuit_and_its_load_is_refused() {
    let fixture = standard_plonk();
    let record = recorded::<StandardPlonk>(());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key.pk");
    let codec = Backend::compiled().next().unwrap().codec().unwrap();
    codec
        .save::<StandardPlonk, _>(&path, &fixture.pk, (), &SaveOptions::default())
        .unwrap();
    // A rotation moved in the bytes (a gate's query at another row): still a well-formed
    // record, of another circuit.
    let bytes = record.to_bytes();
    let mut edited = None;
    for i in 0..bytes.len() {
        let mut candidate = bytes.clone();
        candidate[i] ^= 1;
        if let Ok(other) = CircuitRecord::from_bytes(&candidate) {
            if format!("{:?}", other.replay().pinned()) != format!("{:?}", record.replay().pinned())
            {
                edited = Some(other);
                break;
            }
        }
    }
    let edited = edited.expect("an edit that is still a record");
    let refused =
        codec.load::<Recorded, ProvingKey<G1Affine>>(&path, edited, &LoadOptions::default());
    assert!(
        matches!(refused, Err(ref err) if matches!(err.cause(), Error::CircuitMismatch { .. })),
        "{:?}",
        refused.err()
    );
}

#[test]
fn damaged_records_are_refused_without_a_panic() {
    let record = recorded::<Halo2LibCircuit>(halo2_lib().config.clone());
    let bytes = record.to_bytes();
    // Every truncation is refused.
    for len in 0..bytes.len() {
        assert!(CircuitRecord::from_bytes(&bytes[..len]).is_err(), "{len}");
    }
    // Every byte flipped three ways: refused, or a record that replays without a panic.
    for i in 0..bytes.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[i] ^= flip;
            if let Ok(other) = CircuitRecord::from_bytes(&damaged) {
                let _ = other.replay();
            }
        }
    }
    // A count that claims more than the bytes hold is refused before it is allocated.
    let mut huge = bytes.clone();
    huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(CircuitRecord::from_bytes(&huge).is_err());
    // Another version is refused.
    let mut newer = bytes;
    newer[0] = 2;
    assert!(CircuitRecord::from_bytes(&newer).is_err());
}

#[test]
fn the_recorded_circuit_cannot_make_a_key() {
    let fixture = standard_plonk();
    // keygen needs the circuit's layout, which a record does not hold: refused, no panic.
    let keygen = keycodec_core::halo2_proofs::plonk::keygen_vk(&fixture.params, &Recorded);
    assert!(keygen.is_err());
}

/// A record is small beside its key: kilobytes (what it adds to every key's file).
#[test]
fn records_are_kilobytes() {
    let sizes = [
        (
            "StandardPlonk",
            recorded::<StandardPlonk>(())
                .with_params(().to_recorded_json())
                .to_section()
                .len(),
        ),
        (
            "LookupCircuit",
            recorded::<LookupCircuit>(())
                .with_params(().to_recorded_json())
                .to_section()
                .len(),
        ),
        (
            "DenseCircuit",
            recorded::<DenseCircuit>(())
                .with_params(().to_recorded_json())
                .to_section()
                .len(),
        ),
        (
            "halo2-lib",
            recorded::<Halo2LibCircuit>(halo2_lib().config.clone())
                .with_params(halo2_lib().config.to_recorded_json())
                .to_section()
                .len(),
        ),
    ];
    // halo2-lib's usual shape at k = 18: 30 advice columns, 3 of them looked up, a fixed
    // column, an instance column (configured only: no key is made).
    let wide = halo2_base::gates::circuit::BaseCircuitParams {
        k: 18,
        num_advice_per_phase: vec![30],
        num_fixed: 1,
        num_lookup_advice_per_phase: vec![3],
        lookup_bits: Some(17),
        num_instance_columns: 1,
    };
    let wide = (
        "halo2-lib, 30 advice columns",
        recorded::<Halo2LibCircuit>(wide.clone())
            .with_params(wide.to_recorded_json())
            .to_section()
            .len(),
    );
    // With the circuit's parameters, as a save records them (`()` as `null`).
    for (name, bytes) in sizes.into_iter().chain([wide]) {
        println!("{name}: a record section of {bytes} bytes");
        assert!(bytes < 64 << 10, "{name}: {bytes} bytes");
    }
}
