/* sum-c: the `sum` merge spec in C, on the C SDK (mergespecs/sdk-c/concast_spec.h).
 *
 * The twin of the Rust `sum` (mergespecs/specs/aggregate, Aggregate<Sum>): the same payload,
 * the same parameters (k, fanin, timeout_us, ttl), the same rules, so for the same input and
 * parameters it forwards byte-for-byte what `sum` forwards (engine/tests/c_spec.rs checks).
 *
 * Payload of an aggregate datagram (after the IPv4 header; all fields big-endian):
 *    0      2      4      6      8     10    11    12      16        20       24
 *    | sport| dport| len  | csum | "CA" | ver | rsv | key u32| count u32| reserved| value i64 |
 *    \______ UDP header ______/  \________________ aggregate header ________________/
 * ver = 1; count = the contributions the value stands for (0 reads as 1); the tag is the key.
 */
#include "concast_spec.h"

#define AGG_LEN 32 /* UDP header + aggregate header */

struct sum_state {
    uint32_t key;
    uint32_t count;    /* contributions folded in (saturating) */
    uint32_t messages; /* messages merged at this node */
    int64_t value;     /* wrapping sum */
    uint16_t sport, dport;
    uint8_t ttl; /* largest TTL merged */
    bool timer_armed;
};

CONCAST_STATES(struct sum_state)

/* Flow parameters, read once in concast_init. */
static uint64_t k, fanin, timeout_us, ttl;

struct contribution {
    uint16_t sport, dport;
    uint32_t key, count;
    int64_t value;
    uint8_t ttl;
};

/* The contribution in the message buffer, if it is an unfragmented UDP aggregate datagram. */
static int contribution(uint32_t len, struct contribution *c) {
    struct concast_ipv4 ip;
    if (!concast_ipv4_read(concast_message, len, &ip) || ip.fragment ||
        ip.protocol != CONCAST_PROTO_UDP)
        return 0;
    const uint8_t *p = ip.payload;
    if (ip.payload_len < AGG_LEN || p[8] != 'C' || p[9] != 'A' || p[10] != 1)
        return 0;
    c->sport = concast_be16(p);
    c->dport = concast_be16(p + 2);
    c->key = concast_be32(p + 12);
    c->count = concast_be32(p + 16);
    c->value = (int64_t)concast_be64(p + 24);
    c->ttl = ip.ttl;
    return 1;
}

/* The fan-in in force: `fanin` if set, else the node's children now, else 2. */
static uint32_t fanin_now(void) {
    if (fanin)
        return (uint32_t)fanin;
    uint32_t children = concast_flow_children();
    return children ? children : 2;
}

CONCAST_INIT() {
    static const char bad[] =
        "aggregate spec: a parameter (k, fanin, timeout_us, ttl) is not a number in range";
    if (concast_param_u64("k", 0, UINT32_MAX, &k) ||
        concast_param_u64("fanin", 0, UINT32_MAX, &fanin) ||
        concast_param_u64("timeout_us", 10000, 3600000000u, &timeout_us) ||
        concast_param_u64("ttl", 0, 255, &ttl))
        return bad;
    return NULL;
}

CONCAST_GET_TAG(len) {
    struct contribution c;
    return contribution(len, &c) ? c.key : CONCAST_TAG_PASS;
}

CONCAST_STATE_NEW(slot, tag) {
    struct sum_state *s = concast_state(slot);
    memset(s, 0, sizeof *s);
    s->key = (uint32_t)tag;
}

CONCAST_MERGE(slot, len) {
    struct contribution c;
    if (!contribution(len, &c))
        return CONCAST_PASS;
    struct sum_state *s = concast_state(slot);
    uint32_t count = c.count ? c.count : 1;
    if (s->messages == 0) {
        s->value = c.value;
        s->sport = c.sport;
        s->dport = c.dport;
    } else {
        s->value = (int64_t)((uint64_t)s->value + (uint64_t)c.value); /* wrapping */
    }
    s->count = s->count > UINT32_MAX - count ? UINT32_MAX : s->count + count;
    s->messages++;
    if (c.ttl > s->ttl)
        s->ttl = c.ttl;
    return CONCAST_MERGED;
}

static int round_complete(const struct sum_state *s) {
    return (k > 0 && s->count >= k) || s->messages >= fanin_now();
}

CONCAST_DONE(slot) {
    struct sum_state *s = concast_state(slot);
    if (round_complete(s))
        return 1;
    if (!s->timer_armed) {
        uint64_t now = concast_now_us();
        concast_set_timer(now > UINT64_MAX - timeout_us ? UINT64_MAX : now + timeout_us);
        s->timer_armed = true;
    }
    return 0;
}

CONCAST_BUILD(slot) {
    struct sum_state *s = concast_state(slot);
    uint8_t out[AGG_LEN] = {0}; /* out[0..8]: the UDP header, written by concast_emit_udp */
    out[8] = 'C';
    out[9] = 'A';
    out[10] = 1;
    concast_put_be32(out + 12, s->key);
    concast_put_be32(out + 16, s->count);
    concast_put_be64(out + 24, (uint64_t)s->value);
    uint8_t out_ttl = ttl ? (uint8_t)ttl : (s->ttl ? s->ttl : 1);
    concast_emit_udp(out, AGG_LEN - CONCAST_UDP_HEADER_LEN, s->sport, s->dport, out_ttl, 0);
    if (!round_complete(s))
        concast_log_str(CONCAST_LOG_DEBUG, "aggregate: timeout, forwarding a partial round");
    return CONCAST_FREE;
}
