//! The harness end to end at a small k, its cache's staleness checks, and (ignored in CI) the
//! k = 22 round trip of every backend on the harness's cached fixture.
//!
//! One file, long: every test runs the harness's binary on one shared cached fixture; each
//! test stands alone and reads top to bottom.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};

use bench_harness::fixture::{circuit_cache_path, load_or_build, pk_cache_path};
use bench_harness::measure::keys_equal;
use bench_harness::plan::{backend_names, Kind, State, FLOOR, HALO2_NATIVE};
use bench_harness::{default_cache_dir, run, Args, CircuitName, Report, SizeReport};
use keycodec::halo2_proofs::plonk::ProvingKey;
use keycodec::halo2curves::bn256::G1Affine;
use keycodec::Backend;
use keycodec_core::{KeyCodecExt, LoadOptions, SaveOptions, Size};
use keycodec_testkit::StandardPlonk;

/// Arguments of a small run in `cache_dir`: every backend, both states, fresh loads in the
/// harness binary Cargo built for these tests.
fn args(cache_dir: &Path, k: u32) -> Args {
    Args {
        k: Some(k),
        ks: None,
        circuit: CircuitName::StandardPlonk,
        backends: backend_names().into_iter().map(String::from).collect(),
        states: vec![State::Warm, State::Fresh],
        buffers: vec![Size::kib(8), Size::mib(1)],
        repeat: Some(2),
        warmup: 0,
        full: true,
        downsize: true,
        json: Some(cache_dir.join("report.json")),
        plot: Some(cache_dir.join("report.svg")),
        cache_dir: Some(cache_dir.to_path_buf()),
        child_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_bench-harness"))),
        ..Args::defaults()
    }
}

fn only(report: &Report) -> &SizeReport {
    assert_eq!(report.sizes.len(), 1);
    &report.sizes[0]
}

/// The dense workload: every usable row holds a full-size constant, so the compact layout
/// stores a large part of the key (and still loads it identically).
#[test]
fn dense_workload_runs_and_compact_files_stay_below_rawbytes() {
    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        circuit: CircuitName::Dense,
        backends: vec!["rawbytes".into(), "compact".into()],
        states: vec![State::Warm],
        buffers: vec![Size::mib(1)],
        json: None,
        plot: None,
        // Two runs, the second saving over the first's file.
        repeat: Some(2),
        replace: true,
        full: false,
        downsize: false,
        ..args(dir.path(), 8)
    };
    let report = run(&args).unwrap();
    let size = only(&report);
    assert!(report.replace);
    assert!(size.rows.iter().all(|row| row.verified));
    assert!(size.saves.iter().all(|save| save.save_runs.len() == 2));
    assert!(size.rows.iter().all(|row| row.read_runs.len() == 2));
    let bytes = |backend: &str| {
        size.saves
            .iter()
            .find(|save| save.kind == Kind::Pk && save.backend == backend)
            .unwrap()
            .file_bytes
    };
    let (compact, raw) = (bytes("compact"), bytes("rawbytes"));
    // Dense, so far from StandardPlonk's few hundred bytes; still well below RawBytes.
    assert!(
        compact > raw / 20 && compact < raw / 2,
        "{compact} vs {raw}"
    );
    assert!(bench_harness::report::table(&report).starts_with("dense circuit, k = 8"));
}

