//! Typed configuration: buffer sizes, validation mode, limits.

use std::fmt;
use std::str::FromStr;

use bytesize::ByteSize;
use halo2curves::bn256::Fr;

use crate::ids::{CodecId, KeyDigest};

/// A byte count that parses from and prints as a human size (`"8KiB"`, `"1MiB"`, `"1GiB"`).
///
/// Binary suffixes (`KiB`, `MiB`, `GiB`) are powers of 1024, decimal ones (`KB`, `MB`) powers
/// of 1000; a bare number is bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl Size {
    /// `n` KiB.
    pub const fn kib(n: u64) -> Self {
        Size(n * 1024)
    }

    /// `n` MiB.
    pub const fn mib(n: u64) -> Self {
        Size(n * 1024 * 1024)
    }

    /// `n` GiB.
    pub const fn gib(n: u64) -> Self {
        Size(n * 1024 * 1024 * 1024)
    }

    /// The size in bytes, saturated to `usize` (relevant on 32-bit targets only).
    pub fn as_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

/// A size that did not parse (see [`Size`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid size `{input}`: expected a number with an optional unit such as B, KiB, MiB, GiB")]
pub struct ParseSizeError {
    input: String,
}

impl FromStr for Size {
    type Err = ParseSizeError;

    fn from_str(input: &str) -> Result<Self, ParseSizeError> {
        let parsed: ByteSize = input.trim().parse().map_err(|_| ParseSizeError {
            input: input.to_owned(),
        })?;
        Ok(Size(parsed.as_u64()))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1 << 40, "TiB"),
            (1 << 30, "GiB"),
            (1 << 20, "MiB"),
            (1 << 10, "KiB"),
        ];
        for (scale, unit) in UNITS {
            if self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{}{unit}", self.0 / scale);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// Capacities of the buffered reader and writer put around a file.
///
/// keycodec's own loads and saves move polynomial data past the buffer, straight between the
/// file and the key's memory: the buffer only serves small reads and writes (lengths, the
/// verifying key), so they use at most [`BufferConfig::MAX_USEFUL`] of it (more would only
/// cost memory), and a load's buffer fetches 16 KiB first, growing to its capacity as more
/// is read through it. Imports of headerless halo2 files, read by halo2's
/// element-at-a-time layout, use all of it. The default is 1 MiB each (`docs/performance.md`
/// has the measurements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferConfig {
    /// Capacity of the buffer used when loading.
    pub read_capacity: Size,
    /// Capacity of the `BufWriter` used when saving.
    pub write_capacity: Size,
}

impl BufferConfig {
    /// The most of a buffer keycodec's file loads and saves use.
    pub const MAX_USEFUL: Size = Size(4 << 20);

    /// `read_capacity`, at most [`BufferConfig::MAX_USEFUL`].
    pub fn file_read_capacity(&self) -> usize {
        self.read_capacity.min(Self::MAX_USEFUL).as_usize()
    }

    /// `write_capacity`, at most [`BufferConfig::MAX_USEFUL`].
    pub fn file_write_capacity(&self) -> Size {
        self.write_capacity.min(Self::MAX_USEFUL)
    }

    /// The same capacity for reading and writing.
    pub const fn both(capacity: Size) -> Self {
        BufferConfig {
            read_capacity: capacity,
            write_capacity: capacity,
        }
    }
}

impl Default for BufferConfig {
    fn default() -> Self {
        BufferConfig::both(Size::mib(1))
    }
}

/// Whether loaded field elements and curve points are checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Validation {
    /// Every field element is checked to be below the modulus and every point to be on the
    /// curve. The default, and the only safe choice for files from outside.
    #[default]
    Checked,
    /// Skip value checks: for files this process (or a trusted one) wrote. Structure, lengths
    /// and checksums are still checked, so truncation and bit rot are still detected, but a
    /// forged file with a valid checksum can load as a key with out-of-range values.
    Trusted,
}

/// Whether KZG parameters made from a known public seed (halo2-base's `gen_srs`, halo2's test
/// helpers: see [`crate::test_setup`]) load. Their secret is known, so anyone can forge proofs
/// under them: for tests only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TestSetup {
    /// Refused with [`crate::Error::TestSetup`] (the default).
    #[default]
    Refused,
    /// Loaded: tests that mean to use them.
    Allowed,
}

