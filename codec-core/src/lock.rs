//! Locks beside a file, with a deadline: two processes about to do the same expensive work
//! on one path (generate a key, download an object into a cache) do it once.

use std::ffi::OsString;
use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};
use crate::file::write_all_at;

/// How long keycodec waits by default for a lock another process holds (one generating a
/// key, or downloading an object into a cache): three hours, longer than keygen takes at
/// `k = 24` on two cores. Every lock keycodec takes has a deadline; the options that set
/// one (the facade's `Keygen::lock_timeout`, `RemoteOptions::lock_timeout`) default to this.
pub const DEFAULT_LOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3 * 3600);

/// Takes an exclusive lock on `.{name}.keycodec.lock` beside `path` (creating it), waiting
/// at most `timeout` while another thread or process holds it; the lock lasts until the
/// returned file is dropped (or its process dies: the kernel releases it, so a killed
/// holder's lock is taken over at once). keycodec takes it where two processes would
/// otherwise both do the same expensive work on `path`: generate a key, download an object
/// into a cache. The holder writes its process id into the lock file, so that a wait that
/// times out names the process that kept it (a hung keygen, a stopped download) instead of
/// blocking silently.
///
/// # Errors
///
/// [`Error::Io`] naming the lock file; past `timeout`, one of kind
/// [`std::io::ErrorKind::TimedOut`] that names the holder.
pub fn lock_beside(path: &Path, timeout: std::time::Duration) -> Result<File> {
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(".keycodec.lock");
    let lock_path = path.with_file_name(name);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .map_err(|err| Error::io("create the lock file", err).at_path(&lock_path))?;
    wait_for_lock(&file, timeout).map_err(|err| err.at_path(&lock_path))?;
    // Who holds it, for those that time out waiting (a hint: the lock is the flock).
    let pid = format!("{}\n", std::process::id());
    let _ = file
        .set_len(0)
        .and_then(|()| write_all_at(&file, pid.as_bytes(), 0));
    Ok(file)
}

/// Polls for the lock until `timeout` has passed.
fn wait_for_lock(file: &File, timeout: std::time::Duration) -> Result<()> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(5);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(()),
            Err(std::fs::TryLockError::Error(err)) => return Err(Error::io("lock", err)),
            Err(std::fs::TryLockError::WouldBlock) => {}
        }
        if started.elapsed() >= timeout {
            let mut holder = String::new();
            let _ = std::io::Read::read_to_string(&mut &*file, &mut holder);
            let holder = match holder.trim() {
                "" => "another process".to_owned(),
                pid => format!("process {pid}{}", process_state(pid)),
            };
            return Err(Error::io(
                "lock",
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "held by {holder} for more than {} s (raise the lock timeout, or stop \
                         that process if it hangs)",
                        timeout.as_secs_f64()
                    ),
                ),
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(200));
    }
}

/// What Linux says of process `pid` when it is not simply running or sleeping: " (stopped)"
/// for one stopped by a signal (`SIGSTOP`, a debugger), " (a zombie)"; "" otherwise.
fn process_state(pid: &str) -> &'static str {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses and may hold any byte.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    match state {
        Some("T" | "t") => " (stopped)",
        Some("Z") => " (a zombie)",
        _ => "",
    }
}
