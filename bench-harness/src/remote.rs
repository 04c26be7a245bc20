//! `--remote`: artifacts in object storage, on a loopback S3 server this module starts.
//!
//! For each backend, one plan (so that the server holds one key at a time): the key
//! uploaded every run, then, interleaved, a remote load (ranged GETs decoded as they
//! arrive), the server's floor (the object's ranges fetched into memory, as many at once as
//! a load may keep in flight), one plain GET into memory (what `curl` does; not behind an
//! emulated link, where one stream's time is the object over its cap per connection),
//! downloading to a file and then loading it (the remote load's reference), a pinned cache
//! hit, and a load of the same backend's local file (the cache hit's reference).
//!
//! `--link`: every connection to the servers crosses one emulated link
//! (`keycodec_tests::link`), which adds a latency to each request and caps each connection
//! and all of them together.
//!
//! Then the prover's cold start from storage, with the first backend selected: parameters
//! by HTTP URL (published as halo2 writes them, pinned by their file's SHA-256) and the key
//! in S3 (pinned by its digest), both through a cache, on a cold machine (the cache emptied
//! before each run) and a warm one; against what halo2's users do: download both files,
//! then read them with halo2's readers (cold), or read the files already there (warm).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use halo2_proofs::plonk::ProvingKey;
use halo2curves::bn256::G1Affine;
use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::object_store::{ObjectStore, ObjectStoreExt};
use keycodec::remote::Remote;
use keycodec::{Backend, KeyDigest, KeyOptions, KeyPin, Object, Validation};
use keycodec_core::{KeyCodecExt, Size};
use keycodec_tests::link::{Link, LinkProfile};

use crate::exec::Sample;
use crate::measure::{self, load_options, Writer, Written};
use crate::plan::{Inputs, Kind, Plan, State, HALO2_NATIVE};
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
    link: Option<LinkProfile>,
) -> Result<(Measured, &'static str), String> {
    let (server, name) = match wanted {
        crate::S3ServerName::S3sFs => server(inputs.scratch)?,
        crate::S3ServerName::Moto => (Server::Moto, "moto"),
    };
    let spinner = crate::fixture::spinner(format!("starting the loopback S3 server ({name})"));
    let s3 = server.get();
    let bucket = s3.bucket("harness");
    // Every connection to either server crosses the one link.
    let link = link.map(Link::new);
    let front = |addr| link.as_ref().map_or(addr, |link| link.front(addr));
    let store = keycodec_tests::s3::store(&format!("http://{}", front(s3.addr)), &bucket);
    let remote = Arc::new(Remote::new(Arc::clone(&store)).map_err(|e| e.to_string())?);
    let runtime = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    spinner.finish_and_clear();
    let cache = inputs.scratch.join("remote-cache");
    let mut all = Measured {
        rows: Vec::new(),
        saves: Vec::new(),
        runs: 0,
        stopped: String::new(),
    };
    let selected: Vec<Backend> = Backend::compiled()
        .filter(|b| inputs.backends.iter().any(|n| n == b.name()))
        .collect();
    let context = Context {
        remote: &remote,
        store: &store,
        runtime: &runtime,
        cache: &cache,
        link: link.as_ref(),
    };
    for &backend in &selected {
        let plan = plan::<C>(inputs, backend, &context, link.is_none())?;
        let measured = runner.measure(&plan, buffer)?;
        all.rows.extend(measured.rows);
        all.saves.extend(measured.saves);
        (all.runs, all.stopped) = (measured.runs, measured.stopped);
        // The cache's copy goes with the plan's objects.
        let _ = std::fs::remove_dir_all(&cache);
    }
    if let Some(&backend) = selected.first() {
        let publisher = Publisher {
            server: &server,
            bucket: &bucket,
            remote: &remote,
            front: &front,
        };
        let plan = start_plan::<C>(inputs, backend, &context, &publisher)?;
        let measured = runner.measure(&plan, buffer)?;
        all.rows.extend(measured.rows);
        all.saves.extend(measured.saves);
        (all.runs, all.stopped) = (measured.runs, measured.stopped);
        let _ = std::fs::remove_dir_all(&cache);
    }
    Ok((all, name))
}

/// What every remote plan uses.
struct Context<'a> {
    remote: &'a Arc<Remote>,
    store: &'a Arc<dyn ObjectStore>,
    runtime: &'a tokio::runtime::Runtime,
    /// The cache directory of cache hits and cold starts.
    cache: &'a std::path::Path,
    /// The emulated link, if any: an upload is also timed to its last part.
    link: Option<&'a Link>,
}

