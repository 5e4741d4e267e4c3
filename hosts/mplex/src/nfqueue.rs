//! An NFQUEUE listener over netlink (`NETLINK_NETFILTER`, subsystem `NFNL_SUBSYS_QUEUE`),
//! written directly against the kernel's message format rather than libnetfilter_queue or
//! a crate: it is a few messages, the socket stays non-blocking inside hostd's poll loop, and
//! the verdicts of one read round go back in a single `send`.
//!
//! The queue is bound with `NFQA_CFG_F_FAIL_OPEN`: when the queue is full or our socket's
//! buffer overflows, the kernel lets the packet pass instead of dropping it. Together with
//! the rule's `--queue-bypass` (no listener: pass), the multiplex service can only ever
//! delay an ACK, never lose one, whatever happens to this process.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use concast_daemon::sys::check;

use crate::netlink::{self, Builder, NLM_F_ACK, NLM_F_REQUEST};

const NETLINK_NETFILTER: libc::c_int = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;

// Config attributes and values (linux/netfilter/nfnetlink_queue.h).
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_PACKET: u8 = 2;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;

// Packet and verdict attributes.
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_PAYLOAD: u16 = 10;
const NFQA_CAP_LEN: u16 = 13;

/// How many packets the kernel keeps waiting for a verdict before fail-open lets more pass.
const QUEUE_MAXLEN: u32 = 4096;
/// Large enough for any IPv4 datagram the queue can copy, plus netlink headers.
const RECV_BUF: usize = 65536 + 512;

/// What happens to a queued packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Taken: the kernel discards it (we send it ourselves, encapsulated).
    Drop,
    /// Continues through the stack unchanged.
    Accept,
}

impl Verdict {
    const fn code(self) -> u32 {
        match self {
            Verdict::Drop => 0,   // NF_DROP
            Verdict::Accept => 1, // NF_ACCEPT
        }
    }
}

/// One queued packet, borrowed from the receive buffer.
#[derive(Debug)]
pub struct Packet<'a> {
    pub id: u32,
    /// The IPv4 datagram as the kernel had it (possibly truncated, see `truncated`).
    pub payload: &'a [u8],
    /// The kernel copied only part of it (the datagram was longer than the copy range).
    pub truncated: bool,
}

/// Counters of the queue itself (not of any flow).
#[derive(Debug, Default, Clone, Copy)]
pub struct QueueStats {
    pub packets: u64,
    pub accepted: u64,
    pub dropped: u64,
    /// Receive-buffer overflows reported by the kernel (those packets were let through).
    pub overruns: u64,
    /// Error answers from the kernel (a verdict for an unknown packet ID, say).
    pub errors: u64,
}

pub struct Queue {
    fd: OwnedFd,
    num: u16,
    seq: u32,
    buf: Vec<u8>,
    verdicts: Builder,
    pub stats: QueueStats,
}

const fn msg_type(t: u16) -> u16 {
    (NFNL_SUBSYS_QUEUE << 8) | t
}

