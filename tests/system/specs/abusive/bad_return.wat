;; Violates the ABI: concast_merge returns 7, which is none of MERGED, DROP, PASS, FLUSH_FIRST (abi_violation).
;; Every export of ABI v1 is present, so hostd and routers accept it at upload; the abuse
;; starts only when datagrams arrive (tests/system/test_reliability_abuse.py).
(module
  (memory (export "memory") 2)
  (func (export "concast_abi_version") (result i32) (i32.const 1))
  (func (export "concast_init") (result i32) (i32.const 65536))
  (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
  (func (export "concast_state_new") (param i32 i64))
  (func (export "concast_merge") (param i32 i32) (result i32) (i32.const 7))
  (func (export "concast_done") (param i32) (result i32) (i32.const 0))
  (func (export "concast_build") (param i32) (result i32) (i32.const 0)))