/// The default run: a halo2-lib key at k = 18, rawbytes and rkyv beside halo2, each default
/// layout checked and trusted, fresh and cold, one buffer, a warm-up run, then runs until
/// every interval is within +-10% (5 to 20, the whole run at most 5 minutes).
#[test]
fn default_run_is_the_quick_one() {
    let defaults = Args::defaults();
    assert_eq!(defaults.sizes(), [18]);
    assert_eq!(defaults.circuit, CircuitName::Halo2Lib);
    assert_eq!(defaults.stopping().warmup, 1);
    assert_eq!(defaults.buffer_sizes(), vec![Size::mib(1)]);
    assert_eq!(defaults.states, [State::Fresh, State::Cold]);
    assert_eq!(defaults.backends, ["rawbytes", "rkyv", HALO2_NATIVE]);
    let stopping = defaults.stopping();
    assert_eq!(
        (
            stopping.fixed,
            stopping.min_runs,
            stopping.max_runs,
            stopping.interval
        ),
        (None, 5, 20, 0.10)
    );
    assert_eq!(stopping.time_cap.as_secs(), 300);
    let full = Args {
        full: true,
        ..Args::defaults()
    };
    assert_eq!(full.buffer_sizes().len(), 4);

    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        json: None,
        plot: None,
        repeat: Some(2),
        ..Args {
            k: Some(9),
            cache_dir: Some(dir.path().to_path_buf()),
            child_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_bench-harness"))),
            ..Args::defaults()
        }
    };
    let report = run(&args).unwrap();
    let size = only(&report);
    assert!(size.rows.iter().all(|row| row.verified));
    // No pinned key rows, compressed layouts, downsize or import: those are the full
    // sweep's. Parameters pinned by digest, as a prover opens them, in each state.
    assert!(!size
        .rows
        .iter()
        .any(|row| row.validation == "pinned" && row.kind == Kind::Pk));
    let pinned_params = size
        .rows
        .iter()
        .filter(|row| row.validation == "pinned" && row.kind == Kind::Params)
        .count();
    assert_eq!(pinned_params, 2);
    assert!(!size.rows.iter().any(|row| row.mode == "Processed"
        || row.mode.starts_with("downsize")
        || row.mode.starts_with("import")));
    // One cold start for keycodec (the backend storing parameters) and one for halo2, in
    // each state.
    let cold: Vec<_> = size
        .rows
        .iter()
        .filter(|row| row.kind == Kind::ColdStart)
        .collect();
    assert_eq!(
        cold.len(),
        4,
        "{:?}",
        cold.iter()
            .map(|r| (r.backend, r.state))
            .collect::<Vec<_>>()
    );
}

/// `--states cold`: every load and floor runs in a new process after its files' pages were
/// dropped, each row paired with halo2's reader in the same state, and the report does not
/// claim a refusal that did not happen.
#[test]
fn cold_is_a_state_of_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        k: Some(9),
        states: vec![State::Cold],
        backends: vec!["rawbytes".into(), "halo2-native".into()],
        repeat: Some(1),
        warmup: 0,
        cache_dir: Some(dir.path().to_path_buf()),
        child_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_bench-harness"))),
        ..Args::defaults()
    };
    let report = run(&args).unwrap();
    let size = only(&report);
    assert!(!size.rows.is_empty());
    assert!(size
        .rows
        .iter()
        .all(|row| row.state == "cold" && row.verified));
    let paired = size
        .rows
        .iter()
        .find(|row| row.backend == "rawbytes" && row.kind == Kind::Pk)
        .unwrap();
    assert_eq!(paired.reference.as_ref().unwrap().backend, "halo2-native");
    assert!(size.rows.iter().any(|row| row.backend == FLOOR));
    assert!(!report.cold.requested);
    // Whether this folder's files can be dropped from the page cache at all (not on tmpfs).
    let probe = dir.path().join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let droppable = keycodec_core::drop_cached_pages(&probe);
    assert_eq!(report.cold.effective, droppable);
    let text = bench_harness::report::table(&report);
    assert_eq!(
        text.contains("REFUSED"),
        !droppable,
        "the report says drops were refused exactly when they were"
    );
    // Where a drop empties the page cache of a file (a disk, not tmpfs), mincore shows every
    // cold load starting with next to none of its files cached, and the report says so.
    std::fs::File::open(&probe).unwrap().sync_all().unwrap();
    let _ = std::fs::read(&probe).unwrap();
    keycodec_core::drop_cached_pages(&probe);
    if keycodec_core::cached_pages(&probe) == Some((0, 1)) {
        for row in &size.rows {
            let cached = row.cached_before.unwrap();
            assert!(cached < 0.1, "{} {} {cached}", row.backend, row.mode);
        }
        assert!(text.contains("cold rows: at most"), "{text}");
        assert!(!text.contains("NOT COLD"), "{text}");
    }
}

