//! K-lane interleaved rANS (FORMAT.md §3.4): 12-bit tables, 32-bit states kept in `[2^16, 2^32)`, 16-bit words.
//!
//! Symbol `i` belongs to lane `i mod K`. The format describes decoding in steps of K symbols where every lane
//! decodes and then the lanes that fell below `2^16` take one word each, in lane order — what a GPU warp does with
//! a ballot and a popcount. A lane's refill depends only on its own state, so taking each lane's word right after
//! it decodes, in symbol order, hands out exactly the same words: the CPU decoder below is therefore a plain
//! loop over symbols with the lane cycling, and the encoder is the same loop run backwards.
//!
//! The decoder never branches on data to stay in bounds: the word stream carries one zero sentinel and the read
//! position is clamped to it, so a hostile stream simply decodes garbage until the final check (every lane back
//! at `2^16`, every word consumed exactly once) rejects it.

use crate::codec::context::{base_byte, decode_packed, next_context, CtxModel};
use crate::codec::tables::{Table, SCALE, SCALE_BITS};
use crate::error::DecodeError;

/// Lower bound of a normalised state, and the state every lane starts (encoder) and ends (decoder) at.
pub const STATE_LOW: u32 = 1 << 16;
/// The most lanes a slice may use (one warp).
pub const MAX_LANES: usize = 32;

const SLOT_MASK: u32 = SCALE - 1;

/// Checks the header's `rans_lanes` and returns it as a `usize`.
pub fn check_lanes(lanes: u32) -> Result<usize, DecodeError> {
    if lanes.is_power_of_two() && lanes as usize <= MAX_LANES {
        Ok(lanes as usize)
    } else {
        Err(DecodeError::Invalid { what: "rans_lanes", detail: format!("{lanes} is not one of 1, 2, 4, 8, 16, 32") })
    }
}

/// A table's decode lookup: for each of the 4096 slots, the symbol, its frequency and `slot − cum[symbol]`,
/// packed in one `u32` so the decoder does one load per symbol.
///
/// Layout: bits 0..8 the symbol, bits 8..20 `slot − cum`, bits 20..32 `freq − 1`: the symbol is the low byte (a
/// plain byte store) and the frequency a single shift.
#[derive(Debug, Clone)]
pub struct DecodeLookup {
    entries: [u32; SCALE as usize],
}

impl DecodeLookup {
    /// Builds the lookup of a frequency table summing to 4096 (or fewer slots, which then decode as symbol 0 with
    /// frequency 1 — only reachable through a table nobody validated, and rejected by the final state check
    /// with overwhelming probability). Symbols ≥ 256 are not representable and are skipped.
    pub fn build(freq: &[u16]) -> DecodeLookup {
        let mut lookup = DecodeLookup { entries: [0u32; SCALE as usize] };
        lookup.rebuild(freq);
        lookup
    }

    /// Rebuilds in place for another table (see [`DecodeLookup::build`]). Each symbol's run of slots is one
    /// plain loop over a slice (vectorised), and only the slots no symbol reaches are cleared: a thread resolving
    /// sources across many table groups rebuilds lookups often, and this was 13 % of a cold read's CPU time as
    /// a slot-by-slot walk behind a full clear.
    pub fn rebuild(&mut self, freq: &[u16]) {
        let mut filled = 0usize;
        for (symbol, &f) in freq.iter().enumerate().take(256) {
            let n = (f as usize).min(self.entries.len() - filled);
            let head = ((f as u32).wrapping_sub(1) << 20) | symbol as u32;
            for (bias, slot) in self.entries[filled..filled + n].iter_mut().enumerate() {
                *slot = head | ((bias as u32) << 8);
            }
            filled += n;
        }
        self.entries[filled..].fill(0);
    }

    /// The packed entry of `slot` (only its low 12 bits count).
    #[inline(always)]
    pub fn entry(&self, slot: u32) -> u32 {
        self.entries[(slot & SLOT_MASK) as usize]
    }

    /// `(symbol, freq, slot − cum[symbol])` of `slot` (only its low 12 bits count), unpacked.
    pub fn unpack(&self, slot: u32) -> (u8, u32, u32) {
        let e = self.entry(slot);
        (e as u8, (e >> 20) + 1, (e >> 8) & 0xfff)
    }
}

/// One rANS decoding step on a state: returns the symbol and the new (not yet renormalised) state.
#[inline(always)]
fn decode_step(lookup: &DecodeLookup, x: u32) -> (u8, u32) {
    let e = lookup.entry(x & SLOT_MASK);
    (e as u8, next_state(e, x))
}

/// The state after decoding the symbol of packed lookup entry `e` from state `x`: `freq · (x >> 12) + bias`.
///
/// Computed as `(freq − 1) · q + (q + bias)` with `q = x >> 12`: the entry holds `freq − 1`, and adding the 1
/// back before the multiply would put one more instruction on the dependency chain (lookup → multiply → add →
/// renormalise) that bounds single-lane decode speed; `q + bias` is ready in parallel with the lookup.
#[inline(always)]
fn next_state(e: u32, x: u32) -> u32 {
    let q = x >> SCALE_BITS;
    // freq · q + bias < 4096 · 2^20 = 2^32 for any u32 x: no overflow even on hostile states.
    (e >> 20) * q + (q + ((e >> 8) & 0xfff))
}

/// How many decode lookups (16 KiB each, 2 MiB in all) a thread keeps: the four tables of 32 groups, so that
/// decoding the blocks of one group in a row builds each lookup once, and a cold read, whose sources lie in
/// slices of any group, finds most of them built on an archive of up to 32 groups (2048 blocks of 16 KiB);
/// memory stays bounded however many groups the archive has.
const LOOKUP_CACHE_SLOTS: usize = 128;

/// A cached lookup, found again by the table's address and confirmed by its frequencies (the lookup is a pure
/// function of them, so a reused address with other frequencies is simply a miss).
struct CachedLookup {
    address: usize,
    freq: Vec<u16>,
    lookup: Box<DecodeLookup>,
    last_used: u64,
}

#[derive(Default)]
struct LookupCache {
    slots: Vec<CachedLookup>,
    clock: u64,
}

impl LookupCache {
    /// The slot holding `table`'s lookup: a hit, a new slot while there is room, else the least recently used
    /// slot rebuilt for it. Marks the slot used.
    fn slot_for(&mut self, table: &Table) -> usize {
        self.clock += 1;
        let now = self.clock;
        let address = table as *const Table as usize;
        let hit = self.slots.iter().position(|c| c.address == address && c.freq == table.freq);
        let index = match hit {
            Some(i) => i,
            None if self.slots.len() < LOOKUP_CACHE_SLOTS => {
                let lookup = Box::new(table.decode_lookup());
                self.slots.push(CachedLookup { address, freq: table.freq.clone(), lookup, last_used: now });
                self.slots.len() - 1
            }
            None => {
                let oldest = self.slots.iter().enumerate().min_by_key(|(_, c)| c.last_used).map_or(0, |(i, _)| i);
                let slot = &mut self.slots[oldest];
                slot.address = address;
                slot.freq.clone_from(&table.freq);
                slot.lookup.rebuild(&table.freq);
                oldest
            }
        };
        self.slots[index].last_used = now;
        index
    }
}

thread_local! {
    static LOOKUP_CACHE: std::cell::RefCell<LookupCache> = std::cell::RefCell::new(LookupCache::default());
}

/// Runs `f` with the decode lookup of `table`, from this thread's cache or freshly built into it.
fn with_lookup<R>(table: &Table, f: impl FnOnce(&DecodeLookup) -> R) -> R {
    LOOKUP_CACHE.with(|cell| {
        let Ok(mut cache) = cell.try_borrow_mut() else {
            // Only reachable if `f` itself decoded; stay correct without the cache.
            return f(&table.decode_lookup());
        };
        let index = cache.slot_for(table);
        f(&cache.slots[index].lookup)
    })
}

/// Runs `f` with the decode lookups of `tables` (at most [`LOOKUP_CACHE_SLOTS`] distinct ones: the table sets of
/// the streams of a lock step, LL, ML, OF and LIT each), from this thread's cache or freshly built into it: what
/// the lock-step decoder needs, since its streams switch tables at different symbols.
fn with_lookups<R>(tables: &[&Table], f: impl FnOnce(&[&DecodeLookup]) -> R) -> R {
    LOOKUP_CACHE.with(|cell| {
        let cached = if tables.len() <= LOOKUP_CACHE_SLOTS { cell.try_borrow_mut().ok() } else { None };
        let Some(mut cache) = cached else {
            // Only reachable if `f` itself decoded, or for more tables than slots: stay correct without the
            // cache (on the heap: a lookup is 16 KiB).
            let built: Vec<Box<DecodeLookup>> = tables.iter().map(|t| Box::new(t.decode_lookup())).collect();
            let refs: Vec<&DecodeLookup> = built.iter().map(|b| &**b).collect();
            return f(&refs);
        };
        // Every slot picked during this call is marked used after every slot that was not, and eviction takes
        // the least recently used slot of a full cache: while fewer slots than the cache holds have been picked,
        // an unpicked one is older, so a picked slot is never evicted by a later table of the same call.
        let index: Vec<usize> = tables.iter().map(|t| cache.slot_for(t)).collect();
        let slots = &cache.slots;
        let refs: Vec<&DecodeLookup> = index.iter().map(|&i| &*slots[i].lookup).collect();
        f(&refs)
    })
}

