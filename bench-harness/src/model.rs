//! The report's model: what a run measured, row by row, as the tables print it and `--json`
//! writes it (the schema is in the crate's docs).

use serde::Serialize;

use crate::flags::CircuitName;
use crate::measure::cpu::CpuUse;
use crate::measure::Limits;
use crate::plan::{Kind, State};
use crate::stats::Ratio;

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
    /// The run (from 1) of each of `read_runs`: after the minimum of runs, a run measures
    /// only the rows whose ratios are still wide (with their references and floors).
    pub read_run_numbers: Vec<usize>,
    /// Bytes of every file the row reads.
    pub file_bytes: u64,
    /// Load throughput, GB/s.
    pub read_gbps: f64,
    /// The fastest sample of its file's floor in its state (a cold start's: of its two
    /// files' floors, added).
    pub floor_s: Option<f64>,
    /// This row's load over its floor, run by run (each run's load over its floor's typical
    /// visit in that run and the runs near it, five or more; where the floor takes its ways
    /// in turn, of its fastest way), with its 95% interval; `None` when
    /// [`Row::below_floor`].
    pub read_vs_floor: Option<Ratio>,
    /// Its loads beat their floor beyond the noise (the interval of
    /// [`Row::read_vs_floor`] wholly below 0.95: within 5% below 1, a load reading as its
    /// floor reads ties with it): a measurement error, not a ratio.
    pub below_floor: bool,
    /// The reference's load over this one, run by run: how many times faster than halo2's
    /// reader in the same state this row is, with its 95% interval.
    pub speedup: Option<Ratio>,
    /// The same, of the loads the kernel did not slow (on either side, a load that took more
    /// than [`crate::stats::SLOWED`] times its row's usual system time a page fault
    /// is left out, with the other side's load of its run): the comparison of the loaders
    /// where the host maps memory at its usual cost, beside [`Row::speedup`], which counts
    /// every load.
    pub steady_speedup: Option<Ratio>,
    /// The row this one is compared with (halo2's reader of the same artifact and state; for
    /// a remote load, downloading the object then loading the file; for a cache hit, a local
    /// load).
    pub reference: Option<RowId>,
    /// Rise of resident memory during the load (maximum over runs), if measurable.
    pub peak_rss_bytes: Option<u64>,
    /// The loading process's memory in transparent huge pages right after each load, run by
    /// run (in the order of `read_runs`; empty unless every load measured it): a fresh load's
    /// key in huge pages or not is what makes its time bimodal.
    pub huge_pages_runs: Vec<u64>,
    /// A floor's way of reading at each of `read_runs` (empty for a load): from the disk a
    /// floor may take its ways in turn, and this says which was which.
    pub read_ways: Vec<&'static str>,
    /// The machine's compaction stalls during this row's loads, all runs together.
    pub compact_stalls: Option<u64>,
    /// Each load's processor time and page faults, in the order of `read_runs` (empty
    /// unless every load measured them: a floor's row, a remote load's): in a fresh process
    /// the kernel's time mapping the load's memory is most of its time.
    pub cpu_runs: Vec<CpuUse>,
    /// The share of its files' pages in the page cache as its loads began (`mincore`) that
    /// is farthest from what its loads promise: the largest where they read from the disk (a
    /// cold row, every row under `--cold`: near 0), else the smallest (near 1); `None`
    /// without loads or if not measured.
    pub cached_before: Option<f64>,
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
    /// Each run's save, in run order (a file saved several times a run: the median of
    /// that run's saves).
    pub save_runs: Vec<f64>,
    /// The run (from 1) of each of `save_runs`.
    pub save_run_numbers: Vec<usize>,
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
    /// The kernel accepted every request to drop the page cache (`--cold`, the cold state;
    /// true when none was made).
    pub effective: bool,
    /// Seconds each load from the disk waited after its files' pages were dropped, instead
    /// of being primed (`--cold-idle`; 0: primed).
    pub idle_s: f64,
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

/// The emulated link of the remote rows.
#[derive(Clone, Debug, Serialize)]
pub struct LinkInfo {
    /// As given: `40ms,10MB/s,160MB/s`.
    pub profile: String,
    /// Added to every request's time to first byte.
    pub latency_s: f64,
    /// Bytes per second one connection carries.
    pub per_stream_bytes_per_s: f64,
    /// Bytes per second all connections together carry: the cap remote rows are a fraction of.
    pub total_bytes_per_s: f64,
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
    /// keycodec's loads asked for transparent huge pages ([`keycodec_core::asks_for_huge_pages`]:
    /// not where the machine's host takes back free memory); halo2's readers never do.
    pub huge_pages_asked: bool,
    /// keycodec's loads of a key or parameters from the disk read past the page cache
    /// ([`keycodec_core::reads_past_page_cache`]); halo2's readers never do.
    pub reads_past_page_cache: bool,
    /// How many G1 points keycodec's checked loads checked at a time: 8 (AVX-512 IFMA), 4
    /// (AVX2) or 1 ([`keycodec_core::points_checked_at_once`]); halo2's readers one at a time.
    pub points_checked_at_once: usize,
    /// When runs stopped.
    pub stopping: StoppingInfo,
    /// One per `k`, in the order run.
    pub sizes: Vec<SizeReport>,
    /// The loopback S3 server of the remote rows (`s3s-fs`, or `moto`), if any.
    pub remote_server: Option<&'static str>,
    /// The emulated link in front of it (`--link`), if any.
    pub link: Option<LinkInfo>,
    /// The highest resident memory the harness reached, if measurable.
    pub harness_peak_rss_bytes: Option<u64>,
}
