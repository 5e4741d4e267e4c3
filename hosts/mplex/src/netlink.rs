//! Netlink framing for the netfilter subsystems (NFQUEUE here): message headers, the
//! `nfgenmsg` header that follows them, and attributes, as smoltcp-style views for reading
//! and a small builder for writing.
//!
//! Netlink headers and attribute headers are in host byte order; netfilter attribute
//! *values* are in network byte order (the `nfnetlink` convention).

/// `struct nlmsghdr`: length, type, flags, sequence, port ID.
pub const NLMSG_HDRLEN: usize = 16;
/// `struct nfgenmsg`: family, version, resource ID (the queue number, big-endian).
pub const NFGEN_HDRLEN: usize = 4;
/// `struct nlattr`: length, type.
pub const NLA_HDRLEN: usize = 4;

pub const NLMSG_ERROR: u16 = 2;
pub const NLMSG_DONE: u16 = 3;
pub const NLM_F_REQUEST: u16 = 1;
pub const NLM_F_ACK: u16 = 4;
/// Attribute types carry two flag bits (nested, byte order) above the type itself.
const NLA_TYPE_MASK: u16 = 0x3fff;

/// Netlink aligns messages and attributes to 4 bytes.
pub const fn align(n: usize) -> usize {
    (n + 3) & !3
}

/// One netlink message inside a received datagram.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    bytes: &'a [u8],
}

impl<'a> Message<'a> {
    pub fn msg_type(&self) -> u16 {
        u16::from_ne_bytes([self.bytes[4], self.bytes[5]])
    }

    pub fn seq(&self) -> u32 {
        u32::from_ne_bytes([self.bytes[8], self.bytes[9], self.bytes[10], self.bytes[11]])
    }

    /// Bytes after the netlink header.
    pub fn payload(&self) -> &'a [u8] {
        &self.bytes[NLMSG_HDRLEN..]
    }

    /// For `NLMSG_ERROR`: the errno the kernel answered (0 = an acknowledgement).
    pub fn error_code(&self) -> Option<i32> {
        let p = self.payload();
        (self.msg_type() == NLMSG_ERROR && p.len() >= 4)
            .then(|| -i32::from_ne_bytes([p[0], p[1], p[2], p[3]]))
    }

    /// Attributes after the `nfgenmsg` header (netfilter messages).
    pub fn nf_attrs(&self) -> Attrs<'a> {
        Attrs {
            rest: self.payload().get(NFGEN_HDRLEN..).unwrap_or(&[]),
        }
    }
}

/// Splits a received datagram into its messages; stops at the first one whose length does
/// not fit (the kernel never sends such, so it only guards against garbage).
#[derive(Debug, Clone)]
pub struct Messages<'a> {
    rest: &'a [u8],
}

pub fn messages(datagram: &[u8]) -> Messages<'_> {
    Messages { rest: datagram }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;

    fn next(&mut self) -> Option<Message<'a>> {
        let len = self
            .rest
            .get(..4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize)?;
        if len < NLMSG_HDRLEN || len > self.rest.len() {
            self.rest = &[];
            return None;
        }
        let bytes = &self.rest[..len];
        self.rest = self.rest.get(align(len)..).unwrap_or(&[]);
        Some(Message { bytes })
    }
}

/// Attributes back to back: `(type, value)`.
#[derive(Debug, Clone)]
pub struct Attrs<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);

    fn next(&mut self) -> Option<(u16, &'a [u8])> {
        let h = self.rest.get(..NLA_HDRLEN)?;
        let len = usize::from(u16::from_ne_bytes([h[0], h[1]]));
        let kind = u16::from_ne_bytes([h[2], h[3]]) & NLA_TYPE_MASK;
        if len < NLA_HDRLEN || len > self.rest.len() {
            self.rest = &[];
            return None;
        }
        let value = &self.rest[NLA_HDRLEN..len];
        self.rest = self.rest.get(align(len)..).unwrap_or(&[]);
        Some((kind, value))
    }
}

/// Appends netfilter messages to a buffer; several may go out in one `send`.
#[derive(Debug, Default)]
pub struct Builder {
    buf: Vec<u8>,
    /// Where the message being built starts (its length is patched on each append).
    start: usize,
}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Starts a message: netlink header, then `nfgenmsg` (AF_UNSPEC family for the
    /// subsystem, version 0, `res_id` in network order).
    pub fn message(
        &mut self,
        msg_type: u16,
        flags: u16,
        seq: u32,
        family: u8,
        res_id: u16,
    ) -> &mut Builder {
        self.start = self.buf.len();
        self.buf
            .extend_from_slice(&(NLMSG_HDRLEN as u32 + NFGEN_HDRLEN as u32).to_ne_bytes());
        self.buf.extend_from_slice(&msg_type.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes()); // port ID 0: to the kernel
        self.buf.extend_from_slice(&[family, 0]);
        self.buf.extend_from_slice(&res_id.to_be_bytes());
        self
    }

    /// Appends an attribute to the message being built, padded to 4 bytes.
    pub fn attr(&mut self, kind: u16, value: &[u8]) -> &mut Builder {
        let len = (NLA_HDRLEN + value.len()) as u16;
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(value);
        self.buf.resize(align(self.buf.len()), 0);
        let total = (self.buf.len() - self.start) as u32;
        self.buf[self.start..self.start + 4].copy_from_slice(&total.to_ne_bytes());
        self
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn clear(&mut self) {
        self.buf.clear();
        self.start = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_messages_parse_back() {
        let mut b = Builder::new();
        b.message(0x0302, NLM_F_REQUEST, 7, 2, 4242)
            .attr(1, &[1, 0, 0, 2])
            .attr(2, &[0xff, 0xff, 0, 0, 2]);
        b.message(0x0301, NLM_F_REQUEST, 8, 0, 4242)
            .attr(2, &[0, 0, 0, 1, 0, 0, 0, 9]);
        let msgs: Vec<_> = messages(b.bytes()).collect();
        assert_eq!(msgs.len(), 2);
        assert_eq!((msgs[0].msg_type(), msgs[0].seq()), (0x0302, 7));
        assert_eq!(&msgs[0].payload()[2..4], &4242u16.to_be_bytes());
        let attrs: Vec<_> = msgs[0].nf_attrs().collect();
        assert_eq!(
            attrs,
            vec![(1, &[1, 0, 0, 2][..]), (2, &[0xff, 0xff, 0, 0, 2][..])]
        );
        assert_eq!(
            msgs[1].nf_attrs().next(),
            Some((2, &[0, 0, 0, 1, 0, 0, 0, 9][..]))
        );
        // The 5-byte value was padded: the message length is a multiple of 4.
        assert_eq!(b.bytes().len() % 4, 0);
    }

    #[test]
    fn garbage_ends_the_walk() {
        assert_eq!(messages(&[200, 0, 0, 0, 1, 2]).count(), 0);
        assert_eq!(messages(&[]).count(), 0);
        let bad_attr = Message {
            bytes: &[
                24, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 99, 0, 1, 0,
            ],
        };
        assert_eq!(bad_attr.nf_attrs().count(), 0);
    }

    #[test]
    fn error_messages_carry_errno() {
        let mut bytes = vec![0u8; 36];
        bytes[..4].copy_from_slice(&36u32.to_ne_bytes());
        bytes[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        bytes[16..20].copy_from_slice(&(-16i32).to_ne_bytes());
        let m = messages(&bytes).next().unwrap();
        assert_eq!(m.error_code(), Some(16));
    }
}