/// Renormalises `y` with the word `w` when it fell below `2^16`: returns the new state and advances `pos` by one
/// when the word was taken.
///
/// A select, not a branch: whether a lane refills is data (about once per 16 bits of information), so a branch
/// would mispredict every few symbols. On x86-64 it is written out as `cmp`/`cmovb`/`adc`, because LLVM's
/// cmov-to-branch conversion turns the plain `if` into a branch, and the arithmetic alternative (shift by 0 or
/// 16, masked word) puts four instructions on the state's dependency chain where the conditional move puts two.
#[inline(always)]
fn refill(y: u32, w: u16, pos: &mut usize) -> u32 {
    let refilled = (y << 16) | w as u32;
    #[cfg(target_arch = "x86_64")]
    {
        let mut x = y;
        // SAFETY: three register-only instructions (compare, conditional move, add with carry): no memory, no
        // stack; the flags they change are declared clobbered by default.
        unsafe {
            std::arch::asm!(
                "cmp {x:e}, 0x10000",
                "cmovb {x:e}, {r:e}",
                "adc {p}, 0",
                x = inout(reg) x,
                r = in(reg) refilled,
                p = inout(reg) *pos,
                options(pure, nomem, nostack),
            );
        }
        x
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let take = y < STATE_LOW;
        *pos += take as usize;
        if take {
            refilled
        } else {
            y
        }
    }
}

/// One symbol on lane state `x`, reading the word at `min(pos, nwords)`: `words[nwords]` is the sentinel, so a
/// stream that runs out keeps decoding (garbage) and `pos` runs past `nwords`, which [`Decoder::finish`] refuses.
#[inline(always)]
fn step_clamped(lookup: &DecodeLookup, x: &mut u32, words: &[u16], nwords: usize, pos: &mut usize) -> u8 {
    let (s, y) = decode_step(lookup, *x);
    *x = refill(y, words[(*pos).min(nwords)], pos);
    s
}

/// [`step_clamped`] without the clamp and bounds check.
///
/// # Safety
/// `*pos < words.len()`.
#[inline(always)]
unsafe fn step_unchecked(lookup: &DecodeLookup, x: &mut u32, words: &[u16], pos: &mut usize) -> u8 {
    let (s, y) = decode_step(lookup, *x);
    // SAFETY: the caller guarantees `*pos < words.len()`.
    let w = unsafe { *words.get_unchecked(*pos) };
    *x = refill(y, w, pos);
    s
}

/// The most single-lane streams one lock step interleaves. Four independent dependency chains (lookup,
/// multiply, add, compare, move: about 12 cycles each) already keep the core's ALUs busy; with more, the states,
/// positions and pointers no longer fit in registers and the spills cost more than the extra overlap brings.
/// Measured on atha_chr1's entropy stage (`acxbench parse`, best of 30, Zen 3): 3 streams 0.077 CPU-s, 4 0.067,
/// 5 0.066-0.071, 8 0.073-0.076.
pub const MAX_LOCKSTEP: usize = 4;

/// A span of a lock-step round shorter than this runs on the clamped path instead of the unchecked one (only
/// near the end of a stream, where a few words are left).
const UNCHECKED_MIN: usize = 16;

/// How many symbols of every stream the clamped path decodes before looking again whether the unchecked one
/// may take over.
const CLAMPED_SPAN: usize = 64;

/// One stream of a lock step: its decoder, its state and word position (copied back to the decoder at the
/// end), what is left of its four segments, and their lookups.
struct Lockstep<'d, 'o, 'l> {
    dec: &'d mut Decoder,
    x: u32,
    pos: usize,
    segs: [&'o mut [u8]; 4],
    seg: usize,
    lookups: [&'l DecodeLookup; 4],
}

impl Lockstep<'_, '_, '_> {
    /// Skips finished segments; returns how many symbols are left in the current one (0: the stream is done).
    fn current_len(&mut self) -> usize {
        while self.seg < 4 && self.segs[self.seg].is_empty() {
            self.seg += 1;
        }
        self.segs.get(self.seg).map_or(0, |s| s.len())
    }
}

/// Decodes the streams in lock steps of at most [`MAX_LOCKSTEP`], each step as wide as the streams it has.
fn run_lockstep(mut streams: Vec<Lockstep>) {
    while !streams.is_empty() {
        let rest = streams.split_off(streams.len().min(MAX_LOCKSTEP));
        match streams.len() {
            1 => lockstep_n::<1>(streams),
            2 => lockstep_n::<2>(streams),
            3 => lockstep_n::<3>(streams),
            _ => lockstep_n::<4>(streams),
        }
        streams = rest;
    }
}

/// `N` streams (`streams.len() == N`) advance one symbol each per round, so that their dependency chains overlap
/// instead of running one after another. A round lasts until some stream reaches the end of its current segment
/// (the next one has another table); when some streams are done, the others go on in a smaller lock step.
fn lockstep_n<const N: usize>(streams: Vec<Lockstep>) {
    let mut streams: [Lockstep; N] = match streams.try_into() {
        Ok(streams) => streams,
        // Not reached (`run_lockstep` passes exactly N); correct anyway, one stream at a time.
        Err(streams) => return streams.into_iter().for_each(|st| lockstep_n::<1>(vec![st])),
    };
    loop {
        let round = streams.iter_mut().map(|st| st.current_len()).min().unwrap_or(0);
        if round == 0 {
            break;
        }
        let mut xs: [u32; N] = std::array::from_fn(|k| streams[k].x);
        let mut ps: [usize; N] = std::array::from_fn(|k| streams[k].pos);
        let mut cur = streams.each_mut().map(|st| {
            let seg = std::mem::take(&mut st.segs[st.seg]);
            let (now, rest) = seg.split_at_mut(round);
            st.segs[st.seg] = rest;
            // Exactly `nwords + 1` words, the sentinel last (see `Decoder::reset`).
            let words = st.dec.words.get(..=st.dec.nwords).unwrap_or(&[0]);
            RoundStream { out: now, lookup: st.lookups[st.seg], words }
        });
        lockstep_round(&mut cur, &mut xs, &mut ps, round);
        for (k, st) in streams.iter_mut().enumerate() {
            st.x = xs[k];
            st.pos = ps[k];
        }
    }
    let mut rest = Vec::new();
    for st in streams {
        st.dec.states[0] = st.x;
        st.dec.pos = st.pos;
        let mut st = st;
        if st.current_len() > 0 {
            rest.push(st);
        }
    }
    run_lockstep(rest);
}

/// A stream's share of one lock-step round: where its `round` symbols go, the lookup of its current segment,
/// and its words with the sentinel last (`words.len() == nwords + 1`).
struct RoundStream<'a, 'l> {
    out: &'a mut [u8],
    lookup: &'l DecodeLookup,
    words: &'a [u16],
}

/// Decodes `round` symbols of every stream (each `cur[k].out` holds exactly `round` bytes). Spans in which no
/// stream can reach its sentinel (each symbol takes at most one word) run without the clamp and bounds checks;
/// the rest, only ever the last few words of a stream, clamps like [`step_clamped`].
fn lockstep_round<const N: usize>(cur: &mut [RoundStream; N], xs: &mut [u32; N], ps: &mut [usize; N], round: usize) {
    if cur.iter().any(|c| c.out.len() != round || c.words.is_empty()) {
        // Not reached (the caller splits every output at `round`, words end with the sentinel): the same
        // symbols one stream at a time through the checked step.
        for (k, c) in cur.iter_mut().enumerate() {
            let nwords = c.words.len().saturating_sub(1);
            let words = if c.words.is_empty() { &[0u16][..] } else { c.words };
            for o in c.out.iter_mut() {
                *o = step_clamped(c.lookup, &mut xs[k], words, nwords, &mut ps[k]);
            }
        }
        return;
    }
    let mut done = 0;
    while done < round {
        let left = round - done;
        let safe = (0..N).map(|k| (cur[k].words.len() - 1).saturating_sub(ps[k])).min().unwrap_or(0).min(left);
        if safe >= left.min(UNCHECKED_MIN) {
            // SAFETY: `done + safe <= round`, every output's length, and `ps[k] + safe <= words[k].len() - 1`
            // for every stream: what `lockstep_span` requires.
            unsafe { span_dispatch(cur, xs, ps, done, done + safe) };
            done += safe;
        } else {
            let end = done + left.min(CLAMPED_SPAN);
            for i in done..end {
                for (k, c) in cur.iter_mut().enumerate() {
                    c.out[i] = step_clamped(c.lookup, &mut xs[k], c.words, c.words.len() - 1, &mut ps[k]);
                }
            }
            done = end;
        }
    }
}

