//! A mutation fuzzer for every decoder, on the stable toolchain.
//!
//! Inputs start from a corpus of valid small files (`fuzz/corpus/`: proving and verifying
//! keys of StandardPlonk and of a lookup circuit with and without selector compression,
//! written by every backend, in both container versions, and a headerless halo2 file). Each
//! is mutated: bit flips, byte overwrites, inserted and deleted runs, truncation, splices,
//! length-like words set to extremes, and the header's fields forged (`k`, lengths, mode,
//! kind, codec, flags, digest). Half the mutants get both checksums resealed, so the mutation
//! reaches the decoder instead of stopping at a checksum.
//!
//! Every mutant goes to every decoding entry point of the backends under test: slices,
//! streams and files (positioned reads), proving and verifying keys, checked and trusted,
//! for each test circuit, plus the rawbytes import of headerless halo2 files. Four oracles:
//! no decoder panics; no input makes a decode allocate more than [`MEMORY_CAP`] above what it
//! started with (measured by the caller's counting allocator, through [`Meter`]); none takes
//! longer than [`TIME_CAP`]; and a damaged input whose checksums were not resealed never loads
//! from a slice or a file.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use keycodec::Backend;
use keycodec_core::halo2_proofs::plonk::{Circuit, ProvingKey, VerifyingKey};
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::header::{Header, HEADER_LEN};
use keycodec_core::{KeyCodec, KeyCodecExt, LoadOptions, Validation};
use keycodec_testkit::{LookupCircuit, StandardPlonk};

pub use keycodec_testkit::conformance::refresh_checksums;

/// The most a single decode of a fuzzer input may allocate. The corpus keys are a few KiB
/// (a decoded k = 6 key and its domain are well under it), and decodes run with a memory
/// budget of [`FUZZ_BUDGET`]: anything over the cap is memory the input did not justify and
/// the budget did not bound.
pub const MEMORY_CAP: usize = 64 << 20;

/// The memory budget ([`keycodec_core::Limits::memory_budget`]) of the fuzzer's decodes.
pub const FUZZ_BUDGET: u64 = 16 << 20;

/// The longest a single input may take through every entry point.
pub const TIME_CAP: Duration = Duration::from_secs(10);

/// The committed seed corpus.
pub fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus")
}

/// Every corpus file, with its name.
pub fn corpus() -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus_dir())
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            std::fs::read(entry.path()).ok().map(|bytes| (name, bytes))
        })
        .collect();
    files.sort();
    files
}

/// A small deterministic generator (xorshift64*), so that a run is reproducible by its seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a non-zero seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `bound` (0 when `bound` is 0).
    pub fn below(&mut self, bound: usize) -> usize {
        if bound == 0 {
            0
        } else {
            (self.next_u64() % bound as u64) as usize
        }
    }
}

/// A mutant and whether its checksums were resealed.
#[derive(Clone, Debug)]
pub struct Mutant {
    /// The bytes.
    pub data: Vec<u8>,
    /// Both checksums recomputed after the mutation.
    pub resealed: bool,
}

/// One mutant of `seed` (possibly spliced with `other`).
pub fn mutate(seed: &[u8], other: &[u8], rng: &mut Rng) -> Mutant {
    let mut data = seed.to_vec();
    let forged = rng.below(3) == 0;
    if forged {
        forge_header(&mut data, rng);
    }
    for _ in 0..rng.below(4) + usize::from(data == seed) {
        mutate_bytes(&mut data, other, rng);
    }
    let resealed = rng.below(2) == 0;
    if resealed {
        // As a forger would, make the declared length the real one (unless the header's
        // length was what this mutant forged), so that inserted and deleted runs reach the
        // decoder instead of the length check.
        if !forged || rng.below(2) == 0 {
            fix_payload_len(&mut data);
        }
        refresh_checksums(&mut data);
    }
    Mutant { data, resealed }
}

