//! Timed saves and loads, the machine's bulk I/O limits, peak memory, and key equality.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Instant;

use halo2_proofs::plonk::{Circuit, ProvingKey};
use halo2_proofs::poly::EvaluationDomain;
use halo2_proofs::SerdeFormat;
use halo2curves::bn256::{Fr, G1Affine};
use keycodec::{
    Backend, BufferConfig, KeyCodec, KeyCodecExt, KeyDigest, LoadOptions, SaveOptions, Size,
    Validation,
};
use rayon::prelude::*;

/// How a benchmark file is written.
#[derive(Clone, Copy)]
pub enum Writer {
    /// A keycodec codec (one wire mode of one backend).
    Codec(&'static dyn KeyCodec),
    /// halo2's own `pk.write` through a `BufWriter`, then `sync_all`.
    Native(SerdeFormat),
}

/// How a benchmark file is read back.
#[derive(Clone, Copy)]
pub enum Reader {
    /// A keycodec codec's `load`, with this validation, pinned to this digest if any.
    Codec(&'static dyn KeyCodec, Validation, Option<KeyDigest>),
    /// halo2's own `ProvingKey::read` through a `BufReader`.
    Native(SerdeFormat),
}

impl Writer {
    /// The file layout's name, as the table shows it.
    pub fn mode(&self) -> &'static str {
        match self {
            Writer::Codec(codec) => codec.wire_mode().name(),
            Writer::Native(SerdeFormat::Processed) => "Processed",
            Writer::Native(_) => "RawBytes",
        }
    }
}

/// One file layout, written once per run and read back by one or more readers.
#[derive(Clone)]
pub struct Group {
    /// Backend name as shown in the table.
    pub backend: &'static str,
    /// How the file is written.
    pub writer: Writer,
    /// (validation name, reader) pairs: each is a row of the table.
    pub reads: Vec<(&'static str, Reader)>,
}

/// The reference rows: halo2's own writer and reader.
pub const HALO2_NATIVE: &str = "halo2-native";

/// The backends the harness knows, by the names `--backends` takes: keycodec's backend list
/// and halo2's own reader.
pub fn backend_names() -> Vec<&'static str> {
    Backend::compiled()
        .map(Backend::name)
        .chain([HALO2_NATIVE])
        .collect()
}

/// The groups of the named backends, in table order: for a keycodec backend, one per wire
/// mode it writes, read checked, (where the mode can skip checks) trusted, and, given the
/// key's digest, checked and pinned to it.
pub fn groups(backends: &[String], pin: Option<KeyDigest>) -> Vec<Group> {
    let mut out = Vec::new();
    for name in backends {
        if name == HALO2_NATIVE {
            out.push(Group {
                backend: HALO2_NATIVE,
                writer: Writer::Native(SerdeFormat::RawBytes),
                reads: vec![
                    ("checked", Reader::Native(SerdeFormat::RawBytes)),
                    ("trusted", Reader::Native(SerdeFormat::RawBytesUnchecked)),
                ],
            });
            out.push(Group {
                backend: HALO2_NATIVE,
                writer: Writer::Native(SerdeFormat::Processed),
                reads: vec![("checked", Reader::Native(SerdeFormat::Processed))],
            });
            continue;
        }
        let Some(backend) = name.parse::<Backend>().ok() else {
            continue;
        };
        for &codec in backend.codecs().unwrap_or_default() {
            let mut reads = vec![("checked", Reader::Codec(codec, Validation::Checked, None))];
            let trusted = codec.effective_validation(codec.wire_mode(), Validation::Trusted);
            if trusted == Validation::Trusted {
                reads.push(("trusted", Reader::Codec(codec, Validation::Trusted, None)));
            }
            if pin.is_some() {
                reads.push(("pinned", Reader::Codec(codec, Validation::Checked, pin)));
            }
            out.push(Group {
                backend: backend.name(),
                writer: Writer::Codec(codec),
                reads,
            });
        }
    }
    out
}

/// Writes `pk` to `path` durably; returns the seconds taken.
///
/// # Errors
///
/// The backend's or the file system's error, as text.
pub fn write<C: Circuit<Fr, Params = ()>>(
    writer: Writer,
    path: &Path,
    pk: &ProvingKey<G1Affine>,
    buffer: Size,
) -> Result<f64, String> {
    let save = SaveOptions {
        buffers: BufferConfig::both(buffer),
    };
    let started = Instant::now();
    let result = match writer {
        Writer::Codec(codec) => codec
            .save::<C, _>(path, pk, (), &save)
            .map(|_digest| ())
            .map_err(|e| e.to_string()),
        Writer::Native(format) => native_write(path, pk, format, buffer).map_err(|e| e.to_string()),
    };
    result.map(|()| started.elapsed().as_secs_f64())
}

fn native_write(
    path: &Path,
    pk: &ProvingKey<G1Affine>,
    format: SerdeFormat,
    buffer: Size,
) -> std::io::Result<()> {
    let file = File::create(path)?;
    let mut writer = BufWriter::with_capacity(buffer.as_usize(), &file);
    pk.write(&mut writer, format)?;
    writer.flush()?;
    drop(writer);
    // keycodec's saves are durable; so is the reference, for a like-for-like comparison.
    file.sync_all()
}

/// Loads the key at `path`; returns it and the seconds taken.
///
/// # Errors
///
/// The backend's error, as text. halo2's own reader panics on bad input; the harness only
/// feeds it files it has just written.
pub fn read<C: Circuit<Fr, Params = ()>>(
    reader: Reader,
    path: &Path,
    k: u32,
    buffer: Size,
) -> Result<(ProvingKey<G1Affine>, f64), String> {
    let options = |validation, expected_digest| {
        let mut options = LoadOptions {
            buffers: BufferConfig::both(buffer),
            validation,
            expected_k: Some(k),
            expected_digest,
            ..LoadOptions::default()
        };
        // The harness's own files: a compact key's expansion is not a forgery.
        options.limits.memory_budget = u64::MAX;
        options
    };
    let started = Instant::now();
    let pk = match reader {
        Reader::Codec(codec, validation, pin) => codec
            .load::<C, _>(path, (), &options(validation, pin))
            .map_err(|e| e.to_string())?,
        Reader::Native(format) => {
            let file = File::open(path).map_err(|e| e.to_string())?;
            let mut reader = BufReader::with_capacity(buffer.as_usize(), file);
            ProvingKey::read::<_, C>(&mut reader, format, ()).map_err(|e| e.to_string())?
        }
    };
    Ok((pk, started.elapsed().as_secs_f64()))
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
    keycodec::backend_api::parts::polynomials(pk).collect()
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
            codec_core::drop_cached_pages(path);
        }
        let started = Instant::now();
        let mut fresh = vec![0u8; len];
        File::open(path)
            .and_then(|mut f| f.read_exact(&mut fresh))
            .map_err(|e| e.to_string())?;
        reads.push(started.elapsed().as_secs_f64());
        drop(fresh);

