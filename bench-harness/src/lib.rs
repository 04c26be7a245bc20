//! The keycodec benchmark harness: which backend should I use for my keys and parameters,
//! on this machine, and how close does it come to what the machine allows?
//!
//! `cargo run --release -p bench-harness` builds (or loads from its cache) a proving key and
//! its KZG parameters (a halo2-lib circuit at k = 18 by default, keys shaped like users';
//! `--circuit standard-plonk` for the seed's workload, `--ks 14-20` for a size sweep), then,
//! after a warm-up run that is not counted, run after run, saves
//! every file with every backend and with halo2's own writer (`pk.write`, timed before and
//! after its `sync_all`), and times every load in an order rotated each run: the proving key
//! with every backend (checked, trusted; pinned with `--full`), the parameters, a prover's
//! cold start (parameters + key), halo2's own readers of each (`ProvingKey::read` with
//! `RawBytes` and `RawBytesUnchecked` through a 1 MiB `BufReader`), and the **floor** of each
//! file (that file read into memory allocated as a key's, over every core, with the key's
//! evaluation domain built meanwhile: what any loader of it must at least do), sampled four
//! times a run; each row is compared with the floor of the file it reads. Every load runs in two states: **warm**, in the harness's own process after other
//! loads (the allocator hands back the memory the last key freed: a server reloading), and
//! **fresh**, in a new process of its own (a prover's start); each is compared with halo2's
//! reader in the same state. Every loaded artifact is checked against the original (by
//! digest).
//!
//! Ratios are paired: taken run by run between rows measured side by side, so that a slow
//! moment of the shared machine moves both sides; each carries a 95% interval (bootstrap
//! over the runs), and runs are added until every interval is within `--interval` (+-10%)
//! or `--max-runs` / `--time-cap` is reached. A row whose fastest load beats its floor's
//! fastest is flagged as a measurement error rather than given a ratio.
//!
//! # JSON schema (`--json PATH`)
//!
//! ```text
//! {
//!   "circuit": "standard-plonk" | "dense" | "halo2-lib",
//!   "full": bool, "replace": bool, "states": ["warm" | "fresh"],
//!   "cold": { "requested": bool, "effective": bool },  // page cache dropped before reads
//!   "stopping": { "warmup": usize, "fixed": usize | null, "min_runs", "max_runs",
//!                 "interval": f64, "time_cap_s": f64 },
//!   "sizes": [{                        // one per k, in the order run
//!     "k": u32,                        // the key has 2^k rows
//!     "runs": usize, "stopped": str,   // runs made, and why they stopped
//!     "seconds": f64,                  // wall time of this k's runs
//!     "fixture": { "origin": str, "seconds": f64, "circuit_params": str (JSON),
//!                  "key_memory_bytes": u64, "digest_s": f64,
//!                  "domain_memory_bytes": u64 | null },
//!     "limits": { "bytes", "bulk_write_s", "bulk_read_s", "bulk_read_parallel_s",
//!                 "bulk_read_populated_s", "populate_s", "checksum_s" },  // same run
//!     "rows": [{                       // loads
//!       "kind": "pk" | "params" | "cold-start" | "remote" | "remote-start",
//!       "backend": str,                // a keycodec backend, "halo2-native" or "floor"
//!       "mode": str,                   // the file layout (wire mode)
//!       "validation": "checked" | "trusted" | "pinned" | "-",
//!       "state": "warm" | "fresh",
//!       "buffer_bytes": u64,
//!       "read_s": f64, "read_min_s": f64, "read_spread": f64,  // median, fastest, (max-min)/median
//!       "read_runs": [f64],            // every load, in run order
//!       "file_bytes": u64, "read_gbps": f64,
//!       "floor_s": f64 | null,         // the fastest of its floor's samples (kind, state)
//!       "read_vs_floor": f64 | null,   // read_s / floor_s; null when below_floor
//!       "below_floor": bool,           // its fastest load beat the floor: a measurement error
//!       "speedup": { "estimate", "low", "high", "runs" } | null,  // reference's load / this
//!       "reference": { "backend", "mode", "validation" } | null,  // halo2's reader, same state
//!       "peak_rss_bytes": u64 | null,  // rise of resident memory during the load (max)
//!       "verified": bool               // every load equal to the original
//!     }],
//!     "saves": [{
//!       "kind", "backend", "mode", "buffer_bytes",
//!       "durable": bool,               // false: halo2's write before its sync_all
//!       "save_s", "save_min_s", "save_spread", "save_runs": [f64], "file_bytes",
//!       "vs_reference": { "estimate", "low", "high", "runs" } | null,  // this / halo2's write + sync
//!       "reference": { ... } | null
//!     }]
//!   }],
//!   "remote_server": "s3s-fs" | "moto" | null,
//!   "harness_peak_rss_bytes": u64 | null
//! }
//! ```

