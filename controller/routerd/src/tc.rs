//! Diversion on the Linux data plane (docs/dataplane-linux.md): each flow selector is one tc
//! `bpf` rule in the router namespace's shared ingress block (every port uses it), redirecting
//! matching frames to the CPU port. routerd runs inside the namespace, so `tc` acts there.
//!
//! The match is a classic BPF program, built here exactly as `concast.controller.linux.bpf`
//! builds it (both are tested against the same vector): this kernel has no `flower`, and `u32`
//! would read the port at a fixed offset, wrong past the Concast ID option.

use std::collections::HashMap;
use std::io;
use std::net::Ipv4Addr;
use std::process::Command;

use concast_csp::{FlowId, Selector};

use crate::dataplane::Dataplane;

/// tc preference of the selector rules (10 and 20 are the control plane's static rules).
pub const PREF_SELECTOR: u32 = 30;

const ETH: u32 = 14;
const MATCH: u32 = u32::MAX;

/// tc's `bytecode` text for "IPv4 [to dst] [protocol proto] [destination port dport]"
/// (0 = any; the port only with TCP or UDP, found past the IPv4 options).
pub fn divert_program(dst: Option<Ipv4Addr>, proto: u8, dport: u16) -> String {
    const FAIL: i32 = -1;
    let (ldh, ld, ldb, msh, ldh_ind, jeq, jset, ret) = (0x28, 0x20, 0x30, 0xb1, 0x48, 0x15, 0x45, 0x06);
    let dport = if matches!(proto, 6 | 17) { dport } else { 0 };
    // (op, jt, jf, k); FAIL is patched to a jump to the final `ret #0`.
    let mut p: Vec<(u32, i32, i32, u32)> = vec![(ldh, 0, 0, 12), (jeq, 0, FAIL, 0x0800)];
    if let Some(d) = dst {
        p.extend([(ld, 0, 0, ETH + 16), (jeq, 0, FAIL, u32::from(d))]);
    }
    if proto != 0 {
        p.extend([(ldb, 0, 0, ETH + 9), (jeq, 0, FAIL, u32::from(proto))]);
    }
    if dport != 0 {
        // Not a later fragment (it has no port), then the port past the options.
        p.extend([(ldh, 0, 0, ETH + 6), (jset, FAIL, 0, 0x1fff), (msh, 0, 0, ETH), (ldh_ind, 0, 0, ETH + 2), (jeq, 0, FAIL, u32::from(dport))]);
    }
    p.push((ret, 0, 0, MATCH));
    let fail = p.len() as i32;
    let to = |i: usize, j: i32| if j == FAIL { fail - i as i32 - 1 } else { j };
    let mut words: Vec<String> = p.iter().enumerate().map(|(i, &(op, jt, jf, k))| format!("{op} {} {} {k}", to(i, jt), to(i, jf))).collect();
    words.push(format!("{ret} 0 0 0"));
    format!("{},{}", words.len(), words.join(","))
}

/// The selector rules of one router namespace, added and removed with `tc`.
pub struct Tc {
    /// `tc`, as a program and leading arguments (tests give `/bin/sh SCRIPT`, a script that
    /// records its arguments: run by the shell, the freshly written file is read, never
    /// executed, so a test thread forking meanwhile cannot make the exec fail with ETXTBSY).
    command: Vec<String>,
    block: u32,
    cpu_dev: String,
    next_handle: u32,
    /// Handles of removed rules, used again first (handles from 65536 up are left to people).
    free: Vec<u32>,
    flows: HashMap<FlowId, (Ipv4Addr, Selector)>,
    /// Per selector: how many flows use it, and its rule's handle.
    users: HashMap<(Ipv4Addr, Selector), (usize, u32)>,
}

impl Tc {
    pub fn new(block: u32, cpu_dev: &str) -> Tc {
        Tc::with_command(&["tc"], block, cpu_dev)
    }

    pub fn with_command(command: &[&str], block: u32, cpu_dev: &str) -> Tc {
        Tc { command: command.iter().map(|a| a.to_string()).collect(), block, cpu_dev: cpu_dev.into(), next_handle: 1, free: Vec::new(), flows: HashMap::new(), users: HashMap::new() }
    }

    /// `tc filter add` arguments for one selector rule.
    pub fn add_args(&self, handle: u32, r: Ipv4Addr, sel: Selector) -> Vec<String> {
        let prog = divert_program(Some(r), sel.proto, sel.dport);
        let mut a = self.del_args(Some(handle));
        a[1] = "add".into();
        a.extend(["bytecode", &prog, "action", "mirred", "egress", "redirect", "dev", &self.cpu_dev].map(String::from));
        a
    }

    /// `tc filter del` arguments: one rule, or (None) every selector rule.
    pub fn del_args(&self, handle: Option<u32>) -> Vec<String> {
        let mut a: Vec<String> = ["filter", "del", "block", &self.block.to_string(), "pref", &PREF_SELECTOR.to_string()].map(String::from).to_vec();
        if let Some(h) = handle {
            a.extend(["handle".into(), h.to_string()]);
        }
        a.extend(["protocol", "ip", "bpf"].map(String::from));
        a
    }
}