/// [`lockstep_span`], with one lookup base for all streams when they share their current table (the usual case:
/// the slices of one block, all in their literal segments).
///
/// # Safety
/// As [`lockstep_span`].
#[inline(always)]
unsafe fn span_dispatch<const N: usize>(
    cur: &mut [RoundStream; N],
    xs: &mut [u32; N],
    ps: &mut [usize; N],
    start: usize,
    end: usize,
) {
    // SAFETY: the caller's contract, passed on unchanged.
    unsafe {
        if cur.iter().all(|c| std::ptr::eq(c.lookup, cur[0].lookup)) {
            lockstep_span::<N, true>(cur, xs, ps, start, end)
        } else {
            lockstep_span::<N, false>(cur, xs, ps, start, end)
        }
    }
}

/// Symbols `start..end` of every stream of a round, without clamps or bounds checks: the hot loop of CPU decode.
/// With `SHARED`, every stream uses stream 0's lookup (the caller checked they are the same): one base register
/// instead of `N`, which leaves more registers for the states and positions.
///
/// # Safety
/// `end <= cur[k].out.len()` and `ps[k] + (end − start) < cur[k].words.len()` for every `k`.
#[inline(always)]
unsafe fn lockstep_span<const N: usize, const SHARED: bool>(
    cur: &mut [RoundStream; N],
    xs: &mut [u32; N],
    ps: &mut [usize; N],
    start: usize,
    end: usize,
) {
    // Locals, so that the unrolled loop keeps states and positions in registers.
    let mut x = *xs;
    let mut p = *ps;
    let outs: [*mut u8; N] = std::array::from_fn(|k| cur[k].out.as_mut_ptr());
    let words: [*const u16; N] = std::array::from_fn(|k| cur[k].words.as_ptr());
    let entries: [&[u32; SCALE as usize]; N] = std::array::from_fn(|k| &cur[if SHARED { 0 } else { k }].lookup.entries);
    for i in start..end {
        for k in 0..N {
            let e = entries[k][(x[k] & SLOT_MASK) as usize];
            let y = next_state(e, x[k]);
            // SAFETY: before the j-th symbol of the span (j = i − start < end − start) this stream has taken at
            // most j words, so `p[k] <= ps[k] + j < ps[k] + (end − start) <= words.len() − 1`: in bounds.
            let w = unsafe { *words[k].add(p[k]) };
            x[k] = refill(y, w, &mut p[k]);
            // SAFETY: `i < end <= out.len()`.
            unsafe { *outs[k].add(i) = e as u8 };
        }
    }
    *xs = x;
    *ps = p;
}

/// A single-lane stream of context-coded literals in a lock step: what is left of its output, and its context.
struct CtxStream<'d, 'm, 'o> {
    dec: &'d mut Decoder,
    model: &'m CtxModel,
    out: &'o mut [u8],
    ctx: u32,
}

/// One round of `N` context streams (`group.len() == N`, none empty): each advances by the shortest one's
/// remaining length, one literal per stream per step (see [`Decoder::decode_contexts_all`]).
fn contexts_round<const N: usize>(group: &mut [CtxStream]) {
    let round = group.iter().map(|s| s.out.len()).min().unwrap_or(0);
    let Ok(group): Result<&mut [CtxStream; N], _> = group.try_into() else { return };
    let mut x: [u32; N] = std::array::from_fn(|k| group[k].dec.states[0]);
    let mut p: [usize; N] = std::array::from_fn(|k| group[k].dec.pos);
    let mut ctx: [u32; N] = std::array::from_fn(|k| group[k].ctx);
    let masks: [u32; N] = std::array::from_fn(|k| group[k].model.mask());
    let nw: [usize; N] = std::array::from_fn(|k| group[k].dec.nwords);
    {
        let mut lanes: [(&[u16], &[u64], &mut [u8]); N] =
            group.each_mut().map(|s| (&s.dec.words[..], s.model.packed(), &mut s.out[..round]));
        let mut i = 0;
        while i < round {
            // Symbols that no stream can decode past its last word (each symbol takes at most one).
            let safe = (0..N).map(|k| nw[k].saturating_sub(p[k])).min().unwrap_or(0).min(round - i);
            if safe >= UNCHECKED_MIN.min(round - i) && safe > 0 {
                // SAFETY: `i + safe <= round`, every output's length; `p[k] + safe <= nw[k] < words.len()`; and
                // every table holds `mask + 1` entries (a model's invariant): what `contexts_span` requires.
                unsafe {
                    if lanes.iter().all(|l| std::ptr::eq(l.1, lanes[0].1)) {
                        contexts_span::<N, true>(&mut lanes, &mut x, &mut p, &mut ctx, &masks, i, i + safe)
                    } else {
                        contexts_span::<N, false>(&mut lanes, &mut x, &mut p, &mut ctx, &masks, i, i + safe)
                    }
                };
                i += safe;
                continue;
            }
            let end = (i + CLAMPED_SPAN).min(round);
            for i in i..end {
                for k in 0..N {
                    let (words, table, out) = &mut lanes[k];
                    let slot = x[k] & SLOT_MASK;
                    // The context is masked below the table's length (4^k entries).
                    let (s, f, c) = decode_packed(table[(ctx[k] & masks[k]) as usize], slot);
                    let y = f * (x[k] >> SCALE_BITS) + slot - c;
                    // `words` holds `nwords + 1` words, the sentinel last, so the clamped index is in bounds.
                    x[k] = refill(y, words[p[k].min(nw[k])], &mut p[k]);
                    ctx[k] = (ctx[k] << 2) | s;
                    out[i] = base_byte(s);
                }
            }
            i = end;
        }
    }
    for (k, st) in group.iter_mut().enumerate() {
        st.dec.states[0] = x[k];
        st.dec.pos = p[k];
        st.dec.next += round;
        st.ctx = ctx[k];
        st.out = &mut std::mem::take(&mut st.out)[round..];
    }
}

/// Literals `start..end` of every stream of a context round without bounds checks: the hot loop of decoding
/// context-coded literals. With `SHARED` every stream uses stream 0's table and mask (the caller checked they
/// share the model: the slices of one group do), which frees registers for the states and positions.
///
/// # Safety
/// For every `k`: `end <= lanes[k].2.len()`, `p[k] + (end − start) < lanes[k].0.len()`, and `lanes[k].1` holds
/// `masks[k] + 1` entries.
#[inline(always)]
unsafe fn contexts_span<const N: usize, const SHARED: bool>(
    lanes: &mut [(&[u16], &[u64], &mut [u8]); N],
    x: &mut [u32; N],
    p: &mut [usize; N],
    ctx: &mut [u32; N],
    masks: &[u32; N],
    start: usize,
    end: usize,
) {
    let (mut xs, mut ps, mut cs) = (*x, *p, *ctx);
    let words: [*const u16; N] = std::array::from_fn(|k| lanes[k].0.as_ptr());
    let tables: [*const u64; N] = std::array::from_fn(|k| lanes[if SHARED { 0 } else { k }].1.as_ptr());
    let masks: [u32; N] = std::array::from_fn(|k| masks[if SHARED { 0 } else { k }]);
    let outs: [*mut u8; N] = std::array::from_fn(|k| lanes[k].2.as_mut_ptr());
    for i in start..end {
        for k in 0..N {
            let slot = xs[k] & SLOT_MASK;
            // SAFETY: `cs[k] & masks[k] <= masks[k] < table length` (the caller's contract; with SHARED, stream
            // 0's table and mask, which are every stream's).
            let e = unsafe { *tables[k].add((cs[k] & masks[k]) as usize) };
            let (s, f, c) = decode_packed(e, slot);
            let y = f * (xs[k] >> SCALE_BITS) + slot - c;
            // SAFETY: before the j-th literal of the span this stream has taken at most j words, so
            // `ps[k] <= p[k] + j < p[k] + (end − start) < words.len()`.
            let w = unsafe { *words[k].add(ps[k]) };
            xs[k] = refill(y, w, &mut ps[k]);
            cs[k] = (cs[k] << 2) | s;
            // SAFETY: `i < end <= out.len()`.
            unsafe { *outs[k].add(i) = base_byte(s) };
        }
    }
    (*x, *p, *ctx) = (xs, ps, cs);
}

/// Whole decoding steps with eight lanes per vector (AVX2 on x86-64), for lane counts that are multiples of 8.
///
/// Per group of eight lanes: one gather of the lookup entries, the state update in vector arithmetic, then the
/// refill: the lanes below `2^16` form a bit mask, and lane `i` of them takes word number
/// `popcount(mask & ((1 << i) − 1))` — exactly the lane-order hand-out of FORMAT.md §3.4 (what the GPU does with
/// ballot and popc), done with one permutation from a 256-entry table.
mod simd {
    use super::DecodeLookup;

    thread_local! {
        /// Lets tests compare the vector path against the scalar one on the same thread.
        static ENABLED: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
    }

