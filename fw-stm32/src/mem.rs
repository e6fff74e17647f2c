//! Static buffers: `static_slice!` declares a `MaybeUninit` array (in a linker section of the
//! memory layout when given one, e.g. `#[link_section = ".axisram"]`, which is not zeroed at
//! start-up), initializes its first `n` elements and returns them as `&'static mut [T]`.
//!
//! Each expansion owns its static, and every expansion in this crate is in a platform's
//! start-up function, which runs once: so no two `&'static mut` to one buffer ever exist.

/// `static_slice!(#[attr]* T; CAPACITY; n; value)`: see the module documentation.
macro_rules! static_slice {
    ($(#[$attr:meta])* $ty:ty; $cap:expr; $n:expr; $v:expr) => {{
        $(#[$attr])*
        static mut BUF: core::mem::MaybeUninit<[$ty; $cap]> = core::mem::MaybeUninit::uninit();
        let n: usize = $n;
        assert!(n <= $cap, "static buffer too small");
        // SAFETY: the start-up function that expands this runs once, so this is the only
        // reference to BUF; the first `n` elements are initialized before the slice is made.
        unsafe { crate::mem::init_slice(core::ptr::addr_of_mut!(BUF).cast::<$ty>(), n, $v) }
    }};
}

/// `static_slice_of!(#[attr]* T; CAPACITY; n; value)`: as `static_slice!` for a `T` that is not
/// `Copy` (each element is `value`, a constant expression, evaluated per element).
#[allow(unused_macros)]
macro_rules! static_slice_of {
    ($(#[$attr:meta])* $ty:ty; $cap:expr; $n:expr; $v:expr) => {{
        $(#[$attr])*
        static mut BUF: core::mem::MaybeUninit<[$ty; $cap]> = core::mem::MaybeUninit::uninit();
        let n: usize = $n;
        assert!(n <= $cap, "static buffer too small");
        let p = core::ptr::addr_of_mut!(BUF).cast::<$ty>();
        for i in 0..n {
            // SAFETY: in bounds (n <= capacity); the start-up function that expands this runs
            // once, so nothing else references BUF.
            unsafe { p.add(i).write($v) };
        }
        // SAFETY: the first `n` elements were initialized above; exclusive as above.
        unsafe { core::slice::from_raw_parts_mut(p, n) }
    }};
}

/// Writes `v` to `n` elements from `p` and returns them as a slice.
///
/// # Safety
/// `p` must point to `n` writable elements that nothing else references, for `'static`.
pub unsafe fn init_slice<T: Copy>(p: *mut T, n: usize, v: T) -> &'static mut [T] {
    for i in 0..n {
        // SAFETY: in bounds per the contract.
        unsafe { p.add(i).write(v) };
    }
    // SAFETY: initialized above; exclusive per the contract.
    unsafe { core::slice::from_raw_parts_mut(p, n) }
}
