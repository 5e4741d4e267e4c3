/* concast_spec.h: write a concast merge spec in C. One header, no libc, no allocator.
 *
 * The contract is docs/mergespec-abi.md (ABI version 2, batched; define CONCAST_ABI_V1, e.g.
 * -DCONCAST_ABI_V1, to build version 1 instead: the same source works either way); this
 * header is its C side, the
 * counterpart of the Rust SDK in mergespecs/sdk. It gives a spec:
 *   - export macros that give each ABI export its exact name and Wasm signature
 *     (CONCAST_INIT, CONCAST_GET_TAG, ...), and concast_abi_version itself;
 *   - the `concast` imports (section 5) as C functions with the right import module/names;
 *   - memcpy, memmove, memset and memcmp, because clang emits calls to them for struct
 *     copies and loops and the engine allows no other imports;
 *   - the message buffer concast_init must return, and per-slot state storage;
 *   - key=value parameter parsing (the format `concast-spec --param` and `embed` write);
 *   - big-endian access, an IPv4 reader, and concast_emit_udp, which emits a real UDP datagram
 *     (8-byte UDP header, then your bytes).
 *
 * Build one .c file into a module with Debian's clang 14 and wasm-ld (packages clang, lld):
 *
 *   clang --target=wasm32 -O2 -nostdlib -ffreestanding -I mergespecs/sdk-c \
 *         -Wl,--no-entry -Wl,--stack-first -Wl,-z,stack-size=65536 -Wl,--strip-all \
 *         -o my-spec.wasm my-spec.c
 *
 * then `concast-spec check my-spec.wasm`. clang compiles wasm32 code with hidden visibility,
 * so wasm-ld exports only what is exported by name: the macros below export exactly the ABI's
 * functions (no -Wl,--export-dynamic needed). Do not add -Wl,--allow-undefined: an undefined
 * symbol (memcpy without this header) would become an import from "env", which the engine
 * refuses. docs/mergespec-abi.md section 11 says why each flag.
 *
 * Use: in the one .c file of the module,
 *
 *   #include "concast_spec.h"
 *   struct my_state { ... };                 // optional: one state per slot
 *   CONCAST_STATES(struct my_state)          // defines concast_state(slot)
 *
 *   CONCAST_INIT() { ...read parameters...; return NULL; }       // or return "why not"
 *   CONCAST_GET_TAG(len) { ...read concast_message[0..len]...; return tag; }
 *   CONCAST_STATE_NEW(slot, tag) { struct my_state *s = concast_state(slot); ... }
 *   CONCAST_MERGE(slot, len) { ...; return CONCAST_MERGED; }
 *   CONCAST_DONE(slot) { ...; return 1 to build now, or 0 (and maybe concast_set_timer) }
 *   CONCAST_BUILD(slot) { ...concast_emit_udp(...); return CONCAST_FREE; }
 *   // optional: CONCAST_TIMEOUT(slot), CONCAST_STATE_FREE(slot), CONCAST_FLAGS()
 *
 * mergespecs/specs/c/sum-c.c is a complete spec. A second .c file in the same module defines
 * CONCAST_SPEC_DECLARATIONS_ONLY before including this header (declarations, no definitions);
 * the export macros and CONCAST_STATES belong in one file each.
 */
#ifndef CONCAST_SPEC_H
#define CONCAST_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if !defined(__wasm32__)
#error "concast_spec.h builds WebAssembly merge specs: compile with clang --target=wasm32"
#endif

/* ---- ABI numbers (docs/mergespec-abi.md; mergespecs/sdk/src/abi.rs holds the same) ---- */

#ifdef CONCAST_ABI_V1
#define CONCAST_ABI_VERSION 1
#else
#define CONCAST_ABI_VERSION 2
#endif
#define CONCAST_MSG_BUFFER_LEN 65536     /* the message buffer: every IPv4 datagram fits */

