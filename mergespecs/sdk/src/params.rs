//! Flow parameters. The ABI treats them as opaque bytes; the bundled specs (and this helper)
//! read them as text `key=value` pairs separated by whitespace, `,` or `;`, for example
//! `k=4 timeout_us=5000`. The `concast-spec run --param k=4` option writes that form.

/// The `key=value` pairs of `params`, in order. Items without `=` are skipped.
pub fn pairs(params: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    params
        .split(|&b| {
            b == b' ' || b == b'\n' || b == b'\t' || b == b'\r' || b == b',' || b == b';' || b == 0
        })
        .filter_map(|item| {
            let eq = item.iter().position(|&b| b == b'=')?;
            Some((&item[..eq], &item[eq + 1..]))
        })
}

/// The raw value of the last `key=...` in `params`.
pub fn get<'a>(params: &'a [u8], key: &str) -> Option<&'a [u8]> {
    pairs(params)
        .filter(|(k, _)| *k == key.as_bytes())
        .map(|(_, v)| v)
        .last()
}

/// `key` as an unsigned decimal (or `0x` hex) number. `Some(Err(()))` if present but not a number.
pub fn get_u64(params: &[u8], key: &str) -> Option<Result<u64, ()>> {
    get(params, key).map(parse_u64)
}

fn parse_u64(text: &[u8]) -> Result<u64, ()> {
    let (digits, radix) = match text {
        [b'0', b'x' | b'X', rest @ ..] => (rest, 16),
        _ => (text, 10),
    };
    if digits.is_empty() {
        return Err(());
    }
    let mut value: u64 = 0;
    for &b in digits {
        let d = (b as char).to_digit(radix).ok_or(())?;
        value = value
            .checked_mul(u64::from(radix))
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(())?;
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pairs_in_any_separator() {
        let p = b"k=4, timeout_us=0x10;flag\nk=5";
        assert_eq!(get_u64(p, "k"), Some(Ok(5)));
        assert_eq!(get_u64(p, "timeout_us"), Some(Ok(16)));
        assert_eq!(get_u64(p, "flag"), None);
        assert_eq!(get_u64(b"k=x", "k"), Some(Err(())));
        assert_eq!(get_u64(b"k=99999999999999999999999", "k"), Some(Err(())));
    }
}
