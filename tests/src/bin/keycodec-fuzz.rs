//! Longer fuzzing runs than CI's:
//! `cargo run --release -p keycodec-tests --bin keycodec-fuzz -- [ITERATIONS] [SEED]`.
//! Writes inputs that made a decoder panic to `fuzz/crashes/`, and exits non-zero if any did.
//! `-- --write-corpus` regenerates the seed corpus from the test circuits.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use codec_core::testing::{lookup, standard_plonk, LookupCircuit, StandardPlonk};
use keycodec::{Backend, KeyCodecExt};
use keycodec_tests::fuzz::{corpus, corpus_dir, run};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--write-corpus") {
        return write_corpus();
    }
    let iterations = args.first().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let seed = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let corpus = corpus();
    // Quiet the panic hook: panics are caught, counted and saved.
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = run(&corpus, iterations, seed);
    let _ = std::panic::take_hook();
    println!(
        "{} corpus files, {} mutants, {} decodes, {} panics (seed {seed})",
        corpus.len(),
        outcome.inputs,
        outcome.decodes,
        outcome.panics.len()
    );
    if outcome.panics.is_empty() {
        return ExitCode::SUCCESS;
    }
    let dir = corpus_dir().join("../crashes");
    let _ = std::fs::create_dir_all(&dir);
    for (index, input) in outcome.panics.iter().enumerate() {
        let path = dir.join(format!("seed{seed}-{index}.bin"));
        if std::fs::write(&path, input).is_ok() {
            println!("saved {}", path.display());
        }
    }
    ExitCode::FAILURE
}

fn write_corpus() -> ExitCode {
    let dir = corpus_dir();
    if std::fs::create_dir_all(&dir).is_err() {
        return ExitCode::FAILURE;
    }
    for backend in Backend::compiled() {
        let Ok(codec) = backend.codec() else {
            return ExitCode::FAILURE;
        };
        let files = [
            (
                "standard-plonk.pk",
                codec.to_vec::<StandardPlonk, _>(&standard_plonk().pk, ()),
            ),
            (
                "standard-plonk.vk",
                codec.to_vec::<StandardPlonk, _>(standard_plonk().vk(), ()),
            ),
            (
                "lookup.vk",
                codec.to_vec::<LookupCircuit, _>(lookup().vk(), ()),
            ),
        ];
        for (name, bytes) in files {
            let Ok(bytes) = bytes else {
                return ExitCode::FAILURE;
            };
            if std::fs::write(dir.join(format!("{backend}-{name}")), bytes).is_err() {
                return ExitCode::FAILURE;
            }
        }
    }
    #[cfg(feature = "rawbytes")]
    {
        use keycodec::halo2_proofs::SerdeFormat;
        let halo2 = standard_plonk().pk.to_bytes(SerdeFormat::RawBytes);
        if std::fs::write(dir.join("halo2-headerless-standard-plonk.pk"), halo2).is_err() {
            return ExitCode::FAILURE;
        }
    }
    println!("wrote the corpus to {}", dir.display());
    ExitCode::SUCCESS
}
