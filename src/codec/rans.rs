//! rANS lanes (FORMAT.md §3.4): 12-bit tables, 32-bit states kept in `[2^16, 2^32)`, 16-bit words.
//!
//! A slice's symbols are coded by one or two **lanes**, each an independent single-state stream over a contiguous
//! run of them: lane 0 every code and the first literals, lane 1 the rest of the literals ([`lane_split`]). Lane 0
//! takes its words from the front of the slice's word stream and lane 1 from the back, so neither needs a word
//! count, and a decoder runs both at once: two GPU threads, or two chains interleaved in one CPU loop (the lock
//! steps below, which interleave the lanes of several slices the same way).
//!
//! A [`Decoder`] is one lane. It never branches on data to stay in bounds: its words carry one zero sentinel and
//! the read position is clamped to it, so a hostile stream simply decodes garbage until the final check
//! ([`finish_lanes`]: every lane back at `2^16`, the lanes' words adding up to the stream's) rejects it.

use crate::codec::context::{base_byte, decode_packed, CtxModel};
use crate::codec::tables::{Table, SCALE, SCALE_BITS};
use crate::error::DecodeError;

mod wide;

/// Lower bound of a normalised state, and the state every lane starts (encoder) and ends (decoder) at.
pub const STATE_LOW: u32 = 1 << 16;
/// The most lanes a slice may use: lane 0 reads the word stream from its front and lane 1 from its back, which is
/// what lets two lanes share one stream without a word count (FORMAT.md §3.4).
pub const MAX_LANES: usize = 2;

const SLOT_MASK: u32 = SCALE - 1;

/// Checks the header's `rans_lanes` and returns it as a `usize`.
pub fn check_lanes(lanes: u32) -> Result<usize, DecodeError> {
    match lanes {
        1 | 2 => Ok(lanes as usize),
        _ => Err(DecodeError::Invalid { what: "rans_lanes", detail: format!("{lanes} is neither 1 nor 2") }),
    }
}

/// How many literals a code symbol counts for in the lane split: a code costs a GPU thread about what ten literals
/// cost. H200, session 35 run 4, with lane 0's thread also parsing the tokens (full decode against weight 1): atha
/// general 0.808 -> 0.766 ms, fly x11 0.639 -> 0.592, atha genome 0.551 either way; weights 3 and 6 fell between.
/// Session 36 run 1, the tokens parsed after the parse: weights 1 / 3 against 10, general 0.652 / 0.649 against
/// 0.637 ms, fly 0.557 / 0.543 against 0.511 (the code steps themselves are dearer than literal steps). Session 37
/// run 6, with a cheaper code step (`k1_code_run`, ~90 -> ~32 instructions): weights 5 / 3 / 2 against 10, atha genome
/// 0.414 / 0.415 / 0.416 against 0.409 ms, general 0.559 / 0.574 / 0.585 against 0.584, fly 0.466 / 0.469 / 0.474
/// against 0.476 — no better on atha genome, so the format keeps 10.
pub const SPLIT_CODE_WEIGHT: usize = 10;

/// The split `s` of a slice's literals between its lanes (FORMAT.md §3.4): lane 0 codes the `ncodes` codes and
/// literals `[0, s)`, lane 1 literals `[s, nlit)`. Each code counts as [`SPLIT_CODE_WEIGHT`] literals, the rest
/// is halved, and `s` is rounded up to a multiple of 8 so that a GPU thread writes its lane's literals as aligned
/// 8-byte pieces; with one lane, `s = nlit`.
pub fn lane_split(ncodes: usize, nlit: usize, lanes: usize) -> usize {
    if lanes < 2 {
        return nlit;
    }
    nlit.min(8 * nlit.saturating_sub(SPLIT_CODE_WEIGHT * ncodes).div_ceil(16))
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
        st.dec.state = st.x;
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
    let mut x: [u32; N] = std::array::from_fn(|k| group[k].dec.state);
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
        st.dec.state = x[k];
        st.dec.pos = p[k];
        st.dec.next += round;
        st.ctx = ctx[k];
        st.out = &mut std::mem::take(&mut st.out)[round..];
    }
}

/// Fewest lanes a context round runs eight wide ([`contexts_round_wide`]); fewer run in the scalar lock step.
/// A block's eight lanes (four slices of two) start together and drop out as they end. atha_chr1 in genome mode,
/// whole-stream decode on one core (`acxbench decode`, best of 5, 2-core AMD EPYC): scalar lock steps of four
/// 0.106 s; eight wide from 5 lanes 0.077, from 3 0.077, from 1 0.081.
const WIDE_MIN_LANES: usize = 5;

/// Fewest lanes a wide round runs in two vectors. Their chains interleave: 1.26 ns a literal for sixteen lanes
/// against 1.51 in groups of eight (a lane-count sweep on this project's 2-core AMD EPYC, order-4 model), so
/// twelve lanes in two vectors beat eight in one and four in the scalar lock step.
const WIDE_TWO_VECTORS: usize = 12;

/// Fewest literals a wide round decodes (its words are copied first); a shorter round runs in the scalar lock
/// step.
const WIDE_MIN_SPAN: usize = 32;