/// Sets the header's payload length to the bytes that follow the header.
fn fix_payload_len(data: &mut [u8]) {
    let Ok(header_len) = Header::len_of(data) else {
        return;
    };
    let payload = data.len().saturating_sub(header_len) as u64;
    if let Some(field) = data.get_mut(24..32) {
        field.copy_from_slice(&payload.to_le_bytes());
    }
}

/// Sets one of the header's fields to an edge value (the header checksum is left stale; a
/// reseal fixes it).
fn forge_header(data: &mut [u8], rng: &mut Rng) {
    let header_len = match Header::len_of(data) {
        Ok(len) if data.len() >= len => len,
        _ => return,
    };
    let (offset, value): (usize, Vec<u8>) = match rng.below(8) {
        // k: small, at the field's limit, beyond it, huge.
        0 => {
            let k = [0u32, 1, 3, 5, 6, 7, 12, 22, 24, 26, 28, 29, 32, u32::MAX][rng.below(14)];
            (16, k.to_le_bytes().to_vec())
        }
        // The payload length: shorter, longer, extreme.
        1 => {
            let len = [0u64, 1, 63, 1 << 20, 1 << 40, u64::MAX][rng.below(6)];
            (24, len.to_le_bytes().to_vec())
        }
        2 => (11, vec![rng.below(4) as u8]),    // wire mode
        3 => (12, vec![rng.below(4) as u8]),    // kind
        4 => (10, vec![rng.below(6) as u8]),    // codec
        5 => (14, vec![rng.below(4) as u8, 0]), // flags
        // The recorded digest, in version 2 headers.
        6 if header_len == HEADER_LEN => (56, vec![rng.next_u64() as u8; 32]),
        _ => (20, (rng.next_u64() as u32).to_le_bytes().to_vec()), // a reserved field
    };
    if let Some(field) = data.get_mut(offset..offset + value.len()) {
        field.copy_from_slice(&value);
    }
}

/// One byte-level mutation.
fn mutate_bytes(data: &mut Vec<u8>, other: &[u8], rng: &mut Rng) {
    let len = data.len();
    match rng.below(8) {
        0 if len > 0 => {
            let at = rng.below(len);
            if let Some(byte) = data.get_mut(at) {
                *byte ^= 1 << rng.below(8);
            }
        }
        1 if len > 0 => {
            let at = rng.below(len);
            if let Some(byte) = data.get_mut(at) {
                *byte = rng.next_u64() as u8;
            }
        }
        2 => {
            let at = rng.below(len + 1);
            let run: Vec<u8> = (0..1 + rng.below(64))
                .map(|_| rng.next_u64() as u8)
                .collect();
            data.splice(at..at, run);
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(64)).min(len);
            data.drain(at..end);
        }
        4 => data.truncate(rng.below(len + 1)),
        5 if !other.is_empty() => {
            let cut = rng.below(len + 1);
            let from = rng.below(other.len());
            data.truncate(cut);
            data.extend_from_slice(other.get(from..).unwrap_or_default());
        }
        _ if len >= 8 => {
            // A length-like word set to an extreme, at a 4-aligned offset.
            let at = rng.below(len - 7) & !3;
            let value: u64 = match rng.below(4) {
                0 => u64::MAX,
                1 => u64::from(u32::MAX),
                2 => 1 << (rng.below(63)),
                _ => 0,
            };
            if let Some(word) = data.get_mut(at..at + 8) {
                word.copy_from_slice(&value.to_le_bytes());
            }
        }
        _ => {}
    }
}

/// Measures the peak of heap memory allocated during a call (a counting global allocator in
/// the binary that runs the fuzzer).
pub trait Meter {
    /// Runs `f` and returns the most memory it held at once above what was held before.
    fn peak_during(&self, f: &mut dyn FnMut()) -> usize;
}

/// A meter that measures nothing (where no counting allocator is installed).
pub struct NoMeter;

impl Meter for NoMeter {
    fn peak_during(&self, f: &mut dyn FnMut()) -> usize {
        f();
        0
    }
}

