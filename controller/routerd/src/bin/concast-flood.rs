//! concast-flood: sends malformed concast traffic into an interface as fast as it can, for
//! the flood tests (tests/system/test_reliability_flood.py, docs/reliability.md).
//!
//! Each kind is one fixed datagram with a correct IPv4 header checksum (so nothing drops it
//! for that), wrapped in an Ethernet frame to `--dst-mac` and sent in sendmmsg batches
//! through an AF_PACKET socket (routerd's `CpuPort`), the kinds taking turns:
//!
//! - `option`: UDP to `--dst`:`--dport` whose Concast ID option says length 4
//!   (routerd: `malformed.concast_option_bad_length`);
//! - `csp`: protocol 253 with Router Alert and 4 bytes of a 16-byte CSP header
//!   (`malformed.csp_truncated`);
//! - `mplex`: protocol 254 with a Concast ID option (group 1) and 4 bytes of MplexPkt
//!   header (`malformed.mplex_truncated_header`), to `--mplex-dst` (a router's own address, which
//!   OVS always diverts);
//! - `fragment`: the first fragment (MF set) of a concast UDP datagram of `--group` to
//!   `--dst`:`--dport`: well formed, but it never completes at the receiver.
//!
//! Prints one JSON line: frames sent per kind, seconds, and the rate reached.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use concast_routerd::cpu_port::{parse_mac, CpuPort, BATCH};
use concast_wire::ipv4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Kind {
    Option,
    Csp,
    Mplex,
    Fragment,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Option => "option",
            Kind::Csp => "csp",
            Kind::Mplex => "mplex",
            Kind::Fragment => "fragment",
        }
    }
}

#[derive(Parser, Debug)]
#[command(name = "concast-flood", about = "Send malformed concast traffic into an interface as fast as possible")]
struct Args {
    /// Interface to send on (AF_PACKET), e.g. a host's own interface inside its namespace.
    #[arg(long)]
    iface: String,
    /// Destination MAC of every frame (the host's gateway).
    #[arg(long, value_parser = parse_mac)]
    dst_mac: [u8; 6],
    /// IPv4 source of every datagram.
    #[arg(long)]
    src: Ipv4Addr,
    /// The receiver R the option, CSP and fragment kinds go to.
    #[arg(long)]
    dst: Ipv4Addr,
    /// Where the MplexPkts go (default: --dst).
    #[arg(long)]
    mplex_dst: Option<Ipv4Addr>,
    /// UDP destination port of the option and fragment kinds.
    #[arg(long, default_value_t = 5000)]
    dport: u16,
    /// Concast group in the fragments' option.
    #[arg(long, default_value_t = 7)]
    group: u32,
    /// Kinds to send, taking turns (repeatable; default all four).
    #[arg(long = "kind", value_enum)]
    kinds: Vec<Kind>,
    /// Seconds of sending.
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Stop after this many frames in all (0: only the duration counts).
    #[arg(long, default_value_t = 0)]
    count: u64,
    /// Frames per second (0 = as fast as the socket takes them).
    #[arg(long, default_value_t = 0)]
    rate: u64,
}

/// An IPv4 datagram with `options` (a multiple of 4 bytes) and a correct header checksum.
fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, options: &[u8], flags_frag: u16, payload: &[u8]) -> Vec<u8> {
    assert!(options.len() % 4 == 0 && options.len() <= 40);
    let ihl = 20 + options.len();
    let total = (ihl + payload.len()) as u16;
    let mut d = vec![0x40 | (ihl / 4) as u8, 0];
    d.extend_from_slice(&total.to_be_bytes());
    d.extend_from_slice(&[0x12, 0x34]);
    d.extend_from_slice(&flags_frag.to_be_bytes());
    d.extend_from_slice(&[64, proto, 0, 0]);
    d.extend_from_slice(&src.octets());
    d.extend_from_slice(&dst.octets());
    d.extend_from_slice(options);
    let c = ipv4::checksum(&d); // the field is still zero here
    d[10..12].copy_from_slice(&c.to_be_bytes());
    d.extend_from_slice(payload);
    d
}

