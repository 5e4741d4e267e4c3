//! Composites: named sets of microprotocols, checked for dependencies and conflicts, and the
//! bit field that announces one to the peer at open.
use std::fmt;

/// Every microprotocol the issue names, with its bit in the announced composite. The bit
/// numbers are wire format: never renumber, only append.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MicroId {
    TransportDriver = 0,
    FixedSize = 1,
    SequencedSegments = 2,
    VirtualCircuit = 3,
    KeepAlive = 4,
    RttEstimation = 5,
    PositiveAck = 6,
    DuplicateAck = 7,
    Retransmit = 8,
    WindowedFlow = 9,
    WindowedCongestion = 10,
    ReliableFifo = 11,
    LossyFifo = 12,
    Fec = 13,
    SequencedMessages = 14,
    Coalesce = 15,
    Resize = 16,
    NegativeAck = 17,
    XonXoff = 18,
    RtsCts = 19,
    RateCongestion = 20,
    OutOfBand = 21,
    FixedRateJitter = 22,
    TimestampJitter = 23,
}

use MicroId::*;

pub const ALL: [MicroId; 24] = [
    TransportDriver, FixedSize, SequencedSegments, VirtualCircuit, KeepAlive, RttEstimation,
    PositiveAck, DuplicateAck, Retransmit, WindowedFlow, WindowedCongestion, ReliableFifo,
    LossyFifo, Fec, SequencedMessages, Coalesce, Resize, NegativeAck, XonXoff, RtsCts,
    RateCongestion, OutOfBand, FixedRateJitter, TimestampJitter,
];

impl MicroId {
    pub fn bit(self) -> u32 {
        1 << (self as u32)
    }

    pub fn name(self) -> &'static str {
        match self {
            TransportDriver => "transport-driver",
            FixedSize => "fixed-size",
            SequencedSegments => "sequenced-segments",
            VirtualCircuit => "virtual-circuit",
            KeepAlive => "keep-alive",
            RttEstimation => "rtt-estimation",
            PositiveAck => "positive-ack",
            DuplicateAck => "duplicate-ack",
            Retransmit => "retransmit",
            WindowedFlow => "windowed-flow",
            WindowedCongestion => "windowed-congestion",
            ReliableFifo => "reliable-fifo",
            LossyFifo => "lossy-fifo",
            Fec => "fec",
            SequencedMessages => "sequenced-messages",
            Coalesce => "coalesce",
            Resize => "resize",
            NegativeAck => "negative-ack",
            XonXoff => "xon-xoff",
            RtsCts => "rts-cts",
            RateCongestion => "rate-congestion",
            OutOfBand => "out-of-band",
            FixedRateJitter => "fixed-rate-jitter",
            TimestampJitter => "timestamp-jitter",
        }
    }

    pub fn from_name(s: &str) -> Option<MicroId> {
        ALL.iter().copied().find(|m| m.name() == s)
    }

    /// Microprotocols this one cannot work without.
    pub fn requires(self) -> &'static [MicroId] {
        match self {
            PositiveAck | LossyFifo | OutOfBand => &[SequencedSegments],
            DuplicateAck | WindowedFlow | RttEstimation => &[PositiveAck],
            Retransmit => &[PositiveAck, RttEstimation],
            // both host a CCC algorithm, which needs ACKs and RTT samples
            WindowedCongestion | RateCongestion => &[PositiveAck, RttEstimation],
            ReliableFifo => &[SequencedSegments, PositiveAck, Retransmit],
            // a NAK asks for a resend: the sender must keep segments until acknowledged
            NegativeAck => &[SequencedSegments, PositiveAck, Retransmit],
            _ => &[],
        }
    }

    /// Microprotocols this one must not be combined with.
    pub fn conflicts(self) -> &'static [MicroId] {
        match self {
            LossyFifo => &[Retransmit, ReliableFifo],
            // a packed segment carries several messages under no message number; a jitter
            // control defers messages too, and two deferrers lose track of which is which
            SequencedMessages => &[Coalesce, FixedRateJitter, TimestampJitter],
            // one algorithm per session: both would call its callbacks and gate the same segments
            RateCongestion => &[WindowedCongestion],
            // two receiver-driven flow controls would stop and start the sender against each other
            XonXoff => &[RtsCts],
            // two loss detectors resend the same holes: measured over UDP at 1% loss, Bulk with
            // both resent 1.6-2x as many segments as with either, and was no faster
            NegativeAck => &[DuplicateAck],
            // two playout clocks for the same messages
            FixedRateJitter => &[TimestampJitter],
            // Timestamp jitter control discards messages later than their playout time
            TimestampJitter => &[ReliableFifo],
            _ => &[],
        }
    }
}

