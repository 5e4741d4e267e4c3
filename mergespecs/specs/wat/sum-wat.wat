;; sum-wat: the `sum` merge spec written by hand in WebAssembly text, against the bare ABI
;; (docs/mergespec-abi.md) with no SDK. It proves the ABI is language-neutral: for the same
;; input it forwards byte-for-byte what the Rust `sum` spec forwards with default parameters
;; (fanin = the node's children, else 2; timeout 10 ms; TTL = the largest merged TTL).
;; It reads no parameters.
;;
;; Memory map:  0..32          scratch for the emitted payload
;;              65536..131072  the message buffer (address returned by concast_init)
;;              131072..       merge states, 32 bytes per slot: +0 key, +4 count,
;;                             +8 messages, +12 ttl (byte), +14 timer armed (byte),
;;                             +16 sport, +20 dport, +24 value (i64)
(module
  (import "concast" "now_us" (func $now_us (result i64)))
  (import "concast" "flow_children" (func $flow_children (result i32)))
  (import "concast" "set_timer" (func $set_timer (param i64)))
  (import "concast" "emit" (func $emit (param i32 i32 i32 i32 i32)))

  (memory (export "memory") 3)

  (global $MSG i32 (i32.const 65536))
  (global $STATES i32 (i32.const 131072))
  (global $TIMEOUT_US i64 (i64.const 10000))
  (global $fanin (mut i32) (i32.const 2))

  ;; ---- big-endian access (Wasm loads and stores are little-endian) ----
  (func $be16 (param $a i32) (result i32)
    (i32.or (i32.shl (i32.load8_u (local.get $a)) (i32.const 8))
            (i32.load8_u offset=1 (local.get $a))))
  (func $be32 (param $a i32) (result i32)
    (i32.or (i32.shl (call $be16 (local.get $a)) (i32.const 16))
            (call $be16 (i32.add (local.get $a) (i32.const 2)))))
  (func $be64 (param $a i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (call $be32 (local.get $a))) (i64.const 32))
            (i64.extend_i32_u (call $be32 (i32.add (local.get $a) (i32.const 4))))))
  (func $st16 (param $a i32) (param $v i32)
    (i32.store8 (local.get $a) (i32.shr_u (local.get $v) (i32.const 8)))
    (i32.store8 offset=1 (local.get $a) (local.get $v)))
  (func $st32 (param $a i32) (param $v i32)
    (call $st16 (local.get $a) (i32.shr_u (local.get $v) (i32.const 16)))
    (call $st16 (i32.add (local.get $a) (i32.const 2)) (local.get $v)))
  (func $st64 (param $a i32) (param $v i64)
    (call $st32 (local.get $a) (i32.wrap_i64 (i64.shr_u (local.get $v) (i64.const 32))))
    (call $st32 (i32.add (local.get $a) (i32.const 4)) (i32.wrap_i64 (local.get $v))))

  ;; Offset of the UDP payload (the IPv4 header length) if the message in the buffer is an
  ;; unfragmented UDP aggregate datagram, else -1.
  (func $aggregate_at (param $len i32) (result i32)
    (local $ihl i32) (local $total i32)
    (if (i32.lt_u (local.get $len) (i32.const 20)) (then (return (i32.const -1))))
    (if (i32.ne (i32.shr_u (i32.load8_u (global.get $MSG)) (i32.const 4)) (i32.const 4))
      (then (return (i32.const -1))))
    (local.set $ihl (i32.shl (i32.and (i32.load8_u (global.get $MSG)) (i32.const 15)) (i32.const 2)))
    (local.set $total (call $be16 (i32.add (global.get $MSG) (i32.const 2))))
    (if (i32.or (i32.lt_u (local.get $ihl) (i32.const 20))
          (i32.or (i32.gt_u (local.get $ihl) (local.get $total))
                  (i32.gt_u (local.get $total) (local.get $len))))
      (then (return (i32.const -1))))
    ;; MF flag or fragment offset: never merged
    (if (i32.and (call $be16 (i32.add (global.get $MSG) (i32.const 6))) (i32.const 0x3FFF))
      (then (return (i32.const -1))))
    (if (i32.ne (i32.load8_u offset=9 (global.get $MSG)) (i32.const 17))
      (then (return (i32.const -1))))
    (if (i32.lt_u (i32.sub (local.get $total) (local.get $ihl)) (i32.const 32))
      (then (return (i32.const -1))))
    ;; magic "CA", version 1
    (if (i32.ne (call $be16 (i32.add (global.get $MSG) (i32.add (local.get $ihl) (i32.const 8))))
                (i32.const 0x4341))
      (then (return (i32.const -1))))
    (if (i32.ne (i32.load8_u offset=10 (i32.add (global.get $MSG) (local.get $ihl))) (i32.const 1))
      (then (return (i32.const -1))))
    (local.get $ihl))

  ;; Address of a slot's state, growing memory when a new slot needs it.
  (func $state (param $slot i32) (result i32)
    (local $a i32) (local $need i32)
    (local.set $a (i32.add (global.get $STATES) (i32.shl (local.get $slot) (i32.const 5))))
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $a) (i32.const 65567)) (i32.const 16))
                              (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1)) (then unreachable))))
    (local.get $a))

  (func (export "concast_abi_version") (result i32) (i32.const 1))

  (func (export "concast_init") (result i32)
    (if (i32.gt_u (call $flow_children) (i32.const 0))
      (then (global.set $fanin (call $flow_children))))
    (global.get $MSG))

  (func (export "concast_get_tag") (param $len i32) (result i64)
    (local $at i32)
    (local.set $at (call $aggregate_at (local.get $len)))
    (if (i32.lt_s (local.get $at) (i32.const 0)) (then (return (i64.const -1)))) ;; TAG_PASS
    (i64.extend_i32_u (call $be32 (i32.add (global.get $MSG) (i32.add (local.get $at) (i32.const 12))))))

  (func (export "concast_state_new") (param $slot i32) (param $tag i64)
    (local $s i32)
    (local.set $s (call $state (local.get $slot)))
    (memory.fill (local.get $s) (i32.const 0) (i32.const 32))
    (i32.store (local.get $s) (i32.wrap_i64 (local.get $tag))))

  (func (export "concast_merge") (param $slot i32) (param $len i32) (result i32)
    (local $s i32) (local $p i32) (local $count i32) (local $sum i32) (local $ttl i32)
    (local.set $p (call $aggregate_at (local.get $len)))
    (if (i32.lt_s (local.get $p) (i32.const 0)) (then (return (i32.const 2)))) ;; PASS
    (local.set $p (i32.add (global.get $MSG) (local.get $p)))
    (local.set $s (call $state (local.get $slot)))
    ;; a count of 0 stands for 1
    (local.set $count (call $be32 (i32.add (local.get $p) (i32.const 16))))
    (if (i32.eqz (local.get $count)) (then (local.set $count (i32.const 1))))
    (if (i32.eqz (i32.load offset=8 (local.get $s)))
      (then
        (i64.store offset=24 (local.get $s) (call $be64 (i32.add (local.get $p) (i32.const 24))))
        (i32.store offset=16 (local.get $s) (call $be16 (local.get $p)))
        (i32.store offset=20 (local.get $s) (call $be16 (i32.add (local.get $p) (i32.const 2)))))
      (else
        (i64.store offset=24 (local.get $s)
          (i64.add (i64.load offset=24 (local.get $s))
                   (call $be64 (i32.add (local.get $p) (i32.const 24)))))))
    ;; count saturates at 2^32-1
    (local.set $sum (i32.add (i32.load offset=4 (local.get $s)) (local.get $count)))
    (if (i32.lt_u (local.get $sum) (local.get $count)) (then (local.set $sum (i32.const -1))))
    (i32.store offset=4 (local.get $s) (local.get $sum))
    (i32.store offset=8 (local.get $s) (i32.add (i32.load offset=8 (local.get $s)) (i32.const 1)))
    (local.set $ttl (i32.load8_u offset=8 (global.get $MSG)))
    (if (i32.gt_u (local.get $ttl) (i32.load8_u offset=12 (local.get $s)))
      (then (i32.store8 offset=12 (local.get $s) (local.get $ttl))))
    (i32.const 0)) ;; MERGED

  (func (export "concast_done") (param $slot i32) (result i32)
    (local $s i32)
    (local.set $s (call $state (local.get $slot)))
    (if (i32.ge_u (i32.load offset=8 (local.get $s)) (global.get $fanin))
      (then (return (i32.const 1))))
    (if (i32.eqz (i32.load8_u offset=14 (local.get $s)))
      (then
        (call $set_timer (i64.add (call $now_us) (global.get $TIMEOUT_US)))
        (i32.store8 offset=14 (local.get $s) (i32.const 1))))
    (i32.const 0))

  (func (export "concast_build") (param $slot i32) (result i32)
    (local $s i32) (local $ttl i32)
    (local.set $s (call $state (local.get $slot)))
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 32))
    (call $st16 (i32.const 0) (i32.load offset=16 (local.get $s)))    ;; UDP sport
    (call $st16 (i32.const 2) (i32.load offset=20 (local.get $s)))    ;; UDP dport
    (call $st16 (i32.const 4) (i32.const 32))                         ;; UDP length
    (call $st16 (i32.const 8) (i32.const 0x4341))                     ;; "CA"
    (i32.store8 (i32.const 10) (i32.const 1))                         ;; version
    (call $st32 (i32.const 12) (i32.load (local.get $s)))             ;; key
    (call $st32 (i32.const 16) (i32.load offset=4 (local.get $s)))    ;; count
    (call $st64 (i32.const 24) (i64.load offset=24 (local.get $s)))   ;; value
    (local.set $ttl (i32.load8_u offset=12 (local.get $s)))
    (if (i32.eqz (local.get $ttl)) (then (local.set $ttl (i32.const 1))))
    (call $emit (i32.const 0) (i32.const 32) (i32.const 17) (local.get $ttl) (i32.const 0))
    (i32.const 0)) ;; FREE
)