fn udp(sport: u16, dport: u16, body: &[u8]) -> Vec<u8> {
    let mut u = Vec::with_capacity(8 + body.len());
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]); // no checksum
    u.extend_from_slice(body);
    u
}

fn concast_option(group: u32) -> [u8; 8] {
    let g = group.to_be_bytes();
    [0x9E, 6, g[0], g[1], g[2], g[3], 0x01, 0x01] // then two NOPs
}

fn datagram(kind: Kind, a: &Args) -> Vec<u8> {
    let body = [0u8; 24];
    match kind {
        Kind::Option => ipv4(a.src, a.dst, 17, &[0x9E, 4, 0, 7], 0x4000, &udp(4000, a.dport, &body)),
        Kind::Csp => ipv4(a.src, a.dst, 253, &[0x94, 4, 0, 0], 0x4000, &[1, 1, 0, 0x2C]),
        Kind::Mplex => ipv4(a.src, a.mplex_dst.unwrap_or(a.dst), 254, &concast_option(1), 0x4000, &[1, 0, 0, 0]),
        // MF set, offset 0: the first fragment of a datagram whose rest never comes.
        Kind::Fragment => ipv4(a.src, a.dst, 17, &concast_option(a.group), 0x2000, &udp(4000, a.dport, &body)),
    }
}

fn frame(dst_mac: [u8; 6], src_mac: [u8; 6], ip: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + ip.len());
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(ip);
    f
}

fn main() -> ExitCode {
    let mut a = Args::parse();
    if a.kinds.is_empty() {
        a.kinds = vec![Kind::Option, Kind::Csp, Kind::Mplex, Kind::Fragment];
    }
    let port = match CpuPort::open_tx(&a.iface) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("concast-flood: cannot open {}: {e}", a.iface);
            return ExitCode::from(2);
        }
    };
    // One batch holds the kinds in turn, so every batch sends each about equally.
    let frames: Vec<(Kind, Vec<u8>)> = (0..BATCH)
        .map(|i| a.kinds[i % a.kinds.len()])
        .map(|k| (k, frame(a.dst_mac, port.mac, &datagram(k, &a))))
        .collect();
    let batch: Vec<&[u8]> = frames.iter().map(|(_, f)| f.as_slice()).collect();
    let mut sent = vec![0u64; a.kinds.len()];
    let mut total = 0u64;
    let mut refused = 0u64;
    let start = Instant::now();
    let stop = start + Duration::from_secs_f64(a.duration);
    while Instant::now() < stop && (a.count == 0 || total < a.count) {
        let room = if a.count == 0 { BATCH as u64 } else { (a.count - total).min(BATCH as u64) };
        let n = match port.send_batch(&batch[..room as usize]) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => {
                eprintln!("concast-flood: send: {e}");
                return ExitCode::from(1);
            }
        };
        if n < room as usize {
            refused += 1;
            std::thread::yield_now();
        }
        for (k, _) in frames.iter().take(n) {
            sent[a.kinds.iter().position(|x| x == k).expect("a listed kind")] += 1;
        }
        total += n as u64;
        if a.rate > 0 {
            let due = start + Duration::from_secs_f64(total as f64 / a.rate as f64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let per_kind: Vec<String> = a.kinds.iter().zip(&sent).map(|(k, n)| format!("\"{}\": {n}", k.name())).collect();
    println!(
        "{{\"sent\": {{{}}}, \"total\": {total}, \"seconds\": {secs:.3}, \"rate_pps\": {:.0}, \"short_batches\": {refused}}}",
        per_kind.join(", "),
        total as f64 / secs
    );
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_carries_a_right_header_checksum() {
        let a = Args::parse_from([
            "concast-flood", "--iface", "x", "--dst-mac", "02:00:00:00:00:01",
            "--src", "10.0.0.1", "--dst", "10.0.0.2",
        ]);
        for k in [Kind::Option, Kind::Csp, Kind::Mplex, Kind::Fragment] {
            let d = datagram(k, &a);
            let p = ipv4::Packet::new_unchecked(&d[..]);
            assert!(p.verify_checksum(), "{}", k.name());
            assert_ne!(p.checksum(), 0, "{}", k.name());
        }
    }
}
