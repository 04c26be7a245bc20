//! Timed saves and loads, the machine's bulk I/O limits, peak memory, and key equality.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Instant;

use halo2_proofs::plonk::{Circuit, ProvingKey};
use halo2_proofs::poly::kzg::commitment::ParamsKZG;
use halo2_proofs::poly::EvaluationDomain;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::{Bn256, Fr, G1Affine};
use keycodec::{KeyDigest, KzgParams, Validation};
use keycodec_core::{
    BufferConfig, KeyCodec, KeyCodecExt, LoadOptions, Recording, SaveOptions, Size,
};
use rayon::prelude::*;

use crate::stats::median;

/// How a benchmark file is written.
#[derive(Clone, Copy)]
pub enum Writer {
    /// A keycodec codec (one wire mode of one backend): an atomic, durable save.
    Codec(&'static dyn KeyCodec),
    /// The same save without the circuit's record (`Recording::Omit`): what the record costs.
    CodecWithoutRecord(&'static dyn KeyCodec),
    /// halo2's own `pk.write` through a 1 MiB `BufWriter`, then `sync_all`.
    Native(SerdeFormat),
}

/// The name of a halo2 `SerdeFormat`'s file layout, as the table shows it.
pub fn format_name(format: SerdeFormat) -> &'static str {
    match format {
        SerdeFormat::Processed => "Processed",
        _ => "RawBytes",
    }
}

impl Writer {
    /// The file layout's name, as the table shows it.
    pub fn mode(&self) -> &'static str {
        match self {
            Writer::Codec(codec) | Writer::CodecWithoutRecord(codec) => codec.wire_mode().name(),
            Writer::Native(format) => format_name(*format),
        }
    }
}

/// One timed write.
#[derive(Clone, Copy, Debug)]
pub struct Written {
    /// Seconds until the file was durable (`sync_all` returned).
    pub seconds: f64,
    /// Seconds until a point short of durable, where the save times one: halo2's `write`
    /// returning, before the sync; an upload behind a link having sent its last part.
    pub unsynced: Option<f64>,
}

/// Writes `pk` to `path` durably; returns the seconds taken.
///
/// # Errors
///
/// The backend's or the file system's error, as text.
pub fn write<C: Circuit<Fr, Params: keycodec::RecordableParams>>(
    writer: Writer,
    path: &Path,
    pk: &ProvingKey<G1Affine>,
    circuit_params: C::Params,
    buffer: Size,
) -> Result<Written, String> {
    let started = Instant::now();
    match writer {
        Writer::Codec(codec) | Writer::CodecWithoutRecord(codec) => {
            let save = SaveOptions {
                buffers: BufferConfig::both(buffer),
                recording: match writer {
                    Writer::CodecWithoutRecord(_) => Recording::Omit,
                    _ => Recording::Record,
                },
            };
            codec
                .save::<C, _>(path, pk, circuit_params, &save)
                .map_err(|e| e.to_string())?;
            Ok(Written {
                seconds: started.elapsed().as_secs_f64(),
                unsynced: None,
            })
        }
        Writer::Native(format) => native_write(path, buffer, |out| pk.write(out, format)),
    }
}

/// halo2's way to write a file: `File::create`, its writer through a `BufWriter`, then
/// (keycodec's saves being durable, for a like-for-like comparison) `sync_all`, timed
/// before and after the sync.
fn native_write(
    path: &Path,
    buffer: Size,
    write: impl FnOnce(&mut BufWriter<&File>) -> std::io::Result<()>,
) -> Result<Written, String> {
    let started = Instant::now();
    let written = File::create(path).and_then(|file| {
        let mut writer = BufWriter::with_capacity(buffer.as_usize(), &file);
        write(&mut writer)?;
        writer.flush()?;
        drop(writer);
        let unsynced = started.elapsed().as_secs_f64();
        file.sync_all()?;
        Ok(unsynced)
    });
    let unsynced = written.map_err(|e| format!("writing {}: {e}", path.display()))?;
    Ok(Written {
        seconds: started.elapsed().as_secs_f64(),
        unsynced: Some(unsynced),
    })
}

