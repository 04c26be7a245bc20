//! The random numbers of this crate's tests: seeded, and the seed printed (a failing test
//! shows its output), so that a failure seen once can be repeated with
//! `KEYCODEC_TEST_SEED=<seed>`.

use rand::SeedableRng;

/// A generator from `KEYCODEC_TEST_SEED` where set to a number, else from a new random seed.
pub(crate) fn rng() -> rand::rngs::StdRng {
    let seed = std::env::var("KEYCODEC_TEST_SEED")
        .ok()
        .and_then(|seed| seed.trim().parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    println!("random inputs from seed {seed}: KEYCODEC_TEST_SEED={seed} repeats them");
    rand::rngs::StdRng::seed_from_u64(seed)
}