#![forbid(unsafe_code)]

pub mod exec;
pub mod fixture;
pub mod measure;
pub mod params;
pub mod plan;
#[cfg(feature = "remote")]
pub mod remote;
pub mod report;
pub mod runs;
pub mod stats;
pub mod workload;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use codec_core::testing::halo2_lib::Halo2LibCircuit;
use codec_core::testing::{DenseCircuit, StandardPlonk};
use halo2_proofs::poly::commitment::Params as _;
use keycodec::{KeyDigest, Size};
use serde::{Deserialize, Serialize};

use measure::{rss, Limits};
use plan::{backend_names, Kind, State};
use runs::{Runner, Stopping};
use stats::Ratio;
use workload::Workload;

const EXAMPLES: &str = "\
Examples:
  bench-harness
      the quick table: a halo2-lib key at k = 18 (1.1 GB), every backend (minutes)
  bench-harness --ks 14-20:2 --json sweep.json --plot sweep.svg
      keys shaped like users' at every size this machine holds, as JSON and a chart
  bench-harness --circuit standard-plonk --k 22 --backends rawbytes,rkyv,halo2-native
      the seed's workload: a 2.5 GB key of mostly zero columns
  bench-harness --k 18 --backends rawbytes,halo2-native --states fresh
      one backend against halo2's reader, each load in a new process
  bench-harness --full --repeat 5
      every layout, pinned loads, four buffers, exactly five runs";

/// Measure saving and loading halo2 proving keys and KZG parameters with every keycodec
/// backend, against halo2's own writer and readers and the machine's own limits.
#[derive(Parser, Debug, Clone)]
#[command(version, about, long_about = None, after_help = EXAMPLES)]
pub struct Args {
    /// Circuit size: the key has 2^k rows [default: 18]
    #[arg(long, conflicts_with = "ks")]
    pub k: Option<u32>,

    /// Several circuit sizes, measured one after the other into one report: a list
    /// (14,16,18), a range (14-20) or a range with a step (14-22:2)
    #[arg(long, value_parser = parse_ks)]
    pub ks: Option<KList>,

    /// The circuit whose key is measured
    #[arg(long, value_enum, default_value_t = CircuitName::Halo2Lib)]
    pub circuit: CircuitName,

