//! A hint to the CPU to bring memory into the cache before it is read: the sweep of finished
//! flows (`table.rs`) reads each flow and record 0.5 s of capture after they were last touched,
//! when they have left the caches, and asks for the next ones while it works on this one.

/// Asks for the cache line at `at` (x86-64 `prefetcht0`); elsewhere does nothing. A prefetch
/// reads nothing and cannot fault, whatever the address.
#[inline(always)]
fn prefetch_line(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has; it only hints the cache
    // and dereferences nothing.
    #[allow(unsafe_code)]
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// Asks for the cache line holding `value`.
#[inline(always)]
pub(crate) fn prefetch<T>(value: &T) {
    prefetch_line((value as *const T).cast::<u8>());
}

/// Asks for every cache line of `value`.
#[inline(always)]
pub(crate) fn prefetch_all<T>(value: &T) {
    const LINE: usize = 64;
    let start = (value as *const T).cast::<u8>();
    for offset in (0..std::mem::size_of::<T>()).step_by(LINE) {
        prefetch_line(start.wrapping_add(offset));
    }
}
