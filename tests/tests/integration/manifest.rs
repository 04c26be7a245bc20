//! A prover's artifacts declared once in a manifest: parsed strictly, fetched into a cache at
//! once and checked, verified without fetching, and a cold start from it that makes no
//! request once the cache is warm, even with the server gone. Its artifacts are moto's public
//! objects (anyone reads them by plain HTTP), through a proxy that counts requests.
#![cfg(all(feature = "remote", feature = "rawbytes"))]
// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::time::Instant;

use keycodec::halo2_proofs::plonk::VerifyingKey;
use keycodec::halo2curves::bn256::G1Affine;
use keycodec::manifest::{ArtifactState, Manifest};
use keycodec::{
    load_or_generate, save_key, Backend, Error, KeyDigest, KeyOptions, Keygen, Location, Origin,
    ParamsPin,
};
use keycodec_core::halo2_proofs::poly::commitment::Params as _;
use keycodec_core::halo2_proofs::SerdeFormat;
use keycodec_core::KeyCodecExt;
use keycodec_testkit::{pk_bytes, standard_plonk_k10, vk_bytes};
use keycodec_tests::faulty::FaultyProxy;
use keycodec_tests::s3::server;

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    keycodec_core::hex::encode(&sha2::Sha256::digest(bytes))
}

/// A closed loopback port: a server that has stopped.
fn stopped_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

fn write_manifest(dir: &Path, name: &str, json: &serde_json::Value) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(json).unwrap()).unwrap();
    path
}

