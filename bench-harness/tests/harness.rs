//! The harness end to end at a small k, its cache's staleness checks, and (ignored in CI) the
//! k = 22 round trip of every backend on the harness's cached fixture.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;

use bench_harness::fixture::{load_or_build, pk_cache_path};
use bench_harness::measure::{backend_names, groups, keys_equal};
use bench_harness::{run, Args, CircuitName, DEFAULT_CACHE_DIR};
use codec_core::testing::StandardPlonk;
use keycodec::halo2_proofs::plonk::ProvingKey;
use keycodec::halo2curves::bn256::G1Affine;
use keycodec::{Backend, KeyCodecExt, LoadOptions, SaveOptions, Size};

fn args(cache_dir: &Path, k: u32) -> Args {
    Args {
        k,
        circuit: CircuitName::StandardPlonk,
        backends: backend_names().into_iter().map(String::from).collect(),
        buffers: vec![Size::kib(8), Size::mib(1)],
        repeat: 1,
        json: Some(cache_dir.join("report.json")),
        plot: Some(cache_dir.join("report.svg")),
        cache_dir: cache_dir.to_path_buf(),
        cold: false,
        replace: false,
    }
}

/// The dense workload: every usable row holds a full-size constant, so the compact layout
/// stores a large part of the key (and still loads it identically).
#[test]
fn dense_workload_runs_and_compact_files_stay_below_rawbytes() {
    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        circuit: CircuitName::Dense,
        backends: vec!["rawbytes".into(), "compact".into()],
        buffers: vec![Size::mib(1)],
        json: None,
        plot: None,
        // Two runs, the second saving over the first's file.
        repeat: 2,
        replace: true,
        ..args(dir.path(), 8)
    };
    let report = run(&args).unwrap();
    assert!(report.replace);
    assert!(report
        .rows
        .iter()
        .all(|row| row.verified && row.write_runs.len() == 2));
    let size = |backend: &str, mode: &str| {
        report
            .rows
            .iter()
            .find(|row| row.backend == backend && row.mode == mode)
            .unwrap()
            .file_bytes
    };
    let (compact, raw) = (size("compact", "recompute"), size("rawbytes", "RawBytes"));
    // Dense, so far from StandardPlonk's few hundred bytes; still well below RawBytes.
    assert!(
        compact > raw / 20 && compact < raw / 2,
        "{compact} vs {raw}"
    );
    assert!(bench_harness::report::table(&report).starts_with("dense circuit, k = 8"));
}

#[test]
fn harness_runs_end_to_end_and_writes_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let args = args(dir.path(), 8);
    let report = run(&args).unwrap();
    // A row per read mode of every file layout of every backend, per buffer: for rawbytes
    // RawBytes checked and trusted and Processed checked, for halo2's reader the same three.
    let pin = Some(keycodec::KeyDigest([0; 32]));
    let reads: usize = groups(&args.backends, pin)
        .iter()
        .map(|g| g.reads.len())
        .sum();
    assert_eq!(report.rows.len(), reads * args.buffers.len());
    for (backend, mode, validation) in [
        ("rawbytes", "RawBytes", "trusted"),
        ("rawbytes", "RawBytes", "pinned"),
        ("rkyv", "sections", "pinned"),
        ("rawbytes", "Processed", "checked"),
        ("halo2-native", "RawBytes", "trusted"),
        ("halo2-native", "Processed", "checked"),
    ] {
        assert!(
            report.rows.iter().any(|row| row.backend == backend
                && row.mode == mode
                && row.validation == validation),
            "{backend} {mode} {validation}"
        );
    }
    for backend in Backend::compiled() {
        assert!(
            report.rows.iter().any(|row| row.backend == backend.name()),
            "{backend}"
        );
    }
    assert!(report.rows.iter().all(|row| row.verified));
    assert!(report
        .rows
        .iter()
        .all(|row| row.read_s > 0.0 && row.write_s > 0.0));
    assert!(report.limits.bulk_read_s > 0.0 && report.limits.bulk_write_s > 0.0);
    assert_eq!(
        report.limits.bytes,
        report.rows.iter().map(|r| r.file_bytes).max().unwrap()
    );

    bench_harness::report::write_json(&report, args.json.as_ref().unwrap()).unwrap();
    bench_harness::report::write_plot(&report, args.plot.as_ref().unwrap()).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(args.json.as_ref().unwrap()).unwrap())
            .unwrap();
    assert_eq!(json["k"], 8);
    assert_eq!(json["circuit"], "standard-plonk");
    for key in ["bulk_write_s", "bulk_read_s", "bytes"] {
        assert!(json["limits"][key].is_number(), "limits.{key}");
    }
    // Building a k = 8 domain keeps well under a MiB: only its presence is checked here.
    assert!(json["fixture"]["domain_memory_bytes"].is_number());
    let row = &json["rows"][0];
    for key in [
        "backend",
        "mode",
        "validation",
        "buffer_bytes",
        "write_s",
        "read_s",
        "file_bytes",
        "peak_rss_bytes",
        "verified",
    ] {
        assert!(row.get(key).is_some(), "rows[0].{key}");
    }
    let svg = std::fs::read_to_string(args.plot.as_ref().unwrap()).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("rkyv sections checked"));
    let table = bench_harness::report::table(&report);
    assert!(table.contains("halo2-native") && table.contains("machine limits"));
}