/* ABI v2's batch area (section 12): header, entry table, datagrams */
#define CONCAST_BATCH_CURRENT 0      /* u32: the entry being worked on */
#define CONCAST_BATCH_TABLE 64       /* the entry table */
#define CONCAST_BATCH_MAX 64         /* entries */
#define CONCAST_BATCH_ENTRY_LEN 24   /* off u32, len u32, tag u64, flags u32, result u32 */
#define CONCAST_BATCH_DATA 2048      /* the datagrams; an entry's off counts from here */
#define CONCAST_BATCH_AREA_LEN (CONCAST_BATCH_DATA + CONCAST_MSG_BUFFER_LEN)
#define CONCAST_BATCH_TAG_KNOWN 1u   /* flags: tag is given, do not call get_tag */
#define CONCAST_BATCH_TAKEN 2u       /* flags: taken from the pending queue: skip */
#define CONCAST_BATCH_NEEDS_STATE 4u /* result: another tag; the engine finds its state */
#define CONCAST_BATCH_DONE 0x100u    /* result bit: done said build */

/* concast_get_tag results other than a tag (tags run from 0 to 2^64 - 3) */
#define CONCAST_TAG_PASS UINT64_C(0xFFFFFFFFFFFFFFFF) /* forward unchanged */
#define CONCAST_TAG_DROP UINT64_C(0xFFFFFFFFFFFFFFFE) /* swallow it */
#define CONCAST_TAG_MAX UINT64_C(0xFFFFFFFFFFFFFFFD)

/* concast_merge results */
#define CONCAST_MERGED 0      /* folded in; the engine holds the datagram until the build */
#define CONCAST_FLUSH_FIRST 1 /* build this state first, then offer the datagram again */
#define CONCAST_PASS 2        /* not merged: forward it unchanged */
#define CONCAST_DROP 3        /* consumed, not held, nothing forwarded for it */

/* concast_build results */
#define CONCAST_FREE 0 /* the state is finished */
#define CONCAST_KEEP 1 /* the state persists under its tag */

/* emit flags, log levels, concast_flags bits */
#define CONCAST_DONT_FRAGMENT 1
#define CONCAST_LOG_ERROR 0
#define CONCAST_LOG_WARN 1
#define CONCAST_LOG_INFO 2
#define CONCAST_LOG_DEBUG 3
#define CONCAST_ORDERED_STATES 1

/* pending_peek / pending_take results below zero */
#define CONCAST_PENDING_NONE (-1)
#define CONCAST_PENDING_TOO_SMALL (-2)

/* pending_scan / pending_take_list (sections 5, 8) */
#define CONCAST_SCAN_MAX 64            /* records one pending_scan writes at most */
#define CONCAST_TAKE_LIST_MAX 64       /* indices one pending_take_list takes at most */
#define CONCAST_NOT_IN_MEMORY 0u       /* a scan record's `at`: not laid out; pending_peek it */

#define CONCAST_PROTO_UDP 17
#define CONCAST_UDP_HEADER_LEN 8
/* Largest payload one emit may carry (the engine's default output limit). */
#define CONCAST_EMIT_MAX 65507
/* Largest parameter text the SDK reads; longer parameters refuse the flow (as the Rust SDK). */
#define CONCAST_PARAMS_CAP 4096

/* ---- exports: each macro names the export and fixes its Wasm signature ---- */

#define CONCAST_EXPORT(name) __attribute__((export_name(name)))
#define CONCAST_UNUSED_ __attribute__((unused)) /* a spec need not read every argument */

#ifdef CONCAST_ABI_V1
#define CONCAST_BUFFER_ concast_message /* v1: the message buffer */
#else
#define CONCAST_BUFFER_ concast_batch_area_ /* v2: the batch area */
#endif

/* concast_init: the SDK's export reads the parameters, runs your body, and returns the
 * message buffer (v1) or the batch area (v2). Return NULL to accept the flow, or a message
 * to refuse it. */
#define CONCAST_INIT()                                                        \
    static const char *concast_user_init_(void);                             \
    CONCAST_EXPORT("concast_init") int32_t concast_init(void) {               \
        concast_load_params_();                                               \
        const char *why_ = concast_user_init_();                              \
        if (why_)                                                             \
            concast_abort_str(why_);                                          \
        return (int32_t)(uintptr_t)CONCAST_BUFFER_;                          \
    }                                                                         \
    static const char *concast_user_init_(void)

