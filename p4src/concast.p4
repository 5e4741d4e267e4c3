/* concast.p4 -- the BMv2 (v1model) data plane of a concast router.
 *
 * What it does (docs/dataplane-bmv2.md has the picture, docs/protocol.md the bytes):
 *   - IPv4 longest-prefix forwarding (table ipv4_lpm): next-hop MAC, router MAC, port,
 *     TTL decrement, drop when the TTL would reach 0;
 *   - an IPv4 options walk over up to 40 bytes (protocol.md 1.1) that finds the Concast ID
 *     option (0x9E, length 6) wherever it stands, and flags malformed option lists, which
 *     are dropped and counted by error kind (counter `malformed`);
 *   - diversion to the CPU port (routerd): CSP datagrams and datagrams to the router's own
 *     addresses (table divert_static), concast datagrams of flows with an entry in table
 *     concast_flows (key: destination R, group G; installed by routerd at run time);
 *   - frames that arrive FROM the CPU port are never diverted: they go straight to
 *     forwarding (protocol.md section 4);
 *   - ARP requests for the router's port addresses are answered in the data plane
 *     (table arp_answer), as the OVS pipeline does.
 *
 * Checksum: the header checksum is verified over the whole header, options included, and
 * a datagram that fails is dropped and counted (dropped: bad_checksum; RFC 1812 5.2.2). It
 * is updated incrementally (RFC 1624, eqn. 3) for the TTL decrement, which needs no
 * knowledge of the options, and every options byte leaves the switch as it came in.
 *
 * Where each part lives (include/):
 *   headers.p4   address types, protocol numbers, counter indexes, headers, metadata
 *   parser.p4    ConcastParser, with the options walk
 *   ingress.p4   ArpResponder, HeaderChecks, Divert, Forward, and ConcastIngress over them
 *   deparser.p4  ConcastDeparser, the header checksum check (and no recomputation)
 */
#include <core.p4>
#include <v1model.p4>

#include "include/headers.p4"
#include "include/parser.p4"
#include "include/ingress.p4"
#include "include/deparser.p4"

V1Switch(ConcastParser(), ConcastVerifyChecksum(), ConcastIngress(), ConcastEgress(),
         ConcastComputeChecksum(), ConcastDeparser()) main;
