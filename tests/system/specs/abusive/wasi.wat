;; Not a merge spec the engine will run: it imports WASI (I/O outside the sandbox's ABI), so
;; hostd refuses it at upload and the spec in force stays (validation).
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "concast_abi_version") (result i32) (i32.const 1))
  (func (export "concast_init") (result i32) (i32.const 65536))
  (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
  (func (export "concast_state_new") (param i32 i64))
  (func (export "concast_merge") (param i32 i32) (result i32) (i32.const 0))
  (func (export "concast_done") (param i32) (result i32) (i32.const 0))
  (func (export "concast_build") (param i32) (result i32) (i32.const 0)))