    /// Backends to measure, comma-separated; halo2-native is halo2's own pk.write /
    /// ProvingKey::read and ParamsKZG::write_custom / read_custom, the reference
    #[arg(long, value_delimiter = ',', default_values_t = backend_names().into_iter().map(String::from),
          value_parser = clap::builder::PossibleValuesParser::new(backend_names()))]
    pub backends: Vec<String>,

    /// The states loads run in: warm (the harness's own process, after other loads: a
    /// server reloading) and fresh (a new process per load: a prover's start)
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [State::Warm, State::Fresh])]
    pub states: Vec<State>,

    /// The full sweep: every wire mode of every backend, pinned loads (checked, digest
    /// pinned), buffers of 1 KiB to 1 GiB, halo2's compressed (Processed) key and parameters
    /// (the parameters alone read in over a minute at k = 22), keycodec's import of those,
    /// and a cold start per backend
    #[arg(long)]
    pub full: bool,

    /// Also open the parameters downsized to k - 1: halo2's downsize recomputes g_lagrange
    /// with an FFT over G1 points, a scalar multiplication per butterfly, so this row takes
    /// long at large k (tens of minutes per run at k = 22 on two cores; seconds at k = 16);
    /// not part of --full
    #[arg(long)]
    pub downsize: bool,

    /// Buffer sizes for the BufReader / BufWriter around the file, comma-separated human
    /// sizes (B, KiB, MiB, GiB) [default: 1MiB; with --full 1KiB,8KiB,1MiB,1GiB]
    #[arg(long, value_delimiter = ',')]
    pub buffers: Vec<Size>,

    /// Exactly this many runs per size, whatever the intervals [default: until every
    /// interval is within --interval]
    #[arg(long)]
    pub repeat: Option<usize>,

    /// Runs made first at each size and not counted: the first saves and loads after the
    /// key is built meet a page cache being filled
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,

    /// Fewest runs per size before intervals are looked at
    #[arg(long, default_value_t = 5)]
    pub min_runs: usize,

    /// Most runs per size
    #[arg(long, default_value_t = 20)]
    pub max_runs: usize,

    /// Runs are added until every paired ratio's 95% interval is within +- this fraction
    #[arg(long, default_value_t = 0.10)]
    pub interval: f64,

    /// Stop adding runs to a size after this long (s, m or h: 90s, 10m, 1h)
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub time_cap: Duration,

    /// Also write the results as JSON to this path (schema in the crate docs)
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Also draw load and save time against key size per backend, with halo2's reader and
    /// writer, as an SVG chart here
    #[arg(long)]
    pub plot: Option<PathBuf>,

    /// Where the generated parameters and keys are cached and the benchmark files written
    /// (put it on the disk you want to measure, not on a RAM-backed tmpfs) [default:
    /// target/bench-cache in the workspace]
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,

    /// Drop the file's pages from the page cache before every read (posix_fadvise
    /// DONTNEED), to measure reads from the disk; the report says if the kernel refused
    #[arg(long)]
    pub cold: bool,

    /// Save every run after the first over the previous run's file, as a prover updating
    /// its key does; by default each save goes to a path with no file (replacing a
    /// multi-GB file costs differently by writer: halo2's File::create truncates the old
    /// file first, keycodec's atomic save keeps it until the new one is durable)
    #[arg(long)]
    pub replace: bool,

    /// Also measure loads from object storage: start a loopback S3 server (--s3-server),
    /// upload the key with each backend, and time a remote load against the plain download
    /// of the same object, downloading then loading, a cache hit and a local load; needs
    /// the harness built with its remote feature (cargo run --release -p bench-harness
    /// --features remote -- --remote)
    #[arg(long)]
    pub remote: bool,

    /// The loopback S3 server of --remote: s3s-fs (file-backed, from crates.io: installed
    /// into the cache folder on first use, a few minutes), or moto (PyPI; it copies a whole
    /// object to serve each ranged GET, so large keys load slowly from it)
    #[arg(long, value_enum, default_value_t = S3ServerName::S3sFs)]
    pub s3_server: S3ServerName,

    /// Run one fresh-process load (JSON) and print what it measured: how the harness runs
    /// its fresh loads
    #[arg(long, hide = true)]
    pub child: Option<String>,

    /// The binary fresh loads run in [default: this one]
    #[arg(long, hide = true)]
    pub child_exe: Option<PathBuf>,

    /// The key digest every load must reproduce, instead of the one halo2's keygen produced
    /// (stored with the cached key): to see the check fail (a wrong digest makes every load
    /// row `NO` and the run exit non-zero)
    #[arg(long, value_name = "HEX")]
    pub original_digest: Option<KeyDigest>,
}

