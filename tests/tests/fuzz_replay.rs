//! Replays the seed corpus and a bounded, deterministic batch of mutants through every decoder
//! (the CI-sized run of `keycodec-fuzz`), with every oracle: no panic, memory under the cap,
//! time under the cap, and no damaged unresealed input loads.

// Test code: failing loudly is its job.
#![allow(clippy::unwrap_used, clippy::panic, clippy::indexing_slicing)]

use keycodec::Backend;
use keycodec_tests::counting::{Counting, CountingMeter};
use keycodec_tests::fuzz::{corpus, fuzz_one, run, Mutant, Plan, Scratch};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Mutants per CI run; `keycodec-fuzz` runs as many as asked.
const ITERATIONS: usize = 1500;

/// One test, so that the allocator's counts see one decode at a time.
#[test]
fn the_corpus_loads_cleanly_and_mutants_trip_no_oracle() {
    let corpus = corpus();
    assert!(
        corpus.len() >= 4,
        "the seed corpus is missing: run keycodec-fuzz --write-corpus"
    );
    let backends: Vec<Backend> = Backend::compiled().collect();
    let scratch = Scratch::new().unwrap();
    for (name, bytes) in &corpus {
        let mutant = Mutant {
            data: bytes.clone(),
            resealed: false,
        };
        let (runs, loads, findings) = fuzz_one(&mutant, true, &backends, &CountingMeter, &scratch);
        assert!(runs > 0, "{name}");
        assert!(findings.is_empty(), "{name}: {findings:?}");
        // A corpus file is a valid key: some decoder of its backend (or halo2's import, for
        // the headerless file) loads it, checked and trusted. (What it loads is compared with
        // the original in format_stability.rs.)
        let own = match name.split('-').next().unwrap_or_default() {
            "halo2" => "rawbytes", // the headerless file: halo2's layout, rawbytes imports it
            backend => backend,
        };
        if backends.iter().any(|backend| backend.name() == own) {
            assert!(loads >= 2, "{name}: {loads} of {runs} decodes loaded it");
        }
    }
    let plan = Plan {
        corpus: &corpus,
        backends: &backends,
        iterations: ITERATIONS,
        duration: None,
        seed: 0x5eed,
    };
    let outcome = run(&plan, &CountingMeter).unwrap();
    println!(
        "{} mutants, {} decodes, {} flagged",
        outcome.inputs,
        outcome.decodes,
        outcome.findings.len()
    );
    assert_eq!(outcome.inputs, ITERATIONS);
    let findings: Vec<_> = outcome.findings.iter().map(|(_, f)| f).collect();
    assert!(findings.is_empty(), "{findings:?}");
}