    /// Turns the vector path on or off for this thread (tests only; it is on by default).
    #[cfg(test)]
    pub(super) fn set_enabled(on: bool) {
        ENABLED.with(|e| e.set(on));
    }

    /// Decodes whole steps of `K` lanes into `out` while `*pos + K <= nwords` (no step can run out of words)
    /// and a whole step fits in `out`. Returns how many symbols it decoded (a multiple of `K`; 0 when the CPU or
    /// `K` does not allow the vector path). `states` and `*pos` are updated as the scalar loop would.
    #[inline]
    pub(super) fn decode_steps<const K: usize>(
        lookup: &DecodeLookup,
        states: &mut [u32; K],
        out: &mut [u8],
        words: &[u16],
        nwords: usize,
        pos: &mut usize,
    ) -> usize {
        #[cfg(target_arch = "x86_64")]
        if K % 8 == 0 && ENABLED.with(|e| e.get()) && std::is_x86_feature_detected!("avx2") {
            debug_assert!(nwords < words.len());
            // SAFETY: AVX2 is available (checked just above); `K` is a multiple of 8, and `words` holds more than
            // `nwords` entries (the decoder's sentinel), which is what `avx2::decode_steps` requires.
            return unsafe { avx2::decode_steps::<K>(&lookup.entries, states, out, words, nwords, pos) };
        }
        let _ = (lookup, states, out, words, nwords, pos);
        0
    }

    #[cfg(target_arch = "x86_64")]
    mod avx2 {
        use std::arch::x86_64::*;

        /// `EXPAND[mask][i]`: which of the loaded words lane `i` takes when the lanes in `mask` refill.
        static EXPAND: [[u32; 8]; 256] = {
            let mut table = [[0u32; 8]; 256];
            let mut mask = 0;
            while mask < 256 {
                let mut lane = 0;
                while lane < 8 {
                    table[mask][lane] = (mask & ((1 << lane) - 1)).count_ones();
                    lane += 1;
                }
                mask += 1;
            }
            table
        };

        /// # Safety
        /// The CPU supports AVX2, `K` is a multiple of 8 and `nwords < words.len()`.
        #[target_feature(enable = "avx2")]
        pub(super) unsafe fn decode_steps<const K: usize>(
            entries: &[u32; 4096],
            states: &mut [u32; K],
            out: &mut [u8],
            words: &[u16],
            nwords: usize,
            pos: &mut usize,
        ) -> usize {
            let slot_mask = _mm256_set1_epi32(0xfff);
            let one = _mm256_set1_epi32(1);
            // Picks the low byte of each 32-bit entry (the symbol) into the low 4 bytes of each 128-bit half.
            let symbol_bytes = _mm256_setr_epi8(
                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, //
                0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
            );
            let mut done = 0;
            while done + K <= out.len() && *pos + K <= nwords {
                // Loop invariant: `*pos` is at most the step's starting position plus `8·group`, and that start
                // plus `K` is at most `nwords`, so `*pos + 8 <= nwords < words.len()` for every group.
                for group in 0..K / 8 {
                    // SAFETY: `8·group + 8 <= K`: the eight states lie inside `states`.
                    let state_ptr = unsafe { states.as_mut_ptr().add(8 * group) } as *mut __m256i;
                    // SAFETY: as above; unaligned loads are allowed.
                    let x = unsafe { _mm256_loadu_si256(state_ptr) };
                    let slot = _mm256_and_si256(x, slot_mask);
                    // SAFETY: every index is masked below 4096, the length of `entries`.
                    let e = unsafe { _mm256_i32gather_epi32::<4>(entries.as_ptr() as *const i32, slot) };
                    let freq = _mm256_add_epi32(_mm256_srli_epi32::<20>(e), one);
                    let bias = _mm256_and_si256(_mm256_srli_epi32::<8>(e), slot_mask);
                    let y = _mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srli_epi32::<12>(x)), bias);

                    let symbols = _mm256_shuffle_epi8(e, symbol_bytes);
                    // SAFETY: `done + 8·group + 8 <= done + K <= out.len()`: eight output bytes are writable.
                    unsafe {
                        let out_ptr = out.as_mut_ptr().add(done + 8 * group);
                        (out_ptr as *mut i32).write_unaligned(_mm256_extract_epi32::<0>(symbols));
                        (out_ptr.add(4) as *mut i32).write_unaligned(_mm256_extract_epi32::<4>(symbols));
                    }

                    // Lanes below 2^16 (those whose top half is zero) take the next words in lane order.
                    let refill = _mm256_cmpeq_epi32(_mm256_srli_epi32::<16>(y), _mm256_setzero_si256());
                    let mask = _mm256_movemask_ps(_mm256_castsi256_ps(refill)) as usize;
                    // SAFETY: by the loop invariant, `words[*pos .. *pos + 8]` is in bounds.
                    let loaded = unsafe { _mm_loadu_si128(words.as_ptr().add(*pos) as *const __m128i) };
                    // SAFETY: `EXPAND[mask]` is a checked index; its row is exactly eight `u32`s.
                    let order = unsafe { _mm256_loadu_si256(EXPAND[mask].as_ptr() as *const __m256i) };
                    let w = _mm256_permutevar8x32_epi32(_mm256_cvtepu16_epi32(loaded), order);
                    let refilled = _mm256_or_si256(_mm256_slli_epi32::<16>(y), w);
                    // SAFETY: the same eight states as the load above.
                    unsafe { _mm256_storeu_si256(state_ptr, _mm256_blendv_epi8(y, refilled, refill)) };
                    *pos += mask.count_ones() as usize;
                }
                done += K;
            }
            done
        }
    }
}

/// The encoder's output: the final states (lane 0 first) and the word stream in decoder order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Encoded {
    pub states: Vec<u32>,
    pub words: Vec<u16>,
}

/// Encodes `symbols` with `lanes` interleaved states. `segments` lists `(count, table)` in symbol order: the first
/// `count` symbols use the first table, and so on (FORMAT.md §3.1); the counts must sum to `symbols.len()`.
///
/// # Panics
/// When `lanes` is not a valid lane count, the segments do not cover the symbols, or a symbol has frequency 0 in
/// its table: all three are bugs in the caller (the packer builds its tables from the same symbols).
pub fn encode(symbols: &[u8], segments: &[(usize, &Table)], lanes: usize) -> Encoded {
    encode_with_contexts(symbols, segments, None, lanes)
}

/// [`encode`], except that the last `contexts.len()` symbols, when `tail` is `Some((model, contexts))`, are base
/// codes (0..4) coded with `model` in the given contexts (FORMAT.md §3.5); `segments` cover the symbols before.
///
/// # Panics
/// As [`encode`]; also when a base code is 4 or more or has frequency 0 in its context.
pub fn encode_with_contexts(
    symbols: &[u8],
    segments: &[(usize, &Table)],
    tail: Option<(&CtxModel, &[u32])>,
    lanes: usize,
) -> Encoded {
    assert!(lanes.is_power_of_two() && lanes <= MAX_LANES, "invalid rANS lane count {lanes}");
    let tail_len = tail.map_or(0, |(_, c)| c.len());
    let covered: usize = segments.iter().map(|&(n, _)| n).sum::<usize>() + tail_len;
    assert_eq!(covered, symbols.len(), "rANS segments cover {covered} symbols, have {}", symbols.len());

    let mut states = vec![STATE_LOW; lanes];
    // Each symbol emits at most one word; most emit none.
    let mut words: Vec<u16> = Vec::with_capacity(symbols.len() / 2 + lanes);
    // One lane (the default) keeps its state in a register: indexed in the vector, the state went through memory
    // from one symbol to the next (the vector might change under the word pushes as far as the compiler knows),
    // a store and a load in the chain that bounds the encoder.
    if lanes == 1 {
        encode_lanes::<true>(symbols, segments, tail, &mut states, &mut words);
    } else {
        encode_lanes::<false>(symbols, segments, tail, &mut states, &mut words);
    }
    words.reverse();
    Encoded { states, words }
}

/// The body of [`encode_with_contexts`]: codes the symbols from the last to the first into `states` (one per
/// lane, `states.len()` a power of two) and `words`; `ONE`: a single lane, held in a local.
fn encode_lanes<const ONE: bool>(
    symbols: &[u8],
    segments: &[(usize, &Table)],
    tail: Option<(&CtxModel, &[u32])>,
    states: &mut [u32],
    words: &mut Vec<u16>,
) {
    let lanes = states.len();
    let mut single = states[0];
    let mut put = |i: usize, f: u32, c: u32| {
        assert!(f != 0, "rANS encode: symbol {} (index {i}) has frequency 0 in its table", symbols[i]);
        let x = if ONE { &mut single } else { &mut states[i & (lanes - 1)] };
        // In u64: for f = 4096 the bound is 2^32, which no state reaches (a certain symbol costs nothing).
        if *x as u64 >= (f as u64) << (32 - SCALE_BITS) {
            words.push(*x as u16);
            *x >>= 16;
        }
        *x = ((*x / f) << SCALE_BITS) + (*x % f) + c;
    };
    let mut end = symbols.len();
    if let Some((model, contexts)) = tail {
        let start = end - contexts.len();
        for i in (start..end).rev() {
            let s = symbols[i] as u32;
            assert!(s < 4, "rANS encode: base code {s} (index {i})");
            let (f, c) = model.freq_cum(contexts[i - start], s);
            put(i, f, c);
        }
        end = start;
    }
    for &(count, table) in segments.iter().rev() {
        let start = end - count;
        for i in (start..end).rev() {
            let s = symbols[i] as usize;
            put(i, table.freq_of(s), table.cum.get(s).map_or(0, |&c| c as u32));
        }
        end = start;
    }
    if ONE {
        states[0] = single;
    }
}