/// What an oracle found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// A decoder panicked.
    Panic(String),
    /// A decode allocated more than [`MEMORY_CAP`].
    Memory(String, usize),
    /// An input took longer than [`TIME_CAP`].
    Time(u128),
    /// A damaged input that was not resealed loaded.
    LoadedDamaged(String),
}

/// Where the fuzzer writes files for positioned loads.
pub struct Scratch {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Scratch {
    /// A scratch file in a new temporary folder.
    pub fn new() -> std::io::Result<Self> {
        let dir = tempfile::tempdir()?;
        Ok(Scratch {
            path: dir.path().join("mutant.key"),
            _dir: dir,
        })
    }
}

/// Feeds `mutant` to every decoding entry point of `backends`, for every test circuit.
/// `original` says whether the bytes are a corpus file unchanged. Returns the number of
/// decodes, how many of them loaded, and the findings.
pub fn fuzz_one(
    mutant: &Mutant,
    original: bool,
    backends: &[Backend],
    meter: &dyn Meter,
    scratch: &Scratch,
) -> (usize, usize, Vec<Finding>) {
    let started = Instant::now();
    let mut findings = Vec::new();
    let written = std::fs::write(&scratch.path, &mutant.data).is_ok();
    let damaged = !original && !mutant.resealed;
    let (mut runs, mut loads) = (0, 0);
    for validation in [Validation::Checked, Validation::Trusted] {
        let mut options = LoadOptions {
            validation,
            ..LoadOptions::default()
        };
        options.limits.memory_budget = FUZZ_BUDGET;
        for backend in backends {
            let Ok(codec) = backend.codec() else {
                continue;
            };
            let mut entry = |name: String, exact: bool, decode: &mut dyn FnMut() -> bool| {
                runs += 1;
                let mut loaded = false;
                let mut panicked = false;
                let peak =
                    meter.peak_during(&mut || match catch_unwind(AssertUnwindSafe(&mut *decode)) {
                        Ok(ok) => loaded = ok,
                        Err(_) => panicked = true,
                    });
                if loaded {
                    loads += 1;
                }
                if panicked {
                    findings.push(Finding::Panic(name.clone()));
                }
                if peak > MEMORY_CAP {
                    findings.push(Finding::Memory(name.clone(), peak));
                }
                if loaded && damaged && exact {
                    findings.push(Finding::LoadedDamaged(name));
                }
            };
            decode_with::<StandardPlonk>(
                codec,
                &mutant.data,
                written,
                scratch,
                &options,
                &mut entry,
            );
            decode_with::<LookupCircuit>(
                codec,
                &mutant.data,
                written,
                scratch,
                &options,
                &mut entry,
            );
            #[cfg(feature = "rawbytes")]
            if backend.name() == "rawbytes" {
                let import = keycodec_rawbytes::RawBytesCodec::default();
                entry(
                    format!("rawbytes import pk {validation:?}"),
                    false,
                    &mut || {
                        import
                            .import::<StandardPlonk, ProvingKey<G1Affine>>(
                                &mut mutant.data.as_slice(),
                                (),
                                &options,
                            )
                            .is_ok()
                    },
                );
                entry(
                    format!("rawbytes import vk {validation:?}"),
                    false,
                    &mut || {
                        import
                            .import::<LookupCircuit, VerifyingKey<G1Affine>>(
                                &mut mutant.data.as_slice(),
                                (),
                                &options,
                            )
                            .is_ok()
                    },
                );
            }
        }
    }
    let elapsed = started.elapsed();
    if elapsed > TIME_CAP {
        findings.push(Finding::Time(elapsed.as_millis()));
    }
    (runs, loads, findings)
}

/// Runs one decode: `(name, exact, decode)`; `decode` says whether the key loaded.
type Entry<'a> = dyn FnMut(String, bool, &mut dyn FnMut() -> bool) + 'a;

/// The entry points for one circuit: proving and verifying keys from a slice, a stream and a
/// file. `entry(name, exact, decode)` runs one; `exact` marks the sources that must hold
/// exactly one container (a slice, a file), where a damaged input must never load.
fn decode_with<C: Circuit<Fr, Params = ()>>(
    codec: &dyn KeyCodec,
    data: &[u8],
    written: bool,
    scratch: &Scratch,
    options: &LoadOptions,
    entry: &mut Entry<'_>,
) {
    let circuit = std::any::type_name::<C>()
        .rsplit("::")
        .next()
        .unwrap_or("?");
    let name = |what: &str| format!("{} {what} {circuit} {:?}", codec.name(), options.validation);
    entry(name("slice pk"), true, &mut || {
        codec
            .read_slice::<C, ProvingKey<G1Affine>>(data, (), options)
            .is_ok()
    });
    entry(name("slice vk"), true, &mut || {
        codec
            .read_slice::<C, VerifyingKey<G1Affine>>(data, (), options)
            .is_ok()
    });
    entry(name("stream pk"), false, &mut || {
        codec
            .read::<C, ProvingKey<G1Affine>>(&mut &data[..], (), options)
            .is_ok()
    });
    if written {
        entry(name("file pk"), true, &mut || {
            codec
                .load::<C, ProvingKey<G1Affine>>(&scratch.path, (), options)
                .is_ok()
        });
        entry(name("file vk digest"), true, &mut || {
            codec
                .load_with_digest::<C, VerifyingKey<G1Affine>>(&scratch.path, (), options)
                .is_ok()
        });
    }
}

/// The outcome of a fuzzing run.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Mutants tried.
    pub inputs: usize,
    /// Decodes run over all of them.
    pub decodes: usize,
    /// Inputs an oracle flagged, with what it found.
    pub findings: Vec<(Vec<u8>, Vec<Finding>)>,
}

