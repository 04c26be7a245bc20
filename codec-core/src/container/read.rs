//! Reading a container: the header checked against the request and the bytes there, the
//! payload decoded and checksummed, the record section checked, the pins.

use super::*;

/// Reads one container: checks the header (before anything is decoded: codec, wire mode,
/// kind, `k`, circuit, declared length against the real one where the source has one),
/// decodes the payload while hashing exactly the bytes handed to the decoder (in memory,
/// where they cannot change, before decoding them), and compares the checksum before
/// returning the key. An item pinned by digest is proven by the pin instead: its checksum
/// is computed only to explain a failed load.
///
/// The key's digest is computed (its polynomials hashed as they are read) when `digest` is
/// set or the options pin one, and then checked against the pin and the digest the header
/// records.
///
/// `cs` is the circuit's constraint system for keys (its fingerprint must be the header's),
/// `None` for parameters (the header's fingerprint must be [`Fingerprint::NONE`]).
pub fn read<K: KeyCodec + ?Sized>(
    codec: &K,
    request: Request,
    cs: Option<ConstraintSystem<Fr>>,
    input: Input<'_>,
    options: &LoadOptions,
) -> Result<Decoded> {
    let Request {
        kind,
        from_proving_key,
        digest,
    } = request;
    // Whether the payload can be read again cheaply to explain a failure: bytes in memory
    // and a local file, not a stream or an object whose requests cost a round trip.
    let rereadable = match &input {
        Input::Memory(_) => true,
        Input::Stream(_) => false,
        Input::At { source, .. } => !source.costly_requests(),
    };
    // Bytes in memory cannot change while they are read: their checksum is verified before
    // decoding, which refuses a damaged payload without decoding it. Every other source is
    // hashed as the decoder reads it.
    let (mut reader, total, memory) = match input {
        Input::Memory(bytes) => (
            PayloadReader::from_slice(bytes),
            Some(bytes.len() as u64),
            Some(bytes),
        ),
        Input::Stream(stream) => (PayloadReader::new(stream, u64::MAX, false), None, None),
        Input::At {
            source,
            len,
            buffer,
        } => (PayloadReader::at(source, 0, len, buffer), Some(len), None),
    };
    let (header, header_len) = read_header(&mut reader, total)?;
    let fingerprint = cs.as_ref().map_or(Fingerprint::NONE, fingerprint_of);
    let prefix =
        from_proving_key && kind == ArtifactKind::Verifying && header.kind == ArtifactKind::Proving;
    let expected_kind = if prefix { ArtifactKind::Proving } else { kind };
    let mode = check_header(codec, expected_kind, &header, fingerprint, options)?;
    if let Some(total) = total {
        check_length(&header, total - header_len as u64)?;
    }
    let verify = options.checksum == Checksum::Verify;
    // An item pinned by its digest, from memory or a local file: the digest covers every
    // value the item holds (a key's verifying-key parts and every polynomial; parameters'
    // `k`, both point vectors and both G2 points; what the circuit's code gives is checked
    // by the fingerprint), so the pin's check proves all the checksum would about the item
    // (not about bytes no value comes from). The checksum is then computed only when the
    // load fails as damage would, to name it: a decode error, leftover bytes, or a digest
    // that is not the one the header records (so only a header that records one). A
    // stream, or an object whose bytes may be kept (a download cached), is hashed as always.
    let pin_covers_payload =
        options.expected_digest.is_some() && rereadable && header.digest.is_some();
    let checksum_first = verify && !pin_covers_payload;
    if let (true, Some(bytes)) = (checksum_first, memory) {
        let payload = usize::try_from(header.payload_len)
            .ok()
            .and_then(|len| bytes.get(header_len..header_len.checked_add(len)?))
            .unwrap_or_default();
        verify_checksum(&header, xxh3_64(payload))?;
    }
    let hash_while_reading = checksum_first && memory.is_none();
    let mut payload = reader.narrow(header.payload_len, total.is_some(), hash_while_reading)?;
    let context = DecodeContext {
        kind,
        payload_kind: header.kind,
        mode,
        k: Some(header.k),
        validation: codec.effective_validation(mode, options.validation),
        limits: options.limits,
        cs: cs.unwrap_or_default(),
    };
    let digest = digest || options.expected_digest.is_some();
    if digest {
        payload.record_polynomials();
    }
    let decoded = decode_item(codec, &mut payload, &context, options);
    // A pin authenticates a verifying key read from a proving key's container by itself: the
    // rest of it need not be read.
    let pinned = options.expected_digest.is_some() || options.expected_transcript.is_some();
    let pin_stands_in = if prefix {
        pinned && rereadable
    } else {
        pin_covers_payload
    };
    let checking = if verify && pin_stands_in {
        Checking::OnFailure
    } else {
        Checking::verified_if(hash_while_reading && !(prefix && pinned))
    };
    let item = if prefix {
        settle_prefix(decoded, &mut payload, &header, checking)?
    } else {
        settle(decoded, &mut payload, &header, checking)?
    };
    // The record section (its own checksum) is checked whenever checksums are, also where
    // a pin stands in for the payload's.
    if verify && !(prefix && pinned) && header.record_len > 0 {
        // Bounded: a stream's length is not known.
        if header.record_len as usize > crate::record::MAX_RECORD_BYTES {
            return Err(Error::Malformed(format!(
                "the circuit's record is {} bytes (at most {})",
                header.record_len,
                crate::record::MAX_RECORD_BYTES
            )));
        }
        let end = (header_len as u64).saturating_add(header.payload_len);
        let section = payload.read_after(header.record_section_len(), memory, end)?;
        crate::record::record_of_section(&section)?;
    }
    if item.kind() != kind {
        return Err(Error::Internal(format!(
            "the {} decoder returned {} for {kind}",
            codec.name(),
            item.kind()
        )));
    }
    // A prefix's digest is the verifying key's; the header records the proving key's.
    let recorded = if prefix { None } else { header.digest };
    let digest = match digest
        .then(|| check_digest(&item, payload.recorded_polynomials(), recorded, options))
        .transpose()
    {
        // Not the digest its own header records: damage, named by the checksum where it
        // stood in for it. (Another item's intact file is a `DigestMismatch`: nothing to
        // read again.)
        Err(err @ Error::RecordedDigestMismatch { .. }) if checking == Checking::OnFailure => {
            explain(&mut payload, &header, true)?;
            Err(err)
        }
        checked => checked,
    }?;
    // After the digest: where both are pinned, damage is named as such, not as another key.
    if let Item::Key(key) = &item {
        check_transcript(key, options)?;
    }
    Ok(Decoded { item, digest })
}

