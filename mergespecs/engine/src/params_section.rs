//! Receiver-given flow parameters travel inside the spec module, as a Wasm custom section
//! named `concast.params` (docs/mergespec-abi.md, "Parameters"). The module's SHA-256 covers
//! them, so every node that fetched the spec by hash merges with the same parameters, and CSP
//! needs no field for them.

pub const SECTION_NAME: &str = "concast.params";
const HEADER_LEN: usize = 8; // "\0asm" + version

fn leb_u32(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut value: u32 = 0;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        value |= u32::from(b & 0x7f).checked_shl(shift)?;
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn push_leb_u32(out: &mut Vec<u8>, mut v: u32) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// Every section as (id, whole section range, payload range); None if the bytes are not a
/// well-formed sequence of sections.
fn sections(module: &[u8]) -> Option<Vec<(u8, std::ops::Range<usize>, std::ops::Range<usize>)>> {
    if module.len() < HEADER_LEN || &module[..4] != b"\0asm" {
        return None;
    }
    let mut out = Vec::new();
    let mut at = HEADER_LEN;
    while at < module.len() {
        let start = at;
        let id = module[at];
        at += 1;
        let len = leb_u32(module, &mut at)? as usize;
        let end = at.checked_add(len).filter(|e| *e <= module.len())?;
        out.push((id, start..end, at..end));
        at = end;
    }
    Some(out)
}

/// The custom section's payload if `payload` is the named section we carry.
fn params_payload(module: &[u8], payload: std::ops::Range<usize>) -> Option<&[u8]> {
    let body = &module[payload];
    let mut at = 0;
    let name_len = leb_u32(body, &mut at)? as usize;
    let name = body.get(at..at.checked_add(name_len)?)?;
    (name == SECTION_NAME.as_bytes()).then(|| &body[at + name_len..])
}

/// The parameters embedded in `module` (the last `concast.params` section), if any.
pub fn embedded(module: &[u8]) -> Option<Vec<u8>> {
    sections(module)?
        .into_iter()
        .filter(|(id, _, _)| *id == 0)
        .filter_map(|(_, _, p)| params_payload(module, p).map(<[u8]>::to_vec))
        .last()
}

/// `module` with its `concast.params` sections replaced by one holding `params` (none if
/// `params` is empty). Errors if `module` is not a sequence of Wasm sections.
pub fn with_params(module: &[u8], params: &[u8]) -> Result<Vec<u8>, String> {
    let secs = sections(module).ok_or("not a WebAssembly module (bad header or section sizes)")?;
    let mut out = module[..HEADER_LEN].to_vec();
    for (id, whole, payload) in secs {
        if id == 0 && params_payload(module, payload).is_some() {
            continue;
        }
        out.extend_from_slice(&module[whole]);
    }
    if !params.is_empty() {
        let mut body = Vec::new();
        push_leb_u32(&mut body, SECTION_NAME.len() as u32);
        body.extend_from_slice(SECTION_NAME.as_bytes());
        body.extend_from_slice(params);
        out.push(0);
        push_leb_u32(&mut out, body.len() as u32);
        out.extend_from_slice(&body);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EMPTY_MODULE: &[u8] = b"\0asm\x01\0\0\0";

    #[test]
    fn embedding_replaces_and_reads_back() {
        assert_eq!(embedded(EMPTY_MODULE), None);
        let one = with_params(EMPTY_MODULE, b"fanin=4").unwrap();
        assert_eq!(embedded(&one).as_deref(), Some(&b"fanin=4"[..]));
        let two = with_params(&one, b"timeout_us=200000").unwrap();
        assert_eq!(embedded(&two).as_deref(), Some(&b"timeout_us=200000"[..]));
        assert_eq!(with_params(&two, b"").unwrap(), EMPTY_MODULE);
        // A 200-byte value needs a two-byte section length.
        let long = vec![b'x'; 200];
        assert_eq!(embedded(&with_params(EMPTY_MODULE, &long).unwrap()), Some(long));
    }

    #[test]
    fn other_custom_sections_and_bad_bytes() {
        let mut m = EMPTY_MODULE.to_vec();
        m.extend_from_slice(&[0, 5, 4, b'n', b'a', b'm', b'e']); // a "name" section
        let p = with_params(&m, b"k=2").unwrap();
        assert!(p.starts_with(&m), "other sections are kept");
        assert_eq!(embedded(&p).as_deref(), Some(&b"k=2"[..]));
        assert!(with_params(b"not wasm", b"k=2").is_err());
        assert_eq!(embedded(&[0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 0, 0xff]), None, "section past the end");
    }
}
