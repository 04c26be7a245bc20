//! A save that fails midway (an I/O error, a panic in the encoder) leaves the previous file
//! as it was; the codec wrapper that makes it fail.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};

use keycodec_core::backend_api::{DecodeContext, Key, KeyRef, PayloadReader};
use keycodec_core::{CodecId, Error, KeyCodec, KeyCodecExt, Result, SaveOptions, WireMode};

use super::files::leftover_temp_files;
use crate::{standard_plonk, StandardPlonk};

/// A save that fails midway (an I/O error, or a panic inside the encoder) leaves the previous
/// file intact and no temporary file behind.
pub fn failed_save_keeps_previous_file<K: KeyCodec + ?Sized>(codec: &K) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("key.pk");
    let fixture = standard_plonk();
    codec
        .save::<StandardPlonk, _>(&path, &fixture.pk, (), &SaveOptions::default())
        .expect("save");
    let before = std::fs::read(&path).expect("read");

    for failure in [Failure::IoError, Failure::Panic] {
        let failing = FailingCodec {
            inner: codec,
            fail_after: before.len() / 2,
            failure,
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            failing.save::<StandardPlonk, _>(&path, &fixture.pk, (), &SaveOptions::default())
        }));
        match (failure, result) {
            (Failure::IoError, Ok(Err(Error::Io { .. }))) | (Failure::Panic, Err(_)) => {}
            (_, other) => panic!(
                "{failure:?}: unexpected outcome {:?}",
                other.map(|r| r.err())
            ),
        }
        assert_eq!(
            std::fs::read(&path).expect("read"),
            before,
            "{failure:?} changed the file"
        );
        assert_eq!(
            leftover_temp_files(dir.path()),
            0,
            "{failure:?} left a temp file"
        );
    }
    // A save into a folder that does not exist fails cleanly.
    let missing = dir.path().join("missing").join("key.pk");
    let result = codec.save::<StandardPlonk, _>(&missing, &fixture.pk, (), &SaveOptions::default());
    match result {
        Err(Error::Io {
            path: Some(named), ..
        }) => assert_eq!(named, missing.parent().unwrap()),
        other => panic!(
            "expected an I/O error naming the folder, got {:?}",
            other.err()
        ),
    }
}

#[derive(Clone, Copy, Debug)]
enum Failure {
    IoError,
    Panic,
}

/// Wraps a codec so that encoding fails after `fail_after` payload bytes.
struct FailingCodec<'a, K: ?Sized> {
    inner: &'a K,
    fail_after: usize,
    failure: Failure,
}

impl<K: KeyCodec + ?Sized> KeyCodec for FailingCodec<'_, K> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn id(&self) -> CodecId {
        self.inner.id()
    }

    fn wire_modes(&self) -> &'static [WireMode] {
        self.inner.wire_modes()
    }

    fn wire_mode(&self) -> WireMode {
        self.inner.wire_mode()
    }

    fn encode(&self, key: KeyRef<'_>, out: &mut dyn Write) -> Result<()> {
        let mut limited = FailingWriter {
            inner: out,
            left: self.fail_after,
            failure: self.failure,
        };
        self.inner.encode(key, &mut limited)
    }

    fn decode(&self, input: &mut PayloadReader<'_>, context: &DecodeContext) -> Result<Key> {
        self.inner.decode(input, context)
    }
}

struct FailingWriter<'a> {
    inner: &'a mut dyn Write,
    left: usize,
    failure: Failure,
}

impl Write for FailingWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.left {
            match self.failure {
                Failure::IoError => return Err(std::io::Error::other("injected write failure")),
                Failure::Panic => panic!("injected panic inside the encoder"),
            }
        }
        self.left -= buf.len();
        self.inner.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
