//! Atomic, durable saves.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::error::{Error, IoContext, Result};
use crate::options::Size;

/// Writes a file atomically and durably.
///
/// `write` fills a temporary file created in the destination's folder (through a
/// `BufWriter` of `capacity`); the file is then flushed, `sync_all`ed, renamed over the
/// destination, and the folder is synced so that the rename itself survives a crash. If
/// anything fails the temporary file is removed (by `tempfile`'s drop, which also runs while
/// unwinding from a panic) and the destination keeps its previous content. After a crash at
/// any point the destination is absent or a complete file.
///
/// What users expect of the destination is kept: a new file gets the mode `File::create`
/// would give it (0666 less the umask, on Unix), a replaced file's mode is kept, and when
/// `path` is a symbolic link the file it points to is replaced (or created), not the link.
///
/// The temporary file is named `.{name}.keycodec.{6 random characters}.tmp` and is locked
/// (an exclusive `flock`) while it is written. A process killed mid-save (`kill -9`, the OOM
/// killer, a power cut) cannot remove its own; the next save to the same destination removes
/// such leftovers, exactly those names, and only once it holds their lock: the kernel
/// releases a dead process's locks, whatever its PID namespace, and NFS passes them to the
/// server.
///
/// # Errors
///
/// I/O errors from creating, writing, syncing or renaming (those about the destination name
/// no path: the caller knows it; those about the folder or a link name them), and whatever
/// `write` returns.
pub fn save_atomic<T>(
    path: &Path,
    capacity: Size,
    write: impl FnOnce(&mut BufWriter<Writeback<'_>>) -> Result<T>,
) -> Result<T> {
    let target = resolve_links(path)?;
    let (dir, name) = folder_and_name(&target, "save to")?;
    let replaced = std::fs::metadata(&target)
        .ok()
        .filter(|meta| meta.is_file());
    remove_stale_temps(dir, name);
    // A hint: whether the kernel took it changes nothing for the save.
    let _ = drop_cached_pages(&target);
    let temp = create_locked_temp(dir, name).map_err(|err| err.at_path(dir))?;
    if let Some(replaced) = replaced {
        temp.as_file()
            .set_permissions(replaced.permissions())
            .during("set the mode of the new file")?;
    }
    let written = {
        let mut writer =
            BufWriter::with_capacity(capacity.as_usize(), Writeback::new(temp.as_file()));
        let written = write(&mut writer)?;
        writer.flush().during("write")?;
        written
    };
    temp.as_file().sync_all().during("sync")?;
    temp.persist(&target)
        .map_err(|err| Error::io("rename the temporary file over", err.error))?;
    sync_dir(dir).map_err(|err| err.at_path(dir))?;
    Ok(written)
}

/// Writes the file at `path` atomically and durably, as keycodec's saves do (see the crate's
/// saves: a locked temporary file beside it, `sync_all`, rename, the folder synced; a new
/// file's mode as `File::create` gives it, a replaced file's mode kept, a symbolic link's
/// target replaced), from `fill`, which writes the temporary file it is given (at explicit
/// offsets, or from its start). On any error, or a panic, the destination keeps what it held;
/// a process killed meanwhile leaves a temporary file the next save to `path` removes.
///
/// # Errors
///
/// As a save: I/O errors naming the folder or link where they are about them, and whatever
/// `fill` returns.
pub fn replace_atomically<T>(path: &Path, fill: impl FnOnce(&File) -> Result<T>) -> Result<T> {
    save_atomic(path, Size::kib(4), |writer| fill(writer.get_ref().file()))
}

/// A temporary file in `path`'s folder for work whose result becomes `path` (a download
/// checked before it is kept), named and locked as a save's own temporary file: removed when
/// dropped, and if its process is killed first, by the next save to `path`.
///
/// # Errors
///
/// [`Error::Io`] naming the folder.
pub fn temp_beside(path: &Path) -> Result<NamedTempFile> {
    let (dir, name) =
        folder_and_name(path, "create a temporary file for").map_err(|err| err.at_path(path))?;
    remove_stale_temps(dir, name);
    create_locked_temp(dir, name).map_err(|err| err.at_path(dir))
}

/// The folder `path` is in (`.` for a bare name) and its file name; `operation` names what
/// fails for a path without a file name.
fn folder_and_name<'p>(path: &'p Path, operation: &'static str) -> Result<(&'p Path, &'p OsStr)> {
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        Error::io(
            operation,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the path has no file name",
            ),
        )
    })?;
    Ok((dir, name))
}

/// A file being written from its start, that asks the kernel to start writing its bytes back
/// to the disk as soon as a step of them is written, and the rest when flushed (Linux,
/// `sync_file_range`), so that the `sync_all` that ends a save waits for the last step
/// instead of the whole file: the disk works while the rest is encoded. The first step is
/// [`Writeback::FIRST_STEP`]; each next one is that much more than all the bytes handed over
/// before it, so the steps double, up to [`Writeback::STEP`]: a file of a few MB goes to the
/// disk while it is written too, a large one in few requests. The
/// pages stay in the page cache (a load right after the save reads none from the disk). A
/// hint: the bytes, and what `sync_all` guarantees, are the same without it.
pub struct Writeback<'f> {
    file: &'f File,
    /// Where the next byte is written.
    position: u64,
    /// Where the bytes not yet handed to writeback start.
    pending: u64,
}

impl<'f> Writeback<'f> {
    /// The most bytes written between two requests to start writeback.
    pub const STEP: u64 = 32 << 20;

    /// The bytes written before the first request to start writeback.
    pub const FIRST_STEP: u64 = 256 << 10;

    pub(crate) fn new(file: &'f File) -> Self {
        Writeback {
            file,
            position: 0,
            pending: 0,
        }
    }

