//! Storage a spec sets up once in `init` and keeps for the flow's life, outside the spec
//! value. `MergeSpec::init` returns the value on the Wasm stack (64 KiB), so anything large
//! — several bundles, a key index — lives here instead: in a `.wasm` module, fresh pages of
//! linear memory taken with `memory.grow` (one instance per flow, never freed: the instance
//! goes away with the flow); natively, a heap allocation dropped with the value.

use core::ops::{Deref, DerefMut};

pub struct Arena<T: 'static> {
    #[cfg(target_arch = "wasm32")]
    items: &'static mut [T],
    #[cfg(not(target_arch = "wasm32"))]
    items: std::boxed::Box<[T]>,
}

/// Room for `len` items of `T` in fresh, zero-filled, page-aligned pages of this instance's
/// linear memory (`memory.grow`).
#[cfg(target_arch = "wasm32")]
fn fresh_pages<T>(len: usize) -> Result<*mut T, &'static str> {
    let bytes = len
        .checked_mul(core::mem::size_of::<T>())
        .ok_or("arena too large")?;
    let pages = bytes.div_ceil(65_536).max(1);
    let old = core::arch::wasm32::memory_grow::<0>(pages);
    if old == usize::MAX {
        return Err("out of memory for the spec's arena");
    }
    debug_assert!(core::mem::align_of::<T>() <= 65_536);
    Ok((old * 65_536) as *mut T)
}

impl<T> Arena<T> {
    /// `len` items, each made by `make` and written in place (one item at a time passes
    /// through the stack, never the whole array). `Err` if memory cannot grow.
    pub fn new(len: usize, mut make: impl FnMut() -> T) -> Result<Arena<T>, &'static str> {
        Arena::try_new(len, || Ok(make()))
    }

    /// As [`Arena::new`], for items whose making can fail (an item that takes arena pages
    /// of its own); the first error is returned.
    pub fn try_new(
        len: usize,
        mut make: impl FnMut() -> Result<T, &'static str>,
    ) -> Result<Arena<T>, &'static str> {
        #[cfg(target_arch = "wasm32")]
        {
            let base = fresh_pages::<T>(len)?;
            for i in 0..len {
                // SAFETY: `fresh_pages` gave room for `len` items. On an error the items
                // made so far stay in pages nothing refers to (an instance never frees).
                unsafe { base.add(i).write(make()?) };
            }
            // SAFETY: every item was just initialised; nothing else refers to these pages.
            let items = unsafe { core::slice::from_raw_parts_mut(base, len) };
            Ok(Arena { items })
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let mut items = std::vec::Vec::with_capacity(len);
            for _ in 0..len {
                items.push(make()?);
            }
            Ok(Arena {
                items: items.into_boxed_slice(),
            })
        }
    }
}

/// Types whose all-zero bytes are a valid value (plain integers and arrays of them).
///
/// # Safety
/// Implement only for types where every field is an integer (or an array or struct of
/// such): no references, no `bool`, no enums, no `Option`.
pub unsafe trait Zeroable {}

unsafe impl Zeroable for u8 {}
unsafe impl Zeroable for u32 {}
unsafe impl Zeroable for u64 {}

impl<T: Zeroable> Arena<T> {
    /// `len` zeroed items. On wasm the fresh pages of `memory.grow` are zero already, so
    /// nothing is written: a large index costs nothing at init.
    pub fn zeroed(len: usize) -> Result<Arena<T>, &'static str> {
        #[cfg(target_arch = "wasm32")]
        {
            let base = fresh_pages::<T>(len)?;
            // SAFETY: fresh, zero-filled, page-aligned pages of this instance's memory, and
            // all-zero is a valid `T` (`Zeroable`).
            let items = unsafe { core::slice::from_raw_parts_mut(base, len) };
            Ok(Arena { items })
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let layout = std::alloc::Layout::array::<T>(len).map_err(|_| "arena too large")?;
            if layout.size() == 0 {
                return Arena::new(len, || unsafe { core::mem::zeroed() });
            }
            // SAFETY: non-zero size; all-zero is a valid `T` (`Zeroable`); the box takes the
            // allocation with the same layout.
            let items = unsafe {
                let ptr = std::alloc::alloc_zeroed(layout) as *mut T;
                if ptr.is_null() {
                    return Err("out of memory for the spec's arena");
                }
                std::boxed::Box::from_raw(core::ptr::slice_from_raw_parts_mut(ptr, len))
            };
            Ok(Arena { items })
        }
    }
}

impl<T: Zeroable> Arena<T> {
    /// The first `len` items of this arena as an arena of their own, which then holds the
    /// rest: several buffers from one `memory.grow` (on wasm they share the pages; natively
    /// the piece is a fresh zeroed allocation and this arena only shrinks). `Err` if fewer
    /// than `len` items are left.
    pub fn carve(&mut self, len: usize) -> Result<Arena<T>, &'static str> {
        if len > self.items.len() {
            return Err("arena too small for what is carved from it");
        }
        #[cfg(target_arch = "wasm32")]
        {
            let (piece, rest) = core::mem::take(&mut self.items).split_at_mut(len);
            self.items = rest;
            Ok(Arena { items: piece })
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let rest = self.items.len() - len;
            self.items = Arena::zeroed(rest)?.items;
            Arena::zeroed(len)
        }
    }
}

impl<T> Deref for Arena<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items[..]
    }
}

impl<T> DerefMut for Arena<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.items[..]
    }
}
