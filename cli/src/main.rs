//! `keycodec`: look at, check and pin keycodec containers without the circuit's code.
//!
//! Run `keycodec --help` for the commands, examples and exit codes.

#![forbid(unsafe_code)]

mod check;
mod convert;
mod manifest;
mod params;
mod proof;
mod remote;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use keycodec::KeyDigest;
use serde_json::json;

use check::{inspect, Failure, Inspection, PayloadState};

const EXAMPLES: &str = "\
Examples:
  keycodec inspect prover.pk                 what the file holds, and whether it is intact
  keycodec verify prover.pk --digest 4f1e…   fail unless intact and recording that digest
  keycodec digest prover.pk                  the key digest to pin (KeyOptions::pin)
  keycodec convert prover.pk prover.rkyv --codec rkyv --digest 4f1e…   no circuit code needed
  keycodec verify-proof --vk verifier.vk --params kzg_bn254_20.srs --proof proof.bin \
      --instances instances.json --transcript 0x1b7e…                 no circuit code needed
  keycodec inspect --json prover.pk | jq .k
  keycodec params import kzg_bn254_22.srs params-22.kc   check halo2's file, save a container
  keycodec params downsize params-22.kc params-20.kc --k 20
  keycodec params export params-22.kc kzg_bn254_22.srs --format processed
  keycodec push prover.pk s3://provers/keys/prover.pk --digest 4f1e…
  keycodec pull s3://provers/keys/prover.pk prover.pk --digest 4f1e… --codecs rawbytes
  keycodec params fetch https://example.org/kzg_bn254_22.srs --sha256 5a1c… --k 20
  keycodec fetch --manifest prover.json --cache /var/cache/prover   every artifact, checked
  keycodec verify --manifest prover.json --cache /var/cache/prover  what is there, no request

Object storage (push, pull, params fetch from s3://) is configured from the environment as
the AWS tools are: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT (an
S3-compatible server), AWS_ALLOW_HTTP=true (a plain-HTTP endpoint), AWS_SKIP_SIGNATURE=true (a
public bucket). params fetch also takes https:// and http:// URLs (any server that answers
ranged GETs).

Exit codes:
  0  the file is intact (and records the digest asked for)
  1  it is not: not a container, corrupt, truncated, another digest, another SHA-256, a
     backend not accepted
  2  the command line is wrong
  3  the file could not be read or written
  4  object storage failed (no such object, refused credentials, unreachable)

A container records its key's digest when it is saved (version 2). These commands check the
file's header and payload checksums, which detect corruption; the digest they print is the
one the file records. A load pinned to a digest (KeyOptions::pin) recomputes it from the key
itself, so a forged record is caught there (convert --digest does).";

