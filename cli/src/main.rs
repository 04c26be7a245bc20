//! `keycodec`: look at, check and pin keycodec containers without the circuit's code.
//!
//! Run `keycodec --help` for the commands, examples and exit codes.

#![forbid(unsafe_code)]

mod check;
mod command_line;
mod container;
mod convert;
mod manifest;
mod params;
mod proof;
mod remote;

use std::process::ExitCode;

use clap::Parser;
use serde_json::json;

use check::{inspect, Failure};
use command_line::{Cli, Command};
use container::{digest, report, verify};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(&err),
    };
    let (json, outcome) = match &cli.command {
        Command::Inspect { file, json } => (
            *json,
            inspect(file).and_then(|found| {
                report(&found, *json);
                match found.problem() {
                    Some(problem) => Err(Failure::Reported(
                        1,
                        format!("{}: {problem}", found.path.display()),
                    )),
                    None => Ok(()),
                }
            }),
        ),
        Command::Verify {
            file,
            manifest,
            cache,
            digest,
            json,
        } => (
            *json,
            match (file, manifest) {
                (_, Some(manifest)) => manifest::run(manifest, cache.as_deref(), false, *json),
                (Some(file), None) => {
                    inspect(file).and_then(|found| verify(&found, *digest, *json))
                }
                (None, None) => Err(Failure::Usage("give a FILE or --manifest".into())),
            },
        ),
        Command::Fetch {
            manifest,
            cache,
            json,
        } => (
            *json,
            manifest::run(manifest, cache.as_deref(), true, *json),
        ),
        Command::Digest { file, json } => {
            (*json, inspect(file).and_then(|found| digest(&found, *json)))
        }
        Command::Convert {
            input,
            output,
            codec,
            digest,
            json,
        } => (*json, convert::run(input, output, *codec, *digest, *json)),
        Command::VerifyProof {
            vk,
            params,
            proof,
            instances,
            digest,
            transcript,
            scheme,
            json,
        } => (
            *json,
            proof::pin(*digest, transcript.as_deref()).and_then(|pin| {
                proof::run(&proof::Request {
                    vk,
                    params,
                    proof,
                    instances: instances.as_deref(),
                    pin,
                    scheme: if scheme == "gwc" {
                        keycodec::Scheme::Gwc
                    } else {
                        keycodec::Scheme::Shplonk
                    },
                    json: *json,
                })
            }),
        ),
        Command::Params(command) => (command.json(), command.run()),
        Command::Push {
            file,
            url,
            digest,
            json,
        } => (*json, remote::push(file, url, *digest, *json)),
        Command::Pull {
            url,
            file,
            digest,
            codecs,
            json,
        } => (*json, remote::pull(url, file, *digest, codecs, *json)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let (code, message) = match failure {
                Failure::Check(message) => (1, message),
                Failure::Io(message) => (3, message),
                Failure::Remote(message) => (4, message),
                Failure::Usage(message) => (2, message),
                Failure::Reported(code, message) => {
                    if !json {
                        eprintln!("keycodec: {message}");
                    }
                    return ExitCode::from(code);
                }
            };
            if json {
                println!("{}", json!({ "ok": false, "error": message }));
            } else {
                eprintln!("keycodec: {message}");
            }
            ExitCode::from(code)
        }
    }
}

/// A command line clap refused: its message (as JSON when `--json` is among the arguments),
/// exit code 2; `--help` and `--version` print as usual and exit 0.
fn usage_error(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        let _ = err.print();
        return ExitCode::SUCCESS;
    }
    if std::env::args_os().any(|arg| arg == "--json") {
        let message = err.kind().as_str().map_or_else(
            || err.to_string().trim().to_owned(),
            |kind| format!("{kind}: {}", err.to_string().trim()),
        );
        println!(
            "{}",
            json!({ "ok": false, "error": message, "exit_code": 2 })
        );
    } else {
        let _ = err.print();
    }
    ExitCode::from(2)
}