/// Why a composite was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    UnknownBit(u32),
    Missing { micro: MicroId, needs: MicroId },
    Conflict(MicroId, MicroId),
    UnknownName(String),
    Mismatch { ours: Composite, theirs: Composite },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::UnknownBit(b) => write!(f, "unknown microprotocol bit {b}"),
            Refusal::Missing { micro, needs } => {
                write!(f, "{} requires {}", micro.name(), needs.name())
            }
            Refusal::Conflict(a, b) => write!(f, "{} conflicts with {}", a.name(), b.name()),
            Refusal::UnknownName(n) => write!(f, "unknown composite or microprotocol {n:?}"),
            Refusal::Mismatch { ours, theirs } => {
                write!(f, "composite mismatch: peer asked for {theirs}, this end serves {ours}")
            }
        }
    }
}

/// A checked set of microprotocols.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Composite {
    bits: u32,
}

impl Composite {
    /// Checks a set for unknown bits, missing dependencies and conflicts, in that order.
    pub fn from_bits(bits: u32) -> Result<Composite, Refusal> {
        let known: u32 = ALL.iter().map(|m| m.bit()).fold(0, |a, b| a | b);
        if bits & !known != 0 {
            return Err(Refusal::UnknownBit((bits & !known).trailing_zeros()));
        }
        let has = |m: MicroId| bits & m.bit() != 0;
        for needs in [TransportDriver, FixedSize] {
            if !has(needs) {
                return Err(Refusal::Missing { micro: TransportDriver, needs });
            }
        }
        for m in ALL.iter().copied().filter(|m| has(*m)) {
            if let Some(n) = m.requires().iter().find(|n| !has(**n)) {
                return Err(Refusal::Missing { micro: m, needs: *n });
            }
            if let Some(c) = m.conflicts().iter().find(|c| has(**c)) {
                return Err(Refusal::Conflict(m, *c));
            }
        }
        Ok(Composite { bits })
    }

    pub fn of(micros: &[MicroId]) -> Result<Composite, Refusal> {
        Composite::from_bits(micros.iter().map(|m| m.bit()).fold(0, |a, b| a | b))
    }

    /// A preset name, or microprotocol names joined by `+`, optionally after a preset
    /// (`Bulk+out-of-band`); transport-driver and fixed-size are added when missing, since
    /// every composite needs them.
    pub fn parse(s: &str) -> Result<Composite, Refusal> {
        if let Some(p) = Preset::from_name(s) {
            return Ok(p.composite());
        }
        let mut list = vec![TransportDriver, FixedSize];
        let mut parts = s.split('+').map(str::trim).peekable();
        if let Some(p) = parts.peek().and_then(|first| Preset::from_name(first)) {
            list.extend_from_slice(p.micros());
            parts.next();
        }
        for part in parts {
            list.push(MicroId::from_name(part).ok_or_else(|| Refusal::UnknownName(part.into()))?);
        }
        Composite::of(&list)
    }

    pub fn bits(self) -> u32 {
        self.bits
    }

    pub fn has(self, m: MicroId) -> bool {
        self.bits & m.bit() != 0
    }

    pub fn micros(self) -> impl Iterator<Item = MicroId> {
        ALL.into_iter().filter(move |m| self.has(*m))
    }

    pub fn reliable(self) -> bool {
        self.has(ReliableFifo)
    }
}

impl fmt::Display for Composite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = Preset::ALL.iter().find(|p| p.composite() == *self) {
            return write!(f, "{}", p.name());
        }
        let names: Vec<&str> = self.micros().map(MicroId::name).collect();
        write!(f, "{}", names.join("+"))
    }
}

/// The presets of the issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    Minimal,
    LossyFifo,
    Video,
    Audio,
    Bulk,
}

