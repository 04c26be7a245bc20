//! Regression guard for the fast load path: at a small k, in this process, loading a key with
//! keycodec's rawbytes backend (checked) must stay faster than halo2's own `ProvingKey::read`
//! of the same bytes through a 1 MiB `BufReader`.
//!
//! At k = 22 the fast path is 3 to 4 times faster (README); here the margin is generous (it
//! only has to win), the data small, and both sides are timed alternately, the minimum of
//! several runs each, so that a noisy machine slows both rather than one.

// The guard measures the rawbytes backend: nothing to compare without it.
#![cfg(feature = "rawbytes")]
// Test code: failing loudly is its job.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::time::{Duration, Instant};

use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::{KeyCodecExt, LoadOptions, SaveOptions};
use keycodec_rawbytes::RawBytesCodec;
use keycodec_testkit::{generate, pk_bytes, StandardPlonk};

/// Large enough that reading the polynomials, not building the domain, dominates.
const K: u32 = 12;
const RUNS: usize = 7;

#[test]
fn fast_path_load_beats_halo2s_reader() {
    let circuit = StandardPlonk(Fr::from(7u64));
    let instances = circuit.instances();
    let fixture = generate(K, circuit, instances, false);
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("keycodec.pk");
    let theirs = dir.path().join("halo2.pk");
    let codec = RawBytesCodec::new(SerdeFormat::RawBytes);
    codec
        .save::<StandardPlonk, _>(&ours, &fixture.pk, (), &SaveOptions::default())
        .unwrap();
    let file = File::create(&theirs).unwrap();
    let mut writer = BufWriter::with_capacity(1 << 20, file);
    fixture
        .pk
        .write(&mut writer, SerdeFormat::RawBytes)
        .unwrap();
    writer.flush().unwrap();
    drop(writer);

    let expected = pk_bytes(&fixture.pk);
    let (mut fast, mut halo2) = (Duration::MAX, Duration::MAX);
    for _ in 0..RUNS {
        let started = Instant::now();
        let loaded: ProvingKey<G1Affine> = codec
            .load::<StandardPlonk, _>(&ours, (), &LoadOptions::default())
            .unwrap();
        fast = fast.min(started.elapsed());
        assert_eq!(pk_bytes(&loaded), expected);

        let started = Instant::now();
        let mut reader = BufReader::with_capacity(1 << 20, File::open(&theirs).unwrap());
        let loaded = ProvingKey::<G1Affine>::read::<_, StandardPlonk>(
            &mut reader,
            SerdeFormat::RawBytes,
            (),
        )
        .unwrap();
        halo2 = halo2.min(started.elapsed());
        assert_eq!(pk_bytes(&loaded), expected);
    }
    println!(
        "k = {K}: keycodec rawbytes {fast:?}, halo2 ProvingKey::read {halo2:?} (min of {RUNS})"
    );
    assert!(
        fast < halo2,
        "the fast path ({fast:?}) is no longer faster than halo2's reader ({halo2:?})"
    );
}
