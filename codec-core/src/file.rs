//! Atomic, durable saves and length-aware opens.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use crate::error::{Error, Result};
use crate::options::Size;

/// Writes a file atomically and durably.
///
/// `write` fills a temporary file created in `path`'s folder (through a `BufWriter` of
/// `capacity`); the file is then flushed, `sync_all`ed, renamed over `path`, and the folder is
/// synced so that the rename itself survives a crash. If anything fails the temporary file
/// is removed (by `tempfile`'s drop, which also runs while unwinding from a panic) and `path`
/// keeps its previous content. After a crash at any point `path` is absent or a complete file.
///
/// The new file has mode 0600 (tempfile's default) on Unix.
///
/// # Errors
///
/// I/O errors from creating, writing, syncing or renaming, and whatever `write` returns.
pub fn save_atomic(
    path: &Path,
    capacity: Size,
    write: impl FnOnce(&mut BufWriter<&File>) -> Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "save path has no file name",
        ))
    })?;
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let temp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(dir)?;
    {
        let mut writer = BufWriter::with_capacity(capacity.as_usize(), temp.as_file());
        write(&mut writer)?;
        writer.flush()?;
    }
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| Error::Io(err.error))?;
    sync_dir(dir)?;
    Ok(())
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<()> {
    // Windows cannot open a directory as a file; NTFS journals the rename itself.
    Ok(())
}

/// Opens `path` for buffered reading and returns its length.
///
/// # Errors
///
/// I/O errors from opening the file or reading its metadata.
pub fn open_buffered(path: &Path, capacity: Size) -> Result<(BufReader<File>, u64)> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    Ok((BufReader::with_capacity(capacity.as_usize(), file), len))
}
