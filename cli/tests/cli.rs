//! The `keycodec` command as scripts use it: output, JSON and exit codes.
//!
//! One file, long: each test runs the built command on shared fixture files and stands
//! alone.

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Command, Output};

use keycodec_core::{KeyCodecExt, SaveOptions};
use keycodec_rkyv::RkyvCodec;
use keycodec_testkit::{lookup, LookupCircuit};

fn keycodec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keycodec"))
        .args(args)
        .output()
        .expect("run keycodec")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn saved(dir: &Path) -> (String, keycodec::KeyDigest) {
    let path = dir.join("key.pk");
    let digest = RkyvCodec
        .save::<LookupCircuit, _>(&path, &lookup().pk, (), &SaveOptions::default())
        .unwrap();
    (path.display().to_string(), digest)
}

#[test]
fn inspect_describes_the_container_for_people_and_for_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let (path, digest) = saved(dir.path());
    let out = keycodec(&["inspect", &path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let human = text(&out.stdout);
    for expected in [
        "rkyv (id 3)",
        "proving key",
        "k = 6",
        "intact",
        &digest.to_string(),
        "written by    halo2-axiom 0.5.3 with keycodec",
        "circuit       recorded:",
        "1 lookups",
    ] {
        assert!(human.contains(expected), "{expected}: {human}");
    }
    let out = keycodec(&["inspect", "--json", &path]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["codec"]["name"], "rkyv");
    assert_eq!(json["kind"], "proving key");
    assert_eq!(json["k"], 6);
    assert_eq!(json["container_version"], 4);
    assert_eq!(json["circuit"]["recorded"], true);
    assert_eq!(json["circuit"]["lookups"], 1);
    assert!(json["circuit"]["usable_rows"].as_u64().unwrap() < 64);
    // The lookup circuit's parameters are `()`: recorded, as null.
    assert!(json["circuit"]["params"].is_null());
    assert!(json["circuit"].as_object().unwrap().contains_key("params"));
    assert_eq!(json["written_by"]["halo2"], "halo2-axiom 0.5.3");
    assert_eq!(json["written_by"]["keycodec"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["payload"]["state"], "intact");
    assert_eq!(json["key_digest"], digest.to_string());
}

#[test]
fn digest_and_verify_pin_the_recorded_digest() {
    let dir = tempfile::tempdir().unwrap();
    let (path, digest) = saved(dir.path());
    let out = keycodec(&["digest", &path]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).trim(), digest.to_string());

    let out = keycodec(&["verify", &path, "--digest", &digest.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let other = "00".repeat(32);
    let out = keycodec(&["verify", &path, "--digest", &other, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert!(json["error"].as_str().unwrap().contains(&other));
}

#[test]
fn damage_is_exit_code_1_a_missing_file_3_and_a_bad_command_line_2() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = saved(dir.path());
    let mut bytes = std::fs::read(&path).unwrap();
    // A byte of the payload (the circuit's record, a few kilobytes, follows it).
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    let corrupt = dir.path().join("corrupt.pk");
    std::fs::write(&corrupt, &bytes).unwrap();
    let out = keycodec(&["verify", corrupt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("corrupt"),
        "{}",
        text(&out.stderr)
    );
    // inspect describes the damage, and exits 1 as verify does (a script's `inspect && use`
    // must not use a corrupt file); its JSON says so too, in one document.
    let out = keycodec(&["inspect", corrupt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("corrupt"));
    let out = keycodec(&["inspect", "--json", corrupt.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["payload"]["state"], "corrupt");

    let truncated = dir.path().join("truncated.pk");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let out = keycodec(&["digest", truncated.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));

    let not_a_key = dir.path().join("notes.txt");
    std::fs::write(
        &not_a_key,
        "not a key, and long enough to hold a header ........................................",
    )
    .unwrap();
    let out = keycodec(&["verify", not_a_key.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("bad magic"));

    let out = keycodec(&["verify", dir.path().join("missing.pk").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3));
    let out = keycodec(&["verify", &path, "--digest", "not-hex"]);
    assert_eq!(out.status.code(), Some(2));
    let out = keycodec(&["frobnicate"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn parameters_import_inspect_downsize_and_export() {
    use keycodec_core::halo2_proofs::poly::commitment::Params as _;
    use keycodec_core::halo2_proofs::SerdeFormat;
    let params = &keycodec_testkit::standard_plonk().params;
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let mut halo2 = Vec::new();
    params
        .write_custom(&mut halo2, SerdeFormat::RawBytes)
        .unwrap();
    std::fs::write(path("kzg.srs"), &halo2).unwrap();

    let out = keycodec(&["params", "inspect", "--json", &path("kzg.srs")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["k"], params.k());
    assert_eq!(json["kind"], "halo2 parameters");

    let out = keycodec(&[
        "params",
        "import",
        &path("kzg.srs"),
        &path("params.kc"),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = keycodec(&["digest", &path("params.kc")]);
    assert_eq!(text(&out.stdout).trim(), json["digest"].as_str().unwrap());
    let out = keycodec(&["params", "inspect", &path("params.kc")]);
    assert!(
        text(&out.stdout).contains("KZG parameters"),
        "{}",
        text(&out.stdout)
    );

    let smaller = params.k() - 1;
    let out = keycodec(&[
        "params",
        "downsize",
        &path("params.kc"),
        &path("small.kc"),
        "--k",
        &smaller.to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = keycodec(&["inspect", "--json", &path("small.kc")]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["k"], smaller);

    let out = keycodec(&[
        "params",
        "export",
        &path("params.kc"),
        &path("out.srs"),
        "--format",
        "processed",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut processed = Vec::new();
    params
        .write_custom(&mut processed, SerdeFormat::Processed)
        .unwrap();
    assert_eq!(std::fs::read(path("out.srs")).unwrap(), processed);

    // A damaged halo2 file is refused by the import (exit code 1).
    let mut damaged = halo2.clone();
    damaged[4 + 64 * 3 + 40] ^= 1;
    std::fs::write(path("bad.srs"), &damaged).unwrap();
    let out = keycodec(&["params", "import", &path("bad.srs"), &path("bad.kc")]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(!dir.path().join("bad.kc").exists());
}

/// `push` and `pull` against the test S3 server, configured as users configure them: from
/// the AWS environment variables.
#[test]
fn push_and_pull_check_both_ends() {
    let server = keycodec_tests::s3::server();
    let bucket = server.bucket("cli");
    let endpoint = server.endpoint();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_keycodec"))
            .args(args)
            .env("AWS_ENDPOINT", &endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "keycodec-test")
            .env("AWS_SECRET_ACCESS_KEY", "keycodec-test")
            .env("AWS_REGION", "us-east-1")
            .output()
            .expect("run keycodec")
    };
    let dir = tempfile::tempdir().unwrap();
    let (path, digest) = saved(dir.path());
    let url = format!("s3://{bucket}/keys/key.pk");
    let digest = digest.to_string();

    let out = run(&["push", &path, &url, "--digest", &digest]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("pushed"),
        "{}",
        text(&out.stdout)
    );

    let pulled = dir.path().join("pulled.pk");
    let pulled_name = pulled.display().to_string();
    let out = run(&["pull", "--json", &url, &pulled_name, "--digest", &digest]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], true);
    assert_eq!(json["key_digest"], digest);
    assert!(std::fs::read(&pulled).unwrap() == std::fs::read(&path).unwrap());

    // Another digest: refused (1), and the destination keeps what it had.
    std::fs::write(&pulled, b"before").unwrap();
    let other = "00".repeat(32);
    let out = run(&["pull", &url, &pulled_name, "--digest", &other]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&pulled).unwrap(), b"before");
    // Nothing pushed under another digest either.
    let out = run(&[
        "push",
        &path,
        &format!("s3://{bucket}/other.pk"),
        "--digest",
        &other,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // A missing object: object storage's failure (4).
    let out = run(&["pull", &format!("s3://{bucket}/other.pk"), &pulled_name]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("other.pk"),
        "{}",
        text(&out.stderr)
    );
    let leftovers = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".tmp")
        })
        .count();
    assert_eq!(leftovers, 0);
}

/// `params fetch` from a public URL (halo2's format, as projects publish their SRS): the
/// first run downloads and checks the SHA-256, the second answers from the cache, a wrong
/// SHA-256 is refused (1) and caches nothing, a malformed one is a usage error (2).
#[test]
fn params_fetch_checks_the_pin_and_caches() {
    use keycodec_core::halo2_proofs::poly::commitment::Params as _;
    use keycodec_core::halo2_proofs::SerdeFormat;
    use sha2::{Digest, Sha256};

    let server = keycodec_tests::s3::server();
    let bucket = server.bucket("cli-params");
    let mut file = Vec::new();
    lookup()
        .params
        .write_custom(&mut file, SerdeFormat::RawBytes)
        .unwrap();
    server.put_public(&bucket, "kzg.srs", &file);
    let url = keycodec_tests::s3::S3Server::public_url(server.addr, &bucket, "kzg.srs");
    let sha = Sha256::digest(&file)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let cache_name = cache.display().to_string();
    let fetch = |extra: &[&str]| {
        let mut args = vec!["params", "fetch", "--json", &url, "--cache", &cache_name];
        args.extend_from_slice(extra);
        keycodec(&args)
    };

    let out = fetch(&["--sha256", &sha]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["outcome"], "downloaded");
    assert_eq!(json["sha256_checked"], true);
    assert_eq!(json["k"], lookup().params.k());
    let out = fetch(&["--sha256", &sha]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["outcome"], "cached");

    let other_cache = dir.path().join("other");
    let other = "ab".repeat(32);
    let out = keycodec(&[
        "params",
        "fetch",
        &url,
        "--cache",
        &other_cache.display().to_string(),
        "--sha256",
        &other,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&other),
        "the message names the expected hash: {}",
        text(&out.stderr)
    );
    let cached = std::fs::read_dir(&other_cache)
        .map(|entries| {
            entries
                .filter(|e| e.as_ref().unwrap().path().extension() == Some("kc".as_ref()))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(cached, 0, "refused parameters are not cached");

    let out = fetch(&["--sha256", "not-hex"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    // Parameters smaller than asked for: refused (1), naming both k.
    let out = fetch(&["--sha256", &sha, "--k", "99"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert!(json["error"].as_str().unwrap().contains("k = 99"), "{json}");
}

/// A command line clap refuses is exit code 2, and under `--json` a JSON document on stdout;
/// a pin with a sign in it is no pin; a URL that names no object is a bad command line (2),
/// not a failure of object storage (4).
#[test]
fn bad_command_lines_are_exit_code_2_and_json_under_json() {
    let out = keycodec(&["verify", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert!(json["error"].as_str().unwrap().contains("FILE"), "{json}");
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = saved(dir.path());
    let plus = "+0".repeat(32);
    let out = keycodec(&["verify", &path, "--digest", &plus, "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(serde_json::from_slice::<serde_json::Value>(&out.stdout).is_ok());
    let destination = dir.path().join("pulled.pk").display().to_string();
    for url in [
        "ftp://host.example/key.pk",
        "not a url",
        "https://host.example/key.pk?X-Amz-Signature=00",
    ] {
        let out = keycodec(&["pull", url, &destination]);
        assert_eq!(out.status.code(), Some(2), "{url}: {}", text(&out.stderr));
        let out = keycodec(&["params", "fetch", url, "--sha256", &"ab".repeat(32)]);
        assert_eq!(out.status.code(), Some(2), "{url}: {}", text(&out.stderr));
    }
    // --help is no error.
    assert_eq!(keycodec(&["--help"]).status.code(), Some(0));
}

/// `params export` replaces its destination atomically: a hard link to the previous file
/// still holds the previous bytes (`File::create` truncated and rewrote the shared file, so a
/// failed export left a torn one that halo2's reader panics on).
#[test]
fn params_export_replaces_the_destination_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let container = dir.path().join("params.kc");
    keycodec_rawbytes::RawBytesCodec::default()
        .save_params(&container, &lookup().params, &SaveOptions::default())
        .unwrap();
    let destination = dir.path().join("kzg.srs");
    std::fs::write(&destination, b"the previous file").unwrap();
    let link = dir.path().join("previous.srs");
    std::fs::hard_link(&destination, &link).unwrap();
    let out = keycodec(&[
        "params",
        "export",
        container.to_str().unwrap(),
        destination.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&link).unwrap(), b"the previous file");
    assert!(std::fs::read(&destination).unwrap().len() > 1000);
}

/// `pull` lands its file as a save does: a new file gets the mode `File::create` gives
/// (today's kept the temporary file's 0600), a symbolic link's target is replaced (today's
/// replaced the link), and an object whose size is not what its header declares is refused
/// before anything is written.
#[test]
fn pull_lands_its_file_as_a_save_does() {
    use std::os::unix::fs::PermissionsExt;
    let server = keycodec_tests::s3::server();
    let bucket = server.bucket("cli-pull-lands");
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = saved(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    server.put_public(&bucket, "key.pk", &bytes);
    let url = keycodec_tests::s3::S3Server::public_url(server.addr, &bucket, "key.pk");

    let pulled = dir.path().join("pulled.pk");
    let out = keycodec(&["pull", &url, pulled.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let reference = dir.path().join("reference");
    std::fs::File::create(&reference).unwrap();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&pulled), mode(&reference));

    let target = dir.path().join("target.pk");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.path().join("link.pk");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = keycodec(&["pull", &url, link.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(std::fs::read(&target).unwrap() == bytes);

    let lying = keycodec_tests::lying::LyingServer::start(
        bytes.clone(),
        keycodec_tests::lying::Lies {
            size: Some(1 << 50),
            ..Default::default()
        },
    );
    let refused = dir.path().join("refused.pk");
    let out = keycodec(&["pull", &lying.url("key.pk"), refused.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("header declares"),
        "{}",
        text(&out.stderr)
    );
    assert!(!refused.exists());
    assert!(lying.bytes_asked() <= keycodec_core::header::HEADER_LEN as u64);
}

/// `pull --codecs` reads the object's header before downloading it: a key saved by another
/// backend is refused (1) and nothing is written.
#[test]
fn pull_refuses_a_backend_not_allowed() {
    let server = keycodec_tests::s3::server();
    let bucket = server.bucket("cli-codecs");
    let endpoint = server.endpoint();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_keycodec"))
            .args(args)
            .env("AWS_ENDPOINT", &endpoint)
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "keycodec-test")
            .env("AWS_SECRET_ACCESS_KEY", "keycodec-test")
            .env("AWS_REGION", "us-east-1")
            .output()
            .expect("run keycodec")
    };
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = saved(dir.path());
    let url = format!("s3://{bucket}/key.pk");
    let out = run(&["push", &path, &url]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let pulled = dir.path().join("pulled.pk");
    let pulled_name = pulled.display().to_string();
    let out = run(&["pull", &url, &pulled_name, "--codecs", "rawbytes,compact"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("rkyv"),
        "the message names the object's backend: {}",
        text(&out.stderr)
    );
    assert!(!pulled.exists());
    let out = run(&["pull", &url, &pulled_name, "--codecs", "rkyv"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(pulled.exists());
}

/// `fetch --manifest` fills the cache with every artifact a manifest declares at a URL,
/// checked, and reports each (JSON for scripts); `verify --manifest` checks what is there
/// without fetching: before the fetch it fails (1) naming what is missing, after it passes.
#[test]
fn fetch_and_verify_a_manifest() {
    use keycodec_core::halo2_proofs::SerdeFormat;
    use sha2::{Digest, Sha256};
    let server = keycodec_tests::s3::server();
    let bucket = server.bucket("cli-manifest");
    let mut srs = Vec::new();
    lookup()
        .params
        .write_custom(&mut srs, SerdeFormat::RawBytes)
        .unwrap();
    server.put_public(&bucket, "kzg.srs", &srs);
    let dir = tempfile::tempdir().unwrap();
    let (path, digest) = saved(dir.path());
    server.put_public(&bucket, "key.pk", &std::fs::read(&path).unwrap());
    let origin = format!("http://{}", server.addr);
    let manifest = serde_json::json!({
        "manifest": 1,
        "params": {
            "url": format!("{origin}/{bucket}/kzg.srs"),
            "sha256": keycodec_core::hex::encode(&Sha256::digest(&srs)),
            "k": 6,
        },
        "keys": {
            "prover": {
                "kind": "proving",
                "url": format!("{origin}/{bucket}/key.pk"),
                "codec": "rkyv",
                "digest": digest.to_string(),
            },
        },
    });
    let manifest_path = dir.path().join("prover.json");
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    let cache = dir.path().join("cache");
    let (manifest_arg, cache_arg) = (
        manifest_path.display().to_string(),
        cache.display().to_string(),
    );
    let run = |command: &str| {
        keycodec(&[
            command,
            "--manifest",
            &manifest_arg,
            "--cache",
            &cache_arg,
            "--json",
        ])
    };
    let out = run("verify");
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    assert_eq!(json["artifacts"][0]["name"], "params");
    assert_eq!(json["artifacts"][0]["ok"], false);

    let out = run("fetch");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], true);
    let states: Vec<_> = json["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|artifact| artifact["state"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(states, ["downloaded", "downloaded"]);

    let out = run("fetch");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["artifacts"][1]["state"], "cached");
    let out = run("verify");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = keycodec(&["verify", "--manifest", &manifest_arg, "--cache", &cache_arg]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("prover: cached"),
        "{}",
        text(&out.stdout)
    );
    // A damaged cached key: verify fails (1) naming it.
    let cached_key = cache.join(format!("{digest}-rkyv.kc"));
    let mut bytes = std::fs::read(&cached_key).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&cached_key, &bytes).unwrap();
    let out = keycodec(&["verify", "--manifest", &manifest_arg, "--cache", &cache_arg]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("prover: FAILED"),
        "{}",
        text(&out.stdout)
    );
}

/// Parameters made from halo2-base's `gen_srs` seed: `params inspect` says INSECURE (and its
/// JSON names the seed), `params verify` exits 1, and `params import` refuses them (1) unless
/// `--allow-test-setup`; the project's own fixtures (other seeds) verify.
#[test]
fn a_test_setup_is_called_insecure() {
    use keycodec_core::halo2_proofs::SerdeFormat;
    use rand_chacha::rand_core::SeedableRng;
    let dir = tempfile::tempdir().unwrap();
    let srs = dir.path().join("kzg_bn254_4.srs");
    let params =
        keycodec::KzgParams::setup(4, rand_chacha::ChaCha20Rng::from_seed(Default::default()));
    let mut bytes = Vec::new();
    params
        .write_custom(&mut bytes, SerdeFormat::RawBytes)
        .unwrap();
    std::fs::write(&srs, &bytes).unwrap();
    let name = srs.display().to_string();

    let out = keycodec(&["params", "inspect", &name]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).contains("INSECURE"),
        "{}",
        text(&out.stdout)
    );
    let out = keycodec(&["params", "inspect", "--json", &name]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(json["insecure_test_setup"]
        .as_str()
        .unwrap()
        .contains("gen_srs"));

    let out = keycodec(&["params", "verify", &name]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("INSECURE"),
        "{}",
        text(&out.stdout)
    );

    let container = dir.path().join("params.kc").display().to_string();
    let out = keycodec(&["params", "import", &name, &container]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("public seed"),
        "{}",
        text(&out.stderr)
    );
    let out = keycodec(&["params", "import", &name, &container, "--allow-test-setup"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = keycodec(&["params", "inspect", &container]);
    assert!(
        text(&out.stdout).contains("INSECURE"),
        "{}",
        text(&out.stdout)
    );

    let own = dir.path().join("own.kc");
    keycodec_rawbytes::RawBytesCodec::default()
        .save_params(&own, &lookup().params, &SaveOptions::default())
        .unwrap();
    let out = keycodec(&["params", "verify", own.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    assert!(!text(&out.stdout).contains("INSECURE"));
}

/// Temporary files left in `dir` (a download's, a save's).
fn temporary_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|entry| entry.file_name().to_string_lossy().ends_with(".tmp"))
                .count()
        })
        .unwrap_or(0)
}

/// `pull` and `fetch --manifest` through a server that answers every ranged GET oddly (a short
/// body, extra bytes, the whole object for a range, another `Content-Range`), and `push`
/// through one that fails every upload request: an error or the right bytes, the destination
/// and the cache as they were (no temporary file), no object pushed.
#[test]
fn pull_fetch_and_push_under_a_servers_odd_answers_keep_what_was_there() {
    use keycodec_tests::faulty::{Fault, FaultyProxy, Rule};
    let server = keycodec_tests::s3::server();
    let bucket = server.bucket("cli-odd");
    let dir = tempfile::tempdir().unwrap();
    let (path, digest) = saved(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    server.put_public(&bucket, "key.pk", &bytes);
    keycodec_rawbytes::RawBytesCodec::default()
        .save_params(
            &dir.path().join("kzg.params"),
            &lookup().params,
            &SaveOptions::default(),
        )
        .unwrap();
    type Case = (&'static str, fn() -> Fault);
    let cases: [Case; 4] = [
        ("a short body", || Fault::ShortBody),
        ("extra bytes", || Fault::ExtraBytes(1000)),
        ("200 for a ranged GET", || Fault::WholeObject),
        ("a wrong Content-Range", || Fault::ShiftContentRange(7)),
    ];
    for (name, fault) in cases {
        let proxy = FaultyProxy::start(server.addr);
        proxy.inject(Rule {
            method: "GET",
            target_contains: "key.pk",
            ranged: true,
            unconditional: false,
            skip: 0,
            times: usize::MAX,
            fault: fault(),
        });
        let url = keycodec_tests::s3::S3Server::public_url(proxy.addr, &bucket, "key.pk");
        let pulled = dir.path().join("pulled.pk");
        std::fs::write(&pulled, b"before").unwrap();
        let out = keycodec(&["pull", &url, pulled.to_str().unwrap()]);
        let after = std::fs::read(&pulled).unwrap();
        eprintln!("outcome: pull, {name}: exit {:?}", out.status.code());
        match out.status.code() {
            Some(0) => assert!(after == bytes, "{name}: pulled other bytes"),
            Some(1 | 4) => assert_eq!(after, b"before", "{name}"),
            other => panic!("{name}: exit {other:?}: {}", text(&out.stderr)),
        }
        assert_eq!(temporary_files(dir.path()), 0, "{name}");

        let manifest = serde_json::json!({
            "manifest": 1,
            "params": { "path": "kzg.params", "k": 6 },
            "keys": { "prover": {
                "kind": "proving",
                "url": url,
                "codec": "rkyv",
                "digest": digest.to_string(),
            } },
        });
        let manifest_path = dir.path().join("odd.json");
        std::fs::write(&manifest_path, manifest.to_string()).unwrap();
        let cache = dir.path().join(format!("cache-{}", proxy.addr.port()));
        let out = keycodec(&[
            "fetch",
            "--manifest",
            manifest_path.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
            "--json",
        ]);
        let cached = cache.join(format!("{digest}-rkyv.kc"));
        eprintln!(
            "outcome: fetch --manifest, {name}: exit {:?}, cached {}",
            out.status.code(),
            cached.exists()
        );
        match cached.exists() {
            true => assert!(std::fs::read(&cached).unwrap() == bytes, "{name}"),
            false => assert_ne!(out.status.code(), Some(0), "{name}"),
        }
        assert_eq!(temporary_files(&cache), 0, "{name}");
    }

    // Every upload request refused: no object appears.
    let proxy = FaultyProxy::start(server.addr);
    for method in ["PUT", "POST"] {
        proxy.inject(Rule {
            method,
            target_contains: "",
            ranged: false,
            unconditional: false,
            skip: 0,
            times: usize::MAX,
            fault: Fault::Status(403),
        });
    }
    let out = Command::new(env!("CARGO_BIN_EXE_keycodec"))
        .args(["push", &path, &format!("s3://{bucket}/pushed.pk")])
        .env("AWS_ENDPOINT", proxy.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "keycodec-test")
        .env("AWS_SECRET_ACCESS_KEY", "keycodec-test")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let check = Command::new(env!("CARGO_BIN_EXE_keycodec"))
        .args([
            "pull",
            &format!("s3://{bucket}/pushed.pk"),
            dir.path().join("check.pk").to_str().unwrap(),
        ])
        .env("AWS_ENDPOINT", server.endpoint())
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "keycodec-test")
        .env("AWS_SECRET_ACCESS_KEY", "keycodec-test")
        .env("AWS_REGION", "us-east-1")
        .output()
        .unwrap();
    assert_eq!(
        check.status.code(),
        Some(4),
        "no object: {}",
        text(&check.stderr)
    );
}

/// `convert` needs no circuit code: a recorded key to every backend, its digest kept, the
/// converted file the same key; a wrong pin and a container without a record are refused
/// (exit 1) and write nothing.
#[test]
fn convert_changes_the_backend_with_no_circuit_code() {
    use keycodec::halo2_proofs::plonk::ProvingKey;
    use keycodec::halo2curves::bn256::G1Affine;
    let dir = tempfile::tempdir().unwrap();
    let (path, digest) = saved(dir.path());
    // Every backend to every other: the rkyv file to each, then each to each.
    let converted = |codec: &str| dir.path().join(format!("converted.{codec}"));
    let pairs = ["rawbytes", "bincode", "compact", "rkyv"]
        .into_iter()
        .map(|to| (path.clone(), to))
        .chain(
            ["rawbytes", "bincode", "compact", "rkyv"]
                .into_iter()
                .flat_map(|from| {
                    ["rawbytes", "bincode", "compact", "rkyv"]
                        .into_iter()
                        .map(move |to| (from, to))
                })
                .map(|(from, to)| (converted(from).display().to_string(), to)),
        )
        .collect::<Vec<_>>();
    for (input, codec) in pairs {
        let out_path = dir.path().join(format!("next.{codec}"));
        let out = out_path.to_str().unwrap();
        let run = keycodec(&[
            "convert",
            &input,
            out,
            "--codec",
            codec,
            "--digest",
            &digest.to_string(),
            "--json",
        ]);
        assert_eq!(run.status.code(), Some(0), "{codec}: {}", text(&run.stdout));
        let json: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        assert_eq!(json["to"], codec);
        assert_eq!(json["digest"], digest.to_string());
        assert_eq!(json["digest_kept"], true);
        assert_eq!(keycodec::Backend::of_file(&out_path).unwrap().name(), codec);
        let loaded: ProvingKey<G1Affine> = keycodec::load_key::<LookupCircuit, _>(
            &out_path,
            (),
            &keycodec::KeyOptions {
                pin: Some(keycodec::KeyPin::Digest(digest)),
                ..keycodec::KeyOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            keycodec_testkit::pk_bytes(&loaded),
            keycodec_testkit::pk_bytes(&lookup().pk)
        );
        std::fs::rename(&out_path, converted(codec)).unwrap();
    }
    // Another key's digest: refused, nothing written.
    let other = dir.path().join("other.rkyv");
    let wrong = "00".repeat(32);
    let run = keycodec(&[
        "convert",
        &path,
        other.to_str().unwrap(),
        "--codec",
        "rkyv",
        "--digest",
        &wrong,
    ]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(!other.exists());
    // A container without a record (as earlier versions wrote them).
    let bare = dir.path().join("bare.pk");
    let bytes = keycodec_testkit::conformance::without_record(std::fs::read(&path).unwrap());
    std::fs::write(&bare, bytes).unwrap();
    let run = keycodec(&[
        "convert",
        bare.to_str().unwrap(),
        other.to_str().unwrap(),
        "--codec",
        "rkyv",
    ]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        text(&run.stderr).contains("no record"),
        "{}",
        text(&run.stderr)
    );
    assert!(!other.exists());
}

/// `verify-proof` checks a proof with the recorded verifying key's file, the parameters'
/// file, the proof and the instances, no circuit code: 0 when it verifies (with a warning
/// when the key is not pinned), 1 for a forged proof, other instances or another key.
#[test]
fn verify_proof_needs_no_circuit_code() {
    use keycodec::halo2curves::ff::PrimeField;
    let fixture = keycodec_testkit::standard_plonk();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    keycodec::save_key::<keycodec_testkit::StandardPlonk, _>(
        dir.path().join("verifier.vk"),
        fixture.vk(),
        (),
        &keycodec::KeyOptions::default(),
    )
    .unwrap();
    keycodec::save_params(
        dir.path().join("kzg.params"),
        &fixture.params,
        keycodec::Backend::RAWBYTES,
    )
    .unwrap();
    let proof = keycodec_testkit::proof(
        &fixture.params,
        &fixture.pk,
        &fixture.circuit,
        &fixture.instances,
        false,
    )
    .unwrap();
    std::fs::write(path("proof.bin"), &proof).unwrap();
    let hex = |value: &keycodec::halo2curves::bn256::Fr| {
        let repr = value.to_repr();
        let digits: String = repr.iter().rev().map(|b| format!("{b:02x}")).collect();
        format!("0x{digits}")
    };
    let instances: Vec<Vec<String>> = fixture
        .instances
        .iter()
        .map(|column| column.iter().map(hex).collect())
        .collect();
    std::fs::write(
        path("instances.json"),
        serde_json::to_vec(&instances).unwrap(),
    )
    .unwrap();
    let transcript = format!("{:?}", fixture.vk().transcript_repr());
    let run = |proof: &str, instances: &str, pin: &[&str]| {
        let mut args = vec![
            "verify-proof",
            "--vk",
            "VK",
            "--params",
            "PARAMS",
            "--proof",
            proof,
            "--instances",
            instances,
        ];
        let (vk, params) = (path("verifier.vk"), path("kzg.params"));
        args[2] = &vk;
        args[4] = &params;
        args.extend_from_slice(pin);
        keycodec(&args)
    };
    let ok = run(
        &path("proof.bin"),
        &path("instances.json"),
        &["--transcript", &transcript],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    assert!(
        text(&ok.stdout).contains("verifies"),
        "{}",
        text(&ok.stdout)
    );
    assert!(text(&ok.stdout).contains("(pinned)"));
    // Unpinned: verified, said loudly.
    let unpinned = run(&path("proof.bin"), &path("instances.json"), &[]);
    assert_eq!(unpinned.status.code(), Some(0));
    assert!(
        text(&unpinned.stderr).contains("WARNING"),
        "{}",
        text(&unpinned.stderr)
    );
    // A forged proof, other instances, another key: 1.
    let mut forged = proof.clone();
    forged[proof.len() / 2] ^= 1;
    std::fs::write(path("forged.bin"), &forged).unwrap();
    let refused = run(
        &path("forged.bin"),
        &path("instances.json"),
        &["--transcript", &transcript],
    );
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused.stderr));
    let mut other = instances.clone();
    other[0][0] = "0x1234".into();
    std::fs::write(path("other.json"), serde_json::to_vec(&other).unwrap()).unwrap();
    let refused = run(
        &path("proof.bin"),
        &path("other.json"),
        &["--transcript", &transcript],
    );
    assert_eq!(refused.status.code(), Some(1));
    let another = "00".repeat(32);
    let refused = run(
        &path("proof.bin"),
        &path("instances.json"),
        &["--digest", &another, "--json"],
    );
    assert_eq!(refused.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(json["ok"], false);
}

/// A proof of each test circuit, verified by the command alone (the key's file, the
/// parameters' file, the proof, the instances), pinned by the key's digest.
#[test]
fn verify_proof_of_every_test_circuit() {
    use keycodec::halo2_proofs::plonk::{Circuit, ProvingKey};
    use keycodec::halo2curves::bn256::{Fr, G1Affine};
    use keycodec::halo2curves::ff::PrimeField;
    fn verified<C: Circuit<Fr, Params: keycodec::RecordableParams>>(
        name: &str,
        params: &keycodec::KzgParams,
        pk: &ProvingKey<G1Affine>,
        circuit: &C,
        circuit_params: C::Params,
        instances: &[Vec<Fr>],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = |file: &str| dir.path().join(file).display().to_string();
        let digest = keycodec::save_key::<C, _>(
            dir.path().join("verifier.vk"),
            pk.get_vk(),
            circuit_params,
            &keycodec::KeyOptions::default(),
        )
        .unwrap();
        keycodec::save_params(
            dir.path().join("kzg.params"),
            params,
            keycodec::Backend::RAWBYTES,
        )
        .unwrap();
        let proof = keycodec_testkit::proof(params, pk, circuit, instances, false).unwrap();
        std::fs::write(path("proof.bin"), proof).unwrap();
        let columns: Vec<Vec<String>> = instances
            .iter()
            .map(|column| {
                column
                    .iter()
                    .map(|value| {
                        let digits: String = value
                            .to_repr()
                            .iter()
                            .rev()
                            .map(|b| format!("{b:02x}"))
                            .collect();
                        format!("0x{digits}")
                    })
                    .collect()
            })
            .collect();
        std::fs::write(
            path("instances.json"),
            serde_json::to_vec(&columns).unwrap(),
        )
        .unwrap();
        let out = keycodec(&[
            "verify-proof",
            "--vk",
            &path("verifier.vk"),
            "--params",
            &path("kzg.params"),
            "--proof",
            &path("proof.bin"),
            "--instances",
            &path("instances.json"),
            "--digest",
            &digest.to_string(),
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out.stdout));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["verified"], true, "{name}");
        assert_eq!(json["pinned"], true, "{name}");
    }
    let plonk = keycodec_testkit::standard_plonk();
    verified(
        "StandardPlonk",
        &plonk.params,
        &plonk.pk,
        &plonk.circuit,
        (),
        &plonk.instances,
    );
    let lookups = lookup();
    verified(
        "LookupCircuit (compressed selectors)",
        &lookups.params,
        &lookups.pk,
        &lookups.circuit,
        (),
        &lookups.instances,
    );
    let lib = keycodec_testkit::halo2_lib();
    verified::<keycodec_testkit::halo2_lib::Halo2LibCircuit>(
        "halo2-lib",
        &lib.params,
        &lib.pk,
        &lib.prover(),
        lib.config.clone(),
        &[],
    );
}
