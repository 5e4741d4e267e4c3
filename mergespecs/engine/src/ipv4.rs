//! The engine's only IPv4 code, a thin adapter over the `concast-wire` crate
//! (docs/protocol.md section 1): reading (R, G) from a datagram and writing the header of
//! what the engine emits.

use std::fmt;
use std::net::Ipv4Addr;

use concast_wire::datagram::{classify, Datagram};

/// Header the engine writes: 20 bytes + `9E 06 G G G G 00 00`.
pub const HEADER_LEN: usize = concast_wire::build::CONCAST_HEADER_LEN;
/// Largest payload of an emitted datagram (its total length must fit in 16 bits).
pub const MAX_PAYLOAD: usize = 65_535 - HEADER_LEN;

/// A concast flow `(R, G)`: the wire crate's one type for it.
pub use concast_wire::FlowId;

/// Why a datagram belongs to no concast flow: a protocol error name of docs/protocol.md
/// (`bad_ihl`, `option_overflow`, ...) or `not_concast` for a well-formed datagram without
/// a Concast ID option (or a CSP message, which is signalling, not data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError(&'static str);

impl ParseError {
    pub const NOT_CONCAST: ParseError = ParseError("not_concast");

    pub fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The flow of a concast datagram (MplexPkts included), with every check of the protocol.
pub fn flow_key(datagram: &[u8]) -> Result<FlowId, ParseError> {
    match classify(datagram) {
        Ok(Datagram::Concast { ip, group } | Datagram::Mplex { ip, group, .. }) => {
            Ok(FlowId::new(ip.dst_addr(), group))
        }
        Ok(Datagram::Ipv4(_) | Datagram::Csp { .. }) => Err(ParseError::NOT_CONCAST),
        Err(e) => Err(ParseError(e.name())),
    }
}

/// The fields of an emitted concast datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub src: Ipv4Addr,
    pub flow: FlowId,
    pub protocol: u8,
    pub ttl: u8,
    pub dont_fragment: bool,
    pub ident: u16,
}

/// Appends `header` + `payload` to `out` as one concast datagram, options `9E 06 G 00 00`.
/// `payload` must be at most [`MAX_PAYLOAD`] bytes (the engine's output limit guarantees it).
pub fn write_datagram(out: &mut Vec<u8>, header: &Header, payload: &[u8]) {
    let start = out.len();
    out.resize(start + HEADER_LEN + payload.len(), 0);
    let params = concast_wire::ipv4::Params {
        src: header.src,
        dst: header.flow.receiver,
        protocol: header.protocol,
        ttl: header.ttl,
        tos: 0,
        ident: header.ident,
        dont_frag: header.dont_fragment,
        more_frags: false,
        frag_offset: 0,
    };
    concast_wire::build::concast(&mut out[start..], &params, header.flow.group, payload)
        .expect("the buffer is sized for it and the output limit keeps the payload in range");
}

/// The Internet checksum (RFC 1071) of `bytes`; 0 over a header with a correct checksum.
pub fn checksum(bytes: &[u8]) -> u16 {
    concast_wire::ipv4::checksum(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_datagrams_parse_back_with_a_valid_checksum() {
        let flow = FlowId::new(Ipv4Addr::new(10, 0, 0, 9), 0xDEAD_BEEF);
        let header = Header {
            src: Ipv4Addr::new(10, 0, 0, 1),
            flow,
            protocol: 17,
            ttl: 9,
            dont_fragment: true,
            ident: 7,
        };
        let mut out = vec![0xAA];
        write_datagram(&mut out, &header, b"hello");
        let d = &out[1..];
        assert_eq!(d.len(), HEADER_LEN + 5);
        assert_eq!(flow_key(d), Ok(flow));
        assert_eq!(checksum(&d[..HEADER_LEN]), 0);
        assert_eq!(&d[20..28], &[0x9E, 6, 0xDE, 0xAD, 0xBE, 0xEF, 0, 0]);
        assert_eq!((d[6] & 0x40, d[8], d[9]), (0x40, 9, 17));
    }

    #[test]
    fn option_walk_reports_the_protocol_error_names() {
        let mut d = vec![
            0x47, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 9,
        ];
        d.extend_from_slice(&[1, 0x9E, 6, 0, 0, 0, 7, 0]);
        assert_eq!(flow_key(&d).map(|k| k.group), Ok(7));
        d[22] = 5;
        assert_eq!(
            flow_key(&d).unwrap_err().name(),
            "concast_option_bad_length"
        );
        d[22] = 9;
        assert_eq!(flow_key(&d).unwrap_err().name(), "option_overflow");
        d[20] = 0;
        assert_eq!(
            flow_key(&d),
            Err(ParseError::NOT_CONCAST),
            "an option after EOL does not count"
        );
        assert_eq!(flow_key(&d[..10]).unwrap_err().name(), "truncated");
    }
}
