//! The keycodec benchmark harness: which backend and buffer should I use for my keys, on
//! this machine?
//!
//! `cargo run --release -p bench-harness` builds (or loads from its cache) the seed's
//! StandardPlonk proving key at k = 22, saves and loads it with every backend and mode at
//! buffers of 1 KiB, 8 KiB, 1 MiB and 1 GiB, alongside halo2's own `pk.write` /
//! `ProvingKey::read` (`halo2-native`), checks every loaded key against the original, and
//! reports medians next to the machine's own bulk write and read of the same number of bytes,
//! measured in the same run.
//!
//! # JSON schema (`--json PATH`)
//!
//! ```text
//! {
//!   "circuit": "standard-plonk" | "dense",
//!   "k": u32,                          // the key has 2^k rows
//!   "repeat": usize,                   // runs per median
//!   "cold": { "requested": bool, "effective": bool },  // page cache dropped before reads
//!   "replace": bool,                   // saves replaced the previous run's file
//!   "fixture": { "origin": str, "seconds": f64, "key_memory_bytes": u64,
//!                "digest_s": f64, "domain_memory_bytes": u64 | null },
//!   "limits": {                        // the machine, same run, same byte count
//!     "bytes": u64,                    // = the largest key file
//!     "bulk_write_s": f64, "bulk_read_s": f64,
//!     "bulk_read_parallel_s": f64,     // the same read split over every core (pread)
//!     "bulk_read_populated_s": f64, "populate_s": f64,
//!     "checksum_s": f64                // XXH3-64 of `bytes` in memory: integrity's cost
//!   },
//!   "rows": [{
//!     "backend": str, "mode": str,     // the file layout (wire mode)
//!     "validation": "checked" | "trusted" | "pinned",  // pinned: checked, digest pinned
//!     "buffer_bytes": u64,
//!     "write_s": f64, "read_s": f64,   // medians; rows of one file share write_s
//!     "write_runs": [f64], "read_runs": [f64],
//!     "file_bytes": u64, "write_gbps": f64, "read_gbps": f64,
//!     "write_vs_bulk": f64,            // write_s / bulk_write_s
//!     "read_vs_bulk": f64,             // read_s / bulk_read_s (fresh memory)
//!     "read_vs_bulk_parallel": f64,    // read_s / bulk_read_parallel_s
//!     "read_vs_bulk_populated": f64,   // read_s / bulk_read_populated_s
//!     "peak_rss_bytes": u64 | null,    // rise of resident memory during the load (max of runs)
//!     "verified": bool                 // every load equal to the original key
//!   }],
//!   "harness_peak_rss_bytes": u64 | null
//! }
//! ```

#![forbid(unsafe_code)]

pub mod fixture;
pub mod measure;
pub mod params;
pub mod report;

use std::path::PathBuf;

use clap::Parser;
use indicatif::{ProgressBar, ProgressStyle};
use keycodec::Size;
use serde::Serialize;

use measure::{backend_names, groups, median, rss, Limits};

/// Measure saving and loading a halo2 proving key with every keycodec backend, against
/// halo2's own reader and the machine's bulk I/O limits.
#[derive(Parser, Debug, Clone)]
#[command(version, about, long_about = None)]
pub struct Args {
    /// Circuit size: the benchmark key has 2^k rows.
    #[arg(long, default_value_t = 22)]
    pub k: u32,

    /// The circuit whose key is measured: the seed's StandardPlonk (mostly zero fixed
    /// columns, a permutation close to the identity), or `dense` (a full-size constant in
    /// every usable row and one copy chain through every used cell: the compact layout's
    /// worst case).
    #[arg(long, value_enum, default_value_t = CircuitName::StandardPlonk)]
    pub circuit: CircuitName,

    /// Backends to measure, comma-separated. `halo2-native` is halo2's own pk.write /
    /// ProvingKey::read through a BufWriter / BufReader, the seed's reference.
    #[arg(long, value_delimiter = ',', default_values_t = backend_names().into_iter().map(String::from),
          value_parser = clap::builder::PossibleValuesParser::new(backend_names()))]
    pub backends: Vec<String>,

    /// Buffer sizes for the BufReader / BufWriter around the file, comma-separated human
    /// sizes (B, KiB, MiB, GiB). Memory-mapped loads (rkyv) use no read buffer.
    #[arg(long, value_delimiter = ',', default_value = "1KiB,8KiB,1MiB,1GiB")]
    pub buffers: Vec<Size>,

    /// Runs per measurement; the table shows medians.
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,

    /// Also write the results as JSON to this path (schema in the crate docs).
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Also draw read and write throughput per backend and buffer as an SVG chart here.
    #[arg(long)]
    pub plot: Option<PathBuf>,

    /// Where the generated parameters and key are cached (and benchmark files written).
    /// Put it on the disk you want to measure, not on a RAM-backed tmpfs.
    #[arg(long, default_value = DEFAULT_CACHE_DIR)]
    pub cache_dir: PathBuf,

    /// Drop the file's pages from the page cache before every read (posix_fadvise
    /// DONTNEED), to measure reads from the disk; the report says if the kernel refused.
    #[arg(long)]
    pub cold: bool,

    /// Save every run after the first over the previous run's file, as a prover updating
    /// its key does. By default each save goes to a path with no file: replacing a
    /// multi-GB file costs differently by writer (halo2's `File::create` truncates the old
    /// file before writing; keycodec's atomic save keeps it until the new one is durable,
    /// so both occupy the page cache at once), which this flag measures.
    #[arg(long)]
    pub replace: bool,
}

