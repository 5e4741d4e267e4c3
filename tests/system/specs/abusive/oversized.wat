;; Oversized output: every merge is done at once, and concast_build emits a 70,000-byte payload, above the engine's 65,507-byte output limit (output_limit).
;; Every export of ABI v1 is present, so hostd and routers accept it at upload; the abuse
;; starts only when datagrams arrive (tests/system/test_reliability_abuse.py).
(module
  (import "concast" "emit" (func $emit (param i32 i32 i32 i32 i32)))
  (memory (export "memory") 2)
  (func (export "concast_abi_version") (result i32) (i32.const 1))
  (func (export "concast_init") (result i32) (i32.const 65536))
  (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
  (func (export "concast_state_new") (param i32 i64))
  (func (export "concast_merge") (param i32 i32) (result i32) (i32.const 0))
  (func (export "concast_done") (param i32) (result i32) (i32.const 1))
  (func (export "concast_build") (param i32) (result i32)
    (call $emit (i32.const 0) (i32.const 70000) (i32.const 17) (i32.const 64) (i32.const 0))
    (i32.const 0)))
