//! Keys and parameters in object storage, against a real S3 server (moto, on loopback):
//! round trips of every backend, multipart uploads, truncated, corrupt, replaced and
//! mispinned objects, failed requests and broken connections (through a proxy told to fail
//! them), interrupted uploads, and the local cache.
//!
//! One module, long: its tests share one server and its fixtures; each stands alone.
#![cfg(feature = "remote")]
// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keycodec::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use keycodec::halo2curves::bn256::G1Affine;
use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use keycodec::remote::{Remote, RemoteOptions};
use keycodec::{
    load_key, open_params, Backend, Error, KeyDigest, KeyOptions, KeyPin, Location, Object, Origin,
    ParamsOptions, ParamsPin, Start,
};
use keycodec_core::{
    BufferConfig, KeyCodec, KeyCodecExt, LoadOptions, SaveOptions, Size, Validation,
};
use keycodec_rawbytes::RawBytesCodec;
use keycodec_testkit::{pk_bytes, standard_plonk, standard_plonk_k10, vk_bytes, StandardPlonk};
use keycodec_tests::faulty::{Fault, FaultyProxy, Rule};
use keycodec_tests::s3::{server, store};

/// A remote on a fresh bucket, straight to the server.
fn remote(prefix: &str) -> (Remote, Arc<dyn ObjectStore>) {
    let server = server();
    let store = store(&server.endpoint(), &server.bucket(prefix));
    (Remote::new(Arc::clone(&store)).unwrap(), store)
}

/// A remote on a fresh bucket through a proxy that can be told to fail requests; the
/// second store goes to the server directly (to change objects behind the remote's back).
fn remote_behind_proxy(prefix: &str) -> (Remote, Arc<dyn ObjectStore>, FaultyProxy) {
    let server = server();
    let bucket = server.bucket(prefix);
    let proxy = FaultyProxy::start(server.addr);
    let remote = Remote::new(store(&proxy.endpoint(), &bucket)).unwrap();
    (remote, store(&server.endpoint(), &bucket), proxy)
}

/// What [`saved_behind_proxy`] made: the remote, the store behind its back, the proxy, where
/// the key is and its digest.
struct Saved {
    remote: Arc<Remote>,
    direct: Arc<dyn ObjectStore>,
    proxy: FaultyProxy,
    at: ObjectPath,
    digest: KeyDigest,
}

/// A fresh bucket behind a proxy (see [`remote_behind_proxy`]) holding the k = 10 key, saved
/// by `codec` as `circuit.pk`.
fn saved_behind_proxy(prefix: &str, codec: &dyn KeyCodec) -> Saved {
    let (remote, direct, proxy) = remote_behind_proxy(prefix);
    let at = ObjectPath::from("circuit.pk");
    let digest = remote
        .save::<StandardPlonk, _>(codec, &at, &standard_plonk_k10().pk, ())
        .unwrap();
    Saved {
        remote: Arc::new(remote),
        direct,
        proxy,
        at,
        digest,
    }
}

fn put(store: &Arc<dyn ObjectStore>, location: &ObjectPath, bytes: Vec<u8>) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(store.put(location, PutPayload::from(bytes)))
        .unwrap();
}

fn checked() -> LoadOptions {
    LoadOptions::default()
}

/// The object at `at` in `remote`, loaded through the cache directory `cache`.
fn object(remote: &Arc<Remote>, at: &ObjectPath, cache: &Path) -> Object {
    Object {
        remote: Arc::clone(remote),
        path: at.clone(),
        cache: cache.to_path_buf(),
    }
}

/// A facade load's options: the rawbytes backend, pinned to `pin` when there is one.
fn rawbytes(pin: Option<KeyDigest>) -> KeyOptions {
    KeyOptions {
        backend: Some(Backend::RAWBYTES),
        pin: pin.map(KeyPin::Digest),
        ..KeyOptions::default()
    }
}

/// The cache's entries (`.kc` files), by path, sorted.
fn cached_keys(cache: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(cache)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|ext| ext == "kc"))
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    entries
}

/// Reads through a small buffer (16 KiB): a remote load's requests must not depend on it
/// (a header request, then the rest coalesced into requests sized by the object).
/// Without a first round: the load's requests after its first are the reader's own.
fn no_first_round(remote: Arc<Remote>) -> Remote {
    let remote = Arc::into_inner(remote).expect("the only handle");
    remote.with_options(RemoteOptions {
        first_round: 0,
        ..RemoteOptions::default()
    })
}

fn small_buffers() -> LoadOptions {
    LoadOptions {
        buffers: BufferConfig::both(Size::kib(16)),
        ..LoadOptions::default()
    }
}

