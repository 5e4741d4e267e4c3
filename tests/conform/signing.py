"""The suite's R signs what it offers (protocol.md 2.9): an Ed25519 key of its own, fixed so
runs are repeatable, and the signature trailer for a JOIN_ACK or SPEC_UPDATE body."""
from __future__ import annotations

import hashlib
import socket
import struct

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

CONTEXT = b"concast-spec-v1\0"


class Key:
    def __init__(self, name: bytes) -> None:
        self.secret = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(name).digest())
        self.public = self.secret.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def trailer(self, receiver: str, group: int, size: int, digest: bytes) -> dict:
        """The Scapy fields of the signature trailer over (R, G, size, hash)."""
        return {"spec_key": self.public,
                "signature": self.secret.sign(signed_bytes(receiver, group, size, digest))}


def signed_bytes(receiver: str, group: int, size: int, digest: bytes) -> bytes:
    return CONTEXT + socket.inet_aton(receiver) + struct.pack("!II", group, size) + digest


def verifies(public: bytes, signature: bytes, receiver: str, group: int, size: int,
             digest: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(
            signature, signed_bytes(receiver, group, size, digest))
        return True
    except Exception:
        return False


R_KEY = Key(b"concast conform: R")          # the key the suite's R signs with
OTHER_KEY = Key(b"concast conform: not R")  # someone else's (2.9-2)
