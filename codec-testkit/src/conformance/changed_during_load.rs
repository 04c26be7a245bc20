//! Files changed while they load, at each read in turn and by another thread: every load
//! returns the original key or an error.

use keycodec_core::header::HEADER_LEN;
use keycodec_core::{Error, KeyCodec, KeyCodecExt, LoadOptions, Result, Validation};

use super::changing_file::{load_while_changing, Change, Mode};
use super::files::small_pk_file;
use super::Pk;
use crate::{pk_bytes, standard_plonk, StandardPlonk};

#[cfg(unix)]
/// A file truncated, or rewritten in place, while it loads, at every read of the load in
/// turn, through positioned reads and as a stream, checked and trusted (small buffers, so
/// that a load makes many reads): the load returns the original key or an error, and when
/// the rewrite came before a read it is an error. No key is ever built from bytes other
/// than the checksummed ones.
pub fn a_file_changed_while_it_loads_is_refused_or_loads_as_it_was<K: KeyCodec + ?Sized>(
    codec: &K,
) {
    let original = small_pk_file(codec);
    let expected = pk_bytes(&standard_plonk().pk);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("changing.pk");
    for validation in [Validation::Checked, Validation::Trusted] {
        let options = LoadOptions {
            buffers: keycodec_core::BufferConfig::both(keycodec_core::Size(256)),
            validation,
            ..LoadOptions::default()
        };
        for mode in [Mode::Positioned, Mode::Stream] {
            std::fs::write(&path, &original).expect("write");
            let (untouched, reads) =
                load_while_changing(codec, &path, mode, Change::Rewrite, usize::MAX, &options);
            let untouched = untouched.expect("the unchanged file loads");
            assert_eq!(pk_bytes(&untouched), expected);
            assert!(reads >= 2, "{mode:?}: only {reads} reads");
            for change in [Change::Truncate, Change::Rewrite] {
                for change_at in 0..reads {
                    std::fs::write(&path, &original).expect("write");
                    let (result, _) =
                        load_while_changing(codec, &path, mode, change, change_at, &options);
                    let case = format!("{mode:?} {validation:?} {change:?} at read {change_at}");
                    match result {
                        Ok(pk) => {
                            assert_eq!(pk_bytes(&pk), expected, "{case}: another key loaded");
                            assert_ne!(change_at, 0, "{case}: the changed file loaded");
                        }
                        Err(err) => assert!(!matches!(err, Error::Internal(_)), "{case}: {err}"),
                    }
                }
            }
        }
    }
}

#[cfg(unix)]
/// The same with real threads through [`KeyCodecExt::load`] and [`KeyCodecExt::read`]: the
/// file is truncated or rewritten at spread-out moments during loads of a larger key; every
/// load returns the original key or an error. Each round records when the file began to
/// change and when the load began and ended: for each way of loading and each change, at
/// least 6 rounds (of at most 60) must have changed the file while the load ran, or the test
/// proves nothing.
pub fn a_file_changed_by_another_thread_never_loads_other_bytes<K: KeyCodec + ?Sized>(codec: &K) {
    // Delays of 0 to 11 twelfths of a load; at least `DURING` changes of each kind must land
    // while a load runs, within `MAX_ROUNDS` rounds.
    const STEPS: u32 = 12;
    const DURING: u32 = 6;
    const MAX_ROUNDS: u32 = 60;
    let fixture = crate::standard_plonk_k10();
    let original = codec
        .to_vec::<StandardPlonk, _>(&fixture.pk, ())
        .expect("encode the k = 10 key");
    let expected = pk_bytes(&fixture.pk);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("changing.pk");
    let options = LoadOptions::default();
    let load = |mode: Mode| -> Result<Pk> {
        match mode {
            Mode::Positioned => codec.load::<StandardPlonk, Pk>(&path, (), &options),
            Mode::Stream => {
                let mut file = std::fs::File::open(&path).expect("open");
                codec.read::<StandardPlonk, Pk>(&mut file, (), &options)
            }
        }
    };
    // The rewritten payload, made before any load so that a change is one system call.
    let mut rewritten = original.get(HEADER_LEN..).expect("a payload").to_vec();
    rewritten.iter_mut().for_each(|byte| *byte ^= 0x5a);
    let change_now = |change: Change| {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("open to change");
        let at = std::time::Instant::now();
        match change {
            Change::Truncate => file.set_len(original.len() as u64 / 2).expect("truncate"),
            Change::Rewrite => file
                .write_all_at(&rewritten, HEADER_LEN as u64)
                .expect("rewrite"),
        }
        at
    };
    for mode in [Mode::Positioned, Mode::Stream] {
        // How long a load takes here: the fastest of three unchanged loads.
        let mut full = std::time::Duration::MAX;
        for _ in 0..3 {
            std::fs::write(&path, &original).expect("write");
            let started = std::time::Instant::now();
            assert_eq!(pk_bytes(&load(mode).expect("unchanged")), expected);
            full = full.min(started.elapsed());
        }
        let (mut rounds, mut during, mut refused) = (0u32, 0u32, 0u32);
        for change in [Change::Truncate, Change::Rewrite] {
            // Rounds until enough changes landed while a load ran, each delay a fraction of
            // the last load's time (which moves with the machine's load).
            let (mut last, mut landed) = (full, 0u32);
            for step in 0..MAX_ROUNDS {
                if landed >= DURING {
                    break;
                }
                std::fs::write(&path, &original).expect("write");
                let delay = last * (step % STEPS) / STEPS;
                let (result, began, ended, changed) = std::thread::scope(|scope| {
                    let changer = scope.spawn(|| {
                        std::thread::sleep(delay);
                        change_now(change)
                    });
                    let began = std::time::Instant::now();
                    let result = load(mode);
                    let ended = std::time::Instant::now();
                    (result, began, ended, changer.join().expect("the changer"))
                });
                rounds += 1;
                last = ended - began;
                let case = format!("{mode:?} {change:?} after {delay:?}");
                if began < changed && changed < ended {
                    landed += 1;
                }
                match result {
                    Ok(pk) => assert_eq!(pk_bytes(&pk), expected, "{case}: another key loaded"),
                    Err(err) => {
                        assert!(!matches!(err, Error::Internal(_)), "{case}: {err}");
                        refused += 1;
                    }
                }
            }
            assert!(
                landed >= DURING,
                "{mode:?} {change:?}: the file changed during only {landed} of {MAX_ROUNDS} \
                 loads; the test must change it while loads run"
            );
            during += landed;
        }
        println!(
            "{mode:?}: the file changed during {during} of {rounds} loads ({refused} refused)"
        );
    }
}