/// Reads the key at `path` with halo2's own `ProvingKey::read` through a `BufReader`.
///
/// # Errors
///
/// I/O errors, as text. halo2's reader panics on bad input; the harness only feeds it files
/// it has just written.
pub fn read_key_native<C: Circuit<Fr>>(
    path: &Path,
    format: SerdeFormat,
    circuit_params: C::Params,
    buffer: Size,
) -> Result<ProvingKey<G1Affine>, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let mut reader = BufReader::with_capacity(buffer.as_usize(), file);
    ProvingKey::read::<_, C>(&mut reader, format, circuit_params).map_err(|e| e.to_string())
}

/// The limits of the harness's own loads: the default ones with no memory budget (a compact
/// key's expansion of the harness's own file is not a forgery).
pub fn load_limits() -> keycodec_core::Limits {
    keycodec_core::Limits {
        memory_budget: u64::MAX,
        ..keycodec_core::Limits::default()
    }
}

/// Options for the harness's own loads: checked or trusted, pinned or not, under
/// [`load_limits`].
pub fn load_options(
    validation: Validation,
    expected_digest: Option<KeyDigest>,
    k: Option<u32>,
    buffer: Size,
) -> LoadOptions {
    LoadOptions {
        buffers: BufferConfig::both(buffer),
        validation,
        expected_k: k,
        expected_digest,
        limits: load_limits(),
        ..LoadOptions::default()
    }
}

/// Writes KZG parameters with halo2's own `write_custom` through a `BufWriter`, then
/// `sync_all`.
///
/// # Errors
///
/// I/O errors, as text.
pub fn write_params_native(
    path: &Path,
    params: &KzgParams,
    format: SerdeFormat,
    buffer: Size,
) -> Result<Written, String> {
    native_write(path, buffer, |out| params.write_custom(out, format))
}

/// Saves KZG parameters with a codec (atomically, durably).
///
/// # Errors
///
/// The codec's error, as text.
pub fn write_params(
    codec: &dyn KeyCodec,
    path: &Path,
    params: &KzgParams,
    buffer: Size,
) -> Result<Written, String> {
    let started = Instant::now();
    let save = SaveOptions {
        buffers: BufferConfig::both(buffer),
        ..SaveOptions::default()
    };
    codec
        .save_params(path, params, &save)
        .map_err(|e| e.to_string())?;
    Ok(Written {
        seconds: started.elapsed().as_secs_f64(),
        unsynced: None,
    })
}

/// Reads KZG parameters with halo2's own `ParamsKZG::read_custom` through a `BufReader`.
///
/// # Errors
///
/// I/O errors, as text. halo2's reader panics on bad input; the harness only feeds it files
/// it has just written.
pub fn read_params_native(
    path: &Path,
    format: SerdeFormat,
    buffer: Size,
) -> Result<KzgParams, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let mut reader = BufReader::with_capacity(buffer.as_usize(), file);
    ParamsKZG::<Bn256>::read_custom(&mut reader, format).map_err(|e| e.to_string())
}

/// Whether two proving keys hold the same data.
///
/// Compares every polynomial element by element (in parallel), the verifying keys' halo2
/// `RawBytes` serializations (commitments, selectors, k) and their transcript representations
/// (a hash of the pinned constraint system). That covers everything halo2's `RawBytes`
/// serialization of a proving key holds, without materialising two multi-GB byte vectors.
pub fn keys_equal(a: &ProvingKey<G1Affine>, b: &ProvingKey<G1Affine>) -> bool {
    let a_polys = poly_slices(a);
    let b_polys = poly_slices(b);
    a.get_vk().to_bytes(SerdeFormat::RawBytes) == b.get_vk().to_bytes(SerdeFormat::RawBytes)
        && a.get_vk().transcript_repr() == b.get_vk().transcript_repr()
        && a_polys.len() == b_polys.len()
        && a_polys
            .par_iter()
            .zip(b_polys.par_iter())
            .all(|(x, y)| x == y)
}

fn poly_slices(pk: &ProvingKey<G1Affine>) -> Vec<&[Fr]> {
    keycodec_core::backend_api::parts::polynomials(pk).collect()
}

