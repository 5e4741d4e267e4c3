//! Installing and removing the diversion of a concast flow in the router's data plane.
//!
//! OVS cannot see IPv4 options, so each active flow gets a selector rule (docs/dataplane-ovs.md,
//! "Flow selectors"): its cookie *is* the selector, so installing twice is harmless, and flows
//! sharing a selector share one rule, which goes when the last of them does.

use std::collections::HashMap;
use std::io;
use std::net::Ipv4Addr;
use std::process::Command;

use concast_csp::{FlowId, Selector};

pub trait Dataplane {
    fn divert(&mut self, flow: FlowId, sel: Selector) -> io::Result<()>;
    fn undivert(&mut self, flow: FlowId) -> io::Result<()>;
    /// Removes every diversion this router's routerd may have left (start-up, shutdown).
    fn clear(&mut self) -> io::Result<()>;
    fn describe(&self) -> String;
}

/// Nothing to program: the data plane diverts by itself (tests, benchmarks, a P4 program
/// whose table entries another process manages).
pub struct Static;

impl Dataplane for Static {
    fn divert(&mut self, _: FlowId, _: Selector) -> io::Result<()> {
        Ok(())
    }
    fn undivert(&mut self, _: FlowId) -> io::Result<()> {
        Ok(())
    }
    fn clear(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn describe(&self) -> String {
        "static".into()
    }
}

/// Any data plane behind an external program (BMv2: `python -m concast.controller.p4 --switch
/// ADDR`): `PROGRAM divert R G PROTO DPORT`, `PROGRAM undivert R G`, `PROGRAM clear`, each run to
/// completion; a non-zero exit is an error. The program is idempotent (docs/dataplane-bmv2.md).
pub struct External {
    /// The command line, split on whitespace (no quoting): program, then its own arguments.
    argv: Vec<String>,
}

impl External {
    pub fn new(cmdline: &str) -> io::Result<External> {
        let argv: Vec<String> = cmdline.split_whitespace().map(str::to_string).collect();
        if argv.is_empty() {
            return Err(io::Error::other("empty data plane command"));
        }
        Ok(External { argv })
    }

    /// The full argument vector for one operation.
    pub fn argv(&self, op: &[String]) -> Vec<String> {
        self.argv.iter().chain(op).cloned().collect()
    }

    fn run(&self, op: &[String]) -> io::Result<()> {
        let argv = self.argv(op);
        let out = Command::new(&argv[0]).args(&argv[1..]).output()?;
        if out.status.success() {
            Ok(())
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            let last = err.trim().lines().last().unwrap_or("").to_string();
            Err(io::Error::other(format!("{} ({}): {last}", argv.join(" "), out.status)))
        }
    }
}

impl Dataplane for External {
    fn divert(&mut self, flow: FlowId, sel: Selector) -> io::Result<()> {
        self.run(&["divert".into(), flow.receiver.to_string(), flow.group.to_string(), sel.proto.to_string(), sel.dport.to_string()])
    }
    fn undivert(&mut self, flow: FlowId) -> io::Result<()> {
        self.run(&["undivert".into(), flow.receiver.to_string(), flow.group.to_string()])
    }
    fn clear(&mut self) -> io::Result<()> {
        self.run(&["clear".into()])
    }
    fn describe(&self) -> String {
        format!("command {}", self.argv.join(" "))
    }
}

/// The OpenFlow selector rules of one OVS bridge, through `ovs-ofctl`.
pub struct Ovs {
    bridge: String,
    cpu_ofport: u32,
    /// Which selector each flow uses, and how many flows use each selector.
    flows: HashMap<FlowId, (Ipv4Addr, Selector)>,
    users: HashMap<(Ipv4Addr, Selector), usize>,
}

// The selector rule is defined here, once: controller/ovs/selectors.py must write the same
// rules, and tests/unit/test_ovs_selectors.py checks it against `concast-routerd
// --print-selector` (docs/dataplane-ovs.md, "Flow selectors").

/// Top byte of every selector rule's cookie; the rest of the pipeline uses other classes.
pub const SELECTOR_CLASS: u64 = 0xce << 56;
/// The cookie bits that name a rule's class.
pub const CLASS_MASK: u64 = 0xff << 56;
/// Table-0 priority of selector rules.
pub const PRIO_SELECTOR: u16 = 300;

/// The cookie that names a selector rule: `0xce << 56 | R << 24 | P << 16 | D`.
pub fn selector_cookie(r: Ipv4Addr, sel: Selector) -> u64 {
    let dport = if matches!(sel.proto, 6 | 17) { sel.dport } else { 0 };
    SELECTOR_CLASS | u64::from(u32::from(r)) << 24 | u64::from(sel.proto) << 16 | u64::from(dport)
}

/// The `add-flow` argument for a selector, in the documented field order.
pub fn selector_rule(r: Ipv4Addr, sel: Selector, cpu_ofport: u32) -> String {
    let mut m = format!("cookie={:#018x},table=0,priority={PRIO_SELECTOR},ip,nw_dst={r}", selector_cookie(r, sel));
    if sel.proto != 0 {
        m.push_str(&format!(",nw_proto={}", sel.proto));
        if matches!(sel.proto, 6 | 17) && sel.dport != 0 {
            m.push_str(&format!(",tp_dst={}", sel.dport));
        }
    }
    m.push_str(&format!(",actions=output:{cpu_ofport}"));
    m
}

/// The `del-flows` argument that removes one selector's rule (and nothing else).
pub fn selector_del(r: Ipv4Addr, sel: Selector) -> String {
    format!("cookie={:#018x}/-1,table=0", selector_cookie(r, sel))
}

/// The `del-flows` argument that removes every selector rule of a bridge.
pub fn selectors_del_all() -> String {
    format!("cookie={SELECTOR_CLASS:#018x}/{CLASS_MASK:#018x}")
}

fn ofctl(args: &[&str]) -> io::Result<()> {
    let out = Command::new("ovs-ofctl").arg("-O").arg("OpenFlow13").args(args).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("ovs-ofctl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim())))
    }
}

impl Ovs {
    pub fn new(bridge: &str, cpu_ofport: u32) -> Ovs {
        Ovs { bridge: bridge.into(), cpu_ofport, flows: HashMap::new(), users: HashMap::new() }
    }
}

impl Dataplane for Ovs {
    fn divert(&mut self, flow: FlowId, sel: Selector) -> io::Result<()> {
        let key = (flow.receiver, sel);
        if self.flows.insert(flow, key).is_none() {
            *self.users.entry(key).or_default() += 1;
        }
        ofctl(&["add-flow", &self.bridge, &selector_rule(flow.receiver, sel, self.cpu_ofport)])
    }

