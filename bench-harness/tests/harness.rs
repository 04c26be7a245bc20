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
use bench_harness::measure::keys_equal;
use bench_harness::plan::{backend_names, Kind, FLOOR, HALO2_NATIVE};
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
        repeat: Some(2),
        full: true,
        downsize: true,
        json: Some(cache_dir.join("report.json")),
        plot: Some(cache_dir.join("report.svg")),
        cache_dir: cache_dir.to_path_buf(),
        cold: false,
        replace: false,
        remote: false,
        s3_server: bench_harness::S3ServerName::Moto,
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
        repeat: Some(2),
        replace: true,
        full: false,
        ..args(dir.path(), 8)
    };
    let report = run(&args).unwrap();
    assert!(report.replace);
    assert!(report.rows.iter().all(|row| row.verified));
    assert!(report
        .rows
        .iter()
        .filter(|row| row.write_s.is_some())
        .all(|row| row.write_runs.len() == 2 && row.read_runs.len() == 2));
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

/// The default run: each backend's default layout, one buffer, three runs.
#[test]
fn default_run_is_the_quick_one() {
    let defaults = Args::defaults();
    assert_eq!(defaults.k, 22);
    assert_eq!(defaults.buffer_sizes(), vec![Size::mib(1)]);
    assert_eq!(defaults.runs(), 3);
    let full = Args {
        full: true,
        ..Args::defaults()
    };
    assert_eq!(full.buffer_sizes().len(), 4);
    assert_eq!(full.runs(), 5);

    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        k: 7,
        cache_dir: dir.path().to_path_buf(),
        ..Args::defaults()
    };
    let report = run(&args).unwrap();
    assert!(report
        .rows
        .iter()
        .all(|row| row.verified && row.read_runs.len() == 3));
    // Files written once; no pinned rows, compressed layouts, downsize or import: those
    // are the full sweep's.
    assert!(report
        .rows
        .iter()
        .filter(|row| row.write_s.is_some())
        .all(|row| row.write_runs.len() == 1));
    assert!(!report.rows.iter().any(|row| row.validation == "pinned"));
    assert!(!report.rows.iter().any(|row| row.mode == "Processed"
        || row.mode.starts_with("downsize")
        || row.mode.starts_with("import")));
    // One cold start for keycodec (the backend storing parameters) and one for halo2.
    let cold: Vec<_> = report
        .rows
        .iter()
        .filter(|row| row.kind == Kind::ColdStart)
        .collect();
    assert_eq!(
        cold.len(),
        2,
        "{:?}",
        cold.iter().map(|r| r.backend).collect::<Vec<_>>()
    );
}

