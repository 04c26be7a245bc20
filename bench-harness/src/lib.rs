//! The keycodec benchmark harness: which backend should I use for my keys and parameters,
//! on this machine, and how close does it come to what the machine allows?
//!
//! `cargo run --release -p bench-harness` builds (or loads from its cache) the seed's
//! StandardPlonk proving key and its KZG parameters at k = 22, then, run after run, writes
//! every file and times every load in an order rotated each run: the proving key with every
//! backend (checked, trusted, pinned), the parameters with every backend that stores them,
//! a prover's cold start (parameters + key), halo2's own readers for each, and the **floor**
//! of each kind (the file read into fresh memory over every core, with the key's evaluation
//! domain built on another thread: what any loader must at least do). Every loaded artifact
//! is compared with the original. The table reports, per row, the median, the fastest run
//! and the spread, and ratios to the floor and to halo2's reader taken run by run (paired),
//! so that a slow moment of the shared machine moves both sides of a ratio. The default
//! run (one buffer, each backend's default layout checked and trusted, files written once,
//! three runs) gives a first table in a few minutes; `--full` is the sweep (every layout,
//! pinned rows, four buffers, five runs with a write each, halo2's compressed formats, the
//! import of those, a cold start per backend); `--downsize` adds the parameters downsized
//! to k - 1, which is slow at large k.
//!
//! # JSON schema (`--json PATH`)
//!
//! ```text
//! {
//!   "circuit": "standard-plonk" | "dense",
//!   "k": u32,                          // the key has 2^k rows
//!   "repeat": usize,                   // runs per row
//!   "full": bool,                      // --full
//!   "cold": { "requested": bool, "effective": bool },  // page cache dropped before reads
//!   "replace": bool,                   // saves replaced the previous run's file
//!   "fixture": { "origin": str, "seconds": f64, "key_memory_bytes": u64,
//!                "digest_s": f64, "domain_memory_bytes": u64 | null },
//!   "limits": {                        // the machine, same run, the largest key file's size
//!     "bytes": u64,
//!     "bulk_write_s": f64, "bulk_read_s": f64,
//!     "bulk_read_parallel_s": f64,     // the same read split over every core (pread)
//!     "bulk_read_populated_s": f64, "populate_s": f64,
//!     "checksum_s": f64                // XXH3-64 of `bytes` in memory
//!   },
//!   "rows": [{
//!     "kind": "pk" | "params" | "cold-start" | "remote",
//!     "backend": str,                  // a keycodec backend, "halo2-native" or "floor"
//!     "mode": str,                     // the file layout (wire mode)
//!     "validation": "checked" | "trusted" | "pinned" | "-",  // pinned: checked + digest pin
//!     "buffer_bytes": u64,
//!     "write_s": f64 | null,           // median; null for rows that read several files
//!     "write_runs": [f64],
//!     "read_s": f64,                   // median
//!     "read_min_s": f64, "read_spread": f64,   // fastest run; (max - min) / median
//!     "read_runs": [f64],
//!     "file_bytes": u64,               // every file the row reads
//!     "write_gbps": f64 | null, "read_gbps": f64,
//!     "read_vs_floor": f64 | null,     // median over runs of read / floor's read, same run
//!     "speedup_vs_reference": f64 | null,  // median over runs of the reference's read / this
//!     "reference": { "backend", "mode", "validation" } | null,  // halo2's reader; remote
//!                                      // loads: download then load; cache hits: local load
//!     "write_vs_bulk": f64 | null,     // proving-key rows: write_s / bulk_write_s
//!     "read_vs_bulk": f64 | null,      // read_s / bulk_read_s (fresh memory)
//!     "read_vs_bulk_parallel": f64 | null,
//!     "read_vs_bulk_populated": f64 | null,
//!     "peak_rss_bytes": u64 | null,    // rise of resident memory during the load (max of runs)
//!     "verified": bool                 // every load equal to the original
//!   }],
//!   "remote_server": "s3s-fs" | "moto" | null,   // --remote's loopback server
//!   "harness_peak_rss_bytes": u64 | null
//! }
//! ```

#![forbid(unsafe_code)]

pub mod fixture;
pub mod measure;
pub mod params;
pub mod plan;
#[cfg(feature = "remote")]
pub mod remote;
pub mod report;
pub mod runs;
pub mod stats;

use std::path::PathBuf;

use clap::Parser;
use keycodec::Size;
use serde::Serialize;

use measure::{rss, Limits};
use plan::{backend_names, Kind};

