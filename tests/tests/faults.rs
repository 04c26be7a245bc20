//! The fault suite: the entry points that can write an artifact (a start from a file or an
//! object, a manifest's verifying key, the snark-verifier-sdk drop-in, a cached load, an
//! upload), driven through a server's odd answers and local faults. For every pair the test
//! asserts the rule "no good artifact destroyed": the right key or a typed error naming the
//! artifact; the object and the file byte for byte as they were (no PUT or POST to a good
//! object); no temporary file left; the answer within a bound.
//!
//! Each test failed on the code before the rule was made one (see its doc line).
//!
//! One file, long: its tests share the misbehaving server and the fault switches, which are
//! process-wide (environment variables), so they need a process of their own; each test
//! stands alone.
#![cfg(all(feature = "remote", feature = "rawbytes"))]
// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use keycodec::manifest::Manifest;
use keycodec::remote::object_store::path::Path as ObjectPath;
use keycodec::remote::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use keycodec::remote::{Remote, RemoteOptions};
use keycodec::{
    load_key, load_or_generate, open_params, Backend, Error, KeyDigest, KeyOptions, KeyPin, Keygen,
    Location, Object, Origin, ParamsOptions, Start,
};
use keycodec_core::halo2_proofs::circuit::{Layouter, SimpleFloorPlanner};
use keycodec_core::halo2_proofs::plonk::{Circuit, ConstraintSystem, ProvingKey, VerifyingKey};
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::{KeyCodec, KeyCodecExt, LoadOptions, SaveOptions};
use keycodec_rawbytes::RawBytesCodec;
use keycodec_testkit::{lookup, pk_bytes, standard_plonk, vk_bytes, LookupCircuit, StandardPlonk};
use keycodec_tests::faulty::{Fault, FaultyProxy, Rule};
use keycodec_tests::s3::{server, store};

/// How long any fault below may take to answer: the test store's retries (4, milliseconds
/// apart, within 30 s) and the stalls below (1 s each) bound it well within this.
const BOUND: Duration = Duration::from_secs(60);

type Pk = ProvingKey<G1Affine>;
type Vk = VerifyingKey<G1Affine>;

/// The key options of the loads and starts below: the rawbytes backend (what every key here
/// is stored with), pinned to `pin` when there is one.
fn rawbytes(pin: Option<KeyDigest>) -> KeyOptions {
    KeyOptions {
        backend: Some(Backend::RAWBYTES),
        pin: pin.map(KeyPin::Digest),
        ..KeyOptions::default()
    }
}

/// Another backend's container of `pk`: another valid file of the same key.
fn rkyv_bytes(pk: &Pk) -> Vec<u8> {
    Backend::RKYV
        .codec()
        .unwrap()
        .to_vec::<StandardPlonk, _>(pk, ())
        .unwrap()
}

/// A bucket on the test S3 server behind a proxy of its own, the good key's object in it.
struct Bucket {
    name: String,
    proxy: Arc<FaultyProxy>,
    /// Through the proxy.
    remote: Arc<Remote>,
    /// Straight to the server (what the object holds, unfaulted).
    direct: Arc<dyn ObjectStore>,
}

impl Bucket {
    fn new(prefix: &str) -> Bucket {
        let s3 = server();
        let name = s3.bucket(prefix);
        let proxy = Arc::new(FaultyProxy::start(s3.addr));
        let remote = Remote::new(store(&proxy.endpoint(), &name)).unwrap();
        Bucket {
            direct: store(&s3.endpoint(), &name),
            name,
            proxy,
            remote: Arc::new(remote),
        }
    }

    fn put(&self, at: &str, bytes: Vec<u8>) {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(
                self.direct
                    .put(&ObjectPath::from(at), PutPayload::from(bytes)),
            )
            .unwrap();
    }

