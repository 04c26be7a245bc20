//! The byte source bincode decodes from: a buffered payload reader that refuses oversized
//! byte strings *before* allocating for them.
//!
//! bincode's own `IoReader` allocates a byte string's declared length up front (bounded only
//! by the byte limit, the declared payload length, which a stream does not verify). Every byte
//! string in a valid payload is a polynomial chunk of at most [`MAX_CHUNK_BYTES`], so this
//! reader refuses longer ones, and reuses one buffer for all of them.

use std::io::{self, BufRead, BufReader, Read};

use crate::scalars::MAX_CHUNK_BYTES;
use bincode::{BincodeRead, ErrorKind};

/// A [`BincodeRead`] over a buffered payload.
pub(crate) struct ChunkReader<'r, R> {
    inner: &'r mut BufReader<R>,
    scratch: Vec<u8>,
}

impl<'r, R: Read> ChunkReader<'r, R> {
    pub(crate) fn new(inner: &'r mut BufReader<R>) -> Self {
        ChunkReader {
            inner,
            scratch: Vec::new(),
        }
    }

    /// Reads the next `length` bytes into the scratch buffer.
    fn fill(&mut self, length: usize) -> bincode::Result<&[u8]> {
        if length > MAX_CHUNK_BYTES {
            return Err(Box::new(ErrorKind::Custom(format!(
                "byte string of {length} bytes, more than a chunk's {MAX_CHUNK_BYTES}"
            ))));
        }
        self.scratch.resize(length, 0);
        self.inner.read_exact(&mut self.scratch)?;
        Ok(&self.scratch)
    }
}

impl<R: Read> Read for ChunkReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf)
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        // bincode reads integers a few bytes at a time: serve them from the buffer directly.
        let available = self.inner.buffer();
        if let Some(head) = available.get(..buf.len()) {
            buf.copy_from_slice(head);
            self.inner.consume(buf.len());
            return Ok(());
        }
        self.inner.read_exact(buf)
    }
}

impl<'de, R: Read> BincodeRead<'de> for ChunkReader<'_, R> {
    fn forward_read_str<V: serde::de::Visitor<'de>>(
        &mut self,
        length: usize,
        visitor: V,
    ) -> bincode::Result<V::Value> {
        let bytes = self.fill(length)?;
        let text = std::str::from_utf8(bytes)
            .map_err(|err| Box::new(ErrorKind::InvalidUtf8Encoding(err)))?;
        visitor.visit_str(text)
    }

    fn get_byte_buffer(&mut self, length: usize) -> bincode::Result<Vec<u8>> {
        Ok(self.fill(length)?.to_vec())
    }

    fn forward_read_bytes<V: serde::de::Visitor<'de>>(
        &mut self,
        length: usize,
        visitor: V,
    ) -> bincode::Result<V::Value> {
        visitor.visit_bytes(self.fill(length)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ignore;

    impl<'de> serde::de::Visitor<'de> for Ignore {
        type Value = usize;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("bytes")
        }

        fn visit_bytes<E>(self, bytes: &[u8]) -> Result<usize, E> {
            Ok(bytes.len())
        }
    }

    #[test]
    fn byte_strings_longer_than_a_chunk_are_refused_before_reading() {
        // Enough real bytes for the oversized string: only the length rule can refuse it.
        let data = vec![7u8; MAX_CHUNK_BYTES + 10];
        let mut buffered = BufReader::new(data.as_slice());
        let mut reader = ChunkReader::new(&mut buffered);
        assert!(reader
            .forward_read_bytes(MAX_CHUNK_BYTES + 1, Ignore)
            .is_err());
        assert!(reader.get_byte_buffer(usize::MAX).is_err());
        assert_eq!(reader.scratch.capacity(), 0, "nothing was allocated");
        assert_eq!(
            reader.forward_read_bytes(MAX_CHUNK_BYTES, Ignore).unwrap(),
            MAX_CHUNK_BYTES
        );
    }

    #[test]
    fn small_reads_come_from_the_buffer_and_continue_past_it() {
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let mut buffered = BufReader::with_capacity(64, data.as_slice());
        let mut reader = ChunkReader::new(&mut buffered);
        let mut out = vec![0u8; 10_000];
        for piece in out.chunks_mut(40) {
            reader.read_exact(piece).unwrap();
        }
        assert_eq!(out, data);
        assert!(reader.read_exact(&mut [0u8; 1]).is_err());
    }
}
