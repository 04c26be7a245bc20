//! A file that changes on disk while a load reads it (truncated or rewritten when a chosen
//! read starts), and a load of one.

use std::path::Path;

use keycodec_core::header::HEADER_LEN;
// The trait the docs link to.
#[cfg(doc)]
use keycodec_core::KeyCodecExt;
use keycodec_core::{KeyCodec, LoadOptions, Result};

use super::Pk;
use crate::StandardPlonk;

#[cfg(unix)]
/// How a file is changed under a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Cut to half its length (`truncate`, a writer's `File::create` before it writes).
    Truncate,
    /// Every payload byte flipped in place, same length (`cp` over it, a rewrite through an
    /// NFS or FUSE mount).
    Rewrite,
}

#[cfg(unix)]
/// How the loader reads the file.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mode {
    /// [`KeyCodecExt::load`]'s reader: positioned reads, parallel for bulk data.
    Positioned,
    /// [`KeyCodecExt::read`] of the open file: a stream.
    Stream,
}

#[cfg(unix)]
/// A file that changes on disk when its `change_at`-th read starts (a deterministic
/// stand-in for another process writing it during a load).
struct ChangingFile {
    file: std::fs::File,
    path: std::path::PathBuf,
    change: Change,
    change_at: usize,
    reads: std::sync::atomic::AtomicUsize,
    position: u64,
}

#[cfg(unix)]
impl ChangingFile {
    fn before_read(&self) {
        let index = self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if index == self.change_at {
            apply(&self.path, self.change);
        }
    }
}

#[cfg(unix)]
/// Changes the file at `path` in place (the same inode a reader has open).
/// Truncates the file to half, or rewrites its payload (every byte flipped).
fn apply(path: &Path, change: Change) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open to change");
    let len = file.metadata().expect("metadata").len();
    match change {
        Change::Truncate => file.set_len(len / 2).expect("truncate"),
        Change::Rewrite => {
            use std::os::unix::fs::FileExt;
            let mut payload = vec![0u8; (len - HEADER_LEN as u64) as usize];
            file.read_exact_at(&mut payload, HEADER_LEN as u64)
                .expect("read to rewrite");
            payload.iter_mut().for_each(|byte| *byte ^= 0x5a);
            file.write_all_at(&payload, HEADER_LEN as u64)
                .expect("rewrite");
        }
    }
}

#[cfg(unix)]
impl keycodec_core::transport::ReadAt for ChangingFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.before_read();
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.before_read();
        std::os::unix::fs::FileExt::read_at(&self.file, buf, offset)
    }
}

#[cfg(unix)]
impl std::io::Read for ChangingFile {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.before_read();
        let n = std::os::unix::fs::FileExt::read_at(&self.file, buf, self.position)?;
        self.position += n as u64;
        Ok(n)
    }
}

#[cfg(unix)]
/// A proving key, its digest computed (its pieces hashed as they are read).
#[cfg(unix)]
fn digest_request() -> keycodec_core::transport::Request {
    keycodec_core::transport::Request {
        digest: true,
        ..keycodec_core::transport::Request::of(keycodec_core::ArtifactKind::Proving)
    }
}

/// Loads `path` while it changes at its `change_at`-th read; returns the outcome and how
/// many reads the load made.
pub(super) fn load_while_changing<K: KeyCodec + ?Sized>(
    codec: &K,
    path: &Path,
    mode: Mode,
    change: Change,
    change_at: usize,
    options: &LoadOptions,
) -> (Result<Pk>, usize) {
    let mut file = ChangingFile {
        file: std::fs::File::open(path).expect("open"),
        path: path.to_path_buf(),
        change,
        change_at,
        reads: std::sync::atomic::AtomicUsize::new(0),
        position: 0,
    };
    let len = file.file.metadata().expect("metadata").len();
    let cs = keycodec_core::backend_api::circuit::configure::<StandardPlonk>(());
    let result = match mode {
        Mode::Positioned => {
            let input = keycodec_core::transport::Input::At {
                source: &file,
                len,
                buffer: options.buffers.file_read_capacity(),
            };
            // The key's digest is computed too: its pieces are hashed as they are read.
            keycodec_core::transport::read(
                codec,
                digest_request(),
                Some(cs.clone()),
                input,
                options,
            )
        }
        Mode::Stream => {
            let input = keycodec_core::transport::Input::Stream(&mut file);
            keycodec_core::transport::read(
                codec,
                digest_request(),
                Some(cs.clone()),
                input,
                options,
            )
        }
    }
    .and_then(|decoded| match decoded.item {
        keycodec_core::transport::Item::Key(key) => <Pk as keycodec_core::HaloKey>::from_key(key),
        keycodec_core::transport::Item::Params(_) => panic!("parameters decoded for a key"),
    });
    let reads = file.reads.load(std::sync::atomic::Ordering::SeqCst);
    (result, reads)
}
