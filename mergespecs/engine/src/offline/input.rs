//! The offline runner's input: JSON lines (documented in mergespecs/README.md) or a pcap.
//!
//! ```text
//! {"t_us": 1000, "hex": "4700003c..."}                                   a whole IPv4 datagram
//! {"t_us": 1000, "src": "10.0.1.1", "dst": "10.0.0.9", "group": 7,
//!  "payload_hex": "0fa01388...", "protocol": 17, "ttl": 64}               built by the runner
//! ```
//!
//! `t_us` (virtual time, microseconds) may be left out: the record then has the previous
//! record's time. `protocol` defaults to 17 (UDP), `ttl` to 64. Blank lines and lines
//! starting with `#` are skipped.

use std::net::Ipv4Addr;

use serde_json::Value;

use crate::ipv4::{self, FlowId};

use super::pcap;

/// One input datagram at its virtual arrival time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub t_us: u64,
    pub datagram: Vec<u8>,
    /// Where it came from, for messages: `line 3` or `packet 3`.
    pub origin: String,
}

pub fn parse_hex(text: &str) -> Result<Vec<u8>, String> {
    let clean: Vec<u8> = text
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b':')
        .collect();
    if !clean.len().is_multiple_of(2) {
        return Err("odd number of hex digits".into());
    }
    clean
        .chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).map_err(|_| "not hex".to_string())?;
            u8::from_str_radix(s, 16).map_err(|_| format!("`{s}` is not a hex byte"))
        })
        .collect()
}

/// Reads a whole input file: pcap if it starts like one, JSON lines otherwise.
pub fn read(bytes: &[u8]) -> Result<(Vec<Record>, Vec<String>), String> {
    if pcap::is_pcap(bytes) || bytes.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        let (packets, skipped) = pcap::read(bytes)?;
        let mut notes = Vec::new();
        if skipped.not_ipv4 > 0 {
            notes.push(format!(
                "{} frames were not IPv4 and were skipped",
                skipped.not_ipv4
            ));
        }
        if skipped.truncated > 0 {
            notes.push(format!(
                "{} frames were captured truncated and were skipped",
                skipped.truncated
            ));
        }
        let records = packets
            .into_iter()
            .enumerate()
            .map(|(i, p)| Record {
                t_us: p.t_us,
                datagram: p.datagram,
                origin: format!("packet {}", i + 1),
            })
            .collect();
        return Ok((records, notes));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| "input is neither a pcap file nor UTF-8 JSON lines".to_string())?;
    let mut records = Vec::new();
    let mut t_prev = 0;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let origin = format!("line {}", i + 1);
        let record = json_record(line, t_prev).map_err(|e| format!("{origin}: {e}"))?;
        t_prev = record.0;
        records.push(Record {
            t_us: record.0,
            datagram: record.1,
            origin,
        });
    }
    Ok((records, Vec::new()))
}

fn json_record(line: &str, t_prev: u64) -> Result<(u64, Vec<u8>), String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("expected a JSON object")?;
    let t_us = match obj.get("t_us") {
        None => t_prev,
        Some(t) => t
            .as_u64()
            .ok_or("t_us must be a non-negative integer (microseconds)")?,
    };
    let str_field = |name: &str| {
        obj.get(name)
            .map(|v| v.as_str().ok_or(format!("{name} must be a string")))
    };
    let num_field = |name: &str, max: u64| {
        obj.get(name).map(|v| {
            v.as_u64()
                .filter(|&n| n <= max)
                .ok_or(format!("{name} must be an integer 0..={max}"))
        })
    };
    if let Some(hex) = str_field("hex") {
        return Ok((t_us, parse_hex(hex?).map_err(|e| format!("hex: {e}"))?));
    }
    let addr = |name: &str| -> Result<Ipv4Addr, String> {
        let text = str_field(name).ok_or(format!(
            "needs \"hex\", or \"src\", \"dst\", \"group\" and \"payload_hex\" (missing {name})"
        ))??;
        text.parse()
            .map_err(|_| format!("{name}: `{text}` is not an IPv4 address"))
    };
    let src = addr("src")?;
    let dst = addr("dst")?;
    let group = num_field("group", u64::from(u32::MAX)).ok_or("missing group")?? as u32;
    let payload = parse_hex(str_field("payload_hex").ok_or("missing payload_hex")??)
        .map_err(|e| format!("payload_hex: {e}"))?;
    if payload.len() > ipv4::MAX_PAYLOAD {
        return Err(format!(
            "payload_hex is {} bytes; at most {} fit in a datagram",
            payload.len(),
            ipv4::MAX_PAYLOAD
        ));
    }
    let protocol = num_field("protocol", 255).transpose()?.unwrap_or(17) as u8;
    let ttl = num_field("ttl", 255).transpose()?.unwrap_or(64) as u8;
    let header = ipv4::Header {
        src,
        flow: FlowId::new(dst, group),
        protocol,
        ttl,
        dont_fragment: false,
        ident: 0,
    };
    let mut datagram = Vec::new();
    ipv4::write_datagram(&mut datagram, &header, &payload);
    Ok((t_us, datagram))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_record_forms() {
        let input = b"# comment\n{\"t_us\":5,\"src\":\"10.0.0.1\",\"dst\":\"10.0.0.9\",\"group\":7,\"payload_hex\":\"aabb\"}\n\n{\"hex\":\"45000014000000004011000001020304050607 08\"}\n";
        let (records, _) = read(input).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(
            ipv4::flow_key(&records[0].datagram),
            Ok(FlowId::new("10.0.0.9".parse().unwrap(), 7))
        );
        assert_eq!(&records[0].datagram[28..], &[0xaa, 0xbb]);
        assert_eq!(
            (
                records[1].t_us,
                records[1].datagram.len(),
                records[1].origin.as_str()
            ),
            (5, 20, "line 4")
        );
        let err = read(b"{\"t_us\":1,\"src\":\"10.0.0.1\"}").unwrap_err();
        assert!(err.starts_with("line 1: needs \"hex\""), "{err}");
        assert_eq!(
            read(b"{\"hex\":\"abc\"}").unwrap_err(),
            "line 1: hex: odd number of hex digits"
        );
    }
}
