//! Receiver-signed specs (docs/protocol.md 2.9): R signs `(R, G, size, hash)` with Ed25519;
//! every node that fetches the spec checks the signature before it runs the spec.

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::msg::{FlowId, SpecHash, SpecSig};

/// R's signature over the spec `(size, hash)` of `flow`.
pub fn sign(key: &SigningKey, flow: FlowId, size: u32, hash: &SpecHash) -> SpecSig {
    let m = concast_wire::csp::signed_message(flow.receiver, flow.group, size, hash);
    SpecSig { key: key.verifying_key().to_bytes(), sig: key.sign(&m).to_bytes() }
}

/// Whether `sig` is a valid signature by `sig.key` over the spec `(size, hash)` of `flow`.
/// Strict verification: weak keys and non-canonical signatures are refused, so one signed
/// statement has one encoding.
pub fn verify(flow: FlowId, size: u32, hash: &SpecHash, sig: &SpecSig) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(&sig.key) else { return false };
    let m = concast_wire::csp::signed_message(flow.receiver, flow.group, size, hash);
    key.verify_strict(&m, &Signature::from_bytes(&sig.sig)).is_ok()
}

/// A signing key from its 32 secret bytes (as kept in hostd's key file).
pub fn key_from_secret(secret: [u8; 32]) -> SigningKey {
    SigningKey::from_bytes(&secret)
}

pub use ed25519_dalek::SigningKey as Key;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_holds_only_for_its_own_flow_size_and_hash() {
        let k = key_from_secret([7; 32]);
        let flow = FlowId { receiver: "10.0.9.9".parse().unwrap(), group: 5 };
        let s = sign(&k, flow, 100, &[1; 32]);
        assert!(verify(flow, 100, &[1; 32], &s));
        assert!(!verify(FlowId { group: 6, ..flow }, 100, &[1; 32], &s));
        assert!(!verify(FlowId { receiver: "10.0.9.8".parse().unwrap(), ..flow }, 100, &[1; 32], &s));
        assert!(!verify(flow, 101, &[1; 32], &s));
        assert!(!verify(flow, 100, &[2; 32], &s));
        let other = sign(&key_from_secret([8; 32]), flow, 100, &[1; 32]);
        assert!(!verify(flow, 100, &[1; 32], &SpecSig { key: s.key, sig: other.sig }));
    }
}
