;; Floods timers: every merge and every timeout re-arms the state's timer for now, so a daemon would fire it on every pass of its loop. Each call is short; the per-flow CPU budget per second stops it (cpu_budget).
;; Every export of ABI v1 is present, so hostd and routers accept it at upload; the abuse
;; starts only when datagrams arrive (tests/system/test_reliability_abuse.py).
(module
  (import "concast" "set_timer" (func $set_timer (param i64)))
  (import "concast" "now_us" (func $now (result i64)))
  (memory (export "memory") 2)
  (func (export "concast_abi_version") (result i32) (i32.const 1))
  (func (export "concast_init") (result i32) (i32.const 65536))
  (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
  (func (export "concast_state_new") (param i32 i64))
  (func (export "concast_merge") (param i32 i32) (result i32) (call $set_timer (call $now)) (i32.const 0))
  (func (export "concast_done") (param i32) (result i32) (i32.const 0))
  (func (export "concast_timeout") (param i32) (result i32) (call $set_timer (call $now)) (i32.const 0))
  (func (export "concast_build") (param i32) (result i32) (i32.const 0)))
