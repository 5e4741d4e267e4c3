//! Writing whole concast datagrams into a caller's buffer, in the layouts senders must emit.
//!
//! Each builder fills every length, IHL and the header checksum itself and returns the number
//! of bytes written, so callers never compute a length twice. For other options layouts (tests,
//! conformance probes) use [`crate::ipv4::build`] with the payload from these modules.

use crate::csp;
use crate::error::BuildError;
use crate::ipv4::{self, Params};
use crate::mplex::{self, HeaderRepr, RecordRepr};
use crate::options;

/// Header length of a concast datagram as senders emit it (IHL 7).
pub const CONCAST_HEADER_LEN: usize = ipv4::HEADER_LEN + 8;
/// Header length of a CSP datagram as senders emit it (IHL 6).
pub const CSP_HEADER_LEN: usize = ipv4::HEADER_LEN + 4;

/// Writes the 28-byte header of a concast datagram (`9E 06 G 00 00`, IHL 7) for a payload of
/// `payload_len` bytes the caller puts at `buf[28..]`: lets a sender build the payload in place.
pub fn concast_header(
    buf: &mut [u8],
    params: &Params,
    group: u32,
    payload_len: usize,
) -> Result<usize, BuildError> {
    ipv4::emit_header(buf, params, &options::concast_area(group), payload_len)
}

/// Writes a whole concast datagram: header as [`concast_header`], then `payload`.
pub fn concast(
    buf: &mut [u8],
    params: &Params,
    group: u32,
    payload: &[u8],
) -> Result<usize, BuildError> {
    let end = CONCAST_HEADER_LEN + payload.len();
    if buf.len() < end {
        return Err(BuildError::BufferTooSmall);
    }
    concast_header(buf, params, group, payload.len())?;
    buf[CONCAST_HEADER_LEN..end].copy_from_slice(payload);
    Ok(end)
}

/// Writes a CSP datagram: Router Alert `94 04 00 00` (IHL 6), protocol 253 whatever
/// `params.protocol` says, then the message. Refuses a message that would be malformed.
pub fn csp(buf: &mut [u8], params: &Params, message: &csp::Repr<'_>) -> Result<usize, BuildError> {
    let body = buf
        .get_mut(CSP_HEADER_LEN..)
        .ok_or(BuildError::BufferTooSmall)?;
    let len = message.emit(body)?;
    let params = Params {
        protocol: ipv4::protocol::CSP,
        ..*params
    };
    ipv4::emit_header(buf, &params, &options::ROUTER_ALERT_AREA, len)?;
    Ok(CSP_HEADER_LEN + len)
}

/// Builds an MplexPkt in a caller's buffer: `9E 06 G 00 00` (IHL 7), protocol 254, the
/// MplexHdr, then records appended one by one without allocation.
#[derive(Debug)]
pub struct MplexBuilder<'a> {
    header: &'a mut [u8],
    body: mplex::BodyBuilder<'a>,
    params: Params,
    group: u32,
    max_ttl: u8,
}