#[test]
fn every_backend_round_trips_keys_and_parameters() {
    let fixture = standard_plonk_k10();
    let (remote, _) = remote("round-trip");
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let pk_at = ObjectPath::from(format!("{backend}/circuit.pk"));
        let digest = remote
            .save::<StandardPlonk, _>(codec, &pk_at, &fixture.pk, ())
            .unwrap();
        assert_eq!(digest, KeyDigest::of_pk(&fixture.pk).unwrap(), "{backend}");
        let pk: ProvingKey<G1Affine> = remote
            .load::<StandardPlonk, _>(codec, &pk_at, (), &checked())
            .unwrap();
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk), "{backend}");
        // Pinned, trusted: the same key.
        let pinned = LoadOptions {
            expected_digest: Some(digest),
            validation: Validation::Trusted,
            ..LoadOptions::default()
        };
        let pk: ProvingKey<G1Affine> = remote
            .load::<StandardPlonk, _>(codec, &pk_at, (), &pinned)
            .unwrap();
        assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk), "{backend} pinned");
        // The object is byte for byte what a file save writes.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("circuit.pk");
        codec
            .save::<StandardPlonk, _>(&file, &fixture.pk, (), &SaveOptions::default())
            .unwrap();
        let downloaded = dir.path().join("downloaded.pk");
        let info = remote.head(&pk_at).unwrap();
        remote
            .download_to(
                &pk_at,
                &info,
                &std::fs::File::create(&downloaded).unwrap(),
                &|_| {},
            )
            .unwrap();
        assert_eq!(info.size, std::fs::metadata(&file).unwrap().len());
        assert!(
            std::fs::read(&file).unwrap() == std::fs::read(&downloaded).unwrap(),
            "{backend}: the object differs from the file"
        );

        let vk_at = ObjectPath::from(format!("{backend}/circuit.vk"));
        remote
            .save::<StandardPlonk, _>(codec, &vk_at, fixture.vk(), ())
            .unwrap();
        let vk: VerifyingKey<G1Affine> = remote
            .load::<StandardPlonk, _>(codec, &vk_at, (), &checked())
            .unwrap();
        assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()), "{backend}");

        if codec.stores_params() {
            let params_at = ObjectPath::from(format!("{backend}/kzg.params"));
            remote
                .save_params(codec, &params_at, &fixture.params)
                .unwrap();
            let params = remote.load_params(codec, &params_at, &checked()).unwrap();
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            use keycodec::halo2_proofs::poly::commitment::Params as _;
            params.write(&mut ours).unwrap();
            fixture.params.write(&mut theirs).unwrap();
            assert!(ours == theirs, "{backend}: parameters differ");
        }
    }
}

