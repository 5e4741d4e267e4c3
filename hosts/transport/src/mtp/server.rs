//! The stateless MTP server: every reply is computed from the request datagram alone and the
//! application's `Responder`; nothing is kept per client between datagrams (only counters), so
//! a restarted server answers a repeated request exactly as the old one would have.
use std::collections::HashMap;

use super::wire::{self, Header, Kind, F_CHANNEL, F_END, F_ERROR, F_NOPAYLOAD, F_STREAM, MAX_PAYLOAD};

/// What a request asks for, as the responder sees it.
#[derive(Debug)]
pub struct Query<'a> {
    pub channel: u8,
    pub name: &'a [u8],
    pub offset: u32,
    pub len: usize,
    /// False when the client suppressed the payload: only the size and end are needed.
    pub want_payload: bool,
}

/// The responder's answer to one query.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Bytes from the query's offset (at most `len`) and the object's size when known; `None`
    /// marks a streamed object still growing (an empty `data` then means "not yet").
    Bytes { total: Option<u32>, data: Vec<u8> },
    /// The object's size only (a suppressed payload needs no bytes).
    Size(u32),
    Refuse(String),
}

/// The application side of `respond`: maps a query to an answer. Implementations must not
/// depend on which client asks or on earlier queries (the server is stateless).
pub trait Responder {
    fn respond(&mut self, q: &Query) -> Answer;

    /// The channel that names this object, if the responder offers one (ch. V "Payload
    /// Suppression": state about objects, not transactions). Replies then carry it with
    /// `F_CHANNEL`, and the client leaves the name out of later subrequests.
    fn channel_of(&mut self, _name: &[u8]) -> Option<u8> {
        None
    }

    /// The object a channel names, for a request without a name.
    fn name_of(&mut self, _channel: u8) -> Option<Vec<u8>> {
        None
    }
}

/// Named objects held in memory, plus generated ones: `size:N` is N deterministic
/// pseudo-random bytes (`pattern`), computed per range so no memory is held for it.
#[derive(Default)]
pub struct Objects {
    pub named: HashMap<Vec<u8>, Vec<u8>>,
    /// Channels that name objects (ch. V "Payload Suppression"); empty: none offered.
    pub channels: HashMap<u8, Vec<u8>>,
}

/// Byte `i` of every generated object: the low byte of splitmix64's first output seeded
/// with `i`.
pub fn pattern_byte(i: u64) -> u8 {
    use concast_wire::splitmix;
    splitmix::mix(i.wrapping_add(splitmix::GAMMA)) as u8
}

pub fn pattern(offset: u64, len: usize) -> Vec<u8> {
    (offset..offset + len as u64).map(pattern_byte).collect()
}

/// Parses a generated object's name, `size:N`.
pub fn generated_size(name: &[u8]) -> Option<u32> {
    std::str::from_utf8(name).ok()?.strip_prefix("size:")?.parse().ok()
}

impl Responder for Objects {
    fn channel_of(&mut self, name: &[u8]) -> Option<u8> {
        self.channels.iter().find(|(_, n)| n.as_slice() == name).map(|(&c, _)| c)
    }

    fn name_of(&mut self, channel: u8) -> Option<Vec<u8>> {
        self.channels.get(&channel).cloned()
    }