/// Bytes of field elements a proving key holds in memory.
pub fn key_memory_bytes(pk: &ProvingKey<G1Affine>) -> u64 {
    poly_slices(pk)
        .iter()
        .map(|p| std::mem::size_of_val(*p) as u64)
        .sum()
}

/// Resident memory an evaluation domain like `pk`'s keeps once built: the rise of the
/// process's resident size across `EvaluationDomain::new` (its scratch space freed), or
/// `None` where resident size cannot be read. A lower bound where the allocator reuses
/// memory freed earlier.
pub fn domain_memory_bytes(pk: &ProvingKey<G1Affine>) -> Option<u64> {
    let vk = pk.get_vk();
    let before = rss::current()?;
    let domain = EvaluationDomain::<Fr>::new(vk.cs().degree() as u32, vk.get_domain().k());
    let after = rss::current()?;
    drop(domain);
    Some(after.saturating_sub(before))
}

/// The machine's own limits for `bytes` bytes, measured in the same run as the keys.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Limits {
    /// Bytes moved by each bulk operation (the largest key file's size).
    pub bytes: u64,
    /// One large write of `bytes` from memory to a file, then `sync_all` (median).
    pub bulk_write_s: f64,
    /// One `read` of the file into freshly allocated (not yet touched) memory (median).
    pub bulk_read_s: f64,
    /// The same, split into 4 MiB positioned reads (`pread`) spread over rayon's threads
    /// (median): the limit for loaders that read with every core, as keycodec's do.
    pub bulk_read_parallel_s: f64,
    /// One `read` of the file into memory touched beforehand (median; populating excluded).
    pub bulk_read_populated_s: f64,
    /// The time to populate (touch) that memory (median).
    pub populate_s: f64,
    /// The time to compute the payload checksum (XXH3-64) over `bytes` already in memory
    /// (median): what verifying integrity adds to a load at most.
    pub checksum_s: f64,
}

/// Measures bulk write and read of `bytes` bytes at `path`, `repeat` times; medians.
///
/// # Errors
///
/// I/O errors, as text.
pub fn machine_limits(
    path: &Path,
    bytes: u64,
    repeat: usize,
    cold: bool,
) -> Result<Limits, String> {
    let len = usize::try_from(bytes).map_err(|e| e.to_string())?;
    let block = vec![0x5a_u8; len.min(64 << 20)];
    let (mut writes, mut reads, mut populated, mut populate) = (vec![], vec![], vec![], vec![]);
    let mut parallel = vec![];
    let mut checksums = vec![];
    for _ in 0..repeat.max(1) {
        let started = Instant::now();
        let mut file = File::create(path).map_err(|e| e.to_string())?;
        let mut left = len;
        while left > 0 {
            let step = left.min(block.len());
            let chunk = block.get(..step).unwrap_or_default();
            file.write_all(chunk).map_err(|e| e.to_string())?;
            left -= step;
        }
        file.sync_all().map_err(|e| e.to_string())?;
        writes.push(started.elapsed().as_secs_f64());
        drop(file);

        if cold {
            keycodec_core::drop_cached_pages(path);
        }
        let started = Instant::now();
        let mut fresh = vec![0u8; len];
        File::open(path)
            .and_then(|mut f| f.read_exact(&mut fresh))
            .map_err(|e| e.to_string())?;
        reads.push(started.elapsed().as_secs_f64());
        drop(fresh);

        if cold {
            keycodec_core::drop_cached_pages(path);
        }
        let started = Instant::now();
        let mut fresh = vec![0u8; len];
        parallel_read(path, &mut fresh).map_err(|e| e.to_string())?;
        parallel.push(started.elapsed().as_secs_f64());
        drop(fresh);

        if cold {
            keycodec_core::drop_cached_pages(path);
        }
        let started = Instant::now();
        let mut touched = vec![1u8; len];
        populate.push(started.elapsed().as_secs_f64());
        let started = Instant::now();
        File::open(path)
            .and_then(|mut f| f.read_exact(&mut touched))
            .map_err(|e| e.to_string())?;
        populated.push(started.elapsed().as_secs_f64());
        let started = Instant::now();
        std::hint::black_box(twox_hash::XxHash3_64::oneshot(&touched));
        checksums.push(started.elapsed().as_secs_f64());
    }
    std::fs::remove_file(path).map_err(|e| e.to_string())?;
    Ok(Limits {
        bytes,
        bulk_write_s: median(&writes),
        bulk_read_s: median(&reads),
        bulk_read_parallel_s: median(&parallel),
        bulk_read_populated_s: median(&populated),
        populate_s: median(&populate),
        checksum_s: median(&checksums),
    })
}