/// Look at, check and pin keycodec containers (halo2 proving and verifying keys) without
/// the circuit's code.
#[derive(Parser, Debug)]
#[command(name = "keycodec", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print what a container holds (codec, mode, kind, k, circuit fingerprint, sizes, the
    /// recorded key digest) and whether its payload is intact.
    Inspect {
        /// The container file.
        file: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Check a container: its header, its length, its payload checksum, and with --digest
    /// that it records that key digest; or, with --manifest, every artifact a prover's
    /// manifest declares, where a start would find it (nothing is fetched). Exits 0 only if
    /// every check passes.
    Verify {
        /// The container file.
        #[arg(required_unless_present = "manifest", conflicts_with = "manifest")]
        file: Option<PathBuf>,
        /// A prover's manifest (docs/manifest.md): check each artifact it declares.
        #[arg(long, value_name = "MANIFEST")]
        manifest: Option<PathBuf>,
        /// The cache directory artifacts at URLs are in [default: ~/.cache/keycodec/artifacts].
        #[arg(long, requires = "manifest")]
        cache: Option<PathBuf>,
        /// The key digest the file must record (64 hex digits).
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print the key digest a container records, after checking the container.
    Digest {
        /// The container file.
        file: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Fetch every artifact a prover's manifest declares at a URL into the cache, each checked
    /// before it is kept (the parameters' pin, each key's container and recorded digest), at
    /// once, with progress per artifact; artifacts at paths are checked where they are. A
    /// warm cache makes no request.
    Fetch {
        /// The manifest (docs/manifest.md).
        #[arg(long, value_name = "MANIFEST")]
        manifest: PathBuf,
        /// The cache directory [default: ~/.cache/keycodec/artifacts].
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Convert a key (proving or verifying) whose container records its circuit to another
    /// backend, with no circuit code: every value is checked on the load, the output is
    /// written atomically, and the key's digest is kept (and printed). Pin the key with
    /// --digest: its record authenticates nothing.
    Convert {
        /// The key's container.
        input: PathBuf,
        /// The container to write.
        output: PathBuf,
        /// The backend to write with: rawbytes, bincode, rkyv or compact.
        #[arg(long)]
        codec: keycodec::Backend,
        /// The key's digest (64 hex digits): another key is refused.
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Check a proof with a verifying key whose container records its circuit (a verifying
    /// key's or a proving key's file), its KZG parameters and its instances, no circuit code:
    /// a Blake2b transcript, SHPLONK (halo2-lib's gen_proof) or GWC. Pin the key (--digest
    /// or --transcript): its record authenticates nothing. Exits 0 only if the proof verifies.
    VerifyProof {
        /// The verifying key's (or proving key's) container.
        #[arg(long)]
        vk: PathBuf,
        /// The KZG parameters (a container or halo2's file; larger ones are downsized).
        #[arg(long)]
        params: PathBuf,
        /// The proof: the transcript's bytes.
        #[arg(long)]
        proof: PathBuf,
        /// The instances: JSON, one array of strings per instance column ("0x2a" or "42").
        #[arg(long)]
        instances: Option<PathBuf>,
        /// The verifying key's digest (64 hex digits): another key is refused.
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// The verifying key's transcript_repr (0x and 64 hex digits), as a verifier or a
        /// contract carries it: another key is refused.
        #[arg(long)]
        transcript: Option<String>,
        /// The multi-open scheme: shplonk (halo2-lib's) or gwc.
        #[arg(long, default_value = "shplonk", value_parser = ["shplonk", "gwc"])]
        scheme: String,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// KZG parameters: inspect, import halo2's files, export them, fetch them by URL, downsize.
    #[command(subcommand)]
    Params(params::ParamsCommand),
    /// Check a container, then upload it to object storage (s3://bucket/path). Nothing
    /// appears at the URL unless the whole upload succeeds.
    Push {
        /// The container file.
        file: PathBuf,
        /// Where to: s3://bucket/path.
        url: String,
        /// The key digest the file must record (64 hex digits).
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Download a container from object storage (s3://bucket/path), check it, and only then
    /// put it at FILE (atomically: a failed pull leaves FILE as it was).
    Pull {
        /// Where from: s3://bucket/path.
        url: String,
        /// The file to write.
        file: PathBuf,
        /// The key digest the object must record (64 hex digits).
        #[arg(long)]
        digest: Option<KeyDigest>,
        /// The backends whose containers to accept, comma-separated (the object's header
        /// names its backend; another is refused before anything else is downloaded)
        /// [default: every backend].
        #[arg(long, value_delimiter = ',')]
        codecs: Vec<keycodec::Backend>,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

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

/// `inspect`: the header and the payload's state, whatever they are.
pub(crate) fn report(found: &Inspection, json: bool) {
    let header = &found.header;
    let codec_name = found.backend.map(|b| b.name());
    if json {
        println!("{}", report_value(found));
        return;
    }
    println!(
        "{}: keycodec container, version {}, {} bytes",
        found.path.display(),
        found.version,
        found.file_bytes
    );
    println!(
        "  codec         {} (id {}), mode {} ({})",
        codec_name.unwrap_or("unknown"),
        header.codec.byte(),
        found.mode.unwrap_or("unknown"),
        header.mode
    );
    println!("  key           {}, BN254, k = {}", header.kind, header.k);
    println!("  circuit       fingerprint {}", header.fingerprint);
    println!(
        "  payload       {} bytes, XXH3-64 {:#018x}: {}",
        header.payload_len,
        header.payload_checksum,
        match found.payload {
            PayloadState::Intact => "intact".to_owned(),
            _ => found.problem().unwrap_or_default(),
        }
    );
    match &found.record {
        Some(Ok(c)) => {
            println!(
                "  circuit       recorded: {} advice columns in {} phase(s), {} fixed, {} instance; {} selectors, {} challenges",
                c.advice, c.phases, c.fixed, c.instance, c.selectors, c.challenges
            );
            println!(
                "                {} gates, {} lookups, {} equality columns, degree {}, {} usable rows of {}",
                c.gates,
                c.lookups,
                c.equality,
                c.degree,
                c.usable_rows,
                1u64.checked_shl(header.k).unwrap_or(0)
            );
            // `()`, most circuits' parameters, records as null: nothing to show.
            if let Some(params) = c.params.as_ref().filter(|params| !params.is_null()) {
                println!("                parameters {params}");
            }
        }
        Some(Err(why)) => println!("  circuit       record unreadable: {why}"),
        None if header.kind == keycodec::ArtifactKind::Params => {}
        None => println!("  circuit       not recorded (load the key with its circuit type)"),
    }
    match header.digest {
        Some(digest) => println!("  key digest    {digest} (recorded)"),
        None => println!("  key digest    not recorded (a version 1 container)"),
    }
    match header.written_by {
        Some(writer) => println!(
            "  written by    {} with keycodec {}",
            writer.halo2(),
            writer.keycodec()
        ),
        None => println!(
            "  written by    not recorded (a version {} container)",
            found.version
        ),
    }
}

/// `inspect`'s JSON document.
pub(crate) fn report_value(found: &Inspection) -> serde_json::Value {
    let header = &found.header;
    json!({
        "ok": found.problem().is_none(),
        "file": found.path.display().to_string(),
        "file_bytes": found.file_bytes,
        "container_version": found.version,
        "codec": { "id": header.codec.byte(), "name": found.backend.map(|b| b.name()) },
        "mode": { "byte": header.mode, "name": found.mode },
        "kind": header.kind.to_string(),
        "curve": "BN254",
        "k": header.k,
        "circuit_fingerprint": header.fingerprint.to_string(),
        "payload_bytes": header.payload_len,
        "payload_checksum": format!("{:#018x}", header.payload_checksum),
        "payload": payload_json(found.payload),
        "key_digest": header.digest.map(|d| d.to_string()),
        "circuit": match &found.record {
            Some(Ok(c)) => json!({
                "recorded": true,
                "advice_columns": c.advice,
                "phases": c.phases,
                "fixed_columns": c.fixed,
                "instance_columns": c.instance,
                "selectors": c.selectors,
                "challenges": c.challenges,
                "gates": c.gates,
                "lookups": c.lookups,
                "equality_columns": c.equality,
                "degree": c.degree,
                "usable_rows": c.usable_rows,
                "params": c.params,
            }),
            Some(Err(why)) => json!({ "recorded": true, "error": why }),
            None => json!({ "recorded": false }),
        },
        "written_by": header.written_by.map(|writer| json!({
            "halo2": writer.halo2(),
            "keycodec": writer.keycodec(),
        })),
    })
}

fn payload_json(state: PayloadState) -> serde_json::Value {
    match state {
        PayloadState::Intact => json!({ "state": "intact" }),
        PayloadState::WrongLength { declared, present } => {
            json!({ "state": "wrong length", "declared": declared, "present": present })
        }
        PayloadState::Corrupt { found } => {
            json!({ "state": "corrupt", "found": format!("{found:#018x}") })
        }
    }
}

/// `verify`: every check, failing on the first that does not pass.
fn verify(found: &Inspection, expected: Option<KeyDigest>, json: bool) -> Result<(), Failure> {
    let name = found.path.display();
    if let Some(problem) = found.problem() {
        return Err(Failure::Check(format!("{name}: {problem}")));
    }
    if let Some(expected) = expected {
        match found.digest() {
            None => {
                return Err(Failure::Check(format!(
                    "{name}: records no key digest (a version 1 container): save it again to record one"
                )))
            }
            Some(recorded) if recorded != expected => {
                return Err(Failure::Check(format!(
                    "{name}: its {}'s digest is {recorded}, not the pinned {expected}",
                    found.header.kind
                )))
            }
            Some(_) => {}
        }
    }
    if json {
        println!(
            "{}",
            json!({
                "ok": true,
                "file": name.to_string(),
                "key_digest": found.digest().map(|d| d.to_string()),
                "digest_checked": expected.is_some(),
            })
        );
    } else {
        match expected {
            Some(digest) => println!("{name}: intact, records key digest {digest}"),
            None => println!("{name}: intact"),
        }
    }
    Ok(())
}

/// `digest`: the recorded digest of an intact container.
fn digest(found: &Inspection, json: bool) -> Result<(), Failure> {
    let name = found.path.display();
    if let Some(problem) = found.problem() {
        return Err(Failure::Check(format!("{name}: {problem}")));
    }
    let digest = found.digest().ok_or_else(|| {
        Failure::Check(format!(
            "{name}: records no key digest (a version 1 container): save it again to record one"
        ))
    })?;
    if json {
        println!(
            "{}",
            json!({ "file": name.to_string(), "key_digest": digest.to_string() })
        );
    } else {
        println!("{digest}");
    }
    Ok(())
}