/// Whether the payload checksum (XXH3-64) is verified on load ([`LoadOptions::checksum`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Checksum {
    /// Verify the payload's XXH3-64 (the default): bit rot and truncation are reported as
    /// corruption, never loaded. A key or parameters loaded from memory or a local file with
    /// [`LoadOptions::expected_digest`] are proven by the pin instead (the digest covers every
    /// value they hold): their checksum is computed only when the load fails as damage would,
    /// to name it. The pin proves the values, not every byte: a bit no value comes from (a
    /// compressed point's unused flag, an archive's padding) is not looked at; `keycodec
    /// verify` checks every byte. Streams and objects in storage are hashed as always.
    #[default]
    Verify,
    /// Do not hash the payload. The header's own checksum, lengths and structure are still
    /// checked, and values unless [`Validation::Trusted`] is chosen too; a flipped bit in a
    /// field element can then load as a different key. For files whose integrity is
    /// guaranteed by other means (a checksummed store, a file just written).
    Skip,
}

/// Bounds on what a file may make the loader allocate or compute.
///
/// Memory that the input's own bytes justify (a polynomial whose bytes are present in a
/// file or a slice) is always allowed. Memory they do not justify is allowed up to
/// [`Limits::memory_budget`]: a verifying key's evaluation domain (a few hundred bytes of
/// file, `2^k`-sized tables in memory), a compact key's recomputed polynomials, a stream's
/// declared lengths. Anything over it is refused with [`crate::Error::OverBudget`] before it
/// is allocated or computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload accepted, in bytes.
    pub max_payload_bytes: u64,
    /// Largest `k` accepted (at most 28, BN254's two-adicity).
    pub max_k: u32,
    /// Bytes of memory a load may spend beyond what the input's bytes justify. The default
    /// is an eighth of the machine's memory (Linux; 2 GiB elsewhere), at least 1 GiB: on a
    /// 24 GiB machine, 3 GiB, enough for the verifying key of a k = 23 circuit of degree 3,
    /// not for a forged tiny file to exhaust the machine. Verifiers of larger circuits and
    /// loads of large compact proving keys raise it.
    pub memory_budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_payload_bytes: 1 << 40,
            max_k: MAX_K,
            memory_budget: default_memory_budget(),
        }
    }
}

/// An eighth of the machine's physical memory (read once per process), at least 1 GiB, or
/// 2 GiB where it cannot be read.
fn default_memory_budget() -> u64 {
    static BUDGET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| machine_memory().map_or(2 << 30, |total| (total / 8).max(1 << 30)))
}

/// The machine's physical memory in bytes (Linux: `MemTotal` of `/proc/meminfo`).
fn machine_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// A set of codecs, by id: which backends a load accepts ([`LoadOptions::codecs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CodecSet([u64; 4]);

impl CodecSet {
    /// Every codec.
    pub const ALL: CodecSet = CodecSet([u64::MAX; 4]);

    /// No codec.
    pub const NONE: CodecSet = CodecSet([0; 4]);

    /// The set of `ids`.
    pub fn of(ids: impl IntoIterator<Item = CodecId>) -> Self {
        ids.into_iter().fold(CodecSet::NONE, CodecSet::with)
    }

    /// This set and `id`.
    #[must_use]
    pub fn with(self, id: CodecId) -> Self {
        let mut words = self.0;
        if let Some(word) = words.get_mut(usize::from(id.byte() / 64)) {
            *word |= 1 << (id.byte() % 64);
        }
        CodecSet(words)
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: CodecId) -> bool {
        self.0
            .get(usize::from(id.byte() / 64))
            .is_some_and(|word| word & (1 << (id.byte() % 64)) != 0)
    }
}

impl Default for CodecSet {
    /// Every codec.
    fn default() -> Self {
        CodecSet::ALL
    }
}

/// The largest `k` BN254's scalar field supports (its two-adicity).
pub const MAX_K: u32 = 28;