/// Measure saving and loading halo2 proving keys and KZG parameters with every keycodec
/// backend, against halo2's own readers and the machine's own limits.
#[derive(Parser, Debug, Clone)]
#[command(version, about, long_about = None, after_help = "\
Examples:
  bench-harness                               first table in a few minutes (k = 22)
  bench-harness --full --json report.json     the whole sweep, as JSON too
  bench-harness --k 18 --backends rawbytes,halo2-native --repeat 7")]
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
    /// ProvingKey::read and ParamsKZG::write_custom / read_custom, the reference.
    #[arg(long, value_delimiter = ',', default_values_t = backend_names().into_iter().map(String::from),
          value_parser = clap::builder::PossibleValuesParser::new(backend_names()))]
    pub backends: Vec<String>,

    /// The full sweep: every wire mode of every backend, pinned loads (checked, digest
    /// pinned), buffers of 1 KiB to 1 GiB, five runs each writing every file again,
    /// halo2's compressed (`Processed`) key and parameters (the parameters alone read in
    /// over a minute at k = 22), keycodec's import of those, and a cold start per backend.
    /// By default files are written in the first run only.
    #[arg(long)]
    pub full: bool,

    /// Also open the parameters downsized to k - 1 (`open_params` with a smaller `k`):
    /// halo2's downsize recomputes `g_lagrange` with an FFT over G1 points, a scalar
    /// multiplication per butterfly, so this row takes long at large k (tens of minutes per
    /// run at k = 22 on two cores; seconds at k = 16). Not part of `--full`.
    #[arg(long)]
    pub downsize: bool,

    /// Buffer sizes for the BufReader / BufWriter around the file, comma-separated human
    /// sizes (B, KiB, MiB, GiB) [default: 1MiB; with --full 1KiB,8KiB,1MiB,1GiB].
    #[arg(long, value_delimiter = ',')]
    pub buffers: Vec<Size>,

    /// Runs per row [default: 3; with --full 5].
    #[arg(long)]
    pub repeat: Option<usize>,

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

    /// Also measure loads from object storage: start a loopback S3 server (`--s3-server`),
    /// upload the key with each backend, and time a remote load against the plain download
    /// of the same object, downloading then loading, a cache hit and a local load. Needs
    /// the harness built with its `remote` feature (`cargo run --release -p bench-harness
    /// --features remote -- --remote`).
    #[arg(long)]
    pub remote: bool,

    /// The loopback S3 server of `--remote`: s3s-fs (file-backed, from crates.io: installed
    /// into the cache folder on first use, a few minutes), or moto (PyPI; it copies a whole
    /// object to serve each ranged GET, so large keys load slowly from it).
    #[arg(long, value_enum, default_value_t = S3ServerName::S3sFs)]
    pub s3_server: S3ServerName,
}

/// The servers `--s3-server` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum S3ServerName {
    /// s3s-fs.
    S3sFs,
    /// moto.
    Moto,
}

impl Args {
    /// The arguments of a run with every default (`bench-harness` alone).
    pub fn defaults() -> Self {
        Args::parse_from(["bench-harness"])
    }

    /// The buffers measured.
    pub fn buffer_sizes(&self) -> Vec<Size> {
        match (self.buffers.is_empty(), self.full) {
            (false, _) => self.buffers.clone(),
            (true, false) => vec![Size::mib(1)],
            (true, true) => vec![Size::kib(1), Size::kib(8), Size::mib(1), Size::gib(1)],
        }
    }