    /// The object's bytes, `None` when there is none.
    fn get(&self, at: &str) -> Option<Vec<u8>> {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let got = self.direct.get(&ObjectPath::from(at)).await.ok()?;
            got.bytes().await.ok().map(|bytes| bytes.to_vec())
        })
    }

    fn object(&self, at: &str, cache: &Path) -> Location {
        Location::Object(Object {
            remote: Arc::clone(&self.remote),
            path: ObjectPath::from(at),
            cache: cache.to_path_buf(),
        })
    }

    /// Uploads seen: PUTs (parts, single puts) and POSTs (multipart starts and completions).
    fn uploads(&self) -> usize {
        let bucket = format!("/{}/", self.name);
        self.proxy.count_target("PUT", &bucket) + self.proxy.count_target("POST", &bucket)
    }

    /// Applies `fault` to every ranged GET from now on.
    fn fault_every_ranged_get(&self, fault: Fault) {
        // This bucket's object only: the proxy of `s3_url_bucket` is shared.
        let target: &'static str = Box::leak(format!("/{}/prover.pk", self.name).into_boxed_str());
        self.proxy.inject(Rule {
            method: "GET",
            target_contains: target,
            ranged: true,
            unconditional: false,
            skip: 0,
            times: usize::MAX,
            fault,
        });
    }
}

/// Files a save, a download or a lock left in `dir` that are not artifacts: temporary files.
fn temporary_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

/// The entry points that read a key object and may write one: a start of the key alone, a
/// whole cold start (parameters from a file), a cached load, a manifest's cold start (its key
/// at an `s3://` URL, pinned as manifests require).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    LoadOrGenerate,
    ColdStart,
    LoadCached,
    Manifest,
}

