//! mtp.h's codes (dissertation Appendix A): error classes and codes, response codes, action
//! codes and delivery methods, by their names and values. MTP 2.1's header carries them; our
//! header (docs/transport.md, "MTP") carries a refusal as `F_ERROR` plus a reason, and these
//! names let an application speak the dissertation's vocabulary (`describe`).

/// Error classes (who reports the error).
pub const ERR_NONE: u8 = 0;
pub const ERR_CLIENT: u8 = 1;
pub const ERR_NET: u8 = 2;
pub const ERR_SERVER: u8 = 3;
pub const ERR_APP: u8 = 4;
pub const ERR_ROUTE: u8 = 5;

/// Response codes.
pub const RES_REQUEST: u8 = 0;
pub const RES_REPLY: u8 = 1;
pub const RES_APP: u8 = 64;

/// Errors of the client or server MTP (class ERR_CLIENT / ERR_SERVER).
pub const ERR_DMN_SYS: u8 = 2;
pub const ERR_DMN_ACTION: u8 = 3;
pub const ERR_DMN_DEL: u8 = 4;
pub const ERR_DMN_RSPSZ: u8 = 5;
pub const ERR_DMN_VERSION: u8 = 6;
pub const ERR_DMN_NORSRC: u8 = 7;
pub const ERR_DMN_REQSZ: u8 = 8;
pub const ERR_DMN_PROTO: u8 = 9;
pub const ERR_DMN_CHECK: u8 = 10;

/// Network errors (class ERR_NET).
pub const ERR_NET_CLIENT: u8 = 2;
pub const ERR_NET_SERVER: u8 = 3;
pub const ERR_NET_UNAVAIL: u8 = 4;
pub const ERR_NET_DOWN: u8 = 5;
pub const ERR_NET_TRANS: u8 = 6;
/// What our `Output::Expired` stands for.
pub const ERR_NET_EXPIRE: u8 = 7;

/// Application errors (class ERR_APP); 64 and up are the application's own.
pub const ERR_APP_ACTION: u8 = 2;
pub const ERR_APP_CHANNEL: u8 = 3;
pub const ERR_APP_FLAG: u8 = 4;
pub const ERR_APP_ADDRESS: u8 = 5;
pub const ERR_APP_DATA: u8 = 6;
pub const ERR_APP_EOD: u8 = 7;
pub const ERR_APP_SIZE: u8 = 8;
pub const ERR_APP_UNAVAIL: u8 = 9;
pub const ERR_APP_AUTH: u8 = 10;
pub const ERR_APP_BUSY: u8 = 11;
pub const ERR_APP_HOLD: u8 = 12;
pub const ERR_APP_TIMEOUT: u8 = 13;
pub const ERR_APP_PROXY: u8 = 14;
pub const ERR_APP_VERSION: u8 = 15;
pub const ERR_APP_APP: u8 = 64;

/// Standard actions; 64 and up are the application's own.
pub const ACT_PING: u8 = 0;
pub const ACT_IDSTR: u8 = 1;
pub const ACT_REGISTER: u8 = 2;
pub const ACT_TERMINATE: u8 = 3;
pub const ACT_DATA: u8 = 4;
pub const ACT_STAT: u8 = 12;
pub const ACT_APP: u8 = 64;

/// Delivery methods.
pub const MTP_DEL_BUFFER: u8 = 0;
pub const MTP_DEL_ALLOC: u8 = 1;
pub const MTP_DEL_FILE: u8 = 2;
pub const MTP_DEL_SINGLE: u8 = 3;

/// The application error names, by value (for messages).
const APP_NAMES: [(u8, &str); 14] = [
    (ERR_APP_ACTION, "unknown action"),
    (ERR_APP_CHANNEL, "invalid channel"),
    (ERR_APP_FLAG, "invalid flags"),
    (ERR_APP_ADDRESS, "invalid address"),
    (ERR_APP_DATA, "invalid or corrupt payload"),
    (ERR_APP_EOD, "address and size past the object's end"),
    (ERR_APP_SIZE, "object too large to deliver"),
    (ERR_APP_UNAVAIL, "unavailable"),
    (ERR_APP_AUTH, "not authorised"),
    (ERR_APP_BUSY, "busy, try later"),
    (ERR_APP_HOLD, "on hold, keep trying"),
    (ERR_APP_TIMEOUT, "authorisation timed out"),
    (ERR_APP_PROXY, "proxy action failed"),
    (ERR_APP_VERSION, "unsupported version"),
];

/// A short description of an application error code.
pub fn describe(code: u8) -> &'static str {
    APP_NAMES.iter().find(|(c, _)| *c == code).map_or(if code >= ERR_APP_APP { "application's own" } else { "unknown" }, |(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mtp::client::Abort;

    #[test]
    fn mtp_h_codes_keep_their_values() {
        assert_eq!((ERR_NET_EXPIRE, ERR_APP_EOD, ERR_DMN_CHECK, ACT_DATA, ACT_APP, RES_APP), (7, 7, 10, 4, 64, 64));
        assert_eq!(describe(ERR_APP_BUSY), "busy, try later");
        assert_eq!(describe(70), "application's own");
        let modes = [Abort::Finish, Abort::Stop, Abort::Expire, Abort::Destroy];
        assert_eq!(modes.map(Abort::code), [0, 1, 2, 3]);
    }
}