impl<'a> MplexBuilder<'a> {
    /// Starts an MplexPkt for `params.dst` in group `group` (normally [`crate::MPLEX_GROUP`]).
    /// `params.protocol` is ignored (always 254).
    pub fn new(
        buf: &'a mut [u8],
        params: &Params,
        group: u32,
        header: &HeaderRepr,
    ) -> Result<MplexBuilder<'a>, BuildError> {
        if buf.len() < CONCAST_HEADER_LEN {
            return Err(BuildError::BufferTooSmall);
        }
        let (ip, rest) = buf.split_at_mut(CONCAST_HEADER_LEN);
        let body = mplex::BodyBuilder::new(rest, header)?;
        let params = Params {
            protocol: ipv4::protocol::MPLEX,
            ..*params
        };
        Ok(MplexBuilder {
            header: ip,
            body,
            params,
            group,
            max_ttl: 0,
        })
    }

    /// Appends a record; on error nothing is written.
    pub fn push(&mut self, record: &RecordRepr<'_>) -> Result<(), BuildError> {
        self.body.push(record)?;
        self.max_ttl = self.max_ttl.max(record.ttl);
        Ok(())
    }

    /// True if a record with `payload_len` bytes of payload still fits.
    pub fn fits(&self, payload_len: usize) -> bool {
        self.body.fits(payload_len)
    }

    pub fn record_count(&self) -> usize {
        self.body.record_count()
    }

    /// Datagram length so far.
    pub fn len(&self) -> usize {
        CONCAST_HEADER_LEN + self.body.len()
    }

    /// Never true: the headers are always there.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Sets `DelayedSoFar` (at send time, section 3.2).
    pub fn set_delayed_so_far(&mut self, v: u32) {
        self.body.set_delayed_so_far(v);
    }

    /// Writes the IPv4 header with the MplexHdr and outer TTL as given; returns the datagram
    /// length. Refuses an MplexPkt without records.
    pub fn finish(self) -> Result<usize, BuildError> {
        let body_len = self.body.finish()?;
        ipv4::emit_header(
            self.header,
            &self.params,
            &options::concast_area(self.group),
            body_len,
        )?;
        Ok(CONCAST_HEADER_LEN + body_len)
    }

    /// Like [`MplexBuilder::finish`], but applies section 3.1 first: `initialTTL` and the
    /// outer TTL both become the largest record TTL.
    pub fn finish_bundle(mut self) -> Result<usize, BuildError> {
        self.body.set_initial_ttl(self.max_ttl);
        self.params.ttl = self.max_ttl;
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{classify, csp::BodyRepr, Datagram, Error};
    use core::net::Ipv4Addr;

    const S: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
    const R: Ipv4Addr = Ipv4Addr::new(10, 0, 9, 9);

    #[test]
    fn concast_layout() {
        let mut buf = [0u8; 64];
        let n = concast(&mut buf, &Params::new(S, R, 17), 7, b"hi").unwrap();
        assert_eq!(n, 30);
        assert_eq!(&buf[20..28], &[0x9E, 6, 0, 0, 0, 7, 0, 0]);
        assert_eq!(buf[0], 0x47);
        match classify(&buf[..n]).unwrap() {
            Datagram::Concast { ip, group } => {
                assert_eq!(group, 7);
                assert!(ip.verify_checksum());
                assert_eq!(ip.payload(), b"hi");
            }
            d => panic!("{d:?}"),
        }
        assert_eq!(
            concast(&mut buf[..29], &Params::new(S, R, 17), 7, b"hi"),
            Err(BuildError::BufferTooSmall)
        );
    }

    #[test]
    fn csp_layout() {
        let mut buf = [0u8; 64];
        let m = csp::Repr {
            group: 7,
            receiver: R,
            seq: 1,
            body: BodyRepr::Leave,
        };
        let n = csp(&mut buf, &Params::new(S, R, 0), &m).unwrap();
        assert_eq!(n, 40);
        assert_eq!(&buf[20..24], &[0x94, 4, 0, 0]);
        assert_eq!(buf[9], 253);
        let Datagram::Csp { message, .. } = classify(&buf[..n]).unwrap() else {
            panic!()
        };
        assert_eq!(csp::Repr::parse(&message), m);
    }

    #[test]
    fn mplex_bundle() {
        let mut buf = [0u8; 128];
        let mut b =
            MplexBuilder::new(&mut buf, &Params::new(S, R, 0), 1, &HeaderRepr::default()).unwrap();
        b.push(&RecordRepr {
            src: S,
            ttl: 60,
            protocol: 6,
            tos: 0,
            payload: &[0; 20],
        })
        .unwrap();
        b.push(&RecordRepr {
            src: S,
            ttl: 63,
            protocol: 6,
            tos: 0,
            payload: &[0; 20],
        })
        .unwrap();
        let n = b.finish_bundle().unwrap();
        let Datagram::Mplex { ip, group, mplex } = classify(&buf[..n]).unwrap() else {
            panic!()
        };
        assert_eq!((ip.ttl(), mplex.initial_ttl(), group), (63, 63, 1));
        assert_eq!(mplex.records().count(), 2);
        let b =
            MplexBuilder::new(&mut buf, &Params::new(S, R, 0), 1, &HeaderRepr::default()).unwrap();
        assert_eq!(
            b.finish(),
            Err(BuildError::Invalid(Error::MplexZeroRecords))
        );
    }
}
