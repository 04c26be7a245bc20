use super::*;

fn save_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    save_atomic(path, Size::kib(8), |writer| {
        writer.write_all(bytes).during("write")
    })
}

/// Temporary files of this destination that nobody holds are removed by the next save;
/// one whose owner holds its lock is kept, and so are the files of other destinations,
/// even those whose names start like this destination's.
#[test]
fn stale_temps_nobody_holds_are_removed_and_held_ones_kept() -> Result<()> {
    let dir = tempfile::tempdir().during("create")?;
    let path = dir.path().join("key.pk");
    let stale = dir.path().join(".key.pk.keycodec.abc123.tmp");
    let held = dir.path().join(".key.pk.keycodec.def456.tmp");
    let others = [
        // A save to `key.pk.7`, whose name starts like `key.pk`'s.
        dir.path().join(".key.pk.7.keycodec.abc123.tmp"),
        dir.path().join(".other.pk.keycodec.abc123.tmp"),
        // Not exactly the format: a user's files.
        dir.path().join(".key.pk.keycodec.abc1234.tmp"),
        dir.path().join(".key.pk.keycodec.abc12.tmp"),
        dir.path().join(".key.pk.keycodec.abc-12.tmp"),
        dir.path().join(".key.pk.123.abc123.tmp"),
    ];
    for file in others.iter().chain([&stale, &held]) {
        std::fs::write(file, b"partial").during("write")?;
    }
    let owner = File::open(&held).during("open")?;
    owner.lock().during("lock")?;
    save_bytes(&path, b"complete")?;
    assert!(!stale.exists(), "a temp nobody holds was kept");
    assert!(held.exists(), "a temp whose owner holds it was removed");
    for other in &others {
        assert!(other.exists(), "{} was removed", other.display());
    }
    drop(owner);
    save_bytes(&path, b"complete")?;
    assert!(!held.exists(), "released, it is stale");
    Ok(())
}

/// A new file gets the mode `File::create` gives (0666 less the umask); a replaced file's
/// mode is kept.
#[cfg(unix)]
#[test]
fn saves_give_new_files_the_usual_mode_and_keep_a_replaced_files_mode() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().during("create")?;
    let mode = |path: &Path| -> Result<u32> {
        Ok(std::fs::metadata(path).during("stat")?.permissions().mode() & 0o7777)
    };
    let reference = dir.path().join("reference");
    File::create(&reference).during("create")?;
    let path = dir.path().join("key.pk");
    save_bytes(&path, b"first")?;
    assert_eq!(mode(&path)?, mode(&reference)?);
    // Under a umask of 077 the usual mode is the private one too.
    if mode(&reference)? != 0o600 {
        assert_ne!(mode(&path)?, 0o600, "tempfile's private mode leaked");
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).during("chmod")?;
    save_bytes(&path, b"second")?;
    assert_eq!(mode(&path)?, 0o640);
    assert_eq!(std::fs::read(&path).during("read")?, b"second");
    Ok(())
}

/// Saving to a symbolic link replaces the file it points to, through a chain of links and
/// relative targets, and creates it when it is missing; the links stay links.
#[cfg(unix)]
#[test]
fn saving_to_a_link_replaces_its_target() -> Result<()> {
    let dir = tempfile::tempdir().during("create")?;
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).during("mkdir")?;
    let target = keys.join("v1.pk");
    save_bytes(&target, b"old")?;
    let link = dir.path().join("current.pk");
    let link_to_link = dir.path().join("prover.pk");
    std::os::unix::fs::symlink("keys/v1.pk", &link).during("symlink")?;
    std::os::unix::fs::symlink("current.pk", &link_to_link).during("symlink")?;
    save_bytes(&link_to_link, b"new")?;
    assert_eq!(std::fs::read(&target).during("read")?, b"new");
    for path in [&link, &link_to_link] {
        let meta = std::fs::symlink_metadata(path).during("lstat")?;
        assert!(meta.is_symlink(), "{} is no longer a link", path.display());
    }
    assert_eq!(std::fs::read_dir(&keys).during("list")?.count(), 1);
    // A dangling link: the file it names is created.
    let dangling = dir.path().join("next.pk");
    std::os::unix::fs::symlink("keys/v2.pk", &dangling).during("symlink")?;
    save_bytes(&dangling, b"v2")?;
    assert_eq!(std::fs::read(keys.join("v2.pk")).during("read")?, b"v2");
    // A loop is an error naming the link, not a hang.
    let a = dir.path().join("a");
    std::os::unix::fs::symlink("b", &a).during("symlink")?;
    std::os::unix::fs::symlink("a", dir.path().join("b")).during("symlink")?;
    assert!(matches!(
        save_bytes(&a, b"x"),
        Err(Error::Io { path: Some(_), .. })
    ));
    Ok(())
}

/// A save over several writeback steps, in writes of every size, gives exactly the
/// bytes written (and the header written last, after a seek back, lands at the start).
#[test]
fn saves_that_start_writeback_write_every_byte() -> Result<()> {
    let dir = tempfile::tempdir().during("create")?;
    let path = dir.path().join("key");
    let len = 3 * Writeback::STEP as usize + 12_345;
    let bytes: Vec<u8> = (0..len).map(|i| (i * 31 + i / 4099) as u8).collect();
    save_atomic(&path, Size::kib(64), |writer| {
        writer.write_all(&[0u8; 16]).during("write")?;
        let mut rest = bytes.get(16..).unwrap_or_default();
        let mut size = 1;
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at(size.min(rest.len()));
            writer.write_all(piece).during("write")?;
            rest = tail;
            size = (size * 7 + 3) % (9 << 20) + 1;
        }
        std::io::Seek::seek(writer, std::io::SeekFrom::Start(0)).during("seek")?;
        writer
            .write_all(bytes.get(..16).unwrap_or_default())
            .during("write")
    })?;
    assert!(std::fs::read(&path).during("read")? == bytes);
    Ok(())
}

/// Writeback is asked for after the first [`Writeback::FIRST_STEP`] bytes, then after steps
/// that double up to [`Writeback::STEP`]: a file of a few MB starts going to the disk while
/// it is written, a large one in requests of the largest step.
#[test]
fn writeback_steps_start_small_and_double() -> Result<()> {
    let dir = tempfile::tempdir().during("create")?;
    let file = File::create(dir.path().join("file")).during("create")?;
    let mut writeback = Writeback::new(&file);
    let piece = vec![7u8; 64 << 10];
    let mut requested_at = Vec::new();
    while writeback.position < 2 * Writeback::STEP {
        let before = writeback.pending;
        writeback.write_all(&piece).during("write")?;
        if writeback.pending != before {
            requested_at.push(writeback.pending);
        }
    }
    let mut expected = Vec::new();
    let (mut at, mut step) = (0, Writeback::FIRST_STEP);
    while at + step <= 2 * Writeback::STEP {
        at += step;
        expected.push(at);
        step = (step * 2).min(Writeback::STEP);
    }
    assert_eq!(requested_at, expected);
    assert_eq!(expected.first(), Some(&Writeback::FIRST_STEP));
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