/// The server the remote rows use, and its name.
enum Server {
    /// s3s-fs, file-backed: serves a range of a large object at the cost of that range;
    /// with a second instance, without credentials, on the same files: the public web
    /// server of published parameters.
    S3sFs {
        server: keycodec_tests::s3::S3Server,
        public: keycodec_tests::s3::S3Server,
    },
    /// moto: copies the whole object for every ranged GET, so large keys load slowly from
    /// it through no fault of the loader; serves objects put `public-read` to anyone.
    Moto,
}

impl Server {
    fn get(&self) -> &keycodec_tests::s3::S3Server {
        match self {
            Server::S3sFs { server, .. } => server,
            Server::Moto => keycodec_tests::s3::server(),
        }
    }
}

/// Puts files where anyone can download them by HTTP.
struct Publisher<'a> {
    server: &'a Server,
    bucket: &'a str,
    remote: &'a Remote,
    /// The address clients reach a server's address by (through the link, if any).
    front: &'a dyn Fn(SocketAddr) -> SocketAddr,
}

impl Publisher<'_> {
    /// Publishes `file` as `name`; returns its URL.
    fn publish(&self, file: &std::path::Path, name: &str) -> Result<String, String> {
        use keycodec_tests::s3::S3Server;
        match self.server {
            Server::S3sFs { public, .. } => {
                let open = std::fs::File::open(file).map_err(|e| e.to_string())?;
                self.remote
                    .upload_file(&open, file, &ObjectPath::from(name), &|_| {})
                    .map_err(|e| e.to_string())?;
                Ok(S3Server::public_url(
                    (self.front)(public.addr),
                    self.bucket,
                    name,
                ))
            }
            Server::Moto => {
                let server = self.server.get();
                let bytes = std::fs::read(file).map_err(|e| e.to_string())?;
                server.put_public(self.bucket, name, &bytes);
                Ok(S3Server::public_url(
                    (self.front)(server.addr),
                    self.bucket,
                    name,
                ))
            }
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
            Server::S3sFs {
                server: keycodec_tests::s3::S3Server::start_s3s_fs(&binary, &root),
                public: keycodec_tests::s3::S3Server::start_s3s_fs_public(&binary, &root),
            },
            "s3s-fs",
        ),
        None => {
            eprintln!("warning: s3s-fs could not be installed; the remote rows use moto");
            (Server::Moto, "moto")
        }
    })
}