/* (len) -> i64: the datagram is concast_message[0..len]; return a tag or a CONCAST_TAG_*.
 * In v2 GET_TAG and MERGE are not exports: the SDK's concast_run calls them per datagram,
 * with concast_message pointing at it. */
#ifdef CONCAST_ABI_V1
#define CONCAST_GET_TAG(len)                                                  \
    CONCAST_EXPORT("concast_get_tag")                                         \
    uint64_t concast_get_tag(uint32_t len CONCAST_UNUSED_)
#else
#define CONCAST_GET_TAG(len) uint64_t concast_user_get_tag_(uint32_t len CONCAST_UNUSED_)
#endif
/* (slot, tag) -> () */
#define CONCAST_STATE_NEW(slot, tag)                                          \
    CONCAST_EXPORT("concast_state_new")                                       \
    void concast_state_new(uint32_t slot CONCAST_UNUSED_, uint64_t tag CONCAST_UNUSED_)
/* (slot, len) -> i32: a CONCAST_MERGED .. CONCAST_DROP */
#ifdef CONCAST_ABI_V1
#define CONCAST_MERGE(slot, len)                                              \
    CONCAST_EXPORT("concast_merge")                                           \
    int32_t concast_merge(uint32_t slot CONCAST_UNUSED_, uint32_t len CONCAST_UNUSED_)
#else
#define CONCAST_MERGE(slot, len)                                              \
    int32_t concast_user_merge_(uint32_t slot CONCAST_UNUSED_, uint32_t len CONCAST_UNUSED_)
#endif
/* (slot) -> i32: non-zero = build now */
#define CONCAST_DONE(slot)                                                    \
    CONCAST_EXPORT("concast_done") int32_t concast_done(uint32_t slot CONCAST_UNUSED_)
/* (slot) -> i32: emit, then CONCAST_FREE or CONCAST_KEEP */
#define CONCAST_BUILD(slot)                                                   \
    CONCAST_EXPORT("concast_build") int32_t concast_build(uint32_t slot CONCAST_UNUSED_)
/* optional (slot) -> i32: non-zero = build now (without it the engine builds) */
#define CONCAST_TIMEOUT(slot)                                                 \
    CONCAST_EXPORT("concast_timeout") int32_t concast_timeout(uint32_t slot CONCAST_UNUSED_)
/* optional (slot) -> () */
#define CONCAST_STATE_FREE(slot)                                              \
    CONCAST_EXPORT("concast_state_free")                                      \
    void concast_state_free(uint32_t slot CONCAST_UNUSED_)
/* optional () -> i32: CONCAST_ORDERED_STATES or 0 */
#define CONCAST_FLAGS() CONCAST_EXPORT("concast_flags") int32_t concast_flags(void)

/* ---- imports (section 5), module "concast" ---- */

#define CONCAST_IMPORT(name) __attribute__((import_module("concast"), import_name(name)))

CONCAST_IMPORT("now_us") uint64_t concast_now_us(void); /* engine clock, µs */
CONCAST_IMPORT("flow_receiver") uint32_t concast_flow_receiver(void); /* R, big-endian u32 */
CONCAST_IMPORT("flow_group") uint32_t concast_flow_group(void);
CONCAST_IMPORT("flow_node") uint32_t concast_flow_node(void); /* source of emitted datagrams */
CONCAST_IMPORT("flow_mtu") uint32_t concast_flow_mtu(void);
CONCAST_IMPORT("flow_children") uint32_t concast_flow_children(void); /* 0 = unknown */
CONCAST_IMPORT("flow_params") uint32_t concast_flow_params(void *buf, uint32_t cap);
CONCAST_IMPORT("set_timer") void concast_set_timer(uint64_t at_us);     /* state calls */
CONCAST_IMPORT("cancel_timer") void concast_cancel_timer(void);         /* state calls */
CONCAST_IMPORT("hold_limit") void concast_hold_limit(uint64_t at_us);   /* state calls */
CONCAST_IMPORT("egress_free_at") uint64_t concast_egress_free_at(void);
CONCAST_IMPORT("pending_count") int32_t concast_pending_count(void);
CONCAST_IMPORT("pending_peek") int32_t concast_pending_peek(int32_t index, void *buf, uint32_t cap);
CONCAST_IMPORT("pending_take") int32_t concast_pending_take(int32_t index, void *buf, uint32_t cap);
/* One record per pending datagram `first`, `first + 1`, ... (at most `cap`, at most
 * CONCAST_SCAN_MAX): where its bytes already are in linear memory (v2: in the batch area, read
 * them in place until this call returns to the engine) or CONCAST_NOT_IN_MEMORY, and its
 * length. Returns how many records it wrote (0: none from `first`). */
