//! What this crate's tests share: their random numbers, seeded and the seed printed (a
//! failing test shows its output, and `KEYCODEC_TEST_SEED=<seed>` repeats them), and a test
//! run alone in a process of its own (for what a process decides once).

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

/// Set in the process [`passes_alone`] starts.
const CHILD_ENV: &str = "KEYCODEC_TEST_CHILD";

/// Whether this process was started by [`passes_alone`]: the test it runs does its check
/// instead of starting another.
pub(crate) fn in_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs `test` (its path, `module::tests::name`) alone in a new process of this test binary,
/// with `env` set and [`in_child`] true there, and asserts that it passed.
pub(crate) fn passes_alone(test: &str, env: &[(&str, &str)]) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture"])
        .env(CHILD_ENV, "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && printed.contains("test result: ok. 1 passed;"),
        "{test} with {env:?}: {printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