/// Reads the header from the reader's start: its first bytes say how long it is (a
/// version 1, 2 or 3 header). `total` is the source's length, when it has one.
fn read_header(reader: &mut PayloadReader<'_>, total: Option<u64>) -> Result<(Header, usize)> {
    let mut header_bytes = [0u8; HEADER_LEN];
    let (prefix, rest) = header_bytes.split_at_mut(PREFIX_LEN);
    reader.read_exact(prefix, "container header")?;
    let header_len = Header::len_of(prefix).map_err(|err| {
        // Fewer bytes than any header: too short to say more.
        if total.is_some_and(|total| total < HEADER_LEN as u64) {
            Error::Truncated {
                context: "container header",
            }
        } else {
            err
        }
    })?;
    let rest = rest.get_mut(..header_len - PREFIX_LEN).unwrap_or_default();
    reader.read_exact(rest, "container header")?;
    Ok((Header::from_bytes(&header_bytes)?, header_len))
}

/// The backend's decode of the payload as the context's kind (parameters made from a public
/// seed refused unless the options allow them).
fn decode_item<K: KeyCodec + ?Sized>(
    codec: &K,
    payload: &mut PayloadReader<'_>,
    context: &DecodeContext,
    options: &LoadOptions,
) -> Result<Item> {
    match context.kind {
        ArtifactKind::Params => {
            let params = codec.decode_params(payload, context)?;
            crate::test_setup::refuse_test_setup(&params, options.test_setup)?;
            Ok(Item::Params(params))
        }
        ArtifactKind::Proving | ArtifactKind::Verifying => {
            codec.decode(payload, context).map(Item::Key)
        }
    }
}