/// Runs continue until every keycodec ratio's interval is narrow enough, within bounds: an
/// impossible interval runs to the most allowed; `--repeat` runs exactly that many.
#[test]
fn runs_stop_when_the_intervals_or_the_bounds_say() {
    let dir = tempfile::tempdir().unwrap();
    let small = Args {
        backends: vec!["rawbytes".into(), HALO2_NATIVE.into()],
        states: vec![State::Warm],
        buffers: vec![Size::mib(1)],
        full: false,
        downsize: false,
        json: None,
        plot: None,
        ..args(dir.path(), 6)
    };
    let impossible = Args {
        repeat: None,
        interval: 0.0,
        min_runs: 2,
        max_runs: 3,
        ..small.clone()
    };
    let report = run(&impossible).unwrap();
    let size = only(&report);
    assert!(size.runs >= 3, "{}", size.stopped);
    assert!(size.stopped.contains("--max-runs"), "{}", size.stopped);
    // Every row in the minimum of runs, the later ones only the rows of the widest ratios,
    // no keycodec row and no ratio of keycodec's over halo2's in more runs than allowed
    // (halo2's reader, the reference of several, may be in more).
    let rows: Vec<_> = size
        .rows
        .iter()
        .filter(|row| row.backend != FLOOR)
        .collect();
    assert!(rows
        .iter()
        .all(|row| row.read_run_numbers.starts_with(&[1, 2])));
    for row in rows.iter().filter(|row| row.backend != HALO2_NATIVE) {
        assert!(row.read_run_numbers.len() <= 3, "{}", size.stopped);
    }
    assert!(rows
        .iter()
        .filter_map(|row| row.speedup.as_ref())
        .all(|speedup| speedup.runs <= 3));
    // Run 3 measured the widest ratio's rows: loads, or saves where a save's ratio (noisy at
    // k = 6) was the widest, so that no load was in it.
    assert!(
        rows.iter().any(|row| row.read_run_numbers == [1, 2, 3])
            || size
                .saves
                .iter()
                .any(|save| save.save_run_numbers == [1, 2, 3]),
        "{:?}",
        size.rows
            .iter()
            .map(|row| &row.read_run_numbers)
            .chain(size.saves.iter().map(|save| &save.save_run_numbers))
            .collect::<Vec<_>>()
    );
    let easy = Args {
        repeat: None,
        interval: 1e9,
        min_runs: 2,
        max_runs: 9,
        ..small.clone()
    };
    let report = run(&easy).unwrap();
    assert_eq!(only(&report).runs, 2, "{}", only(&report).stopped);
    assert!(only(&report).stopped.contains("within"));
    let report = run(&small).unwrap();
    assert_eq!(only(&report).runs, 2);
}