    /// Runs per row.
    pub fn runs(&self) -> usize {
        self.repeat.unwrap_or(if self.full { 5 } else { 3 }).max(1)
    }
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

/// Which row a row is compared with.
#[derive(Clone, Debug, Serialize)]
pub struct RowId {
    /// Backend name.
    pub backend: &'static str,
    /// File layout.
    pub mode: &'static str,
    /// Validation.
    pub validation: &'static str,
}

/// One row of the table: one load of one kind, backend, wire mode, validation and buffer.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// What the row loads.
    pub kind: Kind,
    /// Backend name (a keycodec backend, `halo2-native` or `floor`).
    pub backend: &'static str,
    /// The file layout (the backend's wire mode; halo2's `SerdeFormat` for halo2-native).
    pub mode: &'static str,
    /// `checked`, `trusted` (halo2's `RawBytesUnchecked` is `RawBytes` trusted), `pinned`
    /// (checked, digest pinned) or `-` (floor rows).
    pub validation: &'static str,
    /// Buffer capacity in bytes.
    pub buffer_bytes: u64,
    /// Median save time, seconds (durable: includes `sync_all`); `None` for rows reading
    /// several files.
    pub write_s: Option<f64>,
    /// Every save time.
    pub write_runs: Vec<f64>,
    /// Median load time, seconds.
    pub read_s: f64,
    /// Fastest load, seconds.
    pub read_min_s: f64,
    /// `(max - min) / median` of the loads.
    pub read_spread: f64,
    /// Every load time, in run order.
    pub read_runs: Vec<f64>,
    /// Bytes of every file the row reads.
    pub file_bytes: u64,
    /// Save throughput, GB/s (10^9 bytes).
    pub write_gbps: Option<f64>,
    /// Load throughput, GB/s.
    pub read_gbps: f64,
    /// Median over runs of this load over its kind's floor in the same run.
    pub read_vs_floor: Option<f64>,
    /// Median over runs of the reference's load ([`Row::reference`]) over this one in the
    /// same run: how many times faster than the reference this row is.
    pub speedup_vs_reference: Option<f64>,
    /// The row this one is compared with: halo2's reader of the same artifact; for a remote
    /// load, downloading the object and then loading the file; for a cache hit, loading
    /// the local file.
    pub reference: Option<RowId>,
    /// Proving-key rows: `write_s` over the bulk write of the same byte count.
    pub write_vs_bulk: Option<f64>,
    /// Proving-key rows: `read_s` over the bulk read into fresh memory.
    pub read_vs_bulk: Option<f64>,
    /// Proving-key rows: `read_s` over the parallel bulk read into fresh memory.
    pub read_vs_bulk_parallel: Option<f64>,
    /// Proving-key rows: `read_s` over the bulk read into populated memory.
    pub read_vs_bulk_populated: Option<f64>,
    /// Rise of resident memory during the load (maximum over runs), if measurable.
    pub peak_rss_bytes: Option<u64>,
    /// Whether every load gave the original.
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
    /// Runs per row.
    pub repeat: usize,
    /// `--full`.
    pub full: bool,
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
    /// The loopback S3 server of the remote rows (`s3s-fs`, or `moto`), if any.
    pub remote_server: Option<&'static str>,
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
    let params = fixture::load_or_build_params(&args.cache_dir, args.k)?;
    let pk = &fixture.pk;
    let scratch = args.cache_dir.join("scratch");
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let pin = keycodec::KeyDigest::of_pk(pk).map_err(|e| e.to_string())?;
    let digest_s = started.elapsed().as_secs_f64();
    let domain_memory_bytes = measure::domain_memory_bytes(pk);
    let preparing = fixture::spinner("preparing the runs".to_owned());
    let inputs = plan::Inputs {
        pk,
        pin,
        params: &params,
        scratch: &scratch,
        backends: &args.backends,
        full: args.full,
        downsize: args.downsize,
    };
    let plan = plan::plan::<C>(&inputs);
    preparing.finish_and_clear();
    let (buffers, repeat) = (args.buffer_sizes(), args.runs());
    let mut runner = runs::Runner::new(args, repeat);
    let mut rows = Vec::new();
    for &buffer in &buffers {
        rows.extend(runner.measure(&plan, buffer)?);
    }
    drop(plan);
    #[cfg(feature = "remote")]
    let remote_server = if args.remote {
        let buffer = buffers.first().copied().unwrap_or(Size::mib(1));
        let (remote_rows, server) =
            remote::rows::<C>(&inputs, &mut runner, buffer, args.s3_server)?;
        rows.extend(remote_rows);
        Some(server)
    } else {
        None
    };
    #[cfg(not(feature = "remote"))]
    let remote_server = match args.remote {
        true => {
            return Err("this build has no object storage: \
                cargo run --release -p bench-harness --features remote -- --remote"
                .into())
        }
        false => None,
    };
    runner.finish();
    drop(params);

    let largest = rows
        .iter()
        .filter(|row| row.kind == Kind::Pk)
        .map(|row| row.file_bytes)
        .max()
        .unwrap_or(0);
    let spinner = fixture::spinner(format!(
        "machine limits: bulk write and read of {largest} bytes"
    ));
    let limits = measure::machine_limits(&scratch.join("bulk.bin"), largest, repeat, args.cold)?;
    spinner.finish_and_clear();
    for row in rows.iter_mut().filter(|row| row.kind == Kind::Pk) {
        row.write_vs_bulk = row.write_s.map(|s| s / limits.bulk_write_s);
        row.read_vs_bulk = Some(row.read_s / limits.bulk_read_s);
        row.read_vs_bulk_parallel = Some(row.read_s / limits.bulk_read_parallel_s);
        row.read_vs_bulk_populated = Some(row.read_s / limits.bulk_read_populated_s);
    }
    let harness_peak = runner.harness_peak.max(rss::peak());
    Ok(Report {
        circuit: args.circuit,
        k: args.k,
        repeat,
        full: args.full,
        cold: Cold {
            requested: args.cold,
            effective: args.cold && runner.cold_effective,
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
        remote_server,
        harness_peak_rss_bytes: harness_peak,
    })
}