/// Runs `tc ARGS`; deleting what is already gone (the rule, or the whole chain) is done.
fn tc(command: &[String], args: &[String]) -> io::Result<()> {
    let out = Command::new(&command[0]).args(&command[1..]).args(args).output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || (args.get(1).map(String::as_str) == Some("del") && (err.contains("not found") || err.contains("Cannot find"))) {
        Ok(())
    } else {
        Err(io::Error::other(format!("tc {}: {}", args[..6.min(args.len())].join(" "), err.trim())))
    }
}

impl Dataplane for Tc {
    fn divert(&mut self, flow: FlowId, sel: Selector) -> io::Result<()> {
        let sel = Selector { dport: if matches!(sel.proto, 6 | 17) { sel.dport } else { 0 }, ..sel };
        let key = (flow.receiver, sel);
        if self.flows.contains_key(&flow) {
            return Ok(());
        }
        if let Some((n, _)) = self.users.get_mut(&key) {
            *n += 1; // the rule is already there for another flow
            self.flows.insert(flow, key);
            return Ok(());
        }
        let handle = self.free.last().copied().unwrap_or(self.next_handle);
        tc(&self.command, &self.add_args(handle, flow.receiver, sel))?;
        if self.free.pop().is_none() {
            self.next_handle += 1;
        }
        self.users.insert(key, (1, handle));
        self.flows.insert(flow, key);
        Ok(())
    }

    fn undivert(&mut self, flow: FlowId) -> io::Result<()> {
        let Some(key) = self.flows.remove(&flow) else { return Ok(()) };
        let (n, handle) = self.users.get_mut(&key).expect("counted on divert");
        *n -= 1;
        if *n > 0 {
            return Ok(());
        }
        let handle = *handle;
        self.users.remove(&key);
        tc(&self.command, &self.del_args(Some(handle)))?;
        self.free.push(handle);
        Ok(())
    }

    fn clear(&mut self) -> io::Result<()> {
        self.flows.clear();
        self.users.clear();
        self.free.clear();
        self.next_handle = 1;
        tc(&self.command, &self.del_args(None))
    }

    fn describe(&self) -> String {
        format!("linux tc block {} (CPU port {})", self.block, self.cpu_dev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector concast.controller.linux.bpf is tested with: tcpdump -ddd 'ip dst 10.1.1.2
    /// and udp dst port 5000', returning 0xffffffff on a match.
    pub const VECTOR: &str = "13,40 0 0 12,21 0 10 2048,32 0 0 30,21 0 8 167837954,48 0 0 23,21 0 6 17,40 0 0 20,69 4 0 8191,177 0 0 14,72 0 0 16,21 0 1 5000,6 0 0 4294967295,6 0 0 0";

    #[test]
    fn programs_match_the_shared_vector_and_drop_what_they_need_not_test() {
        let r: Ipv4Addr = "10.1.1.2".parse().unwrap();
        assert_eq!(divert_program(Some(r), 17, 5000), VECTOR);
        assert_eq!(divert_program(None, 253, 0), "6,40 0 0 12,21 0 3 2048,48 0 0 23,21 0 1 253,6 0 0 4294967295,6 0 0 0");
        // A port means nothing without TCP or UDP.
        assert_eq!(divert_program(Some(r), 254, 9), divert_program(Some(r), 254, 0));
        assert_eq!(divert_program(Some(r), 0, 0), "6,40 0 0 12,21 0 3 2048,32 0 0 30,21 0 1 167837954,6 0 0 4294967295,6 0 0 0");
    }

    #[test]
    fn rules_are_added_and_removed_by_handle_in_the_selector_preference() {
        let t = Tc::new(1, "ccxxr1-cpu");
        let add = t.add_args(3, "10.1.1.2".parse().unwrap(), Selector { proto: 17, dport: 5000 }).join(" ");
        assert_eq!(add, format!("filter add block 1 pref 30 handle 3 protocol ip bpf bytecode {VECTOR} action mirred egress redirect dev ccxxr1-cpu"));
        assert_eq!(t.del_args(Some(3)).join(" "), "filter del block 1 pref 30 handle 3 protocol ip bpf");
        assert_eq!(t.del_args(None).join(" "), "filter del block 1 pref 30 protocol ip bpf");
    }

    #[test]
    fn a_selector_shared_by_flows_is_one_rule_and_handles_are_reused() {
        let dir = std::env::temp_dir().join(format!("routerd-tc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("calls");
        let script = dir.join("tc.sh");
        // Records the operation and the handle (for `clear`: the word after pref 30).
        std::fs::write(&script, format!("#!/bin/sh\necho \"$2 $8\" >> {}\n", log.display())).unwrap();
        let mut t = Tc::with_command(&["/bin/sh", script.to_str().unwrap()], 1, "cpu");
        let r: Ipv4Addr = "10.1.1.2".parse().unwrap();
        let f = |g| FlowId { receiver: r, group: g };
        let udp = |d| Selector { proto: 17, dport: d };
        t.divert(f(1), udp(5000)).unwrap();
        t.divert(f(2), udp(5000)).unwrap(); // same selector: no second rule
        t.divert(f(3), udp(6000)).unwrap();
        t.undivert(f(1)).unwrap(); // flow 2 still needs the rule
        t.undivert(f(2)).unwrap();
        t.divert(f(4), udp(7000)).unwrap(); // takes the freed handle 1
        t.clear().unwrap();
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(calls, "add 1\nadd 2\ndel 1\nadd 1\ndel ip\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