#[test]
fn stale_or_corrupt_cached_keys_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let first = load_or_build::<StandardPlonk>(dir.path(), 6).unwrap();
    assert!(first.origin.contains("no cache"), "{}", first.origin);
    let again = load_or_build::<StandardPlonk>(dir.path(), 6).unwrap();
    assert!(again.origin.starts_with("cached"), "{}", again.origin);
    assert!(keys_equal(&first.pk, &again.pk));

    // A flipped bit: refused by the checksum, rebuilt.
    let path = pk_cache_path::<StandardPlonk>(dir.path(), 6);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let rebuilt = load_or_build::<StandardPlonk>(dir.path(), 6).unwrap();
    assert!(rebuilt.origin.contains("checksum"), "{}", rebuilt.origin);
    assert!(keys_equal(&first.pk, &rebuilt.pk));

    // Another k's key under this k's name: refused as the wrong k, rebuilt.
    std::fs::copy(&path, pk_cache_path::<StandardPlonk>(dir.path(), 7)).unwrap();
    let other = load_or_build::<StandardPlonk>(dir.path(), 7).unwrap();
    assert!(other.origin.contains("k = 6"), "{}", other.origin);
    assert_eq!(other.pk.get_vk().get_domain().k(), 7);

    // A file of another format (an older layout, or garbage): refused, rebuilt.
    std::fs::write(
        &path,
        b"not a keycodec container, just some bytes of another format",
    )
    .unwrap();
    let replaced = load_or_build::<StandardPlonk>(dir.path(), 6).unwrap();
    assert!(replaced.origin.contains("refused"), "{}", replaced.origin);
}

/// The k = 22 round trip of every backend, on the harness's cached fixture (built on first
/// use, in about two minutes). Run with `cargo test --release --workspace -- --ignored`.
#[test]
#[ignore = "k = 22: gigabytes and minutes; run with --release -- --ignored"]
fn k22_round_trip_every_backend() {
    let cache = Path::new(DEFAULT_CACHE_DIR);
    let fixture = load_or_build::<StandardPlonk>(cache, 22).unwrap();
    let scratch = cache.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    for backend in Backend::compiled() {
        let path = scratch.join(format!("round-trip.{backend}"));
        let codec = backend.codec().unwrap();
        codec
            .save::<StandardPlonk, _>(&path, &fixture.pk, (), &SaveOptions::default())
            .unwrap();
        let options = LoadOptions {
            expected_k: Some(22),
            ..LoadOptions::default()
        };
        let loaded: ProvingKey<G1Affine> =
            codec.load::<StandardPlonk, _>(&path, (), &options).unwrap();
        assert!(
            keys_equal(&fixture.pk, &loaded),
            "{backend}: loaded key differs"
        );
        std::fs::remove_file(&path).unwrap();
    }
}
