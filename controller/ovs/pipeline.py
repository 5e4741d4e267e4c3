"""The OpenFlow 1.3 rules of one OVS router (docs/dataplane-ovs.md has the picture).

table 0 (diversion, capable routers only, plus ARP answers on every router)
    1000  in_port=CPU                          -> goto_table:1   (re-injected: never diverted)
     900  arp request for a port address       -> ARP reply out of IN_PORT
     500  ip, nw_dst=own address               -> output:CPU
     400  ip, nw_proto=253 (CSP)               -> output:CPU
     300  run-time selectors (selectors.py)    -> output:CPU
       0  anything                             -> goto_table:1
table 1 (IPv4 forwarding, every router)
     /n   ip, nw_dst=prefix/n, priority n      -> dec_ttl, eth src/dst, output:port
     32   ip, nw_dst=own address               -> drop (nothing to deliver it to)
"""
from __future__ import annotations

from concast.controller.routes import Route
from concast.controller.ovs import selectors as sel
from concast.netmodel.addressing import RouterPlan
from concast.netmodel.naming import CPU_OFPORT


def _flow(cookie: int, table: int, priority: int, match: str, actions: str) -> str:
    m = f"{match}," if match else ""
    return f"cookie={cookie:#018x},table={table},priority={priority},{m}actions={actions}"


def arp_reply_actions(mac: str, ip) -> str:
    """Turn an ARP request into the reply and send it back where it came from."""
    return ("move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],"
            f"set_field:{mac}->eth_src,"
            "set_field:2->arp_op,"
            "move:NXM_NX_ARP_SHA[]->NXM_NX_ARP_THA[],"
            f"set_field:{mac}->arp_sha,"
            "move:NXM_OF_ARP_SPA[]->NXM_OF_ARP_TPA[],"
            f"set_field:{ip}->arp_spa,"
            "IN_PORT")


def base_flows(router: RouterPlan, routes: list[Route]) -> list[str]:
    """Rules every router has: default goto, ARP answers, IPv4 forwarding."""
    flows = [_flow(sel.BASE_COOKIE, 0, sel.PRIO_DEFAULT, "", "goto_table:1")]
    if router.capable:
        flows.append(_flow(sel.BASE_COOKIE, 0, sel.PRIO_CPU_BYPASS,
                           f"in_port={CPU_OFPORT}", "goto_table:1"))
    for p in router.ports:
        flows.append(_flow(sel.BASE_COOKIE, 0, sel.PRIO_ARP,
                           f"arp,in_port={p.ofport},arp_op=1,arp_tpa={p.address}",
                           arp_reply_actions(router.mac, p.address)))
    for r in routes:
        if r.ofport is None:
            flows.append(_flow(sel.BASE_COOKIE, 1, 32, f"ip,nw_dst={r.prefix}", "drop"))
        else:
            flows.append(_flow(
                sel.BASE_COOKIE, 1, r.prefix.prefixlen, f"ip,nw_dst={r.prefix}",
                f"dec_ttl,set_field:{router.mac}->eth_src,"
                f"set_field:{r.next_hop_mac}->eth_dst,output:{r.ofport}"))
    return flows


def diversion_flows(router: RouterPlan) -> list[str]:
    """Static diversion of a capable router: CSP and datagrams to the router itself."""
    if not router.capable:
        return []
    out = f"output:{CPU_OFPORT}"
    flows = [_flow(sel.DIVERSION_COOKIE, 0, sel.PRIO_OWN_ADDRESS, f"ip,nw_dst={a}", out)
             for a in router.own_addresses()]
    flows.append(_flow(sel.DIVERSION_COOKIE, 0, sel.PRIO_CSP, f"ip,nw_proto={sel.CSP_PROTO}", out))
    return flows


def router_flows(router: RouterPlan, routes: list[Route]) -> list[str]:
    return base_flows(router, routes) + diversion_flows(router)
