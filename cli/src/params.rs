//! `keycodec params …`: KZG parameters, in keycodec's containers and in halo2's own files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use keycodec::compat::halo2_params_format;
use keycodec::halo2_proofs::poly::commitment::Params as _;
use keycodec::halo2_proofs::SerdeFormat;
use keycodec::{open_params, KzgParams, ParamsOptions, Validation};
use keycodec_core::{KeyCodecExt, SaveOptions};
use keycodec_rawbytes::RawBytesCodec;
use serde_json::json;

use crate::check::{inspect, Failure};

/// What `keycodec params` does.
#[derive(Subcommand, Debug)]
pub(crate) enum ParamsCommand {
    /// Load a parameters file (a container or halo2's file) with every point checked, and
    /// fail (exit 1) unless it is sound and not made from a known public seed (INSECURE:
    /// halo2-base's gen_srs writes such parameters under the ceremony file's name).
    Verify {
        /// The parameters file.
        file: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Print what a parameters file holds: a keycodec container (its header and checksum) or
    /// a halo2 file (its k and format, from its length), and INSECURE when it was made from
    /// a known public seed.
    Inspect {
        /// The parameters file.
        file: PathBuf,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Read halo2's parameters file (as `ParamsKZG::write_custom` writes it, in any format),
    /// check every point, and save it as a keycodec container: every later load takes the
    /// fast path.
    Import {
        /// halo2's parameters file (`kzg_bn254_22.srs`).
        source: PathBuf,
        /// The container to write.
        destination: PathBuf,
        /// Skip the points' checks (for a file you trust).
        #[arg(long)]
        trusted: bool,
        /// Accept parameters made from a known public seed (halo2-base's gen_srs): for tests
        /// only, anyone can forge proofs under them.
        #[arg(long)]
        allow_test_setup: bool,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Write parameters (a container or halo2's file) as halo2's own file, for halo2's
    /// `ParamsKZG::read_custom`.
    Export {
        /// The parameters file.
        source: PathBuf,
        /// halo2's file to write.
        destination: PathBuf,
        /// halo2's `SerdeFormat` to write.
        #[arg(long, value_enum, default_value_t = Format::Raw)]
        format: Format,
        /// Accept parameters made from a known public seed (halo2-base's gen_srs): for tests
        /// only, anyone can forge proofs under them.
        #[arg(long)]
        allow_test_setup: bool,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Fetch parameters as a project publishes them (kzg_bn254_22.srs at an HTTPS URL or in
    /// S3), pinned by the SHA-256 it documents, into a local cache: downloaded once, checked
    /// (the hash before anything is read, then every point), kept as a container (and,
    /// with --k, downsized once); every later fetch is a local load with no request.
    Fetch {
        /// Where from: https://host/path, http://host/path, or s3://bucket/path.
        url: String,
        /// The SHA-256 of the file as published (64 hex digits): any other file is refused.
        #[arg(long)]
        sha256: Option<String>,
        /// Downsize to 2^k points (once: the result is cached too).
        #[arg(long)]
        k: Option<u32>,
        /// The cache directory [default: $XDG_CACHE_HOME/keycodec/params, or
        /// ~/.cache/keycodec/params].
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Accept parameters made from a known public seed (halo2-base's gen_srs): for tests
        /// only, anyone can forge proofs under them.
        #[arg(long)]
        allow_test_setup: bool,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Downsize parameters to 2^k points (g truncated, g_lagrange recomputed by an FFT over
    /// curve points: long at large k) and save them as a container.
    Downsize {
        /// The parameters file (a container or halo2's file).
        source: PathBuf,
        /// The container to write.
        destination: PathBuf,
        /// The smaller k.
        #[arg(long)]
        k: u32,
        /// Accept parameters made from a known public seed (halo2-base's gen_srs): for tests
        /// only, anyone can forge proofs under them.
        #[arg(long)]
        allow_test_setup: bool,
        /// Print JSON for scripts.
        #[arg(long)]
        json: bool,
    },
}

/// halo2's `SerdeFormat`s, as the command line names them.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Format {
    /// `RawBytes` (and `RawBytesUnchecked`): 64-byte G1 points.
    Raw,
    /// `Processed`: compressed points, half the size, slow to read.
    Processed,
}

impl ParamsCommand {
    /// Whether the output is JSON.
    pub(crate) fn json(&self) -> bool {
        match self {
            ParamsCommand::Inspect { json, .. }
            | ParamsCommand::Verify { json, .. }
            | ParamsCommand::Import { json, .. }
            | ParamsCommand::Export { json, .. }
            | ParamsCommand::Fetch { json, .. }
            | ParamsCommand::Downsize { json, .. } => *json,
        }
    }

    /// Runs the command.
    pub(crate) fn run(&self) -> Result<(), Failure> {
        match self {
            ParamsCommand::Inspect { file, json } => inspect_params(file, *json),
            ParamsCommand::Verify { file, json } => verify_params(file, *json),
            ParamsCommand::Import {
                source,
                destination,
                trusted,
                allow_test_setup,
                json,
            } => {
                let options = ParamsOptions {
                    validation: if *trusted {
                        Validation::Trusted
                    } else {
                        Validation::Checked
                    },
                    test_setup: crate::check::test_setup(*allow_test_setup),
                    ..ParamsOptions::default()
                };
                let params = phase("reading and checking", source, || {
                    open_params(source, &options)
                })?;
                save(&params, destination, *json)
            }
            ParamsCommand::Export {
                source,
                destination,
                format,
                allow_test_setup,
                json,
            } => {
                let options = ParamsOptions {
                    test_setup: crate::check::test_setup(*allow_test_setup),
                    ..ParamsOptions::default()
                };
                let params = phase("reading", source, || open_params(source, &options))?;
                let format = match format {
                    Format::Raw => SerdeFormat::RawBytes,
                    Format::Processed => SerdeFormat::Processed,
                };
                // Atomically: a failed export leaves the previous file whole (halo2's reader
                // panics on a torn one).
                phase("writing", destination, || {
                    keycodec_core::replace_atomically(destination, |file| {
                        let mut file = std::io::BufWriter::with_capacity(1 << 20, file);
                        RawBytesCodec::new(format).export_params(&params, &mut file)?;
                        std::io::Write::flush(&mut file)
                            .map_err(|err| keycodec::Error::io("write", err))
                    })
                    .map_err(|err| err.at_path(destination))
                })?;
                report_written(destination, &params, None, *json);
                Ok(())
            }
            ParamsCommand::Fetch {
                url,
                sha256,
                k,
                cache,
                allow_test_setup,
                json,
            } => crate::remote::fetch(
                url,
                sha256.as_deref(),
                *k,
                cache.as_deref(),
                *allow_test_setup,
                *json,
            ),
            ParamsCommand::Downsize {
                source,
                destination,
                k,
                allow_test_setup,
                json,
            } => {
                let params = phase("reading and downsizing", source, || {
                    open_params(
                        source,
                        &ParamsOptions {
                            k: Some(*k),
                            test_setup: crate::check::test_setup(*allow_test_setup),
                            ..ParamsOptions::default()
                        },
                    )
                })?;
                save(&params, destination, *json)
            }
        }
    }
}

/// Saves parameters as a rawbytes container and reports it.
fn save(params: &KzgParams, destination: &Path, json: bool) -> Result<(), Failure> {
    let digest = phase("saving", destination, || {
        RawBytesCodec::default().save_params(destination, params, &SaveOptions::default())
    })?;
    report_written(destination, params, Some(digest), json);
    Ok(())
}

pub(crate) fn report_written(
    path: &Path,
    params: &KzgParams,
    digest: Option<keycodec::KeyDigest>,
    json: bool,
) {
    if json {
        println!(
            "{}",
            json!({
                "ok": true,
                "file": path.display().to_string(),
                "k": params.k(),
                "digest": digest.map(|d| d.to_string()),
            })
        );
    } else {
        match digest {
            Some(digest) => println!(
                "{}: parameters for k = {}, digest {digest}",
                path.display(),
                params.k()
            ),
            None => println!("{}: parameters for k = {}", path.display(), params.k()),
        }
    }
}

/// `params verify`: every point checked, and no known test setup.
fn verify_params(file: &Path, json: bool) -> Result<(), Failure> {
    let options = ParamsOptions {
        test_setup: keycodec::TestSetup::Allowed,
        ..ParamsOptions::default()
    };
    let params = phase("reading and checking", file, || open_params(file, &options))?;
    let insecure = keycodec_core::test_setup::known_setup_of(&params).map(|known| known.origin);
    let digest = keycodec::KeyDigest::of_params(&params).map_err(failure)?;
    if json {
        println!(
            "{}",
            json!({
                "ok": insecure.is_none(),
                "file": file.display().to_string(),
                "k": params.k(),
                "digest": digest.to_string(),
                "insecure_test_setup": insecure,
            })
        );
    } else if let Some(origin) = insecure {
        println!(
            "{}: INSECURE: parameters for k = {} made from a public seed ({origin}): anyone can forge proofs under them",
            file.display(),
            params.k()
        );
    } else {
        println!(
            "{}: parameters for k = {}, every point checked, digest {digest}",
            file.display(),
            params.k()
        );
    }
    match insecure {
        Some(origin) => Err(Failure::Reported(
            1,
            format!("{}: INSECURE test setup ({origin})", file.display()),
        )),
        None => Ok(()),
    }
}

/// The known test setup a parameters file's last bytes (`s_g2`) show, if any.
fn insecure_tail(file: &Path) -> Option<&'static str> {
    use std::io::{Read, Seek, SeekFrom};
    let mut handle = std::fs::File::open(file).ok()?;
    let len = handle.metadata().ok()?.len();
    handle.seek(SeekFrom::Start(len.saturating_sub(128))).ok()?;
    let mut tail = Vec::new();
    handle.take(128).read_to_end(&mut tail).ok()?;
    keycodec_core::test_setup::known_setup_in_tail(&tail).map(|known| known.origin)
}

/// Says INSECURE, for people, when the file was made from a known public seed.
fn warn_insecure(file: &Path, json: bool) {
    if let (Some(origin), false) = (insecure_tail(file), json) {
        println!(
            "  INSECURE      made from a public seed ({origin}): anyone can forge proofs under these parameters"
        );
    }
}

/// `params inspect`: a container's header, or a halo2 file's k and format.
fn inspect_params(file: &Path, json: bool) -> Result<(), Failure> {
    match inspect(file) {
        Ok(found) => {
            if json {
                // One document: the container's report and the finding.
                let mut value = crate::container::report_value(&found);
                if let Some(fields) = value.as_object_mut() {
                    fields.insert("insecure_test_setup".into(), json!(insecure_tail(file)));
                }
                println!("{value}");
            } else {
                crate::container::report(&found, json);
                warn_insecure(file, json);
            }
            Ok(())
        }
        Err(Failure::Check(_)) => {
            let format = halo2_params_format(file).map_err(failure)?;
            let len = std::fs::metadata(file)
                .map_err(|err| Failure::Io(format!("could not read {}: {err}", file.display())))?
                .len();
            let k = {
                use std::io::Read;
                let mut k = [0u8; 4];
                std::fs::File::open(file)
                    .and_then(|mut f| f.read_exact(&mut k))
                    .map_err(|err| {
                        Failure::Io(format!("could not read {}: {err}", file.display()))
                    })?;
                u32::from_le_bytes(k)
            };
            let format = match format {
                SerdeFormat::Processed => "Processed (compressed points)",
                _ => "RawBytes (uncompressed points)",
            };
            if json {
                println!(
                    "{}",
                    json!({ "file": file.display().to_string(), "kind": "halo2 parameters", "k": k, "format": format, "file_bytes": len, "insecure_test_setup": insecure_tail(file) })
                );
            } else {
                println!(
                    "{}: halo2 parameters file (no container), k = {k}, {format}, {len} bytes",
                    file.display()
                );
                warn_insecure(file, json);
                println!("  `keycodec params import` checks it and saves it as a container");
            }
            Ok(())
        }
        Err(other) => Err(other),
    }
}

/// Runs `work` with a spinner naming it and the file (on a terminal).
fn phase<T>(
    what: &str,
    file: &Path,
    work: impl FnOnce() -> keycodec::Result<T>,
) -> Result<T, Failure> {
    let spinner = spinner(format!("{what} {}", file.display()));
    let result = work();
    spinner.finish_and_clear();
    result.map_err(failure)
}

/// A spinner showing `message` and the time spent, ticking on its own (drawn only on a
/// terminal): the command's one style for work of unknown length.
pub(crate) fn spinner(message: String) -> ProgressBar {
    let spinner = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_message(message);
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner
}

/// A library error, by what the exit code says.
pub(crate) fn failure(err: keycodec::Error) -> Failure {
    match err {
        keycodec::Error::Io { .. } => Failure::Io(err.to_string()),
        other => Failure::Check(other.to_string()),
    }
}