    /// The file.
    pub fn file(&self) -> &'f File {
        self.file
    }

    /// Starts writeback of the bytes written since the last start, once there are enough
    /// (`all`: whatever there are).
    fn start_writeback(&mut self, all: bool) {
        let step = self
            .pending
            .saturating_add(Self::FIRST_STEP)
            .min(Self::STEP);
        if self.position <= self.pending || (!all && self.position < self.pending + step) {
            return;
        }
        #[cfg(target_os = "linux")]
        if let (Ok(offset), Ok(len)) = (
            i64::try_from(self.pending),
            i64::try_from(self.position - self.pending),
        ) {
            crate::memory::start_writeback(self.file, offset, len);
        }
        self.pending = self.position;
    }
}

impl Write for Writeback<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.file.write(buf)?;
        self.position += written as u64;
        self.start_writeback(false);
        Ok(written)
    }

    /// Starts writeback of every byte not yet handed to it: a save that flushes while it
    /// still has work before its `sync_all` (its digest to wait for, its header to write) lets
    /// the disk write meanwhile.
    fn flush(&mut self) -> std::io::Result<()> {
        self.start_writeback(true);
        self.file.flush()
    }
}

impl std::io::Seek for Writeback<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.position = self.file.seek(to)?;
        self.pending = self.pending.min(self.position);
        Ok(self.position)
    }
}

/// The file `path` names, following symbolic links (a link to a link, relative targets);
/// `path` itself when it is not a link or does not exist.
///
/// # Errors
///
/// [`Error::Io`] naming the link when more than 40 links are chained (a loop, as the
/// kernel's `ELOOP` limit) or one cannot be read.
fn resolve_links(path: &Path) -> Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        let is_link = std::fs::symlink_metadata(&current).is_ok_and(|meta| meta.is_symlink());
        if !is_link {
            return Ok(current);
        }
        let target = std::fs::read_link(&current)
            .during("read the symbolic link")
            .map_err(|err| err.at_path(&current))?;
        current = match current.parent() {
            Some(parent) if target.is_relative() => parent.join(target),
            _ => target,
        };
    }
    Err(Error::io(
        "follow the symbolic links of",
        std::io::Error::other("more than 40 links in a row (a loop?)"),
    )
    .at_path(path))
}

/// Creates `dir/.{name}.keycodec.XXXXXX.tmp` with the mode a new file gets, and locks it.
/// A cleaner of another process may remove the file between its creation and the lock:
/// then another is created.
fn create_locked_temp(dir: &Path, name: &OsStr) -> Result<NamedTempFile> {
    let prefix = temp_prefix(name);
    let mut builder = tempfile::Builder::new();
    builder
        .prefix(&prefix)
        .suffix(TEMP_SUFFIX)
        .rand_bytes(TEMP_RANDOM);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // As `File::create`: the kernel applies the umask.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut last = None;
    for _ in 0..3 {
        let temp = builder
            .tempfile_in(dir)
            .during("create a temporary file in")?;
        match temp.as_file().try_lock() {
            Ok(()) if still_linked(&temp) => return Ok(temp),
            Ok(()) => last = Some(std::io::Error::other("removed by another process")),
            Err(std::fs::TryLockError::WouldBlock) => {
                last = Some(std::io::Error::other("locked by another process"));
            }
            Err(std::fs::TryLockError::Error(err)) => last = Some(err),
        }
    }
    Err(Error::io(
        "lock a temporary file in",
        last.unwrap_or_else(|| std::io::Error::other("no temporary file")),
    ))
}

/// Whether the temporary file's name still refers to the file this process has open.
fn still_linked(temp: &NamedTempFile) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(temp.path()), temp.as_file().metadata()) {
            (Ok(by_name), Ok(open)) => by_name.dev() == open.dev() && by_name.ino() == open.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        temp.path().exists()
    }
}

/// Random characters in a temporary file's name.
const TEMP_RANDOM: usize = 6;
/// The end of a temporary file's name.
const TEMP_SUFFIX: &str = ".tmp";

/// `.{name}.keycodec.`: the start of every temporary file of a save to `name`.
fn temp_prefix(name: &OsStr) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(name);
    prefix.push(".keycodec.");
    prefix
}

/// Whether `file_name` is exactly the name of a temporary file of a save to `name`.
fn is_temp_of(file_name: &OsStr, name: &OsStr) -> bool {
    let (Some(file_name), Some(prefix)) =
        (file_name.to_str(), temp_prefix(name).into_string().ok())
    else {
        return false;
    };
    file_name
        .strip_prefix(&prefix)
        .and_then(|rest| rest.strip_suffix(TEMP_SUFFIX))
        .is_some_and(|random| {
            random.len() == TEMP_RANDOM && random.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// Removes temporary files of earlier saves to `dir/name` that nobody holds: their owner
/// died mid-save. Best effort: failures to list, open or remove are ignored (the save
/// itself does not need it).
fn remove_stale_temps(dir: &Path, name: &OsStr) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(|entry| entry.ok()) {
        if !is_temp_of(&entry.file_name(), name) {
            continue;
        }
        let Ok(file) = File::open(entry.path()) else {
            continue;
        };
        // Held while the file is removed: its owner, if alive, holds it until its rename.
        if file.try_lock().is_ok() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
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

/// Writes all of `buf` at `offset` of `file`, leaving its cursor alone where the platform
/// allows (positioned writes from several threads at once).
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::write_all_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        let (mut buf, mut offset) = (buf, offset);
        while !buf.is_empty() {
            match std::os::windows::fs::FileExt::seek_write(file, buf, offset)? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n => {
                    buf = buf.get(n..).unwrap_or_default();
                    offset += n as u64;
                }
            }
        }
        Ok(())
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (file, buf, offset);
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

#[cfg(test)]
mod tests;