/// Reads `path` into `out` with 4 MiB positioned reads spread over rayon's threads.
pub fn parallel_read(path: &Path, out: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const STEP: usize = 4 << 20;
    let file = File::open(path)?;
    out.par_chunks_mut(STEP)
        .enumerate()
        .try_for_each(|(index, piece)| file.read_exact_at(piece, (index * STEP) as u64))
}

/// Resident-memory readings of this process, from `/proc/self/status` (Linux).
pub mod rss {
    /// Current resident set size in bytes.
    pub fn current() -> Option<u64> {
        field("VmRSS:")
    }

    /// Peak resident set size (high-water mark) in bytes since start or the last reset.
    pub fn peak() -> Option<u64> {
        field("VmHWM:")
    }

    /// Held by each test that resets the high-water mark and then reads it, so that no other
    /// such test resets it in between.
    #[cfg(test)]
    pub(crate) static PEAK_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Resets the high-water mark to the current resident size. Returns whether the kernel
    /// accepted it (`/proc/self/clear_refs`, Linux 4.0+).
    pub fn reset_peak() -> bool {
        std::fs::write("/proc/self/clear_refs", "5").is_ok()
    }

    /// Anonymous memory of this process mapped by transparent huge pages, in bytes
    /// (`AnonHugePages` of `/proc/self/smaps_rollup`): how much of a load's memory the kernel
    /// gave as 2 MiB pages.
    pub fn anon_huge_pages() -> Option<u64> {
        kib_field("/proc/self/smaps_rollup", "AnonHugePages:").map(|kib| kib * 1024)
    }

    /// Times the kernel stalled an allocation to compact memory, machine-wide
    /// (`compact_stall` of `/proc/vmstat`): a fault in a `MADV_HUGEPAGE` region may wait for
    /// compaction when `defrag` is `madvise`.
    pub fn compact_stalls() -> Option<u64> {
        let vmstat = std::fs::read_to_string("/proc/vmstat").ok()?;
        vmstat
            .lines()
            .find_map(|line| line.strip_prefix("compact_stall "))?
            .trim()
            .parse()
            .ok()
    }

    fn field(name: &str) -> Option<u64> {
        kib_field("/proc/self/status", name).map(|kib| kib * 1024)
    }

    /// The kB value of the line of `file` that starts with `name`.
    fn kib_field(file: &str, name: &str) -> Option<u64> {
        let text = std::fs::read_to_string(file).ok()?;
        let line = text.lines().find(|line| line.starts_with(name))?;
        line.trim_start_matches(name)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    }
}

/// Processor time and page faults of this process, all its threads together, from
/// `/proc/self/stat` (Linux; in the kernel's clock ticks, usually 10 ms).
pub mod cpu {
    use serde::{Deserialize, Serialize};

    /// What this process had used at one moment, or between two ([`CpuUse::since`]).
    #[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
    pub struct CpuUse {
        /// Seconds its threads ran their own code.
        pub user_s: f64,
        /// Seconds the kernel ran on their behalf: mapping the memory they touch (page
        /// faults) and copying what they read.
        pub system_s: f64,
        /// Page faults, minor and major: a fresh load's memory in small pages is one fault a
        /// 4 KiB page.
        pub faults: u64,
    }

    /// Loads with fewer page faults, or less system time (counted in clock ticks, usually
    /// 10 ms), than these say little about what a fault cost.
    pub const FAULTS_TO_JUDGE: u64 = 10_000;
    /// See [`FAULTS_TO_JUDGE`].
    pub const SYSTEM_S_TO_JUDGE: f64 = 0.1;

