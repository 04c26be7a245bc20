//! Atomic, durable saves and length-aware opens.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use memmap2::Mmap;

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
/// The temporary file is named `.{name}.{pid}.{random}.tmp`. A process killed mid-save (by
/// `kill -9`, an OOM killer, a power cut) cannot remove its own; the next save to the same
/// path removes such leftovers whose process no longer exists (on Linux; a process id
/// reused by a live process keeps its file, which is only ever conservative).
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
    remove_stale_temps(dir, name);
    // A hint: whether the kernel took it changes nothing for the save.
    let _ = drop_cached_pages(path);
    let mut prefix = temp_prefix(name);
    prefix.push(format!("{}.", std::process::id()));
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

/// Asks the kernel to drop `path`'s cached pages (Linux, `posix_fadvise(DONTNEED)`; a hint:
/// the file itself is untouched, and dirty pages or pages another process has mapped stay).
/// Returns whether the request was accepted; `false` for anything but a regular file
/// (opening a FIFO to read would block) and on other systems.
///
/// [`save_atomic`] calls it on the file it is about to replace. Until the rename, an atomic
/// save needs the old file and the new one; without this the new one's pages come on top of
/// the old one's in the page cache, and where fresh memory is expensive (a VM: replacing a
/// 2.5 GB key took 3.6 to 6.4 s here against 1.3 to 2.2 s to a new path) that is most of the
/// save. The benchmark harness calls it for cold reads.
#[cfg(target_os = "linux")]
pub fn drop_cached_pages(path: &Path) -> bool {
    if !std::fs::metadata(path).is_ok_and(|meta| meta.is_file()) {
        return false;
    }
    File::open(path)
        .is_ok_and(|file| rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).is_ok())
}

/// Asks the kernel to drop `path`'s cached pages: not supported here, so `false`.
#[cfg(not(target_os = "linux"))]
pub fn drop_cached_pages(_path: &Path) -> bool {
    false
}

/// `.{name}.`: the start of every temporary file of a save to `name`.
fn temp_prefix(name: &std::ffi::OsStr) -> std::ffi::OsString {
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    prefix
}