#[test]
fn a_cold_start_from_a_manifest_fetches_once_then_needs_no_server() {
    let fixture = standard_plonk_k10();
    let s3 = server();
    let bucket = s3.bucket("manifest");
    let mut srs = Vec::new();
    fixture
        .params
        .write_custom(&mut srs, SerdeFormat::RawBytes)
        .unwrap();
    s3.put_public(&bucket, "kzg_bn254_10.srs", &srs);
    let pk = Backend::RAWBYTES
        .codec()
        .unwrap()
        .to_vec::<keycodec_testkit::StandardPlonk, _>(&fixture.pk, ())
        .unwrap();
    s3.put_public(&bucket, "prover.pk", &pk);
    let proxy = FaultyProxy::start(s3.addr);
    let dir = tempfile::tempdir().unwrap();
    let vk_digest = save_key::<keycodec_testkit::StandardPlonk, _>(
        dir.path().join("verifier.vk"),
        fixture.vk(),
        (),
        &KeyOptions::default(),
    )
    .unwrap();
    let pk_digest = KeyDigest::of_pk(&fixture.pk).unwrap();
    let manifest_at = |origin: &str, pk_digest: KeyDigest| {
        serde_json::json!({
            "manifest": 1,
            "params": {
                "url": format!("{origin}/{bucket}/kzg_bn254_10.srs"),
                "sha256": sha256_hex(&srs),
                "k": 10,
            },
            "keys": {
                "prover": {
                    "kind": "proving",
                    "url": format!("{origin}/{bucket}/prover.pk"),
                    "codec": "rawbytes",
                    "digest": pk_digest.to_string(),
                },
                "verifier": {
                    "kind": "verifying",
                    "path": "verifier.vk",
                    "codec": "rawbytes",
                    "digest": vk_digest.to_string(),
                },
            },
        })
    };
    let origin = format!("http://{}", proxy.addr);
    let path = write_manifest(dir.path(), "prover.json", &manifest_at(&origin, pk_digest));
    let manifest = Manifest::open(&path).unwrap();
    let cache = dir.path().join("cache");

    // Nothing fetched yet: the URLs' artifacts are missing, the file is there.
    let verified = manifest.verify(&cache);
    let states: Vec<_> = verified
        .iter()
        .map(|(name, result)| {
            (
                name.as_str(),
                result.as_ref().map_err(Error::is_missing).err(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("params", Some(true)),
            ("prover", Some(true)),
            ("verifier", None)
        ]
    );
    assert_eq!(
        proxy.count("GET", false) + proxy.count("HEAD", false),
        0,
        "verify sends nothing"
    );

    let started = Instant::now();
    let fetched = manifest.fetch(&cache, &|_, _| {});
    let fetch_cold = started.elapsed();
    for (name, result) in &fetched {
        let state = result
            .as_ref()
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        let expected_downloaded = name != "verifier";
        assert_eq!(
            matches!(state, ArtifactState::Downloaded(_)),
            expected_downloaded,
            "{name}: {state:?}"
        );
    }
    assert!(proxy.count("GET", true) > 0);

    proxy.reset_counts();
    let started = Instant::now();
    let fetched = manifest.fetch(&cache, &|_, _| {});
    let fetch_warm = started.elapsed();
    assert!(fetched.iter().all(|(_, result)| result.is_ok()));
    let started = Instant::now();
    let start = manifest
        .start("prover", &cache)
        .unwrap()
        .run(&fixture.circuit)
        .unwrap();
    let start_warm = started.elapsed();
    assert_eq!(start.origin, Origin::Loaded);
    assert_eq!(pk_bytes(&start.pk), pk_bytes(&fixture.pk));
    assert_eq!(start.params.k(), 10);
    let (at, options) = manifest.key("verifier", &cache).unwrap();
    let (vk, vk_origin): (VerifyingKey<G1Affine>, _) = load_or_generate(
        at,
        &start.params,
        &fixture.circuit,
        &options,
        &Keygen::default(),
    )
    .unwrap();
    assert_eq!(vk_origin, Origin::Loaded);
    assert_eq!(vk_bytes(&vk), vk_bytes(fixture.vk()));
    assert_eq!(
        proxy.count("GET", false) + proxy.count("HEAD", false),
        0,
        "a warm cache makes no request"
    );

    // The server gone: the same pins at a dead address start from the cache alone.
    let offline = write_manifest(
        dir.path(),
        "offline.json",
        &manifest_at(&stopped_server(), pk_digest),
    );
    let offline = Manifest::open(&offline).unwrap();
    let started = Instant::now();
    let start = offline
        .start("prover", &cache)
        .unwrap()
        .run(&fixture.circuit)
        .unwrap();
    let start_offline = started.elapsed();
    assert_eq!(pk_bytes(&start.pk), pk_bytes(&fixture.pk));
    assert!(offline
        .verify(&cache)
        .iter()
        .all(|(_, result)| result.is_ok()));

    // A cold start from an empty cache, for the record.
    let empty = dir.path().join("empty-cache");
    let started = Instant::now();
    manifest
        .start("prover", &empty)
        .unwrap()
        .run(&fixture.circuit)
        .unwrap();
    let start_cold = started.elapsed();
    println!(
        "manifest, k = 10 StandardPlonk key ({} bytes) and parameters ({} bytes) on loopback moto: \
         fetch cold {fetch_cold:.2?}, fetch warm {fetch_warm:.2?}; cold start from an empty cache \
         {start_cold:.2?}, warm {start_warm:.2?}, warm with the server stopped {start_offline:.2?}",
        pk.len(),
        srs.len()
    );

    // What the manifest does not name, or names as something else, is refused.
    for (key, reason) in [
        ("nobody", "names no key"),
        ("verifier", "not a proving key"),
    ] {
        let refused = manifest
            .start(key, &cache)
            .and_then(|prover| prover.run(&fixture.circuit));
        assert!(
            matches!(&refused, Err(Error::Manifest { message, .. }) if message.contains(reason)),
            "{key}: {:?}",
            refused.err()
        );
    }
    // Another digest than the object's: refused naming the artifact, nothing cached for it.
    let other = KeyDigest([9; 32]);
    let wrong = write_manifest(dir.path(), "wrong.json", &manifest_at(&origin, other));
    let wrong = Manifest::open(&wrong).unwrap();
    let fetched = wrong.fetch(&cache, &|_, _| {});
    let (_, prover) = fetched.iter().find(|(name, _)| name == "prover").unwrap();
    assert!(
        matches!(prover, Err(Error::Artifact { name, .. }) if name == "prover")
            && matches!(
                prover.as_ref().map_err(Error::cause),
                Err(Error::DigestMismatch { .. })
            ),
        "{prover:?}"
    );
    assert!(!cache.join(format!("{other}-rawbytes.kc")).exists());
}

#[test]
fn manifests_are_parsed_strictly() {
    let at = Path::new("/etc/prover/manifest.json");
    let sha = "ab".repeat(32);
    let good = serde_json::json!({
        "manifest": 1,
        "params": { "path": "kzg_bn254_22.srs", "k": 20, "sha256": sha },
        "keys": { "prover": { "kind": "proving", "path": "prover.pk", "codec": "rkyv" } },
    });
    let manifest = Manifest::from_json(&good.to_string(), at).unwrap();
    // Files named by path are not looked up in the cache.
    let cache = Path::new("/nonexistent/cache");
    let (params_at, params) = manifest.params(cache).unwrap();
    assert_eq!(params.k, Some(20));
    assert_eq!(params.pin, Some(ParamsPin::sha256(&sha).unwrap()));
    assert!(
        matches!(&params_at, Location::File(path) if path == Path::new("/etc/prover/kzg_bn254_22.srs")),
        "{params_at:?}"
    );
    assert_eq!(manifest.keys().collect::<Vec<_>>(), ["prover"]);
    let (key_at, key) = manifest.key("prover", cache).unwrap();
    assert_eq!(key.backend, Some(Backend::RKYV));
    assert!(
        matches!(&key_at, Location::File(path) if path == Path::new("/etc/prover/prover.pk")),
        "{key_at:?}"
    );
    let bad = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut json = good.clone();
        edit(&mut json);
        Manifest::from_json(&json.to_string(), at)
    };
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        ("version", Box::new(|j| j["manifest"] = 2.into())),
        (
            "unknown field",
            Box::new(|j| j["params"]["sha265"] = "00".into()),
        ),
        (
            "both url and path",
            Box::new(|j| j["params"]["url"] = "https://h/x".into()),
        ),
        (
            "url without a pin",
            Box::new(|j| {
                j["params"] = serde_json::json!({ "url": "https://h/kzg.srs", "k": 20 });
            }),
        ),
        ("k", Box::new(|j| j["params"]["k"] = 40.into())),
        (
            "sha256 with a sign",
            Box::new(|j| j["params"]["sha256"] = "+0".repeat(32).into()),
        ),
        (
            "kind",
            Box::new(|j| j["keys"]["prover"]["kind"] = "proofing".into()),
        ),
        (
            "codec",
            Box::new(|j| j["keys"]["prover"]["codec"] = "zstd".into()),
        ),
        (
            "key url without a digest",
            Box::new(|j| {
                j["keys"]["prover"] =
                    serde_json::json!({ "kind": "proving", "url": "s3://b/k", "codec": "rkyv" });
            }),
        ),
    ];
    for (what, edit) in cases {
        let refused = bad(&*edit);
        assert!(
            matches!(&refused, Err(Error::Manifest { path, .. }) if path == at),
            "{what}: {:?}",
            refused.map(drop)
        );
    }
}
