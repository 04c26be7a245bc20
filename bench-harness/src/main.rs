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
    match run(&args) {
        Ok(result) => {
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