#[test]
fn large_objects_upload_in_parts_and_download_whole() {
    let (remote, _, proxy) = remote_behind_proxy("parts");
    let remote = remote.with_options(RemoteOptions {
        part_size: 5 << 20,
        range_size: 4 << 20,
        ..RemoteOptions::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("big.bin");
    let bytes: Vec<u8> = (0..12u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&source, &bytes).unwrap();
    let at = ObjectPath::from("big.bin");
    let sent = std::sync::atomic::AtomicU64::new(0);
    let uploaded = remote
        .upload_file(&std::fs::File::open(&source).unwrap(), &source, &at, &|n| {
            sent.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        })
        .unwrap();
    assert_eq!(uploaded, bytes.len() as u64);
    assert_eq!(sent.into_inner(), bytes.len() as u64);
    assert_eq!(
        proxy.count_target("PUT", "partNumber="),
        3,
        "three parts of 5 MiB at most"
    );
    let target = dir.path().join("back.bin");
    remote
        .download_to(
            &at,
            &remote.head(&at).unwrap(),
            &std::fs::File::create(&target).unwrap(),
            &|_| {},
        )
        .unwrap();
    assert!(std::fs::read(&target).unwrap() == bytes);
    // Downloaded in whole rounds of the requests a transfer starts with in flight (32), at
    // least 256 KiB each, at most the largest range (4 MiB): one round of 384 KiB ranges.
    assert_eq!(proxy.count("GET", true), 32);
}

/// A load's first request both describes the object (its size, ETag, version) and brings its
/// first bytes, which the decoder then reads without asking again: no HEAD. Where a ranged
/// GET cannot open it (an empty object), the HEAD that follows says what is wrong.
#[test]
fn a_load_opens_the_object_with_one_ranged_get() {
    let fixture = standard_plonk_k10();
    let codec = &RawBytesCodec::default();
    let Saved {
        remote,
        direct: store,
        proxy,
        at,
        ..
    } = saved_behind_proxy("opening", codec);
    proxy.reset_counts();
    let pk: ProvingKey<G1Affine> = remote
        .load::<StandardPlonk, _>(codec, &at, (), &checked())
        .unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    assert_eq!(proxy.count("HEAD", false), 0, "no HEAD before a load");
    assert_eq!(
        proxy.count_target("GET", "circuit.pk"),
        proxy.count("GET", true),
        "every GET ranged"
    );

    let empty = ObjectPath::from("empty.pk");
    put(&store, &empty, Vec::new());
    proxy.reset_counts();
    let err = remote
        .load::<StandardPlonk, ProvingKey<G1Affine>>(codec, &empty, (), &checked())
        .unwrap_err();
    assert!(
        matches!(err.cause(), Error::Truncated { .. }),
        "an empty object: {err}"
    );
    assert_eq!(
        proxy.count("HEAD", false),
        1,
        "the HEAD after a refused range"
    );
}

/// A load of a proving key by a backend that reads in bulk asks, with its first request,
/// for the megabytes that follow: a key they hold takes no request after them (no HEAD, no
/// tail, no payload range). Pieces the store refuses or fails are fetched again where the key
/// needs them.
///
/// The first round's pieces run as tasks of their own: those past the key's end may still
/// be on their way when the load ends (and are then dropped), so the counts below bound them
/// rather than name them, and the faults match only the requests of the first round (the
/// unconditional ones), whichever order they reach the server in.
#[test]
fn a_load_asks_for_its_first_round_with_its_first_request() {
    let fixture = standard_plonk_k10();
    let codec = &RawBytesCodec::default();
    let Saved {
        remote, proxy, at, ..
    } = saved_behind_proxy("first-round", codec);
    let size = remote.head(&at).unwrap().size;
    assert!(
        size < (1 << 20),
        "a key within the first round's first piece: {size} bytes"
    );
    proxy.reset_counts();
    let pk: ProvingKey<G1Affine> = remote
        .load::<StandardPlonk, _>(codec, &at, (), &checked())
        .unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    let round = RemoteOptions::default().first_round >> 20;
    assert_eq!(proxy.count("HEAD", false), 0);
    assert_eq!(
        proxy.count_conditional("GET"),
        0,
        "the first request and its round, nothing after them"
    );
    assert!(proxy.count("GET", true) <= 1 + round);

    // Every piece of the first round refused (as a store refuses a range past the end):
    // the key's bytes past the first request are fetched in their turn.
    proxy.inject(Rule {
        method: "GET",
        target_contains: "circuit.pk",
        ranged: true,
        unconditional: true,
        skip: 0,
        times: round + 1,
        fault: Fault::Status(416),
    });
    proxy.reset_counts();
    let pk: ProvingKey<G1Affine> = remote
        .load::<StandardPlonk, _>(codec, &at, (), &checked())
        .unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    // The first request and the piece after it (which holds the rest of the key) were
    // refused: the load waited for both.
    assert!(proxy.injected() >= 2, "{} refused", proxy.injected());
    assert_eq!(
        proxy.count("HEAD", false),
        1,
        "the HEAD after a refused range"
    );
    assert!(
        proxy.count_conditional("GET") >= 1,
        "refused bytes fetched again"
    );
}

/// A backend that decodes element by element (bincode) reads its stream through a small
/// buffer; from object storage, its reads are served by ranges fetched ahead, a few large
/// requests, not one request per buffer, and no first round (whose ranges would arrive all
/// together rather than its first bytes first).
#[cfg(feature = "bincode")]
#[test]
fn a_decoder_that_reads_in_order_reads_ahead_in_large_ranges() {
    let fixture = standard_plonk_k10();
    let codec = &keycodec_bincode::BincodeCodec;
    let Saved {
        remote, proxy, at, ..
    } = saved_behind_proxy("readahead", codec);
    // Default options: a decoder that reads in order is sent no first round.
    let size = remote.head(&at).unwrap().size;
    proxy.reset_counts();
    let pk: ProvingKey<G1Affine> = remote
        .load::<StandardPlonk, _>(codec, &at, (), &small_buffers())
        .unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    let gets = proxy.count("GET", true);
    let buffers = size.div_ceil(16 << 10);
    assert!(
        buffers >= 16 && gets as u64 <= 2 + size.div_ceil(256 << 10),
        "{gets} ranged GETs for {size} bytes read through a 16 KiB buffer ({buffers} buffers)"
    );
}

#[test]
fn truncated_corrupt_and_mispinned_objects_are_refused_naming_the_object() {
    let fixture = standard_plonk();
    let (remote, store) = remote("refused");
    for backend in Backend::compiled() {
        let codec = backend.codec().unwrap();
        let file = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();
        let load = |at: &ObjectPath, options: &LoadOptions| {
            remote
                .load::<StandardPlonk, ProvingKey<G1Affine>>(codec, at, (), options)
                .unwrap_err()
        };

        let at = ObjectPath::from(format!("{backend}/truncated.pk"));
        put(&store, &at, file[..file.len() - 7].to_vec());
        let err = load(&at, &checked());
        assert!(
            matches!(
                err.cause(),
                Error::LengthMismatch { .. } | Error::Truncated { .. }
            ),
            "{backend}: {err}"
        );
        assert!(err.to_string().contains(at.as_ref()), "{err}");

        let at = ObjectPath::from(format!("{backend}/corrupt.pk"));
        let mut corrupt = file.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0x40;
        put(&store, &at, corrupt);
        let err = load(&at, &checked());
        assert!(err.to_string().contains(at.as_ref()), "{backend}: {err}");

        let at = ObjectPath::from(format!("{backend}/other.pk"));
        put(&store, &at, file.clone());
        let pinned = LoadOptions {
            expected_digest: Some(KeyDigest([7; 32])),
            ..LoadOptions::default()
        };
        let err = load(&at, &pinned);
        assert!(
            matches!(err.cause(), Error::DigestMismatch { .. }),
            "{backend}: {err}"
        );

        let err = load(&ObjectPath::from("missing.pk"), &checked());
        assert!(
            matches!(err.cause(), Error::ObjectStore { .. }),
            "{backend}: {err}"
        );
    }
}

#[test]
fn failed_requests_and_broken_connections_are_retried() {
    let fixture = standard_plonk_k10();
    let codec = &RawBytesCodec::default();
    let Saved {
        remote, proxy, at, ..
    } = saved_behind_proxy("retried", codec);
    let remote = no_first_round(remote);
    // A small key loads in few requests: its header, then one for the rest (the small
    // spans and the polynomials coalesced), then the circuit's record after the payload.
    proxy.reset_counts();
    let _: ProvingKey<G1Affine> = remote
        .load::<StandardPlonk, _>(codec, &at, (), &small_buffers())
        .unwrap();
    let clean = proxy.count("GET", true);
    assert!(clean <= 4, "{clean} ranged GETs for a small key");
    // The header's request fails twice, then the rest's breaks mid-body and fails once.
    for (skip, fault) in [
        (0, Fault::Status(503)),
        (0, Fault::Status(500)),
        (1, Fault::ResetMidBody),
        (0, Fault::Status(503)),
    ] {
        proxy.inject(Rule {
            method: "GET",
            target_contains: "circuit.pk",
            ranged: true,
            unconditional: false,
            skip,
            times: 1,
            fault,
        });
    }
    proxy.reset_counts();
    let pk: ProvingKey<G1Affine> = remote
        .load::<StandardPlonk, _>(codec, &at, (), &small_buffers())
        .unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    assert_eq!(proxy.injected(), 4, "every fault was met and overcome");
    // Each failed request was made again: four failures and at least one that succeeded.
    // (Not `clean + 4`: how many requests a clean load makes depends on the machine's timing,
    // which the retries change.)
    let requests = proxy.count("GET", true);
    assert!(requests > 4, "each fault retried: {requests} ranged GETs");
}

#[test]
fn an_object_replaced_during_a_load_is_refused() {
    let fixture = standard_plonk_k10();
    let codec = &RawBytesCodec::default();
    let Saved {
        remote,
        direct,
        proxy,
        at,
        ..
    } = saved_behind_proxy("replaced", codec);
    // The request after the first is the reader's (a first round's requests go at once with
    // the first, in no fixed order).
    let remote = no_first_round(remote);
    // Another version of the same key (another codec's bytes), put after the load began.
    let replacement = Backend::RKYV
        .codec()
        .unwrap()
        .to_vec::<StandardPlonk, _>(&fixture.pk, ())
        .unwrap();
    let (direct_at, mut replacement) = (at.clone(), Some(replacement));
    proxy.inject(Rule {
        method: "GET",
        target_contains: "circuit.pk",
        ranged: true,
        unconditional: false,
        skip: 1,
        times: 1,
        fault: Fault::Hook(Box::new(move || {
            if let Some(bytes) = replacement.take() {
                put(&direct, &direct_at, bytes);
            }
        })),
    });
    let err = remote
        .load::<StandardPlonk, ProvingKey<G1Affine>>(codec, &at, (), &small_buffers())
        .unwrap_err();
    assert!(matches!(err.cause(), Error::ObjectChanged { .. }), "{err}");
    assert!(err.to_string().contains("circuit.pk"), "{err}");
    assert_eq!(proxy.injected(), 1);
}

#[test]
fn an_interrupted_upload_leaves_no_object() {
    let fixture = standard_plonk_k10();
    let codec = &RawBytesCodec::default();
    let (remote, direct, proxy) = remote_behind_proxy("interrupted");
    let remote = remote.with_options(RemoteOptions {
        part_size: 5 << 20,
        ..RemoteOptions::default()
    });
    // Every part fails, whatever the retries.
    proxy.inject(Rule {
        method: "PUT",
        target_contains: "uploadId=",
        ranged: false,
        unconditional: false,
        skip: 0,
        times: usize::MAX,
        fault: Fault::Status(500),
    });
    let at = ObjectPath::from("circuit.pk");
    let err = remote
        .save::<StandardPlonk, _>(codec, &at, &fixture.pk, ())
        .unwrap_err();
    assert!(matches!(err.cause(), Error::ObjectStore { .. }), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.bin");
    std::fs::write(&big, vec![1u8; 11 << 20]).unwrap();
    let big_at = ObjectPath::from("big.bin");
    let open = std::fs::File::open(&big).unwrap();
    assert!(remote.upload_file(&open, &big, &big_at, &|_| {}).is_err());

    let runtime = tokio::runtime::Runtime::new().unwrap();
    for location in [&at, &big_at] {
        let head = runtime.block_on(direct.head(location));
        assert!(
            matches!(
                head,
                Err(keycodec::remote::object_store::Error::NotFound { .. })
            ),
            "{location}: {head:?}"
        );
    }
    assert_eq!(
        proxy.count_target("DELETE", "uploadId="),
        2,
        "both uploads were aborted"
    );
}

#[test]
fn the_cache_downloads_once_and_then_loads_locally() {
    let fixture = standard_plonk_k10();
    let codec = &RawBytesCodec::default();
    let Saved {
        remote,
        proxy,
        at,
        digest,
        ..
    } = saved_behind_proxy("cache", codec);
    let cache = tempfile::tempdir().unwrap();
    let load = |options: &KeyOptions| {
        load_key::<StandardPlonk, ProvingKey<G1Affine>>(
            object(&remote, &at, cache.path()),
            (),
            options,
        )
        .unwrap()
    };
    let file = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();

    // Unpinned: keyed by the object's ETag; a miss (a download, and a new entry), then a hit
    // that only asks for metadata.
    assert_eq!(cached_keys(cache.path()), Vec::<PathBuf>::new());
    proxy.reset_counts();
    let pk = load(&rawbytes(None));
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    // Its first bytes and the rest of a key this small, asked for at once (the load's first
    // round), each range once: what the load read from them is what the entry holds.
    assert_eq!(
        proxy.count("GET", true),
        2,
        "a miss downloads each byte once"
    );
    let entries = cached_keys(cache.path());
    assert_eq!(entries.len(), 1, "a miss caches the object: {entries:?}");
    let cached = entries[0].clone();
    assert!(
        std::fs::read(&cached).unwrap() == file,
        "the entry is the object"
    );
    proxy.reset_counts();
    let pk = load(&rawbytes(None));
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    assert_eq!(proxy.count("GET", false), 0, "a hit reads no range");
    assert_eq!(
        cached_keys(cache.path()),
        std::slice::from_ref(&cached),
        "a hit adds no entry"
    );
    assert!(std::fs::read(&cached).unwrap() == file);

    // Pinned: keyed by the digest (`{digest}-{codec}.kc`); a miss downloads, and a hit sends
    // no request at all.
    let pinned = rawbytes(Some(digest));
    let pinned_file = cache.path().join(format!("{digest}-{}.kc", codec.name()));
    assert!(!pinned_file.exists());
    proxy.reset_counts();
    load(&pinned);
    // Certain to be downloaded: its first bytes and its first round at once, nothing after
    // them (no HEAD) for a key this small.
    let round = RemoteOptions::default().first_round >> 20;
    assert_eq!(proxy.count("HEAD", false), 0, "a pinned miss sends no HEAD");
    assert_eq!(
        proxy.count("GET", true),
        1 + round,
        "a miss downloads at once"
    );
    assert!(
        std::fs::read(&pinned_file).unwrap() == file,
        "and caches the key"
    );
    proxy.reset_counts();
    load(&pinned);
    assert_eq!(proxy.count("GET", false) + proxy.count("HEAD", false), 0);

    // A cached file that is not the pin's key (here: another circuit's, under the pin's
    // name) is never used: it is replaced by the object.
    let other = codec
        .to_vec::<StandardPlonk, _>(&standard_plonk().pk, ())
        .unwrap();
    std::fs::write(&pinned_file, other).unwrap();
    proxy.reset_counts();
    let pk = load(&pinned);
    assert!(proxy.count("GET", true) > 0, "a miss: downloaded again");
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    assert!(
        std::fs::read(&pinned_file).unwrap() == file,
        "the entry replaced"
    );
    // A damaged cached file likewise.
    let mut damaged = std::fs::read(&cached).unwrap();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 1;
    std::fs::write(&cached, damaged).unwrap();
    proxy.reset_counts();
    let pk = load(&rawbytes(None));
    assert!(proxy.count("GET", true) > 0, "a miss: downloaded again");
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    assert!(
        std::fs::read(&cached).unwrap() == file,
        "the entry replaced"
    );
}

#[test]
fn concurrent_misses_download_once() {
    let fixture = standard_plonk_k10();
    let codec = &RawBytesCodec::default();
    let Saved {
        remote, proxy, at, ..
    } = saved_behind_proxy("concurrent", codec);
    let cache = tempfile::tempdir().unwrap();
    // One load alone: how many ranged reads one download takes.
    let alone = tempfile::tempdir().unwrap();
    proxy.reset_counts();
    load_key::<StandardPlonk, ProvingKey<G1Affine>>(
        object(&remote, &at, alone.path()),
        (),
        &rawbytes(None),
    )
    .unwrap();
    let one_download = proxy.count("GET", true);
    assert!(one_download > 0);
    proxy.reset_counts();
    std::thread::scope(|scope| {
        let loads: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let pk = load_key::<StandardPlonk, ProvingKey<G1Affine>>(
                        object(&remote, &at, cache.path()),
                        (),
                        &rawbytes(None),
                    )
                    .unwrap();
                    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
                })
            })
            .collect();
        for load in loads {
            load.join().unwrap();
        }
    });
    // One miss among the four: the ranged reads of exactly one download (a second miss
    // would download again).
    assert_eq!(proxy.count("GET", true), one_download, "downloaded once");
    let entries: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".kc") || name.ends_with(".tmp"))
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "one cached file, no temporary left: {entries:?}"
    );
}

