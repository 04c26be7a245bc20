//! `keycodec push` and `keycodec pull`: containers to and from object storage, checked on
//! both sides.

use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use keycodec::remote::Remote;
use keycodec::KeyDigest;
use serde_json::json;

use crate::check::{inspect_open, Failure, Inspection};

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

/// The store and object of `url`; a URL that names none is a wrong command line.
fn open(url: &str) -> Result<(Remote, keycodec::remote::object_store::path::Path), Failure> {
    Remote::from_url(url).map_err(|err| match err.cause() {
        keycodec::Error::ObjectStore {
            operation: "use the URL",
            ..
        } => Failure::Usage(format!("{url}: {err}")),
        _ => Failure::Remote(format!("{url}: {err}")),
    })
}

/// Fails unless the container is intact and (if asked) records `digest`.
fn check(found: &Inspection, digest: Option<KeyDigest>, name: &str) -> Result<(), Failure> {
    if let Some(problem) = found.problem() {
        return Err(Failure::Check(format!("{name}: {problem}")));
    }
    match (digest, found.digest()) {
        (Some(expected), Some(recorded)) if recorded != expected => Err(Failure::Check(format!(
            "{name}: its {}'s digest is {recorded}, not the pinned {expected}",
            found.header.kind
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
    // One open: the file checked is the file uploaded (a file that changes during the upload
    // aborts it).
    let opened = std::fs::File::open(file)
        .map_err(|err| Failure::Io(format!("could not open {}: {err}", file.display())))?;
    let found = inspect_open(&opened, file)?;
    check(&found, digest, &file.display().to_string())?;
    let (remote, location) = open(url)?;
    let bar = bytes_bar(found.file_bytes, format!("push {}", file.display()));
    let started = Instant::now();
    let sent = remote
        .upload_file(&opened, file, &location, &|n| bar.inc(n))
        .map_err(|err| match err.cause() {
            keycodec::Error::FileChanged { .. } => Failure::Io(err.to_string()),
            _ => Failure::Remote(err.to_string()),
        })?;
    bar.finish_and_clear();
    report("pushed", file, url, sent, started, found.digest(), json);
    Ok(())
}

/// `pull`: download into a temporary file beside the destination, check it, then rename it
/// into place as keycodec's saves do (the file synced, the folder synced, a new file's usual
/// mode, a replaced file's mode kept, a symbolic link's target replaced): a failed pull
/// leaves the destination as it was. The object's size is checked against its header (and
/// the largest payload a load accepts) before any disk is spent on it.
pub(crate) fn pull(
    url: &str,
    file: &Path,
    digest: Option<KeyDigest>,
    codecs: &[keycodec::Backend],
    json: bool,
) -> Result<(), Failure> {
    let (remote, location) = open(url)?;
    let info = remote.head(&location).map_err(remote_failure)?;
    // The object's own header says which backend wrote it and how long it is: refused before
    // the download when it is not one asked for, or the server's size is not the header's.
    let mut first = [0u8; keycodec_core::header::HEADER_LEN];
    let first = first
        .get_mut(
            ..usize::try_from(info.size)
                .unwrap_or(usize::MAX)
                .min(keycodec_core::header::HEADER_LEN),
        )
        .unwrap_or_default();
    remote
        .read_range(&location, &info, first, 0)
        .map_err(remote_failure)?;
    let not_a_container = |err: keycodec::Error| Failure::Check(format!("{url}: {err}"));
    let header = keycodec_core::header::Header::from_bytes(first).map_err(not_a_container)?;
    let header_len = keycodec_core::header::Header::len_of(first).map_err(not_a_container)? as u64;
    let accepted = match codecs {
        [] => keycodec_core::CodecSet::ALL,
        some => keycodec_core::CodecSet::of(some.iter().map(|backend| backend.id())),
    };
    if !accepted.contains(header.codec) {
        return Err(remote_failure(
            keycodec::Error::CodecNotAllowed {
                found: header.codec,
            }
            .in_object(url),
        ));
    }
    let limit = keycodec::Limits::default().max_payload_bytes;
    if header.payload_len > limit {
        return Err(Failure::Check(format!(
            "{url}: its header declares a {}-byte payload, over the limit of {limit} bytes",
            header.payload_len
        )));
    }
    let expected = header.container_len(header_len as usize);
    if info.size != expected {
        return Err(Failure::Check(format!(
            "{url}: the server says {} bytes, but its header declares {expected}",
            info.size
        )));
    }
    let bar = bytes_bar(info.size, format!("pull {url}"));
    let started = Instant::now();
    let mut failure = None;
    let pulled = keycodec_core::replace_atomically(file, |temp| {
        remote.download_to(&location, &info, temp, &|n| bar.inc(n))?;
        bar.finish_and_clear();
        let checked = inspect_open(temp, file).and_then(|found| {
            check(&found, digest, url)?;
            Ok(found)
        });
        match checked {
            Ok(found) => Ok(found),
            Err(err) => {
                failure = Some(err);
                Err(keycodec::Error::Malformed(
                    "the download failed its checks".into(),
                ))
            }
        }
    });
    bar.finish_and_clear();
    let found = match (pulled, failure) {
        (Ok(found), _) => found,
        (Err(_), Some(failure)) => return Err(failure),
        (Err(err), None) => return Err(remote_failure(err)),
    };
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

/// The exit code of a library error of object storage work (see [`remote_failure`]).
pub(crate) fn exit_code(err: &keycodec::Error) -> u8 {
    match err.cause() {
        keycodec::Error::ObjectStore { .. } | keycodec::Error::ObjectChanged { .. } => 4,
        keycodec::Error::Io { .. } => 3,
        _ => 1,
    }
}

/// A library error of object storage work, by what the exit code says.
pub(crate) fn remote_failure(err: keycodec::Error) -> Failure {
    match err.cause() {
        keycodec::Error::ObjectStore { .. } | keycodec::Error::ObjectChanged { .. } => {
            Failure::Remote(err.to_string())
        }
        keycodec::Error::Io { .. } => Failure::Io(err.to_string()),
        _ => Failure::Check(err.to_string()),
    }
}

/// The cache a command uses when none is given: `$XDG_CACHE_HOME/keycodec/{folder}`, or
/// `~/.cache/keycodec/{folder}` (`params` for `params fetch`, `artifacts` for a manifest's).
pub(crate) fn default_cache(folder: &str) -> Result<PathBuf, Failure> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .ok_or_else(|| {
            Failure::Io(
                "no cache directory: give --cache (neither XDG_CACHE_HOME nor HOME is set)".into(),
            )
        })?;
    Ok(base.join("keycodec").join(folder))
}

/// `params fetch`: parameters from a URL through the cache, pinned by their file's SHA-256.
pub(crate) fn fetch(
    url: &str,
    sha256: Option<&str>,
    k: Option<u32>,
    cache: Option<&Path>,
    allow_test_setup: bool,
    json: bool,
) -> Result<(), Failure> {
    use keycodec::remote::{fetch_params, CacheOutcome};
    use keycodec::{Object, ParamsOptions, ParamsPin};
    let pin = sha256
        .map(ParamsPin::sha256)
        .transpose()
        .map_err(|err| Failure::Usage(err.to_string()))?;
    let cache = match cache {
        Some(cache) => cache.to_path_buf(),
        None => default_cache("params")?,
    };
    let (remote, location) = open(url)?;
    let bar = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} fetch {msg}: {bytes} {binary_bytes_per_sec}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(url.to_owned());
    let started = Instant::now();
    let object = Object {
        remote: std::sync::Arc::new(remote),
        path: location,
        cache,
    };
    let options = ParamsOptions {
        pin,
        k,
        test_setup: crate::check::test_setup(allow_test_setup),
        ..ParamsOptions::default()
    };
    let fetched = fetch_params(&object, &options, &|n| bar.inc(n));
    bar.finish_and_clear();
    let fetched = fetched.map_err(remote_failure)?;
    let (how, file) = match &fetched.outcome {
        CacheOutcome::Hit(file) => ("cached", file),
        CacheOutcome::Miss(file) => ("downloaded", file),
    };
    let digest = keycodec::KeyDigest::of_params(&fetched.params)
        .map_err(|err| Failure::Check(err.to_string()))?;
    let seconds = started.elapsed().as_secs_f64();
    if json {
        println!(
            "{}",
            json!({
                "ok": true,
                "url": url,
                "outcome": how,
                "file": file.display().to_string(),
                "k": keycodec::halo2_proofs::poly::commitment::Params::k(&fetched.params),
                "digest": digest.to_string(),
                "sha256_checked": pin.is_some(),
                "seconds": seconds,
            })
        );
    } else {
        println!(
            "{url}: {how} in {seconds:.1} s{}; parameters for k = {}, digest {digest}, in {}",
            if pin.is_some() {
                ", SHA-256 checked"
            } else {
                ""
            },
            keycodec::halo2_proofs::poly::commitment::Params::k(&fetched.params),
            file.display()
        );
    }
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