    fn respond(&mut self, q: &Query) -> Answer {
        let (total, data) = if let Some(obj) = self.named.get(q.name) {
            let start = (q.offset as usize).min(obj.len());
            let end = (start + q.len).min(obj.len());
            (obj.len() as u32, if q.want_payload { obj[start..end].to_vec() } else { Vec::new() })
        } else if let Some(n) = generated_size(q.name) {
            let end = (q.offset as u64 + q.len as u64).min(n as u64);
            let len = end.saturating_sub(q.offset as u64) as usize;
            (n, if q.want_payload { pattern(q.offset as u64, len) } else { Vec::new() })
        } else {
            return Answer::Refuse(format!("no object named {:?}", String::from_utf8_lossy(q.name)));
        };
        if q.want_payload {
            Answer::Bytes { total: Some(total), data }
        } else {
            Answer::Size(total)
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    pub requests: u64,
    pub replies: u64,
    pub refused: u64,
    /// Datagrams that were not well-formed requests (with the reason's count only).
    pub malformed: u64,
    /// Requests dropped unanswered under overload.
    pub shed: u64,
    /// Requests without a name, the object named by their channel (ch. V "Payload Suppression").
    pub by_channel: u64,
    /// Of those, channels that named nothing: a channel error (`ERR_APP_CHANNEL`).
    pub channel_errors: u64,
}

pub struct Server<R: Responder> {
    pub responder: R,
    pub stats: ServerStats,
    /// The server's response limit per request, bytes (ch. V, "Mechanisms"; glossary "window
    /// limit"): it sends at most this much per request whatever the client asks, and the
    /// client takes a shorter reply as the bound of its later subrequests. None: no limit.
    pub limit: Option<usize>,
    /// Overload (ch. V: an overloaded server may drop requests; the client repeats them): with
    /// more than this many requests waiting (`handle_with_backlog`), the next is dropped.
    pub shed_above: Option<usize>,
}

impl<R: Responder> Server<R> {
    pub fn new(responder: R) -> Server<R> {
        Server { responder, stats: ServerStats::default(), limit: None, shed_above: None }
    }

    /// `handle` for a server that knows how many requests wait behind this one: past
    /// `shed_above` it drops the request unanswered (the client's repeat recovers it).
    pub fn handle_with_backlog(&mut self, d: &[u8], backlog: usize) -> Vec<Vec<u8>> {
        if self.shed_above.is_some_and(|m| backlog > m) {
            self.stats.shed += 1;
            return Vec::new();
        }
        self.handle(d)
    }

    /// One datagram in, its replies out (none for a datagram that is not a request). A request
    /// with a response limit (ch. V "Mechanisms") gets up to that many bytes, never more than
    /// the server's own limit, in datagrams of at most its Length, each announcing the server's
    /// limit; one without (limit 0) gets one datagram, as before the limit existed.
    pub fn handle(&mut self, d: &[u8]) -> Vec<Vec<u8>> {
        let (h, name) = match wire::decode(d) {
            Ok((h, b)) if h.kind == Kind::Request => (h, b),
            _ => {
                self.stats.malformed += 1;
                return Vec::new();
            }
        };
        self.stats.requests += 1;
        let want_payload = h.flags & F_NOPAYLOAD == 0;
        let size = (h.length as usize).min(MAX_PAYLOAD);
        let multi = h.total > 0 && want_payload;
        let server_limit = self.limit.unwrap_or(usize::MAX);
        let extent = if multi { h.total as usize } else { size }.min(server_limit);
        // one datagram's payload: the request's Length, or (limit 0) the whole extent
        let size = if multi { size } else { extent };
        let mut r = Header { kind: Kind::Reply, flags: 0, namelen: 0, total: 0, length: 0, ..h };
        // a name-less request: its channel names the object, or the client must send the name
        let by_channel;
        let name = if name.is_empty() {
            self.stats.by_channel += 1;
            match self.responder.name_of(h.channel) {
                Some(n) => {
                    by_channel = n;
                    &by_channel[..]
                }
                None => {
                    self.stats.channel_errors += 1;
                    self.stats.replies += 1;
                    r.flags = F_ERROR | F_CHANNEL;
                    let why = format!("channel {} names no object", h.channel);
                    r.length = why.len() as u16;
                    return vec![wire::datagram(&r, why.as_bytes())];
                }
            }
        } else {
            name
        };
        if let Some(c) = self.responder.channel_of(name) {
            // the server's channel for the object (ch. V "Channel Identifiers")
            r.channel = c;
        }
        let named = self.responder.channel_of(name).is_some();
        let q = Query { channel: r.channel, name, offset: h.offset, len: extent, want_payload };
        if multi {
            // the server's limit as the reply can carry it: a larger one announces 65535 (a
            // bound the client may keep to, never one it must exceed)
            r.namelen = self.limit.map_or(0, |l| l.min(u16::MAX as usize) as u16);
        }
        let out = match self.responder.respond(&q) {
            Answer::Refuse(why) => {
                self.stats.refused += 1;
                r.flags = F_ERROR;
                let mut b = why.into_bytes();
                b.truncate(MAX_PAYLOAD.min(u16::MAX as usize));
                r.length = b.len() as u16;
                vec![wire::datagram(&r, &b)]
            }
            Answer::Size(total) => {
                let n = (total as u64).saturating_sub(h.offset as u64).min(size as u64);
                r.total = total;
                r.length = n as u16;
                r.flags = F_NOPAYLOAD | if h.offset as u64 + n >= total as u64 { F_END } else { 0 };
                vec![wire::datagram(&r, &[])]
            }
            Answer::Bytes { total, mut data } => {
                data.truncate(extent);
                if !want_payload {
                    r.flags = F_NOPAYLOAD;
                    r.length = data.len().min(size) as u16;
                    data.clear();
                }
                let mut out = Vec::new();
                let mut at = 0usize;
                loop {
                    let n = if want_payload { (data.len() - at).min(size.max(1)) } else { 0 };
                    let mut c = r;
                    c.offset = h.offset.saturating_add(at as u32);
                    if want_payload {
                        c.length = n as u16;
                    }
                    match total {
                        Some(t) => {
                            c.total = t;
                            if c.offset as u64 + c.length as u64 >= t as u64 {
                                c.flags |= F_END;
                            }
                        }
                        None => c.flags |= F_STREAM,
                    }
                    out.push(wire::datagram(&c, &data[at..at + n]));
                    at += n;
                    if at >= data.len() || c.flags & F_END != 0 {
                        break;
                    }
                }
                out
            }
        };
        self.stats.replies += out.len() as u64;
        if named {
            return out.into_iter().map(|mut d| {
                if d[2] & F_ERROR == 0 {
                    d[2] |= F_CHANNEL;
                }
                d
            }).collect();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one reply a request without a response limit gets.
    fn one(mut r: Vec<Vec<u8>>) -> Vec<u8> {
        assert_eq!(r.len(), 1, "one reply");
        r.pop().unwrap()
    }

    fn req(name: &[u8], offset: u32, len: u16, flags: u8) -> Vec<u8> {
        let mut h = Header::request(7, 1, offset, len, name.len() as u16);
        h.flags = flags;
        h.stamp = 99;
        wire::datagram(&h, name)
    }

    #[test]
    fn generated_bytes_are_pinned() {
        // docs/transport.md's definition; tests/system/test_mtp.py recomputes it in Python.
        assert_eq!(pattern(0, 4), [0xaf, 0xc1, 0xce, 0xed]);
    }

    #[test]
    fn answers_from_the_request_alone_and_marks_the_end() {
        let mut s = Server::new(Objects::default());
        let (h, p) = wire::decode(&one(s.handle(&req(b"size:3000", 0, 1400, 0)))).map(|(h, p)| (h, p.to_vec())).unwrap();
        assert_eq!((h.txid, h.stamp, h.total, h.length, h.flags, h.channel), (7, 99, 3000, 1400, 0, 1));
        assert_eq!(p, pattern(0, 1400));
        let last = one(s.handle(&req(b"size:3000", 2800, 1400, 0)));
        let (h, p) = wire::decode(&last).unwrap();
        assert_eq!((h.length, h.flags, p.len()), (200, F_END, 200));
        let past = one(s.handle(&req(b"size:3000", 5000, 1400, 0)));
        assert_eq!(wire::decode(&past).unwrap().0.flags, F_END);
        // a second server (a restart) gives the same bytes for the same request
        let mut s2 = Server::new(Objects::default());
        assert_eq!(one(s2.handle(&req(b"size:3000", 2800, 1400, 0))), last);
    }

    #[test]
    fn suppressed_payload_gets_the_header_only_and_unknown_names_are_refused() {
        let mut s = Server::new(Objects::default());
        let d = one(s.handle(&req(b"size:3000", 0, 1400, F_NOPAYLOAD)));
        assert_eq!(d.len(), wire::HEADER_LEN);
        let (h, _) = wire::decode(&d).unwrap();
        assert_eq!((h.flags, h.length, h.total), (F_NOPAYLOAD, 1400, 3000));
        let (h, why) = wire::decode(&s.handle(&req(b"nope", 0, 1400, 0))[0]).map(|(h, p)| (h, p.to_vec())).unwrap();
        assert_eq!(h.flags, F_ERROR);
        assert!(String::from_utf8(why).unwrap().contains("no object named"));
        assert!(s.handle(&[0xC9, 0x12, 0, 0]).is_empty());
        assert_eq!(s.stats, ServerStats { requests: 2, replies: 2, refused: 1, malformed: 1, ..Default::default() });
    }

    #[test]
    fn ch5_server_response_limit_caps_each_reply() {
        let mut s = Server::new(Objects::default());
        s.limit = Some(600);
        let (h, p) = wire::decode(&one(s.handle(&req(b"size:3000", 0, 1400, 0)))).map(|(h, p)| (h, p.to_vec())).unwrap();
        assert_eq!((h.length, h.flags, p), (600, 0, pattern(0, 600)));
    }

    #[test]
    fn ch5_server_overload_drops_requests_past_its_backlog() {
        let mut s = Server::new(Objects::default());
        s.shed_above = Some(8);
        assert_eq!(s.handle_with_backlog(&req(b"size:3000", 0, 1400, 0), 8).len(), 1);
        assert!(s.handle_with_backlog(&req(b"size:3000", 0, 1400, 0), 9).is_empty());
        assert_eq!((s.stats.shed, s.stats.replies), (1, 1));
    }

    fn req_limit(name: &[u8], offset: u32, size: u16, limit: u32) -> Vec<u8> {
        let mut h = Header::request(7, 1, offset, size, name.len() as u16);
        h.total = limit;
        h.stamp = 99;
        wire::datagram(&h, name)
    }

    #[test]
    fn ch5_mechanisms_one_request_fetches_up_to_its_response_limit_in_datagrams_of_its_size() {
        let mut s = Server::new(Objects::default());
        let r = s.handle(&req_limit(b"size:10000", 1000, 1024, 5000));
        let got: Vec<(u32, u16, u8, u16)> = r.iter().map(|d| wire::decode(d).map(|(h, _)| (h.offset, h.length, h.flags, h.namelen)).unwrap()).collect();
        assert_eq!(got, [(1000, 1024, 0, 0), (2024, 1024, 0, 0), (3048, 1024, 0, 0), (4072, 1024, 0, 0), (5096, 904, 0, 0)]);
        for d in &r {
            let (h, p) = wire::decode(d).unwrap();
            assert_eq!((h.txid, h.stamp, h.total), (7, 99, 10000));
            assert_eq!(p, pattern(h.offset as u64, h.length as usize));
        }
        // the object's end comes first: END on the last datagram, nothing past it
        let r = s.handle(&req_limit(b"size:10000", 8000, 1024, 60000));
        let last = wire::decode(r.last().unwrap()).unwrap().0;
        assert_eq!((r.len(), last.offset, last.length, last.flags), (2, 9024, 976, F_END));
        assert_eq!(s.stats.replies, 7);
    }

    #[test]
    fn ch5_mechanisms_server_limit_caps_a_request_and_travels_in_every_reply() {
        let mut s = Server::new(Objects::default());
        s.limit = Some(2500);
        let r = s.handle(&req_limit(b"size:10000", 0, 1024, 8192));
        let got: Vec<(u32, u16, u16)> = r.iter().map(|d| wire::decode(d).map(|(h, _)| (h.offset, h.length, h.namelen)).unwrap()).collect();
        assert_eq!(got, [(0, 1024, 2500), (1024, 1024, 2500), (2048, 452, 2500)]);
        assert_eq!(wire::decode(&r[0]).unwrap().0.server_limit(), Some(2500));
        // a request without a limit gets today's single reply and no announcement
        let (h, _) = wire::decode(&one(s.handle(&req(b"size:10000", 0, 1024, 0)))).unwrap();
        assert_eq!((h.length, h.server_limit()), (1024, None));
    }

    #[test]
    fn ch5_payload_suppression_a_channel_names_the_object_and_an_unknown_one_is_a_channel_error() {
        let mut o = Objects::default();
        o.channels.insert(9, b"size:3000".to_vec());
        let mut s = Server::new(o);
        // named: the reply carries the object's channel and says it names the object
        let (h, _) = wire::decode(&one(s.handle(&req(b"size:3000", 0, 1400, 0)))).map(|(h, p)| (h, p.to_vec())).unwrap();
        assert_eq!((h.channel, h.flags & F_CHANNEL), (9, F_CHANNEL));
        // name-less, channel 9: the same bytes as the named request
        let mut q = Header::request(7, 9, 1400, 1400, 0);
        q.stamp = 99;
        let (h, p) = wire::decode(&one(s.handle(&wire::datagram(&q, b"")))).map(|(h, p)| (h, p.to_vec())).unwrap();
        assert_eq!((h.offset, h.length, h.channel, h.flags), (1400, 1400, 9, F_CHANNEL));
        assert_eq!(p, pattern(1400, 1400));
        // name-less, a channel naming nothing: the channel error
        let mut q = Header::request(7, 4, 0, 1400, 0);
        q.stamp = 1;
        let (h, _) = wire::decode(&one(s.handle(&wire::datagram(&q, b"")))).unwrap();
        assert_eq!(h.flags, F_ERROR | F_CHANNEL);
        assert_eq!((s.stats.by_channel, s.stats.channel_errors), (2, 1));
        // objects without a channel: replies as before
        let (h, _) = wire::decode(&one(s.handle(&req(b"size:10", 0, 1400, 0)))).unwrap();
        assert_eq!((h.channel, h.flags), (1, F_END));
    }
}