#[test]
fn calls_from_async_code_are_refused_not_blocked() {
    let (remote, _) = remote("async");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let err = runtime.block_on(async { remote.head(&ObjectPath::from("x")) });
    assert!(matches!(err.unwrap_err().cause(), Error::Internal(_)));
    // A remote dropped inside async code does not panic either.
    runtime.block_on(async { drop(remote) });
}

/// halo2's parameters file, as a project publishes it, with its SHA-256.
fn published(params: &keycodec::KzgParams) -> (Vec<u8>, [u8; 32]) {
    use sha2::Digest as _;
    let mut bytes = Vec::new();
    params
        .write_custom(&mut bytes, keycodec::halo2_proofs::SerdeFormat::RawBytes)
        .unwrap();
    let sha256 = sha2::Sha256::digest(&bytes).into();
    (bytes, sha256)
}

fn params_bytes(params: &keycodec::KzgParams) -> Vec<u8> {
    published(params).0
}

/// A public parameters file on moto (anyone reads it, with ranged GETs), read through a proxy
/// that counts requests: its URL, the proxy.
fn published_behind_proxy(prefix: &str, name: &str, bytes: &[u8]) -> (String, FaultyProxy) {
    let server = server();
    let bucket = server.bucket(prefix);
    server.put_public(&bucket, name, bytes);
    let proxy = FaultyProxy::start(server.addr);
    let url = keycodec_tests::s3::S3Server::public_url(proxy.addr, &bucket, name);
    (url, proxy)
}

