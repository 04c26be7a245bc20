//! Replays the seed corpus and a bounded, deterministic batch of mutants through every decoder
//! (the CI-sized run of `keycodec-fuzz`).

// Test code: failing loudly is its job.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use keycodec_tests::fuzz::{corpus, fuzz_one, run};

/// Mutants per CI run; `keycodec-fuzz` runs as many as asked.
const ITERATIONS: usize = 1500;

#[test]
fn corpus_files_decode_without_panicking() {
    let corpus = corpus();
    assert!(
        corpus.len() >= 4,
        "the seed corpus is missing: run keycodec-fuzz --write-corpus"
    );
    for (name, bytes) in &corpus {
        assert!(fuzz_one(bytes) > 0, "{name}");
    }
}

#[test]
fn mutants_never_panic_a_decoder() {
    let outcome = run(&corpus(), ITERATIONS, 0x5eed);
    println!(
        "{} mutants, {} decodes, {} panics",
        outcome.inputs,
        outcome.decodes,
        outcome.panics.len()
    );
    assert_eq!(outcome.inputs, ITERATIONS);
    assert!(
        outcome.panics.is_empty(),
        "{} mutants panicked a decoder",
        outcome.panics.len()
    );
}