/// Checks the verifying key's `transcript_repr()` against the pin, if any.
fn check_transcript(key: &Key, options: &LoadOptions) -> Result<()> {
    let Some(expected) = options.expected_transcript else {
        return Ok(());
    };
    let found = match key {
        Key::Proving(pk) => pk.get_vk().transcript_repr(),
        Key::Verifying(vk) => vk.transcript_repr(),
    };
    if found != expected {
        return Err(Error::TranscriptMismatch { expected, found });
    }
    Ok(())
}

/// The digest, checked against what the header records, then against the pin.
fn check_digest(
    item: &Item,
    polynomials: Option<Vec<[u8; 32]>>,
    recorded: Option<KeyDigest>,
    options: &LoadOptions,
) -> Result<KeyDigest> {
    let found = match item {
        Item::Key(key) => digest::of_decoded(key, polynomials)?,
        Item::Params(params) => digest::of_params(params, polynomials)?,
    };
    // The header's first: an item that is not what its own file records is damaged, whatever
    // the pin.
    if let Some(recorded) = recorded {
        if found != recorded {
            return Err(Error::RecordedDigestMismatch { recorded, found });
        }
    }
    if let Some(expected) = options.expected_digest {
        if found != expected {
            return Err(Error::DigestMismatch {
                kind: item.kind(),
                path: None,
                expected,
                found,
            });
        }
    }
    Ok(found)
}

/// What a load does with the payload's checksum as it settles the decoder's outcome.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Checking {
    /// Hashed as the payload is read, compared before the item is returned; a failure is
    /// explained by it.
    Verified,
    /// Computed afresh only when the load fails, to report a damaged payload in preference.
    OnFailure,
    /// Not computed: skipped by the options, or verified before the decode.
    Off,
}

impl Checking {
    /// `Verified` when `hashed`, `Off` otherwise.
    fn verified_if(hashed: bool) -> Self {
        if hashed {
            Checking::Verified
        } else {
            Checking::Off
        }
    }
}

/// Turns a decoder's outcome into the load's: a key only when every byte of the payload was
/// decoded and (when the reader hashed them) their checksum matches; after a decode error
/// or a leftover payload, corruption (a checksum mismatch) is reported in preference, since
/// it explains both.
fn settle<T>(
    decoded: Result<T>,
    payload: &mut PayloadReader<'_>,
    header: &Header,
    checking: Checking,
) -> Result<T> {
    let explaining = checking != Checking::Off;
    let value = explained(decoded, payload, header, explaining)?;
    let left = payload.remaining();
    if left > 0 {
        explain(payload, header, explaining)?;
        return Err(Error::TrailingBytes { count: left });
    }
    if checking == Checking::Verified {
        let found = payload.digest().ok_or_else(|| {
            Error::Internal("the payload was decoded but its checksum was lost".into())
        })?;
        verify_checksum(header, found)?;
    }
    Ok(value)
}

/// As [`settle`], for a verifying key read from a proving key's container: the rest of the
/// payload (the polynomials) is left unread, or, when `checking` is `Verified`, read and
/// hashed without being decoded, so that the checksum covers the whole payload as always.
fn settle_prefix<T>(
    decoded: Result<T>,
    payload: &mut PayloadReader<'_>,
    header: &Header,
    checking: Checking,
) -> Result<T> {
    let value = explained(decoded, payload, header, checking != Checking::Off)?;
    if checking == Checking::Verified {
        let found = payload.digest_afresh_from_here().ok_or(Error::Truncated {
            context: "the proving key's polynomials",
        })?;
        verify_checksum(header, found)?;
    }
    Ok(value)
}

