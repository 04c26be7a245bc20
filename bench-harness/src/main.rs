//! `cargo run --release -p bench-harness -- --help`

#![forbid(unsafe_code)]

use bench_harness::{report, run, run_child, Args};
use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    if let Some(request) = &args.child {
        return match run_child(request) {
            Ok(reply) => {
                println!("{reply}");
                std::process::ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("error: {err}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    if let Some(bytes) = args.prime {
        return match bench_harness::exec::prime(bytes) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    if cfg!(debug_assertions) && !args.allow_debug_build {
        eprintln!(
            "error: this bench-harness was built without optimisations (cargo run without \
             --release): its timings would be of unoptimised backends and halo2, and compare \
             nothing. Run `cargo run --release -p bench-harness`, or pass --allow-debug-build \
             to measure anyway."
        );
        return std::process::ExitCode::from(2);
    }
    match run(&args) {
        Ok(result) => {
            if cfg!(debug_assertions) {
                println!("DEBUG BUILD (no --release): the figures below time unoptimised code and compare nothing");
            }
            print!("{}", report::table(&result));
            let outputs = [
                args.json
                    .as_ref()
                    .map(|path| report::write_json(&result, path)),
                args.plot
                    .as_ref()
                    .map(|path| report::write_plot(&result, path)),
            ];
            if let Some(failed) = outputs.into_iter().flatten().find_map(Result::err) {
                eprintln!("error: {failed}");
                return std::process::ExitCode::FAILURE;
            }
            let verified = result
                .sizes
                .iter()
                .flat_map(|size| &size.rows)
                .all(|row| row.verified);
            if verified {
                std::process::ExitCode::SUCCESS
            } else {
                eprintln!("error: a loaded key differed from the original");
                std::process::ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