/// The server's odd answers and the network's faults, each on every ranged GET of a good
/// proving key's object, through every entry point, pinned or not: the key (after retries) or
/// an error naming the object, never a generated key, and nothing uploaded over the object.
/// Before: a short body, extra bytes or a size that disagreed counted as damage, and the start
/// regenerated and uploaded.
#[test]
fn a_servers_odd_answers_never_replace_a_good_object() {
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let good = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();
    let digest = KeyDigest::of_pk(&fixture.pk).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let params_path = dir.path().join("kzg.params");
    codec
        .save_params(&params_path, &fixture.params, &SaveOptions::default())
        .unwrap();
    type Case = (&'static str, fn() -> Fault);
    let cases: [Case; 8] = [
        ("a short body", || Fault::ShortBody),
        ("extra bytes", || Fault::ExtraBytes(1000)),
        ("200 for a ranged GET", || Fault::WholeObject),
        ("a wrong Content-Range", || Fault::ShiftContentRange(7)),
        ("a reset mid-body", || Fault::ResetMidBody),
        ("a 500 storm", || Fault::Status(500)),
        ("a 503 storm", || Fault::Status(503)),
        ("a stall", || Fault::Stall(Duration::from_secs(1))),
    ];
    let entries = [
        Entry::LoadOrGenerate,
        Entry::ColdStart,
        Entry::LoadCached,
        Entry::Manifest,
    ];
    for (name, fault) in cases {
        for entry in entries {
            for pin in [None, Some(digest)] {
                // A manifest's store is configured as users' are (`object_store`'s own retries:
                // up to a minute a request), so the storms, retried to the end, are left to
                // the entry points above, which share its code.
                let storm = matches!(name, "a reset mid-body" | "a 500 storm" | "a 503 storm");
                if entry == Entry::Manifest && (pin.is_none() || storm) {
                    continue;
                }
                let bucket = match entry {
                    Entry::Manifest => s3_url_bucket("odd-answers-manifest"),
                    _ => Bucket::new("odd-answers"),
                };
                bucket.put("prover.pk", good.clone());
                bucket.fault_every_ranged_get(fault());
                let cache = tempfile::tempdir().unwrap();
                let options = rawbytes(pin);
                let at = bucket.object("prover.pk", cache.path());
                let k = fixture.params.k();
                let started = Instant::now();
                let loaded: keycodec::Result<Pk> = match entry {
                    Entry::LoadOrGenerate => load_or_generate::<_, Pk>(
                        at,
                        &fixture.params,
                        &fixture.circuit,
                        &options,
                        &Keygen::default(),
                    )
                    .and_then(|(pk, origin)| loaded(pk, origin)),
                    Entry::ColdStart => Start {
                        key_options: options,
                        ..Start::new(&params_path, at, k)
                    }
                    .run(&fixture.circuit)
                    .and_then(|start| loaded(start.pk, start.origin)),
                    Entry::LoadCached => load_key::<StandardPlonk, _>(at, (), &options),
                    Entry::Manifest => {
                        let manifest_path = cache.path().join("prover.json");
                        let json = serde_json::json!({
                            "manifest": 1,
                            "params": { "path": params_path, "k": k },
                            "keys": { "prover": {
                                "kind": "proving",
                                "url": format!("s3://{}/prover.pk", bucket.name),
                                "codec": "rawbytes",
                                "digest": digest.to_string(),
                            } },
                        });
                        std::fs::write(&manifest_path, json.to_string()).unwrap();
                        Manifest::open(&manifest_path)
                            .and_then(|manifest| manifest.start("prover", cache.path()))
                            .and_then(|prover| prover.run(&fixture.circuit))
                            .and_then(|start| loaded(start.pk, start.origin))
                    }
                };
                let took = started.elapsed();
                let context = format!("{name}, {entry:?}, pinned {}", pin.is_some());
                // The outcome, for the fault table (`--nocapture`).
                eprintln!(
                    "outcome: {context}: {}",
                    match &loaded {
                        Ok(_) => "the key".to_owned(),
                        Err(err) => format!("{:?}", err.cause())
                            .split([' ', '(', '{'])
                            .next()
                            .unwrap_or_default()
                            .to_owned(),
                    }
                );
                match &loaded {
                    Ok(pk) => assert_eq!(pk_bytes(pk), pk_bytes(&fixture.pk), "{context}"),
                    Err(err) => assert!(
                        err.to_string().contains("prover.pk"),
                        "{context}: the error names the object: {err}"
                    ),
                }
                assert!(bucket.proxy.injected() > 0, "{context}: the fault was met");
                assert_eq!(bucket.uploads(), 0, "{context}: nothing uploaded");
                assert_eq!(bucket.get("prover.pk"), Some(good.clone()), "{context}");
                assert!(
                    temporary_files(cache.path()).is_empty(),
                    "{context}: {:?}",
                    temporary_files(cache.path())
                );
                assert!(took < BOUND, "{context}: {took:?}");
            }
        }
    }
}

/// `pk` when it was loaded; an error when a start generated it (from a good object, never).
fn loaded(pk: Pk, origin: Origin) -> keycodec::Result<Pk> {
    match origin {
        Origin::Loaded => Ok(pk),
        Origin::Generated => panic!("a key was generated over a good object"),
    }
}

/// Servers slower than the client's request timeout (1 s here): a stall past it and a body
/// that trickles past it end in an error after the retries; a body that trickles within it
/// ends in the key. Never an upload, the object as it was, within the bound.
#[test]
fn slow_servers_end_in_the_key_or_an_error_never_an_upload() {
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let good = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();
    assert!(
        good.len() > 2048,
        "the body trickles in more than one piece"
    );
    type Case = (&'static str, Fault, bool);
    let cases: [Case; 3] = [
        (
            "a stall past the timeout",
            Fault::Stall(Duration::from_secs(3)),
            false,
        ),
        (
            "a trickle past the timeout",
            Fault::Trickle(Duration::from_millis(700)),
            false,
        ),
        (
            "a trickle within it",
            Fault::Trickle(Duration::from_millis(5)),
            true,
        ),
    ];
    for (name, fault, loads) in cases {
        let bucket = Bucket::new("slow");
        bucket.put("prover.pk", good.clone());
        bucket.fault_every_ranged_get(fault);
        let remote = Remote::new(keycodec_tests::s3::store_timing_out(
            &bucket.proxy.endpoint(),
            &bucket.name,
            Duration::from_secs(1),
        ))
        .unwrap();
        let cache = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let start = load_or_generate::<_, Pk>(
            Object {
                remote: Arc::new(remote),
                path: ObjectPath::from("prover.pk"),
                cache: cache.path().to_path_buf(),
            },
            &fixture.params,
            &fixture.circuit,
            &rawbytes(None),
            &Keygen::default(),
        );
        let took = started.elapsed();
        eprintln!(
            "outcome: {name}: {} in {took:?}",
            match &start {
                Ok(_) => "the key".to_owned(),
                Err(err) => err.to_string(),
            }
        );
        match &start {
            Ok((pk, origin)) => {
                assert!(loads, "{name}: loaded");
                assert_eq!(*origin, Origin::Loaded, "{name}");
                assert_eq!(pk_bytes(pk), pk_bytes(&fixture.pk), "{name}");
            }
            Err(err) => {
                assert!(!loads, "{name}: {err}");
                assert!(err.to_string().contains("prover.pk"), "{name}: {err}");
            }
        }
        assert_eq!(bucket.uploads(), 0, "{name}: nothing uploaded");
        assert_eq!(bucket.get("prover.pk"), Some(good.clone()), "{name}");
        assert!(temporary_files(cache.path()).is_empty(), "{name}");
        assert!(took < BOUND, "{name}: {took:?}");
    }
}

/// The object replaced by another valid key between two ranged GETs of a start: an error
/// (the object changed) or the key, and nothing uploaded over it.
#[test]
fn an_object_replaced_mid_load_is_not_uploaded_over() {
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let bucket = Bucket::new("replaced-mid-load");
    let good = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();
    bucket.put("prover.pk", good);
    let replacement = rkyv_bytes(&fixture.pk);
    let (direct, mut replacement) = (Arc::clone(&bucket.direct), Some(replacement.clone()));
    let kept = replacement.clone();
    bucket.proxy.inject(Rule {
        method: "GET",
        target_contains: "prover.pk",
        ranged: true,
        unconditional: false,
        skip: 0,
        times: 1,
        fault: Fault::Hook(Box::new(move || {
            if let Some(bytes) = replacement.take() {
                tokio::runtime::Runtime::new()
                    .unwrap()
                    .block_on(direct.put(&ObjectPath::from("prover.pk"), PutPayload::from(bytes)))
                    .unwrap();
            }
        })),
    });
    let cache = tempfile::tempdir().unwrap();
    let start = load_or_generate::<_, Pk>(
        bucket.object("prover.pk", cache.path()),
        &fixture.params,
        &fixture.circuit,
        &rawbytes(None),
        &Keygen::default(),
    );
    assert!(
        start.as_ref().is_err() || start.as_ref().is_ok_and(|(_, o)| *o == Origin::Loaded),
        "{:?}",
        start.err()
    );
    assert_eq!(bucket.uploads(), 0);
    assert_eq!(bucket.get("prover.pk"), kept);
}

/// The confirmed report: a manifest's verifying key whose URL is the prover's proving-key
/// object loads the verifying key from it, and nothing is uploaded. Before: the object's
/// cache asked for a verifying key's container, the kind mismatch counted as proof, and a
/// verifying key was uploaded over the proving key.
#[test]
fn a_manifests_verifying_key_from_a_proving_keys_object_is_read_not_uploaded_over() {
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let bucket = s3_url_bucket("vk-from-pk");
    let good = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();
    bucket.put("prover.pk", good.clone());
    let vk_digest = KeyDigest::of_vk(fixture.vk()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let params_path = dir.path().join("kzg.params");
    codec
        .save_params(&params_path, &fixture.params, &SaveOptions::default())
        .unwrap();
    let manifest_path = dir.path().join("verifier.json");
    let json = serde_json::json!({
        "manifest": 1,
        "params": { "path": "kzg.params", "k": fixture.params.k() },
        "keys": { "verifier": {
            "kind": "verifying",
            "url": format!("s3://{}/prover.pk", bucket.name),
            "codec": "rawbytes",
            "digest": vk_digest.to_string(),
        } },
    });
    std::fs::write(&manifest_path, json.to_string()).unwrap();
    let manifest = Manifest::open(&manifest_path).unwrap();
    let cache = dir.path().join("cache");
    for round in 0..2 {
        let (at, options) = manifest.key("verifier", &cache).unwrap();
        let (vk, origin) = load_or_generate::<_, Vk>(
            at,
            &fixture.params,
            &fixture.circuit,
            &options,
            &Keygen::default(),
        )
        .unwrap();
        assert_eq!(origin, Origin::Loaded, "round {round}");
        assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    }
    // Unpinned, through the start itself.
    let unpinned = tempfile::tempdir().unwrap();
    let (vk, origin) = load_or_generate::<_, Vk>(
        bucket.object("prover.pk", unpinned.path()),
        &fixture.params,
        &fixture.circuit,
        &rawbytes(None),
        &Keygen::default(),
    )
    .unwrap();
    assert_eq!(origin, Origin::Loaded);
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    assert_eq!(bucket.uploads(), 0, "nothing uploaded");
    assert_eq!(bucket.get("prover.pk"), Some(good));
}

/// A verifying key is never written over a proving key's container, even one of another
/// circuit (someone's proving key): from an object and from a file, an error, and the
/// artifact as it was.
#[test]
fn a_verifying_key_is_never_written_over_another_circuits_proving_key() {
    let fixture = standard_plonk();
    let other = lookup();
    let codec = RawBytesCodec::default();
    let others = codec.to_vec::<LookupCircuit, _>(&other.pk, ()).unwrap();

    let bucket = Bucket::new("vk-over-pk");
    bucket.put("prover.pk", others.clone());
    let cache = tempfile::tempdir().unwrap();
    let start = load_or_generate::<_, Vk>(
        bucket.object("prover.pk", cache.path()),
        &fixture.params,
        &fixture.circuit,
        &rawbytes(None),
        &Keygen::default(),
    );
    // Another circuit's and k's proving key: disproved, and still not written over.
    assert!(
        start.as_ref().is_err_and(Error::disproves_artifact),
        "{:?}",
        start.err()
    );
    assert_eq!(bucket.uploads(), 0);
    assert_eq!(bucket.get("prover.pk"), Some(others.clone()));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prover.pk");
    std::fs::write(&path, &others).unwrap();
    let start = load_or_generate::<_, Vk>(
        &path,
        &fixture.params,
        &fixture.circuit,
        &rawbytes(None),
        &Keygen::default(),
    );
    assert!(start.is_err());
    assert_eq!(std::fs::read(&path).unwrap(), others);
}

/// A small tmpfs mounted at a new folder (root only), unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` where this process may not mount (not root): the case is then skipped.
    fn mount(bytes: usize) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        mounted.then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// A cache whose disk is full loses no generated key: it is uploaded and returned. Before:
/// the cache's save came first and its error ended the start, the key generated for nothing
/// and never uploaded.
#[test]
fn a_full_cache_disk_loses_no_generated_key() {
    // Room for the lock file, not for the key.
    let Some(cache) = Tmpfs::mount(4096) else {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs as root)");
        return;
    };
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let bucket = Bucket::new("cache-full");
    let digest = KeyDigest::of_pk(&fixture.pk).unwrap();
    std::fs::write(cache.path().join("filler"), vec![0u8; 4096]).ok();
    let (pk, origin) = load_or_generate::<_, Pk>(
        bucket.object("prover.pk", cache.path()),
        &fixture.params,
        &fixture.circuit,
        &rawbytes(Some(digest)),
        &Keygen::default(),
    )
    .unwrap();
    assert_eq!(origin, Origin::Generated);
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    let uploaded = bucket.get("prover.pk").expect("the key was uploaded");
    let loaded: ProvingKey<G1Affine> = codec
        .read_slice::<StandardPlonk, _>(&uploaded, (), &LoadOptions::default())
        .unwrap();
    assert_eq!(pk_bytes(&loaded), pk_bytes(&fixture.pk));
    assert!(temporary_files(cache.path()).is_empty());
}

/// The key's own folder full, then read-only, under a torn key file: the start generates,
/// cannot save, and returns a typed error; the torn file is byte for byte as it was and no
/// temporary file is left.
#[test]
fn a_full_or_read_only_key_folder_is_an_error_and_the_file_stays() {
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let good = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();
    let torn = &good[..good.len() / 2];
    // Room for the torn file and the lock, not for a whole key beside it.
    let Some(folder) = Tmpfs::mount(good.len()) else {
        eprintln!("skipped: mounting a tmpfs needs root (CI runs as root)");
        return;
    };
    let path = folder.path().join("prover.pk");
    std::fs::write(&path, torn).unwrap();
    let start_keeps_the_file = |folder_state: &str| {
        let start = load_or_generate::<_, Pk>(
            &path,
            &fixture.params,
            &fixture.circuit,
            &rawbytes(None),
            &Keygen::default(),
        );
        assert!(
            matches!(start.as_ref().map_err(Error::cause), Err(Error::Io { .. })),
            "{folder_state}: {:?}",
            start.err()
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            torn,
            "{folder_state}: the file stays"
        );
    };
    start_keeps_the_file("full");
    assert!(temporary_files(folder.path()).is_empty());
    let remounted = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(folder.path())
        .status()
        .is_ok_and(|status| status.success());
    assert!(remounted, "remount read-only");
    start_keeps_the_file("read-only");
}

/// StandardPlonk, whose keygen runs `deploy` once (a deploy's `cp` of a key over the file,
/// while the start generates).
#[derive(Clone, Default)]
struct DeployedDuringKeygen(StandardPlonk);

static DEPLOY: OnceLock<(PathBuf, Vec<u8>)> = OnceLock::new();
static DEPLOYED: AtomicBool = AtomicBool::new(false);

impl Circuit<Fr> for DeployedDuringKeygen {
    type Config = <StandardPlonk as Circuit<Fr>>::Config;
    type FloorPlanner = SimpleFloorPlanner;
    type Params = ();

    fn without_witnesses(&self) -> Self {
        Self(self.0.without_witnesses())
    }

    fn configure(meta: &mut ConstraintSystem<Fr>) -> Self::Config {
        StandardPlonk::configure(meta)
    }

    fn synthesize(
        &self,
        config: Self::Config,
        layouter: impl Layouter<Fr>,
    ) -> Result<(), keycodec_core::halo2_proofs::plonk::Error> {
        if let Some((path, bytes)) = DEPLOY.get() {
            if !DEPLOYED.swap(true, Ordering::SeqCst) {
                // As `cp` does: the same file, truncated and written again.
                std::fs::write(path, bytes).unwrap();
            }
        }
        self.0.synthesize(config, layouter)
    }
}

/// A key copied over the file while the start generates (a deploy's `cp`, once the start
/// found a torn file) is kept, by the start and by the drop-in's `gen_pk`. Before: keygen's
/// file was renamed over the deploy's.
#[test]
fn a_key_deployed_while_the_start_generates_is_kept() {
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prover.pk");
    let deployed = rkyv_bytes(&fixture.pk);
    DEPLOY.set((path.clone(), deployed.clone())).unwrap();
    let circuit = DeployedDuringKeygen(fixture.circuit.clone());

    // The start: a torn file, which it may replace, until the deploy's copy lands.
    let torn = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();
    std::fs::write(&path, &torn[..torn.len() / 2]).unwrap();
    let start = load_or_generate::<_, Pk>(
        &path,
        &fixture.params,
        &circuit,
        &rawbytes(None),
        &Keygen::default(),
    );
    assert!(DEPLOYED.load(Ordering::SeqCst), "keygen ran");
    assert!(
        matches!(
            start.as_ref().map_err(Error::cause),
            Err(Error::FileChanged { .. })
        ),
        "{:?}",
        start.err()
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        deployed,
        "the deploy's file stays"
    );
    assert!(temporary_files(dir.path()).is_empty());

    // The drop-in: returns the generated key, and leaves the deploy's file.
    std::fs::write(&path, &torn[..torn.len() / 2]).unwrap();
    DEPLOYED.store(false, Ordering::SeqCst);
    let pk = keycodec::compat::gen_pk(&fixture.params, &circuit, Some(&path));
    assert!(DEPLOYED.load(Ordering::SeqCst), "keygen ran");
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        deployed,
        "the deploy's file stays"
    );
}

/// The drop-in's `gen_pk` regenerates a key whose `k` is not the parameters' (halo2-lib's
/// `configure` does not depend on `k`, so the fingerprint matches). Before: the stale key for
/// the old `k` was returned.
#[test]
fn gen_pk_regenerates_a_key_for_another_k() {
    let fixture = standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prover.pk");
    let first = keycodec::compat::gen_pk(&fixture.params, &fixture.circuit, Some(&path));
    assert_eq!(first.get_vk().get_domain().k(), fixture.params.k());
    let larger = &keycodec_testkit::standard_plonk_k10().params;
    let again = keycodec::compat::gen_pk(larger, &fixture.circuit, Some(&path));
    assert_eq!(
        again.get_vk().get_domain().k(),
        larger.k(),
        "a key for the new k"
    );
    let read = keycodec::compat::read_pk::<StandardPlonk>(&path, ()).unwrap();
    assert_eq!(read.get_vk().get_domain().k(), larger.k(), "and saved");
}

/// Takes the lock beside `KEYCODEC_TEST_HOLD` and holds it, printing `locked`, until killed:
/// the lock holder of the test below, run as a child process of this test binary.
#[test]
#[ignore = "run by a_stopped_lock_holder_is_named_and_a_killed_one_taken_over"]
fn hold_a_lock() {
    let Some(path) = std::env::var_os("KEYCODEC_TEST_HOLD") else {
        return;
    };
    let _lock = keycodec_core::lock_beside(Path::new(&path), Duration::from_secs(5)).unwrap();
    println!("locked");
    std::thread::sleep(Duration::from_secs(120));
}

/// A lock holder stopped (`SIGSTOP`) makes every waiter report it, naming it, within its
/// deadline; once it is killed its lock is taken at once. Before: a cached load waited on
/// its lock forever.
#[test]
fn a_stopped_lock_holder_is_named_and_a_killed_one_taken_over() {
    use std::io::BufRead as _;
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let bucket = Bucket::new("stopped-holder");
    bucket.put(
        "prover.pk",
        codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap(),
    );
    let digest = KeyDigest::of_pk(&fixture.pk).unwrap();
    let cache = tempfile::tempdir().unwrap();
    // Where a pinned load caches the key: `{digest}-{codec}.kc`.
    let cached = cache.path().join(format!("{digest}-{}.kc", codec.name()));
    let mut holder = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "hold_a_lock", "--ignored", "--nocapture"])
        .env("KEYCODEC_TEST_HOLD", &cached)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(holder.stdout.take().unwrap()).lines();
    assert!(lines.any(|line| line.is_ok_and(|line| line.contains("locked"))));
    let pid = holder.id().to_string();
    let signal = |name: &str| {
        assert!(std::process::Command::new("kill")
            .args([name, &pid])
            .status()
            .unwrap()
            .success());
    };
    signal("-STOP");
    let remote = Remote::new(store(&bucket.proxy.endpoint(), &bucket.name))
        .unwrap()
        .with_options(RemoteOptions {
            lock_timeout: Duration::from_millis(500),
            ..RemoteOptions::default()
        });
    let object = Object {
        remote: Arc::new(remote),
        path: ObjectPath::from("prover.pk"),
        cache: cache.path().to_path_buf(),
    };
    let pinned = rawbytes(Some(digest));
    let started = Instant::now();
    let waited = load_key::<StandardPlonk, Pk>(object.clone(), (), &pinned);
    let took = started.elapsed();
    let text = waited
        .as_ref()
        .err()
        .map(ToString::to_string)
        .unwrap_or_default();
    assert!(
        text.contains(&format!("process {pid} (stopped)")),
        "names the stopped holder: {text}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    signal("-KILL");
    let _ = holder.wait();
    let pk = load_key::<StandardPlonk, Pk>(object, (), &pinned).unwrap();
    assert_eq!(pk_bytes(&pk), pk_bytes(&fixture.pk));
}