/// The circuits `--circuit` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CircuitName {
    /// [`codec_core::testing::StandardPlonk`], the seed's workload.
    StandardPlonk,
    /// [`codec_core::testing::DenseCircuit`] filling every usable row.
    Dense,
}

/// The default cache: the workspace's `target/bench-cache`.
pub const DEFAULT_CACHE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/bench-cache");

/// One row of the table: one backend, wire mode, validation and buffer.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Backend name (`rawbytes`, `bincode`, `rkyv`, `halo2-native`).
    pub backend: &'static str,
    /// The file layout (the backend's wire mode; halo2's `SerdeFormat` for halo2-native).
    pub mode: &'static str,
    /// `checked` or `trusted` (halo2's `RawBytesUnchecked` is `RawBytes` trusted).
    pub validation: &'static str,
    /// Buffer capacity in bytes.
    pub buffer_bytes: u64,
    /// Median save time, seconds (durable: includes `sync_all`).
    pub write_s: f64,
    /// Median load time, seconds.
    pub read_s: f64,
    /// Every save time.
    pub write_runs: Vec<f64>,
    /// Every load time.
    pub read_runs: Vec<f64>,
    /// File size in bytes.
    pub file_bytes: u64,
    /// Save throughput, GB/s (10^9 bytes).
    pub write_gbps: f64,
    /// Load throughput, GB/s.
    pub read_gbps: f64,
    /// `write_s` over the bulk write of the same byte count.
    pub write_vs_bulk: f64,
    /// `read_s` over the bulk read into fresh memory.
    pub read_vs_bulk: f64,
    /// `read_s` over the parallel bulk read into fresh memory.
    pub read_vs_bulk_parallel: f64,
    /// `read_s` over the bulk read into populated memory.
    pub read_vs_bulk_populated: f64,
    /// Rise of resident memory during the load (maximum over runs), if measurable.
    pub peak_rss_bytes: Option<u64>,
    /// Whether every loaded key equalled the original.
    pub verified: bool,
}

/// How the key was obtained.
#[derive(Clone, Debug, Serialize)]
pub struct FixtureInfo {
    /// Loaded from cache or built, and why.
    pub origin: String,
    /// Seconds spent.
    pub seconds: f64,
    /// Bytes of field elements the key holds in memory.
    pub key_memory_bytes: u64,
    /// Seconds to compute the key's digest in memory (BLAKE3 over every polynomial on every
    /// core): what a pinned load would add if it hashed in a second pass.
    pub digest_s: f64,
    /// Resident memory the key's evaluation domain (twiddle tables) keeps: the rise of
    /// this process's resident size across building one, if measurable. A loaded key
    /// holds its field elements and this; a load's resident rise is compared with the sum.
    pub domain_memory_bytes: Option<u64>,
}

/// Whether reads were cold.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Cold {
    /// `--cold` was given.
    pub requested: bool,
    /// The kernel accepted every request to drop the page cache.
    pub effective: bool,
}

/// A complete run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The circuit.
    pub circuit: CircuitName,
    /// The key has 2^k rows.
    pub k: u32,
    /// Runs per median.
    pub repeat: usize,
    /// Cold reads.
    pub cold: Cold,
    /// Saves replaced the previous run's file (`--replace`).
    pub replace: bool,
    /// The key.
    pub fixture: FixtureInfo,
    /// The machine's limits.
    pub limits: Limits,
    /// The table.
    pub rows: Vec<Row>,
    /// The highest resident memory the harness reached, if measurable.
    pub harness_peak_rss_bytes: Option<u64>,
}

/// Runs the benchmark.
///
/// # Errors
///
/// Fixture, I/O or backend failures, as text.
pub fn run(args: &Args) -> Result<Report, String> {
    match args.circuit {
        CircuitName::StandardPlonk => run_with::<codec_core::testing::StandardPlonk>(args),
        CircuitName::Dense => run_with::<codec_core::testing::DenseCircuit>(args),
    }
}