    impl CpuUse {
        /// Microseconds of system time a page fault, where there were enough of both to
        /// tell ([`FAULTS_TO_JUDGE`], [`SYSTEM_S_TO_JUDGE`]). System time also copies what
        /// a load reads from the page cache: an upper bound on the kernel's cost of mapping
        /// a page, comparable between loads of the same row.
        #[must_use]
        pub fn fault_cost_us(&self) -> Option<f64> {
            (self.faults >= FAULTS_TO_JUDGE && self.system_s >= SYSTEM_S_TO_JUDGE)
                .then(|| self.system_s * 1e6 / self.faults as f64)
        }

        /// What was used from `before` to `self`.
        #[must_use]
        pub fn since(self, before: Self) -> Self {
            Self {
                user_s: (self.user_s - before.user_s).max(0.0),
                system_s: (self.system_s - before.system_s).max(0.0),
                faults: self.faults.saturating_sub(before.faults),
            }
        }
    }

    /// This process's use so far; `None` where `/proc/self/stat` cannot be read.
    pub fn now() -> Option<CpuUse> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        parse(&stat, rustix::param::clock_ticks_per_second())
    }

    /// The use in a `/proc/<pid>/stat` line, its times in `ticks` a second. The command name
    /// (in parentheses) may hold spaces and parentheses: fields are counted after the last
    /// `)`, from the state (field 3): `minflt` is field 10, `majflt` 12, `utime` 14,
    /// `stime` 15.
    pub(crate) fn parse(stat: &str, ticks: u64) -> Option<CpuUse> {
        let (_, fields) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = fields.split_whitespace().collect();
        let field = |number: usize| -> Option<u64> { fields.get(number - 3)?.parse().ok() };
        let seconds = |value: u64| value as f64 / ticks.max(1) as f64;
        Some(CpuUse {
            user_s: seconds(field(14)?),
            system_s: seconds(field(15)?),
            faults: field(10)?.saturating_add(field(12)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_use_is_read_after_the_command_name() {
        // A command name with a space and a parenthesis, as a process may name itself.
        let stat = "4242 (a (b) c) R 1 4242 4242 0 -1 4194560 1500 0 25 0 350 120 0 0 20 0 \
                    3 0 100 0 0";
        let used = cpu::parse(stat, 100).unwrap();
        assert_eq!(used.faults, 1525);
        assert!((used.user_s - 3.5).abs() < 1e-9 && (used.system_s - 1.2).abs() < 1e-9);
        assert_eq!(cpu::parse("4242 (x) R 1", 100), None);
        // This process's own: a read is possible, and touching fresh memory adds faults.
        let before = cpu::now().unwrap();
        // 64 MiB: more than the allocator keeps mapped for reuse (its largest mmap threshold
        // is 32 MiB), so the memory is fresh.
        let block = std::hint::black_box(vec![1u8; 64 << 20]);
        let used = cpu::now().unwrap().since(before);
        drop(block);
        // 16384 faults in small pages, 32 where the kernel gives huge pages unasked.
        assert!(used.faults >= 32, "{used:?}");
    }

    #[test]
    fn a_fault_cost_needs_enough_faults_and_time_to_tell() {
        let load = |system_s: f64, faults: u64| cpu::CpuUse {
            user_s: 0.2,
            system_s,
            faults,
        };
        assert_eq!(load(0.09, 320_000).fault_cost_us(), None);
        assert_eq!(load(0.5, 9_999).fault_cost_us(), None);
        assert!((load(1.0, 400_000).fault_cost_us().unwrap() - 2.5).abs() < 1e-9);
    }

    #[test]
    fn peak_rss_sees_a_large_allocation() {
        let _alone = rss::PEAK_TESTS.lock().unwrap_or_else(|e| e.into_inner());
        if !rss::reset_peak() {
            return; // not Linux, or clear_refs not permitted: nothing to check
        }
        let before = rss::current().unwrap();
        let block = std::hint::black_box(vec![1u8; 64 << 20]);
        let peak = rss::peak().unwrap();
        // Half of it: other tests in this process may free memory meanwhile.
        assert!(peak >= before + (32 << 20), "peak {peak} before {before}");
        drop(block);
        // Linux has both counters (a kernel without THP reports 0 huge pages, not none).
        assert!(rss::anon_huge_pages().is_some());
        assert!(rss::compact_stalls().is_some());
    }
}
