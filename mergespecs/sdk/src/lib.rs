//! The concast merge-spec SDK.
//!
//! A merge spec is one [`MergeSpec`] implementation plus one [`export_spec!`] line:
//!
//! ```ignore
//! #![no_std]
//! use concast_sdk::{AfterBuild, Host, Merge, MergeSpec, Tag};
//!
//! pub struct First;
//! impl MergeSpec for First {
//!     type State = u32;
//!     fn init(_host: &mut impl Host) -> Result<Self, &'static str> { Ok(First) }
//!     fn get_tag(&mut self, msg: &[u8], _host: &mut impl Host) -> Tag { Tag::Merge(0) }
//!     fn new_state(&mut self, _tag: u64, _host: &mut impl Host) -> u32 { 0 }
//!     fn merge(&mut self, n: &mut u32, _msg: &[u8], _host: &mut impl Host) -> Merge { *n += 1; Merge::Merged }
//!     fn done(&mut self, n: &mut u32, _host: &mut impl Host) -> bool { *n >= 2 }
//!     fn build(&mut self, n: &mut u32, host: &mut impl Host) -> AfterBuild {
//!         host.emit(&n.to_be_bytes(), concast_sdk::OutHeader::udp());
//!         AfterBuild::Free
//!     }
//! }
//! concast_sdk::export_spec!(First);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-unknown-unknown` (crate-type `cdylib`).
//! The same type also runs natively inside the engine (its `NativeSpec` path), which is how
//! benchmarks compare a Wasm spec with the same logic in native Rust: the trait never touches
//! Wasm itself, only the [`Host`] it is handed.
//!
//! The wire-level contract the macro implements is `docs/mergespec-abi.md`; [`abi`] holds its
//! numbers, shared with the engine so both sides agree by construction.
#![no_std]

pub mod abi;
pub mod params;
pub mod run;
mod spec;

#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
pub mod glue;

pub use spec::{AfterBuild, Host, Level, Merge, MergeSpec, OutHeader, Tag};

/// The concast wire formats (`lib/wire`): a spec reads the datagram it is handed with
/// `wire::ipv4::Packet::new_checked(msg)` or `wire::classify(msg)`, and builds MplexPkt
/// bodies with `wire::mplex` / `wire::build`.
pub use concast_wire as wire;

/// Exports `spec` (a type implementing [`MergeSpec`]) as a concast merge-spec module:
/// defines every `concast_*` export of the ABI, version 2 (batched, `concast_run`); with
/// the SDK's feature `abi-v1` (`cargo build --features concast-sdk/abi-v1`), version 1
/// instead, as [`export_spec_v1!`]. Expands to nothing off `wasm32`, so the same crate also
/// builds as a native library (the engine's `NativeSpec` path).
///
/// `export_spec!(Spec, without_state_free)` leaves out `concast_state_free` (an optional
/// export): for a `State` that needs no drop, the engine then makes one call fewer into the
/// module per state.
#[cfg(not(feature = "abi-v1"))]
#[macro_export]
macro_rules! export_spec {
    ($spec:ty $(, $opt:ident)?) => {
        $crate::export_spec_v2!($spec $(, $opt)?);
    };
}

/// See the other definition: this SDK was built with feature `abi-v1`.
#[cfg(feature = "abi-v1")]
#[macro_export]
macro_rules! export_spec {
    ($spec:ty $(, $opt:ident)?) => {
        $crate::export_spec_v1!($spec $(, $opt)?);
    };
}

/// Exports `spec` as an ABI version 2 module (batched: `concast_run`).
#[macro_export]
macro_rules! export_spec_v2 {
    ($spec:ty $(, $opt:ident)?) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            static SPEC: $crate::glue::SpecCell<$spec> = $crate::glue::SpecCell::new();
            $crate::__export_common!($spec, SPEC $(, $opt)?);

            #[no_mangle]
            pub extern "C" fn concast_abi_version() -> i32 {
                $crate::abi::VERSION_2 as i32
            }
            #[no_mangle]
            pub extern "C" fn concast_init() -> i32 {
                SPEC.init_v2()
            }
            #[no_mangle]
            pub extern "C" fn concast_run(first: i32, count: i32, slot: i32, tag: i64) -> i32 {
                SPEC.run(first, count, slot, tag)
            }
        };
    };
}

/// Exports `spec` as an ABI version 1 module (one call per datagram): `concast_get_tag` and
/// `concast_merge` instead of `concast_run`.
#[macro_export]
macro_rules! export_spec_v1 {
    ($spec:ty $(, $opt:ident)?) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            static SPEC: $crate::glue::SpecCell<$spec> = $crate::glue::SpecCell::new();
            $crate::__export_common!($spec, SPEC $(, $opt)?);

            #[no_mangle]
            pub extern "C" fn concast_abi_version() -> i32 {
                $crate::abi::VERSION_1 as i32
            }
            #[no_mangle]
            pub extern "C" fn concast_init() -> i32 {
                SPEC.init()
            }
            #[no_mangle]
            pub extern "C" fn concast_get_tag(len: i32) -> i64 {
                SPEC.get_tag(len)
            }
            #[no_mangle]
            pub extern "C" fn concast_merge(slot: i32, len: i32) -> i32 {
                SPEC.merge(slot, len)
            }
        };
    };
}

/// The exports versions 1 and 2 share (used by the two macros above).
/// `export_spec!(Spec, without_state_free)`: the module does not export
/// `concast_state_free` (optional in the ABI), so the engine makes no call into the module
/// when a state goes: one guest entry fewer per bundle. Only for a `State` that needs no
/// drop (checked at compile time); a freed slot then keeps its old value until
/// `concast_state_new` overwrites it.
#[doc(hidden)]
#[macro_export]
macro_rules! __export_common {
    ($spec:ty, $cell:ident) => {
        $crate::__export_common!($spec, $cell, core_exports);
        #[no_mangle]
        pub extern "C" fn concast_state_free(slot: i32) {
            $cell.state_free(slot)
        }
    };
    ($spec:ty, $cell:ident, without_state_free) => {
        $crate::__export_common!($spec, $cell, core_exports);
        const _: () = assert!(
            !::core::mem::needs_drop::<<$spec as $crate::MergeSpec>::State>(),
            "without_state_free: the spec's State must need no drop"
        );
    };
    ($spec:ty, $cell:ident, core_exports) => {
        #[no_mangle]
        pub extern "C" fn concast_flags() -> i32 {
            if <$spec as $crate::MergeSpec>::ORDERED_STATES {
                $crate::abi::flags::ORDERED_STATES
            } else {
                0
            }
        }
        #[no_mangle]
        pub extern "C" fn concast_state_new(slot: i32, tag: i64) {
            $cell.state_new(slot, tag)
        }
        #[no_mangle]
        pub extern "C" fn concast_done(slot: i32) -> i32 {
            $cell.done(slot)
        }
        #[no_mangle]
        pub extern "C" fn concast_build(slot: i32) -> i32 {
            $cell.build(slot)
        }
        #[no_mangle]
        pub extern "C" fn concast_timeout(slot: i32) -> i32 {
            $cell.timeout(slot)
        }
    };
}