#[test]
fn harness_runs_end_to_end_and_writes_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let args = args(dir.path(), 8);
    let report = run(&args).unwrap();
    let size = only(&report);
    for state in ["warm", "fresh"] {
        for (kind, backend, mode, validation) in [
            (Kind::Pk, "rawbytes", "RawBytes", "trusted"),
            (Kind::Pk, "rawbytes", "RawBytes", "pinned"),
            (Kind::Pk, "rkyv", "sections", "pinned"),
            (Kind::Pk, "rawbytes", "Processed", "checked"),
            (Kind::Pk, HALO2_NATIVE, "RawBytes", "trusted"),
            (Kind::Pk, HALO2_NATIVE, "Processed", "checked"),
            (Kind::Pk, FLOOR, "rawbytes RawBytes", "-"),
            (Kind::Pk, FLOOR, "rkyv sections", "-"),
            (Kind::Pk, FLOOR, "halo2-native RawBytes", "-"),
            (Kind::Params, "rawbytes", "RawBytes", "checked"),
            (Kind::Params, "rawbytes", "RawBytes", "trusted"),
            (Kind::Params, "rawbytes", "Processed", "checked"),
            (Kind::Params, "rawbytes", "import Processed", "checked"),
            (Kind::Params, "rawbytes", "downsize k-1", "checked"),
            (Kind::Params, HALO2_NATIVE, "RawBytes", "trusted"),
            (Kind::Params, HALO2_NATIVE, "Processed", "checked"),
            (Kind::Params, FLOOR, "rawbytes RawBytes", "-"),
            (Kind::Params, FLOOR, "halo2-native Processed", "-"),
            (Kind::ColdStart, "rawbytes", "RawBytes", "checked"),
            (Kind::ColdStart, "rkyv", "sections", "checked"),
            (Kind::ColdStart, HALO2_NATIVE, "RawBytes", "checked"),
        ] {
            let matching = size
                .rows
                .iter()
                .filter(|row| {
                    row.kind == kind
                        && row.backend == backend
                        && row.mode == mode
                        && row.validation == validation
                        && row.state == state
                })
                .count();
            assert_eq!(
                matching,
                args.buffers.len(),
                "{kind:?} {backend} {mode} {validation} {state}"
            );
        }
    }
    for backend in Backend::compiled() {
        assert!(
            size.rows.iter().any(|row| row.backend == backend.name()),
            "{backend}"
        );
    }
    assert!(size.rows.iter().all(|row| row.verified));
    // Every load's processor time and faults, in the loading process (a fresh one's too);
    // none for a floor, which times only the fastest of its ways.
    for row in &size.rows {
        let expected = if row.backend == FLOOR {
            0
        } else {
            row.read_runs.len()
        };
        assert_eq!(
            row.cpu_runs.len(),
            expected,
            "{} {} {}",
            row.backend,
            row.mode,
            row.state
        );
    }
    assert!(size
        .rows
        .iter()
        .flat_map(|row| &row.cpu_runs)
        .all(|used| used.system_s >= 0.0 && used.user_s >= 0.0));
    assert!(size
        .rows
        .iter()
        .flat_map(|row| &row.cpu_runs)
        .any(|used| used.faults > 0));
    // The steady ratio is the speedup's, of the loads the kernel did not slow: given with it.
    for row in &size.rows {
        assert_eq!(row.steady_speedup.is_some(), row.speedup.is_some());
    }
    // Two runs; one visit a run each, floors too.
    assert!(size.rows.iter().all(|row| row.read_runs.len() == 2
        && row.read_s > 0.0
        && row.read_min_s <= row.read_s
        && row.read_spread >= 0.0));
    // Every keycodec row is compared with halo2's row of its kind and state, run by run,
    // with an interval; compressed layouts, and the import of halo2's compressed
    // parameters, with halo2's own read of its compressed files. A row is either below its
    // floor (and has no ratio to it) or has a ratio.
    for row in size
        .rows
        .iter()
        .filter(|row| row.backend != HALO2_NATIVE && row.backend != FLOOR)
    {
        let what = format!(
            "{:?} {} {} {} {}",
            row.kind, row.backend, row.mode, row.validation, row.state
        );
        let speedup = row.speedup.unwrap();
        assert!(
            speedup.low <= speedup.estimate
                && speedup.estimate <= speedup.high
                && speedup.low > 0.0,
            "{what}"
        );
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
        assert!(row.floor_s.is_some(), "{what}");
        assert_eq!(row.below_floor, row.read_vs_floor.is_none(), "{what}");
    }
    // A cold start's floor is its two files' floors added: the parameters' and the key's.
    // The fastest samples of the floors of `kind` in `row`'s state: of `file` only, or of
    // any file.
    let floor_of = |kind: Kind, file: Option<&str>, row: &bench_harness::Row| {
        size.rows
            .iter()
            .filter(|f| {
                f.kind == kind
                    && f.backend == FLOOR
                    && file.is_none_or(|file| f.mode == file)
                    && f.state == row.state
                    && f.buffer_bytes == row.buffer_bytes
            })
            .map(|f| f.read_min_s)
            .collect::<Vec<f64>>()
    };
    let cold_starts = size.rows.iter().filter(|row| row.kind == Kind::ColdStart);
    for row in cold_starts {
        let key = floor_of(
            Kind::Pk,
            Some(&format!("{} {}", row.backend, row.mode)),
            row,
        );
        let params = floor_of(Kind::Params, None, row);
        let floor = row.floor_s.unwrap();
        assert!(
            key.iter().any(|key| params
                .iter()
                .any(|params| (key + params - floor).abs() < 1e-12)),
            "{} {} {}: {floor} from {key:?} and {params:?}",
            row.backend,
            row.mode,
            row.state
        );
    }
    // Each key row is compared with the floor of the file it reads, in its state: the floor
    // row named after its file, whose fastest sample is the row's floor.
    let key_rows = size
        .rows
        .iter()
        .filter(|row| row.kind == Kind::Pk && row.backend != FLOOR);
    for row in key_rows {
        let file = format!("{} {}", row.backend, row.mode);
        let floor = size
            .rows
            .iter()
            .find(|f| {
                f.kind == Kind::Pk
                    && f.backend == FLOOR
                    && f.mode == file
                    && f.state == row.state
                    && f.buffer_bytes == row.buffer_bytes
            })
            .unwrap_or_else(|| panic!("no floor of {file} {}", row.state));
        assert_eq!(row.floor_s, Some(floor.read_min_s), "{file} {}", row.state);
    }
    // Every file is saved in every run, keycodec's compared with halo2's durable write of
    // its kind; halo2's plain write is shown beside its durable one.
    assert!(size.saves.iter().all(|save| save.save_runs.len() == 2));
    for save in size
        .saves
        .iter()
        .filter(|save| save.backend != HALO2_NATIVE)
    {
        assert!(
            save.vs_reference.is_some(),
            "{} {}",
            save.backend,
            save.mode
        );
        assert_eq!(save.reference.as_ref().unwrap().backend, HALO2_NATIVE);
    }
    assert!(size
        .saves
        .iter()
        .any(|save| save.backend == HALO2_NATIVE && !save.durable));
    assert!(size.limits.bulk_read_s > 0.0 && size.limits.bulk_write_s > 0.0);
    assert_eq!(
        size.limits.bytes,
        size.saves
            .iter()
            .filter(|save| save.kind == Kind::Pk)
            .map(|save| save.file_bytes)
            .max()
            .unwrap()
    );

    bench_harness::report::write_json(&report, args.json.as_ref().unwrap()).unwrap();
    bench_harness::report::write_plot(&report, args.plot.as_ref().unwrap()).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(args.json.as_ref().unwrap()).unwrap())
            .unwrap();
    assert_eq!(json["circuit"], "standard-plonk");
    assert_eq!(json["full"], true);
    let sized = &json["sizes"][0];
    assert_eq!(sized["k"], 8);
    for key in ["bulk_write_s", "bulk_read_s", "bytes"] {
        assert!(sized["limits"][key].is_number(), "limits.{key}");
    }
    // Building a k = 8 domain keeps well under a MiB: only its presence is checked here.
    assert!(sized["fixture"]["domain_memory_bytes"].is_number());
    let kinds: Vec<&str> = sized["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["kind"].as_str().unwrap())
        .collect();
    for kind in ["pk", "params", "cold-start"] {
        assert!(kinds.contains(&kind), "{kind}");
    }
    let row = &sized["rows"][0];
    for key in [
        "kind",
        "backend",
        "mode",
        "validation",
        "state",
        "buffer_bytes",
        "read_s",
        "read_min_s",
        "read_spread",
        "floor_s",
        "read_vs_floor",
        "below_floor",
        "speedup",
        "file_bytes",
        "peak_rss_bytes",
        "verified",
    ] {
        assert!(row.get(key).is_some(), "rows[0].{key}");
    }
    for key in ["low", "high", "estimate", "runs"] {
        assert!(row["speedup"][key].is_number(), "speedup.{key}");
    }
    let save = &sized["saves"][0];
    for key in [
        "backend",
        "durable",
        "save_s",
        "save_runs",
        "vs_reference",
        "file_bytes",
    ] {
        assert!(save.get(key).is_some(), "saves[0].{key}");
    }
    let svg = std::fs::read_to_string(args.plot.as_ref().unwrap()).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("rkyv sections checked warm"));
    assert!(svg.contains("halo2-native RawBytes write + sync"));
    let table = bench_harness::report::table(&report);
    for section in [
        "proving key",
        "KZG parameters",
        "cold start",
        "saves",
        "machine limits",
    ] {
        assert!(table.contains(section), "{section}");
    }
}

