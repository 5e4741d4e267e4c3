//! routerd's `--config` file, typed. Its one definition is `config.schema.json` beside this
//! crate: the Python writer checks every file against it (concast.controller.routerdconfig),
//! and the test below holds these types to it, key by key and type by type.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The definition both sides read (also printed by `concast-routerd --print-config-schema`).
pub const SCHEMA: &str = include_str!("../config.schema.json");

/// A route of the direct-egress table (or, on BMv2, of the ports' MTU table).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub prefix: String,
    pub iface: String,
    pub mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_slot: Option<u32>,
}

impl Route {
    /// The route's destination, parsed; the error names the route.
    pub fn net(&self) -> Result<Prefix, String> {
        Prefix::parse(&self.prefix).map_err(|e| format!("egress route {}: {e}", self.prefix))
    }
}

/// An IPv4 prefix `A.B.C.D/LEN`: what a route matches (longest prefix first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Prefix {
    pub fn parse(text: &str) -> Result<Prefix, String> {
        let (addr, len) = text.split_once('/').ok_or("prefix is not A.B.C.D/LEN")?;
        let addr = addr.parse().map_err(|_| "bad prefix")?;
        let len = len.parse().ok().filter(|l| *l <= 32).ok_or("bad prefix length")?;
        Ok(Prefix { addr, len })
    }

    pub fn covers(&self, dst: Ipv4Addr) -> bool {
        let mask = if self.len == 0 { 0 } else { u32::MAX << (32 - u32::from(self.len)) };
        u32::from(dst) & mask == u32::from(self.addr) & mask
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Everything the control plane tells routerd about its router; see the schema for each key.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    pub router: Option<String>,
    pub node: Option<String>,
    pub tag: Option<String>,
    pub capable: Option<bool>,
    pub dataplane: Option<Dataplane>,
    pub addr: Option<String>,
    pub addresses: Option<Vec<String>>,
    pub cpu_iface: Option<String>,
    pub cpu_ofport: Option<u32>,
    pub router_mac: Option<String>,
    pub cpu_mac: Option<String>,
    pub run_dir: Option<String>,
    pub bridge: Option<String>,
    pub p4_switch: Option<String>,
    pub dataplane_cmd: Option<String>,
    pub netns: Option<String>,
    pub tc_block: Option<u32>,
    pub tc_cpu_dev: Option<String>,
    pub egress_routes: Option<Vec<Route>>,
    pub port_routes: Option<Vec<Route>>,
    pub link_state: Option<String>,
    pub cpu_io: Option<String>,
    pub flow_pool_slots: Option<u32>,
    pub busy_poll_us: Option<u64>,
    pub wait: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Dataplane {
    Ovs,
    Bmv2,
    Linux,
}

impl RouterConfig {
    /// No path: an empty config (everything from flags). A file that is not JSON, or holds a
    /// key or a type the schema does not, is refused with the file's name and serde's reason.
    pub fn read(path: Option<&Path>) -> Result<RouterConfig, String> {
        let Some(path) = path else { return Ok(RouterConfig::default()) };
        let text = std::fs::read_to_string(path).map_err(|e| format!("--config {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("--config {}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeSet;

    /// Every field set, so serialising it names every key the type has. A struct literal:
    /// adding a field to the type without adding it here does not compile.
    fn full() -> RouterConfig {
        let route = Route { prefix: "10.0.0.0/8".into(), iface: "r1-eth1".into(), mac: "02:00:00:00:00:02".into(), link_slot: Some(3) };
        RouterConfig {
            router: Some("r1".into()),
            node: Some("r1".into()),
            tag: Some("t".into()),
            capable: Some(true),
            dataplane: Some(Dataplane::Linux),
            addr: Some("10.0.0.1".into()),
            addresses: Some(vec!["10.0.0.1".into()]),
            cpu_iface: Some("r1-cpu".into()),
            cpu_ofport: Some(1000),
            router_mac: Some("02:00:00:00:00:01".into()),
            cpu_mac: Some("02:00:00:00:00:03".into()),
            run_dir: Some("/tmp/x".into()),
            bridge: Some("r1".into()),
            p4_switch: Some("127.0.0.1:9559".into()),
            dataplane_cmd: Some("true".into()),
            netns: Some("ns".into()),
            tc_block: Some(7),
            tc_cpu_dev: Some("r1-cpus".into()),
            egress_routes: Some(vec![route.clone()]),
            port_routes: Some(vec![route]),
            link_state: Some("/dev/shm/x".into()),
            cpu_io: Some("ring".into()),
            flow_pool_slots: Some(64),
            busy_poll_us: Some(0),
            wait: Some("sleep".into()),
        }
    }

    fn schema() -> Value {
        serde_json::from_str(SCHEMA).expect("config.schema.json is JSON")
    }

    fn json_type(v: &Value) -> &'static str {
        match v {
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
            Value::Null => "null",
        }
    }

    fn same_keys_and_types(value: &Value, node: &Value, what: &str) {
        let props = node["properties"].as_object().expect("properties");
        let ours: BTreeSet<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        let theirs: BTreeSet<&str> = props.keys().map(String::as_str).collect();
        assert_eq!(ours, theirs, "{what}: the typed reader's keys differ from config.schema.json's");
        for (k, v) in value.as_object().unwrap() {
            assert_eq!(json_type(v), props[k]["type"].as_str().unwrap(), "{what}.{k}: type differs from the schema");
        }
        assert_eq!(node["additionalProperties"], Value::Bool(false), "{what}: the schema must refuse unknown keys, as serde does");
    }

    #[test]
    fn the_typed_reader_holds_exactly_the_schemas_keys_and_types() {
        let s = schema();
        let v = serde_json::to_value(full()).unwrap();
        same_keys_and_types(&v, &s, "config");
        same_keys_and_types(&v["egress_routes"][0], &s["$defs"]["route"], "route");
        let dps: Vec<Value> = ["ovs", "bmv2", "linux"].iter().map(|d| Value::from(*d)).collect();
        assert_eq!(s["properties"]["dataplane"]["enum"].as_array().unwrap(), &dps);
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused_with_the_key() {
        let e = serde_json::from_str::<RouterConfig>(r#"{"addr": "10.0.0.1", "cpu_ifac": "x"}"#).unwrap_err();
        assert!(e.to_string().contains("cpu_ifac"), "{e}");
        let e = serde_json::from_str::<RouterConfig>(r#"{"tc_block": "7"}"#).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{e}");
        let e = serde_json::from_str::<RouterConfig>(r#"{"dataplane": "tofino"}"#).unwrap_err();
        assert!(e.to_string().contains("tofino"), "{e}");
    }

    #[test]
    fn prefixes_parse_and_cover() {
        let p = Prefix::parse("10.1.0.0/16").unwrap();
        assert!(p.covers("10.1.255.1".parse().unwrap()) && !p.covers("10.2.0.1".parse().unwrap()));
        assert!(Prefix::parse("0.0.0.0/0").unwrap().covers("192.0.2.1".parse().unwrap()));
        assert_eq!(p.to_string(), "10.1.0.0/16");
        assert_eq!(Prefix::parse("10.0.0.0/33").unwrap_err(), "bad prefix length");
        assert_eq!(Prefix::parse("10.0.0/8").unwrap_err(), "bad prefix");
        assert_eq!(Prefix::parse("10.0.0.0").unwrap_err(), "prefix is not A.B.C.D/LEN");
    }

    #[test]
    fn the_round_trip_keeps_every_value() {
        let v = serde_json::to_string(&full()).unwrap();
        assert_eq!(serde_json::from_str::<RouterConfig>(&v).unwrap(), full());
    }
}