/// The sizes `--ks` takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KList(pub Vec<u32>);

/// `14,16,18`, `14-20` or `14-22:2` (items may mix: `14,16-18`).
fn parse_ks(text: &str) -> Result<KList, String> {
    let mut ks = Vec::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let number = |text: &str| {
            text.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{text}` is not a k"))
        };
        match item.split_once('-') {
            None => ks.push(number(item)?),
            Some((from, rest)) => {
                let (to, step) = match rest.split_once(':') {
                    Some((to, step)) => (number(to)?, number(step)?.max(1)),
                    None => (number(rest)?, 1),
                };
                let from = number(from)?;
                if to < from {
                    return Err(format!("`{item}` goes down"));
                }
                ks.extend((from..=to).step_by(step as usize));
            }
        }
    }
    if ks.is_empty() {
        return Err("no k given".into());
    }
    Ok(KList(ks))
}

/// `90s`, `10m`, `1h`, or plain seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_alphabetic()) {
        Some((at, _)) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (90s, 10m, 1h)"))?;
    let scale = match unit.trim() {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("unknown unit `{other}` (s, m, h)")),
    };
    Duration::try_from_secs_f64(value * scale).map_err(|e| e.to_string())
}

/// The servers `--s3-server` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum S3ServerName {
    /// A file-backed server from crates.io: serves a range at the cost of that range
    S3sFs,
    /// The tests' server, from PyPI: copies the whole object to serve each ranged GET
    Moto,
}

impl Args {
    /// The arguments of a run with every default (`bench-harness` alone).
    pub fn defaults() -> Self {
        Args::parse_from(["bench-harness"])
    }

    /// The sizes measured, in order.
    pub fn sizes(&self) -> Vec<u32> {
        match (&self.ks, self.k) {
            (Some(ks), _) => ks.0.clone(),
            (None, Some(k)) => vec![k],
            (None, None) => vec![18],
        }
    }

    /// The buffers measured.
    pub fn buffer_sizes(&self) -> Vec<Size> {
        match (self.buffers.is_empty(), self.full) {
            (false, _) => self.buffers.clone(),
            (true, false) => vec![Size::mib(1)],
            (true, true) => vec![Size::kib(1), Size::kib(8), Size::mib(1), Size::gib(1)],
        }
    }

    /// When runs stop.
    pub fn stopping(&self) -> Stopping {
        Stopping {
            warmup: self.warmup,
            fixed: self.repeat.map(|runs| runs.max(1)),
            min_runs: self.min_runs.max(1),
            max_runs: self.max_runs.max(self.min_runs.max(1)),
            interval: self.interval,
            time_cap: self.time_cap,
        }
    }

    /// The cache folder.
    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(default_cache_dir)
    }
}

/// The workspace's `target/bench-cache`.
pub fn default_cache_dir() -> PathBuf {
    let harness = Path::new(env!("CARGO_MANIFEST_DIR"));
    harness
        .parent()
        .unwrap_or(harness)
        .join("target")
        .join("bench-cache")
}

/// The circuits `--circuit` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CircuitName {
    /// The seed's StandardPlonk: mostly zero fixed columns, a permutation close to the
    /// identity
    StandardPlonk,
    /// A full-size constant in every usable row and one copy chain through every used cell:
    /// the compact layout's worst case
    Dense,
    /// halo2-lib's circuit builder (halo2-base 0.5.5), 30 advice columns of Poseidon hashes
    /// with 64-bit range checks through a lookup table: keys shaped like users' (71 MB at
    /// k = 14, doubling with each k)
    #[value(name = "halo2-lib")]
    #[serde(rename = "halo2-lib")]
    Halo2Lib,
}

impl CircuitName {
    /// How the report names it.
    pub fn title(self) -> &'static str {
        match self {
            CircuitName::StandardPlonk => "StandardPlonk",
            CircuitName::Dense => "dense circuit",
            CircuitName::Halo2Lib => "halo2-lib circuit",
        }
    }
}

/// Which row a row is compared with.
#[derive(Clone, Debug, Serialize)]
pub struct RowId {
    /// Backend name.
    pub backend: &'static str,
    /// File layout.
    pub mode: &'static str,
    /// Validation (for saves: what was timed).
    pub validation: &'static str,
}

/// One load row: one kind, backend, wire mode, validation, state and buffer.
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
    /// `warm` or `fresh` (see [`State`]).
    pub state: &'static str,
    /// Buffer capacity in bytes.
    pub buffer_bytes: u64,
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
    /// Load throughput, GB/s.
    pub read_gbps: f64,
    /// The fastest sample of its floor (same kind, same state).
    pub floor_s: Option<f64>,
    /// `read_s` over the floor; `None` when [`Row::below_floor`].
    pub read_vs_floor: Option<f64>,
    /// Its fastest load beat the floor's fastest: a measurement error, not a ratio.
    pub below_floor: bool,
    /// The reference's load over this one, run by run: how many times faster than halo2's
    /// reader in the same state this row is, with its 95% interval.
    pub speedup: Option<Ratio>,
    /// The row this one is compared with (halo2's reader of the same artifact and state; for
    /// a remote load, downloading the object then loading the file; for a cache hit, a local
    /// load).
    pub reference: Option<RowId>,
    /// Rise of resident memory during the load (maximum over runs), if measurable.
    pub peak_rss_bytes: Option<u64>,
    /// Whether every load gave the original.
    pub verified: bool,
}

/// One save row: one writer of one file.
#[derive(Clone, Debug, Serialize)]
pub struct SaveRow {
    /// What the file holds.
    pub kind: Kind,
    /// Who wrote it.
    pub backend: &'static str,
    /// Its layout.
    pub mode: &'static str,
    /// Timed until durable (keycodec's saves; halo2's `write` then `sync_all`), or halo2's
    /// `write` alone.
    pub durable: bool,
    /// Buffer capacity in bytes.
    pub buffer_bytes: u64,
    /// Median seconds.
    pub save_s: f64,
    /// Fastest.
    pub save_min_s: f64,
    /// `(max - min) / median`.
    pub save_spread: f64,
    /// Every save, in run order.
    pub save_runs: Vec<f64>,
    /// The file's size.
    pub file_bytes: u64,
    /// This save over the reference's, run by run, with its 95% interval.
    pub vs_reference: Option<Ratio>,
    /// halo2's `write` + `sync_all` of the same kind.
    pub reference: Option<RowId>,
}

/// How the key was obtained.
#[derive(Clone, Debug, Serialize)]
pub struct FixtureInfo {
    /// Loaded from cache or built, and why.
    pub origin: String,
    /// Seconds spent.
    pub seconds: f64,
    /// The circuit's configuration (JSON; `null` for circuits without one).
    pub circuit_params: String,
    /// Bytes of field elements the key holds in memory.
    pub key_memory_bytes: u64,
    /// Seconds to compute the key's digest in memory (BLAKE3 over every polynomial on every
    /// core): what a pinned load would add if it hashed in a second pass.
    pub digest_s: f64,
    /// Resident memory the key's evaluation domain (twiddle tables) keeps: the rise of
    /// this process's resident size across building one, if measurable.
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

/// When runs stopped, as asked.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct StoppingInfo {
    /// `--warmup`: runs not counted.
    pub warmup: usize,
    /// `--repeat`.
    pub fixed: Option<usize>,
    /// `--min-runs`.
    pub min_runs: usize,
    /// `--max-runs`.
    pub max_runs: usize,
    /// `--interval`.
    pub interval: f64,
    /// `--time-cap`, seconds.
    pub time_cap_s: f64,
}

/// Everything measured at one `k`.
#[derive(Clone, Debug, Serialize)]
pub struct SizeReport {
    /// The key has 2^k rows.
    pub k: u32,
    /// Runs made.
    pub runs: usize,
    /// Why they stopped.
    pub stopped: String,
    /// Wall time of this size's runs.
    pub seconds: f64,
    /// The key.
    pub fixture: FixtureInfo,
    /// The machine's limits.
    pub limits: Limits,
    /// The loads.
    pub rows: Vec<Row>,
    /// The saves.
    pub saves: Vec<SaveRow>,
}

/// A complete run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The circuit.
    pub circuit: CircuitName,
    /// `--full`.
    pub full: bool,
    /// Saves replaced the previous run's file (`--replace`).
    pub replace: bool,
    /// The states loads ran in.
    pub states: Vec<State>,
    /// Cold reads.
    pub cold: Cold,
    /// When runs stopped.
    pub stopping: StoppingInfo,
    /// One per `k`, in the order run.
    pub sizes: Vec<SizeReport>,
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
        CircuitName::StandardPlonk => run_with::<StandardPlonk>(args),
        CircuitName::Dense => run_with::<DenseCircuit>(args),
        CircuitName::Halo2Lib => run_with::<Halo2LibCircuit>(args),
    }
}

/// Runs one fresh-process load (`--child`) and returns what to print.
///
/// # Errors
///
/// The load's failure, as text.
pub fn run_child(request: &str) -> Result<String, String> {
    let request: exec::ChildRequest =
        serde_json::from_str(request).map_err(|e| format!("--child: {e}"))?;
    match request.circuit {
        CircuitName::StandardPlonk => exec::child::<StandardPlonk>(&request),
        CircuitName::Dense => exec::child::<DenseCircuit>(&request),
        CircuitName::Halo2Lib => exec::child::<Halo2LibCircuit>(&request),
    }
}

fn run_with<C: Workload>(args: &Args) -> Result<Report, String> {
    if let Some(k) = args.sizes().into_iter().find(|&k| k < C::MIN_K) {
        return Err(format!(
            "the {} circuit needs k >= {} (asked for {k})",
            C::NAME,
            C::MIN_K
        ));
    }
    let mut runner = Runner::new(args.stopping(), args.replace, args.cold);
    let mut sizes = Vec::new();
    let mut remote_server = None;
    for k in args.sizes() {
        let (size, server) = run_size::<C>(args, k, &mut runner)?;
        sizes.push(size);
        remote_server = remote_server.or(server);
    }
    runner.finish();
    let stopping = args.stopping();
    Ok(Report {
        circuit: args.circuit,
        full: args.full,
        replace: args.replace,
        states: args.states.clone(),
        cold: Cold {
            requested: args.cold,
            effective: args.cold && runner.cold_effective,
        },
        stopping: StoppingInfo {
            warmup: stopping.warmup,
            fixed: stopping.fixed,
            min_runs: stopping.min_runs,
            max_runs: stopping.max_runs,
            interval: stopping.interval,
            time_cap_s: stopping.time_cap.as_secs_f64(),
        },
        sizes,
        remote_server,
        harness_peak_rss_bytes: runner.harness_peak.max(rss::peak()),
    })
}

/// Measures everything at `k`.
fn run_size<C: Workload>(
    args: &Args,
    k: u32,
    runner: &mut Runner,
) -> Result<(SizeReport, Option<&'static str>), String> {
    let cache_dir = args.cache_dir();
    let fixture = fixture::load_or_build::<C>(&cache_dir, k)?;
    let params = fixture::load_or_build_params(&cache_dir, k)?;
    let pk = &fixture.pk;
    let scratch = cache_dir.join("scratch");
    std::fs::create_dir_all(&scratch).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let loaded_digest = KeyDigest::of_pk(pk).map_err(|e| e.to_string())?;
    let digest_s = started.elapsed().as_secs_f64();
    // The original is the key keygen produced: its digest was computed from keygen's key and
    // stored with the cache, and the cached key was loaded pinned to it.
    if loaded_digest != fixture.keygen_digest {
        return Err(format!(
            "the fixture's key has digest {loaded_digest}, keygen's had {}",
            fixture.keygen_digest
        ));
    }
    let pin = args.original_digest.unwrap_or(fixture.keygen_digest);
    let params_digest = KeyDigest::of_params(&params).map_err(|e| e.to_string())?;
    let downsized = match (args.downsize, params.k()) {
        (true, params_k) if params_k > 1 => {
            let mut smaller = params.clone();
            smaller.downsize(params_k - 1);
            Some(
                KeyDigest::of_params(&smaller)
                    .map_err(|e| e.to_string())?
                    .to_string(),
            )
        }
        _ => None,
    };
    let domain_memory_bytes = measure::domain_memory_bytes(pk);
    let circuit_params = workload::params_to_json::<C>(&fixture.circuit_params)?;
    let child = plan::ChildSpec {
        exe: match &args.child_exe {
            Some(exe) => exe.clone(),
            None => std::env::current_exe().map_err(|e| format!("the harness binary: {e}"))?,
        },
        circuit: args.circuit,
        circuit_params: circuit_params.clone(),
    };
    let inputs = plan::Inputs::<C> {
        pk,
        circuit_params: &fixture.circuit_params,
        target: exec::Target {
            k,
            key: pin.to_string(),
            params: params_digest.to_string(),
            downsized,
        },
        params: &params,
        scratch: &scratch,
        backends: &args.backends,
        full: args.full,
        downsize: args.downsize,
        states: &args.states,
        child: &child,
    };
    let plan = plan::plan::<C>(&inputs);
    let mut rows = Vec::new();
    let mut saves = Vec::new();
    let (mut runs, mut stopped) = (0, String::new());
    let buffers = args.buffer_sizes();
    for &buffer in &buffers {
        let measured = runner.measure(&plan, buffer)?;
        rows.extend(measured.rows);
        saves.extend(measured.saves);
        (runs, stopped) = (measured.runs, measured.stopped);
    }
    drop(plan);
    #[cfg(feature = "remote")]
    let remote_server = if args.remote {
        let buffer = buffers.first().copied().unwrap_or(Size::mib(1));
        let (remote, server) = remote::rows::<C>(&inputs, runner, buffer, args.s3_server)?;
        rows.extend(remote.rows);
        saves.extend(remote.saves);
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
    drop(params);

    let largest = saves
        .iter()
        .filter(|save| save.kind == Kind::Pk)
        .map(|save| save.file_bytes)
        .max()
        .unwrap_or(0);
    let spinner = fixture::spinner(format!(
        "machine limits: bulk write and read of {largest} bytes"
    ));
    let limits = measure::machine_limits(&scratch.join("bulk.bin"), largest, 3, args.cold)?;
    spinner.finish_and_clear();
    Ok((
        SizeReport {
            k,
            runs,
            stopped,
            seconds: started.elapsed().as_secs_f64(),
            fixture: FixtureInfo {
                origin: fixture.origin.clone(),
                seconds: fixture.seconds,
                circuit_params,
                key_memory_bytes: measure::key_memory_bytes(pk),
                digest_s,
                domain_memory_bytes,
            },
            limits,
            rows,
            saves,
        },
        remote_server,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_lists_and_ranges() {
        assert_eq!(parse_ks("14,16,18"), Ok(KList(vec![14, 16, 18])));
        assert_eq!(parse_ks("14-17"), Ok(KList(vec![14, 15, 16, 17])));
        assert_eq!(parse_ks("14-22:2"), Ok(KList(vec![14, 16, 18, 20, 22])));
        assert_eq!(parse_ks("12, 14-16"), Ok(KList(vec![12, 14, 15, 16])));
        for bad in ["", "x", "18-14", "14-", "14-16:x"] {
            assert!(parse_ks(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
