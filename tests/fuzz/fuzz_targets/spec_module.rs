//! A merge-spec module as CSP delivers it: the params section reader and the engine's loader
//! (Wasm validation, the ABI's export and import checks, compilation). A module it accepts
//! must also start a flow or be refused with an error, never a panic.
#![no_main]

use std::sync::{Mutex, OnceLock};

use concast_engine::{params_section, Engine, EngineConfig, FlowConfig, FlowId, Outputs};
use libfuzzer_sys::fuzz_target;

fn engine() -> &'static Mutex<Engine> {
    static ENGINE: OnceLock<Mutex<Engine>> = OnceLock::new();
    ENGINE.get_or_init(|| Mutex::new(Engine::new(EngineConfig::default()).expect("engine starts")))
}

fuzz_target!(|data: &[u8]| {
    let _ = params_section::embedded(data);
    let mut e = engine().lock().unwrap();
    let Ok(spec) = e.load_spec(data) else { return };
    let key = FlowId::new(std::net::Ipv4Addr::new(10, 0, 0, 9), 1);
    if let Ok(flow) = e.add_flow(FlowConfig::new(key, spec.clone()), 0) {
        let mut out = Outputs::new();
        let _ = e.remove_flow(flow, 0, &mut out);
    }
    e.forget_spec(&concast_engine::sha256(data)); // the engine caches by hash: keep memory flat
});
