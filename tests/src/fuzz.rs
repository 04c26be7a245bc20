//! A small mutation fuzzer for every decoder, on the stable toolchain.
//!
//! Inputs start from a corpus of valid small files (`fuzz/corpus/`), are mutated (bit flips,
//! byte overwrites, inserted and deleted runs, truncation, splices of two files, length-like
//! words set to extremes), and are fed to every decoding entry point of every backend:
//! `read_slice` and `read` (stream), checked and trusted, proving and verifying keys, plus
//! the rawbytes import of headerless halo2 files. Half of the mutants get their checksums
//! recomputed, so that the mutation reaches the decoder instead of stopping at the checksum.
//! A decoder may refuse anything; it must never panic.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use codec_core::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use codec_core::halo2curves::bn256::G1Affine;
use codec_core::testing::StandardPlonk;
use codec_core::{LoadOptions, Validation};
use keycodec::{Backend, KeyCodecExt};

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

/// One mutant of `seed` (possibly spliced with `other`).
pub fn mutate(seed: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut data = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
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
                // A length-like word set to an extreme, at an 8-aligned or 4-aligned offset.
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
    if rng.below(2) == 0 {
        refresh_checksums(&mut data);
    }
    data
}

/// Recomputes the payload and header checksums (see the conformance kit's helper).
pub use codec_core::testing::conformance::refresh_checksums;

/// Feeds `data` to every decoding entry point. Returns how many decodes ran; panics (as the
/// decoder did) if one panicked.
pub fn fuzz_one(data: &[u8]) -> usize {
    let mut runs = 0;
    for validation in [Validation::Checked, Validation::Trusted] {
        let options = LoadOptions {
            validation,
            ..LoadOptions::default()
        };
        for backend in Backend::compiled() {
            let _ = backend
                .codec()
                .unwrap()
                .read_slice::<StandardPlonk, ProvingKey<G1Affine>>(data, (), &options);
            let _ = backend
                .codec()
                .unwrap()
                .read_slice::<StandardPlonk, VerifyingKey<G1Affine>>(data, (), &options);
            runs += 2;
        }
        #[cfg(feature = "rawbytes")]
        {
            use codec_core::KeyCodecExt;
            let codec = keycodec::RawBytesCodec::default();
            let _ = codec.read::<StandardPlonk, ProvingKey<G1Affine>>(&mut &data[..], (), &options);
            let _ =
                codec.import::<StandardPlonk, ProvingKey<G1Affine>>(&mut &data[..], (), &options);
            let _ =
                codec.import::<StandardPlonk, VerifyingKey<G1Affine>>(&mut &data[..], (), &options);
            runs += 3;
        }
        #[cfg(feature = "bincode")]
        {
            use codec_core::KeyCodecExt;
            let _ = keycodec::BincodeCodec.read::<StandardPlonk, ProvingKey<G1Affine>>(
                &mut &data[..],
                (),
                &options,
            );
            runs += 1;
        }
        #[cfg(feature = "rkyv")]
        {
            use codec_core::KeyCodecExt;
            let _ = keycodec::RkyvCodec.read::<StandardPlonk, ProvingKey<G1Affine>>(
                &mut &data[..],
                (),
                &options,
            );
            runs += 1;
        }
    }
    runs
}

/// The outcome of a fuzzing run.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Mutants tried.
    pub inputs: usize,
    /// Decodes run over all of them.
    pub decodes: usize,
    /// Inputs on which a decoder panicked (saved by the caller).
    pub panics: Vec<Vec<u8>>,
}

/// Mutates the corpus `iterations` times from `seed`, feeding each mutant to every decoder.
pub fn run(corpus: &[(String, Vec<u8>)], iterations: usize, seed: u64) -> Outcome {
    let mut rng = Rng::new(seed);
    let mut outcome = Outcome::default();
    if corpus.is_empty() {
        return outcome;
    }
    for _ in 0..iterations {
        let (_, base) = &corpus[rng.below(corpus.len())];
        let (_, other) = &corpus[rng.below(corpus.len())];
        let mutant = mutate(base, other, &mut rng);
        match catch_unwind(AssertUnwindSafe(|| fuzz_one(&mutant))) {
            Ok(runs) => outcome.decodes += runs,
            Err(_) => outcome.panics.push(mutant),
        }
        outcome.inputs += 1;
    }
    outcome
}