impl Preset {
    pub const ALL: [Preset; 5] =
        [Preset::Minimal, Preset::LossyFifo, Preset::Video, Preset::Audio, Preset::Bulk];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Minimal => "Minimal",
            Preset::LossyFifo => "LossyFIFO",
            Preset::Video => "Video",
            Preset::Audio => "Audio",
            Preset::Bulk => "Bulk",
        }
    }

    pub fn from_name(s: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(s))
    }

    pub fn micros(self) -> &'static [MicroId] {
        match self {
            Preset::Minimal => &[TransportDriver, FixedSize],
            Preset::LossyFifo => &[TransportDriver, FixedSize, SequencedSegments, LossyFifo],
            // as in the CTP paper, Video and Audio play out at the sender's timing
            Preset::Video => &[
                TransportDriver, FixedSize, SequencedSegments, LossyFifo, VirtualCircuit,
                TimestampJitter,
            ],
            Preset::Audio => &[
                TransportDriver, FixedSize, SequencedSegments, LossyFifo, VirtualCircuit,
                TimestampJitter, Fec,
            ],
            Preset::Bulk => &[
                TransportDriver, FixedSize, SequencedSegments, VirtualCircuit, KeepAlive,
                RttEstimation, PositiveAck, DuplicateAck, Retransmit, WindowedFlow,
                WindowedCongestion, ReliableFifo,
            ],
        }
    }

    pub fn composite(self) -> Composite {
        Composite::of(self.micros()).expect("presets are valid composites")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_round_trip_through_bits() {
        for p in Preset::ALL {
            let c = p.composite();
            assert_eq!(Composite::from_bits(c.bits()).unwrap(), c);
            assert_eq!(c.to_string(), p.name());
            assert_eq!(Composite::parse(&p.name().to_lowercase()).unwrap(), c);
        }
    }

    /// Each combination the new microprotocols rule out, with the reason a peer is told.
    #[test]
    fn invalid_combinations_of_the_added_microprotocols_are_refused_with_the_reason() {
        let bulk = "sequenced-segments+positive-ack+rtt-estimation+retransmit+reliable-fifo";
        let cases = [
            ("sequenced-messages+coalesce", "sequenced-messages conflicts with coalesce"),
            (&format!("{bulk}+windowed-congestion+rate-congestion"),
             "rate-congestion conflicts with windowed-congestion"),
            ("xon-xoff+rts-cts", "xon-xoff conflicts with rts-cts"),
            ("sequenced-messages+timestamp-jitter", "sequenced-messages conflicts with timestamp-jitter"),
            ("fixed-rate-jitter+timestamp-jitter", "fixed-rate-jitter conflicts with timestamp-jitter"),
            (&format!("{bulk}+timestamp-jitter"), "timestamp-jitter conflicts with reliable-fifo"),
            ("sequenced-segments+negative-ack", "negative-ack requires positive-ack"),
            ("sequenced-segments+positive-ack+negative-ack", "negative-ack requires retransmit"),
            ("out-of-band", "out-of-band requires sequenced-segments"),
            ("sequenced-segments+positive-ack+rate-congestion", "rate-congestion requires rtt-estimation"),
            ("Bulk+negative-ack", "negative-ack conflicts with duplicate-ack"),
            ("sequenced-segments+lossy-fifo+negative-ack+positive-ack+rtt-estimation+retransmit",
             "lossy-fifo conflicts with retransmit"),
        ];
        for (composite, why) in cases {
            let r = Composite::parse(composite).unwrap_err();
            assert_eq!(r.to_string(), why, "{composite}");
            // the same refusal when the peer announces the bits
            if let Some(bits) = composite.split('+').map(|n| MicroId::from_name(n).map(MicroId::bit)).sum::<Option<u32>>() {
                assert_eq!(Composite::from_bits(bits | 0b11).unwrap_err(), r);
            }
        }
    }

    #[test]
    fn every_microprotocol_is_built_and_valid_combinations_pass() {
        for ok in [
            "sequenced-segments+positive-ack+rtt-estimation+retransmit+sequenced-messages",
            "sequenced-segments+positive-ack+rtt-estimation+retransmit+negative-ack+reliable-fifo",
            "sequenced-segments+positive-ack+rtt-estimation+rate-congestion+retransmit",
            "sequenced-segments+out-of-band+lossy-fifo",
            "coalesce+resize+xon-xoff",
            "rts-cts+fixed-rate-jitter",
        ] {
            Composite::parse(ok).unwrap_or_else(|r| panic!("{ok}: {r}"));
        }
        assert!(Preset::Video.composite().has(TimestampJitter));
        let c = Composite::parse("Bulk+out-of-band").unwrap();
        assert!(c.has(OutOfBand) && c.has(ReliableFifo));
        assert_eq!(
            Composite::parse("Video+reliable-fifo").unwrap_err().to_string(),
            "reliable-fifo requires positive-ack"
        );
    }

    #[test]
    fn lossy_fifo_with_retransmit_is_refused_with_the_reason() {
        let r = Composite::parse("sequenced-segments+lossy-fifo+retransmit+positive-ack+rtt-estimation")
            .unwrap_err();
        assert_eq!(r, Refusal::Conflict(LossyFifo, Retransmit));
        assert_eq!(r.to_string(), "lossy-fifo conflicts with retransmit");
    }

    #[test]
    fn missing_dependency_and_unknown_bits_are_refused() {
        let r = Composite::parse("reliable-fifo").unwrap_err();
        assert!(matches!(r, Refusal::Missing { micro: ReliableFifo, .. }), "{r}");
        assert_eq!(Composite::from_bits(0b11 | 1 << 30), Err(Refusal::UnknownBit(30)));
        assert!(matches!(Composite::from_bits(0b1), Err(Refusal::Missing { .. })));
        assert_eq!(Composite::from_bits(u32::MAX), Err(Refusal::UnknownBit(24)));
        assert!(matches!(Composite::parse("warp-drive"), Err(Refusal::UnknownName(_))));
    }
}
