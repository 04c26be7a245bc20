//! `--remote`: the proving key in object storage, on a loopback S3 server (moto) this module
//! starts. For each backend, one plan (so that the server holds one key at a time): the key
//! uploaded every run, then, interleaved, a remote load (ranged GETs decoded as they
//! arrive), the plain download of the same object by `object_store` into memory (one GET:
//! the floor, the server's own throughput), downloading to a file and then loading it (the
//! reference), a pinned cache hit, and a load of the same backend's local file (the cache
//! hit's reference).

use std::sync::Arc;
use std::time::Instant;

use halo2_proofs::plonk::ProvingKey;
use halo2curves::bn256::G1Affine;
use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::object_store::{ObjectStore, ObjectStoreExt};
use keycodec::remote::{CacheOutcome, Remote};
use keycodec::{Backend, KeyCodecExt, KeyDigest, Size, Validation};

use crate::exec::Sample;
use crate::measure::{self, load_options, Writer, Written};
use crate::plan::{Inputs, Kind, Plan, State};
use crate::runs::{Measured, Runner};
use crate::workload::Workload;

/// The remote rows of every selected keycodec backend.
///
/// # Errors
///
/// The server, an upload or a load failed, as text.
pub fn rows<C: Workload>(
    inputs: &Inputs<'_, C>,
    runner: &mut Runner,
    buffer: Size,
    wanted: crate::S3ServerName,
) -> Result<(Measured, &'static str), String> {
    let (server, name) = match wanted {
        crate::S3ServerName::S3sFs => server(inputs.scratch)?,
        crate::S3ServerName::Moto => (Server::Moto, "moto"),
    };
    let spinner = crate::fixture::spinner(format!("starting the loopback S3 server ({name})"));
    let server = server.get();
    let bucket = server.bucket("harness");
    let store = keycodec_tests::s3::store(&server.endpoint(), &bucket);
    let remote = Remote::new(Arc::clone(&store)).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    spinner.finish_and_clear();
    let cache = inputs.scratch.join("remote-cache");
    let mut all = Measured {
        rows: Vec::new(),
        saves: Vec::new(),
        runs: 0,
        stopped: String::new(),
    };
    for backend in Backend::compiled().filter(|b| inputs.backends.iter().any(|n| n == b.name())) {
        let plan = plan::<C>(inputs, backend, &remote, &store, &runtime, &cache)?;
        let measured = runner.measure(&plan, buffer)?;
        all.rows.extend(measured.rows);
        all.saves.extend(measured.saves);
        (all.runs, all.stopped) = (measured.runs, measured.stopped);
        // The cache's copy goes with the plan's objects.
        let _ = std::fs::remove_dir_all(&cache);
    }
    Ok((all, name))
}

/// The server the remote rows use, and its name.
enum Server {
    /// s3s-fs, file-backed: serves a range of a large object at the cost of that range.
    S3sFs(keycodec_tests::s3::S3Server),
    /// moto: copies the whole object for every ranged GET, so large keys load slowly from
    /// it through no fault of the loader.
    Moto,
}

impl Server {
    fn get(&self) -> &keycodec_tests::s3::S3Server {
        match self {
            Server::S3sFs(server) => server,
            Server::Moto => keycodec_tests::s3::server(),
        }
    }
}

/// s3s-fs if it is on the `PATH` or in the harness's tools folder, installed there (from
/// crates.io, once: a few minutes) if not; moto if that fails.
fn server(scratch: &std::path::Path) -> Result<(Server, &'static str), String> {
    let tools = scratch.join("../tools");
    let installed = tools.join("bin").join("s3s-fs");
    let on_path = std::process::Command::new("s3s-fs")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    let binary = if on_path {
        Some(std::path::PathBuf::from("s3s-fs"))
    } else if installed.exists() {
        Some(installed.clone())
    } else {
        let spinner = crate::fixture::spinner(
            "installing s3s-fs, the loopback S3 server, from crates.io (once; a few minutes)"
                .into(),
        );
        let status = std::process::Command::new("cargo")
            .args([
                "install",
                "--locked",
                "--quiet",
                "s3s-fs@0.14.1",
                "--features",
                "binary",
                "--root",
            ])
            .arg(&tools)
            .status();
        spinner.finish_and_clear();
        status
            .is_ok_and(|status| status.success())
            .then_some(installed)
    };
    let root = scratch.join("s3s-fs-root");
    let _ = std::fs::remove_dir_all(&root);
    Ok(match binary {
        Some(binary) => (
            Server::S3sFs(keycodec_tests::s3::S3Server::start_s3s_fs(&binary, &root)),
            "s3s-fs",
        ),
        None => {
            eprintln!("warning: s3s-fs could not be installed; the remote rows use moto");
            (Server::Moto, "moto")
        }
    })
}