    fn undivert(&mut self, flow: FlowId) -> io::Result<()> {
        let Some(key) = self.flows.remove(&flow) else { return Ok(()) };
        let n = self.users.get_mut(&key).expect("counted on divert");
        *n -= 1;
        if *n > 0 {
            return Ok(()); // another flow still needs the rule
        }
        self.users.remove(&key);
        ofctl(&["del-flows", &self.bridge, &selector_del(key.0, key.1)])
    }

    fn clear(&mut self) -> io::Result<()> {
        self.flows.clear();
        self.users.clear();
        ofctl(&["del-flows", &self.bridge, &selectors_del_all()])
    }

    fn describe(&self) -> String {
        format!("ovs bridge {} (CPU port {})", self.bridge, self.cpu_ofport)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_external_command_gets_the_documented_arguments() {
        let dir = std::env::temp_dir().join(format!("routerd-dp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("calls");
        let script = dir.join("dp.sh");
        std::fs::write(&script, format!("#!/bin/sh\necho \"$@\" >> {}\n[ \"$1\" != fail ]\n", log.display())).unwrap();
        let mut dp = External::new(&format!("/bin/sh {} --switch unix:/x", script.display())).unwrap();
        let flow = FlowId { receiver: "10.1.1.2".parse().unwrap(), group: 7 };
        dp.clear().unwrap();
        dp.divert(flow, Selector { proto: 17, dport: 5000 }).unwrap();
        dp.undivert(flow).unwrap();
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "--switch unix:/x clear\n--switch unix:/x divert 10.1.1.2 7 17 5000\n--switch unix:/x undivert 10.1.1.2 7\n"
        );
        let mut bad = External::new(&format!("/bin/sh {} fail", script.display())).unwrap();
        assert!(bad.clear().is_err());
        assert!(External::new("  ").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn selector_rules_match_the_documented_format() {
        let r: Ipv4Addr = "10.1.1.2".parse().unwrap();
        let udp = Selector { proto: 17, dport: 5000 };
        assert_eq!(
            selector_rule(r, udp, 1000),
            "cookie=0xce0a010102111388,table=0,priority=300,ip,nw_dst=10.1.1.2,nw_proto=17,tp_dst=5000,actions=output:1000"
        );
        assert_eq!(
            selector_rule(r, Selector::default(), 1000),
            "cookie=0xce0a010102000000,table=0,priority=300,ip,nw_dst=10.1.1.2,actions=output:1000"
        );
        // A port means nothing without UDP or TCP: it is left out of match and cookie alike.
        assert_eq!(selector_cookie(r, Selector { proto: 254, dport: 9 }), 0xce0a010102fe0000);
        assert_eq!(selector_del(r, udp), "cookie=0xce0a010102111388/-1,table=0");
        assert_eq!(selectors_del_all(), "cookie=0xce00000000000000/0xff00000000000000");
    }
}