struct concast_scan_record {
    uint32_t at;
    uint32_t len;
};
CONCAST_IMPORT("pending_scan")
int32_t concast_pending_scan(int32_t first, struct concast_scan_record *records, uint32_t cap);
/* State calls: takes the `n` (<= CONCAST_TAKE_LIST_MAX) pending datagrams whose indices are
 * listed, strictly ascending, as positions before this call, into the current state without
 * copying them. Returns n; -1 and nothing taken if one is missing or out of order. */
CONCAST_IMPORT("pending_take_list")
int32_t concast_pending_take_list(const uint32_t *indices, uint32_t n);
/* concast_build only; the engine writes the IPv4 header (protocol, TTL, DF as given) */
CONCAST_IMPORT("emit") void concast_emit(const void *payload, uint32_t len, int32_t protocol,
                                         int32_t ttl, int32_t flags);
CONCAST_IMPORT("log") void concast_log(int32_t level, const void *text, uint32_t len);
CONCAST_IMPORT("abort") __attribute__((noreturn))
void concast_abort(const void *text, uint32_t len);

/* ---- what the implementation part defines ---- */

#ifdef CONCAST_ABI_V1
/* The message buffer: the engine copies each datagram here before get_tag and merge. */
extern uint8_t concast_message[CONCAST_MSG_BUFFER_LEN];
#else
/* The datagram get_tag and merge are about, inside the batch area (v2). */
extern uint8_t *concast_message;
extern uint8_t concast_batch_area_[CONCAST_BATCH_AREA_LEN];
uint64_t concast_user_get_tag_(uint32_t len);
int32_t concast_user_merge_(uint32_t slot, uint32_t len);
int32_t concast_done(uint32_t slot);
#endif

void *memcpy(void *dst, const void *src, size_t n);
void *memmove(void *dst, const void *src, size_t n);
void *memset(void *dst, int c, size_t n);
int memcmp(const void *a, const void *b, size_t n);

void concast_load_params_(void);
/* The flow's parameter bytes (loaded before your CONCAST_INIT body runs). */
const uint8_t *concast_params(uint32_t *len);
/* The value of the last `key=...` item: 1 and *value, *value_len if present, else 0. */
int concast_param(const char *key, const uint8_t **value, uint32_t *value_len);
/* `key` as a decimal or 0x-hex number: absent = `fallback`; returns 0, or -1 if present but
 * not a number or above `max` (refuse the flow then, as the bundled specs do). */
int concast_param_u64(const char *key, uint64_t fallback, uint64_t max, uint64_t *out);

uint32_t concast_strlen(const char *s);
void concast_log_str(int32_t level, const char *text);
__attribute__((noreturn)) void concast_abort_str(const char *text);

/* Emits a UDP datagram. `datagram` holds 8 free bytes for the UDP header, then `payload_len`
 * bytes of payload; the header is written there (ports, length, checksum 0 = none, as IPv4
 * allows) and the whole is emitted as protocol 17. Call from CONCAST_BUILD only. */
void concast_emit_udp(uint8_t *datagram, uint32_t payload_len, uint16_t sport, uint16_t dport,
                      uint8_t ttl, int32_t flags);

/* ---- inline helpers ---- */

static inline uint16_t concast_be16(const uint8_t *p) {
    return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}
