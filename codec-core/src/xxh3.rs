//! XXH3, the container's checksums (64-bit) and the circuit's fingerprint (128-bit), from
//! `twox-hash`, which picks the processor's widest vector unit when it runs (AVX2 where there
//! is one: 12.8 GB/s from memory here against 7.4 for an SSE2 build), whatever the target the
//! binary was built for. The test `the_hashes_are_xxh3s` compares them with `xxhash-rust`'s.

use std::hash::Hasher;

/// XXH3-64 of bytes fed in pieces: the same digest as [`xxh3_64`] of them all.
#[derive(Clone, Default)]
pub(crate) struct Xxh3(twox_hash::XxHash3_64);

impl Xxh3 {
    /// A hash of nothing yet.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Hashes `bytes` after those before.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// The digest of every byte so far.
    pub(crate) fn digest(&self) -> u64 {
        self.0.finish()
    }
}

/// XXH3-64 of `bytes`.
pub(crate) fn xxh3_64(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// XXH3-128 of `bytes`.
pub(crate) fn xxh3_128(bytes: &[u8]) -> u128 {
    twox_hash::XxHash3_128::oneshot(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn the_hashes_are_xxh3s() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut bytes = vec![0u8; 3 << 20];
        rng.fill(bytes.as_mut_slice());
        // Every length class of XXH3 (up to 16, 128, 240 bytes, then stripes and blocks).
        for len in [
            0,
            1,
            3,
            4,
            8,
            9,
            16,
            17,
            128,
            129,
            240,
            241,
            1023,
            1024,
            65_537,
            3 << 20,
        ] {
            let input = &bytes[..len];
            assert_eq!(xxh3_64(input), xxhash_rust::xxh3::xxh3_64(input), "{len}");
            assert_eq!(xxh3_128(input), xxhash_rust::xxh3::xxh3_128(input), "{len}");
            // Fed in uneven pieces.
            let mut streamed = Xxh3::new();
            let mut rest = input;
            while !rest.is_empty() {
                let (piece, after) = rest.split_at(rng.gen_range(1..=rest.len().min(300_000)));
                streamed.update(piece);
                rest = after;
            }
            assert_eq!(streamed.digest(), xxh3_64(input), "{len}");
        }
    }
}