impl Queue {
    /// Opens a netlink socket and binds queue `num` of this network namespace, copying whole
    /// packets, fail-open. Fails with the kernel's errno (EBUSY: another process holds the
    /// queue; EPERM: not root in this namespace).
    pub fn bind(num: u16) -> io::Result<Queue> {
        let raw = check(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        })?;
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        })?;
        // Bursts of ACKs from several connections: a deep buffer (best effort; fail-open
        // covers an overflow anyway).
        crate::sockets::force_rcvbuf(fd.as_raw_fd(), 8 << 20);
        let mut q = Queue {
            fd,
            num,
            seq: 0,
            buf: vec![0; RECV_BUF],
            verdicts: Builder::new(),
            stats: QueueStats::default(),
        };
        q.configure(&[(
            NFQA_CFG_CMD,
            &[NFQNL_CFG_CMD_BIND, 0, 0, libc::AF_INET as u8],
        )])?;
        let mut params = 0xffffu32.to_be_bytes().to_vec(); // copy range: the whole datagram
        params.push(NFQNL_COPY_PACKET);
        q.configure(&[(NFQA_CFG_PARAMS, &params)])?;
        q.configure(&[(NFQA_CFG_QUEUE_MAXLEN, &QUEUE_MAXLEN.to_be_bytes())])?;
        // Flags and mask travel in one message (the kernel needs both to change flags).
        let fail_open = NFQA_CFG_F_FAIL_OPEN.to_be_bytes();
        q.configure(&[(NFQA_CFG_FLAGS, &fail_open), (NFQA_CFG_MASK, &fail_open)])?;
        Ok(q)
    }

    pub fn number(&self) -> u16 {
        self.num
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// One NFQNL_MSG_CONFIG message carrying `attrs`, acknowledged by the kernel.
    fn configure(&mut self, attrs: &[(u16, &[u8])]) -> io::Result<()> {
        let mut b = Builder::new();
        self.seq += 1;
        b.message(
            msg_type(NFQNL_MSG_CONFIG),
            NLM_F_REQUEST | NLM_F_ACK,
            self.seq,
            libc::AF_UNSPEC as u8,
            self.num,
        );
        for (attr, value) in attrs {
            b.attr(*attr, value);
        }
        self.request(&b)
    }

    /// Sends a request and waits (up to a second) for the kernel's acknowledgement.
    fn request(&mut self, b: &Builder) -> io::Result<()> {
        self.send(b.bytes())?;
        let seq = self.seq;
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            let Some(n) = self.recv_raw()? else {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no answer from nfnetlink_queue",
                    ));
                }
                let mut pfd = libc::pollfd {
                    fd: self.raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                unsafe { libc::poll(&mut pfd, 1, left.as_millis().max(1) as libc::c_int) };
                continue;
            };
            for m in netlink::messages(&self.buf[..n]) {
                if m.seq() == seq {
                    if let Some(code) = m.error_code() {
                        return if code == 0 {
                            Ok(())
                        } else {
                            Err(io::Error::from_raw_os_error(code))
                        };
                    }
                }
            }
        }
    }

    fn send(&self, bytes: &[u8]) -> io::Result<()> {
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        check(unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                bytes.as_ptr() as *const libc::c_void,
                bytes.len(),
                0,
                &addr as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            ) as libc::c_int
        })
        .map(|_| ())
    }

    /// One datagram into the buffer; `None` when nothing waits.
    fn recv_raw(&mut self) -> io::Result<Option<usize>> {
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                self.buf.as_mut_ptr() as *mut libc::c_void,
                self.buf.len(),
                0,
            )
        };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            // The kernel could not queue a message to us; with fail-open it let the packet pass.
            Some(libc::ENOBUFS) => {
                self.stats.overruns += 1;
                Ok(None)
            }
            _ => Err(e),
        }
    }

    /// Reads up to `budget` queued packets without blocking, asks `decide` about each, and
    /// sends all verdicts in one message batch. Returns how many packets were handled.
    pub fn process(
        &mut self,
        budget: usize,
        mut decide: impl FnMut(&Packet<'_>) -> Verdict,
    ) -> io::Result<usize> {
        let mut handled = 0;
        self.verdicts.clear();
        while handled < budget {
            let Some(n) = self.recv_raw()? else { break };
            for m in netlink::messages(&self.buf[..n]) {
                if m.msg_type() == netlink::NLMSG_ERROR {
                    if m.error_code().is_some_and(|c| c != 0) {
                        self.stats.errors += 1;
                    }
                    continue;
                }
                if m.msg_type() != msg_type(NFQNL_MSG_PACKET) {
                    continue;
                }
                let Some(p) = parse_packet(&m) else { continue };
                let v = decide(&p);
                handled += 1;
                self.stats.packets += 1;
                match v {
                    Verdict::Accept => self.stats.accepted += 1,
                    Verdict::Drop => self.stats.dropped += 1,
                }
                self.seq = self.seq.wrapping_add(1);
                let mut hdr = [0u8; 8];
                hdr[..4].copy_from_slice(&v.code().to_be_bytes());
                hdr[4..].copy_from_slice(&p.id.to_be_bytes());
                self.verdicts
                    .message(
                        msg_type(NFQNL_MSG_VERDICT),
                        NLM_F_REQUEST,
                        self.seq,
                        libc::AF_UNSPEC as u8,
                        self.num,
                    )
                    .attr(NFQA_VERDICT_HDR, &hdr);
                // An accepted packet leaves before the next one is decided: a later datagram
                // of its flow, multiplexed and sent at once, must not overtake it.
                if v == Verdict::Accept {
                    self.send(self.verdicts.bytes())?;
                    self.verdicts.clear();
                }
            }
        }
        if !self.verdicts.is_empty() {
            self.send(self.verdicts.bytes())?;
        }
        Ok(handled)
    }
}

/// The packet ID, payload and truncation of an `NFQNL_MSG_PACKET`.
fn parse_packet<'a>(m: &netlink::Message<'a>) -> Option<Packet<'a>> {
    let mut id = None;
    let mut payload: &[u8] = &[];
    let mut cap_len = None;
    for (kind, value) in m.nf_attrs() {
        match kind {
            NFQA_PACKET_HDR if value.len() >= 4 => {
                id = Some(u32::from_be_bytes([value[0], value[1], value[2], value[3]]))
            }
            NFQA_PAYLOAD => payload = value,
            NFQA_CAP_LEN if value.len() >= 4 => {
                cap_len = Some(u32::from_be_bytes([value[0], value[1], value[2], value[3]]))
            }
            _ => {}
        }
    }
    Some(Packet {
        id: id?,
        payload,
        truncated: cap_len.is_some_and(|l| l as usize > payload.len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_messages_parse() {
        let mut b = Builder::new();
        b.message(msg_type(NFQNL_MSG_PACKET), 0, 0, 2, 42)
            .attr(NFQA_PACKET_HDR, &[0, 0, 1, 2, 0x08, 0x00, 3])
            .attr(NFQA_PAYLOAD, &[0x45, 0, 0, 40])
            .attr(NFQA_CAP_LEN, &40u32.to_be_bytes());
        let m = netlink::messages(b.bytes()).next().unwrap();
        let p = parse_packet(&m).unwrap();
        assert_eq!(
            (p.id, p.payload, p.truncated),
            (0x0102, &[0x45, 0, 0, 40][..], true)
        );
        let mut b = Builder::new();
        b.message(msg_type(NFQNL_MSG_PACKET), 0, 0, 2, 42)
            .attr(NFQA_PAYLOAD, &[1]);
        assert!(
            parse_packet(&netlink::messages(b.bytes()).next().unwrap()).is_none(),
            "no ID, no verdict possible"
        );
    }
}