static inline uint32_t concast_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t concast_be64(const uint8_t *p) {
    return (uint64_t)concast_be32(p) << 32 | concast_be32(p + 4);
}
static inline void concast_put_be16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void concast_put_be32(uint8_t *p, uint32_t v) {
    concast_put_be16(p, (uint16_t)(v >> 16));
    concast_put_be16(p + 2, (uint16_t)v);
}
static inline void concast_put_be64(uint8_t *p, uint64_t v) {
    concast_put_be32(p, (uint32_t)(v >> 32));
    concast_put_be32(p + 4, (uint32_t)v);
}

/* An IPv4 datagram as the engine hands it over (the whole datagram, header and options). */
struct concast_ipv4 {
    const uint8_t *header;
    uint32_t header_len;     /* IHL * 4, options included */
    uint32_t total_len;      /* the header's total length (the bytes after it are ignored) */
    const uint8_t *payload;  /* header + header_len */
    uint32_t payload_len;    /* total_len - header_len */
    uint8_t protocol, ttl;
    bool fragment;           /* MF set or a fragment offset: never merge these */
    uint32_t src, dst;       /* big-endian u32 */
};

/* Reads `msg` (`len` bytes): 1 if it is structurally valid IPv4 (version 4, IHL >= 5,
 * header <= total length <= len), filling `ip`; else 0. */
static inline int concast_ipv4_read(const uint8_t *msg, uint32_t len, struct concast_ipv4 *ip) {
    if (len < 20 || msg[0] >> 4 != 4)
        return 0;
    uint32_t header_len = (uint32_t)(msg[0] & 0x0F) * 4;
    uint32_t total = concast_be16(msg + 2);
    if (header_len < 20 || header_len > len || total < header_len || total > len)
        return 0;
    ip->header = msg;
    ip->header_len = header_len;
    ip->total_len = total;
    ip->payload = msg + header_len;
    ip->payload_len = total - header_len;
    ip->protocol = msg[9];
    ip->ttl = msg[8];
    ip->fragment = (concast_be16(msg + 6) & 0x3FFF) != 0;
    ip->src = concast_be32(msg + 12);
    ip->dst = concast_be32(msg + 16);
    return 1;
}

/* ---- per-slot states ----
 * CONCAST_STATES(type) (once, after the type is defined) defines
 *     static type *concast_state(uint32_t slot);
 * the state of `slot`, in storage grown from memory.grow in chunks of doubling size (16, 32,
 * 64, ... states), so a state never moves and the engine's slot numbers index it directly.
 * Fresh storage is zero; a reused slot holds the last state's bytes, so set every field in
 * CONCAST_STATE_NEW. */
#define CONCAST_CHUNKS_ 27 /* 16 * (2^27 - 1) slots: more than any engine limit allows */
void *concast_slot_(void **chunks, uint32_t slot, uint32_t size);
#define CONCAST_STATES(type)                                                  \
    static void *concast_state_chunks_[CONCAST_CHUNKS_];                     \
    static type *concast_state(uint32_t slot) {                              \
        return (type *)concast_slot_(concast_state_chunks_, slot, sizeof(type)); \
    }

/* ======================================================================================= */
#ifndef CONCAST_SPEC_DECLARATIONS_ONLY

CONCAST_EXPORT("concast_abi_version") int32_t concast_abi_version(void) {
    return CONCAST_ABI_VERSION;
}

#ifdef CONCAST_ABI_V1
__attribute__((aligned(16))) uint8_t concast_message[CONCAST_MSG_BUFFER_LEN];
#else
__attribute__((aligned(16))) uint8_t concast_batch_area_[CONCAST_BATCH_AREA_LEN];
uint8_t *concast_message = concast_batch_area_ + CONCAST_BATCH_DATA;

/* The engine writes entries and flags (TAKEN, during pending_take) while a run goes on:
 * every access to the area goes through these volatile helpers. */
static inline uint32_t concast_area_u32_(uint32_t at) {
    return *(volatile uint32_t *)(concast_batch_area_ + at);
}
static inline void concast_area_put_u32_(uint32_t at, uint32_t v) {
    *(volatile uint32_t *)(concast_batch_area_ + at) = v;
}

