//! CSP messages as owned values: what the state machines consume and produce.
//! Byte encoding lives in `concast-wire`; see docs/protocol.md section 2.

pub use concast_wire::csp::SpecHash;
pub const NO_HASH: SpecHash = [0; 32];

/// A concast flow (R, G): the wire crate's one type for it.
pub use concast_wire::FlowId;

/// Which datagrams to R a data plane that cannot see IPv4 options must divert (section 2.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    /// IPv4 protocol, 0 = any.
    pub proto: u8,
    /// UDP/TCP destination port, 0 = any.
    pub dport: u16,
}

/// CSP ERROR codes and message types: the wire crate's, so names and numbers exist once.
pub use concast_wire::csp::{ErrorCode, MessageType};

/// R's key and signature over a spec (section 2.9), carried by JOIN_ACK and SPEC_UPDATE.
pub use concast_wire::csp::SpecSig;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinBody {
    /// Seconds; 0 = the upstream node's default.
    pub hold_s: u16,
    pub selector: Selector,
    /// The spec the joiner already holds, `NO_HASH` if none.
    pub hash: SpecHash,
    /// The joiner reads signature trailers (section 2.2's S flag); a node from before 2.9
    /// sends 0 there and is answered with unsigned offers.
    pub signed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    Join(JoinBody),
    /// `path_mtu`: the smallest MTU from the sender of the JOIN_ACK to R, its link toward
    /// the joiner included; 0 = not known (section 2.3).
    /// `sig`: R's signature over the spec, passed on unchanged by every router.
    JoinAck { hold_s: u16, path_mtu: u16, spec_size: u32, hash: SpecHash, sig: Option<SpecSig> },
    Refresh(JoinBody),
    Leave,
    SpecRequest { hash: SpecHash, index: u16 },
    SpecChunk { hash: SpecHash, size: u32, index: u16, count: u16, data: Vec<u8> },
    SpecUpdate { size: u32, hash: SpecHash, sig: Option<SpecSig> },
    /// `code` stays raw: unknown codes are legal on the wire.
    Error { code: u16, offending: u8, reason: String },
}

impl Body {
    /// The CSP message type of this body; its number is the wire crate's.
    pub fn msg_type(&self) -> MessageType {
        match self {
            Body::Join(_) => MessageType::Join,
            Body::JoinAck { .. } => MessageType::JoinAck,
            Body::Refresh(_) => MessageType::Refresh,
            Body::Leave => MessageType::Leave,
            Body::SpecRequest { .. } => MessageType::SpecRequest,
            Body::SpecChunk { .. } => MessageType::SpecChunk,
            Body::SpecUpdate { .. } => MessageType::SpecUpdate,
            Body::Error { .. } => MessageType::Error,
        }
    }

    /// The CSP type number of this body (an ERROR's offending type).
    pub fn type_num(&self) -> u8 {
        self.msg_type() as u8
    }

    /// Messages that travel toward R and are taken by every concast-capable router on the way.
    pub fn is_intercepted(&self) -> bool {
        matches!(self, Body::Join(_) | Body::Refresh(_) | Body::Leave)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Msg {
    pub flow: FlowId,
    pub seq: u32,
    pub body: Body,
}

impl Msg {
    pub fn error(flow: FlowId, seq: u32, code: ErrorCode, offending: u8, reason: &str) -> Msg {
        Msg { flow, seq, body: Body::Error { code: code as u16, offending, reason: reason.into() } }
    }
}
