//! LEB128 unsigned integers.

use keycodec_core::backend_api::{Error, PayloadReader, Result};

/// Appends `value` as LEB128.
pub(crate) fn write(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Reads a LEB128 value of at most 10 bytes that fits in a `u64`.
///
/// # Errors
///
/// [`Error::Truncated`], or [`Error::Malformed`] for an overlong or overflowing encoding.
pub(crate) fn read(input: &mut PayloadReader<'_>, context: &'static str) -> Result<u64> {
    let mut value = 0u64;
    for index in 0..10u32 {
        let byte = input.read_u8(context)?;
        let bits = u64::from(byte & 0x7f);
        if index == 9 && bits > 1 {
            return Err(Error::Malformed(format!(
                "{context}: varint overflows 64 bits"
            )));
        }
        value |= bits << (7 * index);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(Error::Malformed(format!(
        "{context}: varint longer than 10 bytes"
    )))
}

/// Reads a LEB128 value that must be at most `max`.
///
/// # Errors
///
/// As [`read`], plus [`Error::Malformed`] when the value exceeds `max`.
pub(crate) fn read_at_most(
    input: &mut PayloadReader<'_>,
    max: u64,
    context: &'static str,
) -> Result<u64> {
    let value = read(input, context)?;
    if value > max {
        return Err(Error::Malformed(format!(
            "{context}: {value} exceeds {max}"
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_overflow() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut bytes = Vec::new();
            write(&mut bytes, value);
            let mut source = bytes.as_slice();
            let mut reader = PayloadReader::new(&mut source, bytes.len() as u64, true);
            assert_eq!(read(&mut reader, "test").ok(), Some(value));
        }
        let overlong = [0xffu8; 11];
        let mut source = &overlong[..];
        let mut reader = PayloadReader::new(&mut source, 11, true);
        assert!(matches!(
            read(&mut reader, "test"),
            Err(Error::Malformed(_))
        ));
    }
}