/* (first, count, slot, tag) -> stop: section 12. Tags, merges and asks done for entries
 * first..count in order; stops at the first one that needs the engine. */
CONCAST_EXPORT("concast_run")
int32_t concast_run(int32_t first, int32_t count, int32_t slot, int64_t tag) {
    if (count > CONCAST_BATCH_MAX)
        count = CONCAST_BATCH_MAX;
    for (int32_t i = first < 0 ? 0 : first; i < count; i++) {
        uint32_t e = CONCAST_BATCH_TABLE + (uint32_t)i * CONCAST_BATCH_ENTRY_LEN;
        uint32_t flags = concast_area_u32_(e + 16);
        if (flags & CONCAST_BATCH_TAKEN)
            continue;
        concast_area_put_u32_(CONCAST_BATCH_CURRENT, (uint32_t)i);
        uint32_t off = concast_area_u32_(e), len = concast_area_u32_(e + 4);
        if (off > CONCAST_MSG_BUFFER_LEN)
            off = CONCAST_MSG_BUFFER_LEN;
        if (len > CONCAST_MSG_BUFFER_LEN - off)
            len = CONCAST_MSG_BUFFER_LEN - off;
        concast_message = concast_batch_area_ + CONCAST_BATCH_DATA + off;
        uint64_t t;
        if (flags & CONCAST_BATCH_TAG_KNOWN) {
            t = (uint64_t)concast_area_u32_(e + 8) | (uint64_t)concast_area_u32_(e + 12) << 32;
        } else {
            t = concast_user_get_tag_(len);
            concast_area_put_u32_(e + 8, (uint32_t)t);
            concast_area_put_u32_(e + 12, (uint32_t)(t >> 32));
        }
        if (t == CONCAST_TAG_PASS || t == CONCAST_TAG_DROP)
            continue;
        if (slot < 0 || t != (uint64_t)tag) {
            concast_area_put_u32_(e + 20, CONCAST_BATCH_NEEDS_STATE);
            return i;
        }
        int32_t r = concast_user_merge_((uint32_t)slot, len);
        if (r == CONCAST_MERGED || r == CONCAST_DROP) {
            if (concast_done((uint32_t)slot)) {
                concast_area_put_u32_(e + 20, (uint32_t)r | CONCAST_BATCH_DONE);
                return i;
            }
            concast_area_put_u32_(e + 20, (uint32_t)r);
        } else {
            concast_area_put_u32_(e + 20, (uint32_t)r);
            return i;
        }
    }
    return count;
}
#endif

/* no_builtin: clang would otherwise turn these loops back into calls to themselves. */
__attribute__((no_builtin)) void *memcpy(void *dst, const void *src, size_t n) {
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    while (n--)
        *d++ = *s++;
    return dst;
}
__attribute__((no_builtin)) void *memmove(void *dst, const void *src, size_t n) {
    uint8_t *d = (uint8_t *)dst;
    const uint8_t *s = (const uint8_t *)src;
    if (d < s) {
        while (n--)
            *d++ = *s++;
    } else {
        while (n--)
            d[n] = s[n];
    }
    return dst;
}
__attribute__((no_builtin)) void *memset(void *dst, int c, size_t n) {
    uint8_t *d = (uint8_t *)dst;
    while (n--)
        *d++ = (uint8_t)c;
    return dst;
}
__attribute__((no_builtin)) int memcmp(const void *a, const void *b, size_t n) {
    const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
    for (; n; n--, x++, y++)
        if (*x != *y)
            return *x < *y ? -1 : 1;
    return 0;
}

uint32_t concast_strlen(const char *s) {
    uint32_t n = 0;
    while (s[n])
        n++;
    return n;
}
void concast_log_str(int32_t level, const char *text) {
    concast_log(level, text, concast_strlen(text));
}
void concast_abort_str(const char *text) {
    concast_abort(text, concast_strlen(text));
}

static uint8_t concast_params_buf_[CONCAST_PARAMS_CAP];
static uint32_t concast_params_len_;