#[cfg(test)]
thread_local! {
    /// Set by a test to run the scalar lock steps where the CPU has AVX2 too, so that both paths are checked.
    static SCALAR_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether context rounds may run wide: the CPU has AVX2 (and, in tests, the scalar path is not being checked).
fn wide_allowed() -> bool {
    #[cfg(test)]
    if SCALAR_ONLY.with(|c| c.get()) {
        return false;
    }
    wide::available()
}

/// What [`contexts_round_wide`] reuses from one round to the next.
#[derive(Default)]
struct WideScratch {
    words: wide::SpanWords,
    history: Vec<u32>,
}

/// One round of up to sixteen context streams that share one model, in one or two vectors of eight (module
/// [`wide`]): each advances by the shortest one's remaining length, but no further than any of them has words for
/// (a lane takes at most one a literal), so the span needs no checks. Returns false, having done nothing, when that span is shorter than
/// [`WIDE_MIN_SPAN`] or the streams do not share a model: the scalar lock step then takes the round.
fn contexts_round_wide(group: &mut [CtxStream], scratch: &mut WideScratch) -> bool {
    let Some(first) = group.first() else { return false };
    let model = first.model;
    if !wide_allowed() || group.len() > wide::MAX_LANES || !group.iter().all(|s| std::ptr::eq(s.model, model)) {
        return false;
    }
    let round = group.iter().map(|s| s.out.len()).min().unwrap_or(0);
    let words_left = group.iter().map(|s| s.dec.nwords.saturating_sub(s.dec.pos)).min().unwrap_or(0);
    let n = round.min(words_left);
    if n < WIDE_MIN_SPAN {
        return false;
    }
    let from_pos: Vec<&[u16]> = group.iter().map(|s| &s.dec.words[s.dec.pos.min(s.dec.words.len())..]).collect();
    scratch.words.fill(&from_pos, n);
    scratch.history.clear();
    scratch.history.resize(wide::history_len(n), 0);
    let mut lanes = wide::Lanes {
        x: std::array::from_fn(|k| group.get(k).map_or(STATE_LOW, |s| s.dec.state)),
        ctx: std::array::from_fn(|k| group.get(k).map_or(0, |s| s.ctx)),
        taken: [0; wide::MAX_LANES],
    };
    let vectors = group.len().div_ceil(wide::WIDTH);
    if !wide::decode(model.packed(), model.mask(), vectors, &mut lanes, &scratch.words, n, &mut scratch.history) {
        return false;
    }
    for (k, st) in group.iter_mut().enumerate() {
        let (now, rest) = std::mem::take(&mut st.out).split_at_mut(n);
        wide::unpack(&scratch.history, k, now);
        st.out = rest;
        st.dec.state = lanes.x[k];
        st.dec.pos += lanes.taken[k] as usize;
        st.dec.next += n;
        st.ctx = lanes.ctx[k];
    }
    true
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

/// The encoder's output: the final states (lane 0 first) and the word stream as stored: lane 0's words in the
/// order its decoder takes them, then lane 1's in reverse (its decoder takes them from the back).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Encoded {
    pub states: Vec<u32>,
    pub words: Vec<u16>,
}

/// Encodes `symbols` as one lane. `segments` lists `(count, table)` in symbol order: the first `count` symbols use
/// the first table, and so on (FORMAT.md §3.1); the counts must sum to `symbols.len()`.
///
/// # Panics
/// As [`encode_lanes`].
pub fn encode(symbols: &[u8], segments: &[(usize, &Table)]) -> Encoded {
    encode_lanes(symbols, segments, None, &[0])
}

/// Encodes `symbols` with one lane per entry of `starts` (`starts[0] = 0`, non-decreasing, at most [`MAX_LANES`]):
/// lane `l` codes symbols `[starts[l], starts[l + 1])`, the last lane up to the end (FORMAT.md §3.4). `segments`
/// give the tables as in [`encode`]; when `tail` is `Some((model, contexts))`, the last `contexts.len()` symbols
/// are base codes (0..4) coded with `model` in the given contexts (FORMAT.md §3.5) and `segments` cover the
/// symbols before them.
///
/// # Panics
/// When `starts` is not a valid lane layout, the segments do not cover the symbols, a symbol has frequency 0 in
/// its table, or a base code is 4 or more: all bugs in the caller (the packer builds its tables from the same
/// symbols).
pub fn encode_lanes(
    symbols: &[u8],
    segments: &[(usize, &Table)],
    tail: Option<(&CtxModel, &[u32])>,
    starts: &[usize],
) -> Encoded {
    let valid = starts.first() == Some(&0)
        && starts.len() <= MAX_LANES
        && starts.windows(2).all(|w| w[0] <= w[1])
        && starts.last().is_some_and(|&s| s <= symbols.len());
    assert!(valid, "invalid rANS lane starts {starts:?} for {} symbols", symbols.len());
    let tail_len = tail.map_or(0, |(_, c)| c.len());
    let covered: usize = segments.iter().map(|&(n, _)| n).sum::<usize>() + tail_len;
    assert_eq!(covered, symbols.len(), "rANS segments cover {covered} symbols, have {}", symbols.len());

    let mut states = Vec::with_capacity(starts.len());
    // Each symbol emits at most one word; most emit none.
    let mut words: Vec<u16> = Vec::with_capacity(symbols.len() / 2 + starts.len());
    for (lane, &start) in starts.iter().enumerate() {
        let end = starts.get(lane + 1).copied().unwrap_or(symbols.len());
        let mark = words.len();
        states.push(encode_lane(symbols, segments, tail, start..end, &mut words));
        // A lane emits its words last first. Lane 0's decoder takes them from the front, so they are reversed;
        // lane 1's takes them from the back, so they stay as emitted.
        if lane == 0 {
            words[mark..].reverse();
        }
    }
    Encoded { states, words }
}

/// Codes the symbols of `range` (one lane) from the last to the first, pushing the words it emits onto `words`;
/// returns the lane's final state. The state lives in a local: in a vector indexed by lane it went through
/// memory from one symbol to the next, a store and a load on the chain that bounds the encoder.
fn encode_lane(
    symbols: &[u8],
    segments: &[(usize, &Table)],
    tail: Option<(&CtxModel, &[u32])>,
    range: std::ops::Range<usize>,
    words: &mut Vec<u16>,
) -> u32 {
    let mut x = STATE_LOW;
    let mut put = |i: usize, f: u32, c: u32| {
        assert!(f != 0, "rANS encode: symbol {} (index {i}) has frequency 0 in its table", symbols[i]);
        // In u64: for f = 4096 the bound is 2^32, which no state reaches (a certain symbol costs nothing).
        if x as u64 >= (f as u64) << (32 - SCALE_BITS) {
            words.push(x as u16);
            x >>= 16;
        }
        x = ((x / f) << SCALE_BITS) + (x % f) + c;
    };
    // The part of symbols [start, end) that lies in the lane, last first.
    let within = |start: usize, end: usize| (start.max(range.start)..end.min(range.end)).rev();
    let mut end = symbols.len();
    if let Some((model, contexts)) = tail {
        let start = end - contexts.len();
        for i in within(start, end) {
            let s = symbols[i] as u32;
            assert!(s < 4, "rANS encode: base code {s} (index {i})");
            let (f, c) = model.freq_cum(contexts[i - start], s);
            put(i, f, c);
        }
        end = start;
    }
    for &(count, table) in segments.iter().rev() {
        let start = end - count;
        for i in within(start, end) {
            let s = symbols[i] as usize;
            put(i, table.freq_of(s), table.cum.get(s).map_or(0, |&c| c as u32));
        }
        end = start;
    }
    x
}

/// Streaming decoder of one lane of a slice's rANS stream (FORMAT.md §3.4). Feed it the lane's segments in order
/// with [`Decoder::decode`] or [`Decoder::decode_contexts`], then check the slice's lanes with [`finish_lanes`].
#[derive(Debug, Clone)]
pub struct Decoder {
    state: u32,
    /// The lane's words in the order it takes them (lane 1's reversed from the stream), then one zero sentinel;
    /// reads past the end land on it (see the module notes).
    words: Vec<u16>,
    nwords: usize,
    pos: usize,
    /// Symbols decoded so far.
    next: usize,
}

impl Default for Decoder {
    /// A decoder with no stream yet (see [`Decoder::reset`]).
    fn default() -> Self {
        Decoder { state: STATE_LOW, words: vec![0], nwords: 0, pos: 0, next: 0 }
    }
}

impl Decoder {
    /// A lane whose final encoder state is the little-endian `u32` in `state_bytes`, over the little-endian word
    /// stream `word_bytes`, taking its words from the back when `from_back` (lane 1). A state below `2^16` cannot
    /// come from an encoder and is refused.
    pub fn new(state_bytes: &[u8], word_bytes: &[u8], from_back: bool) -> Result<Decoder, DecodeError> {
        let mut decoder = Decoder::default();
        decoder.reset(state_bytes, word_bytes, from_back)?;
        Ok(decoder)
    }

    /// Starts over on another lane (see [`Decoder::new`]), reusing the word buffer: a decoder that works through
    /// many small slices keeps one.
    pub fn reset(&mut self, state_bytes: &[u8], word_bytes: &[u8], from_back: bool) -> Result<(), DecodeError> {
        let (Ok(state), true) = (<[u8; 4]>::try_from(state_bytes), word_bytes.len() % 2 == 0) else {
            return Err(DecodeError::Rans {
                detail: format!("{} state bytes for one lane, {} word bytes", state_bytes.len(), word_bytes.len()),
            });
        };
        let state = u32::from_le_bytes(state);
        if state < STATE_LOW {
            let lane = u8::from(from_back);
            return Err(DecodeError::Rans { detail: format!("lane {lane} starts at state {state:#x} < 2^16") });
        }
        let nwords = word_bytes.len() / 2;
        self.words.clear();
        self.words.reserve(nwords + 1);
        let words = word_bytes.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]]));
        if from_back {
            self.words.extend(words.rev());
        } else {
            self.words.extend(words);
        }
        self.words.push(0);
        self.state = state;
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
        let n = out.len();
        // One stream through the lock step's round: its unchecked spans and clamped tail.
        with_lookup(table, |lookup| {
            let mut cur = [RoundStream { out, lookup, words: &self.words[..=self.nwords] }];
            let (mut x, mut p) = ([self.state], [self.pos]);
            lockstep_round(&mut cur, &mut x, &mut p, n);
            (self.state, self.pos) = (x[0], p[0]);
        });
        self.next += n;
        Ok(())
    }

    /// Decodes several lanes in lock step: lane `j` is `decoders[j]`, decoding the four segments `outs[j]` with the
    /// tables `tables[j]` (LL, ML, OF, LIT). Lanes advance one symbol each per round, in groups of [`MAX_LOCKSTEP`]
    /// consecutive lanes, so that their dependency chains (lookup, multiply, refill) overlap instead of running one
    /// after another. The result is exactly what [`Decoder::decode`] on each lane in turn gives; lanes already
    /// part-way through their symbols are decoded one by one. On error returns the index of the lane at fault
    /// (lanes before its group are decoded, the rest are not).
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

    /// One lock step of up to [`MAX_LOCKSTEP`] lanes (more are split by `run_lockstep`), after the checks; errors
    /// name the lane within the group.
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
        // Lanes already started go one by one, through `decode`.
        let mut fresh = Vec::with_capacity(decoders.len());
        for (s, ((dec, segs), set)) in decoders.into_iter().zip(outs).zip(tables).enumerate() {
            if dec.next != 0 {
                for (seg, table) in segs.into_iter().zip(set) {
                    dec.decode(table, seg).map_err(|e| (s, e))?;
                }
            } else {
                fresh.push((dec, segs, set));
            }
        }
        // The distinct tables (lanes of one group share theirs), and which one each segment uses.
        let mut distinct: Vec<&Table> = Vec::with_capacity(16);
        let which: Vec<[usize; 4]> = fresh
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
            let streams = fresh
                .into_iter()
                .zip(&which)
                .map(|((dec, segs, _), which)| {
                    dec.next = segs.iter().map(|s| s.len()).sum();
                    Lockstep { x: dec.state, pos: dec.pos, segs, seg: 0, lookups: which.map(|i| lookups[i]), dec }
                })
                .collect();
            run_lockstep(streams);
        });
        Ok(())
    }

    /// Decodes `out.len()` literals coded with a context model (FORMAT.md §3.5) into `out` as bytes A, C, G, T:
    /// the lane's literals (or its first ones), which start at the next symbol, their context at 0.
    pub fn decode_contexts(&mut self, model: &CtxModel, out: &mut [u8]) {
        Decoder::decode_contexts_all(vec![(self, model, out)]);
    }

    /// [`Decoder::decode_contexts`] for several lanes at once: a context decode is one dependency chain per lane
    /// (slot, three compares, multiply, refill, next context), and interleaving independent lanes overlaps them.
    /// Lanes that share a model go eight or sixteen at a time in AVX2 vectors where the CPU has it (module `wide`:
    /// atha_chr1 in genome mode decodes in 28 % less time on one core), the rest in scalar lock steps of up to
    /// [`MAX_LOCKSTEP`]; the bytes are the same either way.
    pub fn decode_contexts_all(streams: Vec<(&mut Decoder, &CtxModel, &mut [u8])>) {
        let mut lanes: Vec<CtxStream> =
            streams.into_iter().map(|(dec, model, out)| CtxStream { dec, model, out, ctx: 0 }).collect();
        // Lanes of one model side by side, so that a cold read's slices from several packing chunks (a model each)
        // still fill the wide rounds, which need one model; the lanes are independent, so their order is free.
        lanes.sort_by_key(|s| std::ptr::from_ref(s.model) as usize);
        let mut wide = WideScratch::default();
        loop {
            lanes.retain(|s| !s.out.is_empty());
            let group = match lanes.len() {
                n if n >= WIDE_TWO_VECTORS => n.min(wide::MAX_LANES),
                n => n.min(wide::WIDTH),
            };
            if group >= WIDE_MIN_LANES && contexts_round_wide(&mut lanes[..group], &mut wide) {
                continue;
            }
            match lanes.len() {
                0 => break,
                1 => contexts_round::<1>(&mut lanes[..1]),
                2 => contexts_round::<2>(&mut lanes[..2]),
                3 => contexts_round::<3>(&mut lanes[..3]),
                _ => contexts_round::<4>(&mut lanes[..4]),
            }
        }
    }

    /// Checks the end of a one-lane stream (see [`finish_lanes`]).
    pub fn finish(&self) -> Result<(), DecodeError> {
        finish_lanes(std::slice::from_ref(self))
    }

    /// Number of symbols decoded so far.
    pub fn symbols_decoded(&self) -> usize {
        self.next
    }
}