        if cold {
            codec_core::drop_cached_pages(path);
        }
        let started = Instant::now();
        let mut fresh = vec![0u8; len];
        parallel_read(path, &mut fresh).map_err(|e| e.to_string())?;
        parallel.push(started.elapsed().as_secs_f64());
        drop(fresh);

        if cold {
            codec_core::drop_cached_pages(path);
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
        std::hint::black_box(xxhash_rust::xxh3::xxh3_64(&touched));
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
fn parallel_read(path: &Path, out: &mut [u8]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const STEP: usize = 4 << 20;
    let file = File::open(path)?;
    out.par_chunks_mut(STEP)
        .enumerate()
        .try_for_each(|(index, piece)| file.read_exact_at(piece, (index * STEP) as u64))
}

/// The median of a non-empty sample (the mean of the middle two for even sizes).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let upper = sorted.len() / 2;
    let middle = if sorted.len() % 2 == 1 {
        upper..upper + 1
    } else {
        upper.saturating_sub(1)..upper + 1
    };
    let middle = sorted.get(middle).unwrap_or_default();
    middle.iter().sum::<f64>() / middle.len() as f64
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

    /// Resets the high-water mark to the current resident size. Returns whether the kernel
    /// accepted it (`/proc/self/clear_refs`, Linux 4.0+).
    pub fn reset_peak() -> bool {
        std::fs::write("/proc/self/clear_refs", "5").is_ok()
    }

    fn field(name: &str) -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|line| line.starts_with(name))?;
        let kib: u64 = line
            .trim_start_matches(name)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_samples() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn peak_rss_sees_a_large_allocation() {
        if !rss::reset_peak() {
            return; // not Linux, or clear_refs not permitted: nothing to check
        }
        let before = rss::current().unwrap();
        let block = vec![1u8; 64 << 20];
        let peak = rss::peak().unwrap();
        assert!(peak >= before + (60 << 20), "peak {peak} before {before}");
        drop(block);
    }
}
