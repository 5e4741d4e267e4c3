//! Classic pcap (not pcapng), read and written by hand: it is 24 bytes of file header and
//! 16 bytes per record. Reading keeps the IPv4 datagrams of Ethernet, raw-IP and Linux
//! cooked captures; writing uses the raw-IP link type.

/// One captured IPv4 datagram and its capture time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub t_us: u64,
    pub datagram: Vec<u8>,
}

/// What a capture held besides usable IPv4 datagrams.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped {
    pub not_ipv4: usize,
    pub truncated: usize,
}

const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_RAW: u32 = 101;
const DLT_RAW_BSD: u32 = 12;
const DLT_RAW_OPENBSD: u32 = 14;
const LINKTYPE_LINUX_SLL: u32 = 113;
const LINKTYPE_IPV4: u32 = 228;
const LINKTYPE_LINUX_SLL2: u32 = 276;

/// Is this the start of a classic pcap file?
pub fn is_pcap(bytes: &[u8]) -> bool {
    matches!(
        bytes.get(..4),
        Some(
            [0xa1, 0xb2, 0xc3, 0xd4]
                | [0xd4, 0xc3, 0xb2, 0xa1]
                | [0xa1, 0xb2, 0x3c, 0x4d]
                | [0x4d, 0x3c, 0xb2, 0xa1]
        )
    )
}

/// The IPv4 datagrams of a capture, timestamps in microseconds since its first record.
pub fn read(bytes: &[u8]) -> Result<(Vec<Packet>, Skipped), String> {
    if bytes.get(..4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        return Err(
            "pcapng is not supported: convert it with `editcap -F pcap IN.pcapng OUT.pcap`".into(),
        );
    }
    if bytes.len() < 24 || !is_pcap(bytes) {
        return Err("not a pcap file (bad magic number)".into());
    }
    let little = bytes[0] == 0xd4 || bytes[0] == 0x4d;
    let nanos = bytes[..4] == [0xa1, 0xb2, 0x3c, 0x4d] || bytes[..4] == [0x4d, 0x3c, 0xb2, 0xa1];
    let u32_at = |at: usize| {
        let b = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let linktype = u32_at(20) & 0x0FFF_FFFF;
    let mut packets = Vec::new();
    let mut skipped = Skipped::default();
    let mut first: Option<u64> = None;
    let mut at = 24;
    while at < bytes.len() {
        if at + 16 > bytes.len() {
            return Err(format!("record header at byte {at} is cut short"));
        }
        let (sec, frac, incl, orig) = (
            u32_at(at),
            u32_at(at + 4),
            u32_at(at + 8) as usize,
            u32_at(at + 12) as usize,
        );
        let data = bytes
            .get(at + 16..at + 16 + incl)
            .ok_or_else(|| format!("record at byte {at} runs past the end of the file"))?;
        at += 16 + incl;
        let t = u64::from(sec) * 1_000_000
            + if nanos {
                u64::from(frac) / 1000
            } else {
                u64::from(frac)
            };
        let t0 = *first.get_or_insert(t);
        if incl < orig {
            skipped.truncated += 1;
            continue;
        }
        match ipv4_of(linktype, data)? {
            Some(datagram) => packets.push(Packet {
                t_us: t.saturating_sub(t0),
                datagram: datagram.to_vec(),
            }),
            None => skipped.not_ipv4 += 1,
        }
    }
    Ok((packets, skipped))
}

/// The payload after an EtherType (and any VLAN tags), if it is IPv4.
fn ethertype_payload(mut ethertype: u16, mut rest: &[u8]) -> Option<&[u8]> {
    while (ethertype == 0x8100 || ethertype == 0x88a8) && rest.len() >= 4 {
        ethertype = u16::from_be_bytes([rest[2], rest[3]]);
        rest = &rest[4..];
    }
    (ethertype == 0x0800).then_some(rest)
}

/// The IPv4 datagram in one frame, if it carries one.
fn ipv4_of(linktype: u32, frame: &[u8]) -> Result<Option<&[u8]>, String> {
    let ip = match linktype {
        LINKTYPE_ETHERNET if frame.len() >= 14 => {
            ethertype_payload(u16::from_be_bytes([frame[12], frame[13]]), &frame[14..])
        }
        LINKTYPE_LINUX_SLL if frame.len() >= 16 => {
            ethertype_payload(u16::from_be_bytes([frame[14], frame[15]]), &frame[16..])
        }
        LINKTYPE_LINUX_SLL2 if frame.len() >= 20 => {
            ethertype_payload(u16::from_be_bytes([frame[0], frame[1]]), &frame[20..])
        }
        LINKTYPE_RAW | DLT_RAW_BSD | DLT_RAW_OPENBSD | LINKTYPE_IPV4 => Some(frame),
        LINKTYPE_ETHERNET | LINKTYPE_LINUX_SLL | LINKTYPE_LINUX_SLL2 => None,
        other => {
            return Err(format!(
                "pcap link type {other} is not supported (Ethernet, raw IP and Linux cooked are)"
            ))
        }
    };
    Ok(ip.filter(|d| d.first().is_some_and(|b| b >> 4 == 4)))
}

/// A classic pcap of raw IPv4 datagrams (link type 101), microsecond timestamps.
pub fn write(packets: impl IntoIterator<Item = (u64, Vec<u8>)>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]); // thiszone, sigfigs
    out.extend_from_slice(&65_535u32.to_le_bytes());
    out.extend_from_slice(&LINKTYPE_RAW.to_le_bytes());
    for (t_us, datagram) in packets {
        out.extend_from_slice(&((t_us / 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((t_us % 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(datagram.len() as u32).to_le_bytes());
        out.extend_from_slice(&(datagram.len() as u32).to_le_bytes());
        out.extend_from_slice(&datagram);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_raw_ip_and_reads_ethernet_with_vlan() {
        let d = vec![
            0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
        ];
        let file = write(vec![(5_000_123, d.clone()), (5_000_200, d.clone())]);
        assert!(is_pcap(&file));
        let (packets, skipped) = read(&file).unwrap();
        assert_eq!(
            packets,
            vec![
                Packet {
                    t_us: 0,
                    datagram: d.clone()
                },
                Packet {
                    t_us: 77,
                    datagram: d.clone()
                }
            ]
        );
        assert_eq!(skipped, Skipped::default());

        let mut eth = file[..24].to_vec();
        eth[20] = 1; // Ethernet
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x81, 0x00, 0, 5, 0x08, 0x00]);
        frame.extend_from_slice(&d);
        let arp = [vec![0u8; 12], vec![0x08, 0x06, 0, 0]].concat();
        for f in [&frame, &arp] {
            eth.extend_from_slice(&[0; 8]);
            eth.extend_from_slice(&(f.len() as u32).to_le_bytes());
            eth.extend_from_slice(&(f.len() as u32).to_le_bytes());
            eth.extend_from_slice(f);
        }
        let (packets, skipped) = read(&eth).unwrap();
        assert_eq!(packets.len(), 1);
        assert_eq!(packets[0].datagram, d);
        assert_eq!(skipped.not_ipv4, 1);
        assert!(read(b"\x0a\x0d\x0d\x0a....")
            .unwrap_err()
            .contains("pcapng"));
    }
}