fn cache_files(dir: &std::path::Path) -> Vec<String> {
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

/// Parameters published at an HTTP URL are fetched once, pinned by the SHA-256 of the file
/// as published, imported with every point checked and cached as a container (downsized once
/// for a smaller k); every later open is a local load that sends no request at all.
#[test]
fn public_parameters_are_fetched_once_by_url_then_opened_from_the_cache() {
    let params = &standard_plonk().params;
    let (bytes, sha256) = published(params);
    let (url, proxy) = published_behind_proxy("published", "kzg_bn254_4.srs", &bytes);
    let cache = tempfile::tempdir().unwrap();
    let pin = Some(ParamsPin::Sha256(sha256));
    let at = Location::url(&url, cache.path()).unwrap();
    let first = open_params(at.clone(), &params_options(None, pin)).unwrap();
    assert_eq!(params_bytes(&first), bytes);
    assert!(proxy.count("GET", true) > 0, "downloaded by ranged GETs");
    let cached = cache_files(cache.path());
    assert_eq!(cached.len(), 1, "{cached:?}");
    assert!(cached[0].contains(&keycodec_hex(&sha256)), "{cached:?}");

    proxy.reset_counts();
    let again = open_params(at.clone(), &params_options(None, pin)).unwrap();
    assert_eq!(params_bytes(&again), bytes);
    let k = keycodec::halo2_proofs::poly::commitment::Params::k(params);
    let smaller = open_params(at.clone(), &params_options(Some(k - 1), pin)).unwrap();
    let mut expected = params.clone();
    keycodec::halo2_proofs::poly::commitment::Params::downsize(&mut expected, k - 1);
    assert_eq!(params_bytes(&smaller), params_bytes(&expected));
    let smaller_again = open_params(at, &params_options(Some(k - 1), pin)).unwrap();
    assert_eq!(params_bytes(&smaller_again), params_bytes(&expected));
    assert_eq!(
        proxy.count("GET", false) + proxy.count("HEAD", false),
        0,
        "a pinned open is a local load once cached"
    );
    assert_eq!(
        cache_files(cache.path()).len(),
        2,
        "the downsized container too"
    );
}

/// Parameters fitted to `k` and pinned by `pin`, points checked.
fn params_options(k: Option<u32>, pin: Option<ParamsPin>) -> ParamsOptions {
    ParamsOptions {
        k,
        pin,
        ..ParamsOptions::default()
    }
}

fn keycodec_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A download that is not the published file (tampered, truncated, or the wrong pin) is
/// refused, naming the URL, and nothing of it is left in the cache; failed requests are
/// retried.
#[test]
fn a_tampered_or_truncated_download_is_refused_and_never_cached() {
    let params = &standard_plonk().params;
    let (bytes, sha256) = published(params);
    let mut tampered = bytes.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 1;
    let truncated = bytes[..bytes.len() - 100].to_vec();
    for (name, body) in [("tampered.srs", tampered), ("truncated.srs", truncated)] {
        let (url, _proxy) = published_behind_proxy("refused", name, &body);
        let cache = tempfile::tempdir().unwrap();
        let at = Location::url(&url, cache.path()).unwrap();
        let refused = open_params(
            at.clone(),
            &params_options(None, Some(ParamsPin::Sha256(sha256))),
        );
        // The truncated one is refused before it is downloaded: its size is not what its
        // first bytes say the parameters hold.
        let named = keycodec_tests::error_text(&refused);
        assert!(
            match name {
                "tampered.srs" =>
                    matches!(&refused, Err(Error::FileHashMismatch { file, .. }) if file.contains(name)),
                _ =>
                    matches!(
                        refused.as_ref().map_err(Error::cause),
                        Err(Error::Malformed(_))
                    ) && named.contains(name),
            },
            "{name}: {named}"
        );
        assert_eq!(cache_files(cache.path()), Vec::<String>::new(), "{name}");
        // Unpinned, the truncated file is refused by its own length; the tampered one by
        // its points' checks.
        let unpinned = open_params(at, &params_options(None, None));
        assert!(unpinned.is_err(), "{name}");
        assert_eq!(cache_files(cache.path()), Vec::<String>::new(), "{name}");
    }
    // A server failing some requests: the download still completes, and is the file.
    let (url, proxy) = published_behind_proxy("flaky", "kzg_bn254_4.srs", &bytes);
    proxy.inject(Rule {
        method: "GET",
        target_contains: "kzg_bn254_4.srs",
        ranged: true,
        unconditional: false,
        skip: 0,
        times: 2,
        fault: Fault::Status(503),
    });
    let cache = tempfile::tempdir().unwrap();
    let fetched = open_params(
        Location::url(&url, cache.path()).unwrap(),
        &params_options(None, Some(ParamsPin::Sha256(sha256))),
    )
    .unwrap();
    assert_eq!(params_bytes(&fetched), bytes);
    assert_eq!(proxy.injected(), 2);
}

/// Processes fetching the same parameters at once download them once: one takes the lock
/// and downloads, the others wait and open what it cached.
#[test]
fn concurrent_fetches_download_once() {
    let params = &standard_plonk_k10().params;
    let (bytes, sha256) = published(params);
    let (url, proxy) = published_behind_proxy("concurrent-fetch", "kzg_bn254_10.srs", &bytes);
    let pin = Some(ParamsPin::Sha256(sha256));
    let alone = tempfile::tempdir().unwrap();
    open_params(
        Location::url(&url, alone.path()).unwrap(),
        &params_options(None, pin),
    )
    .unwrap();
    let one_download = proxy.count("GET", true);
    proxy.reset_counts();
    let shared = tempfile::tempdir().unwrap();
    std::thread::scope(|scope| {
        let fetches: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    open_params(
                        Location::url(&url, shared.path()).unwrap(),
                        &params_options(None, pin),
                    )
                    .unwrap()
                })
            })
            .collect();
        for fetch in fetches {
            assert_eq!(params_bytes(&fetch.join().unwrap()), bytes);
        }
    });
    assert_eq!(proxy.count("GET", true), one_download, "downloaded once");
}