/// Checks the end of a slice's stream, given its lanes after their last symbols (all over the same word stream):
/// every lane back at `2^16`, and the words they took adding up to exactly the stream's (so none read past its
/// end, and together they took every word once).
pub fn finish_lanes(lanes: &[Decoder]) -> Result<(), DecodeError> {
    let nwords = lanes.first().map_or(0, |d| d.nwords);
    let taken: usize = lanes.iter().map(|d| d.pos).sum();
    if taken != nwords {
        let symbols: usize = lanes.iter().map(|d| d.next).sum();
        return Err(DecodeError::Rans {
            detail: format!("{taken} of {nwords} words consumed by {} lane(s) after {symbols} symbols", lanes.len()),
        });
    }
    if let Some(lane) = lanes.iter().position(|d| d.state != STATE_LOW) {
        return Err(DecodeError::Rans {
            detail: format!("lane {lane} ends at state {:#x}, expected 0x10000", lanes[lane].state),
        });
    }
    Ok(())
}

/// Decodes a whole stream as [`encode_lanes`] coded it: lane `l` (a [`Decoder`] on its state in `state_bytes`,
/// `4·starts.len()` bytes) decodes symbols `[starts[l], starts[l + 1])` with the tables `segments` give them,
/// then [`finish_lanes`] checks the end. The symbols in order, or the first error (hostile input included).
pub fn decode_lanes(
    state_bytes: &[u8],
    word_bytes: &[u8],
    segments: &[(usize, &Table)],
    starts: &[usize],
) -> Result<Vec<u8>, DecodeError> {
    let total: usize = segments.iter().map(|s| s.0).sum();
    let mut lanes = Vec::with_capacity(starts.len());
    let mut out = Vec::with_capacity(total);
    for (lane, &start) in starts.iter().enumerate() {
        let end = starts.get(lane + 1).copied().unwrap_or(total);
        let state = state_bytes.get(4 * lane..4 * lane + 4).ok_or_else(|| DecodeError::Rans {
            detail: format!("{} state bytes for {} lanes", state_bytes.len(), starts.len()),
        })?;
        let mut dec = Decoder::new(state, word_bytes, lane == 1)?;
        out.extend(decode_lane(&mut dec, segments, start, end)?);
        lanes.push(dec);
    }
    finish_lanes(&lanes)?;
    Ok(out)
}