/// Streaming decoder over one slice's rANS stream. Feed it the slice's segments in order with [`Decoder::decode`],
/// then call [`Decoder::finish`].
#[derive(Debug, Clone)]
pub struct Decoder {
    states: [u32; MAX_LANES],
    lanes: usize,
    /// The word stream followed by one zero sentinel; reads past the end land on it (see the module notes).
    words: Vec<u16>,
    nwords: usize,
    pos: usize,
    /// Index of the next symbol, which fixes its lane.
    next: usize,
}

impl Default for Decoder {
    /// A decoder with no stream yet (see [`Decoder::reset`]).
    fn default() -> Self {
        Decoder { states: [STATE_LOW; MAX_LANES], lanes: 1, words: vec![0], nwords: 0, pos: 0, next: 0 }
    }
}

impl Decoder {
    /// `state_bytes` holds `lanes` little-endian `u32`s, `word_bytes` the little-endian word stream. Initial states
    /// below `2^16` cannot come from an encoder and are refused.
    pub fn new(state_bytes: &[u8], word_bytes: &[u8], lanes: usize) -> Result<Decoder, DecodeError> {
        let mut decoder = Decoder::default();
        decoder.reset(state_bytes, word_bytes, lanes)?;
        Ok(decoder)
    }

    /// Starts over on another stream (see [`Decoder::new`]), reusing the word buffer: a decoder that works
    /// through many small slices keeps one.
    pub fn reset(&mut self, state_bytes: &[u8], word_bytes: &[u8], lanes: usize) -> Result<(), DecodeError> {
        let lanes = check_lanes(u32::try_from(lanes).unwrap_or(0))?;
        if state_bytes.len() != 4 * lanes || word_bytes.len() % 2 != 0 {
            return Err(DecodeError::Rans {
                detail: format!("{} state bytes for {lanes} lanes, {} word bytes", state_bytes.len(), word_bytes.len()),
            });
        }
        for (lane, (state, bytes)) in self.states.iter_mut().zip(state_bytes.chunks_exact(4)).enumerate() {
            *state = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
            if *state < STATE_LOW {
                return Err(DecodeError::Rans { detail: format!("lane {lane} starts at state {state:#x} < 2^16") });
            }
        }
        let nwords = word_bytes.len() / 2;
        self.words.clear();
        self.words.reserve(nwords + 1);
        self.words.extend(word_bytes.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]])));
        self.words.push(0);
        self.lanes = lanes;
        self.nwords = nwords;
        self.pos = 0;
        self.next = 0;
        Ok(())
    }

    /// Decodes `out.len()` symbols with `table` into `out`. An unused table (`nsym = 0`) asked for a symbol is
    /// corruption.
    pub fn decode(&mut self, table: &Table, out: &mut [u8]) -> Result<(), DecodeError> {
        if out.is_empty() {
            return Ok(());
        }
        if table.is_empty() {
            return Err(DecodeError::Rans {
                detail: format!("symbol {} needs a table the group does not use (nsym = 0)", self.next),
            });
        }
        with_lookup(table, |lookup| match self.lanes {
            1 => self.decode_lanes::<1>(lookup, out),
            2 => self.decode_lanes::<2>(lookup, out),
            4 => self.decode_lanes::<4>(lookup, out),
            8 => self.decode_lanes::<8>(lookup, out),
            16 => self.decode_lanes::<16>(lookup, out),
            _ => self.decode_lanes::<32>(lookup, out),
        });
        Ok(())
    }

    /// Decodes several streams in lock step: stream `j` is `decoders[j]`, decoding the four segments `outs[j]`
    /// with the tables `tables[j]` (LL, ML, OF, LIT). Single-lane streams advance one symbol each per round, in
    /// groups of [`MAX_LOCKSTEP`] consecutive streams, so that their dependency chains (lookup, multiply, refill)
    /// overlap instead of running one after another. The result is exactly what [`Decoder::decode`] on each
    /// stream in turn gives; streams with more than one lane, or already part-way through their slice, are
    /// decoded one by one. Call [`Decoder::finish`] on each afterwards. On error returns the index of the stream
    /// at fault (streams before its group are decoded, the rest are not).
    pub fn decode_lockstep_all(
        decoders: &mut [Decoder],
        outs: Vec<[&mut [u8]; 4]>,
        tables: &[[&Table; 4]],
    ) -> Result<(), (usize, DecodeError)> {
        if decoders.len() != outs.len() || outs.len() != tables.len() {
            let detail = format!("{} decoders, {} outputs, {} table sets", decoders.len(), outs.len(), tables.len());
            return Err((0, DecodeError::Rans { detail }));
        }
        let mut outs = outs.into_iter();
        for (g, (decs, sets)) in decoders.chunks_mut(MAX_LOCKSTEP).zip(tables.chunks(MAX_LOCKSTEP)).enumerate() {
            let group_outs: Vec<[&mut [u8]; 4]> = outs.by_ref().take(decs.len()).collect();
            Decoder::lockstep_group(decs.iter_mut().collect(), group_outs, sets)
                .map_err(|(s, e)| (g * MAX_LOCKSTEP + s, e))?;
        }
        Ok(())
    }

    /// One lock step of up to [`MAX_LOCKSTEP`] streams (more are split by `run_lockstep`), after the checks;
    /// errors name the stream within the group.
    fn lockstep_group(
        decoders: Vec<&mut Decoder>,
        outs: Vec<[&mut [u8]; 4]>,
        tables: &[[&Table; 4]],
    ) -> Result<(), (usize, DecodeError)> {
        // A table the group does not use must not be asked for a symbol (same rule as `decode`).
        for (s, (segs, set)) in outs.iter().zip(tables).enumerate() {
            for (seg, table) in segs.iter().zip(set) {
                if !seg.is_empty() && table.is_empty() {
                    let detail = format!("stream {s}: a segment needs a table the group does not use (nsym = 0)");
                    return Err((s, DecodeError::Rans { detail }));
                }
            }
        }
        // Multi-lane streams and streams already started go one by one, through `decode`.
        let mut single = Vec::with_capacity(decoders.len());
        for (s, ((dec, segs), set)) in decoders.into_iter().zip(outs).zip(tables).enumerate() {
            if dec.lanes != 1 || dec.next != 0 {
                for (seg, table) in segs.into_iter().zip(set) {
                    dec.decode(table, seg).map_err(|e| (s, e))?;
                }
            } else {
                single.push((dec, segs, set));
            }
        }
        // The distinct tables (streams of one group share theirs), and which one each segment uses.
        let mut distinct: Vec<&Table> = Vec::with_capacity(16);
        let which: Vec<[usize; 4]> = single
            .iter()
            .map(|(_, _, set)| {
                set.map(|t| match distinct.iter().position(|d| std::ptr::eq(*d, t)) {
                    Some(i) => i,
                    None => {
                        distinct.push(t);
                        distinct.len() - 1
                    }
                })
            })
            .collect();
        with_lookups(&distinct, |lookups| {
            let streams = single
                .into_iter()
                .zip(&which)
                .map(|((dec, segs, _), which)| {
                    dec.next = segs.iter().map(|s| s.len()).sum();
                    Lockstep { x: dec.states[0], pos: dec.pos, segs, seg: 0, lookups: which.map(|i| lookups[i]), dec }
                })
                .collect();
            run_lockstep(streams);
        });
        Ok(())
    }

    /// The decode loop, monomorphised per lane count so the lane index is a cheap mask and whole steps unroll.
    fn decode_lanes<const K: usize>(&mut self, lookup: &DecodeLookup, out: &mut [u8]) {
        let mut lane = self.next % K;
        let mut pos = self.pos;
        let words = &self.words[..];
        let nwords = self.nwords;
        let mut states: [u32; K] = [0; K];
        states.copy_from_slice(&self.states[..K]);

        // Symbols until the first step boundary, then whole steps, then the tail.
        let head = ((K - lane) % K).min(out.len());
        let (head_out, rest) = out.split_at_mut(head);
        for o in head_out.iter_mut() {
            *o = step_clamped(lookup, &mut states[lane], words, nwords, &mut pos);
            lane = (lane + 1) % K;
        }
        // Whole steps eight lanes at a time where the CPU can, while the words cannot run out; then scalar.
        let simd_done = simd::decode_steps::<K>(lookup, &mut states, rest, words, nwords, &mut pos);
        let mut whole = rest[simd_done..].chunks_exact_mut(K);
        for chunk in &mut whole {
            if pos + K <= nwords {
                // A step reads at most K words, all before `nwords`: no clamping needed.
                for (x, o) in states.iter_mut().zip(chunk.iter_mut()) {
                    // SAFETY: within this step `pos` starts at `p0` with `p0 + K <= nwords` and grows by at most
                    // one per symbol, so before the k-th symbol (k < K) `pos <= p0 + k < nwords < words.len()`.
                    *o = unsafe { step_unchecked(lookup, x, words, &mut pos) };
                }
            } else {
                for (x, o) in states.iter_mut().zip(chunk.iter_mut()) {
                    *o = step_clamped(lookup, x, words, nwords, &mut pos);
                }
            }
        }
        for o in whole.into_remainder().iter_mut() {
            *o = step_clamped(lookup, &mut states[lane], words, nwords, &mut pos);
            lane = (lane + 1) % K;
        }

        self.states[..K].copy_from_slice(&states);
        self.pos = pos;
        self.next += out.len();
    }

    /// Decodes `out.len()` literals coded with a context model (FORMAT.md §3.5) into `out` as bytes A, C, G, T:
    /// the slice's literal segment (or its first literals), which starts at the next symbol. Each lane's context
    /// starts at 0 here and takes in every base that lane decodes.
    pub fn decode_contexts(&mut self, model: &CtxModel, out: &mut [u8]) {
        let lanes = self.lanes.max(1);
        let mask = model.mask();
        let mut ctx = [0u32; MAX_LANES];
        let mut lane = self.next % lanes;
        let mut pos = self.pos;
        let words = &self.words[..];
        let nwords = self.nwords;
        for o in out.iter_mut() {
            let x = self.states[lane];
            let slot = x & SLOT_MASK;
            let (s, f, c) = model.decode_slot(ctx[lane], slot);
            let y = f * (x >> SCALE_BITS) + slot - c;
            self.states[lane] = refill(y, words[pos.min(nwords)], &mut pos);
            ctx[lane] = next_context(ctx[lane], s, mask);
            *o = base_byte(s);
            lane = (lane + 1) & (lanes - 1);
        }
        self.pos = pos;
        self.next += out.len();
    }

    /// [`Decoder::decode_contexts`] for several single-lane streams at once, in lock steps of up to
    /// [`MAX_LOCKSTEP`]: a context decode is one dependency chain per slice (slot, three compares, multiply,
    /// refill, next context), and interleaving independent slices overlaps them. Streams with more lanes are
    /// decoded one by one.
    pub fn decode_contexts_all(streams: Vec<(&mut Decoder, &CtxModel, &mut [u8])>) {
        let mut single = Vec::with_capacity(streams.len());
        for (dec, model, out) in streams {
            if dec.lanes == 1 {
                single.push(CtxStream { dec, model, out, ctx: 0 });
            } else {
                dec.decode_contexts(model, out);
            }
        }
        loop {
            single.retain(|s| !s.out.is_empty());
            match single.len() {
                0 => break,
                1 => contexts_round::<1>(&mut single[..1]),
                2 => contexts_round::<2>(&mut single[..2]),
                3 => contexts_round::<3>(&mut single[..3]),
                _ => contexts_round::<4>(&mut single[..4]),
            }
        }
    }

    /// Checks the end of the stream: every lane back at `2^16`, all words consumed and no read past the end.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.pos != self.nwords {
            return Err(DecodeError::Rans {
                detail: format!("{} of {} words consumed after {} symbols", self.pos, self.nwords, self.next),
            });
        }
        if let Some(lane) = (0..self.lanes).find(|&l| self.states[l] != STATE_LOW) {
            return Err(DecodeError::Rans {
                detail: format!("lane {lane} ends at state {:#x}, expected 0x10000", self.states[lane]),
            });
        }
        Ok(())
    }

    /// Number of symbols decoded so far.
    pub fn symbols_decoded(&self) -> usize {
        self.next
    }
}

