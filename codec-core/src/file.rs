//! Atomic, durable saves.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Error, IoContext, Result};
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
/// I/O errors from creating, writing, syncing or renaming (those about the destination name
/// no path: the caller knows it; those about the folder name the folder), and whatever
/// `write` returns.
pub(crate) fn save_atomic<T>(
    path: &Path,
    capacity: Size,
    write: impl FnOnce(&mut BufWriter<&File>) -> Result<T>,
) -> Result<T> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        Error::io(
            "save to",
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the path has no file name",
            ),
        )
    })?;
    remove_stale_temps(dir, name);
    // A hint: whether the kernel took it changes nothing for the save.
    let _ = drop_cached_pages(path);
    let mut prefix = temp_prefix(name);
    prefix.push(format!("{}.", std::process::id()));
    let temp = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".tmp")
        .tempfile_in(dir)
        .during("create a temporary file in")
        .map_err(|err| err.at_path(dir))?;
    let written = {
        let mut writer = BufWriter::with_capacity(capacity.as_usize(), temp.as_file());
        let written = write(&mut writer)?;
        writer.flush().during("write")?;
        written
    };
    temp.as_file().sync_all().during("sync")?;
    temp.persist(path)
        .map_err(|err| Error::io("rename the temporary file over", err.error))?;
    sync_dir(dir).map_err(|err| err.at_path(dir))?;
    Ok(written)
}

/// Asks the kernel to drop `path`'s cached pages (Linux, `posix_fadvise(DONTNEED)`; a hint:
/// the file itself is untouched, and dirty pages or pages another process has mapped stay).
/// Returns whether the request was accepted; `false` for anything but a regular file
/// (opening a FIFO to read would block) and on other systems.
///
/// keycodec's saves call it on the file they are about to replace. Until the rename, an atomic
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
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .during("sync the folder")
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<()> {
    // Windows cannot open a directory as a file; NTFS journals the rename itself.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn save_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
        save_atomic(path, Size::kib(8), |writer| {
            writer.write_all(bytes).during("write")
        })
    }

    #[test]
    fn stale_temps_of_dead_processes_are_removed_and_live_ones_kept() -> Result<()> {
        let dir = tempfile::tempdir().during("create")?;
        let path = dir.path().join("key.pk");
        // A pid above Linux's maximum (2^22) cannot be alive; our own pid is.
        let dead = dir.path().join(".key.pk.4294967295.abc123.tmp");
        let live = dir
            .path()
            .join(format!(".key.pk.{}.def456.tmp", std::process::id()));
        let other = dir.path().join(".other.pk.4294967295.abc123.tmp");
        for file in [&dead, &live, &other] {
            std::fs::write(file, b"partial").during("write")?;
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
        let dir = tempfile::tempdir().during("create")?;
        let path = dir.path().join("key");
        save_bytes(&path, b"first")?;
        let failed: Result<()> = save_atomic(&path, Size::kib(8), |writer| {
            writer.write_all(b"partial").during("write")?;
            Err(Error::Internal("injected".into()))
        });
        assert!(matches!(failed, Err(Error::Internal(_))));
        assert_eq!(std::fs::read(&path).during("read")?, b"first");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .during("list")?
            .filter_map(|entry| entry.ok().map(|e| e.file_name()))
            .collect();
        assert_eq!(names.len(), 1, "left behind: {names:?}");
        Ok(())
    }

    /// Dropping cached pages is accepted for a regular file on Linux, leaves its content
    /// alone, and is refused (without blocking) for what is not a regular file.
    #[test]
    fn dropping_cached_pages_keeps_the_file_and_skips_other_kinds() -> Result<()> {
        let dir = tempfile::tempdir().during("create")?;
        let path = dir.path().join("key");
        save_bytes(&path, b"content")?;
        assert_eq!(drop_cached_pages(&path), cfg!(target_os = "linux"));
        assert_eq!(std::fs::read(&path).during("read")?, b"content");
        assert!(!drop_cached_pages(dir.path()));
        assert!(!drop_cached_pages(&dir.path().join("absent")));
        Ok(())
    }
}
