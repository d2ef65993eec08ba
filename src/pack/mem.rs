//! Zeroed tables backed by transparent huge pages where the kernel offers them.
//!
//! The packer's hash tables (the long-distance table, the chain matcher's rows) are read at random, one cache
//! miss per lookup; with 4 KiB pages nearly every such miss is also a TLB miss (a 128 MiB table spans 32 Ki
//! pages, a few thousand fit the TLB), and the page walk costs about as much again. Asking for 2 MiB pages on
//! tables of a few MiB and more removes most of those walks. On kernels where transparent huge pages are off or
//! `madvise`-only (the common default) the advice is what turns them on; where it fails nothing changes but speed.

/// Tables smaller than this stay on ordinary pages (a huge page would mostly be waste).
const HUGE_MIN_BYTES: usize = 4 << 20;

/// A vector of `len` zero values whose pages the kernel is asked to back with huge pages.
pub fn zeroed<T: Copy + Default>(len: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    // The advice goes to the untouched allocation, so the fill below already faults huge pages in.
    advise_huge(v.as_ptr() as usize, len * std::mem::size_of::<T>());
    v.resize(len, T::default());
    v
}

/// A vector of `len` values (at least `prefix.len()`) that starts with `prefix` and is zero after it, on huge pages
/// like [`zeroed`]; each page is written once (the prefix is not zeroed first).
pub fn zeroed_after<T: Copy + Default>(prefix: &[T], len: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    advise_huge(v.as_ptr() as usize, len * std::mem::size_of::<T>());
    v.extend_from_slice(prefix);
    v.resize(len, T::default());
    v
}

/// [`zeroed`], written by up to `threads` threads, a contiguous share each. Why: the first touch of a large
/// table is the kernel clearing every page as it faults in, and on this project's 2-core host that was a serial
/// 0.12–0.4 s for atha_chr1's 64 MiB long-distance table (the stream it waits beside is built in ~20 ms); the
/// faults of different pages run in parallel. The contents are zeros either way.
pub fn zeroed_parallel<T: Copy + Default + Send>(len: usize, threads: usize) -> Vec<T> {
    let threads = threads.clamp(1, MAX_ZERO_THREADS);
    if threads == 1 || len * std::mem::size_of::<T>() < HUGE_MIN_BYTES {
        return zeroed(len);
    }
    let mut v: Vec<T> = Vec::with_capacity(len);
    advise_huge(v.as_ptr() as usize, len * std::mem::size_of::<T>());
    let share = len.div_ceil(threads);
    std::thread::scope(|s| {
        for part in v.spare_capacity_mut()[..len].chunks_mut(share) {
            s.spawn(move || part.fill(std::mem::MaybeUninit::new(T::default())));
        }
    });
    // SAFETY: the shares cover the first `len` slots of the capacity, and every thread that wrote one has been
    // joined by the scope above.
    unsafe { v.set_len(len) };
    v
}

/// Most threads [`zeroed_parallel`] starts (more than the memory's bandwidth needs only cost their start).
const MAX_ZERO_THREADS: usize = 8;

/// Advises the kernel to back `bytes` bytes at `start` (an allocation not yet touched) with huge pages.
fn advise_huge(start: usize, bytes: usize) {
    if bytes < HUGE_MIN_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        // madvise needs a page-aligned start; the aligned part inside the allocation is advised.
        const PAGE: usize = 4096;
        let aligned = start.next_multiple_of(PAGE);
        let end = start + bytes;
        if aligned < end {
            // SAFETY: [aligned, end) lies inside the caller's live allocation; MADV_HUGEPAGE only changes how the
            // kernel backs those pages (contents are kept), so no Rust-visible memory changes.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, end - aligned, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// Asks glibc's allocator to keep the memory a pack frees for its next allocations instead of handing it back to
/// the kernel. Why: every chunk allocates its tokens, long matches and encoded groups afresh, up to tens of MiB
/// each, which glibc served with `mmap` and returned with `munmap`, so the next chunk faulted the same amount in
/// again, each 4 KiB page cleared by the kernel. With allocations up to 32 MiB (glibc's most) served from the heap
/// and the heap trimmed only above 1 GiB free, the peak stays what the pack needs at once (atha_chr1 genome mode:
/// 44,000 -> 39,000 page faults, maximum resident 285 -> 292 MB, 1.075 -> 1.040 s on 2 cores, medians of 8
/// alternating runs). Does nothing with other C libraries.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt changes only the allocator's parameters, which glibc reads under its own locks; the values
    // are in the documented ranges.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}