/// The halo2-lib workload at two sizes: one report with a row set per size, a sweep table,
/// and the chart of time against key size; every key loads as the original.
#[test]
fn halo2_lib_sizes_sweep_into_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        k: None,
        ks: Some(bench_harness::KList(vec![9, 10])),
        circuit: CircuitName::Halo2Lib,
        backends: vec!["rawbytes".into(), "rkyv".into(), HALO2_NATIVE.into()],
        buffers: vec![Size::mib(1)],
        full: false,
        downsize: false,
        ..args(dir.path(), 0)
    };
    let report = run(&args).unwrap();
    assert_eq!(
        report.sizes.iter().map(|size| size.k).collect::<Vec<_>>(),
        [9, 10]
    );
    for size in &report.sizes {
        assert!(size.rows.iter().all(|row| row.verified), "k = {}", size.k);
        assert!(size.fixture.circuit_params.contains("num_advice_per_phase"));
    }
    let bytes: Vec<u64> = report
        .sizes
        .iter()
        .map(|size| {
            size.saves
                .iter()
                .find(|save| save.backend == "rawbytes" && save.kind == Kind::Pk)
                .unwrap()
                .file_bytes
        })
        .collect();
    assert!(bytes[1] > bytes[0] * 3 / 2, "{bytes:?}");
    let table = bench_harness::report::table(&report);
    assert!(
        table.contains("sweep: halo2-lib circuit, k = 9, 10"),
        "{table}"
    );
    bench_harness::report::write_plot(&report, args.plot.as_ref().unwrap()).unwrap();
    let svg = std::fs::read_to_string(args.plot.as_ref().unwrap()).unwrap();
    assert!(svg.contains("rawbytes RawBytes checked fresh"));
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
    std::fs::copy(
        circuit_cache_path::<StandardPlonk>(dir.path(), 6),
        circuit_cache_path::<StandardPlonk>(dir.path(), 7),
    )
    .unwrap();
    // (With its keygen digest: the whole of another k's cache.)
    std::fs::copy(
        dir.path().join("standard-plonk-k6.keygen-digest"),
        dir.path().join("standard-plonk-k7.keygen-digest"),
    )
    .unwrap();
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

    // A key without its circuit's configuration: rebuilt (a load needs the configuration).
    std::fs::remove_file(circuit_cache_path::<StandardPlonk>(dir.path(), 6)).unwrap();
    let unconfigured = load_or_build::<StandardPlonk>(dir.path(), 6).unwrap();
    assert!(
        unconfigured.origin.contains("no cache"),
        "{}",
        unconfigured.origin
    );
}

