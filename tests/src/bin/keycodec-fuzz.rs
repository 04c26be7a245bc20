//! Longer fuzzing runs than CI's, on the stable toolchain:
//!
//! ```text
//! cargo run --release -p keycodec-tests --bin keycodec-fuzz -- [--backend NAME] [--minutes M] [--iterations N] [--seed S]
//! cargo run --release -p keycodec-tests --bin keycodec-fuzz -- --write-corpus
//! ```
//!
//! Mutates the seed corpus and feeds every mutant to every decoder of the chosen backends
//! (all by default) with four oracles (panic, memory, time, a damaged unresealed input that
//! loads; see `keycodec_tests::fuzz`). Writes each flagged input to `fuzz/crashes/` and exits
//! non-zero if there were any. `--write-corpus` writes the seed corpus from the test circuits
//! (it keeps files already there: the corpus also holds files of earlier formats).

use std::process::ExitCode;
use std::time::Duration;

use keycodec::Backend;
use keycodec_core::halo2_proofs::plonk::Circuit;
use keycodec_core::halo2curves::bn256::Fr;
use keycodec_core::{KeyCodec, KeyCodecExt};
use keycodec_testkit::{lookup, lookup_uncompressed, standard_plonk, Fixture};
use keycodec_tests::counting::{Counting, CountingMeter};
use keycodec_tests::fuzz::{corpus, corpus_dir, run, Plan};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--write-corpus") {
        return write_corpus();
    }
    let value = |flag: &str| {
        args.iter()
            .position(|arg| arg == flag)
            .and_then(|at| args.get(at + 1))
    };
    let backends: Vec<Backend> = match value("--backend") {
        Some(name) => match name.parse() {
            Ok(backend) => vec![backend],
            Err(err) => {
                eprintln!("{err}");
                return ExitCode::from(2);
            }
        },
        None => Backend::compiled().collect(),
    };
    let minutes: Option<f64> = value("--minutes").and_then(|m| m.parse().ok());
    let iterations = value("--iterations")
        .and_then(|n| n.parse().ok())
        .unwrap_or(if minutes.is_some() {
            usize::MAX
        } else {
            100_000
        });
    let seed = value("--seed").and_then(|s| s.parse().ok()).unwrap_or(1);
    let corpus = corpus();
    // Quiet the panic hook: panics are caught, counted and saved.
    std::panic::set_hook(Box::new(|_| {}));
    let plan = Plan {
        corpus: &corpus,
        backends: &backends,
        iterations,
        duration: minutes.map(|m| Duration::from_secs_f64(m * 60.0)),
        seed,
    };
    let started = std::time::Instant::now();
    let outcome = run(&plan, &CountingMeter);
    let _ = std::panic::take_hook();
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(err) => {
            eprintln!("could not set up the fuzzer's scratch folder: {err}");
            return ExitCode::FAILURE;
        }
    };
    let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
    println!(
        "{}: {} mutants, {} decodes, {} flagged in {:.1} min (seed {seed})",
        names.join(","),
        outcome.inputs,
        outcome.decodes,
        outcome.findings.len(),
        started.elapsed().as_secs_f64() / 60.0
    );
    if outcome.findings.is_empty() {
        return ExitCode::SUCCESS;
    }
    let dir = corpus_dir().join("../crashes");
    let _ = std::fs::create_dir_all(&dir);
    for (index, (input, findings)) in outcome.findings.iter().enumerate() {
        println!("{findings:?}");
        let path = dir.join(format!("{}-seed{seed}-{index}.bin", names.join("-")));
        if std::fs::write(&path, input).is_ok() {
            println!("saved {}", path.display());
        }
    }
    ExitCode::FAILURE
}

/// Writes `{backend}-{name}` for every key the corpus holds, in the container version this
/// build writes, and the headerless halo2 file.
fn write_corpus() -> ExitCode {
    let dir = corpus_dir();
    if std::fs::create_dir_all(&dir).is_err() {
        return ExitCode::FAILURE;
    }
    for backend in Backend::compiled() {
        let Ok(codec) = backend.codec() else {
            return ExitCode::FAILURE;
        };
        let written = [
            keys(codec, "standard-plonk", standard_plonk()),
            keys(codec, "lookup", lookup()),
            keys(codec, "lookup-uncompressed", lookup_uncompressed()),
        ];
        for files in written {
            let Ok(files) = files else {
                return ExitCode::FAILURE;
            };
            for (name, bytes) in files {
                if std::fs::write(dir.join(format!("{backend}-{name}")), bytes).is_err() {
                    return ExitCode::FAILURE;
                }
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

/// A fixture's proving and verifying key files, named `{name}.pk` and `{name}.vk`.
fn keys<C: Circuit<Fr, Params = ()>>(
    codec: &dyn KeyCodec,
    name: &str,
    fixture: &Fixture<C>,
) -> keycodec::Result<[(String, Vec<u8>); 2]> {
    Ok([
        (format!("{name}.pk"), codec.to_vec::<C, _>(&fixture.pk, ())?),
        (
            format!("{name}.vk"),
            codec.to_vec::<C, _>(fixture.vk(), ())?,
        ),
    ])
}