/// A decoder's outcome, with a decode error reported as the checksum mismatch that explains
/// it when there is one. An I/O failure of the source says nothing about the bytes.
fn explained<T>(
    decoded: Result<T>,
    payload: &mut PayloadReader<'_>,
    header: &Header,
    verify: bool,
) -> Result<T> {
    match decoded {
        Err(err @ Error::Io { .. }) => Err(err),
        Err(err) => {
            explain(payload, header, verify)?;
            Err(err)
        }
        ok => ok,
    }
}

/// Fails with the checksum mismatch, when verifying and the payload's checksum (hashed
/// afresh) is not the recorded one.
fn explain(payload: &mut PayloadReader<'_>, header: &Header, verify: bool) -> Result<()> {
    if !verify {
        return Ok(());
    }
    match payload.digest_afresh() {
        Some(found) => verify_checksum(header, found),
        None => Ok(()),
    }
}

/// Compares the declared payload length with the bytes actually after the header.
fn check_length(header: &Header, available: u64) -> Result<()> {
    // The payload, then the record section (version 4) when there is one.
    let expected = header
        .payload_len
        .saturating_add(header.record_section_len());
    if available < expected {
        return Err(Error::LengthMismatch {
            declared: header.payload_len,
            available: available.saturating_sub(header.record_section_len()),
        });
    }
    if available > expected {
        return Err(Error::TrailingBytes {
            count: available - expected,
        });
    }
    Ok(())
}

/// Checks what the header says against what the caller expects; returns the codec's own
/// wire mode for the header's mode byte.
fn check_header<K: KeyCodec + ?Sized>(
    codec: &K,
    kind: ArtifactKind,
    header: &Header,
    expected: Fingerprint,
    options: &LoadOptions,
) -> Result<WireMode> {
    if !options.codecs.contains(header.codec) {
        return Err(Error::CodecNotAllowed {
            found: header.codec,
        });
    }
    if header.codec != codec.id() {
        return Err(Error::CodecMismatch {
            expected: codec.id(),
            expected_name: codec.name(),
            found: header.codec,
        });
    }
    let mode = codec
        .wire_modes()
        .iter()
        .find(|mode| mode.byte() == header.mode)
        .copied()
        .ok_or(Error::UnsupportedMode {
            codec: codec.name(),
            mode: header.mode,
        })?;
    if header.kind != kind {
        return Err(Error::KindMismatch {
            expected: kind,
            found: header.kind,
        });
    }
    if let Some(expected) = options.expected_k {
        if header.k != expected {
            return Err(Error::KMismatch {
                expected,
                found: header.k,
            });
        }
    }
    check_k(header.k, &options.limits)?;
    if header.fingerprint != expected {
        let this_build = crate::header::WrittenBy::this_build();
        return Err(match header.written_by {
            // Not proven another circuit: the fingerprint hashes halo2's Debug output.
            Some(writer) if writer.halo2() != this_build.halo2() => {
                Error::CircuitMismatchAcrossHalo2 {
                    expected,
                    found: header.fingerprint,
                    written_with: writer.halo2().to_owned(),
                    read_with: crate::header::HALO2_CRATE,
                }
            }
            _ => Error::CircuitMismatch {
                expected,
                found: header.fingerprint,
            },
        });
    }
    if header.payload_len > options.limits.max_payload_bytes {
        return Err(Error::LimitExceeded {
            what: "payload length",
            requested: header.payload_len,
            limit: options.limits.max_payload_bytes,
        });
    }
    Ok(mode)
}

fn verify_checksum(header: &Header, found: u64) -> Result<()> {
    if found != header.payload_checksum {
        return Err(Error::PayloadChecksum {
            expected: header.payload_checksum,
            found,
        });
    }
    Ok(())
}
