;; A merge spec that never returns from concast_merge: the engine's CPU limit must stop it
;; and quarantine its flow (docs/mergespec-abi.md section 9). Every required export of
;; ABI v1 is here, so it passes upload validation and fails only when it runs.
(module
  (memory (export "memory") 2)                 ;; 64 KiB scratch + the 64 KiB message buffer
  (func (export "concast_abi_version") (result i32) (i32.const 1))
  (func (export "concast_init") (result i32) (i32.const 65536))
  (func (export "concast_get_tag") (param i32) (result i64) (i64.const 0))
  (func (export "concast_state_new") (param i32 i64))
  (func (export "concast_merge") (param i32 i32) (result i32)
    (loop $forever (br $forever))
    (i32.const 0))
  (func (export "concast_done") (param i32) (result i32) (i32.const 0))
  (func (export "concast_build") (param i32) (result i32) (i32.const 0)))