void concast_load_params_(void) {
    uint32_t full = concast_flow_params(concast_params_buf_, CONCAST_PARAMS_CAP);
    if (full > CONCAST_PARAMS_CAP)
        concast_abort_str("flow parameters longer than the C SDK's 4096-byte buffer");
    concast_params_len_ = full;
}

const uint8_t *concast_params(uint32_t *len) {
    *len = concast_params_len_;
    return concast_params_buf_;
}

/* Items are separated by space, tab, CR, LF, ',', ';' or NUL (the Rust SDK's rule);
 * items without '=' are skipped; the last `key=` wins. */
static int concast_param_sep_(uint8_t b) {
    return b == ' ' || b == '\n' || b == '\t' || b == '\r' || b == ',' || b == ';' || b == 0;
}

int concast_param(const char *key, const uint8_t **value, uint32_t *value_len) {
    uint32_t key_len = concast_strlen(key), i = 0, n = concast_params_len_;
    const uint8_t *p = concast_params_buf_;
    int found = 0;
    while (i <= n) {
        uint32_t start = i;
        while (i < n && !concast_param_sep_(p[i]))
            i++;
        /* item p[start..i] */
        uint32_t eq = start;
        while (eq < i && p[eq] != '=')
            eq++;
        if (eq < i && eq - start == key_len && memcmp(p + start, key, key_len) == 0) {
            *value = p + eq + 1;
            *value_len = i - eq - 1;
            found = 1;
        }
        i++; /* past the separator (or the end) */
    }
    return found;
}

int concast_param_u64(const char *key, uint64_t fallback, uint64_t max, uint64_t *out) {
    const uint8_t *v;
    uint32_t len;
    if (!concast_param(key, &v, &len)) {
        *out = fallback;
        return 0;
    }
    uint64_t radix = 10, value = 0;
    if (len >= 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
        radix = 16;
        v += 2;
        len -= 2;
    }
    if (len == 0)
        return -1;
    for (uint32_t i = 0; i < len; i++) {
        uint8_t c = v[i];
        uint64_t d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (radix == 16 && c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (radix == 16 && c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        if (value > (UINT64_MAX - d) / radix)
            return -1; /* overflow */
        value = value * radix + d;
    }
    if (value > max)
        return -1;
    *out = value;
    return 0;
}

void concast_emit_udp(uint8_t *datagram, uint32_t payload_len, uint16_t sport, uint16_t dport,
                      uint8_t ttl, int32_t flags) {
    uint32_t len = CONCAST_UDP_HEADER_LEN + payload_len;
    if (len > CONCAST_EMIT_MAX)
        concast_abort_str("concast_emit_udp: payload too long for one datagram");
    concast_put_be16(datagram, sport);
    concast_put_be16(datagram + 2, dport);
    concast_put_be16(datagram + 4, (uint16_t)len);
    concast_put_be16(datagram + 6, 0); /* no checksum (RFC 768; the bundled specs do the same) */
    concast_emit(datagram, len, CONCAST_PROTO_UDP, ttl, flags);
}

/* chunk c holds slots 16*(2^c - 1) .. 16*(2^(c+1) - 1) */
void *concast_slot_(void **chunks, uint32_t slot, uint32_t size) {
    uint32_t n = slot / 16 + 1;
    uint32_t chunk = 31 - (uint32_t)__builtin_clz(n);
    if (chunk >= CONCAST_CHUNKS_)
        concast_abort_str("state slot number out of range");
    if (!chunks[chunk]) {
        uint64_t bytes = ((uint64_t)16 << chunk) * size;
        uint64_t pages = (bytes + 65535) / 65536;
        int32_t old = pages > 65536 ? -1 : (int32_t)__builtin_wasm_memory_grow(0, (size_t)pages);
        if (old < 0)
            concast_abort_str("out of memory for merge states");
        chunks[chunk] = (void *)((uintptr_t)old * 65536); /* fresh pages: zero */
    }
    return (uint8_t *)chunks[chunk] + (uint64_t)(slot - 16 * ((1u << chunk) - 1)) * size;
}

#endif /* CONCAST_SPEC_DECLARATIONS_ONLY */
#endif /* CONCAST_SPEC_H */