/// The k = 22 round trip of every backend, on the harness's cached fixture (built on first
/// use, in about two minutes). Run with `cargo test --release --workspace -- --ignored`.
#[test]
#[ignore = "k = 22: gigabytes and minutes; run with --release -- --ignored"]
fn k22_round_trip_every_backend() {
    let cache = default_cache_dir();
    let cache = cache.as_path();
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

/// `--remote` rows of `backends`, two runs, warm, on the smallest halo2-lib key, caching in
/// `cache`.
#[cfg(feature = "remote")]
fn remote_args(cache: &Path, backends: &[&str]) -> Args {
    Args {
        // A key shaped like users' (the smallest the workload builds).
        circuit: CircuitName::Halo2Lib,
        k: Some(9),
        backends: backends.iter().map(|&name| name.into()).collect(),
        remote: true,
        // moto, which the tests start anyway (s3s-fs installs from crates.io on first use).
        s3_server: bench_harness::S3ServerName::Moto,
        repeat: Some(2),
        states: vec![State::Warm],
        cache_dir: Some(cache.to_path_buf()),
        child_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_bench-harness"))),
        ..Args::defaults()
    }
}

/// `--remote` (feature `remote`): the loopback S3 server, and per backend a remote load, the plain download,
/// download-then-load, a cache hit and a local load, each compared as documented; then the
/// cold start from storage, with an empty and a warm cache, against halo2's users' download
/// then read, and their read of files already there.
#[cfg(feature = "remote")]
#[test]
fn remote_rows_compare_with_the_download_and_the_local_load() {
    let dir = tempfile::tempdir().unwrap();
    let args = remote_args(dir.path(), &["rawbytes", "rkyv"]);
    let report = run(&args).unwrap();
    let size = only(&report);
    let remote: Vec<_> = size
        .rows
        .iter()
        .filter(|row| row.kind == Kind::Remote)
        .collect();
    assert_eq!(remote.len(), 2 * 6, "six rows per backend");
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
        assert!(load.floor_s.is_some());
        assert!(row("one GET").floor_s.is_some());
        assert_eq!(
            row("cache hit").reference.as_ref().unwrap().mode,
            "local file"
        );
        // The upload is a save of its own; the local copy is not shown.
        assert!(size.saves.iter().any(|save| save.kind == Kind::Remote
            && save.backend == backend
            && save.mode == "upload"));
        assert!(!size.saves.iter().any(|save| save.mode == "local copy"));
    }
    // The cold start from storage, with the first backend, each row verified (the key
    // loaded, not generated, and both artifacts the pinned ones).
    let start: Vec<_> = size
        .rows
        .iter()
        .filter(|row| row.kind == Kind::RemoteStart)
        .collect();
    let start_row = |backend: &str, mode: &str| {
        start
            .iter()
            .find(|row| row.backend == backend && row.mode == mode)
            .unwrap_or_else(|| panic!("start {backend} {mode}"))
    };
    assert_eq!(
        start.len(),
        4,
        "{:?}",
        start.iter().map(|row| &row.mode).collect::<Vec<_>>()
    );
    assert!(start
        .iter()
        .all(|row| row.verified && row.read_runs.len() == 2));
    let cold = start_row("rawbytes", "empty cache");
    assert_eq!(cold.reference.as_ref().unwrap().mode, "download, read");
    assert!(cold.speedup.is_some());
    let warm = start_row("rawbytes", "warm cache");
    assert_eq!(warm.reference.as_ref().unwrap().mode, "files there");
    assert!(!start.iter().any(|row| row.backend == "rkyv"));
    // Its uploads and files are the plan's, not saves of their own.
    assert!(!size.saves.iter().any(|save| save.kind == Kind::RemoteStart));
    let table = bench_harness::report::table(&report);
    assert!(table.contains("object storage"));
    assert!(table.contains("cold start from storage"));
}