#[test]
fn harness_runs_end_to_end_and_writes_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let args = args(dir.path(), 8);
    let report = run(&args).unwrap();
    for (kind, backend, mode, validation) in [
        (Kind::Pk, "rawbytes", "RawBytes", "trusted"),
        (Kind::Pk, "rawbytes", "RawBytes", "pinned"),
        (Kind::Pk, "rkyv", "sections", "pinned"),
        (Kind::Pk, "rawbytes", "Processed", "checked"),
        (Kind::Pk, HALO2_NATIVE, "RawBytes", "trusted"),
        (Kind::Pk, HALO2_NATIVE, "Processed", "checked"),
        (Kind::Pk, FLOOR, "read + domain", "-"),
        (Kind::Params, "rawbytes", "RawBytes", "checked"),
        (Kind::Params, "rawbytes", "RawBytes", "trusted"),
        (Kind::Params, "rawbytes", "Processed", "checked"),
        (Kind::Params, "rawbytes", "import Processed", "checked"),
        (Kind::Params, "rawbytes", "downsize k-1", "checked"),
        (Kind::Params, HALO2_NATIVE, "RawBytes", "trusted"),
        (Kind::Params, HALO2_NATIVE, "Processed", "checked"),
        (Kind::Params, FLOOR, "read", "-"),
        (Kind::ColdStart, "rawbytes", "RawBytes", "checked"),
        (Kind::ColdStart, "rkyv", "sections", "checked"),
        (Kind::ColdStart, HALO2_NATIVE, "RawBytes", "checked"),
    ] {
        let matching = report
            .rows
            .iter()
            .filter(|row| {
                row.kind == kind
                    && row.backend == backend
                    && row.mode == mode
                    && row.validation == validation
            })
            .count();
        assert_eq!(
            matching,
            args.buffers.len(),
            "{kind:?} {backend} {mode} {validation}"
        );
    }
    for backend in Backend::compiled() {
        assert!(
            report.rows.iter().any(|row| row.backend == backend.name()),
            "{backend}"
        );
    }
    assert!(report.rows.iter().all(|row| row.verified));
    assert!(report.rows.iter().all(|row| row.read_runs.len() == 2
        && row.read_s > 0.0
        && row.read_min_s <= row.read_s
        && row.read_spread >= 0.0));
    // Every keycodec row is compared with halo2's row of its kind and with its kind's
    // floor, run by run; compressed layouts, and the import of halo2's compressed
    // parameters, with halo2's own read of its compressed files.
    for row in report
        .rows
        .iter()
        .filter(|row| row.backend != HALO2_NATIVE && row.backend != FLOOR)
    {
        let what = format!(
            "{:?} {} {} {}",
            row.kind, row.backend, row.mode, row.validation
        );
        assert!(row.speedup_vs_reference.is_some_and(|x| x > 0.0), "{what}");
        let halo2 = row.reference.as_ref().unwrap();
        assert_eq!(halo2.backend, HALO2_NATIVE, "{what}");
        let expected_mode = if row.mode == "import Processed" || row.mode == "Processed" {
            "Processed"
        } else {
            "RawBytes"
        };
        assert_eq!(halo2.mode, expected_mode, "{what}");
        let expected_validation = match row.validation {
            "trusted" => "trusted",
            _ => "checked",
        };
        assert_eq!(halo2.validation, expected_validation, "{what}");
        if row.kind != Kind::ColdStart {
            assert!(row.read_vs_floor.is_some_and(|x| x > 0.0), "{what}");
        }
    }
    // The rows that read one file written in every run carry that file's saves.
    assert!(report
        .rows
        .iter()
        .filter(|row| row.kind != Kind::ColdStart
            && row.backend != FLOOR
            && !row.mode.starts_with("downsize")
            && !row.mode.starts_with("import"))
        .all(|row| row.write_runs.len() == 2 && row.write_s.is_some()));
    // An import or a downsize reads a file another writer wrote: no saves of its own.
    assert!(report
        .rows
        .iter()
        .filter(|row| row.mode.starts_with("downsize") || row.mode.starts_with("import"))
        .all(|row| row.write_s.is_none()));
    assert!(report.limits.bulk_read_s > 0.0 && report.limits.bulk_write_s > 0.0);
    assert_eq!(
        report.limits.bytes,
        report
            .rows
            .iter()
            .filter(|row| row.kind == Kind::Pk)
            .map(|r| r.file_bytes)
            .max()
            .unwrap()
    );

    bench_harness::report::write_json(&report, args.json.as_ref().unwrap()).unwrap();
    bench_harness::report::write_plot(&report, args.plot.as_ref().unwrap()).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(args.json.as_ref().unwrap()).unwrap())
            .unwrap();
    assert_eq!(json["k"], 8);
    assert_eq!(json["circuit"], "standard-plonk");
    assert_eq!(json["full"], true);
    for key in ["bulk_write_s", "bulk_read_s", "bytes"] {
        assert!(json["limits"][key].is_number(), "limits.{key}");
    }
    // Building a k = 8 domain keeps well under a MiB: only its presence is checked here.
    assert!(json["fixture"]["domain_memory_bytes"].is_number());
    let kinds: Vec<&str> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["kind"].as_str().unwrap())
        .collect();
    for kind in ["pk", "params", "cold-start"] {
        assert!(kinds.contains(&kind), "{kind}");
    }
    let row = &json["rows"][0];
    for key in [
        "kind",
        "backend",
        "mode",
        "validation",
        "buffer_bytes",
        "write_s",
        "read_s",
        "read_min_s",
        "read_spread",
        "read_vs_floor",
        "speedup_vs_reference",
        "file_bytes",
        "peak_rss_bytes",
        "verified",
    ] {
        assert!(row.get(key).is_some(), "rows[0].{key}");
    }
    let svg = std::fs::read_to_string(args.plot.as_ref().unwrap()).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("rkyv sections checked"));
    let table = bench_harness::report::table(&report);
    for section in [
        "proving key",
        "KZG parameters",
        "cold start",
        "machine limits",
    ] {
        assert!(table.contains(section), "{section}");
    }
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

/// `--remote` (feature `remote`): the loopback S3 server, and per backend a remote load, the plain download,
/// download-then-load, a cache hit and a local load, each compared as documented.
#[cfg(feature = "remote")]
#[test]
fn remote_rows_compare_with_the_download_and_the_local_load() {
    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        k: 7,
        backends: vec!["rawbytes".into(), "rkyv".into()],
        remote: true,
        // moto, which the tests start anyway (s3s-fs installs from crates.io on first use).
        s3_server: bench_harness::S3ServerName::Moto,
        repeat: Some(2),
        cache_dir: dir.path().to_path_buf(),
        ..Args::defaults()
    };
    let report = run(&args).unwrap();
    let remote: Vec<_> = report
        .rows
        .iter()
        .filter(|row| row.kind == Kind::Remote)
        .collect();
    assert_eq!(remote.len(), 2 * 5, "five rows per backend");
    assert!(remote
        .iter()
        .all(|row| row.verified && row.read_runs.len() == 2));
    for backend in ["rawbytes", "rkyv"] {
        let row = |mode: &str| {
            remote
                .iter()
                .find(|row| row.backend == backend && row.mode == mode)
                .unwrap_or_else(|| panic!("{backend} {mode}"))
        };
        let load = row("ranged GETs");
        assert_eq!(load.reference.as_ref().unwrap().mode, "download, load");
        assert!(load.read_vs_floor.is_some() && load.write_s.is_some());
        assert_eq!(
            row("cache hit").reference.as_ref().unwrap().mode,
            "local file"
        );
        assert!(row("plain GET").write_s.is_none());
    }
    assert!(bench_harness::report::table(&report).contains("object storage"));
}
