//! The small identifiers a container header records: which codec wrote the payload and in
//! which of its wire modes, which kind of key it holds, and which circuit it belongs to.

use std::fmt;
use std::str::FromStr;

/// Identifies the backend that wrote a payload: the byte recorded in the container header.
///
/// The container format's registry ([`CodecId::REGISTRY`], `docs/format.md`) is the one list
/// of ids and names: each backend crate's `ID` is its constant here (`CodecId::RAWBYTES`...),
/// and the facade's backend list takes its ids from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CodecId(u8);

impl CodecId {
    /// The id stored as `byte`.
    pub const fn new(byte: u8) -> Self {
        CodecId(byte)
    }

    /// The byte stored in the header.
    pub const fn byte(self) -> u8 {
        self.0
    }

    /// halo2's own layouts (`codec-rawbytes`).
    pub const RAWBYTES: CodecId = CodecId(1);
    /// serde + bincode 1.3.3 (`codec-bincode`).
    pub const BINCODE: CodecId = CodecId(2);
    /// rkyv archives (`codec-rkyv`).
    pub const RKYV: CodecId = CodecId(3);
    /// Only what cannot be recomputed (`codec-compact`).
    pub const COMPACT: CodecId = CodecId(4);

    /// Every registered id and the backend name it stands for: the one list.
    pub const REGISTRY: [(CodecId, &'static str); 4] = [
        (CodecId::RAWBYTES, "rawbytes"),
        (CodecId::BINCODE, "bincode"),
        (CodecId::RKYV, "rkyv"),
        (CodecId::COMPACT, "compact"),
    ];

    /// The backend the container format registers for this id ([`CodecId::REGISTRY`]):
    /// what an error names, so that a user reads "rkyv" rather than a number. `None` for an
    /// id no backend has registered.
    pub const fn registered_name(self) -> Option<&'static str> {
        let mut rest: &[(CodecId, &'static str)] = &CodecId::REGISTRY;
        while let [(id, name), tail @ ..] = rest {
            if id.0 == self.0 {
                return Some(*name);
            }
            rest = tail;
        }
        None
    }
}

impl fmt::Display for CodecId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.registered_name() {
            Some(name) => write!(f, "{name} (codec #{})", self.0),
            None => write!(f, "codec #{}", self.0),
        }
    }
}

/// One of a codec's payload layouts, recorded in the header beside the codec's id (for
/// example halo2's `RawBytes` or `Processed` for the rawbytes codec).
///
/// A codec lists the modes it reads ([`crate::KeyCodec::wire_modes`]); the container refuses
/// any other mode before the payload is decoded, and hands the decoder the codec's own
/// `WireMode` value, so a decoder only ever sees modes it declared.
#[derive(Clone, Copy, Debug, Eq)]
pub struct WireMode {
    byte: u8,
    name: &'static str,
}

impl WireMode {
    /// A mode stored as `byte`, called `name` in reports.
    pub const fn new(byte: u8, name: &'static str) -> Self {
        WireMode { byte, name }
    }

    /// The byte stored in the header.
    pub const fn byte(self) -> u8 {
        self.byte
    }

    /// The mode's name, as reports print it.
    pub const fn name(self) -> &'static str {
        self.name
    }
}

/// Modes are the same mode when their bytes are: the name is only for people.
impl PartialEq for WireMode {
    fn eq(&self, other: &Self) -> bool {
        self.byte == other.byte
    }
}

impl std::hash::Hash for WireMode {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.byte.hash(state);
    }
}

impl fmt::Display for WireMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (mode {})", self.name, self.byte)
    }
}

/// What a container holds: a proving key, a verifying key, or KZG parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArtifactKind {
    /// A `ProvingKey` (which embeds its verifying key).
    Proving,
    /// A `VerifyingKey` alone.
    Verifying,
    /// KZG parameters (`ParamsKZG<Bn256>`): no circuit, so no fingerprint.
    Params,
}

impl ArtifactKind {
    /// The byte stored in the header.
    pub const fn byte(self) -> u8 {
        match self {
            ArtifactKind::Proving => 1,
            ArtifactKind::Verifying => 2,
            ArtifactKind::Params => 3,
        }
    }

    /// The kind stored as `byte`, if any.
    pub const fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(ArtifactKind::Proving),
            2 => Some(ArtifactKind::Verifying),
            3 => Some(ArtifactKind::Params),
            _ => None,
        }
    }
}

impl fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArtifactKind::Proving => "proving key",
            ArtifactKind::Verifying => "verifying key",
            ArtifactKind::Params => "KZG parameters",
        })
    }
}

/// A 128-bit fingerprint of a circuit's configured constraint system.
///
/// Computed from the `Debug` form of the pinned constraint system that
/// `Circuit::configure_with_params` produces: gates, columns, queries, lookups, permutation
/// columns. Two circuit types (or parameterisations) with different constraint systems have
/// different fingerprints. It is a guard against mistakes, not an authenticator: a forger can
/// write any fingerprint, and circuits that share a `configure` share a fingerprint.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 16]);

impl Fingerprint {
    /// The fingerprint recorded for what belongs to no circuit (parameters): all zero.
    pub const NONE: Fingerprint = Fingerprint([0; 16]);
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::hex::encode(&self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

/// A key's digest: 32 bytes, printed and parsed as 64 lowercase hex digits.
///
/// The same key has the same digest whichever backend stored it; a proving key's digest
/// differs from its verifying key's. [`KeyDigest::of_pk`] and [`KeyDigest::of_vk`] compute
/// it from a key in memory; saving returns it and a pinned load
/// ([`LoadOptions::expected_digest`](crate::LoadOptions::expected_digest)) checks it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyDigest(pub [u8; 32]);

impl fmt::Display for KeyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::hex::encode(&self.0))
    }
}

impl fmt::Debug for KeyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyDigest({self})")
    }
}

/// A digest that did not parse: not 64 hex digits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid key digest `{input}`: expected 64 hexadecimal digits")]
pub struct ParseDigestError {
    input: String,
}

impl FromStr for KeyDigest {
    type Err = ParseDigestError;

    fn from_str(input: &str) -> std::result::Result<Self, ParseDigestError> {
        let error = || ParseDigestError {
            input: input.to_owned(),
        };
        let bytes = crate::hex::decode::<32>(input).ok_or_else(error)?;
        Ok(KeyDigest(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_bytes() {
        for kind in [
            ArtifactKind::Proving,
            ArtifactKind::Verifying,
            ArtifactKind::Params,
        ] {
            assert_eq!(ArtifactKind::from_byte(kind.byte()), Some(kind));
        }
        assert_eq!(ArtifactKind::from_byte(0), None);
        assert_eq!(ArtifactKind::from_byte(4), None);
    }

    #[test]
    fn wire_modes_compare_by_byte() {
        assert_eq!(WireMode::new(1, "a"), WireMode::new(1, "b"));
        assert_ne!(WireMode::new(1, "a"), WireMode::new(2, "a"));
    }

    #[test]
    fn digests_print_and_parse_as_hex() {
        let digest = KeyDigest(std::array::from_fn(|i| i as u8 * 7));
        let text = digest.to_string();
        assert_eq!(text.len(), 64);
        assert_eq!(text.parse::<KeyDigest>().ok(), Some(digest));
        assert_eq!(text.to_uppercase().parse::<KeyDigest>().ok(), Some(digest));
        for bad in ["", "00", &text[1..], &format!("{}g", &text[1..])] {
            assert!(bad.parse::<KeyDigest>().is_err(), "{bad}");
        }
    }
}