/// The remote rows' plan: the objects every run uploads and the loads timed against them.
///
/// Long on purpose: one block per row of the remote table, in its order.
fn plan<'a, C: Workload>(
    inputs: &Inputs<'a, C>,
    backend: Backend,
    context: &Context<'a>,
    single_stream: bool,
) -> Result<Plan<'a>, String> {
    let &Context {
        remote,
        store,
        runtime,
        cache,
        link,
    } = context;
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
            let save = || {
                remote
                    .save::<C, _>(codec, &at, pk, params.clone())
                    .map(drop)
                    .map_err(|e| e.to_string())
            };
            let (seconds, carried) = match link {
                Some(link) => watching_uploads(link, save)?,
                None => {
                    let started = Instant::now();
                    save()?;
                    (started.elapsed().as_secs_f64(), Vec::new())
                }
            };
            let size = remote.head(&at).map_err(|e| e.to_string())?.size;
            Ok((
                Written {
                    seconds,
                    unsynced: link.and_then(|link| to_last_part(&carried, size, link)),
                },
                size,
            ))
        }),
        Box::new(move || delete(store, runtime, &at_removed)),
    );
    let local = plan.file(
        (Kind::Remote, name, "local copy"),
        Box::new(move |path, buffer| {
            measure::write::<C>(Writer::Codec(codec), path, pk, params.clone(), buffer)
        }),
        scratch,
    );
    plan.hide(local);
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
        (Kind::Remote, name, "GETs to memory", "floor", State::Warm),
        vec![object],
        Box::new(move |_paths, _buffer| {
            let size = remote.head(&at).map_err(|e| e.to_string())?.size;
            // The fastest of as many lanes as a load starts with, as many as it may grow to,
            // and (on plain loopback, where one stream is not capped) one: behind a link the
            // most lanes fill it; on plain loopback the server's two cores may answer fewer
            // at once faster, and a small object comes fastest in one range.
            let options = keycodec::remote::RemoteOptions::default();
            let one = single_stream.then_some(1);
            let mut fastest = f64::INFINITY;
            for lanes in one
                .into_iter()
                .chain([options.concurrency, options.max_concurrency])
            {
                let (seconds, received) = ranged_gets(store, runtime, &at, size, lanes as u64)?;
                if received != size {
                    return Ok(sample(seconds, false));
                }
                fastest = fastest.min(seconds);
            }
            Ok(sample(fastest, true))
        }),
    );
    // Behind a link, one stream's time is the object over the link's cap per connection:
    // known without a transfer that would take minutes.
    if single_stream {
        let at = location.clone();
        let one_get = plan.case(
            (Kind::Remote, name, "one GET", "-", State::Warm),
            vec![object],
            Box::new(move |_paths, _buffer| {
                let size = remote.head(&at).map_err(|e| e.to_string())?.size;
                let started = Instant::now();
                let bytes = runtime
                    .block_on(async { store.get(&at).await?.bytes().await })
                    .map_err(|e| e.to_string())?;
                let seconds = started.elapsed().as_secs_f64();
                Ok(sample(seconds, bytes.len() as u64 == size))
            }),
        );
        plan.compare(one_get, None, Some(floor));
    }
    let at = location.clone();
    let download_then_load = plan.case(
        (Kind::Remote, name, "download, load", "checked", State::Warm),
        vec![object],
        Box::new(move |_paths, buffer| {
            let path = scratch.join(format!("{name}-downloaded.key"));
            let started = Instant::now();
            let file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
            let info = remote.head(&at).map_err(|e| e.to_string())?;
            remote
                .download_to(&at, &info, &file, &|_| {})
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
        Box::new(move |_paths, _buffer| {
            // Through the facade, as a prover loads an object: pinned, its backend named.
            let object = Object {
                remote: Arc::clone(remote),
                path: at.clone(),
                cache: cache.to_path_buf(),
            };
            let options = KeyOptions {
                pin: Some(KeyPin::Digest(pin)),
                k: Some(k),
                backend: Some(backend),
                ..KeyOptions::default()
            };
            let load = || {
                keycodec::load_key::<C, ProvingKey<G1Affine>>(
                    object.clone(),
                    params.clone(),
                    &options,
                )
                .map_err(|e| e.to_string())
            };
            // The first run fills the cache, untimed.
            let entry = cache.join(format!("{pin}-{name}.kc"));
            if !entry.exists() {
                load()?;
            }
            let stamp = |path: &std::path::Path| {
                std::fs::metadata(path)
                    .and_then(|meta| meta.modified())
                    .ok()
            };
            let before = stamp(&entry);
            let started = Instant::now();
            let loaded = load()?;
            let seconds = started.elapsed().as_secs_f64();
            // A hit reads the entry that was there: it is neither missing nor rewritten.
            let hit = before.is_some() && stamp(&entry) == before;
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

/// Runs `upload`, noting every millisecond how many bytes the link has carried up since it
/// started: its seconds, and those notes (seconds since the start, bytes).
fn watching_uploads(
    link: &Link,
    upload: impl FnOnce() -> Result<(), String>,
) -> Result<(f64, Vec<(f64, u64)>), String> {
    let done = std::sync::atomic::AtomicBool::new(false);
    let before = link.bytes_up();
    let started = Instant::now();
    let (uploaded, carried) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let mut carried = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let bytes = link.bytes_up().saturating_sub(before);
                carried.push((started.elapsed().as_secs_f64(), bytes));
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            carried
        });
        let uploaded = upload();
        let seconds = started.elapsed().as_secs_f64();
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (
            uploaded.map(|()| seconds),
            watcher.join().unwrap_or_default(),
        )
    });
    Ok((uploaded?, carried))
}

/// When an upload's parts had all reached the server: the first note of the link having
/// carried `size` bytes up (the parts' bodies; their requests' headers make it a little
/// early, by under a millisecond's worth), plus the link's latency. What the upload takes
/// after that is the parts' last answers and the completion, most of it the server's work
/// (s3s-fs reads every part again to assemble the object).
fn to_last_part(carried: &[(f64, u64)], size: u64, link: &Link) -> Option<f64> {
    carried
        .iter()
        .find(|&&(_, bytes)| bytes >= size)
        .map(|&(seconds, _)| seconds + link.profile().latency.as_secs_f64())
}

/// The server's floor for the object at `at` (`size` bytes): ranged GETs at once, `lanes` of
/// them in flight, each into memory and dropped (nothing decoded, nothing written); seconds,
/// and the bytes received.
fn ranged_gets(
    store: &Arc<dyn ObjectStore>,
    runtime: &tokio::runtime::Runtime,
    at: &ObjectPath,
    size: u64,
    lanes: u64,
) -> Result<(f64, u64), String> {
    let lanes = lanes.max(1);
    // Every lane fetches the same bytes in as few ranges of at most 16 MiB as it can (one
    // each up to 1 GiB): the fewest round trips, and every lane busy to the end, at any size.
    let rounds = size.div_ceil(lanes * (16 << 20)).max(1);
    let range = size.div_ceil(lanes * rounds).max(64 << 10);
    let started = Instant::now();
    let received = runtime.block_on(async {
        let mut tasks = tokio::task::JoinSet::new();
        for lane in 0..lanes {
            let (store, at) = (Arc::clone(store), at.clone());
            tasks.spawn(async move {
                let mut received = 0u64;
                let mut start = lane * range;
                while start < size {
                    let end = (start + range).min(size);
                    received += store.get_range(&at, start..end).await?.len() as u64;
                    start += lanes * range;
                }
                Ok::<u64, keycodec::remote::object_store::Error>(received)
            });
        }
        let mut total = 0u64;
        while let Some(lane) = tasks.join_next().await {
            total += lane
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
        }
        Ok::<u64, String>(total)
    })?;
    Ok((started.elapsed().as_secs_f64(), received))
}

/// What the cold start rows share, owned by the plan's closures.
struct StartSetup {
    /// The parameters' URL, and the SHA-256 of the file published there.
    url: String,
    /// The parameters' object (the same file), for halo2's download.
    srs_at: ObjectPath,
    /// The same file on this machine, for halo2's read of the files already there.
    srs: PathBuf,
    /// The key as keycodec saved it, and as halo2 wrote it.
    key_at: ObjectPath,
    native_at: ObjectPath,
    /// Where halo2's download puts the key and the parameters.
    downloads: (PathBuf, PathBuf),
    /// The key's and the parameters' options (their pins, the harness's limits).
    options: (KeyOptions, keycodec::ParamsOptions),
}

impl Drop for StartSetup {
    /// The parameters' local file goes with the plan.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.srs);
    }
}

