//! The keycodec benchmark harness: which backend should I use for my keys and parameters,
//! on this machine, and how close does it come to what the machine allows?
//!
//! `cargo run --release -p bench-harness` builds (or loads from its cache) a proving key and
//! its KZG parameters (a halo2-lib circuit at k = 18 by default, keys shaped like users';
//! `--circuit standard-plonk` for the seed's workload, `--ks 14-20` for a size sweep), then,
//! after a warm-up run that is not counted, run after run (after the minimum of runs, only
//! the rows whose ratios are still the widest), saves every file with every backend and with halo2's own writer (`pk.write`, timed before and
//! after its `sync_all`), and times every load in an order rotated each run: the proving key
//! with every backend (checked, trusted; pinned with `--full`), the parameters, a prover's
//! cold start (parameters + key), halo2's own readers of each (`ProvingKey::read` with
//! `RawBytes` and `RawBytesUnchecked` through a 1 MiB `BufReader`), and the **floor** of each
//! file (that file read into memory allocated as a key's, over every core, with the key's
//! evaluation domain built meanwhile: what any loader of it must at least do), sampled once
//! a run; each row is compared with the floor of the file it reads. Every load runs in the
//! states asked for (`--states`; by default fresh and cold): **warm**, in the harness's own
//! process as a server replacing its key meets it (the same load run twice untimed first, the
//! first copy freed while the second is held, so that the timed load gets the memory of a
//! copy of its own size just freed, whatever ran before); **fresh**, in a new process of its
//! own (a prover's start); **cold**, a new process whose files' pages were dropped from the
//! page cache first. Each is compared with halo2's reader in the same state. Every loaded
//! artifact is checked against the original (parameters by digest, a key by its verifying
//! key's digest and each polynomial's XXH3).
//!
//! Ratios are paired: taken run by run between rows measured side by side, so that a slow
//! moment of the shared machine moves both sides; each carries a 95% interval (bootstrap over
//! the runs), and runs are added until every interval is within `--interval` (+-10%) or every
//! ratio still wider has its row measured in `--max-runs` runs, or `--time-cap` for the whole
//! run (checked after each run, before the minimum of runs: every size gets at least one;
//! after it, a run takes as many of the widest ratios' rows as fit). When standard error is
//! not a terminal (a log), each phase and each finished run is a line there. A row whose loads
//! beat their floor beyond the noise (its `x floor` interval wholly below 0.95: within 5% of
//! it, a load that reads as its floor reads ties with it) is flagged as a measurement error
//! rather than given a ratio. A ratio of one run has no interval (printed `[1 run]`) and is
//! never judged so.
//!
//! # JSON schema (`--json PATH`)
//!
//! ```text
//! {
//!   "circuit": "standard-plonk" | "dense" | "halo2-lib",
//!   "full": bool, "replace": bool, "states": ["warm" | "fresh" | "cold"],
//!   "cold": { "requested": bool, "effective": bool,    // --cold; every drop of the page cache (--cold, state cold) accepted
//!             "idle_s": f64 },                           // --cold-idle: each cold load's wait instead of a primer (0: primed)
//!   "huge_pages_asked": bool,          // keycodec's loads asked for huge pages on this machine
//!   "reads_past_page_cache": bool,     // keycodec's loads from the disk read past the page cache (O_DIRECT)
//!   "points_checked_at_once": 8,       // G1 points checked loads checked at a time: 8 (AVX-512 IFMA), 4 (AVX2) or 1
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
//!       "state": "warm" | "fresh" | "cold",
//!       "buffer_bytes": u64,
//!       "read_s": f64, "read_min_s": f64, "read_spread": f64,  // median, fastest, (max-min)/median
//!       "read_runs": [f64],            // every load, in run order
//!       "read_run_numbers": [usize],   // the run (from 1) of each: later runs measure
//!                                      // only the rows still wide
//!       "file_bytes": u64, "read_gbps": f64,
//!       "floor_s": f64 | null,         // the fastest of its floor's samples (its file,
//!                                      // state); a cold start's: of its two files', added
//!       "read_vs_floor": { "estimate", "low", "high", "runs" } | null,  // load / floor, run
//!                                      // by run (its floor's typical visit, the median
//!                                      // over the same run and the runs near it, five or
//!                                      // more; of its fastest way where it takes its
//!                                      // ways in turn, a way a run);
//!                                      // null when below_floor
//!       "below_floor": bool,           // that interval wholly below 0.95: a measurement
//!                                      // error (within 5% below 1: a tie); never for a
//!                                      // ratio of one run ("runs": 1, low = high: no
//!                                      // interval)
//!       "speedup": { "estimate", "low", "high", "runs" } | null,  // reference's load / this
//!       "steady_speedup": { ... } | null,  // the same, loads the kernel slowed left out (each
//!                                      // side's loads over 1.5x their row's median system
//!                                      // time a page fault, with the other's of that run)
//!       "reference": { "backend", "mode", "validation" } | null,  // halo2's reader, same state
//!       "peak_rss_bytes": u64 | null,  // rise of resident memory during the load (max)
//!       "huge_pages_runs": [u64],  // in huge pages after each load (empty: not measured)
//!       "read_ways": [string],  // a floor's way at each of read_runs ("read_to_end", "in
//!                                      // order", "every core", "parameters in order";
//!                                      // empty for a load)
//!       "compact_stalls": u64 | null,  // the machine's compaction stalls during the loads
//!       "cpu_runs": [{ "user_s": f64, "system_s": f64, "faults": u64 }],  // each load's
//!                                      // processor time (its threads together; in clock
//!                                      // ticks) and page faults, in the order of read_runs
//!                                      // (empty: not measured, as for a floor)
//!       "cached_before": f64 | null,  // its files' pages cached as a load began (mincore):
//!                                      // most where read from the disk, else least
//!       "verified": bool               // every load equal to the original
//!     }],
//!     "saves": [{
//!       "kind", "backend", "mode", "buffer_bytes",
//!       "durable": bool,               // false: halo2's write before its sync_all
//!       "save_s", "save_min_s", "save_spread", "save_runs": [f64], "file_bytes",
//!       "save_run_numbers": [usize],   // the run (from 1) of each of save_runs
//!       "vs_reference": { "estimate", "low", "high", "runs" } | null,  // this / halo2's write + sync
//!       "reference": { ... } | null
//!     }]
//!   }],
//!   "remote_server": "s3s-fs" | "moto" | null,
//!   "harness_peak_rss_bytes": u64 | null
//! }
//! ```

#![forbid(unsafe_code)]

pub mod driver;
pub mod exec;
pub mod fixture;
pub mod flags;
pub mod measure;
pub mod model;
pub mod params;
pub mod plan;
#[cfg(feature = "remote")]
pub mod remote;
pub mod report;
pub mod runs;
pub mod stats;
pub mod workload;

pub use driver::{run, run_child};
pub use flags::{default_cache_dir, Args, CircuitName, KList, S3ServerName};
pub use model::{Cold, FixtureInfo, Report, Row, RowId, SaveRow, SizeReport, StoppingInfo};
