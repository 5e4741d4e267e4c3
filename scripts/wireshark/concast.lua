-- concast.lua: a Wireshark dissector for concast (docs/protocol.md is the specification).
--
-- What it shows
--   * "Concast" (filter `concast`): a postdissector that walks the IPv4 options area of every
--     IPv4 datagram exactly as docs/protocol.md section 1.1 says, and shows the group of a
--     concast datagram (`concast.group`). A datagram that fails the checks of sections 1.1/1.2
--     gets `concast.error` (the spec's error name, e.g. "option_overflow") and an expert info.
--   * "Concast Signalling Protocol" (filter `concast.csp`, IPv4 protocol 253): common header
--     and every body, validated per section 2.
--   * "Concast Multiplex Packet" (filter `concast.mplex`, IPv4 protocol 254): MplexHdr and one
--     subtree per EncapsulatedPkt record, validated per section 3.
--   Every validation failure sets `concast.error` to the spec's name (one per datagram: the
--   first failing check) and adds the expert info `concast.malformed`, so
--   `tshark -Y concast.error` lists every malformed concast datagram.
--
-- How to use it
--   One-off, from the repository root:
--       tshark -X lua_script:scripts/wireshark/concast.lua -r capture.pcap -Y concast
--       wireshark -X lua_script:scripts/wireshark/concast.lua capture.pcap
--   Permanently, for one user: copy (or symlink) this file into the personal plugin folder
--       mkdir -p ~/.local/lib/wireshark/plugins
--       cp scripts/wireshark/concast.lua ~/.local/lib/wireshark/plugins/
--   (do not combine both: loading the file twice fails with "Proto new: there cannot be two
--   protocols with the same description").
--
--   As root: Wireshark only runs personal and -X Lua scripts as root when the global init.lua
--   says `run_user_scripts_when_superuser = true`. Debian 12's wireshark 4.0
--   (/usr/share/wireshark/init.lua) ships with `true`, so `-X lua_script:` works as root there
--   (tshark only prints its usual "Running as user root" warning). If your system's init.lua
--   says `false`, run tshark as an ordinary user instead.
--
-- Limits
--   * Wireshark's own IPv4 dissector sees the header first. Some malformed headers stop it
--     from calling the protocol 253/254 dissectors (or from creating the IPv4 tree at all);
--     the postdissector still checks the header when it can find it (the "ip" tree item, or
--     the whole frame on a raw-IPv4 link type), see analyze_ipv4().
--   * Only the outermost IPv4 header of a frame is walked by the postdissector (an IPv4
--     header quoted inside an ICMP error is cut short on purpose and must not be judged).
--   * A datagram cut short by the capture's snap length is shown but not validated.
--
-- Written for the Wireshark 4.0 Lua API (Lua 5.2); uses no bit library.

----------------------------------------------------------------------------------------------
-- Constants of the protocol (docs/protocol.md)
----------------------------------------------------------------------------------------------

local OPT_EOL           = 0x00
local OPT_NOP           = 0x01
local OPT_ROUTER_ALERT  = 0x94
local OPT_CONCAST_ID    = 0x9E
local CONCAST_ID_LEN    = 6
local ROUTER_ALERT_LEN  = 4

local IPPROTO_CSP       = 253
local IPPROTO_MPLEX     = 254

local IPV4_MIN_HEADER   = 20
local CSP_HEADER_LEN    = 16
local SPEC_CHUNK_SIZE   = 1024
local SPEC_MAX_SIZE     = 1048576        -- 1 MiB
local SPEC_MAX_CHUNKS   = 1024
local ERROR_MAX_REASON  = 200
local MPLEX_HEADER_LEN  = 16
local RECORD_HEADER_LEN = 9
local MPLEX_VERSION     = 1

local CSP_JOIN, CSP_JOIN_ACK, CSP_REFRESH, CSP_LEAVE = 1, 2, 3, 4
local CSP_SPEC_REQUEST, CSP_SPEC_CHUNK, CSP_SPEC_UPDATE, CSP_ERROR = 5, 6, 7, 8

local csp_type_names = {
    [CSP_JOIN] = "JOIN", [CSP_JOIN_ACK] = "JOIN_ACK", [CSP_REFRESH] = "REFRESH",
    [CSP_LEAVE] = "LEAVE", [CSP_SPEC_REQUEST] = "SPEC_REQUEST", [CSP_SPEC_CHUNK] = "SPEC_CHUNK",
    [CSP_SPEC_UPDATE] = "SPEC_UPDATE", [CSP_ERROR] = "ERROR",
}

-- Body sizes of section 2.1; nil for the two variable-size bodies, checked by their own rules.
local csp_fixed_body = {
    [CSP_JOIN] = 40, [CSP_JOIN_ACK] = 40, [CSP_REFRESH] = 40, [CSP_LEAVE] = 0,
    [CSP_SPEC_REQUEST] = 36, [CSP_SPEC_UPDATE] = 36,
}
-- JOIN_ACK and SPEC_UPDATE may instead carry R's signature trailer (2.9): key, signature.
local SIG_KEY_LEN, SIG_LEN = 32, 64
local SIG_TRAILER_LEN = SIG_KEY_LEN + SIG_LEN
local csp_signable = { [CSP_JOIN_ACK] = true, [CSP_SPEC_UPDATE] = true }
local SPEC_CHUNK_MIN_BODY = 40
local ERROR_MIN_BODY = 4

-- Section 2.7; other codes are valid and shown by Wireshark as "Unknown".
local csp_error_names = {
    [1] = "NO_SPEC", [2] = "SPEC_REJECTED", [3] = "UNKNOWN_FLOW", [4] = "SPEC_NOT_FOUND",
    [5] = "MALFORMED", [6] = "FLOW_QUARANTINED", [7] = "RESOURCE_LIMIT",
}

----------------------------------------------------------------------------------------------
-- Protocols, fields and expert infos (declared once, here)
----------------------------------------------------------------------------------------------

local p_concast = Proto("concast", "Concast")
local p_csp     = Proto("concast.csp", "Concast Signalling Protocol")
local p_mplex   = Proto("concast.mplex", "Concast Multiplex Packet")

-- concast: the Concast ID option and the errors (the error field is shared by all three).
local f_option    = ProtoField.bytes("concast.option", "Concast ID option")
local f_group     = ProtoField.uint32("concast.group", "Group ID", base.DEC)
local f_error     = ProtoField.string("concast.error", "Error")
p_concast.fields  = { f_option, f_group, f_error }

local e_malformed = ProtoExpert.new("concast.malformed", "Malformed concast datagram",
                                    expert.group.MALFORMED, expert.severity.ERROR)
p_concast.experts = { e_malformed }

-- concast.csp: common header (section 2.1)
local f_csp_version  = ProtoField.uint8("concast.csp.version", "Version", base.DEC)
local f_csp_type     = ProtoField.uint8("concast.csp.type", "Type", base.DEC, csp_type_names)
local f_csp_length   = ProtoField.uint16("concast.csp.length", "Length", base.DEC)
local f_csp_group    = ProtoField.uint32("concast.csp.group", "Group ID", base.DEC)
local f_csp_receiver = ProtoField.ipv4("concast.csp.receiver", "Receiver address")
local f_csp_seq      = ProtoField.uint32("concast.csp.seq", "Sequence number", base.DEC)
-- bodies (sections 2.2 - 2.7)
local f_csp_hold_time      = ProtoField.uint16("concast.csp.hold_time", "Hold time (s)", base.DEC)
local f_csp_selector_proto = ProtoField.uint8("concast.csp.selector_proto", "Selector protocol",
                                              base.DEC)
local f_csp_selector_dport = ProtoField.uint16("concast.csp.selector_dport",
                                               "Selector destination port", base.DEC)
local f_csp_reserved       = ProtoField.bytes("concast.csp.reserved", "Reserved")
local f_csp_join_flags     = ProtoField.uint8("concast.csp.join_flags", "Flags", base.HEX)
local f_csp_join_s         = ProtoField.bool("concast.csp.join_flags.s",
                                             "S: reads signature trailers", 8, nil, 0x80)
local f_csp_path_mtu       = ProtoField.uint16("concast.csp.path_mtu",
                                               "Path MTU toward R (0 = not known)", base.DEC)
local f_csp_spec_hash      = ProtoField.bytes("concast.csp.spec_hash", "Spec hash (SHA-256)")
local f_csp_spec_size      = ProtoField.uint32("concast.csp.spec_size", "Spec size (bytes)",
                                               base.DEC)
local f_csp_chunk_index    = ProtoField.uint16("concast.csp.chunk_index", "Chunk index", base.DEC)
local f_csp_chunk_count    = ProtoField.uint16("concast.csp.chunk_count", "Chunk count", base.DEC)
local f_csp_data           = ProtoField.bytes("concast.csp.data", "Data")
local f_csp_data_length    = ProtoField.uint32("concast.csp.data_length", "Data length", base.DEC)
local f_csp_error_code     = ProtoField.uint16("concast.csp.error_code", "Error code", base.DEC,
                                               csp_error_names)
local f_csp_offending_type = ProtoField.uint8("concast.csp.offending_type", "Offending type",
                                              base.DEC, csp_type_names)
local f_csp_reason         = ProtoField.string("concast.csp.reason", "Reason")
local f_csp_body           = ProtoField.bytes("concast.csp.body", "Body")
local f_csp_spec_key       = ProtoField.bytes("concast.csp.spec_key", "R's public key (Ed25519)")
local f_csp_signature      = ProtoField.bytes("concast.csp.signature",
                                              "R's signature over (R, G, size, hash)")
p_csp.fields = {
    f_csp_version, f_csp_type, f_csp_length, f_csp_group, f_csp_receiver, f_csp_seq,
    f_csp_hold_time, f_csp_selector_proto, f_csp_selector_dport, f_csp_reserved,
    f_csp_join_flags, f_csp_join_s,
    f_csp_path_mtu, f_csp_spec_hash, f_csp_spec_size, f_csp_chunk_index, f_csp_chunk_count, f_csp_data,
    f_csp_data_length, f_csp_error_code, f_csp_offending_type, f_csp_reason, f_csp_body,
    f_csp_spec_key, f_csp_signature,
}

-- concast.mplex: MplexHdr and EncapsulatedPkt records (section 3)
local f_mx_initial_ttl     = ProtoField.uint8("concast.mplex.initial_ttl", "initialTTL", base.DEC)
local f_mx_version         = ProtoField.uint8("concast.mplex.version", "Version", base.DEC)
local f_mx_reserved        = ProtoField.bytes("concast.mplex.reserved", "Reserved")
local f_mx_max_total_delay = ProtoField.uint32("concast.mplex.max_total_delay",
                                               "MaxTotalDelay (µs)", base.DEC)
local f_mx_delayed_so_far  = ProtoField.uint32("concast.mplex.delayed_so_far",
                                               "DelayedSoFar (µs)", base.DEC)
local f_mx_max_local_delay = ProtoField.uint32("concast.mplex.max_local_delay",
                                               "MaxLocalDelay (µs)", base.DEC)
local f_mx_record_count    = ProtoField.uint32("concast.mplex.record_count", "Records", base.DEC)
local f_mx_record          = ProtoField.bytes("concast.mplex.record", "EncapsulatedPkt")
local f_mx_rec_src         = ProtoField.ipv4("concast.mplex.record.src", "SrcAddr")
local f_mx_rec_ttl         = ProtoField.uint8("concast.mplex.record.ttl", "TTL", base.DEC)
local f_mx_rec_proto       = ProtoField.uint8("concast.mplex.record.proto", "ProtocolNum",
                                              base.DEC)
local f_mx_rec_length      = ProtoField.uint16("concast.mplex.record.payload_length",
                                               "PayloadLength", base.DEC)
local f_mx_rec_tos         = ProtoField.uint8("concast.mplex.record.tos", "TOS", base.DEC)
local f_mx_rec_payload     = ProtoField.bytes("concast.mplex.record.payload", "Payload")
p_mplex.fields = {
    f_mx_initial_ttl, f_mx_version, f_mx_reserved, f_mx_max_total_delay, f_mx_delayed_so_far,
    f_mx_max_local_delay, f_mx_record_count, f_mx_record, f_mx_rec_src, f_mx_rec_ttl,
    f_mx_rec_proto, f_mx_rec_length, f_mx_rec_tos, f_mx_rec_payload,
}

-- Field extractors used to find the IPv4 header: a dissector registered in "ip.proto" only
-- gets the IPv4 payload, and a postdissector gets the whole frame, so both look up where
-- Wireshark's IPv4 dissector put its tree item.
local fx_ip    = Field.new("ip")
local fx_encap = Field.new("frame.encap_type")

----------------------------------------------------------------------------------------------
-- Helpers
----------------------------------------------------------------------------------------------

-- Adds concast.error and the expert info under `tree`, highlighting `range` when given.
-- One call per datagram: the first failing check of the spec names the error.
local function report(tree, pinfo, name, detail, range)
    local item
    if range then
        item = tree:add(f_error, range, name)
    else
        item = tree:add(f_error, name)
    end
    item:add_proto_expert_info(e_malformed, name .. ": " .. detail)
    pinfo.cols.info:append(" [concast " .. name .. "]")
end

-- A range of `len` bytes at `off` that never raises a Lua error (clipped to the captured
-- bytes), for highlighting where an error sits.
local function safe_range(tvb, off, len)
    local n = tvb:len()
    if off >= n then return tvb(n, 0) end
    return tvb(off, math.min(len, n - off))
end

-- The IPv4 datagram Wireshark's IPv4 dissector found, as a Tvb starting at its header, and
-- the number of bytes of it that were on the wire (its reported length: a short snap length
-- must not look like a short datagram). `outermost` picks the first IPv4 header of the frame
-- (postdissector) instead of the last one seen so far (the one enclosing an ip.proto call).
local function find_ipv4(frame_tvb, outermost)
    local items = { fx_ip() }
    local fi = outermost and items[1] or items[#items]
    if fi then
        local src, off = fi.source, fi.offset
        if src and off < src:len() then
            return src(off):tvb(), src:reported_len() - off
        end
        return nil
    end
    -- Wireshark's IPv4 dissector creates no tree item for some broken headers (a version-6
    -- nibble is handed to the IPv6 dissector). On a raw-IPv4 link type (LINKTYPE_IPV4) the
    -- frame is the datagram, so it can still be judged.
    local encap = fx_encap()
    if frame_tvb and encap and encap.value == wtap_encaps.RAW_IP4 then
        return frame_tvb, frame_tvb:reported_len()
    end
    return nil
end

----------------------------------------------------------------------------------------------
-- IPv4 header and options (sections 1, 1.1, 1.2)
----------------------------------------------------------------------------------------------

-- Checks the header (section 1.2, in the spec's order) and walks the options area (1.1).
-- Returns a table:
--   error, detail, err_off, err_len   the first failing check, if any
--   uncaptured                        the bytes needed were not captured: nothing judged
--   hlen, total_length                header and datagram length when the header is sound
--   group, option_off                 the Concast ID option, if the datagram is concast
--   router_alert                      a Router Alert option is present
local function analyze_ipv4(dg, present)
    local r = {}
    local function fail(name, detail, off, len)
        r.error, r.detail, r.err_off, r.err_len = name, detail, off, len
        return r
    end

    if present < IPV4_MIN_HEADER then
        return fail("truncated", present .. " bytes, an IPv4 header needs 20", 0, present)
    end
    if dg:len() < IPV4_MIN_HEADER then r.uncaptured = true; return r end

    local b0 = dg(0, 1):uint()
    local version, ihl = math.floor(b0 / 16), b0 % 16
    if version ~= 4 then
        return fail("bad_version", "version field is " .. version, 0, 1)
    end
    if ihl < 5 then
        return fail("bad_ihl", "IHL is " .. ihl .. ", at least 5 needed", 0, 1)
    end
    local hlen = ihl * 4
    if hlen > present then
        return fail("header_overflow",
                    "IHL says " .. hlen .. " bytes of header, " .. present .. " present", 0, 1)
    end
    local total = dg(2, 2):uint()
    -- MF or a fragment offset: not checked as CSP or MplexPkt (section 1.2, "Fragments")
    r.fragment = dg(6, 2):uint() % 0x4000 ~= 0
    if total < hlen or total > present then
        return fail("bad_total_length", "total length " .. total .. " with a " .. hlen ..
                    "-byte header and " .. present .. " bytes present", 2, 2)
    end
    r.hlen, r.total_length = hlen, total
    if dg:len() < hlen then r.uncaptured = true; return r end

    -- The walk of section 1.1; `stop` is the end of the options area.
    local i, stop = IPV4_MIN_HEADER, hlen
    while i < stop do
        local otype = dg(i, 1):uint()
        if otype == OPT_EOL then
            break            -- the rest is padding and not looked at, even a 0x9E after it
        elseif otype == OPT_NOP then
            i = i + 1
        else
            if i + 1 >= stop then
                return fail("option_truncated",
                            string.format("option 0x%02X has no length byte", otype), i, 1)
            end
            local olen = dg(i + 1, 1):uint()
            if olen < 2 then
                return fail("option_bad_length",
                            string.format("option 0x%02X has length %d", otype, olen), i, 2)
            end
            if i + olen > stop then
                return fail("option_overflow",
                            string.format("option 0x%02X of length %d runs past the %d-byte " ..
                                          "options area", otype, olen, stop - IPV4_MIN_HEADER),
                            i, stop - i)
            end
            if otype == OPT_CONCAST_ID then
                if olen ~= CONCAST_ID_LEN then
                    return fail("concast_option_bad_length",
                                "Concast ID option has length " .. olen .. ", must be 6", i, olen)
                end
                if r.option_off then
                    return fail("concast_option_duplicate", "a second Concast ID option", i, olen)
                end
                r.option_off, r.group = i, dg(i + 2, 4):uint()
            elseif otype == OPT_ROUTER_ALERT then
                if olen ~= ROUTER_ALERT_LEN then
                    return fail("option_bad_length",
                                "Router Alert option has length " .. olen .. ", must be 4",
                                i, olen)
                end
                r.router_alert = true
            end
            i = i + olen     -- any other option is skipped whole
        end
    end
    return r
end

-- The postdissector: shows the Concast ID option of a concast datagram and reports IPv4
-- header and option errors. Non-concast, well-formed datagrams get nothing.
function p_concast.dissector(tvb, pinfo, tree)
    local dg, present = find_ipv4(tvb, true)
    if not dg then return end
    local r = analyze_ipv4(dg, present)
    if not r.error and not r.group then return end

    local t
    if r.hlen and dg:len() >= r.hlen then
        t = tree:add(p_concast, dg(0, r.hlen))
    else
        t = tree:add(p_concast)
    end
    if r.error then
        t:append_text(": malformed (" .. r.error .. ")")
        report(t, pinfo, r.error, r.detail, safe_range(dg, r.err_off, r.err_len))
        return
    end
    t:append_text(", Group: " .. r.group)
    local opt = t:add(f_option, dg(r.option_off, CONCAST_ID_LEN))
    opt:add(f_group, dg(r.option_off + 2, 4))
    pinfo.cols.info:append(" [concast G=" .. r.group .. "]")
end

register_postdissector(p_concast)

-- For the protocol 253/254 dissectors: the IPv4 analysis of the enclosing datagram, or nil
-- if it cannot be found (then the option-dependent checks are skipped, not guessed).
-- When the IPv4 level is broken the postdissector reports it; the payload is not judged.
local function enclosing_ipv4(tree)
    local dg, present = find_ipv4(nil, false)
    if not dg then
        tree:add("IPv4 header not found: Router Alert / Concast ID checks skipped")
        return nil, true
    end
    local r = analyze_ipv4(dg, present)
    if r.error then
        tree:add("Not validated: the IPv4 datagram is malformed (" .. r.error ..
                 ", see the Concast tree)")
        return r, false
    end
    return r, true
end

-- True (after a note in the tree) if the payload was cut by the snap length.
local function not_captured(tvb, tree)
    if tvb:len() < tvb:reported_len() then
        tree:add("Not fully captured: not dissected")
        return true
    end
    return false
end

----------------------------------------------------------------------------------------------
-- CSP (section 2)
----------------------------------------------------------------------------------------------

-- Body dissectors, one per layout; `b` is the body (a Tvb), `t` the CSP tree. Each is only
-- called when the body holds at least its fixed part.
local function csp_join_body(b, t)            -- JOIN and REFRESH (2.2)
    t:add(f_csp_hold_time, b(0, 2))
    t:add(f_csp_selector_proto, b(2, 1))
    local flags = t:add(f_csp_join_flags, b(3, 1))   -- S is 0x80; the other bits reserved
    flags:add(f_csp_join_s, b(3, 1))
    t:add(f_csp_selector_dport, b(4, 2))
    t:add(f_csp_reserved, b(6, 2))
    t:add(f_csp_spec_hash, b(8, 32))
end

-- The signature trailer after a fixed body of `fixed` bytes, when present (2.9).
local function csp_signature(b, t, fixed)
    if b:len() == fixed + SIG_TRAILER_LEN then
        t:add(f_csp_spec_key, b(fixed, SIG_KEY_LEN))
        t:add(f_csp_signature, b(fixed + SIG_KEY_LEN, SIG_LEN))
    end
end

local function csp_join_ack_body(b, t)        -- 2.3
    t:add(f_csp_hold_time, b(0, 2))
    t:add(f_csp_path_mtu, b(2, 2))
    t:add(f_csp_spec_size, b(4, 4))
    t:add(f_csp_spec_hash, b(8, 32))
    csp_signature(b, t, 40)
end

local function csp_spec_request_body(b, t)    -- 2.5
    t:add(f_csp_spec_hash, b(0, 32))
    t:add(f_csp_chunk_index, b(32, 2))
    t:add(f_csp_reserved, b(34, 2))
end

local function csp_spec_chunk_body(b, t)      -- 2.5
    t:add(f_csp_spec_hash, b(0, 32))
    t:add(f_csp_spec_size, b(32, 4))
    t:add(f_csp_chunk_index, b(36, 2))
    t:add(f_csp_chunk_count, b(38, 2))
    local n = b:len() - SPEC_CHUNK_MIN_BODY
    t:add(f_csp_data_length, n):set_generated()
    if n > 0 then t:add(f_csp_data, b(SPEC_CHUNK_MIN_BODY, n)) end
end

local function csp_spec_update_body(b, t)     -- 2.6
    t:add(f_csp_spec_size, b(0, 4))
    t:add(f_csp_spec_hash, b(4, 32))
    csp_signature(b, t, 36)
end

local function csp_error_body(b, t)           -- 2.7
    t:add(f_csp_error_code, b(0, 2))
    t:add(f_csp_offending_type, b(2, 1))
    t:add(f_csp_reserved, b(3, 1))
    local n = b:len() - ERROR_MIN_BODY
    if n > 0 then
        t:add_packet_field(f_csp_reason, b(ERROR_MIN_BODY, n), ENC_UTF_8)
    else
        t:add(f_csp_reason, "")      -- an empty reason is valid; show it as such
    end
end

local csp_bodies = {
    [CSP_JOIN]         = { 40, csp_join_body },
    [CSP_JOIN_ACK]     = { 40, csp_join_ack_body },
    [CSP_REFRESH]      = { 40, csp_join_body },
    [CSP_SPEC_REQUEST] = { 36, csp_spec_request_body },
    [CSP_SPEC_CHUNK]   = { SPEC_CHUNK_MIN_BODY, csp_spec_chunk_body },
    [CSP_SPEC_UPDATE]  = { 36, csp_spec_update_body },
    [CSP_ERROR]        = { ERROR_MIN_BODY, csp_error_body },
}

-- The range rules of sections 2.5 and 2.6 for a spec size.
local function bad_spec_size(size)
    return size == 0 or size > SPEC_MAX_SIZE
end

-- The checks of section 2 that follow the Router Alert check, in the spec's order, for a
-- payload `p` whose common header is present. Returns error name, detail, offset, length.
local function check_csp(p, version, mtype, length)
    local plen = p:len()
    if length > plen then
        return "csp_truncated", "Length " .. length .. ", payload " .. plen, 2, 2
    end
    if version ~= 1 then
        return "csp_bad_version", "version " .. version, 0, 1
    end
    if mtype == 0 or mtype > CSP_ERROR then
        return "csp_unknown_type", "type " .. mtype, 1, 1
    end
    if length < plen then
        return "csp_bad_length", (plen - length) .. " trailing bytes after Length " .. length,
               length, plen - length
    end
    local name = csp_type_names[mtype]
    local body = length - CSP_HEADER_LEN
    local fixed = csp_fixed_body[mtype]
    local signed = csp_signable[mtype] and body == fixed + SIG_TRAILER_LEN
    if fixed and body ~= fixed and not signed then
        local want = tostring(fixed)
        if csp_signable[mtype] then want = fixed .. " or " .. (fixed + SIG_TRAILER_LEN) end
        return "csp_bad_length", name .. " body must be " .. want .. " bytes, is " .. body,
               2, 2
    end
    if mtype == CSP_ERROR then
        if body < ERROR_MIN_BODY then
            return "csp_bad_length", "ERROR body of " .. body .. " bytes, at least 4", 2, 2
        end
        if body - ERROR_MIN_BODY > ERROR_MAX_REASON then
            return "csp_bad_length", "reason of " .. (body - ERROR_MIN_BODY) ..
                   " bytes, at most 200", 20, body - ERROR_MIN_BODY
        end
    elseif mtype == CSP_SPEC_REQUEST then
        local index = p(48, 2):uint()
        if index >= SPEC_MAX_CHUNKS then
            return "csp_chunk_out_of_range", "chunk index " .. index, 48, 2
        end
    elseif mtype == CSP_SPEC_UPDATE then
        local size = p(16, 4):uint()
        if bad_spec_size(size) then
            return "csp_chunk_out_of_range", "spec size " .. size, 16, 4
        end
    elseif mtype == CSP_SPEC_CHUNK then
        -- 2.5 gives its own order: body size, then the range rules, then the data length.
        if body < SPEC_CHUNK_MIN_BODY then
            return "csp_bad_length", "SPEC_CHUNK body of " .. body .. " bytes, at least 40",
                   2, 2
        end
        local size, index, count = p(48, 4):uint(), p(52, 2):uint(), p(54, 2):uint()
        if bad_spec_size(size) then
            return "csp_chunk_out_of_range", "spec size " .. size, 48, 4
        end
        local needed = math.ceil(size / SPEC_CHUNK_SIZE)
        if count ~= needed then
            return "csp_chunk_out_of_range", "chunk count " .. count .. ", size " .. size ..
                   " needs " .. needed, 54, 2
        end
        if index >= count then
            return "csp_chunk_out_of_range", "chunk index " .. index .. " of " .. count, 52, 2
        end
        local data = body - SPEC_CHUNK_MIN_BODY
        local want = SPEC_CHUNK_SIZE
        if index == count - 1 then want = size - SPEC_CHUNK_SIZE * (count - 1) end
        if data ~= want then
            return "csp_bad_length", "chunk " .. index .. " carries " .. data ..
                   " bytes of data, must be " .. want, 56, data
        end
    end
    return nil
end

function p_csp.dissector(tvb, pinfo, tree)
    pinfo.cols.protocol = "CSP"
    pinfo.cols.info = "Concast Signalling Protocol"   -- replaced once the header is read
    local t = tree:add(p_csp, tvb())
    local ip, judge = enclosing_ipv4(t)
    if not judge then return tvb:len() end
    if ip and ip.fragment then
        t:add("A fragment: not checked as a CSP message (protocol.md 1.2)")
        return tvb:len()
    end

    -- Router Alert comes first in the order of checks (2.1).
    if ip and not ip.router_alert then
        report(t, pinfo, "csp_missing_router_alert", "protocol 253 without Router Alert")
        return tvb:len()
    end
    if not_captured(tvb, t) then return tvb:len() end

    local plen = tvb:len()
    if plen < CSP_HEADER_LEN then
        if plen > 0 then t:add(f_csp_body, tvb()) end
        report(t, pinfo, "csp_truncated", "payload of " .. plen .. " bytes, header needs 16",
               tvb())
        return plen
    end

    -- common header (2.1)
    local version, mtype, length = tvb(0, 1):uint(), tvb(1, 1):uint(), tvb(2, 2):uint()
    t:add(f_csp_version, tvb(0, 1))
    t:add(f_csp_type, tvb(1, 1))
    t:add(f_csp_length, tvb(2, 2))
    t:add(f_csp_group, tvb(4, 4))
    t:add(f_csp_receiver, tvb(8, 4))
    t:add(f_csp_seq, tvb(12, 4))
    local tname = csp_type_names[mtype] or ("type " .. mtype)
    t:append_text(", " .. tname)
    pinfo.cols.info = string.format("%s G=%d R=%s seq=%d", tname, tvb(4, 4):uint(),
                                    tostring(tvb(8, 4):ipv4()), tvb(12, 4):uint())

    -- body: shown whenever its fixed part is there, even if a check below fails
    local body_len = math.min(length, plen) - CSP_HEADER_LEN
    local layout = csp_bodies[mtype]
    if layout and body_len >= layout[1] then
        layout[2](tvb(CSP_HEADER_LEN, body_len):tvb(), t)
    elseif body_len > 0 then
        t:add(f_csp_body, tvb(CSP_HEADER_LEN, body_len))
    end

    local err, detail, off, len = check_csp(tvb, version, mtype, length)
    if err then report(t, pinfo, err, detail, safe_range(tvb, off, len)) end
    return plen
end

----------------------------------------------------------------------------------------------
-- MplexPkt (section 3)
----------------------------------------------------------------------------------------------

local function mplex_header(p, t)
    t:add(f_mx_initial_ttl, p(0, 1))
    t:add(f_mx_version, p(1, 1))
    t:add(f_mx_reserved, p(2, 2))
    t:add(f_mx_max_total_delay, p(4, 4))
    t:add(f_mx_delayed_so_far, p(8, 4))
    t:add(f_mx_max_local_delay, p(12, 4))
end

-- One EncapsulatedPkt record at `off` of a payload of `plen` bytes. Returns the offset after
-- it, or nil and an error detail when it does not fit (mplex_record_truncated).
local function mplex_record(p, off, index, t)
    local left = p:len() - off
    if left < RECORD_HEADER_LEN then
        t:add(f_mx_record, p(off, left)):append_text(" (truncated record header)")
        return nil, left .. " bytes left for a record header of " .. RECORD_HEADER_LEN
    end
    local plen = p(off + 6, 2):uint()
    local fits = RECORD_HEADER_LEN + plen <= left
    local size = fits and RECORD_HEADER_LEN + plen or left
    local rt = t:add(f_mx_record, p(off, size))
    rt:set_text(string.format("Record %d: %s, TTL %d, protocol %d, TOS 0x%02x, %d bytes%s",
                              index, tostring(p(off, 4):ipv4()), p(off + 4, 1):uint(),
                              p(off + 5, 1):uint(), p(off + 8, 1):uint(), plen,
                              fits and "" or " (truncated)"))
    rt:add(f_mx_rec_src, p(off, 4))
    rt:add(f_mx_rec_ttl, p(off + 4, 1))
    rt:add(f_mx_rec_proto, p(off + 5, 1))
    rt:add(f_mx_rec_length, p(off + 6, 2))
    rt:add(f_mx_rec_tos, p(off + 8, 1))
    if not fits then
        return nil, "PayloadLength " .. plen .. " with " .. (left - RECORD_HEADER_LEN) ..
                    " bytes left"
    end
    if plen > 0 then rt:add(f_mx_rec_payload, p(off + RECORD_HEADER_LEN, plen)) end
    return off + RECORD_HEADER_LEN + plen
end

function p_mplex.dissector(tvb, pinfo, tree)
    pinfo.cols.protocol = "MPLEX"
    pinfo.cols.info = "MplexPkt"                      -- completed once the records are read
    local t = tree:add(p_mplex, tvb())
    local ip, judge = enclosing_ipv4(t)
    if not judge then return tvb:len() end
    if ip and ip.fragment then
        t:add("A fragment: not checked as an MplexPkt (protocol.md 1.2)")
        return tvb:len()
    end

    if ip and not ip.group then
        report(t, pinfo, "mplex_missing_concast_option", "protocol 254 without Concast ID option")
        return tvb:len()
    end
    if not_captured(tvb, t) then return tvb:len() end

    local plen = tvb:len()
    if plen < MPLEX_HEADER_LEN then
        report(t, pinfo, "mplex_truncated_header",
               "payload of " .. plen .. " bytes, MplexHdr needs 16", tvb())
        return plen
    end
    mplex_header(tvb, t)
    if tvb(1, 1):uint() ~= MPLEX_VERSION then
        report(t, pinfo, "mplex_bad_version", "Version " .. tvb(1, 1):uint() .. ", this dissector reads "
               .. MPLEX_VERSION, tvb(1, 1))
        return plen
    end

    -- records back to back up to the IPv4 total length (the tvb ends there)
    local off, count, err, err_off = MPLEX_HEADER_LEN, 0, nil, nil
    while off < plen do
        local start = off
        off, err = mplex_record(tvb, off, count + 1, t)
        if not off then err_off = start; break end
        count = count + 1
    end
    t:add(f_mx_record_count, count):set_generated()
    t:append_text(", " .. count .. " record(s)")
    pinfo.cols.info = string.format("MplexPkt initialTTL=%d records=%d", tvb(0, 1):uint(), count)
    if err then
        report(t, pinfo, "mplex_record_truncated", err, safe_range(tvb, err_off, plen - err_off))
    elseif count == 0 then
        report(t, pinfo, "mplex_zero_records", "no record after the MplexHdr")
    end
    return plen
end

local ip_proto = DissectorTable.get("ip.proto")
ip_proto:add(IPPROTO_CSP, p_csp)
ip_proto:add(IPPROTO_MPLEX, p_mplex)