/// The cold start from storage (see the module docs), with `backend`'s codec.
///
/// Long on purpose: it is the table's rows in their order (the server's files, then each
/// row's setup and timed load), each block a row, read top to bottom; split, a row's setup
/// would sit apart from its load.
fn start_plan<'a, C: Workload>(
    inputs: &Inputs<'a, C>,
    backend: Backend,
    context: &Context<'a>,
    publisher: &Publisher<'_>,
) -> Result<Plan<'a>, String> {
    use halo2_proofs::SerdeFormat;
    use keycodec::{ColdStart, Location, Origin, ParamsOptions, ParamsPin, Start};
    use sha2::{Digest, Sha256};

    let &Context {
        store,
        runtime,
        cache,
        ..
    } = context;
    let codec = backend.codec().map_err(|e| e.to_string())?;
    let (pk, scratch, params, circuit_params) = (
        inputs.pk,
        inputs.scratch,
        inputs.params,
        inputs.circuit_params,
    );
    let key_pin: KeyDigest = inputs.target.key.parse().map_err(|e| format!("{e}"))?;
    let params_digest: KeyDigest = inputs.target.params.parse().map_err(|e| format!("{e}"))?;
    let k = pk.get_vk().get_domain().k();
    let name = backend.name();

    // The parameters, published once for the plan as a project publishes its SRS: halo2's
    // raw layout, with the SHA-256 of the file beside it.
    let srs_name = format!("kzg_bn254_{k}.srs");
    let srs = scratch.join(&srs_name);
    measure::write_params_native(&srs, params, SerdeFormat::RawBytes, Size::mib(1))?;
    let sha256: [u8; 32] = Sha256::digest(std::fs::read(&srs).map_err(|e| e.to_string())?).into();
    let srs_bytes = std::fs::metadata(&srs).map_err(|e| e.to_string())?.len();
    let setup = Rc::new(StartSetup {
        url: publisher.publish(&srs, &srs_name)?,
        srs_at: ObjectPath::from(srs_name),
        srs,
        key_at: ObjectPath::from(format!("start-{name}.pk")),
        native_at: ObjectPath::from("start-halo2.pk"),
        downloads: (
            scratch.join("start-halo2-downloaded.pk"),
            scratch.join("start-halo2-downloaded.srs"),
        ),
        options: {
            let limits = load_options(Validation::Checked, None, Some(k), Size::mib(1)).limits;
            (
                KeyOptions {
                    pin: Some(KeyPin::Digest(key_pin)),
                    backend: Some(backend),
                    limits,
                    ..KeyOptions::default()
                },
                ParamsOptions {
                    pin: Some(ParamsPin::Sha256(sha256)),
                    limits,
                    ..ParamsOptions::default()
                },
            )
        },
    });

    let mut plan = Plan::empty();
    // Every run uploads the key as keycodec saves it and as halo2 writes it, and writes
    // halo2's file of a machine that has it already (the saves are the remote rows'); the
    // parameters' upload is the plan's, each run only notes its size.
    let mut upload = |at: &ObjectPath, writer: Writer, who: &'static str| {
        let (at, removed) = (at.clone(), at.clone());
        let local = scratch.join(format!("start-{who}.upload"));
        let object = plan.object(
            (Kind::RemoteStart, who, "upload"),
            Box::new(move |buffer| {
                measure::write::<C>(writer, &local, pk, circuit_params.clone(), buffer)?;
                let remote = Remote::new(Arc::clone(store)).map_err(|e| e.to_string())?;
                let open = std::fs::File::open(&local).map_err(|e| e.to_string())?;
                let started = Instant::now();
                remote
                    .upload_file(&open, &local, &at, &|_| {})
                    .map_err(|e| e.to_string())?;
                let seconds = started.elapsed().as_secs_f64();
                let size = std::fs::metadata(&local).map_err(|e| e.to_string())?.len();
                let _ = std::fs::remove_file(&local);
                Ok((
                    Written {
                        seconds,
                        unsynced: None,
                    },
                    size,
                ))
            }),
            Box::new(move || delete(store, runtime, &removed)),
        );
        plan.hide(object);
        object
    };
    let key_object = upload(&setup.key_at, Writer::Codec(codec), name);
    let native_object = upload(
        &setup.native_at,
        Writer::Native(SerdeFormat::RawBytes),
        HALO2_NATIVE,
    );
    let native_file = plan.file(
        (Kind::RemoteStart, HALO2_NATIVE, "file there"),
        Box::new(move |path, buffer| {
            measure::write::<C>(
                Writer::Native(SerdeFormat::RawBytes),
                path,
                pk,
                circuit_params.clone(),
                buffer,
            )
        }),
        scratch,
    );
    plan.hide(native_file);
    let srs_object = plan.object(
        (Kind::RemoteStart, HALO2_NATIVE, "published SRS"),
        Box::new(move |_buffer| {
            Ok((
                Written {
                    seconds: 0.0,
                    unsynced: None,
                },
                srs_bytes,
            ))
        }),
        Box::new(|| Ok(())),
    );
    plan.hide(srs_object);

    let started_right = move |start: &ColdStart| {
        start.origin == Origin::Loaded
            && KeyDigest::of_pk(&start.pk).is_ok_and(|digest| digest == key_pin)
            && KeyDigest::of_params(&start.params).is_ok_and(|digest| digest == params_digest)
    };
    let read_right = move |params: &keycodec::KzgParams, loaded: &ProvingKey<G1Affine>| {
        KeyDigest::of_pk(loaded).is_ok_and(|digest| digest == key_pin)
            && KeyDigest::of_params(params).is_ok_and(|digest| digest == params_digest)
    };
    // A prover's start: its own client (a new process has no connections yet), then both
    // artifacts through the cache.
    let start = {
        let setup = Rc::clone(&setup);
        move || {
            let circuit = C::with_params(circuit_params.clone());
            let started = Instant::now();
            let params = Location::url(&setup.url, cache).map_err(|e| e.to_string())?;
            let key = Location::Object(Object {
                remote: Arc::new(Remote::new(Arc::clone(store)).map_err(|e| e.to_string())?),
                path: setup.key_at.clone(),
                cache: cache.to_path_buf(),
            });
            let (key_options, params_options) = setup.options;
            let start = Start {
                key_options,
                params_options,
                ..Start::new(params, key, k)
            }
            .run(&circuit)
            .map_err(|e| e.to_string())?;
            let seconds = started.elapsed().as_secs_f64();
            Ok::<_, String>(sample(seconds, started_right(&start)))
        }
    };
    let start = Rc::new(start);
    let cold_start_run = Rc::clone(&start);
    let cold = plan.case(
        (
            Kind::RemoteStart,
            name,
            "empty cache",
            "pinned",
            State::Warm,
        ),
        vec![key_object, srs_object],
        Box::new(move |_paths, _buffer| {
            match std::fs::remove_dir_all(cache) {
                Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("emptying the cache: {err}"))
                }
                _ => {}
            }
            cold_start_run()
        }),
    );
    let warm = plan.case(
        (Kind::RemoteStart, name, "warm cache", "pinned", State::Warm),
        vec![key_object, srs_object],
        Box::new(move |_paths, _buffer| {
            // A run after the cache was emptied fills it, untimed.
            if !cache
                .join(format!("{key_pin}-{}.kc", codec.name()))
                .exists()
            {
                start()?;
            }
            start()
        }),
    );
    // halo2's users: both files downloaded at once, each by ranged GETs at once (the
    // fastest download there is), made durable, then read by halo2's readers.
    let download_setup = Rc::clone(&setup);
    let download = plan.case(
        (
            Kind::RemoteStart,
            HALO2_NATIVE,
            "download, read",
            "checked",
            State::Warm,
        ),
        vec![native_object, srs_object],
        Box::new(move |_paths, buffer| {
            let setup: &StartSetup = &download_setup;
            let (pk_path, srs_path) = (&setup.downloads.0, &setup.downloads.1);
            let started = Instant::now();
            let remote = Remote::new(Arc::clone(store)).map_err(|e| e.to_string())?;
            let fetch = |at: &ObjectPath, path: &std::path::Path| {
                let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
                let info = remote.head(at).map_err(|e| e.to_string())?;
                remote
                    .download_to(at, &info, &file, &|_| {})
                    .map_err(|e| e.to_string())?;
                file.sync_all().map_err(|e| e.to_string())
            };
            let (pk_fetched, srs_fetched) = std::thread::scope(|scope| {
                let srs = scope.spawn(|| fetch(&setup.srs_at, srs_path));
                let pk = fetch(&setup.native_at, pk_path);
                let srs = srs
                    .join()
                    .unwrap_or_else(|_| Err("the download thread panicked".into()));
                (pk, srs)
            });
            pk_fetched?;
            srs_fetched?;
            let (params, loaded) =
                read_natively::<C>(srs_path, pk_path, circuit_params.clone(), buffer)?;
            let seconds = started.elapsed().as_secs_f64();
            for path in [pk_path, srs_path] {
                let _ = std::fs::remove_file(path);
            }
            Ok(sample(seconds, read_right(&params, &loaded)))
        }),
    );
    let there_setup = Rc::clone(&setup);
    let there = plan.case(
        (
            Kind::RemoteStart,
            HALO2_NATIVE,
            "files there",
            "checked",
            State::Warm,
        ),
        vec![native_file, srs_object],
        Box::new(move |paths, buffer| {
            let pk_path = paths.first().ok_or("no file")?;
            let started = Instant::now();
            let (params, loaded) =
                read_natively::<C>(&there_setup.srs, pk_path, circuit_params.clone(), buffer)?;
            let seconds = started.elapsed().as_secs_f64();
            Ok(sample(seconds, read_right(&params, &loaded)))
        }),
    );
    plan.compare(cold, Some(download), None);
    plan.compare(warm, Some(there), None);
    Ok(plan)
}