/// Encodes into the byte layout of a block payload's `state[K]` and `word[nwords]` fields.
pub fn write_stream(encoded: &Encoded, out: &mut Vec<u8>) {
    for &s in &encoded.states {
        out.extend_from_slice(&s.to_le_bytes());
    }
    for &w in &encoded.words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn table(counts: &[u64]) -> Table {
        Table::from_counts(counts)
    }

    fn stream_bytes(enc: &Encoded) -> (Vec<u8>, Vec<u8>) {
        let mut all = Vec::new();
        write_stream(enc, &mut all);
        let split = enc.states.len() * 4;
        (all[..split].to_vec(), all[split..].to_vec())
    }

    /// A literal transcription of FORMAT.md §3.4's step-wise decoder (all lanes decode, then refill in lane order).
    // Indexed loops on purpose: this mirrors the spec's pseudo-code line by line.
    #[allow(clippy::needless_range_loop)]
    fn reference_decode(states: &[u32], words: &[u16], segments: &[(usize, &Table)]) -> Result<Vec<u8>, &'static str> {
        let k = states.len();
        let mut x = states.to_vec();
        let total: usize = segments.iter().map(|s| s.0).sum();
        let table_of = |i: usize| {
            let mut end = 0;
            for &(n, t) in segments {
                end += n;
                if i < end {
                    return t;
                }
            }
            unreachable!()
        };
        let mut out = vec![0u8; total];
        let mut pos = 0;
        let mut j = 0;
        while j * k < total {
            for lane in 0..k {
                let i = j * k + lane;
                if i >= total {
                    continue;
                }
                let t = table_of(i);
                let slot = x[lane] & 4095;
                let s = (0..t.freq.len())
                    .find(|&s| (t.cum[s] as u32) <= slot && slot < t.cum[s] as u32 + t.freq[s] as u32)
                    .unwrap();
                out[i] = s as u8;
                x[lane] = t.freq[s] as u32 * (x[lane] >> 12) + slot - t.cum[s] as u32;
            }
            for lane in 0..k {
                if j * k + lane < total && x[lane] < 1 << 16 {
                    let w = *words.get(pos).ok_or("out of words")?;
                    x[lane] = (x[lane] << 16) | w as u32;
                    pos += 1;
                }
            }
            j += 1;
        }
        if pos != words.len() || x.iter().any(|&s| s != 1 << 16) {
            return Err("bad end");
        }
        Ok(out)
    }

    fn decode_all(enc: &Encoded, segments: &[(usize, &Table)]) -> Result<Vec<u8>, DecodeError> {
        let (sb, wb) = stream_bytes(enc);
        let mut dec = Decoder::new(&sb, &wb, enc.states.len())?;
        let mut out = Vec::new();
        for &(n, t) in segments {
            let mut part = vec![0u8; n];
            dec.decode(t, &mut part)?;
            out.extend_from_slice(&part);
        }
        dec.finish()?;
        Ok(out)
    }

    #[test]
    fn empty_stream() {
        let t = table(&[1, 1]);
        let enc = encode(&[], &[(0, &t)], 4);
        assert_eq!(enc.states, vec![STATE_LOW; 4]);
        assert!(enc.words.is_empty());
        assert_eq!(decode_all(&enc, &[(0, &t)]), Ok(vec![]));
    }

    #[test]
    fn single_symbol_table_costs_nothing() {
        let t = table(&[0, 0, 5]);
        let symbols = vec![2u8; 10_000];
        let enc = encode(&symbols, &[(symbols.len(), &t)], 32);
        assert!(enc.words.is_empty());
        assert_eq!(decode_all(&enc, &[(symbols.len(), &t)]), Ok(symbols));
    }

    #[test]
    fn lanes_are_validated() {
        for bad in [0u32, 3, 5, 64, u32::MAX] {
            assert!(check_lanes(bad).is_err());
        }
        assert!(Decoder::new(&[0; 12], &[], 3).is_err());
        assert!(Decoder::new(&[0, 0, 1, 0], &[], 1).is_ok());
        // A state below 2^16 cannot come from an encoder.
        assert!(matches!(Decoder::new(&[0xff, 0xff, 0, 0], &[], 1), Err(DecodeError::Rans { .. })));
    }

    #[test]
    fn unused_table_is_corruption() {
        let mut dec = Decoder::new(&[0, 0, 1, 0], &[], 1).unwrap();
        assert!(dec.decode(&Table::default(), &mut []).is_ok());
        assert!(matches!(dec.decode(&Table::default(), &mut [0]), Err(DecodeError::Rans { .. })));
    }

    #[test]
    fn known_vector() {
        // Hand-checkable: two symbols of frequency 2048 each encode one bit per symbol.
        let t = table(&[1, 1]);
        let symbols = [1u8, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1];
        let enc = encode(&symbols, &[(symbols.len(), &t)], 1);
        // 17 bits: 65536 · 2^17 overflows once, so exactly one word comes out.
        assert_eq!(enc.words.len(), 1);
        assert_eq!(reference_decode(&enc.states, &enc.words, &[(symbols.len(), &t)]), Ok(symbols.to_vec()));
    }

    #[test]
    fn lookup_cache_evicts_and_notices_changed_tables() {
        // More tables than cache slots, decoded round-robin, then one table changed in place.
        let mut tables: Vec<Table> =
            (0..LOOKUP_CACHE_SLOTS as u64 + 5).map(|i| table(&[1, i + 1, 3 * i + 2])).collect();
        let symbols: Vec<u8> = (0..500).map(|i| (i % 3) as u8).collect();
        for round in 0..3 {
            for t in &tables {
                let enc = encode(&symbols, &[(symbols.len(), t)], 8);
                assert_eq!(decode_all(&enc, &[(symbols.len(), t)]), Ok(symbols.clone()), "round {round}");
            }
        }
        tables[0] = table(&[5, 1, 1]);
        let enc = encode(&symbols, &[(symbols.len(), &tables[0])], 8);
        assert_eq!(decode_all(&enc, &[(symbols.len(), &tables[0])]), Ok(symbols.clone()));
        let changed = &mut tables[1];
        *changed = table(&[1, 1, 9]);
        let enc = encode(&symbols, &[(symbols.len(), &tables[1])], 8);
        assert_eq!(decode_all(&enc, &[(symbols.len(), &tables[1])]), Ok(symbols));
    }

    #[test]
    fn vector_path_on_long_streams() {
        // Long enough for many whole steps on the vector path, in both a high- and a low-entropy table.
        let mut seed = 12345u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        let uniform: Vec<u8> = (0..20_000).map(|_| next() as u8).collect();
        let skewed: Vec<u8> = (0..20_000).map(|_| (next() % 1000).min(300) as u8 / 100).collect();
        for symbols in [uniform, skewed] {
            let mut counts = vec![0u64; 256];
            symbols.iter().for_each(|&s| counts[s as usize] += 1);
            let t = table(&counts);
            let segments = [(symbols.len() / 3, &t), (symbols.len() - symbols.len() / 3, &t)];
            for lanes in [8, 16, 32] {
                let enc = encode(&symbols, &segments, lanes);
                assert_eq!(decode_all(&enc, &segments), Ok(symbols.clone()), "{lanes} lanes");
                simd::set_enabled(false);
                let scalar = decode_all(&enc, &segments);
                simd::set_enabled(true);
                assert_eq!(scalar, Ok(symbols.clone()));
            }
        }
    }

    /// Four single-lane streams of different lengths and segment splits, decoded in lock step and one by one:
    /// the same symbols, states and word positions, corrupted or not.
    fn lockstep_agrees(flips: &[(usize, u8)]) {
        let t = [table(&[5, 1, 1]), table(&[1, 3]), table(&[2, 2, 2, 2]), table(&[9, 3, 3, 1])];
        let tables = [&t[0], &t[1], &t[2], &t[3]];
        let mut streams = Vec::new();
        for (s, splits) in [[3usize, 0, 7, 500], [1, 1, 1, 0], [40, 39, 39, 2000], [0, 0, 0, 9]].iter().enumerate() {
            let segs: Vec<Vec<u8>> = splits
                .iter()
                .zip(&t)
                .map(|(&n, tb)| (0..n).map(|i| ((i * 7 + s) % tb.nsym()) as u8).collect())
                .collect();
            let symbols: Vec<u8> = segs.concat();
            let segments: Vec<(usize, &Table)> = splits.iter().copied().zip(tables).collect();
            let enc = encode(&symbols, &segments, 1);
            let (sb, mut wb) = stream_bytes(&enc);
            for &(at, x) in flips {
                if !wb.is_empty() {
                    let n = wb.len();
                    wb[(at + s) % n] ^= x;
                }
            }
            streams.push((sb, wb, *splits));
        }
        let mut decs: Vec<Decoder> = streams.iter().map(|(sb, wb, _)| Decoder::new(sb, wb, 1).unwrap()).collect();
        let mut bufs: Vec<[Vec<u8>; 4]> = streams.iter().map(|(_, _, sp)| sp.map(|n| vec![0u8; n])).collect();
        {
            let outs = bufs.iter_mut().map(|b| b.each_mut().map(|v| &mut v[..])).collect();
            Decoder::decode_lockstep_all(&mut decs, outs, &[tables; 4]).unwrap();
        }
        for ((sb, wb, splits), (dec, buf)) in streams.iter().zip(decs.iter().zip(&bufs)) {
            let mut alone = Decoder::new(sb, wb, 1).unwrap();
            for (k, &n) in splits.iter().enumerate() {
                let mut part = vec![0u8; n];
                alone.decode(tables[k], &mut part).unwrap();
                assert_eq!(part, buf[k]);
            }
            assert_eq!((alone.pos, alone.states[0], alone.next), (dec.pos, dec.states[0], dec.next));
            assert_eq!(alone.finish(), dec.finish());
            if flips.is_empty() {
                assert!(dec.finish().is_ok());
            }
        }
    }

    #[test]
    fn lockstep_matches_one_by_one() {
        lockstep_agrees(&[]);
        lockstep_agrees(&[(3, 0x40)]);
        lockstep_agrees(&[(0, 0xff), (17, 1)]);
        // A segment that needs an unused table is refused, as `decode` refuses it.
        let t = table(&[1, 1]);
        let empty = Table::default();
        let mut d = Decoder::new(&[0, 0, 1, 0], &[], 1).unwrap();
        let mut one = [0u8; 1];
        let outs = vec![[&mut [][..], &mut [][..], &mut [][..], &mut one[..]]];
        assert!(Decoder::decode_lockstep_all(std::slice::from_mut(&mut d), outs, &[[&t, &t, &t, &empty]]).is_err());
    }

    /// A pool of distinct tables for the wide lock-step tests: more than the lookup cache holds, with 1 to 256
    /// symbols and different skews, so lock steps see shared tables, many distinct ones, and evictions.
    fn table_pool() -> Vec<Table> {
        (0..LOOKUP_CACHE_SLOTS as u64 + 8)
            .map(|i| table(&(0..1 + (i * 37) % 256).map(|s| 1 + (s * i) % 9).collect::<Vec<_>>()))
            .collect()
    }

    /// One stream of a wide lock-step test: its lane count, its four segments' (length, pool table) and
    /// corruption (word-byte flips, a cut of the word stream).
    type StreamSpec = (u32, [(usize, usize); 4], Vec<(usize, u8)>, Option<usize>);

    fn stream_spec() -> impl Strategy<Value = StreamSpec> {
        let seg = (prop_oneof![0usize..4, 0usize..300, 1000usize..3000], 0usize..LOOKUP_CACHE_SLOTS + 8);
        (
            prop_oneof![6 => Just(0u32), 1 => 1u32..3],
            [seg.clone(), seg.clone(), seg.clone(), seg],
            proptest::collection::vec((any::<usize>(), 1u8..=255), 0..2),
            proptest::option::weighted(0.15, any::<usize>()),
        )
    }

    /// Encodes each spec's stream (symbols cycling through each table's alphabet), corrupts it as asked, then
    /// decodes all streams with `decode_lockstep_all` and each alone with `decode`: the same symbols (garbage
    /// included), positions, states, symbol counts and verdicts.
    fn wide_lockstep_agrees(specs: &[StreamSpec], pool: &[Table]) {
        let mut streams = Vec::new();
        for (s, (lane_log, segs, flips, cut)) in specs.iter().enumerate() {
            let lanes = 1usize << lane_log;
            let symbols: Vec<u8> = segs
                .iter()
                .flat_map(|&(n, t)| (0..n).map(move |i| ((i * 7 + s + i / 5) % pool[t].nsym()) as u8))
                .collect();
            let segments: Vec<(usize, &Table)> = segs.iter().map(|&(n, t)| (n, &pool[t])).collect();
            let enc = encode(&symbols, &segments, lanes);
            let (sb, mut wb) = stream_bytes(&enc);
            flip_words(&mut wb, flips);
            if let (Some(cut), false) = (cut, wb.is_empty()) {
                wb.truncate((cut % wb.len()) & !1);
            }
            streams.push((sb, wb, lanes));
        }
        let mut decs: Vec<Decoder> = streams.iter().map(|(sb, wb, k)| Decoder::new(sb, wb, *k).unwrap()).collect();
        let mut bufs: Vec<[Vec<u8>; 4]> = specs.iter().map(|sp| sp.1.map(|(n, _)| vec![0u8; n])).collect();
        let sets: Vec<[&Table; 4]> = specs.iter().map(|sp| sp.1.map(|(_, t)| &pool[t])).collect();
        let outs: Vec<[&mut [u8]; 4]> = bufs.iter_mut().map(|b| b.each_mut().map(|v| &mut v[..])).collect();
        Decoder::decode_lockstep_all(&mut decs, outs, &sets).unwrap();
        for (s, ((sb, wb, lanes), (dec, buf))) in streams.iter().zip(decs.iter().zip(&bufs)).enumerate() {
            let mut alone = Decoder::new(sb, wb, *lanes).unwrap();
            for (k, &(n, t)) in specs[s].1.iter().enumerate() {
                let mut part = vec![0u8; n];
                alone.decode(&pool[t], &mut part).unwrap();
                assert_eq!(part, buf[k], "stream {s} segment {k}");
            }
            assert_eq!((alone.pos, alone.states, alone.next), (dec.pos, dec.states, dec.next), "stream {s}");
            assert_eq!(alone.finish(), dec.finish(), "stream {s}");
            if specs[s].2.is_empty() && specs[s].3.is_none() {
                assert!(dec.finish().is_ok(), "stream {s}");
            }
        }
    }

    #[test]
    fn wide_lockstep_fixed_cases() {
        let pool = table_pool();
        // Nine streams (two full lock steps and one more), of different lengths, all sharing a table set; then 20
        // streams with 32+ distinct tables per group; then a group with multi-lane streams mixed in.
        let shared: Vec<StreamSpec> =
            (0..9).map(|s| (0, [(3, 0), (2, 1), (2, 2), (2000 + 40 * s, 3)], vec![], None)).collect();
        wide_lockstep_agrees(&shared, &pool);
        let distinct: Vec<StreamSpec> = (0..20)
            .map(|s| {
                (
                    0,
                    [(50 + s, 4 * s % 40), (60, (4 * s + 1) % 40), (7, (4 * s + 2) % 40), (900, (4 * s + 3) % 40)],
                    vec![],
                    None,
                )
            })
            .collect();
        wide_lockstep_agrees(&distinct, &pool);
        let mixed: Vec<StreamSpec> = (0..8)
            .map(|s| (s % 3, [(10, 5), (0, 6), (20, 7), (1500, 8)], vec![], if s == 5 { Some(7) } else { None }))
            .collect();
        wide_lockstep_agrees(&mixed, &pool);
    }

    #[test]
    fn decode_lockstep_arrays_of_any_width() {
        // The array API (what block.rs calls) with more streams than one lock step holds, and more distinct
        // tables (12 streams × 4, from a pool of 40) than the lookup cache has slots: built outside the cache.
        let pool = table_pool();
        let sets: [[&Table; 4]; 12] = std::array::from_fn(|s| std::array::from_fn(|k| &pool[(4 * s + k) % pool.len()]));
        let mut streams = Vec::new();
        for (s, t) in sets.iter().enumerate() {
            let splits = [s, 2 * s, 1, 700 + 13 * s];
            let symbols: Vec<u8> =
                splits.iter().zip(t).flat_map(|(&n, tb)| (0..n).map(move |i| ((i + s) % tb.nsym()) as u8)).collect();
            let segments: Vec<(usize, &Table)> = splits.iter().copied().zip(t.iter().copied()).collect();
            streams.push((stream_bytes(&encode(&symbols, &segments, 1)), splits, symbols));
        }
        let mut decs: Vec<Decoder> = streams.iter().map(|((sb, wb), _, _)| Decoder::new(sb, wb, 1).unwrap()).collect();
        let mut bufs: Vec<[Vec<u8>; 4]> = streams.iter().map(|(_, sp, _)| sp.map(|n| vec![0u8; n])).collect();
        {
            let outs = bufs.iter_mut().map(|b| b.each_mut().map(|v| &mut v[..])).collect();
            Decoder::decode_lockstep_all(&mut decs, outs, &sets).unwrap();
        }
        for ((dec, buf), (_, _, symbols)) in decs.iter().zip(&bufs).zip(&streams) {
            assert!(dec.finish().is_ok());
            assert_eq!(&buf.concat(), symbols);
        }
    }

    fn segment_strategy() -> impl Strategy<Value = Vec<(Vec<u64>, Vec<u8>)>> {
        // Up to four segments, each with its own alphabet and skew, symbols drawn from the alphabet.
        proptest::collection::vec(
            (1usize..=256, 0u32..6, proptest::collection::vec(any::<u32>(), 0..600)).prop_map(|(n, skew, raw)| {
                let counts_src: Vec<u64> = (0..n as u64).map(|s| 1 + (s % 7).pow(skew)).collect();
                let total: u64 = counts_src.iter().sum();
                // Draw symbols following the counts so skewed tables see skewed input.
                let symbols: Vec<u8> = raw
                    .iter()
                    .map(|&r| {
                        let mut target = r as u64 % total;
                        let mut s = 0;
                        while target >= counts_src[s] {
                            target -= counts_src[s];
                            s += 1;
                        }
                        s as u8
                    })
                    .collect();
                let mut counts = vec![0u64; n];
                for &s in &symbols {
                    counts[s as usize] += 1;
                }
                (counts, symbols)
            }),
            1..5,
        )
    }

    /// XORs `x` into the word-stream byte at `at` (mod its length) for each flip: a corrupted stream.
    fn flip_words(wb: &mut [u8], flips: &[(usize, u8)]) {
        if wb.is_empty() {
            return;
        }
        let n = wb.len();
        for &(at, x) in flips {
            wb[at % n] ^= x;
        }
    }

    proptest! {
        #[test]
        fn round_trip_matches_reference(segs in segment_strategy(), lane_log in 0u32..6) {
            let lanes = 1usize << lane_log;
            let tables: Vec<Table> = segs.iter().map(|(c, _)| table(c)).collect();
            let segments: Vec<(usize, &Table)> = segs.iter().zip(&tables).map(|((_, s), t)| (s.len(), t)).collect();
            let symbols: Vec<u8> = segs.iter().flat_map(|(_, s)| s.iter().copied()).collect();
            let enc = encode(&symbols, &segments, lanes);
            prop_assert_eq!(enc.states.len(), lanes);
            prop_assert_eq!(decode_all(&enc, &segments), Ok(symbols.clone()));
            prop_assert_eq!(reference_decode(&enc.states, &enc.words, &segments), Ok(symbols));
        }

        #[test]
        fn vector_and_scalar_paths_agree(segs in segment_strategy(), lane_log in 3u32..6,
                                         flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3)) {
            // Same stream through both paths, corrupted or not: the same symbols (garbage included), the same
            // verdict, the same word position.
            let lanes = 1usize << lane_log;
            let tables: Vec<Table> = segs.iter().map(|(c, _)| table(c)).collect();
            let segments: Vec<(usize, &Table)> = segs.iter().zip(&tables).map(|((_, s), t)| (s.len(), t)).collect();
            let symbols: Vec<u8> = segs.iter().flat_map(|(_, s)| s.iter().copied()).collect();
            let enc = encode(&symbols, &segments, lanes);
            let (sb, mut wb) = stream_bytes(&enc);
            flip_words(&mut wb, &flips);
            let run = |vector: bool| {
                simd::set_enabled(vector);
                let mut dec = Decoder::new(&sb, &wb, lanes).unwrap();
                let mut out = Vec::new();
                for &(n, t) in &segments {
                    let mut part = vec![0u8; n];
                    dec.decode(t, &mut part).unwrap();
                    out.extend_from_slice(&part);
                }
                simd::set_enabled(true);
                (out, dec.finish(), dec.pos, dec.states)
            };
            prop_assert_eq!(run(true), run(false));
        }

        #[test]
        fn wide_lockstep_matches_one_by_one(specs in proptest::collection::vec(stream_spec(), 1..20)) {
            // Any number of streams (several lock steps), any lane counts, shared or distinct tables, corrupted
            // or cut streams: `decode_lockstep_all` agrees with decoding each stream alone.
            thread_local! { static POOL: Vec<Table> = table_pool(); }
            POOL.with(|pool| wide_lockstep_agrees(&specs, pool));
        }

        #[test]
        fn corrupt_streams_never_panic(segs in segment_strategy(), lane_log in 0u32..6,
                                       flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4),
                                       cut in any::<usize>(), do_cut: bool) {
            let lanes = 1usize << lane_log;
            let tables: Vec<Table> = segs.iter().map(|(c, _)| table(c)).collect();
            let segments: Vec<(usize, &Table)> = segs.iter().zip(&tables).map(|((_, s), t)| (s.len(), t)).collect();
            let symbols: Vec<u8> = segs.iter().flat_map(|(_, s)| s.iter().copied()).collect();
            let enc = encode(&symbols, &segments, lanes);
            let (sb, mut wb) = stream_bytes(&enc);
            flip_words(&mut wb, &flips);
            if do_cut && !wb.is_empty() {
                wb.truncate((cut % wb.len()) & !1);
            }
            // Either an error or some symbols: the point is no panic and agreement with the reference on validity.
            let ours = Decoder::new(&sb, &wb, lanes).and_then(|mut dec| {
                let mut out = Vec::new();
                for &(n, t) in &segments {
                    let mut part = vec![0u8; n];
                    dec.decode(t, &mut part)?;
                    out.extend_from_slice(&part);
                }
                dec.finish().map(|_| out)
            });
            let words: Vec<u16> = wb.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]])).collect();
            let reference = reference_decode(&enc.states, &words, &segments);
            prop_assert_eq!(ours.ok(), reference.ok());
        }
    }
}
