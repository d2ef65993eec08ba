//! A global allocator that counts the heap bytes each thread holds, so a target can assert that handling an
//! input of `n` bytes never holds more than a bound tied to `n`.
//!
//! libFuzzer's `-rss_limit_mb` / `-malloc_limit_mb` only catch an allocation that is absurd for the machine; a
//! lying count that makes a parser reserve 500 MB for a 2 KB input would pass them and still be a finding (a
//! mount would do it for every `open`). Counting per thread keeps the figure exact when the replay tests run
//! targets on several threads at once; work a target hands to other threads (rayon) is not counted, so only
//! single-threaded stages are measured with it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts live bytes per thread around the system allocator.
pub struct Counting;

thread_local! {
    // Const-initialised `Cell`s of plain integers: no lazy registration and no destructor, so touching them from
    // inside the allocator cannot allocate or recurse.
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grow(n: usize) {
    let _ = LIVE.try_with(|live| {
        let v = live.get().saturating_add(n);
        live.set(v);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(v)));
    });
}

fn shrink(n: usize) {
    // A block freed on another thread than the one that allocated it would underflow: saturate instead.
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(n)));
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and returns its result; the
// counting touches only thread-local integers, never the memory handed out.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Counted before the call, so an attempt that fails still shows in the peak.
        grow(layout.size());
        // SAFETY: forwarded as received (the caller upholds `alloc`'s contract).
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            shrink(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            shrink(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrink(layout.size());
        // SAFETY: forwarded as received: `ptr` came from this allocator (hence from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grow(new_size);
        // SAFETY: forwarded as received.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            shrink(new_size);
        } else {
            shrink(layout.size());
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the most heap bytes this thread held at once during it, beyond what it
/// held before.
pub fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let r = f();
    let peak = PEAK.with(Cell::get);
    (r, peak.saturating_sub(base))
}