/// Removes temporary files of earlier saves to `dir/name` whose process has exited.
/// Best effort: failures to list or remove are ignored (the save itself does not need it).
fn remove_stale_temps(dir: &Path, name: &std::ffi::OsStr) {
    let prefix = temp_prefix(name);
    let Some(prefix) = prefix.to_str() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(|entry| entry.ok()) {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .filter(|n| n.ends_with(".tmp"))
        else {
            continue;
        };
        let pid = rest
            .split('.')
            .next()
            .and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| !process_is_alive(pid)) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether a process with this id exists. Only Linux can tell (through `/proc`); elsewhere
/// every process is assumed alive, so nothing is removed.
fn process_is_alive(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
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

/// A read-only memory mapping of a key file.
///
/// A mapping is only sound while nobody modifies the file in place. keycodec's own saves
/// never do: [`save_atomic`] writes a new file and renames it over the old one, so a reader's
/// mapping keeps the old, complete content (see the test
/// `saving_over_a_mapped_file_leaves_the_mapping_intact`). Another program truncating or
/// rewriting a key file in place while it is being loaded is outside what any memory-mapping
/// loader can defend against (it can fault the process); load such files with a buffered
/// codec instead.
#[derive(Debug)]
pub struct MappedFile {
    map: Mmap,
}

impl MappedFile {
    /// Maps `path` read-only.
    ///
    /// # Errors
    ///
    /// I/O errors from opening or mapping the file.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path)?;
        // SAFETY: `Mmap::map` is unsafe because the mapped bytes could change underneath the
        // returned `&[u8]` if the file were modified while mapped. Files are only ever
        // replaced by rename in this workspace (never written in place), which leaves an
        // existing mapping untouched; the test below checks exactly that. The mapping is
        // read-only and owned by `self`, so it outlives every borrow of its bytes.
        let map = unsafe { Mmap::map(&file)? };
        Ok(MappedFile { map })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Tells the kernel that `len` bytes at `offset` will not be read again soon, so that
    /// their pages stop counting towards this process's resident memory. Errors are ignored:
    /// this is advice, and the bytes stay readable either way.
    pub fn release(&self, offset: usize, len: usize) {
        #[cfg(unix)]
        {
            // SAFETY: MADV_DONTNEED on a private, read-only, file-backed mapping only drops
            // this process's page-table entries; the next access to the range faults the same
            // bytes back in from the file (the page cache), so every outstanding `&[u8]` into
            // the mapping still reads what it read before. (It would discard data only for
            // anonymous or written-to private pages, which a read-only mapping cannot have.)
            // The test `released_ranges_read_back_unchanged` checks this.
            let _ = unsafe {
                self.map
                    .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len)
            };
        }
        #[cfg(not(unix))]
        let _ = (offset, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn save_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
        save_atomic(path, Size::kib(8), |writer| Ok(writer.write_all(bytes)?))
    }

    #[test]
    fn saving_over_a_mapped_file_leaves_the_mapping_intact() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("key");
        let old = vec![0xaa_u8; 1 << 16];
        save_bytes(&path, &old)?;
        let mapped = MappedFile::open(&path)?;
        save_bytes(&path, &[0x55_u8; 1 << 10])?;
        assert_eq!(
            mapped.bytes(),
            &old[..],
            "the reader's mapping changed under it"
        );
        assert_eq!(std::fs::read(&path)?, vec![0x55_u8; 1 << 10]);
        Ok(())
    }

    #[test]
    fn released_ranges_read_back_unchanged() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("key");
        let content: Vec<u8> = (0..(8u32 << 20)).map(|i| (i % 251) as u8).collect();
        save_bytes(&path, &content)?;
        let mapped = MappedFile::open(&path)?;
        let held: &[u8] = mapped.bytes();
        assert_eq!(held, &content[..]);
        // Release unaligned and whole ranges, then read through the old borrow again.
        mapped.release(12_345, 3 << 20);
        mapped.release(0, content.len());
        assert_eq!(held, &content[..], "released bytes changed");
        Ok(())
    }

    #[test]
    fn stale_temps_of_dead_processes_are_removed_and_live_ones_kept() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("key.pk");
        // A pid above Linux's maximum (2^22) cannot be alive; our own pid is.
        let dead = dir.path().join(".key.pk.4294967295.abc123.tmp");
        let live = dir
            .path()
            .join(format!(".key.pk.{}.def456.tmp", std::process::id()));
        let other = dir.path().join(".other.pk.4294967295.abc123.tmp");
        for file in [&dead, &live, &other] {
            std::fs::write(file, b"partial")?;
        }
        save_bytes(&path, b"complete")?;
        assert!(
            !dead.exists() || !cfg!(target_os = "linux"),
            "stale temp kept"
        );
        assert!(live.exists(), "a live process's temp was removed");
        assert!(other.exists(), "another destination's temp was removed");
        Ok(())
    }

    #[test]
    fn save_replaces_atomically_and_leaves_no_temp_file() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("key");
        save_bytes(&path, b"first")?;
        let failed = save_atomic(&path, Size::kib(8), |writer| {
            writer.write_all(b"partial")?;
            Err(Error::Malformed("injected".into()))
        });
        assert!(matches!(failed, Err(Error::Malformed(_))));
        assert_eq!(std::fs::read(&path)?, b"first");
        let names: Vec<_> = std::fs::read_dir(dir.path())?
            .filter_map(|entry| entry.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names.len(), 1, "left behind: {names:?}");
        Ok(())
    }

    /// Dropping cached pages is accepted for a regular file on Linux, leaves its content
    /// alone, and is refused (without blocking) for what is not a regular file.
    #[test]
    fn dropping_cached_pages_keeps_the_file_and_skips_other_kinds() -> Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("key");
        save_bytes(&path, b"content")?;
        assert_eq!(drop_cached_pages(&path), cfg!(target_os = "linux"));
        assert_eq!(std::fs::read(&path)?, b"content");
        assert!(!drop_cached_pages(dir.path()));
        assert!(!drop_cached_pages(&dir.path().join("absent")));
        Ok(())
    }
}
