//! `--remote`: artifacts in object storage, on a loopback S3 server this module starts.
//!
//! For each backend, one plan (so that the server holds one key at a time): the key
//! uploaded in each run (after the minimum of runs, while its upload's ratio is still wide),
//! then, interleaved, a remote load (ranged GETs decoded as they
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

mod backend;
mod server;
mod start;
mod transfers;

use std::sync::Arc;

use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::object_store::{ObjectStore, ObjectStoreExt};
use keycodec::remote::Remote;
use keycodec::Backend;
use keycodec_core::Size;
use keycodec_tests::link::{Link, LinkProfile};

use crate::exec::Sample;
use crate::plan::Inputs;
use crate::runs::{Measured, Runner};
use crate::workload::Workload;
use backend::plan;
use server::{server, Publisher, Server};
use start::start_plan;

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

/// A sample of a load that records no memory.
fn sample(seconds: f64, verified: bool) -> Sample {
    Sample {
        seconds,
        verified,
        rss_rise: None,
        huge_pages: None,
        compact_stalls: None,
        cached_before: None,
        way: None,
        cpu: None,
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
