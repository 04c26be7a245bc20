//! The small identifiers a container header records: which codec wrote the payload and in
//! which of its wire modes, which kind of key it holds, and which circuit it belongs to.

use std::fmt;

/// Identifies the backend that wrote a payload: the byte recorded in the container header.
///
/// Each backend crate defines its own (`codec_rawbytes::ID` is 1, bincode 2, rkyv 3, compact
/// 4); the facade's backend list names them and checks that no two share a byte.
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
}

impl fmt::Display for CodecId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "codec #{}", self.0)
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

/// Whether a container holds a proving key or a verifying key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// A `ProvingKey` (which embeds its verifying key).
    Proving,
    /// A `VerifyingKey` alone.
    Verifying,
}

impl KeyKind {
    /// The byte stored in the header.
    pub const fn byte(self) -> u8 {
        match self {
            KeyKind::Proving => 1,
            KeyKind::Verifying => 2,
        }
    }

    /// The kind stored as `byte`, if any.
    pub const fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(KeyKind::Proving),
            2 => Some(KeyKind::Verifying),
            _ => None,
        }
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::Proving => "proving key",
            KeyKind::Verifying => "verifying key",
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

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_bytes() {
        for kind in [KeyKind::Proving, KeyKind::Verifying] {
            assert_eq!(KeyKind::from_byte(kind.byte()), Some(kind));
        }
        assert_eq!(KeyKind::from_byte(0), None);
        assert_eq!(KeyKind::from_byte(3), None);
    }

    #[test]
    fn wire_modes_compare_by_byte() {
        assert_eq!(WireMode::new(1, "a"), WireMode::new(1, "b"));
        assert_ne!(WireMode::new(1, "a"), WireMode::new(2, "a"));
    }
}