/// halo2's users' start: the parameters, then the key, by halo2's readers of its raw layout.
fn read_natively<C: Workload>(
    srs: &std::path::Path,
    pk: &std::path::Path,
    circuit_params: C::Params,
    buffer: Size,
) -> Result<(keycodec::KzgParams, ProvingKey<G1Affine>), String> {
    use halo2_proofs::SerdeFormat;
    let params = measure::read_params_native(srs, SerdeFormat::RawBytes, buffer)?;
    let key = measure::read_key_native::<C>(pk, SerdeFormat::RawBytes, circuit_params, buffer)?;
    Ok((params, key))
}

/// A sample of a load that records no memory.
fn sample(seconds: f64, verified: bool) -> Sample {
    Sample {
        seconds,
        verified,
        rss_rise: None,
        huge_pages: None,
        compact_stalls: None,
    }
}

/// Deletes the object at `at`, if it is there.
fn delete(
    store: &Arc<dyn ObjectStore>,
    runtime: &tokio::runtime::Runtime,
    at: &ObjectPath,
) -> Result<(), String> {
    match runtime.block_on(store.delete(at)) {
        Err(err) if !matches!(err, keycodec::remote::object_store::Error::NotFound { .. }) => {
            Err(err.to_string())
        }
        _ => Ok(()),
    }
}
