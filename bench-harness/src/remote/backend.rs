//! One backend's remote rows: its key uploaded in each run, then each way of loading it
//! (ranged GETs, the server's floor, one GET, download then load, a cache hit, the local file).

use std::sync::Arc;
use std::time::Instant;

use halo2_proofs::plonk::ProvingKey;
use halo2curves::bn256::G1Affine;
use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::object_store::ObjectStoreExt;
use keycodec::{Backend, KeyDigest, KeyOptions, KeyPin, Object, Validation};
use keycodec_core::KeyCodecExt;

use super::transfers::{ranged_gets, to_last_part, watching_uploads};
use super::{delete, sample, Context};
use crate::measure::{self, load_options, Writer, Written};
use crate::plan::{Inputs, Kind, Plan, State};
use crate::workload::Workload;

/// The remote rows' plan: the objects runs upload and the loads timed against them.
///
/// Long on purpose: one block per row of the remote table, in its order.
pub(super) fn plan<'a, C: Workload>(
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
            // Through the facade, as a prover loads an object: pinned, its backend named,
            // under the harness's limits (a compact key's recomputation at k = 20 takes more
            // memory than the default budget allows).
            let object = Object {
                remote: Arc::clone(remote),
                path: at.clone(),
                cache: cache.to_path_buf(),
            };
            let options = KeyOptions {
                pin: Some(KeyPin::Digest(pin)),
                k: Some(k),
                backend: Some(backend),
                limits: measure::load_limits(),
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