fn plan<'a, C: Workload>(
    inputs: &Inputs<'a, C>,
    backend: Backend,
    remote: &'a Remote,
    store: &'a Arc<dyn ObjectStore>,
    runtime: &'a tokio::runtime::Runtime,
    cache: &'a std::path::Path,
) -> Result<Plan<'a>, String> {
    let codec = backend.codec().map_err(|e| e.to_string())?;
    let (pk, scratch, params) = (inputs.pk, inputs.scratch, inputs.circuit_params);
    let pin: KeyDigest = inputs.target.key.parse().map_err(|e| format!("{e}"))?;
    let k = pk.get_vk().get_domain().k();
    let name = backend.name();
    let location = ObjectPath::from(format!("{name}.pk"));
    let mut plan = Plan::empty();
    let is_original = move |loaded: &ProvingKey<G1Affine>| {
        KeyDigest::of_pk(loaded).is_ok_and(|digest| digest == pin)
    };

    let (at, at_removed) = (location.clone(), location.clone());
    let object = plan.object(
        (Kind::Remote, name, "upload"),
        Box::new(move |_buffer| {
            let started = Instant::now();
            remote
                .save::<C, _>(codec, &at, pk, params.clone())
                .map_err(|e| e.to_string())?;
            let seconds = started.elapsed().as_secs_f64();
            let size = remote.head(&at).map_err(|e| e.to_string())?.size;
            Ok((
                Written {
                    seconds,
                    unsynced: None,
                },
                size,
            ))
        }),
        Box::new(move || match runtime.block_on(store.delete(&at_removed)) {
            Err(err) if !matches!(err, keycodec::remote::object_store::Error::NotFound { .. }) => {
                Err(err.to_string())
            }
            _ => Ok(()),
        }),
    );
    let local = plan.file(
        (Kind::Remote, name, "local copy"),
        Box::new(move |path, buffer| {
            measure::write::<C>(Writer::Codec(codec), path, pk, params.clone(), buffer)
        }),
        scratch,
    );
    plan.hide(local);
    let sample = |seconds: f64, verified: bool| Sample {
        seconds,
        verified,
        rss_rise: None,
    };

    let at = location.clone();
    let load = plan.case(
        (Kind::Remote, name, "ranged GETs", "checked", State::Warm),
        vec![object],
        Box::new(move |_paths, buffer| {
            let started = Instant::now();
            let loaded: ProvingKey<G1Affine> = remote
                .load::<C, _>(
                    codec,
                    &at,
                    params.clone(),
                    &load_options(Validation::Checked, None, Some(k), buffer),
                )
                .map_err(|e| e.to_string())?;
            let seconds = started.elapsed().as_secs_f64();
            Ok(sample(seconds, is_original(&loaded)))
        }),
    );
    let at = location.clone();
    let floor = plan.case(
        (Kind::Remote, name, "plain GET", "floor", State::Warm),
        vec![object],
        Box::new(move |_paths, _buffer| {
            let started = Instant::now();
            let bytes = runtime
                .block_on(async { store.get(&at).await?.bytes().await })
                .map_err(|e| e.to_string())?;
            let seconds = started.elapsed().as_secs_f64();
            let size = remote.head(&at).map_err(|e| e.to_string())?.size;
            Ok(sample(seconds, bytes.len() as u64 == size))
        }),
    );
    let at = location.clone();
    let download_then_load = plan.case(
        (Kind::Remote, name, "download, load", "checked", State::Warm),
        vec![object],
        Box::new(move |_paths, buffer| {
            let path = scratch.join(format!("{name}-downloaded.key"));
            let started = Instant::now();
            let file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
            remote
                .download_to(&at, &file, &|_| {})
                .map_err(|e| e.to_string())?;
            file.sync_all().map_err(|e| e.to_string())?;
            drop(file);
            let loaded: ProvingKey<G1Affine> = codec
                .load::<C, _>(
                    &path,
                    params.clone(),
                    &load_options(Validation::Checked, None, Some(k), buffer),
                )
                .map_err(|e| e.to_string())?;
            let seconds = started.elapsed().as_secs_f64();
            let _ = std::fs::remove_file(&path);
            Ok(sample(seconds, is_original(&loaded)))
        }),
    );
    let at = location.clone();
    let hit = plan.case(
        (Kind::Remote, name, "cache hit", "pinned", State::Warm),
        vec![object],
        Box::new(move |_paths, buffer| {
            let options = load_options(Validation::Checked, Some(pin), Some(k), buffer);
            let load = || {
                remote
                    .load_cached::<C, ProvingKey<G1Affine>>(
                        codec,
                        &at,
                        cache,
                        params.clone(),
                        &options,
                    )
                    .map_err(|e| e.to_string())
            };
            // The first run fills the cache, untimed.
            if !cache.join(format!("{pin}.kc")).exists() {
                load()?;
            }
            let started = Instant::now();
            let (loaded, outcome) = load()?;
            let seconds = started.elapsed().as_secs_f64();
            let hit = matches!(outcome, CacheOutcome::Hit(_));
            Ok(sample(seconds, hit && is_original(&loaded)))
        }),
    );
    let local_load = plan.case(
        (Kind::Remote, name, "local file", "pinned", State::Warm),
        vec![local],
        Box::new(move |paths, buffer| {
            let path = paths.first().ok_or("no file")?;
            let started = Instant::now();
            let loaded: ProvingKey<G1Affine> = codec
                .load::<C, _>(
                    path,
                    params.clone(),
                    &load_options(Validation::Checked, Some(pin), Some(k), buffer),
                )
                .map_err(|e| e.to_string())?;
            let seconds = started.elapsed().as_secs_f64();
            Ok(sample(seconds, is_original(&loaded)))
        }),
    );
    plan.compare(load, Some(download_then_load), Some(floor));
    plan.compare(download_then_load, None, Some(floor));
    plan.compare(hit, Some(local_load), None);
    Ok(plan)
}
