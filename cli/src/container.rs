//! One container's commands: `inspect`'s report (text or JSON), `verify`'s checks and
//! `digest`'s answer.

use keycodec::KeyDigest;
use serde_json::json;

use crate::check::{Failure, Inspection, PayloadState};

/// `inspect`: the header and the payload's state, whatever they are.
pub(crate) fn report(found: &Inspection, json: bool) {
    let header = &found.header;
    let codec_name = found.backend.map(|b| b.name());
    if json {
        println!("{}", report_value(found));
        return;
    }
    println!(
        "{}: keycodec container, version {}, {} bytes",
        found.path.display(),
        found.version,
        found.file_bytes
    );
    println!(
        "  codec         {} (id {}), mode {} ({})",
        codec_name.unwrap_or("unknown"),
        header.codec.byte(),
        found.mode.unwrap_or("unknown"),
        header.mode
    );
    println!("  key           {}, BN254, k = {}", header.kind, header.k);
    println!("  circuit       fingerprint {}", header.fingerprint);
    println!(
        "  payload       {} bytes, XXH3-64 {:#018x}: {}",
        header.payload_len,
        header.payload_checksum,
        match found.payload {
            PayloadState::Intact => "intact".to_owned(),
            _ => found.problem().unwrap_or_default(),
        }
    );
    match &found.record {
        Some(Ok(c)) => {
            println!(
                "  circuit       recorded: {} advice columns in {} phase(s), {} fixed, {} instance; {} selectors, {} challenges",
                c.advice, c.phases, c.fixed, c.instance, c.selectors, c.challenges
            );
            println!(
                "                {} gates, {} lookups, {} equality columns, degree {}, {} usable rows of {}",
                c.gates,
                c.lookups,
                c.equality,
                c.degree,
                c.usable_rows,
                1u64.checked_shl(header.k).unwrap_or(0)
            );
            // `()`, most circuits' parameters, records as null: nothing to show.
            if let Some(params) = c.params.as_ref().filter(|params| !params.is_null()) {
                println!("                parameters {params}");
            }
        }
        Some(Err(why)) => println!("  circuit       record unreadable: {why}"),
        None if header.kind == keycodec::ArtifactKind::Params => {}
        None => println!("  circuit       not recorded (load the key with its circuit type)"),
    }
    match header.digest {
        Some(digest) => println!("  key digest    {digest} (recorded)"),
        None => println!("  key digest    not recorded (a version 1 container)"),
    }
    match header.written_by {
        Some(writer) => println!(
            "  written by    {} with keycodec {}",
            writer.halo2(),
            writer.keycodec()
        ),
        None => println!(
            "  written by    not recorded (a version {} container)",
            found.version
        ),
    }
}

/// `inspect`'s JSON document.
pub(crate) fn report_value(found: &Inspection) -> serde_json::Value {
    let header = &found.header;
    json!({
        "ok": found.problem().is_none(),
        "file": found.path.display().to_string(),
        "file_bytes": found.file_bytes,
        "container_version": found.version,
        "codec": { "id": header.codec.byte(), "name": found.backend.map(|b| b.name()) },
        "mode": { "byte": header.mode, "name": found.mode },
        "kind": header.kind.to_string(),
        "curve": "BN254",
        "k": header.k,
        "circuit_fingerprint": header.fingerprint.to_string(),
        "payload_bytes": header.payload_len,
        "payload_checksum": format!("{:#018x}", header.payload_checksum),
        "payload": payload_json(found.payload),
        "key_digest": header.digest.map(|d| d.to_string()),
        "circuit": match &found.record {
            Some(Ok(c)) => json!({
                "recorded": true,
                "advice_columns": c.advice,
                "phases": c.phases,
                "fixed_columns": c.fixed,
                "instance_columns": c.instance,
                "selectors": c.selectors,
                "challenges": c.challenges,
                "gates": c.gates,
                "lookups": c.lookups,
                "equality_columns": c.equality,
                "degree": c.degree,
                "usable_rows": c.usable_rows,
                "params": c.params,
            }),
            Some(Err(why)) => json!({ "recorded": true, "error": why }),
            None => json!({ "recorded": false }),
        },
        "written_by": header.written_by.map(|writer| json!({
            "halo2": writer.halo2(),
            "keycodec": writer.keycodec(),
        })),
    })
}

fn payload_json(state: PayloadState) -> serde_json::Value {
    match state {
        PayloadState::Intact => json!({ "state": "intact" }),
        PayloadState::WrongLength { declared, present } => {
            json!({ "state": "wrong length", "declared": declared, "present": present })
        }
        PayloadState::Corrupt { found } => {
            json!({ "state": "corrupt", "found": format!("{found:#018x}") })
        }
    }
}

/// `verify`: every check, failing on the first that does not pass.
pub(crate) fn verify(
    found: &Inspection,
    expected: Option<KeyDigest>,
    json: bool,
) -> Result<(), Failure> {
    let name = found.path.display();
    if let Some(problem) = found.problem() {
        return Err(Failure::Check(format!("{name}: {problem}")));
    }
    if let Some(expected) = expected {
        match found.digest() {
            None => {
                return Err(Failure::Check(format!(
                    "{name}: records no key digest (a version 1 container): save it again to record one"
                )))
            }
            Some(recorded) if recorded != expected => {
                return Err(Failure::Check(format!(
                    "{name}: its {}'s digest is {recorded}, not the pinned {expected}",
                    found.header.kind
                )))
            }
            Some(_) => {}
        }
    }
    if json {
        println!(
            "{}",
            json!({
                "ok": true,
                "file": name.to_string(),
                "key_digest": found.digest().map(|d| d.to_string()),
                "digest_checked": expected.is_some(),
            })
        );
    } else {
        match expected {
            Some(digest) => println!("{name}: intact, records key digest {digest}"),
            None => println!("{name}: intact"),
        }
    }
    Ok(())
}

/// `digest`: the recorded digest of an intact container.
pub(crate) fn digest(found: &Inspection, json: bool) -> Result<(), Failure> {
    let name = found.path.display();
    if let Some(problem) = found.problem() {
        return Err(Failure::Check(format!("{name}: {problem}")));
    }
    let digest = found.digest().ok_or_else(|| {
        Failure::Check(format!(
            "{name}: records no key digest (a version 1 container): save it again to record one"
        ))
    })?;
    if json {
        println!(
            "{}",
            json!({ "file": name.to_string(), "key_digest": digest.to_string() })
        );
    } else {
        println!("{digest}");
    }
    Ok(())
}