/// Options for loading a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Buffer sizes for file loads.
    pub buffers: BufferConfig,
    /// Check values, or trust them.
    pub validation: Validation,
    /// Allocation and size limits.
    pub limits: Limits,
    /// If set, a key for any other `k` is refused with [`crate::Error::KMismatch`].
    pub expected_k: Option<u32>,
    /// Verify the payload checksum, or skip it.
    pub checksum: Checksum,
    /// If set, the key's digest is computed while it loads, and a key with any other digest
    /// is refused with [`crate::Error::DigestMismatch`]: the pin against substitution. From
    /// memory or a local file the pin then stands in for the payload's checksum (see
    /// [`Checksum::Verify`]); a damaged file is still reported as damage
    /// ([`crate::Error::PayloadChecksum`]), never as another key.
    pub expected_digest: Option<KeyDigest>,
    /// If set, a key whose verifying key has any other `transcript_repr()` (the value circuits
    /// and verifier contracts carry) is refused with [`crate::Error::TranscriptMismatch`]. It
    /// pins the verifying key (its commitments and constraint system); pin a proving key's
    /// polynomials with [`LoadOptions::expected_digest`].
    pub expected_transcript: Option<Fr>,
    /// The codecs whose files this load accepts (all by default); another codec's file is
    /// refused with [`crate::Error::CodecNotAllowed`] before anything is decoded. Restrict it
    /// when the file, not the caller, chooses the backend (the facade's `load_key`).
    pub codecs: CodecSet,
    /// Whether KZG parameters made from a known public seed load (for tests only: see
    /// [`crate::test_setup`]). Default [`TestSetup::Refused`]: they are refused with
    /// [`crate::Error::TestSetup`].
    pub test_setup: TestSetup,
}

/// Options for saving a key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SaveOptions {
    /// Buffer sizes for file saves.
    pub buffers: BufferConfig,
    /// Whether the container records the circuit (default) or holds its fingerprint alone.
    pub recording: Recording,
}

/// Whether a saved key's container records its circuit (`docs/format.md`: the record).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Recording {
    /// The circuit's constraint system and parameters after the payload, when the circuit
    /// can be recorded: the key then loads, converts and verifies proofs with no circuit
    /// code.
    #[default]
    Record,
    /// The fingerprint alone (a version 3 container, as earlier builds wrote): the key
    /// loads only with its circuit type, and the file says nothing of the circuit's gates.
    Omit,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_sets_hold_what_was_put_in() {
        let set = CodecSet::of([CodecId::new(1), CodecId::new(200)]);
        for byte in 0..=255u8 {
            assert_eq!(
                set.contains(CodecId::new(byte)),
                byte == 1 || byte == 200,
                "{byte}"
            );
            assert!(CodecSet::ALL.contains(CodecId::new(byte)));
            assert!(!CodecSet::NONE.contains(CodecId::new(byte)));
        }
    }

    #[test]
    fn the_default_budget_is_a_fraction_of_the_machine() {
        let budget = Limits::default().memory_budget;
        assert!(budget >= 1 << 30, "{budget}");
        if let Some(total) = machine_memory() {
            assert!(budget <= (total / 8).max(1 << 30), "{budget} of {total}");
        }
    }

    #[test]
    fn file_buffers_are_capped_at_what_they_can_use() {
        let huge = BufferConfig::both(Size::gib(1));
        assert_eq!(huge.file_read_capacity(), 4 << 20);
        assert_eq!(huge.file_write_capacity(), Size::mib(4));
        let small = BufferConfig::both(Size::kib(8));
        assert_eq!(small.file_read_capacity(), 8 << 10);
        assert_eq!(small.file_write_capacity(), Size::kib(8));
    }

    #[test]
    fn sizes_parse_from_human_text() {
        for (text, bytes) in [
            ("8KiB", 8192),
            ("1MiB", 1 << 20),
            ("1GiB", 1 << 30),
            ("1 KiB", 1024),
            ("1024", 1024),
            ("8KB", 8000),
        ] {
            assert_eq!(text.parse::<Size>().ok(), Some(Size(bytes)), "{text}");
        }
        let err = "lots".parse::<Size>().unwrap_err();
        assert!(err.to_string().contains("`lots`"), "{err}");
    }

    #[test]
    fn sizes_print_as_they_parse() {
        for size in [
            Size::kib(1),
            Size::kib(8),
            Size::mib(1),
            Size::gib(1),
            Size(1000),
        ] {
            assert_eq!(size.to_string().parse::<Size>().ok(), Some(size));
        }
        assert_eq!(Size::kib(8).to_string(), "8KiB");
    }
}
