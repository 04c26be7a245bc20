//! `verify-proof`: a proof checked with a recorded verifying key, its parameters and its
//! instances, no circuit code.
//!
//! The instances file is JSON: one array per instance column, each value a string,
//! hexadecimal with `0x` (`"0x2a"`, the number as written, most significant digit first; below
//! the scalar field's modulus) or decimal (`"42"`, taken modulo it). `[]` or no file: no
//! instance columns.

use std::path::Path;

use keycodec::halo2_proofs::plonk::VerifyingKey;
use keycodec::halo2curves::bn256::{Fr, G1Affine};
use keycodec::halo2curves::ff::PrimeField;
use keycodec::{
    load_key, open_params, read_record, KeyDigest, KeyOptions, KeyPin, ParamsOptions,
    ProofVerifier, Recorded, Scheme,
};
use serde_json::json;

use crate::check::Failure;
use crate::params::failure;

/// What `verify-proof` is asked.
pub(crate) struct Request<'a> {
    pub(crate) vk: &'a Path,
    pub(crate) params: &'a Path,
    pub(crate) proof: &'a Path,
    pub(crate) instances: Option<&'a Path>,
    pub(crate) pin: Option<KeyPin>,
    pub(crate) scheme: Scheme,
    pub(crate) json: bool,
}

pub(crate) fn run(request: &Request<'_>) -> Result<(), Failure> {
    let read = |path: &Path| {
        std::fs::read(path)
            .map_err(|err| Failure::Io(format!("could not read {}: {err}", path.display())))
    };
    let proof = read(request.proof)?;
    let instances = match request.instances {
        Some(path) => parse_instances(&read(path)?)
            .map_err(|why| Failure::Usage(format!("{}: {why}", path.display())))?,
        None => Vec::new(),
    };
    let record = read_record(request.vk).map_err(failure)?;
    let options = KeyOptions {
        pin: request.pin,
        ..KeyOptions::default()
    };
    let vk: VerifyingKey<G1Affine> =
        load_key::<Recorded, _>(request.vk, record, &options).map_err(failure)?;
    if request.pin.is_none() && !request.json {
        eprintln!(
            "keycodec: WARNING: no --digest or --transcript: the verifying key is not pinned. \
             Its recorded circuit authenticates nothing (an edited gate list can make a forged \
             proof verify): pin the key you deploy."
        );
    }
    let k = vk.get_domain().k();
    let params = open_params(
        request.params,
        &ParamsOptions {
            k: Some(k),
            ..ParamsOptions::default()
        },
    )
    .map_err(failure)?;
    let digest = KeyDigest::of_vk(&vk).map_err(failure)?;
    let transcript = format!("{:?}", vk.transcript_repr());
    let verifier = ProofVerifier::new(vk, params, request.scheme).map_err(failure)?;
    let verified = verifier.verify(&proof, &instances);
    let pinned = request.pin.is_some();
    match (&verified, request.json) {
        (Ok(()), true) => println!(
            "{}",
            json!({
                "ok": true,
                "verified": true,
                "pinned": pinned,
                "vk_digest": digest.to_string(),
                "transcript": transcript,
                "k": k,
                "instance_columns": instances.len(),
            })
        ),
        (Ok(()), false) => println!(
            "{}: the proof verifies ({:?}, k = {k}, {} instance columns), with the verifying key {digest}{}",
            request.proof.display(),
            request.scheme,
            instances.len(),
            if pinned { " (pinned)" } else { " (NOT pinned)" }
        ),
        (Err(_), _) => {}
    }
    verified.map_err(|err| Failure::Check(format!("{}: {err}", request.proof.display())))
}

/// The instances in a JSON document (see the module docs).
fn parse_instances(json: &[u8]) -> Result<Vec<Vec<Fr>>, String> {
    let columns: Vec<Vec<String>> = serde_json::from_slice(json)
        .map_err(|err| format!("not a JSON array of arrays of strings: {err}"))?;
    columns
        .iter()
        .map(|column| column.iter().map(|value| scalar(value)).collect())
        .collect()
}

/// A scalar written in decimal or in `0x` hexadecimal.
fn scalar(text: &str) -> Result<Fr, String> {
    let bad = || format!("`{text}` is not a scalar below the field's modulus");
    if let Some(hex) = text.strip_prefix("0x") {
        if hex.is_empty() || hex.len() > 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        let padded = format!("{hex:0>64}");
        let mut repr = [0u8; 32];
        for (i, byte) in repr.iter_mut().rev().enumerate() {
            let pair = padded.get(2 * i..2 * i + 2).ok_or_else(bad)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Option::from(Fr::from_repr(repr)).ok_or_else(bad)
    } else {
        if text.is_empty() || text.len() > 78 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        Fr::from_str_vartime(text).ok_or_else(bad)
    }
}

/// The pin `verify-proof` was given, if any.
pub(crate) fn pin(
    digest: Option<KeyDigest>,
    transcript: Option<&str>,
) -> Result<Option<KeyPin>, Failure> {
    match (digest, transcript) {
        (Some(digest), None) => Ok(Some(KeyPin::Digest(digest))),
        (None, Some(text)) => scalar(text)
            .map(|t| Some(KeyPin::Transcript(t)))
            .map_err(|why| Failure::Usage(format!("--transcript: {why}"))),
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(Failure::Usage(
            "give one of --digest and --transcript".into(),
        )),
    }
}
