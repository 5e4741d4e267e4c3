//! The netfilter rule that hands a sender's pure ACKs toward R to our queue, installed with
//! the `iptables` command inside the host's own network namespace (each namespace has its
//! own tables, so nothing outside the host is touched), and removed on shutdown.
//!
//! ```text
//! iptables -w -I OUTPUT -d R/32 -p tcp --tcp-flags SYN,FIN,RST,ACK ACK
//!          -m length --length 40:THRESHOLD -m comment --comment concast-mplex
//!          -j NFQUEUE --queue-num N --queue-bypass
//! ```
//!
//! - `OUTPUT`: the kernel's own locally generated datagrams, after routing, before they reach
//!   the device; forwarded traffic (a host is no router) never passes there.
//! - `-d R/32`: only datagrams toward an enabled receiver.
//! - `--tcp-flags SYN,FIN,RST,ACK ACK`: ACK set and SYN, FIN, RST clear, so connection set-up
//!   and tear-down go out untouched and in order. PSH and URG are not looked at: an empty
//!   segment with PSH is still a pure ACK; one with data is longer than any ACK.
//! - `--length 40:THRESHOLD`: IPv4 total length, 40 being the smallest TCP segment. Data
//!   segments of full size never wake the daemon. What the rule cannot see (data in a short
//!   segment, IPv4 options, a first fragment) is checked in user space ([`crate::select`])
//!   and accepted unchanged.
//! - `--queue-bypass`: with no process bound to the queue the packet passes as if the rule
//!   were not there, so a dead daemon degrades to plain ACKs, never to a stalled connection.
//!   (The queue itself is fail-open too, see [`crate::nfqueue`].)
//! - `-m comment`: marks the rule as ours in `iptables -S` listings.

use std::net::Ipv4Addr;
use std::process::Command;

use crate::selection::Selection;

pub const COMMENT: &str = "concast-mplex";

/// One sender flow's capture rule: toward `receiver`, what `selection` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureRule {
    pub receiver: Ipv4Addr,
    pub selection: Selection,
    pub threshold: u16,
    pub queue: u16,
}

impl CaptureRule {
    /// The rule's match and target, shared by insertion and deletion.
    pub fn spec(&self) -> Vec<String> {
        let s = |v: &str| v.to_string();
        let mut spec = vec![s("-d"), format!("{}/32", self.receiver)];
        spec.extend(self.selection.rule_match(self.threshold));
        spec.extend([
            s("-m"),
            s("comment"),
            s("--comment"),
            s(COMMENT),
            s("-j"),
            s("NFQUEUE"),
            s("--queue-num"),
            self.queue.to_string(),
            s("--queue-bypass"),
        ]);
        spec
    }

    pub fn insert_argv(&self) -> Vec<String> {
        let mut a = vec!["-w".to_string(), "-I".into(), "OUTPUT".into()];
        a.extend(self.spec());
        a
    }

    pub fn delete_argv(&self) -> Vec<String> {
        let mut a = vec!["-w".to_string(), "-D".into(), "OUTPUT".into()];
        a.extend(self.spec());
        a
    }

    pub fn install(&self) -> Result<(), String> {
        iptables(&self.insert_argv())
    }

    pub fn remove(&self) -> Result<(), String> {
        iptables(&self.delete_argv())
    }
}

/// Runs `iptables ARGS`, turning a missing binary or a refusal into a readable error.
pub fn iptables(args: &[String]) -> Result<(), String> {
    let out = Command::new("iptables").args(args).output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "iptables is not installed (Debian package `iptables`; scripts/setup.sh installs it)"
                .to_string()
        } else {
            format!("cannot run iptables: {e}")
        }
    })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selection::FlowProto;

    #[test]
    fn the_rule_reads_as_documented() {
        let r = CaptureRule {
            receiver: Ipv4Addr::new(10, 2, 1, 2),
            selection: Selection::Acks,
            threshold: 128,
            queue: 4242,
        };
        assert_eq!(
            r.insert_argv().join(" "),
            "-w -I OUTPUT -d 10.2.1.2/32 -p tcp --tcp-flags SYN,FIN,RST,ACK ACK -m length --length 40:128 \
             -m comment --comment concast-mplex -j NFQUEUE --queue-num 4242 --queue-bypass"
        );
        assert_eq!(&r.delete_argv()[..3], &["-w", "-D", "OUTPUT"]);
        assert_eq!(r.delete_argv()[3..], r.insert_argv()[3..]);
        let f = CaptureRule {
            selection: Selection::flow(FlowProto::Udp, Some(5000), Some(6000)).unwrap(),
            ..r
        };
        assert_eq!(
            f.insert_argv().join(" "),
            "-w -I OUTPUT -d 10.2.1.2/32 -p udp --sport 5000 --dport 6000 \
             -m comment --comment concast-mplex -j NFQUEUE --queue-num 4242 --queue-bypass"
        );
    }
}
