//! Stack high-water mark: [`paint`] fills the unused stack with a pattern at start-up and
//! [`used`] finds how deep it was overwritten since. The stack runs from cortex-m-rt's
//! `_stack_start` (top) down to `_stack_end` (the end of the statics in RAM).

const PAINT: u32 = 0x5AC3_5AC3;

extern "C" {
    static _stack_start: u32;
    static _stack_end: u32;
}

fn bounds() -> (usize, usize) {
    (core::ptr::addr_of!(_stack_end) as usize, core::ptr::addr_of!(_stack_start) as usize)
}

/// Paints the stack below the current frame (keeping a margin for this function's own frame).
#[inline(never)]
pub fn paint() {
    let (bottom, _) = bounds();
    let sp = cortex_m::register::msp::read() as usize;
    let mut p = (bottom + 3) & !3;
    while p + 256 < sp {
        // SAFETY: between the end of the statics and the live part of the stack: unused memory.
        unsafe { core::ptr::write_volatile(p as *mut u32, PAINT) };
        p += 4;
    }
}

/// Bytes of stack used since [`paint`] (an upper bound on the deepest point reached).
pub fn used() -> usize {
    let (bottom, top) = bounds();
    let mut p = (bottom + 3) & !3;
    // SAFETY: reads of the stack region, which is ordinary RAM.
    while p < top && unsafe { core::ptr::read_volatile(p as *const u32) } == PAINT {
        p += 4;
    }
    top - p
}