/// The whole cold start from storage: parameters by URL and the key in S3, both pinned and
/// through the cache. The first start finds no key: it generates it, caches it and uploads
/// it; the next (another machine's cache) downloads both; then starts send no request.
#[test]
fn a_cold_start_from_storage_is_pinned_and_cached() {
    let fixture = standard_plonk();
    let (bytes, sha256) = published(&fixture.params);
    let (params_url, params_proxy) = published_behind_proxy("start", "kzg_bn254_4.srs", &bytes);
    let (remote, store, key_proxy) = remote_behind_proxy("start-keys");
    let remote = Arc::new(remote);
    let key_object = ObjectPath::from("prover.pk");
    let k = keycodec::halo2_proofs::poly::commitment::Params::k(&fixture.params);
    let start = |cache: &std::path::Path| {
        Start {
            params_options: ParamsOptions {
                pin: Some(ParamsPin::Sha256(sha256)),
                ..ParamsOptions::default()
            },
            key_options: rawbytes(Some(KeyDigest::of_pk(&fixture.pk).unwrap())),
            ..Start::new(
                Location::url(&params_url, cache).unwrap(),
                object(&remote, &key_object, cache),
                k,
            )
        }
        .run(&fixture.circuit)
        .unwrap()
    };
    let first_machine = tempfile::tempdir().unwrap();
    let first = start(first_machine.path());
    assert_eq!(first.origin, Origin::Generated);
    assert_eq!(pk_bytes(&first.pk), pk_bytes(&fixture.pk));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    assert!(
        runtime.block_on(store.head(&key_object)).is_ok(),
        "the generated key was uploaded"
    );
    let second_machine = tempfile::tempdir().unwrap();
    let second = start(second_machine.path());
    assert_eq!(second.origin, Origin::Loaded);
    assert_eq!(pk_bytes(&second.pk), pk_bytes(&fixture.pk));
    assert_eq!(params_bytes(&second.params), bytes);
    params_proxy.reset_counts();
    key_proxy.reset_counts();
    for machine in [first_machine.path(), second_machine.path()] {
        let again = start(machine);
        assert_eq!(again.origin, Origin::Loaded);
    }
    let requests = params_proxy.count("GET", false)
        + params_proxy.count("HEAD", false)
        + key_proxy.count("GET", false)
        + key_proxy.count("HEAD", false);
    assert_eq!(requests, 0, "pinned starts are local once cached");
}

