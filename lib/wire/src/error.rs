//! The one error type of every parser in this crate.
//!
//! Each variant is one row of the error tables in `docs/protocol.md` (sections 1.1, 1.2, 2.1
//! and 3), and [`Error::name`] returns that row's name verbatim: routerd counters, the Scapy
//! layers, the Wireshark dissector and the test vectors all use the same strings, so a name is
//! the only thing compared across implementations.

use core::fmt;

/// Why a datagram is malformed, exactly as `docs/protocol.md` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Error {
    /// Fewer than 20 bytes.
    Truncated,
    /// IPv4 version field is not 4.
    BadVersion,
    /// IHL below 5.
    BadIhl,
    /// `IHL*4` is more than the bytes present.
    HeaderOverflow,
    /// Total length below `IHL*4`, or more than the bytes present.
    BadTotalLength,
    /// An option type with no length byte inside the options area.
    OptionTruncated,
    /// An option length below 2, or a Router Alert whose length is not 4.
    OptionBadLength,
    /// An option that ends past the options area.
    OptionOverflow,
    /// A Concast ID option whose length is not 6.
    ConcastOptionBadLength,
    /// A second Concast ID option.
    ConcastOptionDuplicate,
    /// Protocol 253 without a Router Alert option.
    CspMissingRouterAlert,
    /// CSP payload shorter than 16, or Length more than the payload.
    CspTruncated,
    /// CSP version is not 1.
    CspBadVersion,
    /// CSP type 0 or above 8.
    CspUnknownType,
    /// Trailing bytes after Length, or a body size the type does not allow.
    CspBadLength,
    /// A spec size, chunk index or chunk count outside the transfer rules (section 2.5/2.6).
    CspChunkOutOfRange,
    /// Protocol 254 without a Concast ID option.
    MplexMissingConcastOption,
    /// MplexPkt payload shorter than the 16-byte MplexHdr.
    MplexTruncatedHeader,
    /// An MplexHdr Version other than the one this crate speaks.
    MplexBadVersion,
    /// No EncapsulatedPkt record after the MplexHdr.
    MplexZeroRecords,
    /// A record header or payload runs past the IPv4 total length.
    MplexRecordTruncated,
}

impl Error {
    /// Every variant, in the order the spec's tables list them.
    pub const ALL: [Error; 21] = [
        Error::Truncated,
        Error::BadVersion,
        Error::BadIhl,
        Error::HeaderOverflow,
        Error::BadTotalLength,
        Error::OptionTruncated,
        Error::OptionBadLength,
        Error::OptionOverflow,
        Error::ConcastOptionBadLength,
        Error::ConcastOptionDuplicate,
        Error::CspMissingRouterAlert,
        Error::CspTruncated,
        Error::CspBadVersion,
        Error::CspUnknownType,
        Error::CspBadLength,
        Error::CspChunkOutOfRange,
        Error::MplexMissingConcastOption,
        Error::MplexTruncatedHeader,
        Error::MplexBadVersion,
        Error::MplexZeroRecords,
        Error::MplexRecordTruncated,
    ];

    /// The spec's name for this error (e.g. `"option_overflow"`).
    pub const fn name(self) -> &'static str {
        match self {
            Error::Truncated => "truncated",
            Error::BadVersion => "bad_version",
            Error::BadIhl => "bad_ihl",
            Error::HeaderOverflow => "header_overflow",
            Error::BadTotalLength => "bad_total_length",
            Error::OptionTruncated => "option_truncated",
            Error::OptionBadLength => "option_bad_length",
            Error::OptionOverflow => "option_overflow",
            Error::ConcastOptionBadLength => "concast_option_bad_length",
            Error::ConcastOptionDuplicate => "concast_option_duplicate",
            Error::CspMissingRouterAlert => "csp_missing_router_alert",
            Error::CspTruncated => "csp_truncated",
            Error::CspBadVersion => "csp_bad_version",
            Error::CspUnknownType => "csp_unknown_type",
            Error::CspBadLength => "csp_bad_length",
            Error::CspChunkOutOfRange => "csp_chunk_out_of_range",
            Error::MplexMissingConcastOption => "mplex_missing_concast_option",
            Error::MplexTruncatedHeader => "mplex_truncated_header",
            Error::MplexBadVersion => "mplex_bad_version",
            Error::MplexZeroRecords => "mplex_zero_records",
            Error::MplexRecordTruncated => "mplex_record_truncated",
        }
    }

    /// The inverse of [`Error::name`], for reading counters and test vectors.
    pub fn from_name(name: &str) -> Option<Error> {
        Error::ALL.iter().copied().find(|e| e.name() == name)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl core::error::Error for Error {}

/// Why a builder could not write a datagram.
///
/// Kept apart from [`Error`] so that `Error` stays a 1:1 image of the spec's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuildError {
    /// The caller's buffer cannot hold the result.
    BufferTooSmall,
    /// A length does not fit its field: options over 40 bytes, a datagram over 65535 bytes,
    /// a record payload over 65535 bytes.
    Oversize,
    /// The bytes would be malformed; the parser would reject them with this error.
    Invalid(Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::BufferTooSmall => f.write_str("buffer too small"),
            BuildError::Oversize => f.write_str("length does not fit its field"),
            BuildError::Invalid(e) => write!(f, "would be malformed: {e}"),
        }
    }
}

impl core::error::Error for BuildError {}

impl From<Error> for BuildError {
    fn from(e: Error) -> Self {
        BuildError::Invalid(e)
    }
}
