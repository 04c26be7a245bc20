//! What a prover fleet meets at its start, each case with the test that failed before it was
//! fixed: a key the caller's own limits refuse is an error and stays, a SHA-256 pin checks the
//! bytes it decodes, a lock held too long is reported. The object storage cases (servers that
//! lie, public files on S3 hosts, the cache) are in the `remote` half below.
//!
//! One module, long: a catalogue of independent cases sharing the start's fixtures; each
//! stands alone and names the failure it guards.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#![cfg(feature = "rawbytes")]

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use keycodec::halo2_proofs::plonk::ProvingKey;
use keycodec::halo2curves::bn256::G1Affine;
use keycodec::{
    load_or_generate, open_params, save_key, save_params, Backend, Error, KeyOptions, Keygen,
    KzgParams, Limits, Origin, ParamsOptions, ParamsPin, Start,
};
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_testkit::{pk_bytes, standard_plonk, StandardPlonk};

fn params_bytes(params: &KzgParams) -> Vec<u8> {
    let mut bytes = Vec::new();
    params
        .write_custom(&mut bytes, SerdeFormat::RawBytes)
        .unwrap();
    bytes
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

/// Key options that load and save with rawbytes only (as a start with its codec did).
fn rawbytes() -> KeyOptions {
    KeyOptions {
        backend: Some(Backend::RAWBYTES),
        ..KeyOptions::default()
    }
}

/// A prover starting from `params` and `key` at `k` with the key's `options`.
fn prover(
    params: impl Into<keycodec::Location>,
    key: impl Into<keycodec::Location>,
    k: u32,
    options: KeyOptions,
) -> Start {
    Start {
        key_options: options,
        ..Start::new(params, key, k)
    }
}

/// A good key on disk is refused by the caller's own options, a newer format or another
/// backend: every start returns the error, and the file is byte for byte what it was (today's
/// regenerated over it).
#[test]
fn a_good_key_the_start_cannot_load_is_an_error_and_stays() {
    let fixture = standard_plonk();
    let k = fixture.params.k();
    let dir = tempfile::tempdir().unwrap();
    let params_path = dir.path().join("params.kc");
    save_params(&params_path, &fixture.params, Backend::RAWBYTES).unwrap();
    let pk_path = dir.path().join("prover.pk");
    save_key::<StandardPlonk, _>(&pk_path, &fixture.pk, (), &rawbytes()).unwrap();
    let good = std::fs::read(&pk_path).unwrap();
    type Case = (&'static str, KeyOptions, fn(&Error) -> bool);
    let cases: Vec<Case> = vec![
        (
            "backend",
            KeyOptions {
                backend: Some(Backend::RKYV),
                ..KeyOptions::default()
            },
            |err| matches!(err, Error::CodecNotAllowed { .. }),
        ),
        (
            "max_k",
            KeyOptions {
                limits: Limits {
                    max_k: k - 1,
                    ..Limits::default()
                },
                ..rawbytes()
            },
            |err| matches!(err, Error::KOutOfRange { .. }),
        ),
        (
            "max_payload_bytes",
            KeyOptions {
                limits: Limits {
                    max_payload_bytes: 1000,
                    ..Limits::default()
                },
                ..rawbytes()
            },
            |err| matches!(err, Error::LimitExceeded { .. }),
        ),
    ];
    for (name, options, expected) in &cases {
        let alone: keycodec::Result<(ProvingKey<G1Affine>, Origin)> = load_or_generate(
            &pk_path,
            &fixture.params,
            &fixture.circuit,
            options,
            &Keygen::default(),
        );
        assert!(
            alone.as_ref().is_err_and(|err| expected(err.cause())),
            "{name}: {:?}",
            alone.err()
        );
        let start = prover(&params_path, &pk_path, k, *options).run(&fixture.circuit);
        assert!(
            start.as_ref().is_err_and(|err| expected(err.cause())),
            "{name}: {:?}",
            start.err()
        );
        assert!(
            std::fs::read(&pk_path).unwrap() == good,
            "{name}: the file was replaced"
        );
    }

    // A file a newer keycodec wrote (container version 5): refused, kept.
    let mut newer = good.clone();
    newer[8..10].copy_from_slice(&5u16.to_le_bytes());
    std::fs::write(&pk_path, &newer).unwrap();
    let start = prover(&params_path, &pk_path, k, rawbytes()).run(&fixture.circuit);
    assert!(
        matches!(
            start.as_ref().map_err(Error::cause),
            Err(Error::UnsupportedVersion { found: 5, .. })
        ),
        "{:?}",
        start.err()
    );
    assert!(
        std::fs::read(&pk_path).unwrap() == newer,
        "a newer file was replaced"
    );

    // The same key written by another backend (a fleet moving to rkyv): refused, kept.
    save_key::<StandardPlonk, _>(
        &pk_path,
        &fixture.pk,
        (),
        &KeyOptions {
            backend: Some(Backend::RKYV),
            ..KeyOptions::default()
        },
    )
    .unwrap();
    let other_backend = std::fs::read(&pk_path).unwrap();
    let start = prover(&params_path, &pk_path, k, rawbytes()).run(&fixture.circuit);
    // (A start restricted to rawbytes refuses another backend's file before decoding it.)
    assert!(
        matches!(
            start.as_ref().map_err(Error::cause),
            Err(Error::CodecNotAllowed { .. })
        ),
        "{:?}",
        start.err()
    );
    assert!(std::fs::read(&pk_path).unwrap() == other_backend);

    // What does disprove the file (damage) still regenerates it.
    let mut damaged = good.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 1;
    std::fs::write(&pk_path, &damaged).unwrap();
    let start = prover(&params_path, &pk_path, k, rawbytes())
        .run(&fixture.circuit)
        .unwrap();
    assert_eq!(start.origin, Origin::Generated);
    assert!(std::fs::read(&pk_path).unwrap() == good);
}

/// Parameters of the pinned SHA-256 are the parameters returned, while another process swaps
/// the file for other parameters (renames over it, and rewrites it in place) again and again:
/// an open either returns the pinned parameters or fails. Today's hashed the path, then opened
/// it again, and could decode the other file.
#[test]
fn a_sha256_pin_checks_the_bytes_it_decodes() {
    use rand::SeedableRng;
    let good_params = &standard_plonk().params;
    let good = params_bytes(good_params);
    let other = params_bytes(&keycodec::halo2_proofs::poly::kzg::commitment::ParamsKZG::<
        keycodec::halo2curves::bn256::Bn256,
    >::setup(
        good_params.k(), rand::rngs::StdRng::seed_from_u64(77)
    ));
    assert_eq!(good.len(), other.len());
    let pin = ParamsPin::Sha256(sha256(&good));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kzg.srs");
    std::fs::write(&path, &good).unwrap();
    let stop = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    let (mut returned, mut refused) = (0, 0);
    std::thread::scope(|scope| {
        // Renames: the path names a new file; an open file is untouched.
        scope.spawn(|| {
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let next = dir.path().join(format!("next-{i}"));
                std::fs::write(&next, if i.is_multiple_of(2) { &other } else { &good }).unwrap();
                std::fs::rename(&next, &path).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        });
        // At least 400 opens and 100 swaps (a loaded machine runs the swapper less), within
        // a minute.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut round = 0;
        while (round < 400 || swaps.load(Ordering::Relaxed) < 100)
            && std::time::Instant::now() < deadline
        {
            round += 1;
            // Half the rounds, a rewrite in place lands while the file is read.
            if round % 2 == 1 {
                let target = path.clone();
                let bytes = other.clone();
                scope.spawn(move || {
                    std::thread::sleep(Duration::from_micros(50));
                    if let Ok(mut file) = std::fs::OpenOptions::new().write(true).open(&target) {
                        let _ = std::io::Write::write_all(&mut file, &bytes);
                    }
                });
            }
            let options = ParamsOptions {
                pin: Some(pin),
                validation: keycodec::Validation::Trusted,
                ..ParamsOptions::default()
            };
            match open_params(&path, &options) {
                Ok(params) => {
                    returned += 1;
                    assert!(
                        params_bytes(&params) == good,
                        "round {round}: parameters that are not the pinned ones were returned"
                    );
                }
                Err(_) => refused += 1,
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(
        swaps.load(Ordering::Relaxed) >= 100,
        "the file was swapped while it was opened"
    );
    assert!(refused > 0, "{returned} returned, {refused} refused");
}

/// A process holding the lock on a key (a keygen that hangs) makes another start wait only as
/// long as its lock timeout, then fail naming the lock file and the holder.
#[test]
fn a_lock_held_too_long_is_reported_naming_its_holder() {
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let pk_path = dir.path().join("prover.pk");
    let _held = keycodec_core::lock_beside(&pk_path, keycodec_core::DEFAULT_LOCK_TIMEOUT).unwrap();
    let keygen = Keygen {
        lock_timeout: Duration::from_millis(300),
        ..Keygen::default()
    };
    let started = std::time::Instant::now();
    let result: keycodec::Result<(ProvingKey<G1Affine>, Origin)> = load_or_generate(
        &pk_path,
        &fixture.params,
        &fixture.circuit,
        &rawbytes(),
        &keygen,
    );
    let message = keycodec_tests::error_text(&result);
    assert!(
        matches!(&result, Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::TimedOut),
        "{message}"
    );
    assert!(
        message.contains(".prover.pk.keycodec.lock")
            && message.contains(&format!("process {}", std::process::id())),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!pk_path.exists());
}

#[cfg(feature = "remote")]
mod remote {
    use std::sync::{Arc, Mutex};

    use keycodec::remote::object_store::path::Path as ObjectPath;
    use keycodec::remote::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
    use keycodec::remote::{fetch_params, CacheOutcome, Remote};
    use keycodec::{load_key, KeyDigest, KeyPin, Location, Object};
    use keycodec_core::KeyCodecExt;
    use keycodec_testkit::standard_plonk_k10;
    use keycodec_tests::faulty::{Fault, FaultyProxy, Rule};
    use keycodec_tests::lying::{Lies, LyingServer};
    use keycodec_tests::s3::{server, store};

    use super::*;

    /// Files in `dir`, locks aside, sorted.
    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok())
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .filter(|name| !name.ends_with(".keycodec.lock"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    fn bytes_in(dir: &Path) -> u64 {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|entry| entry.ok()?.metadata().ok())
                    .map(|meta| meta.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    fn put(store: &Arc<dyn ObjectStore>, location: &ObjectPath, bytes: Vec<u8>) {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime
            .block_on(store.put(location, PutPayload::from(bytes)))
            .unwrap();
    }

    fn params_at(
        url: &str,
        cache: &Path,
        k: Option<u32>,
        pin: Option<ParamsPin>,
    ) -> keycodec::Result<KzgParams> {
        open_params(
            Location::url(url, cache).unwrap(),
            &ParamsOptions {
                k,
                pin,
                ..ParamsOptions::default()
            },
        )
    }

    /// `https://` URLs of S3 hosts (where halo2-lib's, snark-verifier's and ezkl's parameters
    /// are published), R2 and Azure are files any client may GET: an unsigned HTTP store,
    /// looking up no credentials, named as given (port included). Only `s3://` is S3. URLs
    /// whose query or credentials would be dropped are refused. No request is sent.
    #[test]
    fn https_urls_are_public_files_whatever_the_host() {
        for url in [
            "https://axiom-crypto.s3.amazonaws.com/challenge_0085/kzg_bn254_22.srs",
            "https://trusted-setup-halo2kzg.s3.eu-central-1.amazonaws.com/perpetual-powers-of-tau-raw-22",
            "https://s3.amazonaws.com/some-bucket/kzg_bn254_20.srs",
            "https://account.r2.cloudflarestorage.com/bucket/kzg.srs",
            "https://account.blob.core.windows.net/container/kzg.srs",
            "http://127.0.0.1:36333/kzg_bn254_22.srs",
        ] {
            let (remote, path) = Remote::from_url(url).unwrap();
            assert_eq!(remote.store().to_string(), "HttpStore", "{url}");
            assert_eq!(remote.name(&path), url);
        }
        let (remote, path) = Remote::from_url("s3://provers/keys/prover.pk").unwrap();
        assert_eq!(remote.store().to_string(), "AmazonS3(provers)");
        assert_eq!(remote.name(&path), "s3://provers/keys/prover.pk");
        for url in [
            "https://host.example/kzg.srs?X-Amz-Signature=00",
            "https://user:secret@host.example/kzg.srs",
            "https://host.example/kzg.srs#k22",
            "ftp://host.example/kzg.srs",
            "not a url",
        ] {
            assert!(
                matches!(
                    Remote::from_url(url).map(drop),
                    Err(Error::ObjectStore {
                        operation: "use the URL",
                        ..
                    })
                ),
                "{url}"
            );
        }
    }

    /// A server claiming a size the parameters' own first bytes do not imply (2^62 bytes,
    /// 16 TiB, a few bytes more) is refused before any disk or memory is sized from it, pinned
    /// or not, naming the URL with its port; only the first bytes were asked for, and the
    /// cache holds nothing. A `k` past the caller's limit is refused the same way. Today's
    /// sized the file and a vector of ranges from the claim (an abort, or a full disk).
    #[test]
    fn a_server_that_lies_about_the_size_is_refused_before_anything_is_sized() {
        let bytes = params_bytes(&standard_plonk().params);
        let pin = ParamsPin::Sha256(sha256(&bytes));
        for claimed in [1u64 << 62, 1 << 44, bytes.len() as u64 + 64] {
            let server = LyingServer::start(
                bytes.clone(),
                Lies {
                    size: Some(claimed),
                    ..Lies::default()
                },
            );
            let url = server.url("kzg_bn254_4.srs");
            for pin in [Some(pin), None] {
                let cache = tempfile::tempdir().unwrap();
                let refused = params_at(&url, cache.path(), None, pin);
                let message = keycodec_tests::error_text(&refused);
                // Unpinned over plain http://, refused before any request.
                let expected = match pin {
                    Some(_) => {
                        matches!(
                            refused.as_ref().map_err(Error::cause),
                            Err(Error::Malformed(_))
                        ) && message.contains(&claimed.to_string())
                    }
                    None => matches!(
                        refused.as_ref().map_err(Error::cause),
                        Err(Error::UnpinnedOverHttp { .. })
                    ),
                };
                assert!(expected && message.contains(&url), "{claimed}: {message}");
                assert_eq!(files(cache.path()), Vec::<String>::new());
                assert!(bytes_in(cache.path()) < 4096);
            }
            assert!(
                server.bytes_asked() <= 2 * keycodec_core::header::HEADER_LEN as u64,
                "{}",
                server.bytes_asked()
            );
        }
        // halo2's file for k = 27, as a server claims it: over the caller's max_k.
        let mut huge = 27u32.to_le_bytes().to_vec();
        huge.resize(4096, 0);
        let server = LyingServer::start(
            huge,
            Lies {
                size: Some(4 + (2u64 << 27) * 64 + 256),
                ..Lies::default()
            },
        );
        let cache = tempfile::tempdir().unwrap();
        let refused = open_params(
            Location::url(&server.url("kzg_bn254_27.srs"), cache.path()).unwrap(),
            &ParamsOptions {
                limits: Limits {
                    max_k: 22,
                    ..Limits::default()
                },
                // Pinned: unpinned parameters over plain http:// are refused before this.
                pin: Some(ParamsPin::Sha256([7; 32])),
                ..ParamsOptions::default()
            },
        );
        assert!(
            matches!(
                refused.as_ref().map_err(Error::cause),
                Err(Error::KOutOfRange { k: 27, max: 22 })
            ),
            "{:?}",
            refused.err()
        );
        assert_eq!(files(cache.path()), Vec::<String>::new());
    }

    /// A server answering ranges with other bytes than asked for: refused by the pin, or by
    /// the points' checks, and nothing cached.
    #[test]
    fn a_server_that_serves_wrong_ranges_is_refused_and_nothing_is_cached() {
        let bytes = params_bytes(&standard_plonk().params);
        let pin = ParamsPin::Sha256(sha256(&bytes));
        let mut padded = bytes.clone();
        padded.extend(std::iter::repeat_n(0x5a, 64));
        let server = LyingServer::start(
            padded,
            Lies {
                size: Some(bytes.len() as u64),
                shift_ranges: 64,
                ..Lies::default()
            },
        );
        let url = server.url("kzg_bn254_4.srs");
        for pin in [Some(pin), None] {
            let cache = tempfile::tempdir().unwrap();
            let refused = params_at(&url, cache.path(), None, pin);
            assert!(refused.is_err(), "{pin:?}");
            assert_eq!(files(cache.path()), Vec::<String>::new());
        }
    }

    /// A server whose ETag is weak (`W/"…"`: `If-Match` never matches it) serves parameters
    /// all the same: the version is compared on each response. Today's sent `If-Match` with
    /// it and failed every ranged read.
    #[test]
    fn weak_etags_do_not_fail_every_ranged_read() {
        let bytes = params_bytes(&standard_plonk().params);
        let server = LyingServer::start(
            bytes.clone(),
            Lies {
                e_tag: Some("W/\"v1\"".into()),
                ..Lies::default()
            },
        );
        let cache = tempfile::tempdir().unwrap();
        let url = server.url("kzg_bn254_4.srs");
        let fetched = params_at(
            &url,
            cache.path(),
            None,
            Some(ParamsPin::Sha256(sha256(&bytes))),
        )
        .unwrap();
        assert!(params_bytes(&fetched) == bytes);
    }

    /// Parameters for a smaller `k` than asked for are refused, naming the URL, before they are
    /// downloaded (only their first bytes are read), from the cache too, and a cold start
    /// with them generates nothing. Today's returned them, and the start saved a key for their
    /// `k` over the right one's file.
    #[test]
    fn parameters_smaller_than_asked_are_refused() {
        let fixture = standard_plonk();
        let bytes = params_bytes(&fixture.params);
        let k = fixture.params.k();
        let server = LyingServer::start(bytes.clone(), Lies::default());
        let url = server.url("kzg_bn254_4.srs");
        let cache = tempfile::tempdir().unwrap();
        let pin = Some(ParamsPin::Sha256(sha256(&bytes)));
        let refused = params_at(&url, cache.path(), Some(k + 1), pin);
        let message = keycodec_tests::error_text(&refused);
        assert!(
            matches!(
                refused.as_ref().map_err(Error::cause),
                Err(Error::KMismatch { expected, found }) if *expected == k + 1 && *found == k
            ) && message.contains(&url),
            "{message}"
        );
        assert!(
            server.bytes_asked() <= keycodec_core::header::HEADER_LEN as u64,
            "{}",
            server.bytes_asked()
        );
        assert_eq!(files(cache.path()), Vec::<String>::new());
        // Cached, then asked for a larger k: refused from the cache, with no request.
        params_at(&url, cache.path(), None, pin).unwrap();
        let (heads, gets) = (server.count("HEAD"), server.count("GET"));
        let refused = params_at(&url, cache.path(), Some(k + 1), pin);
        assert!(
            matches!(
                refused.as_ref().map_err(Error::cause),
                Err(Error::KMismatch { .. })
            ),
            "{:?}",
            refused.err()
        );
        assert_eq!((server.count("HEAD"), server.count("GET")), (heads, gets));
        // A cold start for k + 1 fails, and leaves no key.
        let keys = tempfile::tempdir().unwrap();
        let pk_path = keys.path().join("prover.pk");
        let start = Start {
            params_options: ParamsOptions {
                pin,
                ..ParamsOptions::default()
            },
            ..prover(
                Location::url(&url, cache.path()).unwrap(),
                &pk_path,
                k + 1,
                rawbytes(),
            )
        }
        .run(&fixture.circuit);
        assert!(
            matches!(
                start.as_ref().map_err(Error::cause),
                Err(Error::KMismatch { .. })
            ),
            "{:?}",
            start.err()
        );
        assert!(!pk_path.exists());
    }

    /// The parameters cache loads its files with its own options: a caller whose limits refuse
    /// the parameters gets the error, and the cached file stays (today's removed it, and
    /// fetched it again at the next start). A damaged cached file is fetched again.
    #[test]
    fn the_parameters_cache_keeps_what_the_caller_refuses_and_replaces_what_is_damaged() {
        let bytes = params_bytes(&standard_plonk().params);
        let server = LyingServer::start(bytes.clone(), Lies::default());
        let url = server.url("kzg_bn254_4.srs");
        let cache = tempfile::tempdir().unwrap();
        let pin = Some(ParamsPin::Sha256(sha256(&bytes)));
        params_at(&url, cache.path(), None, pin).unwrap();
        let cached = files(cache.path());
        assert_eq!(cached.len(), 1, "{cached:?}");
        let refused = open_params(
            Location::url(&url, cache.path()).unwrap(),
            &ParamsOptions {
                pin,
                limits: Limits {
                    max_k: 3,
                    ..Limits::default()
                },
                ..ParamsOptions::default()
            },
        );
        assert!(
            matches!(
                refused.as_ref().map_err(Error::cause),
                Err(Error::KOutOfRange { .. })
            ),
            "{:?}",
            refused.err()
        );
        assert_eq!(files(cache.path()), cached, "the cached file stays");
        let gets = server.count("GET");
        params_at(&url, cache.path(), None, pin).unwrap();
        assert_eq!(server.count("GET"), gets, "loaded from the cache");
        // Damaged: fetched again, and the cache holds the good file.
        let file = cache.path().join(&cached[0]);
        let mut damaged = std::fs::read(&file).unwrap();
        let middle = damaged.len() / 2;
        damaged[middle] ^= 1;
        std::fs::write(&file, &damaged).unwrap();
        let again = params_at(&url, cache.path(), None, pin).unwrap();
        assert!(params_bytes(&again) == bytes);
        assert!(server.count("GET") > gets, "fetched again");
        assert!(std::fs::read(&file).unwrap() != damaged);
    }

    /// Four processes asking at once for parameters downsized from a cached full file downsize
    /// them once: the downsized file is written once (one inode ever seen at its name). Today
    /// every one of them downsized, before the lock.
    #[test]
    fn downsized_parameters_are_computed_once() {
        let params = &standard_plonk_k10().params;
        let bytes = params_bytes(params);
        let server = LyingServer::start(bytes.clone(), Lies::default());
        let url = server.url("kzg_bn254_10.srs");
        let cache = tempfile::tempdir().unwrap();
        let pin = Some(ParamsPin::Sha256(sha256(&bytes)));
        params_at(&url, cache.path(), None, pin).unwrap();
        let full = files(cache.path());
        assert_eq!(full.len(), 1);
        let small = cache
            .path()
            .join(full[0].replace(".kc", &format!("-k{}.kc", params.k() - 1)));
        let stop = AtomicBool::new(false);
        let inodes = Mutex::new(std::collections::BTreeSet::new());
        std::thread::scope(|scope| {
            scope.spawn(|| {
                use std::os::unix::fs::MetadataExt;
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(meta) = std::fs::metadata(&small) {
                        inodes.lock().unwrap().insert(meta.ino());
                    }
                }
            });
            let opens: Vec<_> = (0..4)
                .map(|_| {
                    scope
                        .spawn(|| params_at(&url, cache.path(), Some(params.k() - 1), pin).unwrap())
                })
                .collect();
            for open in opens {
                assert_eq!(open.join().unwrap().k(), params.k() - 1);
            }
            stop.store(true, Ordering::Relaxed);
        });
        {
            use std::os::unix::fs::MetadataExt;
            inodes
                .lock()
                .unwrap()
                .insert(std::fs::metadata(&small).unwrap().ino());
        }
        assert_eq!(
            inodes.lock().unwrap().len(),
            1,
            "the downsized file was written once"
        );
    }

    /// A download's temporary file is named as a save's temporary file of the cached entry
    /// (`.{entry}.keycodec.XXXXXX.tmp`, locked while it is written), so that one left by a
    /// killed process is removed by the next fetch. Today's `.params-download.*.tmp` stayed.
    #[test]
    fn a_killed_downloads_temporary_file_is_removed_by_the_next_fetch() {
        let s3 = server();
        let bucket = s3.bucket("download-temps");
        let bytes = params_bytes(&standard_plonk().params);
        s3.put_public(&bucket, "kzg_bn254_4.srs", &bytes);
        let proxy = FaultyProxy::start(s3.addr);
        let url = keycodec_tests::s3::S3Server::public_url(proxy.addr, &bucket, "kzg_bn254_4.srs");
        let cache = tempfile::tempdir().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (dir, names) = (cache.path().to_path_buf(), Arc::clone(&seen));
        proxy.inject(Rule {
            method: "GET",
            target_contains: "kzg_bn254_4.srs",
            ranged: true,
            unconditional: false,
            skip: 1,
            times: 1,
            fault: Fault::Hook(Box::new(move || names.lock().unwrap().extend(files(&dir)))),
        });
        let pin = Some(ParamsPin::Sha256(sha256(&bytes)));
        params_at(&url, cache.path(), None, pin).unwrap();
        let entry = files(cache.path());
        assert_eq!(entry.len(), 1, "{entry:?}");
        let temps: Vec<String> = seen.lock().unwrap().clone();
        let prefix = format!(".{}.keycodec.", entry[0]);
        assert!(
            !temps.is_empty()
                && temps
                    .iter()
                    .all(|name| name.starts_with(&prefix) && name.ends_with(".tmp")),
            "{temps:?}"
        );
        // A killed download's leftover (nobody holds it): removed by the next fetch.
        let leftover = cache.path().join(format!("{prefix}dead00.tmp"));
        std::fs::write(&leftover, b"half a download").unwrap();
        std::fs::remove_file(cache.path().join(&entry[0])).unwrap();
        params_at(&url, cache.path(), None, pin).unwrap();
        assert!(!leftover.exists());
        assert_eq!(files(cache.path()), entry);
    }

    /// A remote on a fresh bucket through a proxy; the second store goes to the server directly.
    fn remote_behind_proxy(prefix: &str) -> (Arc<Remote>, Arc<dyn ObjectStore>, FaultyProxy) {
        let s3 = server();
        let bucket = s3.bucket(prefix);
        let proxy = FaultyProxy::start(s3.addr);
        let remote = Remote::new(store(&proxy.endpoint(), &bucket)).unwrap();
        (Arc::new(remote), store(&s3.endpoint(), &bucket), proxy)
    }

    /// The object `path` of `remote`, loaded through `cache`.
    fn object(remote: &Arc<Remote>, path: &ObjectPath, cache: &Path) -> Object {
        Object {
            remote: Arc::clone(remote),
            path: path.clone(),
            cache: cache.to_path_buf(),
        }
    }

    /// Key options that load and save with `backend` only, pinned to `pin` if any.
    fn backend_options(backend: Backend, pin: Option<KeyDigest>) -> KeyOptions {
        KeyOptions {
            backend: Some(backend),
            pin: pin.map(KeyPin::Digest),
            ..KeyOptions::default()
        }
    }

    /// Every request the proxy has seen since its counts were reset.
    fn requests(proxy: &FaultyProxy) -> usize {
        ["GET", "HEAD", "PUT", "POST"]
            .iter()
            .map(|method| proxy.count(method, false))
            .sum()
    }

    /// An unpinned cached object is named from the version it is downloaded at: the object
    /// replaced right after the first HEAD is not cached under the old version's name (today's
    /// asked again and loaded the other version, here another backend's bytes, refused).
    #[test]
    fn an_unpinned_cached_object_is_named_and_downloaded_from_one_version() {
        let fixture = standard_plonk_k10();
        let (remote, direct, proxy) = remote_behind_proxy("one-head");
        let at = ObjectPath::from("prover.pk");
        let cache = tempfile::tempdir().unwrap();
        save_key::<StandardPlonk, _>(
            object(&remote, &at, cache.path()),
            &fixture.pk,
            (),
            &rawbytes(),
        )
        .unwrap();
        let replacement = Backend::RKYV
            .codec()
            .unwrap()
            .to_vec::<StandardPlonk, _>(&fixture.pk, ())
            .unwrap();
        let (direct_at, mut replacement) = (at.clone(), Some(replacement));
        proxy.inject(Rule {
            method: "HEAD",
            target_contains: "prover.pk",
            ranged: false,
            unconditional: false,
            skip: 1,
            times: 1,
            fault: Fault::Hook(Box::new(move || {
                if let Some(bytes) = replacement.take() {
                    put(&direct, &direct_at, bytes);
                }
            })),
        });
        assert_eq!(files(cache.path()), Vec::<String>::new());
        let pk: ProvingKey<G1Affine> =
            load_key::<StandardPlonk, _>(object(&remote, &at, cache.path()), (), &rawbytes())
                .unwrap();
        // A miss: the object was downloaded, and cached under its version's name.
        let cached = files(cache.path());
        assert!(
            cached.len() == 1 && cached[0].starts_with("object-"),
            "{cached:?}"
        );
        assert!(proxy.count("GET", false) > 0, "downloaded");
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
        assert_eq!(
            proxy.count("HEAD", false),
            1,
            "one HEAD names and downloads the object"
        );
    }

    /// One key through two backends in one cache, pinned: each has its own cached file, and
    /// the next loads are hits, with no request (today's shared `{digest}.kc`: each load
    /// evicted the other's).
    #[test]
    fn one_key_through_two_backends_shares_a_cache() {
        let fixture = standard_plonk_k10();
        let (remote, _, proxy) = remote_behind_proxy("two-backends");
        let digest = KeyDigest::of_pk(&fixture.pk).unwrap();
        let cache = tempfile::tempdir().unwrap();
        let backends = [Backend::RAWBYTES, Backend::RKYV];
        for backend in backends {
            let at = ObjectPath::from(backend.name());
            save_key::<StandardPlonk, _>(
                object(&remote, &at, cache.path()),
                &fixture.pk,
                (),
                &backend_options(backend, None),
            )
            .unwrap();
        }
        for round in 0..2 {
            for backend in backends {
                let at = ObjectPath::from(backend.name());
                let entry = cache.path().join(format!("{digest}-{}.kc", backend.name()));
                let before = files(cache.path());
                proxy.reset_counts();
                let pk: ProvingKey<G1Affine> = load_key::<StandardPlonk, _>(
                    object(&remote, &at, cache.path()),
                    (),
                    &backend_options(backend, Some(digest)),
                )
                .unwrap();
                assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
                // A hit asks the store nothing and writes nothing; a miss downloads.
                let hit = requests(&proxy) == 0 && files(cache.path()) == before;
                assert_eq!(hit, round == 1, "{backend} round {round}");
                assert!(entry.is_file(), "{backend}: its own cached file");
            }
        }
        assert_eq!(files(cache.path()).len(), 2);
    }

    /// A key cache keeps a file the caller's own options refuse (another backend, limits): the
    /// error is the caller's, the file stays, and the next load with usable options is a hit.
    /// Today's removed it.
    #[test]
    fn the_key_cache_keeps_what_the_caller_refuses() {
        let fixture = standard_plonk_k10();
        let (remote, _, proxy) = remote_behind_proxy("key-cache-keeps");
        let at = ObjectPath::from("prover.pk");
        let cache = tempfile::tempdir().unwrap();
        save_key::<StandardPlonk, _>(
            object(&remote, &at, cache.path()),
            &fixture.pk,
            (),
            &rawbytes(),
        )
        .unwrap();
        let pinned = backend_options(
            Backend::RAWBYTES,
            Some(KeyDigest::of_pk(&fixture.pk).unwrap()),
        );
        let _: ProvingKey<G1Affine> =
            load_key::<StandardPlonk, _>(object(&remote, &at, cache.path()), (), &pinned).unwrap();
        let cached = files(cache.path());
        assert_eq!(cached.len(), 1);
        type Case = (&'static str, KeyOptions, fn(&Error) -> bool);
        let cases: [Case; 2] = [
            (
                "backend",
                KeyOptions {
                    backend: Some(Backend::RKYV),
                    ..pinned
                },
                |err| matches!(err, Error::CodecNotAllowed { .. }),
            ),
            (
                "max_k",
                KeyOptions {
                    limits: Limits {
                        max_k: 9,
                        ..Limits::default()
                    },
                    ..pinned
                },
                |err| matches!(err, Error::KOutOfRange { .. }),
            ),
        ];
        for (what, refusing, expected) in cases {
            let refused = load_key::<StandardPlonk, ProvingKey<G1Affine>>(
                object(&remote, &at, cache.path()),
                (),
                &refusing,
            );
            assert!(
                refused.as_ref().is_err_and(|err| expected(err.cause())),
                "{what}: {:?}",
                refused.err()
            );
            assert_eq!(files(cache.path()), cached, "{what}: the cached file stays");
        }
        // A hit: no request, and the cache as it was.
        proxy.reset_counts();
        let _: ProvingKey<G1Affine> =
            load_key::<StandardPlonk, _>(object(&remote, &at, cache.path()), (), &pinned).unwrap();
        assert_eq!(requests(&proxy), 0, "loaded from the cache");
        assert_eq!(files(cache.path()), cached);
    }

    /// A key object the caller's options refuse is the start's error: nothing is generated or
    /// uploaded over the shared object (today's regenerated and uploaded, so in a rolling
    /// upgrade old provers overwrote the new format).
    #[test]
    fn a_key_object_the_start_cannot_load_is_not_uploaded_over() {
        let fixture = standard_plonk();
        let (remote, _, proxy) = remote_behind_proxy("start-keeps-object");
        let at = ObjectPath::from("prover.pk");
        let cache = tempfile::tempdir().unwrap();
        // The object as a newer fleet wrote it: another backend.
        save_key::<StandardPlonk, _>(
            object(&remote, &at, cache.path()),
            &fixture.pk,
            (),
            &backend_options(Backend::RKYV, None),
        )
        .unwrap();
        let params_dir = tempfile::tempdir().unwrap();
        let params_path = params_dir.path().join("params.kc");
        save_params(&params_path, &fixture.params, Backend::RAWBYTES).unwrap();
        proxy.reset_counts();
        // A start that loads and saves rawbytes only.
        let start = prover(
            &params_path,
            object(&remote, &at, cache.path()),
            fixture.params.k(),
            rawbytes(),
        )
        .run(&fixture.circuit);
        assert!(
            matches!(
                start.as_ref().map_err(Error::cause),
                Err(Error::CodecNotAllowed { .. })
            ),
            "{:?}",
            start.err()
        );
        assert_eq!(
            proxy.count("PUT", false) + proxy.count("POST", false),
            0,
            "nothing uploaded"
        );
    }

    /// `fetch_params` reports a download's bytes as they arrive.
    #[test]
    fn a_fetch_reports_its_progress() {
        let bytes = params_bytes(&standard_plonk().params);
        let server = LyingServer::start(bytes.clone(), Lies::default());
        let cache = tempfile::tempdir().unwrap();
        let (remote, path) = Remote::from_url(&server.url("kzg_bn254_4.srs")).unwrap();
        let object = Object {
            remote: Arc::new(remote),
            path,
            cache: cache.path().to_path_buf(),
        };
        let received = AtomicUsize::new(0);
        let fetched = fetch_params(
            &object,
            &ParamsOptions {
                pin: Some(ParamsPin::Sha256(sha256(&bytes))),
                ..ParamsOptions::default()
            },
            &|n| {
                received.fetch_add(n as usize, Ordering::Relaxed);
            },
        )
        .unwrap();
        assert!(matches!(fetched.outcome, CacheOutcome::Miss(_)));
        assert_eq!(received.load(Ordering::Relaxed), bytes.len());
    }
}

/// A key whose header says it was written against another halo2, and whose fingerprint is not
/// this circuit's: refused with an error that says the versions differ and what to do, and a
/// start does not regenerate over it (the fingerprint hashes halo2's `Debug` output, which a
/// halo2 upgrade may change for the same circuit). Today's header names no writer.
#[test]
fn a_fingerprint_across_halo2_versions_is_not_proof_of_another_circuit() {
    use xxhash_rust::xxh3::xxh3_64;
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let pk_path = dir.path().join("prover.pk");
    save_key::<StandardPlonk, _>(&pk_path, &fixture.pk, (), &rawbytes()).unwrap();
    let mut bytes = std::fs::read(&pk_path).unwrap();
    assert_eq!(
        &bytes[88..105],
        b"halo2-axiom 0.5.3",
        "this build records its halo2"
    );
    // As if written by an older halo2 that printed the constraint system otherwise: another
    // fingerprint, another writer (the header checksum recomputed).
    bytes[40..56].copy_from_slice(&[0x5a; 16]);
    let mut older = [0u8; 24];
    older[..17].copy_from_slice(b"halo2-axiom 0.4.0");
    bytes[88..112].copy_from_slice(&older);
    let checksum = xxh3_64(&bytes[..120]);
    bytes[120..128].copy_from_slice(&checksum.to_le_bytes());
    std::fs::write(&pk_path, &bytes).unwrap();
    let params_path = dir.path().join("params.kc");
    save_params(&params_path, &fixture.params, Backend::RAWBYTES).unwrap();
    let start =
        prover(&params_path, &pk_path, fixture.params.k(), rawbytes()).run(&fixture.circuit);
    let message = match &start {
        Ok(start) => format!("started: {:?}", start.origin),
        Err(err) => err.to_string(),
    };
    assert!(
        matches!(
            start.as_ref().map_err(Error::cause),
            Err(Error::CircuitMismatchAcrossHalo2 { written_with, .. }) if written_with == "halo2-axiom 0.4.0"
        ) && message.contains("halo2-axiom 0.5.3")
            && message.contains("save it again"),
        "{message}"
    );
    assert!(
        std::fs::read(&pk_path).unwrap() == bytes,
        "not regenerated over"
    );
}