/// Runs the harness binary on a small workload (StandardPlonk at k = 8, rawbytes, one warm
/// run), its cache in `cache`, with `extra` flags.
fn run_small(cache: &Path, extra: &[&str]) -> std::process::Output {
    let cache = cache.display().to_string();
    let mut args = vec![
        "--circuit",
        "standard-plonk",
        "--k",
        "8",
        "--repeat",
        "1",
        "--warmup",
        "0",
        "--backends",
        "rawbytes",
        "--states",
        "warm",
        "--cache-dir",
        &cache,
    ];
    args.extend_from_slice(extra);
    std::process::Command::new(env!("CARGO_BIN_EXE_bench-harness"))
        .args(&args)
        .output()
        .unwrap()
}

/// The load check can fail: told that the original has another digest than the key keygen
/// produced, every load is `NO` and the harness exits non-zero. And the original is keygen's
/// key: its digest is stored with the cached key, and a cached key that is not it is rebuilt.
#[test]
fn a_wrong_original_makes_the_harness_fail() {
    let dir = tempfile::tempdir().unwrap();
    let harness = |extra: &[&str]| {
        let mut args = vec!["--allow-debug-build"];
        args.extend_from_slice(extra);
        run_small(dir.path(), &args)
    };
    let right = harness(&[]);
    assert!(
        right.status.success(),
        "{}",
        String::from_utf8_lossy(&right.stderr)
    );
    let digest_file = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|entry| entry.ok())
        .find(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .ends_with(".keygen-digest")
        })
        .expect("the keygen digest is stored with the cached key")
        .path();
    let wrong = "00".repeat(32);
    let out = harness(&["--original-digest", &wrong]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("differed from the original"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(" NO"));
    // A cached key that is not keygen's (its stored digest says another): rebuilt, and the
    // run passes against keygen's key again.
    std::fs::write(&digest_file, format!("{wrong}\n")).unwrap();
    let rebuilt = harness(&[]);
    assert!(
        rebuilt.status.success(),
        "{}",
        String::from_utf8_lossy(&rebuilt.stderr)
    );
    assert_ne!(std::fs::read_to_string(&digest_file).unwrap().trim(), wrong);
}

