//! Hexadecimal text of digests and hashes: the one encoder and the one strict decoder every
//! digest, pin and cache name goes through.

/// Lowercase hex of `bytes`, two digits a byte.
pub fn encode(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        for nibble in [byte >> 4, byte & 0xf] {
            text.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
        }
    }
    text
}

/// The `N` bytes written as exactly `2 * N` hex digits (either case), surrounding whitespace
/// ignored; `None` for anything else, a sign or a prefix included (`u8::from_str_radix`
/// would take `+0` as a digit pair).
pub fn decode<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.trim().as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let mut bytes = [0u8; N];
    for (byte, pair) in bytes.iter_mut().zip(digits.chunks_exact(2)) {
        let &[high, low] = pair else {
            return None;
        };
        *byte = (digit(high)? << 4) | digit(low)?;
    }
    Some(bytes)
}

fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trips_and_refuses_signs_and_odd_lengths() {
        let bytes = [0x00, 0x01, 0xab, 0xff];
        assert_eq!(encode(&bytes), "0001abff");
        assert_eq!(decode::<4>("0001abff"), Some(bytes));
        assert_eq!(decode::<4>(" 0001ABFF\n"), Some(bytes));
        for bad in [
            "+0+1abff",
            "0001abf",
            "0001abfff",
            "0x01abff",
            "0001abfg",
            "-001abff",
        ] {
            assert_eq!(decode::<4>(bad), None, "{bad}");
        }
        assert_eq!(decode::<32>(&"+0".repeat(32)), None);
    }
}
