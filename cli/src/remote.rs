//! `keycodec push` and `keycodec pull`: containers to and from object storage, checked on
//! both sides.

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use keycodec::remote::Remote;
use keycodec::KeyDigest;
use serde_json::json;

use crate::check::{inspect, Failure, Inspection};

/// A bar counting bytes, with throughput.
fn bytes_bar(total: u64, message: String) -> ProgressBar {
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} ({eta} left)",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_message(message);
    bar
}

/// The store and object of `url`.
fn open(url: &str) -> Result<(Remote, keycodec::remote::object_store::path::Path), Failure> {
    Remote::from_url(url).map_err(|err| Failure::Remote(format!("{url}: {err}")))
}

/// Fails unless the container is intact and (if asked) records `digest`.
fn check(found: &Inspection, digest: Option<KeyDigest>, name: &str) -> Result<(), Failure> {
    if let Some(problem) = found.problem() {
        return Err(Failure::Check(format!("{name}: {problem}")));
    }
    match (digest, found.digest()) {
        (Some(expected), Some(recorded)) if recorded != expected => Err(Failure::Check(format!(
            "{name}: records key digest {recorded}, not {expected}"
        ))),
        (Some(_), None) => Err(Failure::Check(format!(
            "{name}: records no key digest (a version 1 container): save it again to record one"
        ))),
        _ => Ok(()),
    }
}

/// `push`: check the file, then upload it (nothing appears at the URL unless the whole
/// upload succeeds).
pub(crate) fn push(
    file: &Path,
    url: &str,
    digest: Option<KeyDigest>,
    json: bool,
) -> Result<(), Failure> {
    let found = inspect(file)?;
    check(&found, digest, &file.display().to_string())?;
    let (remote, location) = open(url)?;
    let bar = bytes_bar(found.file_bytes, format!("push {}", file.display()));
    let started = Instant::now();
    let sent = remote
        .upload_file(file, &location, &|n| bar.inc(n))
        .map_err(|err| Failure::Remote(err.to_string()))?;
    bar.finish_and_clear();
    report("pushed", file, url, sent, started, found.digest(), json);
    Ok(())
}

/// `pull`: download into a temporary file beside the destination, check it, then rename it
/// into place (a failed pull leaves the destination as it was).
pub(crate) fn pull(
    url: &str,
    file: &Path,
    digest: Option<KeyDigest>,
    json: bool,
) -> Result<(), Failure> {
    let (remote, location) = open(url)?;
    let info = remote
        .head(&location)
        .map_err(|err| Failure::Remote(err.to_string()))?;
    let dir = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let temp = tempfile::Builder::new()
        .prefix(&format!(".{name}.keycodec-pull."))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|err| Failure::Io(format!("{}: {err}", dir.display())))?;
    let bar = bytes_bar(info.size, format!("pull {url}"));
    let started = Instant::now();
    remote
        .download_to(&location, temp.as_file(), &|n| bar.inc(n))
        .map_err(|err| Failure::Remote(err.to_string()))?;
    bar.finish_and_clear();
    let found = inspect(temp.path())?;
    check(&found, digest, url)?;
    temp.as_file()
        .sync_all()
        .map_err(|err| Failure::Io(format!("{}: {err}", temp.path().display())))?;
    temp.persist(file)
        .map_err(|err| Failure::Io(format!("{}: {}", file.display(), err.error)))?;
    report(
        "pulled",
        file,
        url,
        info.size,
        started,
        found.digest(),
        json,
    );
    Ok(())
}

fn report(
    verb: &str,
    file: &Path,
    url: &str,
    bytes: u64,
    started: Instant,
    digest: Option<KeyDigest>,
    json: bool,
) {
    let seconds = started.elapsed().as_secs_f64();
    if json {
        println!(
            "{}",
            json!({
                "ok": true,
                "file": file.display().to_string(),
                "url": url,
                "bytes": bytes,
                "seconds": seconds,
                "key_digest": digest.map(|d| d.to_string()),
            })
        );
    } else {
        let (from, to) = if verb == "pushed" {
            (file.display().to_string(), url.to_owned())
        } else {
            (url.to_owned(), file.display().to_string())
        };
        println!(
            "{verb} {from} to {to}: {bytes} bytes in {seconds:.1} s ({:.1} MB/s), intact{}",
            bytes as f64 / seconds.max(1e-9) / 1e6,
            digest
                .map(|d| format!(", key digest {d}"))
                .unwrap_or_default()
        );
    }
}