/// How long and on what a run fuzzes.
pub struct Plan<'a> {
    /// Seed corpus (only the files of the backends under test are mutated).
    pub corpus: &'a [(String, Vec<u8>)],
    /// The backends whose decoders are fed.
    pub backends: &'a [Backend],
    /// Stop after this many mutants...
    pub iterations: usize,
    /// ...or after this long, whichever comes first.
    pub duration: Option<Duration>,
    /// The generator's seed.
    pub seed: u64,
}

/// Mutates the corpus from `plan.seed`, feeding each mutant to every decoder under test.
pub fn run(plan: &Plan<'_>, meter: &dyn Meter) -> std::io::Result<Outcome> {
    let mut rng = Rng::new(plan.seed);
    let mut outcome = Outcome::default();
    let seeds: Vec<&(String, Vec<u8>)> = plan
        .corpus
        .iter()
        .filter(|(name, _)| {
            plan.backends.iter().any(|b| name.starts_with(b.name()))
                || (name.starts_with("halo2-")
                    && plan.backends.iter().any(|b| b.name() == "rawbytes"))
        })
        .collect();
    if seeds.is_empty() {
        return Ok(outcome);
    }
    let scratch = Scratch::new()?;
    let started = Instant::now();
    while outcome.inputs < plan.iterations
        && plan.duration.is_none_or(|limit| started.elapsed() < limit)
    {
        let (_, base) = seeds[rng.below(seeds.len())];
        let (_, other) = seeds[rng.below(seeds.len())];
        let mutant = mutate(base, other, &mut rng);
        // A mutant that became a valid file of the corpus (a splice can copy all of
        // another) is not damaged, whatever it was made from.
        let original = plan.corpus.iter().any(|(_, file)| file == &mutant.data);
        let (runs, _, findings) = fuzz_one(&mutant, original, plan.backends, meter, &scratch);
        outcome.decodes += runs;
        outcome.inputs += 1;
        if !findings.is_empty() {
            outcome.findings.push((mutant.data, findings));
        }
    }
    Ok(outcome)
}
