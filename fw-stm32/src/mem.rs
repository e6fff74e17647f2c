//! Static buffers: `static_slice!` declares a `MaybeUninit` array (in a linker section of the
//! memory layout when given one, e.g. `#[link_section = ".axisram"]`, which is not zeroed at
//! start-up), initializes its first `n` elements and returns them as `&'static mut [T]`.
//!
//! Each expansion owns its static, and every expansion in this crate is in a platform's
//! start-up function, which runs once: so no two `&'static mut` to one buffer ever exist.

/// `static_slice!(#[attr]* T; CAPACITY; n; value)`: see the module documentation (`value` is
/// evaluated once per element, so `T` need not be `Copy`).
macro_rules! static_slice {
    ($($t:tt)*) => {
        static_slice_of!($($t)*)
    };
}

/// The expansion of `static_slice!`.
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
