//! `convert`: a key whose container records its circuit, to another backend, with no circuit
//! code: loaded with every value checked, saved atomically, its digest kept.

use std::path::Path;
use std::time::Instant;

use keycodec::halo2_proofs::plonk::{ProvingKey, VerifyingKey};
use keycodec::halo2curves::bn256::G1Affine;
use keycodec::{
    load_key, read_record, save_key, ArtifactKind, Backend, CircuitRecord, Key, KeyDigest,
    KeyOptions, KeyPin, Recorded,
};
use serde_json::json;

use crate::check::Failure;
use crate::params::{failure, spinner};

/// Converts the key in `input` to `codec` at `output`; `digest`, when given, is the key's
/// pin (checked on the load, as a record authenticates nothing).
pub(crate) fn run(
    input: &Path,
    output: &Path,
    codec: Backend,
    digest: Option<KeyDigest>,
    json: bool,
) -> Result<(), Failure> {
    let file = std::fs::File::open(input)
        .map_err(|err| Failure::Io(format!("could not open {}: {err}", input.display())))?;
    let (header, _) = keycodec_core::header::read_header(&file)
        .map_err(|err| Failure::Check(format!("{}: {err}", input.display())))?;
    drop(file);
    let from = Backend::of_id(header.codec).map_or("unknown", Backend::name);
    let record = read_record(input).map_err(failure)?;
    if digest.is_none() && !json {
        eprintln!(
            "keycodec: no --digest: the key is checked value by value, but nothing says it is \
             the key you expect (its record authenticates nothing)"
        );
    }
    let bar = spinner(format!("converting {} to {codec}", input.display()));
    let started = Instant::now();
    let converted = match header.kind {
        ArtifactKind::Proving => {
            convert::<ProvingKey<G1Affine>>(input, output, codec, digest, record)
        }
        ArtifactKind::Verifying => {
            convert::<VerifyingKey<G1Affine>>(input, output, codec, digest, record)
        }
        ArtifactKind::Params => Err(Failure::Usage(format!(
            "{} holds KZG parameters: use `keycodec params export` or `params import`",
            input.display()
        ))),
    };
    bar.finish_and_clear();
    let (before, after) = converted?;
    let seconds = started.elapsed().as_secs_f64();
    if json {
        println!(
            "{}",
            json!({
                "ok": true,
                "input": input.display().to_string(),
                "output": output.display().to_string(),
                "from": from,
                "to": codec.name(),
                "kind": header.kind.to_string(),
                "k": header.k,
                "digest": after.to_string(),
                "digest_kept": before == after,
                "pinned": digest.is_some(),
                "seconds": seconds,
            })
        );
    } else {
        println!(
            "{} ({from}) -> {} ({codec}): {}, k = {}, digest {after} (kept), {seconds:.1} s",
            input.display(),
            output.display(),
            header.kind,
            header.k
        );
    }
    Ok(())
}

/// Loads the key of kind `K` (checked, pinned) with its record and saves it with `codec`:
/// its digest before and after.
fn convert<K: Key>(
    input: &Path,
    output: &Path,
    codec: Backend,
    digest: Option<KeyDigest>,
    record: CircuitRecord,
) -> Result<(KeyDigest, KeyDigest), Failure> {
    let load = KeyOptions {
        pin: digest.map(KeyPin::Digest),
        ..KeyOptions::default()
    };
    let key: K = load_key::<Recorded, K>(input, record.clone(), &load).map_err(failure)?;
    let before = key.digest().map_err(failure)?;
    let save = KeyOptions {
        backend: Some(codec),
        pin: Some(KeyPin::Digest(before)),
        ..KeyOptions::default()
    };
    let after = save_key::<Recorded, K>(output, &key, record, &save).map_err(failure)?;
    if after != before {
        return Err(Failure::Check(format!(
            "{}: the converted key's digest {after} is not the key's {before}",
            output.display()
        )));
    }
    Ok((before, after))
}