/// Symbols `[start, end)` with one lane's decoder, segment by segment (see [`decode_lanes`]).
fn decode_lane(
    dec: &mut Decoder,
    segments: &[(usize, &Table)],
    start: usize,
    end: usize,
) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(end.saturating_sub(start));
    let mut at = 0;
    for &(n, t) in segments {
        let (a, b) = (at.max(start), (at + n).min(end));
        if a < b {
            let mut part = vec![0u8; b - a];
            dec.decode(t, &mut part)?;
            out.extend_from_slice(&part);
        }
        at += n;
    }
    Ok(out)
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

    /// The table of symbol `i`.
    fn table_of<'t>(segments: &[(usize, &'t Table)], i: usize) -> &'t Table {
        let mut end = 0;
        for &(n, t) in segments {
            end += n;
            if i < end {
                return t;
            }
        }
        unreachable!("symbol {i} past the segments")
    }

    /// A literal transcription of FORMAT.md §3.4: each lane decodes its run of symbols on its own, lane 0 taking
    /// words from the front, lane 1 from the back; at the end every lane is at 2^16 and the lanes took every word.
    fn reference_decode(
        states: &[u32],
        words: &[u16],
        segments: &[(usize, &Table)],
        starts: &[usize],
    ) -> Result<Vec<u8>, &'static str> {
        let total: usize = segments.iter().map(|s| s.0).sum();
        let mut out = vec![0u8; total];
        let mut taken = 0;
        for (lane, &start) in starts.iter().enumerate() {
            let end = starts.get(lane + 1).copied().unwrap_or(total);
            let mut x = states[lane];
            let mut k = 0;
            for (i, o) in out.iter_mut().enumerate().take(end).skip(start) {
                let t = table_of(segments, i);
                let slot = x & 4095;
                let s = (0..t.freq.len())
                    .find(|&s| (t.cum[s] as u32) <= slot && slot < t.cum[s] as u32 + t.freq[s] as u32)
                    .ok_or("no symbol")?;
                *o = s as u8;
                x = t.freq[s] as u32 * (x >> 12) + slot - t.cum[s] as u32;
                if x < 1 << 16 {
                    let at = if lane == 0 { Some(k) } else { words.len().checked_sub(1 + k) };
                    let w = *at.and_then(|a| words.get(a)).ok_or("out of words")?;
                    x = (x << 16) | w as u32;
                    k += 1;
                }
            }
            if x != 1 << 16 {
                return Err("bad end state");
            }
            taken += k;
        }
        if taken != words.len() {
            return Err("words left over or shared");
        }
        Ok(out)
    }

    fn decode_all(enc: &Encoded, segments: &[(usize, &Table)], starts: &[usize]) -> Result<Vec<u8>, DecodeError> {
        let (sb, wb) = stream_bytes(enc);
        decode_lanes(&sb, &wb, segments, starts)
    }

    #[test]
    fn empty_stream() {
        let t = table(&[1, 1]);
        for starts in [&[0][..], &[0, 0]] {
            let enc = encode_lanes(&[], &[(0, &t)], None, starts);
            assert_eq!(enc.states, vec![STATE_LOW; starts.len()]);
            assert!(enc.words.is_empty());
            assert_eq!(decode_all(&enc, &[(0, &t)], starts), Ok(vec![]));
        }
    }

    #[test]
    fn single_symbol_table_costs_nothing() {
        let t = table(&[0, 0, 5]);
        let symbols = vec![2u8; 10_000];
        let starts = [0, 4_000];
        let enc = encode_lanes(&symbols, &[(symbols.len(), &t)], None, &starts);
        assert!(enc.words.is_empty());
        assert_eq!(decode_all(&enc, &[(symbols.len(), &t)], &starts), Ok(symbols));
    }

    #[test]
    fn lanes_are_validated() {
        for bad in [0u32, 3, 4, 32, u32::MAX] {
            assert!(check_lanes(bad).is_err());
        }
        assert!(check_lanes(1).is_ok() && check_lanes(2).is_ok());
        assert!(Decoder::new(&[0; 8], &[], false).is_err());
        assert!(Decoder::new(&[0, 0, 1, 0], &[0], true).is_err());
        assert!(Decoder::new(&[0, 0, 1, 0], &[], true).is_ok());
        // A state below 2^16 cannot come from an encoder.
        assert!(matches!(Decoder::new(&[0xff, 0xff, 0, 0], &[], false), Err(DecodeError::Rans { .. })));
    }

    #[test]
    fn lane_split_follows_the_format() {
        // K = 1: everything on lane 0.
        assert_eq!(lane_split(61, 3600, 1), 3600);
        // Half of what ten literals a code leave, rounded up to 8: lane 0 61 codes and 1496 literals, lane 1
        // 2104 literals.
        assert_eq!(lane_split(61, 3600, 2), 1496);
        // Codes worth more than the literals: lane 1 takes every literal.
        assert_eq!(lane_split(901, 3000, 2), 0);
        assert_eq!(lane_split(61, 610, 2), 0);
        assert_eq!(lane_split(61, 611, 2), 8);
        assert_eq!(lane_split(1, 3, 2), 0);
        assert_eq!(lane_split(1, 0, 2), 0);
        assert_eq!(lane_split(1, 11, 2), 8);
        for (c, n) in [(1usize, 0usize), (1, 17), (7, 4096), (100, 50), (3001, 4096)] {
            let s = lane_split(c, n, 2);
            assert!(s <= n && (s % 8 == 0 || s == n), "{c} {n} -> {s}");
        }
    }

    #[test]
    #[should_panic(expected = "invalid rANS lane starts")]
    fn three_lanes_are_refused_by_the_encoder() {
        let t = table(&[1, 1]);
        encode_lanes(&[0, 1, 0], &[(3, &t)], None, &[0, 1, 2]);
    }

    #[test]
    fn unused_table_is_corruption() {
        let mut dec = Decoder::new(&[0, 0, 1, 0], &[], false).unwrap();
        assert!(dec.decode(&Table::default(), &mut []).is_ok());
        assert!(matches!(dec.decode(&Table::default(), &mut [0]), Err(DecodeError::Rans { .. })));
    }

    #[test]
    fn known_vector() {
        // Hand-checkable: two symbols of frequency 2048 each encode one bit per symbol.
        let t = table(&[1, 1]);
        let symbols = [1u8, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1];
        let enc = encode(&symbols, &[(symbols.len(), &t)]);
        // 17 bits: 65536 · 2^17 overflows once, so exactly one word comes out.
        assert_eq!(enc.words.len(), 1);
        assert_eq!(reference_decode(&enc.states, &enc.words, &[(symbols.len(), &t)], &[0]), Ok(symbols.to_vec()));
    }

    #[test]
    fn two_lanes_share_the_stream_from_both_ends() {
        // 40 one-bit symbols a lane: lane 0's words come first in the stream, lane 1's after them, reversed.
        let t = table(&[1, 1]);
        let symbols: Vec<u8> = (0..80).map(|i| (i * 7 % 3 == 0) as u8).collect();
        let one = |range: std::ops::Range<usize>| encode(&symbols[range.clone()], &[(range.len(), &t)]);
        let (a, b) = (one(0..40), one(40..80));
        let both = encode_lanes(&symbols, &[(80, &t)], None, &[0, 40]);
        assert_eq!(both.states, vec![a.states[0], b.states[0]]);
        let stored: Vec<u16> = a.words.iter().chain(b.words.iter().rev()).copied().collect();
        assert_eq!(both.words, stored);
        assert_eq!(decode_all(&both, &[(80, &t)], &[0, 40]), Ok(symbols.clone()));
        // The wrong split, or both lanes from the front, is caught by the end checks.
        assert!(decode_all(&both, &[(80, &t)], &[0, 48]).is_err());
        let (sb, wb) = stream_bytes(&both);
        let mut l1 = Decoder::new(&sb[4..], &wb, false).unwrap();
        let got = decode_lane(&mut l1, &[(80, &t)], 40, 80).unwrap();
        let mut l0 = Decoder::new(&sb[..4], &wb, false).unwrap();
        decode_lane(&mut l0, &[(80, &t)], 0, 40).unwrap();
        assert!(got != symbols[40..] || finish_lanes(&[l0, l1]).is_err());
    }

    #[test]
    fn lookup_cache_evicts_and_notices_changed_tables() {
        // More tables than cache slots, decoded round-robin, then one table changed in place.
        let mut tables: Vec<Table> =
            (0..LOOKUP_CACHE_SLOTS as u64 + 5).map(|i| table(&[1, i + 1, 3 * i + 2])).collect();
        let symbols: Vec<u8> = (0..500).map(|i| (i % 3) as u8).collect();
        let starts = [0, 200];
        for round in 0..3 {
            for t in &tables {
                let enc = encode_lanes(&symbols, &[(symbols.len(), t)], None, &starts);
                assert_eq!(decode_all(&enc, &[(symbols.len(), t)], &starts), Ok(symbols.clone()), "round {round}");
            }
        }
        tables[0] = table(&[5, 1, 1]);
        let enc = encode_lanes(&symbols, &[(symbols.len(), &tables[0])], None, &starts);
        assert_eq!(decode_all(&enc, &[(symbols.len(), &tables[0])], &starts), Ok(symbols.clone()));
        let changed = &mut tables[1];
        *changed = table(&[1, 1, 9]);
        let enc = encode_lanes(&symbols, &[(symbols.len(), &tables[1])], None, &starts);
        assert_eq!(decode_all(&enc, &[(symbols.len(), &tables[1])], &starts), Ok(symbols));
    }

    #[test]
    fn long_two_lane_streams() {
        // Long enough for many unchecked spans, in both a high- and a low-entropy table, split anywhere.
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
            for starts in [&[0][..], &[0, 0], &[0, 5_000], &[0, 10_008], &[0, 20_000]] {
                let enc = encode_lanes(&symbols, &segments, None, starts);
                assert_eq!(decode_all(&enc, &segments, starts), Ok(symbols.clone()), "{starts:?}");
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
            let enc = encode(&symbols, &segments);
            let (sb, mut wb) = stream_bytes(&enc);
            for &(at, x) in flips {
                if !wb.is_empty() {
                    let n = wb.len();
                    wb[(at + s) % n] ^= x;
                }
            }
            streams.push((sb, wb, *splits));
        }
        let mut decs: Vec<Decoder> = streams.iter().map(|(sb, wb, _)| Decoder::new(sb, wb, false).unwrap()).collect();
        let mut bufs: Vec<[Vec<u8>; 4]> = streams.iter().map(|(_, _, sp)| sp.map(|n| vec![0u8; n])).collect();
        {
            let outs = bufs.iter_mut().map(|b| b.each_mut().map(|v| &mut v[..])).collect();
            Decoder::decode_lockstep_all(&mut decs, outs, &[tables; 4]).unwrap();
        }
        for ((sb, wb, splits), (dec, buf)) in streams.iter().zip(decs.iter().zip(&bufs)) {
            let mut alone = Decoder::new(sb, wb, false).unwrap();
            for (k, &n) in splits.iter().enumerate() {
                let mut part = vec![0u8; n];
                alone.decode(tables[k], &mut part).unwrap();
                assert_eq!(part, buf[k]);
            }
            assert_eq!((alone.pos, alone.state, alone.next), (dec.pos, dec.state, dec.next));
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
        let mut d = Decoder::new(&[0, 0, 1, 0], &[], false).unwrap();
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

    /// One stream of a wide lock-step test: whether it is coded as lane 1 (read from the back), its four
    /// segments' (length, pool table) and corruption (word-byte flips, a cut of the word stream).
    type StreamSpec = (bool, [(usize, usize); 4], Vec<(usize, u8)>, Option<usize>);

    fn stream_spec() -> impl Strategy<Value = StreamSpec> {
        let seg = (prop_oneof![0usize..4, 0usize..300, 1000usize..3000], 0usize..LOOKUP_CACHE_SLOTS + 8);
        (
            any::<bool>(),
            [seg.clone(), seg.clone(), seg.clone(), seg],
            proptest::collection::vec((any::<usize>(), 1u8..=255), 0..2),
            proptest::option::weighted(0.15, any::<usize>()),
        )
    }

    /// Encodes each spec's stream (symbols cycling through each table's alphabet; as lane 1 of a stream whose
    /// lane 0 is empty, when asked), corrupts it as asked, then decodes all streams with `decode_lockstep_all`
    /// and each alone with `decode`: the same symbols (garbage included), positions, states, symbol counts and
    /// verdicts.
    fn wide_lockstep_agrees(specs: &[StreamSpec], pool: &[Table]) {
        let mut streams = Vec::new();
        for (s, (back, segs, flips, cut)) in specs.iter().enumerate() {
            let symbols: Vec<u8> = segs
                .iter()
                .flat_map(|&(n, t)| (0..n).map(move |i| ((i * 7 + s + i / 5) % pool[t].nsym()) as u8))
                .collect();
            let segments: Vec<(usize, &Table)> = segs.iter().map(|&(n, t)| (n, &pool[t])).collect();
            let enc = encode_lanes(&symbols, &segments, None, if *back { &[0, 0] } else { &[0] });
            let (sb, mut wb) = stream_bytes(&enc);
            flip_words(&mut wb, flips);
            if let (Some(cut), false) = (cut, wb.is_empty()) {
                wb.truncate((cut % wb.len()) & !1);
            }
            // Lane 1's state (lane 0 codes nothing).
            streams.push((sb[sb.len() - 4..].to_vec(), wb, *back));
        }
        let mut decs: Vec<Decoder> =
            streams.iter().map(|(sb, wb, back)| Decoder::new(sb, wb, *back).unwrap()).collect();
        let mut bufs: Vec<[Vec<u8>; 4]> = specs.iter().map(|sp| sp.1.map(|(n, _)| vec![0u8; n])).collect();
        let sets: Vec<[&Table; 4]> = specs.iter().map(|sp| sp.1.map(|(_, t)| &pool[t])).collect();
        let outs: Vec<[&mut [u8]; 4]> = bufs.iter_mut().map(|b| b.each_mut().map(|v| &mut v[..])).collect();
        Decoder::decode_lockstep_all(&mut decs, outs, &sets).unwrap();
        for (s, ((sb, wb, back), (dec, buf))) in streams.iter().zip(decs.iter().zip(&bufs)).enumerate() {
            let mut alone = Decoder::new(sb, wb, *back).unwrap();
            for (k, &(n, t)) in specs[s].1.iter().enumerate() {
                let mut part = vec![0u8; n];
                alone.decode(&pool[t], &mut part).unwrap();
                assert_eq!(part, buf[k], "stream {s} segment {k}");
            }
            assert_eq!((alone.pos, alone.state, alone.next), (dec.pos, dec.state, dec.next), "stream {s}");
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
        // streams with 32+ distinct tables per group; then a group with back-reading lanes mixed in.
        let shared: Vec<StreamSpec> =
            (0..9).map(|s| (false, [(3, 0), (2, 1), (2, 2), (2000 + 40 * s, 3)], vec![], None)).collect();
        wide_lockstep_agrees(&shared, &pool);
        let distinct: Vec<StreamSpec> = (0..20)
            .map(|s| {
                (
                    false,
                    [(50 + s, 4 * s % 40), (60, (4 * s + 1) % 40), (7, (4 * s + 2) % 40), (900, (4 * s + 3) % 40)],
                    vec![],
                    None,
                )
            })
            .collect();
        wide_lockstep_agrees(&distinct, &pool);
        let mixed: Vec<StreamSpec> = (0..8)
            .map(|s| (s % 3 == 1, [(10, 5), (0, 6), (20, 7), (1500, 8)], vec![], if s == 5 { Some(7) } else { None }))
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
            streams.push((stream_bytes(&encode(&symbols, &segments)), splits, symbols));
        }
        let mut decs: Vec<Decoder> =
            streams.iter().map(|((sb, wb), _, _)| Decoder::new(sb, wb, false).unwrap()).collect();
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

    /// The lane starts for `lanes` lanes with lane 1 at `split` (mod the symbol count + 1).
    fn starts_of(lanes: bool, split: usize, total: usize) -> Vec<usize> {
        if lanes {
            vec![0, split % (total + 1)]
        } else {
            vec![0]
        }
    }

    /// One context-coded stream of a lock-step test: its model (an index into the test's models), state, words,
    /// whether it reads them from the back, and how many literals it decodes.
    type CtxSpec = (usize, u32, Vec<u16>, bool, usize);

    fn ctx_spec() -> impl Strategy<Value = CtxSpec> {
        (
            prop_oneof![4 => Just(0usize), 1 => 0usize..3],
            prop_oneof![Just(STATE_LOW), STATE_LOW..=u32::MAX],
            proptest::collection::vec(any::<u16>(), 0..400),
            any::<bool>(),
            prop_oneof![0usize..40, 0usize..700, 1500usize..2200],
        )
    }

    /// A model of order `order` with counts from `seed` (some bases never seen: frequency-0 codes too).
    fn ctx_model(order: u8, seed: u64) -> CtxModel {
        let mut x = seed | 1;
        let counts: Vec<[u64; 4]> = (0..1usize << (2 * order))
            .map(|_| {
                std::array::from_fn(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    if x % 5 == 0 {
                        0
                    } else {
                        x % 1000
                    }
                })
            })
            .collect();
        CtxModel::from_counts(order, &counts)
    }

    /// A lane's context-coded literals, one at a time by the format's rule (FORMAT.md §3.4–3.5), with the word
    /// position clamped to the sentinel as [`Decoder`] does: the reference for the lock steps.
    fn ctx_reference(model: &CtxModel, state: u32, words: &[u16], n: usize) -> (Vec<u8>, u32, usize) {
        let (mut x, mut pos, mut ctx) = (state, 0usize, 0u32);
        let out = (0..n)
            .map(|_| {
                let slot = x & SLOT_MASK;
                let (s, f, c) = model.decode_slot(ctx, slot);
                let y = f.wrapping_mul(x >> SCALE_BITS).wrapping_add(slot).wrapping_sub(c);
                x = if y < STATE_LOW {
                    pos += 1;
                    (y << 16) | u32::from(words.get(pos - 1).copied().unwrap_or(0))
                } else {
                    y
                };
                ctx = (ctx << 2) | s;
                base_byte(s)
            })
            .collect();
        (out, x, pos)
    }

    proptest! {
        #[test]
        fn context_lanes_match_one_by_one(specs in proptest::collection::vec(ctx_spec(), 1..20),
                                          order in 1u8..=8, seed in any::<u64>()) {
            // Any number of context-coded streams (the wide rounds, the scalar lock steps and their mix as streams
            // end), hostile states, words that run out: `decode_contexts_all` agrees with the format's rule run one
            // literal at a time.
            let models = [ctx_model(order, seed), ctx_model(order, seed ^ 0x5555), ctx_model(1 + order % 8, !seed)];
            let word_bytes: Vec<Vec<u8>> =
                specs.iter().map(|sp| sp.2.iter().flat_map(|w| w.to_le_bytes()).collect()).collect();
            // Both paths where the CPU has AVX2 (the wide rounds, then the scalar lock steps alone).
            for scalar_only in [false, true] {
                let mut decs: Vec<Decoder> = specs
                    .iter()
                    .zip(&word_bytes)
                    .map(|(sp, wb)| Decoder::new(&sp.1.to_le_bytes(), wb, sp.3).unwrap())
                    .collect();
                let mut outs: Vec<Vec<u8>> = specs.iter().map(|sp| vec![0u8; sp.4]).collect();
                let streams = decs
                    .iter_mut()
                    .zip(&mut outs)
                    .zip(&specs)
                    .map(|((d, o), sp)| (d, &models[sp.0], &mut o[..]))
                    .collect();
                SCALAR_ONLY.with(|c| c.set(scalar_only));
                Decoder::decode_contexts_all(streams);
                SCALAR_ONLY.with(|c| c.set(false));
                for (k, (sp, (dec, out))) in specs.iter().zip(decs.iter().zip(&outs)).enumerate() {
                    let words: Vec<u16> = if sp.3 { sp.2.iter().rev().copied().collect() } else { sp.2.clone() };
                    let (want, state, pos) = ctx_reference(&models[sp.0], sp.1, &words, sp.4);
                    prop_assert_eq!(out, &want, "stream {} (scalar only: {})", k, scalar_only);
                    prop_assert_eq!((dec.state, dec.pos, dec.next), (state, pos, sp.4), "stream {}", k);
                }
            }
        }

        #[test]
        fn round_trip_matches_reference(segs in segment_strategy(), two: bool, split in any::<usize>()) {
            let tables: Vec<Table> = segs.iter().map(|(c, _)| table(c)).collect();
            let segments: Vec<(usize, &Table)> = segs.iter().zip(&tables).map(|((_, s), t)| (s.len(), t)).collect();
            let symbols: Vec<u8> = segs.iter().flat_map(|(_, s)| s.iter().copied()).collect();
            let starts = starts_of(two, split, symbols.len());
            let enc = encode_lanes(&symbols, &segments, None, &starts);
            prop_assert_eq!(enc.states.len(), starts.len());
            prop_assert_eq!(decode_all(&enc, &segments, &starts), Ok(symbols.clone()));
            prop_assert_eq!(reference_decode(&enc.states, &enc.words, &segments, &starts), Ok(symbols));
        }

        #[test]
        fn wide_lockstep_matches_one_by_one(specs in proptest::collection::vec(stream_spec(), 1..20)) {
            // Any number of streams (several lock steps), lanes read from either end, shared or distinct tables,
            // corrupted or cut streams: `decode_lockstep_all` agrees with decoding each stream alone.
            thread_local! { static POOL: Vec<Table> = table_pool(); }
            POOL.with(|pool| wide_lockstep_agrees(&specs, pool));
        }

        #[test]
        fn corrupt_streams_never_panic(segs in segment_strategy(), two: bool, split in any::<usize>(),
                                       flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 1..4),
                                       cut in any::<usize>(), do_cut: bool) {
            let tables: Vec<Table> = segs.iter().map(|(c, _)| table(c)).collect();
            let segments: Vec<(usize, &Table)> = segs.iter().zip(&tables).map(|((_, s), t)| (s.len(), t)).collect();
            let symbols: Vec<u8> = segs.iter().flat_map(|(_, s)| s.iter().copied()).collect();
            let starts = starts_of(two, split, symbols.len());
            let enc = encode_lanes(&symbols, &segments, None, &starts);
            let (sb, mut wb) = stream_bytes(&enc);
            flip_words(&mut wb, &flips);
            if do_cut && !wb.is_empty() {
                wb.truncate((cut % wb.len()) & !1);
            }
            // Either an error or some symbols: the point is no panic and agreement with the reference on validity.
            let ours = decode_lanes(&sb, &wb, &segments, &starts);
            let words: Vec<u16> = wb.chunks_exact(2).map(|w| u16::from_le_bytes([w[0], w[1]])).collect();
            let reference = reference_decode(&enc.states, &words, &segments, &starts);
            prop_assert_eq!(ours.ok(), reference.ok());
        }
    }
}
