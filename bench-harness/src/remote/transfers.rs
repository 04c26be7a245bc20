//! What the remote rows time beside a load: when an upload's parts had crossed the emulated
//! link, and the server's floor (an object's ranges fetched into memory).

use std::sync::Arc;
use std::time::Instant;

use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::object_store::{ObjectStore, ObjectStoreExt};
use keycodec_tests::link::Link;

/// Runs `upload`, noting every millisecond how many bytes the link has carried up since it
/// started: its seconds, and those notes (seconds since the start, bytes).
pub(super) fn watching_uploads(
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
pub(super) fn to_last_part(carried: &[(f64, u64)], size: u64, link: &Link) -> Option<f64> {
    carried
        .iter()
        .find(|&&(_, bytes)| bytes >= size)
        .map(|&(seconds, _)| seconds + link.profile().latency.as_secs_f64())
}

/// The server's floor for the object at `at` (`size` bytes): ranged GETs at once, `lanes` of
/// them in flight, each into memory and dropped (nothing decoded, nothing written); seconds,
/// and the bytes received.
pub(super) fn ranged_gets(
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
