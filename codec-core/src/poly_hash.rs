//! A BLAKE3 hash computed from pieces of the input that arrive in any order, from any
//! thread: each piece's chaining value is one subtree of BLAKE3's tree, and the subtrees are
//! merged at the end. Bulk reads use it to hash a polynomial piece by piece while each piece
//! is in cache, on the thread that read it.

use std::sync::Mutex;

use blake3::hazmat::{
    left_subtree_len, max_subtree_len, merge_subtrees_non_root, merge_subtrees_root, ChainingValue,
    HasherExt, Mode,
};

use crate::error::{Error, Result};

/// Hashes one polynomial's raw bytes from pieces that arrive in any order, from any thread:
/// each piece starts at a multiple of its own length, which is a power of two of at least
/// 1 KiB (only the last piece may be shorter), as the bulk reads' pieces are. Hashing them
/// as subtrees of BLAKE3's tree and merging them gives the hash of the whole.
pub(crate) struct PolyHasher {
    len: usize,
    /// (offset, length, chaining value, or the root hash when the piece is everything).
    pieces: Mutex<Vec<(usize, usize, [u8; 32])>>,
}

impl PolyHasher {
    /// A hasher for `len` bytes.
    pub(crate) fn new(len: usize) -> Self {
        PolyHasher {
            len,
            pieces: Mutex::new(Vec::new()),
        }
    }

    /// Hashes the piece of the input at `offset`. A piece that is not a subtree of BLAKE3's
    /// tree (a caller's bug) is not hashed, and [`PolyHasher::finish`] then fails.
    pub(crate) fn add(&self, offset: usize, piece: &[u8]) {
        let value = if offset == 0 && piece.len() == self.len {
            *blake3::hash(piece).as_bytes()
        } else {
            let fits = offset.is_multiple_of(blake3::CHUNK_LEN)
                && max_subtree_len(offset as u64).is_none_or(|max| piece.len() as u64 <= max);
            if !fits {
                return;
            }
            let mut hasher = blake3::Hasher::new();
            hasher.set_input_offset(offset as u64);
            hasher.update(piece);
            hasher.finalize_non_root()
        };
        if let Ok(mut pieces) = self.pieces.lock() {
            pieces.push((offset, piece.len(), value));
        }
    }

    /// The hash of the whole input.
    ///
    /// # Errors
    ///
    /// [`Error::Internal`] if the pieces do not tile the input as subtrees.
    pub(crate) fn finish(self) -> Result<[u8; 32]> {
        let mut pieces = self
            .pieces
            .into_inner()
            .map_err(|_| Error::Internal("a polynomial hashing thread panicked".into()))?;
        pieces.sort_unstable_by_key(|(offset, _, _)| *offset);
        if self.len == 0 {
            return Ok(*blake3::hash(&[]).as_bytes());
        }
        match pieces.as_slice() {
            [(0, len, root)] if *len == self.len => Ok(*root),
            _ => {
                let (left, right) = split(&pieces, 0, self.len)?;
                Ok(*merge_subtrees_root(&left, &right, Mode::Hash).as_bytes())
            }
        }
    }
}

/// The chaining values of the two children of the subtree `[start, end)`.
fn split(
    pieces: &[(usize, usize, ChainingValue)],
    start: usize,
    end: usize,
) -> Result<(ChainingValue, ChainingValue)> {
    let middle = start + left_subtree_len((end - start) as u64) as usize;
    Ok((
        subtree(pieces, start, middle)?,
        subtree(pieces, middle, end)?,
    ))
}

/// The chaining value of the subtree `[start, end)`: a piece, or the merge of its children.
fn subtree(
    pieces: &[(usize, usize, ChainingValue)],
    start: usize,
    end: usize,
) -> Result<ChainingValue> {
    let tiling = || Error::Internal("polynomial hash pieces do not tile the input".into());
    let index = pieces.partition_point(|(offset, _, _)| *offset < start);
    match pieces.get(index) {
        Some((offset, len, cv)) if *offset == start && offset + len == end => Ok(*cv),
        Some((offset, len, _)) if *offset == start && offset + len > end => Err(tiling()),
        Some(_) if end - start > blake3::CHUNK_LEN => {
            let (left, right) = split(pieces, start, end)?;
            Ok(merge_subtrees_non_root(&left, &right, Mode::Hash))
        }
        _ => Err(tiling()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + i / 1021) as u8).collect()
    }

    /// Pieces of every power-of-two size, added in reverse order, give BLAKE3 of the whole.
    #[test]
    fn pieces_merge_into_the_plain_hash() {
        for len in [
            0usize,
            1,
            1023,
            1024,
            1025,
            4096,
            64 << 10,
            (64 << 10) + 7,
            3 << 20,
            (4 << 20) + 5000,
            16 << 20,
        ] {
            let data = pattern(len);
            for piece in [1usize << 10, 64 << 10, 4 << 20] {
                let hasher = PolyHasher::new(len);
                let chunks: Vec<_> = data.chunks(piece).enumerate().collect();
                for (index, chunk) in chunks.into_iter().rev() {
                    hasher.add(index * piece, chunk);
                }
                if len == 0 {
                    hasher.add(0, &[]);
                }
                assert_eq!(
                    hasher.finish().ok(),
                    Some(*blake3::hash(&data).as_bytes()),
                    "len {len} piece {piece}"
                );
            }
        }
    }

    #[test]
    fn pieces_that_do_not_tile_are_an_error() {
        let data = pattern(8 << 10);
        let hasher = PolyHasher::new(data.len());
        hasher.add(0, &data[..4 << 10]);
        assert!(hasher.finish().is_err(), "a missing piece");
        let hasher = PolyHasher::new(data.len());
        hasher.add(0, &data[..3 << 10]);
        hasher.add(3 << 10, &data[3 << 10..]);
        assert!(hasher.finish().is_err(), "pieces that are not subtrees");
    }
}
