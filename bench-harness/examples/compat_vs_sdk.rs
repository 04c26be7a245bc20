//! keycodec's drop-in `compat::read_pk` against snark-verifier-sdk 0.2.7's `read_pk` on the
//! same file (halo2's headerless layout, written as its `gen_pk` writes it), on the harness's
//! halo2-lib key, loaded in turn in one process (the page cache warm), paired run by run; then
//! both on a torn copy of the file.
//!
//! `cargo run --release -p bench-harness --example compat_vs_sdk -- [K] [RUNS]` (default
//! k = 18, 7 runs). snark-verifier-sdk's read is reproduced as it is (its crate is not a
//! dependency): `ProvingKey::read` through `BufReader::new` (8 KiB), `RawBytesUnchecked`,
//! `.unwrap()`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::indexing_slicing
)]

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use bench_harness::fixture::load_or_build;
use halo2_base::gates::circuit::BaseCircuitParams;
use halo2_proofs::plonk::ProvingKey;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::G1Affine;
use keycodec_core::KeyCodecExt;
use keycodec_testkit::halo2_lib::Halo2LibCircuit;

fn sdk_read_pk(path: &Path, params: BaseCircuitParams) -> ProvingKey<G1Affine> {
    let f = File::open(path).unwrap();
    let mut bufreader = BufReader::new(f);
    ProvingKey::read::<_, Halo2LibCircuit>(&mut bufreader, SerdeFormat::RawBytesUnchecked, params)
        .unwrap()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let k: u32 = args.next().map_or(18, |k| k.parse().expect("K"));
    let runs: usize = args.next().map_or(7, |n| n.parse().expect("RUNS"));
    let cache = bench_harness::default_cache_dir();
    let fixture = load_or_build::<Halo2LibCircuit>(&cache, k).expect("the halo2-lib key");
    let path = cache.join(format!("compat-sdk-halo2-lib-k{k}.pk"));
    {
        // snark-verifier-sdk's gen_pk write.
        let mut f = BufWriter::new(File::create(&path).unwrap());
        fixture
            .pk
            .write(&mut f, SerdeFormat::RawBytesUnchecked)
            .unwrap();
        f.flush().unwrap();
    }
    let bytes = std::fs::metadata(&path).unwrap().len();
    let params = fixture.circuit_params.clone();
    // The same key as a keycodec container, for the drop-in against keycodec's own load.
    let container = cache.join(format!("compat-container-halo2-lib-k{k}.kc"));
    keycodec_rawbytes::RawBytesCodec::default()
        .save::<Halo2LibCircuit, _>(
            &container,
            &fixture.pk,
            params.clone(),
            &keycodec_core::SaveOptions::default(),
        )
        .unwrap();
    drop(fixture);
    let container_load = || {
        drop(
            keycodec_rawbytes::RawBytesCodec::default()
                .load::<Halo2LibCircuit, ProvingKey<G1Affine>>(
                    &container,
                    params.clone(),
                    &keycodec_core::LoadOptions::default(),
                )
                .unwrap(),
        );
    };
    container_load();
    // One of each first, not counted: the page cache and the allocator.
    drop(sdk_read_pk(&path, params.clone()));
    drop(keycodec::compat::read_pk::<Halo2LibCircuit>(&path, params.clone()).unwrap());
    let (mut sdk, mut ours, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut loads, mut to_load) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let time = |which: bool| {
            let started = Instant::now();
            if which {
                drop(keycodec::compat::read_pk::<Halo2LibCircuit>(&path, params.clone()).unwrap());
            } else {
                drop(sdk_read_pk(&path, params.clone()));
            }
            started.elapsed().as_secs_f64()
        };
        // The order alternates run by run.
        let (s, o) = if run % 2 == 0 {
            let s = time(false);
            (s, time(true))
        } else {
            let o = time(true);
            (time(false), o)
        };
        sdk.push(s);
        ours.push(o);
        ratios.push(s / o);
        let started = Instant::now();
        container_load();
        let l = started.elapsed().as_secs_f64();
        loads.push(l);
        to_load.push(l / o);
    }
    let (min, max) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!(
        "halo2-lib key, k = {k}, {bytes} bytes, {runs} paired runs, warm: snark-verifier-sdk read_pk (RawBytesUnchecked, nothing checked) median {:.3} s; keycodec::compat::read_pk (every value checked) median {:.3} s; speed-up median {:.2}x (min {min:.2}, max {max:.2})",
        median(&mut sdk),
        median(&mut ours),
        median(&mut ratios),
    );

    let (lo, hi) = to_load
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    println!(
        "the same key as a rawbytes container, keycodec's checked load: median {:.3} s; the drop-in on the headerless file is {:.2}x its speed (min {lo:.2}, max {hi:.2})",
        median(&mut loads),
        median(&mut to_load),
    );

    // A torn file: the sdk's read panics, the drop-in returns an error.
    let torn = cache.join(format!("compat-sdk-halo2-lib-k{k}-torn.pk"));
    let all = std::fs::read(&path).unwrap();
    std::fs::write(&torn, &all[..all.len() / 2]).unwrap();
    let sdk_torn = std::panic::catch_unwind(|| drop(sdk_read_pk(&torn, params.clone())));
    let ours_torn = keycodec::compat::read_pk::<Halo2LibCircuit>(&torn, params.clone());
    println!(
        "torn file (half of it): snark-verifier-sdk read_pk {}; keycodec::compat::read_pk {}",
        if sdk_torn.is_err() {
            "panicked"
        } else {
            "returned a key"
        },
        match &ours_torn {
            Ok(_) => "returned a key".to_owned(),
            Err(err) => format!("returned io::Error ({:?}: {err})", err.kind()),
        }
    );
    let _ = std::fs::remove_file(&torn);
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&container);
}
