//! Polynomials as serde values that bincode moves in bulk.
//!
//! A polynomial is a sequence of byte strings, each holding the canonical encodings
//! (`to_repr`, 32 bytes) of up to [`CHUNK_ELEMENTS`] consecutive elements. bincode writes a
//! byte string as one length and one `write_all`, and reads it as one `read_exact`, where a
//! `Vec<Fr>` of halo2curves' serde would cost a serde call per byte. Each chunk is converted
//! in parallel (rayon), and checked on the way in: the canonical encoding must be below the
//! modulus.

use std::fmt;

use keycodec_core::backend_api::field::{
    decode_fr_chunk, encode_fr_chunk, FieldEncoding, FR_BYTES,
};
use keycodec_core::backend_api::Validation;
use keycodec_core::halo2curves::bn256::Fr;
use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Elements per byte string: 1 MiB of encoded data.
pub(crate) const CHUNK_ELEMENTS: usize = 1 << 15;

/// The largest byte string a valid payload holds.
pub(crate) const MAX_CHUNK_BYTES: usize = CHUNK_ELEMENTS * FR_BYTES;

/// A borrowed polynomial, serialized as byte-string chunks.
pub(crate) struct ScalarsRef<'a>(pub(crate) &'a [Fr]);

impl Serialize for ScalarsRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.0.len().div_ceil(CHUNK_ELEMENTS)))?;
        let mut staging = Vec::with_capacity(self.0.len().min(CHUNK_ELEMENTS));
        for block in self.0.chunks(CHUNK_ELEMENTS) {
            encode_fr_chunk(block, FieldEncoding::Canonical, &mut staging);
            seq.serialize_element(&Bytes(staging.as_flattened()))?;
        }
        seq.end()
    }
}

/// Serializes as a byte string (one length, one write), unlike `&[u8]`'s per-byte sequence.
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// A decoded polynomial.
pub(crate) struct Scalars(pub(crate) Vec<Fr>);

impl<'de> Deserialize<'de> for Scalars {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(ChunksVisitor)
    }
}

struct ChunksVisitor;

impl<'de> Visitor<'de> for ChunksVisitor {
    type Value = Scalars;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of byte strings of canonical scalars")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalars, A::Error> {
        // The vector grows with the chunks actually decoded: a declared chunk count allocates
        // nothing.
        let mut values = Vec::new();
        while seq
            .next_element_seed(ChunkSeed { out: &mut values })?
            .is_some()
        {}
        Ok(Scalars(values))
    }
}

/// Decodes one chunk, appending its elements to `out`.
struct ChunkSeed<'v> {
    out: &'v mut Vec<Fr>,
}

impl<'de> DeserializeSeed<'de> for ChunkSeed<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_bytes(self)
    }
}

impl<'de> Visitor<'de> for ChunkSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a byte string of at most {MAX_CHUNK_BYTES} bytes")
    }

    fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<(), E> {
        if bytes.len() > MAX_CHUNK_BYTES {
            return Err(E::invalid_length(bytes.len(), &self));
        }
        decode_fr_chunk(
            bytes,
            FieldEncoding::Canonical,
            Validation::Checked,
            "bincode polynomial chunk",
            self.out,
        )
        .map_err(E::custom)
    }

    fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<(), E> {
        self.visit_bytes(&bytes)
    }
}