/// `load_key` for objects: with no backend in the options, the one the object's header
/// names; restricted by the options' backend before anything but the header is read.
#[test]
fn load_key_reads_the_backend_from_the_header() {
    let fixture = standard_plonk();
    let (remote, _store, proxy) = remote_behind_proxy("load-any");
    let remote = Arc::new(remote);
    let at = ObjectPath::from("prover.pk");
    let rkyv = Backend::all().find(|b| b.name() == "rkyv").unwrap();
    let Ok(codec) = rkyv.codec() else { return };
    remote
        .save::<StandardPlonk, _>(codec, &at, &fixture.pk, ())
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let pk: ProvingKey<G1Affine> = load_key::<StandardPlonk, _>(
        object(&remote, &at, cache.path()),
        (),
        &KeyOptions::default(),
    )
    .unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    // Loaded with rkyv: the cached copy is the object, an rkyv container.
    let entries = cached_keys(cache.path());
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(Backend::of_file(&entries[0]).unwrap(), rkyv);
    proxy.reset_counts();
    let only_rawbytes = KeyOptions {
        backend: Some(Backend::RAWBYTES),
        ..KeyOptions::default()
    };
    let fresh = tempfile::tempdir().unwrap();
    let refused = load_key::<StandardPlonk, ProvingKey<G1Affine>>(
        object(&remote, &at, fresh.path()),
        (),
        &only_rawbytes,
    );
    assert!(
        matches!(
            refused.as_ref().map_err(Error::cause),
            Err(Error::CodecNotAllowed { .. })
        ),
        "{:?}",
        refused.err()
    );
    assert_eq!(proxy.count("GET", true), 1, "only the header was read");
    assert_eq!(
        cached_keys(fresh.path()),
        Vec::<PathBuf>::new(),
        "nothing cached"
    );
}
