//! Crash safety: a process saving keys in a loop is killed with SIGKILL at many points; the
//! destination must always be absent or a complete key (the previous or the new one), and the
//! next save must leave no temporary file behind. The child marks when each save begins and
//! ends, and the test requires a good share of the kills to land during a save.
//!
//! The test binary re-runs itself as the saving child (`crash_child_helper`, which does
//! nothing in a normal test run).

// Test code: failing loudly is its job.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keycodec::Backend;
use keycodec_core::halo2_proofs::plonk::ProvingKey;
use keycodec_core::halo2curves::bn256::{Fr, G1Affine};
use keycodec_core::{KeyCodec, KeyCodecExt, LoadOptions, SaveOptions};
use keycodec_testkit::conformance::leftover_temp_files;
use keycodec_testkit::{generate, StandardPlonk};

const CHILD_DIR: &str = "KEYCODEC_CRASH_CHILD_DIR";
/// Two keys of different sizes, so that a torn write could not pass for either.
const KS: [u32; 2] = [9, 10];
const KILLS: u64 = 40;

fn keys() -> Vec<ProvingKey<G1Affine>> {
    KS.iter()
        .map(|&k| generate(k, StandardPlonk(Fr::from(1u64)), vec![], false).pk)
        .collect()
}

/// Run by the parent test as a separate process: saves the two keys alternately, forever.
#[test]
fn crash_child_helper() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return; // a normal test run: this is only a helper
    };
    let dir = PathBuf::from(dir);
    let keys = keys();
    // The phase marker: odd while a save runs, even between saves (one positioned write
    // each, which outlives a SIGKILL in the page cache).
    let phase = std::fs::File::create(dir.join(PHASE)).unwrap();
    let mark = |value: u64| {
        std::os::unix::fs::FileExt::write_all_at(&phase, &value.to_le_bytes(), 0).unwrap();
    };
    std::fs::write(dir.join("ready"), b"").unwrap();
    let mut saves = 0u64;
    loop {
        for pk in &keys {
            mark(2 * saves + 1);
            backend()
                .save::<StandardPlonk, _>(&dir.join("key.pk"), pk, (), &SaveOptions::default())
                .unwrap();
            saves += 1;
            mark(2 * saves);
        }
    }
}

/// The child's phase marker file (see `crash_child_helper`).
const PHASE: &str = "phase";

/// The child's phase when it was killed: `(saves completed, whether a save was running)`.
fn phase(dir: &Path) -> (u64, bool) {
    let bytes = std::fs::read(dir.join(PHASE)).unwrap_or_default();
    let value = bytes
        .get(..8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_le_bytes);
    (value / 2, value % 2 == 1)
}

/// Crash safety is the core's (every backend saves through it): test it with whichever
/// backend this build has.
fn backend() -> &'static dyn KeyCodec {
    Backend::compiled()
        .next()
        .and_then(|backend| backend.codec().ok())
        .expect("at least one backend")
}

/// Waits until `done`, failing with `never` after 60 s.
fn wait_until(done: impl Fn() -> bool, never: &str) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(60), "{never}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn kill_9_mid_save_leaves_old_or_new_file_and_no_temp_after_the_next_save() {
    let codec = backend();
    let complete: Vec<Vec<u8>> = keys()
        .iter()
        .map(|pk| codec.to_vec::<StandardPlonk, _>(pk, ()).unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key.pk");
    let exe = std::env::current_exe().unwrap();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let (mut absent, mut whole, mut temps_left) = (0, 0, 0);
    // Kills that landed while a save ran, and those of them after an earlier save completed
    // (the old file there to be kept whole while the new one was being written).
    let (mut mid_save, mut mid_save_over_a_file) = (0, 0);
    for kill in 0..KILLS {
        let _ = std::fs::remove_file(dir.path().join("ready"));
        let _ = std::fs::remove_file(dir.path().join(PHASE));
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash::crash_child_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_until(
            || dir.path().join("ready").exists(),
            "the child never became ready",
        );
        // Every fourth kill waits for a save to complete first: on a disk slow to sync, the
        // kills of the others could all land in the first save.
        if kill % 4 == 3 {
            wait_until(|| phase(dir.path()).0 > 0, "no save completed");
        }
        // xorshift: a spread of kill points within and between saves (a save takes a few ms).
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        std::thread::sleep(Duration::from_micros(state % 40_000));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let (saved, saving) = phase(dir.path());
        if saving {
            mid_save += 1;
            if saved > 0 || path.exists() {
                mid_save_over_a_file += 1;
            }
        }

        match std::fs::read(&path) {
            Err(_) => absent += 1,
            Ok(bytes) => {
                assert!(
                    complete.contains(&bytes),
                    "a torn file of {} bytes was left",
                    bytes.len()
                );
                let loaded: ProvingKey<G1Affine> = codec
                    .load::<StandardPlonk, _>(&path, (), &LoadOptions::default())
                    .unwrap();
                assert!(KS.contains(&loaded.get_vk().get_domain().k()));
                whole += 1;
            }
        }
        temps_left += leftover_temp_files(dir.path());
    }
    println!(
        "{KILLS} kills: {mid_save} during a save ({mid_save_over_a_file} over an earlier file), \
         {absent} before the first save, {whole} complete files, \
         {temps_left} temp files left by killed saves"
    );
    assert!(whole > 0, "no kill landed after a save completed");
    assert!(
        mid_save * 4 >= KILLS,
        "only {mid_save} of {KILLS} kills landed during a save: the test proves little"
    );
    assert!(
        mid_save_over_a_file > 0,
        "no kill landed during a save over a complete file"
    );
    // The next save cleans up after the dead processes.
    codec
        .save::<StandardPlonk, _>(&path, &keys()[0], (), &SaveOptions::default())
        .unwrap();
    assert_eq!(
        leftover_temp_files(dir.path()),
        0,
        "stale temp files survived the next save"
    );
}