/// A file changed while it is uploaded (`keycodec push` uploads the file it checked, through
/// the same open file) is not uploaded: the upload is aborted and no object appears.
#[test]
fn a_file_changed_during_its_upload_is_not_uploaded() {
    let bucket = Bucket::new("push-changed");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prover.pk");
    std::fs::write(&path, vec![7u8; 3 << 20]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let changed = AtomicBool::new(false);
    let uploaded = bucket
        .remote
        .upload_file(&file, &path, &ObjectPath::from("prover.pk"), &|_| {
            if !changed.swap(true, Ordering::SeqCst) {
                std::fs::write(&path, vec![8u8; 3 << 20]).unwrap();
            }
        });
    assert!(
        matches!(
            uploaded.as_ref().map_err(Error::cause),
            Err(Error::FileChanged { .. })
        ),
        "{uploaded:?}"
    );
    assert_eq!(bucket.get("prover.pk"), None, "no object appears");
}

/// Unpinned parameters over plain `http://` are refused before any request. Before: accepted
/// without a word.
#[test]
fn unpinned_parameters_over_plain_http_are_refused() {
    let fixture = standard_plonk();
    let mut srs = Vec::new();
    fixture
        .params
        .write_custom(&mut srs, keycodec_core::halo2_proofs::SerdeFormat::RawBytes)
        .unwrap();
    let served = keycodec_tests::lying::LyingServer::start(srs, Default::default());
    let cache = tempfile::tempdir().unwrap();
    let opened = open_params(
        Location::url(&served.url("kzg.srs"), cache.path()).unwrap(),
        &ParamsOptions::default(),
    );
    assert!(
        matches!(
            opened.as_ref().map_err(Error::cause),
            Err(Error::UnpinnedOverHttp { .. })
        ),
        "{:?}",
        opened.err()
    );
    assert_eq!(served.count("GET") + served.count("HEAD"), 0);
}

/// A key header a server forged with a payload length near `u64::MAX` is refused by a fetch
/// with an error. Before: the header's and payload's lengths were added before the bound (a
/// panic in a debug build).
#[test]
fn a_forged_payload_length_is_refused_not_overflowed() {
    let fixture = standard_plonk();
    let codec = RawBytesCodec::default();
    let good = codec.to_vec::<StandardPlonk, _>(&fixture.pk, ()).unwrap();
    let header = keycodec_core::header::Header::from_bytes(&good).unwrap();
    let digest = header.digest.unwrap();
    let forged = keycodec_core::header::Header {
        payload_len: u64::MAX - 8,
        ..header
    };
    let mut bytes = forged.to_bytes().to_vec();
    bytes.extend_from_slice(&good[bytes.len()..]);
    let served = keycodec_tests::lying::LyingServer::start(bytes, Default::default());
    let dir = tempfile::tempdir().unwrap();
    let manifest_path = dir.path().join("prover.json");
    let json = serde_json::json!({
        "manifest": 1,
        "params": { "path": "kzg.params", "k": fixture.params.k() },
        "keys": { "prover": {
            "kind": "proving",
            "url": served.url("prover.pk"),
            "codec": "rawbytes",
            "digest": digest.to_string(),
        } },
    });
    std::fs::write(&manifest_path, json.to_string()).unwrap();
    let manifest = Manifest::open(&manifest_path).unwrap();
    let cache = dir.path().join("cache");
    let fetched = manifest.fetch(&cache, &|_, _| {});
    let prover = fetched
        .iter()
        .find(|(name, _)| name == "prover")
        .map(|(_, result)| result)
        .unwrap();
    assert!(prover.is_err(), "{prover:?}");
    assert!(temporary_files(&cache).is_empty());
}

/// A bucket whose objects are reached by `s3://` URLs (a manifest's), through one proxy of
/// this process's: the S3 client configured from the environment, as the AWS tools are.
fn s3_url_bucket(prefix: &str) -> Bucket {
    static PROXY: OnceLock<Arc<FaultyProxy>> = OnceLock::new();
    let s3 = server();
    let proxy = PROXY.get_or_init(|| {
        let proxy = Arc::new(FaultyProxy::start(s3.addr));
        for (name, value) in [
            ("AWS_ENDPOINT", proxy.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "keycodec-test".into()),
            ("AWS_SECRET_ACCESS_KEY", "keycodec-test".into()),
        ] {
            std::env::set_var(name, value);
        }
        proxy
    });
    let name = s3.bucket(prefix);
    Bucket {
        remote: Arc::new(Remote::new(store(&proxy.endpoint(), &name)).unwrap()),
        direct: store(&s3.endpoint(), &name),
        name,
        proxy: Arc::clone(proxy),
    }
}