fn run_with<C: fixture::Workload>(args: &Args) -> Result<Report, String> {
    let fixture = fixture::load_or_build::<C>(&args.cache_dir, args.k)?;
    let pk = &fixture.pk;
    let scratch = args.cache_dir.join("scratch");
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let pin = keycodec::KeyDigest::of_pk(pk).map_err(|e| e.to_string())?;
    let digest_s = started.elapsed().as_secs_f64();
    let groups = groups(&args.backends, Some(pin));
    let repeat = args.repeat.max(1);
    let steps = (groups.len() * args.buffers.len() * repeat) as u64;
    let bar = ProgressBar::new(steps).with_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} ({elapsed}, ~{eta} left)")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let domain_memory_bytes = measure::domain_memory_bytes(pk);
    let mut harness_peak = rss::peak();
    let mut cold_effective = true;
    let mut rows = Vec::new();
    for group in &groups {
        for &buffer in &args.buffers {
            let path = scratch.join(format!("{}-{}.key", group.backend, group.writer.mode()));
            let mut writes = Vec::new();
            let mut reads = vec![(Vec::new(), None::<u64>, true); group.reads.len()];
            let mut file_bytes = 0;
            for run in 0..repeat {
                bar.set_message(format!(
                    "{} {} {buffer} run {}",
                    group.backend,
                    group.writer.mode(),
                    run + 1
                ));
                // Unless `--replace`, every save goes to a path with no file (see `Args`).
                if !args.replace && path.exists() {
                    std::fs::remove_file(&path).map_err(|e| e.to_string())?;
                }
                writes.push(measure::write::<C>(group.writer, &path, pk, buffer)?);
                file_bytes = std::fs::metadata(&path).map_err(|e| e.to_string())?.len();
                // The first read after a save is often slower (the kernel is still settling
                // the file it just wrote): each run starts with another mode, so that no mode
                // always pays it.
                let count = group.reads.len();
                for index in (0..count).map(|i| (i + run) % count) {
                    let (Some((_, reader)), Some((times, peak, verified))) =
                        (group.reads.get(index), reads.get_mut(index))
                    else {
                        continue;
                    };
                    if args.cold {
                        // The harness's files are clean when read: every save was synced.
                        cold_effective &= codec_core::drop_cached_pages(&path);
                    }
                    harness_peak = harness_peak.max(rss::peak());
                    let measurable = rss::reset_peak();
                    let before = rss::current();
                    let (loaded, seconds) = measure::read::<C>(*reader, &path, args.k, buffer)?;
                    let after = rss::peak();
                    harness_peak = harness_peak.max(after);
                    if let (true, Some(before), Some(after)) = (measurable, before, after) {
                        *peak = Some(peak.unwrap_or(0).max(after.saturating_sub(before)));
                    }
                    *verified &= measure::keys_equal(pk, &loaded);
                    drop(loaded);
                    times.push(seconds);
                }
                bar.inc(1);
            }
            std::fs::remove_file(&path).map_err(|e| e.to_string())?;
            for ((validation, _), (times, peak, verified)) in group.reads.iter().zip(reads) {
                let (write_s, read_s) = (median(&writes), median(&times));
                rows.push(Row {
                    backend: group.backend,
                    mode: group.writer.mode(),
                    validation,
                    buffer_bytes: buffer.0,
                    write_s,
                    read_s,
                    write_runs: writes.clone(),
                    read_runs: times,
                    file_bytes,
                    write_gbps: file_bytes as f64 / write_s / 1e9,
                    read_gbps: file_bytes as f64 / read_s / 1e9,
                    write_vs_bulk: f64::NAN,
                    read_vs_bulk: f64::NAN,
                    read_vs_bulk_parallel: f64::NAN,
                    read_vs_bulk_populated: f64::NAN,
                    peak_rss_bytes: peak,
                    verified,
                });
            }
        }
    }
    bar.finish_and_clear();

    let largest = rows.iter().map(|row| row.file_bytes).max().unwrap_or(0);
    let spinner = fixture::spinner(format!(
        "machine limits: bulk write and read of {largest} bytes"
    ));
    let limits = measure::machine_limits(&scratch.join("bulk.bin"), largest, repeat, args.cold)?;
    spinner.finish_and_clear();
    for row in &mut rows {
        row.write_vs_bulk = row.write_s / limits.bulk_write_s;
        row.read_vs_bulk = row.read_s / limits.bulk_read_s;
        row.read_vs_bulk_parallel = row.read_s / limits.bulk_read_parallel_s;
        row.read_vs_bulk_populated = row.read_s / limits.bulk_read_populated_s;
    }
    harness_peak = harness_peak.max(rss::peak());
    Ok(Report {
        circuit: args.circuit,
        k: args.k,
        repeat,
        cold: Cold {
            requested: args.cold,
            effective: args.cold && cold_effective,
        },
        replace: args.replace,
        fixture: FixtureInfo {
            origin: fixture.origin.clone(),
            seconds: fixture.seconds,
            key_memory_bytes: measure::key_memory_bytes(pk),
            digest_s,
            domain_memory_bytes,
        },
        limits,
        rows,
        harness_peak_rss_bytes: harness_peak,
    })
}
