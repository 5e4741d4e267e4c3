"""Run inside an attacker's namespace: send forged CSP messages about flow (R, G) to a router,
with R's address as their source (docs/protocol.md 2.9, threat model). One of each:

  join_ack_evil_key   JOIN_ACK naming the attacker's spec, validly signed by its own key
  spec_update_evil    SPEC_UPDATE naming it, signed the same way
  join_ack_unsigned   JOIN_ACK naming it, unsigned
  spec_chunk          SPEC_CHUNK of it, for no transfer the router has in progress

Usage: forge_csp.py ROUTER R G
"""
import hashlib
import socket
import struct
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from scapy.sendrecv import send

from concast.scapy import CSP, CSP_JoinAck, CSP_SpecChunk, CSP_SpecUpdate, csp_datagram

EVIL_SPEC = b"\0asm\1\0\0\0" + b"attacker"          # what the attacker wants routers to run


def main() -> None:
    router, r, g = sys.argv[1], sys.argv[2], int(sys.argv[3])
    digest, size = hashlib.sha256(EVIL_SPEC).digest(), len(EVIL_SPEC)
    key = Ed25519PrivateKey.from_private_bytes(b"attacker" * 4)
    signed = (b"concast-spec-v1\0" + socket.inet_aton(r) + struct.pack("!II", g, size) + digest)
    trailer = {"spec_key": key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw),
               "signature": key.sign(signed)}
    bodies = [CSP_JoinAck(hold_time=30, spec_size=size, spec_hash=digest, **trailer),
              CSP_SpecUpdate(spec_size=size, spec_hash=digest, **trailer),
              CSP_JoinAck(hold_time=30, spec_size=size, spec_hash=digest),
              CSP_SpecChunk(spec_hash=digest, spec_size=size, chunk_index=0, chunk_count=1,
                            data=EVIL_SPEC)]
    for seq, body in enumerate(bodies, 1000):
        send(csp_datagram(CSP(group=g, receiver=r, seq=seq) / body, src=r, dst=router, ttl=64),
             verbose=False)
    print(f"sent {len(bodies)}")


if __name__ == "__main__":
    main()
