//! The harness's command line: its flags, their parsing, and the workloads it names.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use keycodec::KeyDigest;
use keycodec_core::Size;
use serde::{Deserialize, Serialize};

use crate::plan::{backend_names, State};
use crate::runs::Stopping;

const EXAMPLES: &str = "\
Examples:
  bench-harness
      the quick table: a halo2-lib key at k = 18 (1.1 GB), rawbytes and rkyv beside
      halo2's reader, in a new process with the file cached and read from the disk (~5 min)
  bench-harness --backends rawbytes,bincode,rkyv,compact,halo2-native --states warm,fresh,cold
      every backend in every state (longer: --time-cap 20m)
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
    /// ProvingKey::read and ParamsKZG::write_custom / read_custom, the reference. The default
    /// is the two a local prover chooses between and the reference; bincode (serde's layout)
    /// and compact (small files for slow links: see --remote --link) are measured when named
    #[arg(long, value_delimiter = ',', default_values_t = QUICK_BACKENDS.map(String::from),
          value_parser = clap::builder::PossibleValuesParser::new(backend_names()))]
    pub backends: Vec<String>,

    /// The states loads run in: warm (the harness's own process reloading: each timed load
    /// after the same load twice, the first copy freed while the second is held, as a server
    /// replacing its key meets its allocator), fresh (a new process per load: a prover's
    /// start) and cold (a new process per load, the files' pages dropped from the page cache
    /// first: a start after a deploy or a reboot, read from the disk; its floor rows are the
    /// disk's). The default is the two states a prover's start meets
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [State::Fresh, State::Cold])]
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

    /// Also each backend's key saved without the circuit's record (mode `... no record`),
    /// loaded checked: what the record costs a load, paired run by run with the rows that
    /// read it
    #[arg(long)]
    pub record_cost: bool,

    /// Buffer sizes for the BufReader / BufWriter around the file, comma-separated human
    /// sizes (B, KiB, MiB, GiB) [default: 1MiB; with --full 1KiB,8KiB,1MiB,1GiB]
    #[arg(long, value_delimiter = ',')]
    pub buffers: Vec<Size>,

    /// Exactly this many runs per size, whatever the intervals [default: until every
    /// interval is within --interval]
    #[arg(long)]
    pub repeat: Option<usize>,

    /// Warm-up runs made first at each size and not counted: the first saves and loads after
    /// the key is built meet a page cache being filled. A warm-up run writes every file and
    /// loads each once
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,

    /// Fewest runs per size before intervals are looked at
    #[arg(long, default_value_t = 5)]
    pub min_runs: usize,

    /// Most runs of each row with a ratio: after the minimum, a ratio whose row was measured
    /// in this many runs is measured no more (halo2's reader and the floors, measured with
    /// several rows, may be measured in more)
    #[arg(long, default_value_t = 20)]
    pub max_runs: usize,

    /// Runs are added until every paired ratio's 95% interval is within +- this fraction
    #[arg(long, default_value_t = 0.10)]
    pub interval: f64,

    /// The whole run's length (s, m or h: 90s, 10m, 1h), the fixture and the minimum of runs
    /// included: a run is not started when the runs so far say it would end past this;
    /// each size still gets one run, and the report says when that leaves intervals wide
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
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

    /// Drop the file's pages from the page cache before every read in every state
    /// (posix_fadvise DONTNEED), to measure reads from the disk; the report says if the
    /// kernel refused. `--states cold` is the cold state beside the others
    #[arg(long)]
    pub cold: bool,

    /// Before each load from the disk, wait this long (s or m: 3s) after dropping its files'
    /// pages instead of priming its memory just before: the memory it takes was
    /// then freed that long ago, as on a machine that idled before a prover's start. On a
    /// machine whose host takes back memory free for about two seconds (the report's memory
    /// line says so), 3s; every cold load waits, so runs take longer. At 0s cold loads are
    /// primed (the first of a run, and each after a key's load from the disk): memory just
    /// freed, the best case for a read through the page cache
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub cold_idle: Duration,

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

    /// With --remote: an emulated cloud link between the harness and the S3 server, as
    /// LATENCY,PER_STREAM,TOTAL (latency added to every request's first byte, a cap per
    /// connection, a cap for all together), or `cloud`: 40ms,10MB/s,160MB/s, an S3 stream of
    /// ~80 MB/s and a ~13 Gbit/s link scaled by 1/8 to what loopback on two cores carries
    #[arg(long, value_name = "LATENCY,PER_STREAM,TOTAL")]
    pub link: Option<String>,

    /// Run one fresh-process load (JSON) and print what it measured: how the harness runs
    /// its fresh loads
    #[arg(long, hide = true)]
    pub child: Option<String>,

    /// Take this many bytes of memory in huge pages, write every page and exit: how the
    /// harness primes the memory before a load in a new process
    #[arg(long, hide = true, value_name = "BYTES")]
    pub prime: Option<u64>,

    /// Measure even in a build without optimisations (`cargo run` without `--release`):
    /// its figures time unoptimised code and compare nothing; the report says so
    #[arg(long)]
    pub allow_debug_build: bool,

    /// The binary fresh loads run in [default: this one]
    #[arg(long, hide = true)]
    pub child_exe: Option<PathBuf>,

    /// The key digest every load must reproduce, instead of the one halo2's keygen produced
    /// (stored with the cached key): to see the check fail (a wrong digest makes every load
    /// row `NO` and the run exit non-zero)
    #[arg(long, value_name = "HEX")]
    pub original_digest: Option<KeyDigest>,
}

/// The backends measured by default: the two a prover loading local files chooses between,
/// and halo2's own reader.
pub const QUICK_BACKENDS: [&str; 3] = ["rawbytes", "rkyv", crate::plan::HALO2_NATIVE];

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