/// A harness built without optimisations (as tests build it) refuses to measure unless told
/// to, saying why; told to, its report says it compares nothing.
#[test]
fn an_unoptimised_harness_refuses_to_compare() {
    let dir = tempfile::tempdir().unwrap();
    let harness = |extra: &[&str]| run_small(dir.path(), extra);
    if !cfg!(debug_assertions) {
        return; // an optimised test build: nothing to refuse
    }
    let refused = harness(&[]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("without optimisations"), "{stderr}");
    assert!(refused.stdout.is_empty());
    let allowed = harness(&["--allow-debug-build"]);
    assert!(allowed.status.success());
    assert!(String::from_utf8_lossy(&allowed.stdout).starts_with("DEBUG BUILD"));
}

/// `--link` emulates a link to the server of `--remote`: alone it is refused, before anything
/// is measured; a link that does not parse is refused too.
#[test]
fn a_link_without_remote_rows_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (remote, link) in [(false, "cloud"), (true, "40ms,10MB/s")] {
        let args = Args {
            k: Some(9),
            remote,
            link: Some(link.into()),
            cache_dir: Some(dir.path().to_path_buf()),
            ..Args::defaults()
        };
        let error = run(&args)
            .err()
            .unwrap_or_else(|| panic!("--link {link} ran"));
        assert!(
            error.contains("--remote")
                || error.contains("LATENCY,PER_STREAM,TOTAL")
                || error.contains("no object storage"),
            "{error}"
        );
    }
}

/// `--remote --link`: the remote rows run behind the emulated link, the report names it and
/// gives its caps, and the one-GET row is left out.
#[cfg(feature = "remote")]
#[test]
fn remote_rows_behind_an_emulated_link_are_fractions_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let args = Args {
        link: Some("2ms,200MB/s,400MB/s".into()),
        ..remote_args(dir.path(), &["rawbytes"])
    };
    let report = run(&args).unwrap();
    let link = report.link.as_ref().expect("the link is reported");
    assert_eq!(link.profile, "2ms,200MB/s,400MB/s");
    assert_eq!(link.total_bytes_per_s, 400e6);
    let size = only(&report);
    let remote: Vec<_> = size
        .rows
        .iter()
        .filter(|row| row.kind == Kind::Remote)
        .collect();
    let modes: Vec<&str> = remote.iter().map(|row| row.mode).collect();
    assert_eq!(
        modes.len(),
        5,
        "five rows behind a link, no one GET: {modes:?}"
    );
    assert!(!modes.contains(&"one GET"));
    assert!(remote.iter().all(|row| row.verified));
    let text = bench_harness::report::table(&report);
    assert!(text.contains("of the link"), "{text}");
}
