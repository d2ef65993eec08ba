// aceapex GPU decode kernels (FORMAT.md §3, version 7), compiled at run time by NVRTC for the GPU's own
// architecture.
//
// The unit of work is a **unit** = one slice of 2^unit_log bytes (FORMAT.md §3: every block is cut into slices,
// each coded on its own like a small block), numbered globally over the stream: unit u covers stream bytes from
// u << unit_log, and its table group is u >> group_shift. Matches never cross a unit boundary; their sources lie
// anywhere before them.
//
// A slice's rANS stream has K = 1 or 2 independent lanes (FORMAT.md §3.4): lane 0 decodes every code and literals
// [0, s) from state[0], its words from the front of the word stream; lane 1 (K = 2) literals [s, nlit) from
// state[1], its words from the back (`lane_split` gives s). At the end both lanes' states are 2^16 and their words
// add up to the stream's. Two paths share the unit parser (`parse_units`: the code phase and the token parse of a
// unit on a thread, or on a warp by group prefix sums; then each lane's literals on a thread, literal_phase_k1, or
// with K = 2 in parse_k1_linear lane 1 on a thread of its own; parse_k1_linear leaves the token parse to
// finish_linear_k1, a warp a unit):
//
//  * Full decode (device-resident throughput): the parser over every unit writes literals to their stream
//    positions and tokens to flat arrays; then, on an archive with few match bytes (the host decides, Resolve::Auto
//    in device.rs), the resident seek's maps below and one `chase_matches` launch that chases every match byte to
//    its literal in place; on a larger one a `copy_flow` launch that copies every match in stream order once its
//    sources are (see "Full decode by copies in stream order"). The alternatives, kept for comparison: match levels (`level_ordered`, `copy_level`, ...), and stamps per byte (literal: 1, match byte:
//    0, written by the parser only for them) with `resolve_round` 0 and the chase: `resolve_round` 0 then
//    resolves every match byte whose source byte is final (stamp = 1 + depth), byte-parallel per warp, reading
//    sources other warps finished earlier in the same launch; what it leaves goes on a list in pieces of at most
//    RESOLVE_PIECE bytes, and `resolve_chase` resolves each of those bytes by following its matches through the
//    tokens to a byte round 0 left final (at most max_depth hops). (ACEAPEX_GPU_RESOLVE_ROUNDS=1 instead runs
//    rounds 1..max_depth, each resolving one more level of the list, as in session 11.)
//
//  * Seek (a batch of requested units): `seed_batch` puts the requested units on a device worklist; then per
//    level d = 0..L: the parser parses the units claimed so far and `expand_ranges` turns the byte ranges
//    needed at level d into their source ranges at level d+1, claiming (atomically) the units that hold them —
//    only the slices holding needed source pieces are parsed. The ranges only ever shrink (a range maps to at
//    most as many source bytes), so the work is bounded by the requested bytes times the depth. `chase_bytes`
//    then resolves every requested byte by following matches through the parsed units (at most L hops) to a
//    literal; `seek_resolve` is the alternative that runs the resolve rounds over all parsed slots.
//    `reset_batch` clears the claims.
//
//  * Resident seek: once the full decode's parse has run over every unit (tokens and literals device-resident),
//    `chase_resident` resolves a request's bytes through those tokens in one launch, with no parse levels.
//
// Every length, count and offset read from the archive is checked; a failure is reported once in
// status[0] = code << 40 | unit, and the host turns it into an error (the caller falls back to the CPU).
//
// Unit metadata (host-validated block directory and slice header, 8 u32 per unit, src/engine/gpu/prep.rs):
//   [0,1] slice payload offset in the file (lo, hi), [2] nmatch, [3] nlit, [4] nwords, [5] extra_len,
//   [6] header length (the four varints) | META_CTX when the unit's literals are context-coded (FORMAT.md §3.5),
//   [7] decoded unit length (0xFFFFFFFF: header invalid).
// Literal context models (FORMAT.md §2.4, §3.5): xgrp holds per group its model's order k (0: none) and the
// index in xtab of its context 0; xtab holds per context (uint2) c1 | c2 << 16 and c3, the cumulative
// frequencies of C, G and T (A starts at 0, the scale ends at 4096). A context-coded literal is decoded by
// comparing the slot with c1, c2, c3; the context of a lane's next literal is ((ctx << 2) | code) & (4^k - 1),
// starting at 0 in every slice.
// Decode tables: per group, per table (LL, ML, OF, LIT), 4096 u32 slot entries
//   sym | (freq - 1) << 8 | cum << 20, or 0xFFFFFFFF for a slot no symbol covers.
// Compact decode tables (the seek path loads them into shared memory, a warp per slice): per group CT_WORDS u32,
//   bytes [0, 4 * 4096): the symbol of every slot, table t (LL, ML, OF, LIT) at t * 4096; then words
//   [CT_FC, CT_FC + 568): freq | cum << 16 per symbol (LL at 0, ML at 64, OF at 128, LIT at 312), freq 0 for a
//   symbol the table does not have (an unused table maps every slot to a symbol of frequency 0).
// Tokens of a parsed unit (index tok_off[entry] + t, t < nmatch + 1):
//   tpos[t] = unit offset where token t's literals start, mpos[t] = where its match starts,
//   back[t] = match distance | RC_FLAG for a reverse-complement match (0 for the final literal-only token). A
//   match ends at tpos[t + 1]. Match byte k of token t copies stream position source_of(base, back[t], k), with
//   base = match start - distance, complemented for a reverse-complement match (FORMAT.md §1, version 5).

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define FULL_MASK 0xFFFFFFFFu
#define NO_SLOT 0xFFFFFFFFu
#define CLAIMING 0xFFFFFFFEu
#define BAD_ENTRY 0xFFFFFFFFu
#define META_WORDS 8
#define META_CTX 0x80000000u   // meta word 6: the unit's literals are context-coded
#define META_HDR_MASK 0xFFFFu  // meta word 6: the header length
#define CT_WORDS 4672
#define CT_FC 4096
#define CT_LIT_FC 312

// Error codes (mirrored in src/engine/gpu/device.rs).
#define E_HEADER 1       // unit header (or its block directory) failed host validation
#define E_SYMBOL 2       // a slot no symbol covers (or an unused table)
#define E_WORDS 3        // the rANS word stream ran out
#define E_FINAL 4        // final states != 2^16 or words left over
#define E_EXTRA 5        // extra-bits stream length or padding wrong
#define E_SUMS 6         // literal / length sums disagree with the header
#define E_BACK 7         // a match reaches before the stream start
#define E_DEPTH 8        // more than max_depth hops
#define E_UNPARSED 9     // a needed unit was not parsed (worklist overflow)
#define E_WORKLIST 10    // worklist or token pool capacity exceeded
#define E_RANGES 11      // range list capacity exceeded
#define E_VALUE 12       // a length value out of range

// Variant switches for the time breakdown (the parses' `mode`).
#define MODE_FULL 0
#define MODE_ENTROPY_ONLY 1  // rANS decode only: symbols are not stored, nothing is parsed
#define MODE_NO_LITERALS 2   // entropy + token parse, literal bytes decoded but not written
#define MODE_TOKENS 3        // entropy-decode the codes and parse the tokens only; lane 0's rANS state is saved in
                             // `resume` and literals_k1 / literals_warp decode and place the literals later (seek)
#define MODE_SMEM 16         // flag (parse_k32 only): each warp loads its slice's LL/ML/OF tables into the
                             // dynamic shared memory the launch provides (CODE_SMEM_BYTES per warp)
#define MODE_K1_LANES_SHIFT 8  // parse_k1*: bits 8.. hold how many lanes of each warp take a unit (1 .. 32; 0 = 32)

// Words of resume state per worklist entry (MODE_TOKENS): [0] words rANS lane 0's code phase took, [1] lane 0's
// state after it. (Lane 1 starts from its state in the payload.)
#define RESUME_WORDS 2

// Bytes of a deferred match per list entry of the full decode's resolve rounds (mirrored in
// src/engine/gpu/device.rs, which sizes the lists for it).
#define RESOLVE_PIECE 128

__device__ __forceinline__ void report(u64* status, u32 code, u64 unit) {
    atomicCAS(&status[0], 0ull, ((u64)code << 40) | (unit & 0xFFFFFFFFFFull));
}

// Byte loads and stores at GPU scope (through L2, never a stale L1 line), and the fence between a resolved
// byte and its stamp (resolve_warp).
__device__ __forceinline__ u8 load_relaxed_u8(const u8* p) {
    u32 v;
    asm volatile("ld.relaxed.gpu.u8 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return (u8)v;
}
__device__ __forceinline__ void store_relaxed_u8(u8* p, u32 v) {
    asm volatile("st.relaxed.gpu.u8 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void fence_acq_rel_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

__device__ __forceinline__ u32 load_u32_le(const u8* p) {
    return (u32)p[0] | ((u32)p[1] << 8) | ((u32)p[2] << 16) | ((u32)p[3] << 24);
}

__device__ __forceinline__ u32 load_u16_le(const u8* p) { return (u32)p[0] | ((u32)p[1] << 8); }

// Extra bits used by a log code (FORMAT.md §3.2): codes < 16 carry none, else h - 1 with h = 4 + (c - 16) / 2.
__device__ __forceinline__ u32 extra_bits_of(u32 code) { return code < 16 ? 0u : 3u + (code - 16u) / 2u; }

// OF codes (FORMAT.md §3.2): below OF_EXPLICIT an explicit forward distance (log code of back - 1), from
// OF_EXPLICIT to OF_REVERSE a continuation of the previous match token of the same slice (its kind, its diagonal
// moved by a delta, no extra bits), from OF_REVERSE to OF_ALPHABET an explicit reverse-complement distance (log
// code OF_REVERSE + c). Mirrors OF_EXPLICIT_CODES / OF_REVERSE_BASE / OF_CONTINUATION_DELTAS in
// src/codec/tables.rs.
#define OF_EXPLICIT 88
#define OF_REVERSE 96
#define OF_ALPHABET 184
__device__ __forceinline__ bool is_continuation(u32 code) { return code >= OF_EXPLICIT && code < OF_REVERSE; }
__device__ __forceinline__ u32 of_log_code(u32 code) { return code >= OF_REVERSE ? code - OF_REVERSE : code; }
__device__ __forceinline__ u32 of_extra_bits(u32 code) {
    return is_continuation(code) ? 0u : extra_bits_of(of_log_code(code));
}
// Deltas of codes 88..95: 0, +1, -1, +2, -2, +3, -3, +4 (k odd: +(k + 1) / 2, k even: -(k / 2)).
__device__ __forceinline__ long long continuation_delta(u32 code) {
    const u32 k = code - OF_EXPLICIT;
    const long long mag = (long long)((k + 1) >> 1);
    return (k & 1u) ? mag : -mag;
}

// A parsed match's back[t]: its distance, with RC_FLAG set for a reverse-complement match (distances are at most
// 2^40, so the flag never collides with one).
#define RC_FLAG (1ull << 63)
__device__ __forceinline__ u64 match_dist(u64 bk) { return bk & ~RC_FLAG; }
__device__ __forceinline__ bool match_rc(u64 bk) { return (bk >> 63) != 0; }
// The stream position that byte k of a match copies, with base = the match's start - its distance: forward,
// base + k mod distance (a periodic fill); reverse complement, base - k (the source read backwards from its last
// byte, base). The parse checked base >= 0, and for a reverse complement base >= len - 1. source_in computes it in
// the position type P (u32 where every position and distance fits, see chase_at).
template <class P>
__device__ __forceinline__ P source_in(P base, u64 bk, u32 k) {
    const P dist = (P)match_dist(bk);
    return match_rc(bk) ? base - k : base + (dist > k ? k : k % (u32)dist);
}
__device__ __forceinline__ u64 source_of(u64 base, u64 bk, u32 k) { return source_in<u64>(base, bk, k); }
// The complement of a byte (FORMAT.md §1): A<->T, C<->G in either case, every other byte itself.
__device__ __forceinline__ u32 complement(u32 b) {
    switch (b) {
        case 'A': return 'T';
        case 'T': return 'A';
        case 'C': return 'G';
        case 'G': return 'C';
        case 'a': return 't';
        case 't': return 'a';
        case 'c': return 'g';
        case 'g': return 'c';
        default: return b;
    }
}

__device__ __forceinline__ u64 log_value(u32 code, u64 extra) {
    if (code < 16) return code;
    u32 h = 4 + (code - 16) / 2;
    u64 m = (code - 16) & 1;
    return (1ull << h) + (m << (h - 1)) + extra;
}

// Reads `n` (<= 57) bits LSB-first at bit offset `pos` of the stream at `extra`; the caller has checked pos + n <=
// 8 * len. The field lies in at most three aligned 32-bit words from the one holding its first byte; only those
// holding a bit of it are loaded, so each holds a byte of the stream and no load leaves the file buffer (which
// starts aligned). (A byte a load, as before session 36, took ~40 instructions a field: the warp token parse of
// finish_linear_k1 ran ~1,250 instructions a chunk of 32 tokens.)
__device__ __forceinline__ u64 read_bits(const u8* extra, u64 pos, u32 n) {
    if (n == 0) return 0;
    const u64 a = (u64)extra + (pos >> 3);
    const u32* w = (const u32*)(a & ~3ull);
    const u32 sh = 8u * (u32)(a & 3u) + (u32)(pos & 7u);  // <= 31
    u64 v = __ldg(w);
    if (sh + n > 32) v |= (u64)__ldg(w + 1) << 32;
    v >>= sh;
    if (sh + n > 64) v |= (u64)__ldg(w + 2) << (64 - sh);  // then sh >= 8
    return v & ((1ull << n) - 1);
}

__device__ __forceinline__ u32 warp_inclusive_scan(u32 v) {
    u32 lane = threadIdx.x & 31;
#pragma unroll
    for (u32 d = 1; d < 32; d <<= 1) {
        u32 o = __shfl_up_sync(FULL_MASK, v, d);
        if (lane >= d) v += o;
    }
    return v;
}

// Prefetches `bytes` bytes at `p` towards L1. The lanes of this warp that ask for the same `p` split the lines
// among themselves, so a warp whose slices share a table group fetches that group's table once. (A seek level
// parses a few cold slices: without this every rANS step waits for an L2 or memory round trip on its table
// lookup.) Only a hint: lanes that are not converged here just fetch on their own.
__device__ __forceinline__ void prefetch_l1_shared(const void* p, u32 bytes) {
    const u32 peers = __match_any_sync(__activemask(), (u64)p);
    const u32 rank = __popc(peers & ((1u << (threadIdx.x & 31)) - 1u));
    const u32 n = __popc(peers);
    for (u32 off = rank * 128; off < bytes; off += n * 128)
        asm volatile("prefetch.global.L1 [%0];" ::"l"((const u8*)p + off));
}

// Index of the last token whose start `arr[t]` <= key, among arr[lo..hi) (arr non-decreasing, arr[lo] <= key).
__device__ __forceinline__ u32 last_le(const u32* arr, u32 lo, u32 hi, u32 key) {
    while (hi - lo > 1) {
        u32 mid = lo + (hi - lo) / 2;
        if (arr[mid] <= key) lo = mid; else hi = mid;
    }
    return lo;
}

// A thread group of W lanes (W = 1 or 32) of one warp, working on one unit: with W = 1 every collective is the
// identity and a warp decodes 32 units at once; with W = 32 (the seek's token levels) a whole warp parses one
// unit's tokens by group prefix sums. All collective operations name only the group's lanes.
template <int W>
struct Group {
    u32 lane;  // lane within the group
    u32 base;  // the group's first lane in the warp
    u32 mask;  // the group's lanes, as a warp mask

    __device__ __forceinline__ Group() {
        u32 wl = threadIdx.x & 31;
        lane = wl & (W - 1);
        base = wl & ~(u32)(W - 1);
        mask = W == 32 ? FULL_MASK : (((1u << (W & 31)) - 1u) << base);
    }
    __device__ __forceinline__ u32 shfl(u32 v, u32 src) const { return W == 1 ? v : __shfl_sync(mask, v, src, W); }
    __device__ __forceinline__ bool any(bool p) const { return W == 1 ? p : __any_sync(mask, p); }
    __device__ __forceinline__ void sync() const {
        if (W > 1) __syncwarp(mask);
    }
    // Inclusive prefix sum over the group's lanes.
    __device__ __forceinline__ u32 scan(u32 v) const {
#pragma unroll
        for (u32 d = 1; d < W; d <<= 1) {
            u32 o = __shfl_up_sync(mask, v, d, W);
            if (lane >= d) v += o;
        }
        return v;
    }
    // Inclusive segmented prefix sum over the group's lanes (64-bit, wrapping): a lane with `*head` set starts a
    // new segment at its own value. On return *head says whether any lane at or before this one had it set.
    __device__ __forceinline__ u64 seg_scan(u64 v, bool* head) const {
        u32 f = *head ? 1u : 0u;
#pragma unroll
        for (u32 d = 1; d < W; d <<= 1) {
            u32 lo = __shfl_up_sync(mask, (u32)v, d, W);
            u32 hi = __shfl_up_sync(mask, (u32)(v >> 32), d, W);
            u32 of = __shfl_up_sync(mask, f, d, W);
            if (lane >= d) {
                if (!f) v += ((u64)hi << 32) | lo;
                f |= of;
            }
        }
        *head = f != 0;
        return v;
    }
    __device__ __forceinline__ u64 last64(u64 v) const {
        return W == 1 ? v : ((u64)shfl((u32)(v >> 32), W - 1) << 32) | shfl((u32)v, W - 1);
    }
    __device__ __forceinline__ u32 last(u32 v) const { return shfl(v, W - 1); }
};

// The front of the rANS word stream as the generic code phase reads it (lane 0 of the stream, FORMAT.md §3.4: the
// group's lane 0 decodes every code, so it takes at most one word a step): each lane of the group keeps one word of
// the current W-word window and one of each of the next two, loaded two windows ahead of use to hide memory
// latency, and the taker gets its word by a shuffle.
template <int W>
struct WordWindow {
    const u8* words;
    u32 nwords;
    u32 base;  // first word of `cur` (a multiple of W)
    u32 pos;   // words consumed
    u32 cur, next, next2;

    __device__ __forceinline__ u32 load(u32 i) const { return i < nwords ? load_u16_le(words + 2ull * i) : 0u; }

    __device__ __forceinline__ void init(const u8* w, u32 n, u32 lane) {
        words = w;
        nwords = n;
        pos = 0;
        base = 0;
        cur = load(lane);
        next = load(W + lane);
        next2 = load(2 * W + lane);
    }

    // Every lane of the group calls this, `need` set at most on lane 0 (the taker): it gets the next word in *x;
    // a read past the stream's end sets *bad.
    __device__ __forceinline__ void take(const Group<W>& g, bool need, u32* x, bool* bad) {
        const bool any = g.any(need);
        const u32 a = g.shfl(cur, pos - base);  // pos - base < W
        if (need) {
            if (pos >= nwords) *bad = true;
            else *x = (*x << 16) | a;
        }
        if (any) {
            pos++;
            if (pos - base >= W) {
                base += W;
                cur = next;
                next = next2;
                next2 = load(base + 2 * W + g.lane);
            }
        }
    }
};

// Everything the kernels share, passed by value. Mirrored field for field by `KernelCtx` in
// src/engine/gpu/device.rs (pointers are 64-bit device addresses; keep the order and types in step).
struct Ctx {
    const u8* file;       // archive bytes [0, tables_offset)
    const u32* meta;      // META_WORDS per unit
    const u32* dtab;      // decode tables, 4 * 4096 entries per group
    u32* worklist;        // entry -> unit id
    u64* tok_off;         // entry -> index of its first token
    u32* tpos;            // token arrays (see above)
    u32* mpos;
    u64* back;
    u8* bytes;            // entry e's decoded bytes at e << unit_log
    u32* slot_of_unit;    // unit id -> entry, NO_SLOT or CLAIMING; null on the full path
    u32* counters;        // see counter_* below
    u64* pool_used;       // token storage handed out
    u64* status;          // [0]: first error, code << 40 | unit
    u64* rsrc0;           // range lists, double-buffered by level parity
    u64* rsrc1;
    u32* rlen0;
    u32* rlen1;
    u8* stamps;           // per byte: 0 = unresolved, else 1 + its depth (resolve_warp)
    u32* lidx;            // token arrays: index of token t's first literal in the unit's literal sequence
    u32* resume;          // RESUME_WORDS per worklist entry (MODE_TOKENS), null on the full path
    const u32* ctab;      // compact decode tables, CT_WORDS per group
    const u32* xgrp;      // literal context model per group: order, first context (see above)
    const uint2* xtab;    // literal context tables, one uint2 per context
    u32* lane_end;        // 2 per unit: words rANS lanes 0 and 1 took, when parse_k1_linear decodes lane 1 on a
                          // thread of its own (finish_linear_k1 checks their sum); null elsewhere
    u64 pool_cap;         // token storage available
    u64 nunits;           // units (slices) in the stream
    u32 wl_cap;           // worklist entries available
    u32 range_cap;        // ranges per level available
    u32 lanes;            // rANS lanes K (1 or 2, FORMAT.md §3.4): the slice's 4 K state bytes before its words
    u32 unit_log;         // slice_log: a unit (slice) holds 2^unit_log bytes
    u32 group_shift;      // unit id >> group_shift = table group (block_log - slice_log + group_log)
    u32 max_depth;
};

// counters[0]: worklist entries claimed; counters[2 + d]: first entry of level d (d <= max_depth + 1);
// counters[2 + (max_depth + 2) + d]: ranges needed at level d.
__device__ __forceinline__ u32* level_begin(const Ctx& c, u32 d) { return c.counters + 2 + d; }
__device__ __forceinline__ u32* range_count(const Ctx& c, u32 d) { return c.counters + 2 + (c.max_depth + 2) + d; }
__device__ __forceinline__ bool failed(const Ctx& c) { return *(volatile u64*)c.status != 0; }
// Where the rANS states of the unit with meta row `m` start in the file: its payload (meta words 0, 1) past its
// header; the word stream follows 4 K bytes later, the extra-bits stream 2 nwords bytes after that.
__device__ __forceinline__ const u8* slice_states(const Ctx& c, const u32* m) {
    return c.file + ((u64)m[0] | ((u64)m[1] << 32)) + (m[6] & META_HDR_MASK);
}

// The context model of unit `id`'s group (used only by units whose meta word 6 has META_CTX; the host refuses
// such a unit in a group without a model): its tables and the context mask 4^k - 1.
struct LitModel {
    const uint2* t;
    u32 mask;
};
__device__ __forceinline__ LitModel lit_model_of(const Ctx& c, u32 id) {
    const u32* g = c.xgrp + 2ull * (id >> c.group_shift);
    LitModel r;
    r.t = c.xtab + g[1];
    r.mask = (1u << (2u * g[0])) - 1u;
    return r;
}

// Decodes one context-coded literal of a lane: from state *x in context *ctx, returns the base byte and
// advances the state (not renormalised) and the context. A base of frequency 0 has an empty slot range and is
// never chosen, so every slot decodes.
__device__ __forceinline__ u32 decode_base(const LitModel& lm, u32* ctx, u32* x) {
    const u32 slot = *x & 4095u;
    const uint2 e = lm.t[*ctx];
    const u32 c1 = e.x & 0xFFFFu, c2 = e.x >> 16, c3 = e.y;
    const u32 s = (u32)(slot >= c1) + (u32)(slot >= c2) + (u32)(slot >= c3);
    const u32 lo = s == 0 ? 0u : (s == 1 ? c1 : (s == 2 ? c2 : c3));
    const u32 hi = s == 0 ? c1 : (s == 1 ? c2 : (s == 2 ? c3 : 4096u));
    *x = (hi - lo) * (*x >> 12) + slot - lo;
    *ctx = ((*ctx << 2) | s) & lm.mask;
    return (0x54474341u >> (8u * s)) & 0xFFu;  // "ACGT"[s]
}

// Where a slice's literals split between its rANS lanes (FORMAT.md §3.4): lane 0 decodes every code and literals
// [0, s), lane 1 literals [s, nlit). K = 1: s = nlit (lane 1 is empty). K = 2: s = min(nlit, 8 ceil(max(0, nlit -
// 10 n_c) / 16)) with n_c = 3 nmatch + 1 codes: a code counts as ten literals, what a code step costs a thread
// against a literal step (see rans::SPLIT_CODE_WEIGHT for the measurements); s is a multiple of 8 unless it is
// nlit (each lane's literals go out in aligned 8-byte pieces). Mirrors rans::lane_split and rans::SPLIT_CODE_WEIGHT
// in src/codec.
#define SPLIT_CODE_WEIGHT 10u
__device__ __forceinline__ u32 lane_split(u32 nmatch, u32 nlit, u32 lanes) {
    if (lanes == 1) return nlit;
    const u32 ncodes = SPLIT_CODE_WEIGHT * (3u * nmatch + 1u);
    const u32 rest = nlit > ncodes ? nlit - ncodes : 0u;
    return min(nlit, 8u * ((rest + 15u) / 16u));
}

// A group's LL, ML and OF tables in shared memory (one warp's copy): symbol per slot, freq | cum << 16 per symbol.
struct CodeTables {
    u8 syms[3 * 4096];
    u32 fc[CT_LIT_FC];
};
#define CODE_SMEM_BYTES 13536  // sizeof(CodeTables), a multiple of 16 (mirrored in src/engine/gpu/device.rs)

// Slot `slot` of code table `which` (0 LL, 1 ML, 2 OF) in the shared `sm` as a dtab entry: symbol | (freq - 1) << 8 |
// cum << 20, or 0xFFFFFFFF for a slot with no symbol. Two dependent shared loads instead of one global one.
__device__ __forceinline__ u32 code_entry(const CodeTables* sm, u32 which, u32 slot) {
    const u32 sym = sm->syms[which * 4096 + slot];
    const u32 f = sm->fc[64u * which + sym];
    return f == 0 ? 0xFFFFFFFFu : sym | (((f & 0xFFFFu) - 1) << 8) | ((f >> 16) << 20);
}

// A group's literal table in shared memory.
struct LitTables {
    u8 syms[4096];
    u32 fc[256];
};
#define LIT_SMEM_BYTES 5120  // sizeof(LitTables), a multiple of 16 (mirrored in src/engine/gpu/device.rs)

// The whole warp copies `words16` 16-byte words from global to shared memory (coalesced, all loads in flight).
__device__ __forceinline__ void warp_copy16(uint4* dst, const uint4* src, u32 words16) {
    const u32 lane = threadIdx.x & 31;
    for (u32 i = lane; i < words16; i += 32) dst[i] = src[i];
}

// Loads group `grp`'s LL/ML/OF tables into `t` (whole warp; the caller syncs the warp before and after).
__device__ __forceinline__ void load_code_tables(const Ctx& c, u64 grp, CodeTables* t) {
    const u32* g = c.ctab + grp * CT_WORDS;
    warp_copy16((uint4*)t->syms, (const uint4*)g, 3 * 4096 / 16);
    warp_copy16((uint4*)t->fc, (const uint4*)(g + CT_FC), CT_LIT_FC / 4);
}

// Loads group `grp`'s literal table into `t` (whole warp, as above).
__device__ __forceinline__ void load_lit_table(const Ctx& c, u64 grp, LitTables* t) {
    const u32* g = c.ctab + grp * CT_WORDS;
    warp_copy16((uint4*)t->syms, (const uint4*)g + 3 * 4096 / 16, 4096 / 16);
    warp_copy16((uint4*)t->fc, (const uint4*)(g + CT_FC + CT_LIT_FC), 256 / 4);
}

// ---- A thread per rANS lane, its literals in registers (the full decode's and the seek's literal phase) ----
//
// A rANS lane's literals are one serial chain: each step's slot needs the state the step before left. So the time
// of a decode of few slices (atha_chr1: 7,504 slices, ~3,600 literals each) is the length of that chain in cycles,
// not a throughput (hence format version 7's second lane, FORMAT.md §3.4: with K = 2 a slice's literals are two
// independent chains of about half the length each, which parse_k1_linear runs on two threads): session 20's
// K = 1 literal loop took ~740 cycles a literal there (entropy alone 1.35 ms on an H200). This loop issues its
// memory accesses ahead of the chain:
//  * the context model is in shared memory when its order is at most K1_CTX_ORDER (else global, through L1), in
//    copies that keep a quarter-warp's loads free of bank conflicts (K1Rows), and the four rows a literal's
//    successor context can have (consecutive: ((ctx << 2) | s) & mask) are loaded while the literal itself
//    decodes, so the next step only selects one by the base just decoded;
//  * the word stream is read from aligned 32-bit words loaded two moves (~16 literals) ahead (WordReader1), or, in
//    the full decode of few slices (parse_k1_staged, parse_k1_linear), from a ring in shared memory the parse fills
//    ahead of the chain (WordRing1: 13 fewer instructions a literal, session 31);
//  * literals are decoded eight at a time and placed as one 8-byte piece where the eight lie in one token's run
//    (LiteralSink1::put8): the token walk and the word merge are off the step, and a lane's stores go to its own
//    slice in aligned words (a store per literal was a transaction each).
// A CTA of the K = 1 parse loads the tables of its first slice's group into shared memory (K1Tables); a slice of
// another group (a CTA straddling a group boundary, or a grid-stride loop's later entries) reads them from global
// memory, with the same results. H200: atha_chr1's entropy decode 1.41 -> 0.88 ms (session 23) -> 0.69 ms
// (session 24), parse with literals 1.92 -> 1.40 -> 1.03 ms -> 0.94 ms (session 29: the copies, and L1 room for the
// word streams by the launch's shared-memory carveout, src/engine/gpu/device.rs set_parse_carveout). What is left
// there (session 29 run 1): ~75 warp instructions a literal, ~3.6 cycles apart with one warp per scheduler, most
// of it the chain's own fixed-latency dependencies; the word moves wait on loads issued one move earlier.
// tests/kernel_host_model.rs compiles WordReader1, WordReader1Back, the rings (both directions), LiteralSink1 and the
// context chain (both paths, both lanes) from this file on the host and checks them.
#define K1_CTX_ORDER 5
// Shared-memory rows of the context model: 16 KB, an order-4 model eight times over or an order-5 one twice.
#define K1_CTX_ROWS 2048u

// How many copies of an order-k model the CTA keeps (log2): the successor rows a literal loads are a 32-byte piece
// at a random place, so the 4-byte banks its two 16-byte loads hit start at one of only four places, and the lanes
// of a quarter-warp (a 16-byte load is served a quarter-warp at a time) collide there. Copy j holds each 16-byte
// piece of the model in bank quad j (piece p of copy j is 16-byte word p·R + j), and lane l reads copy l mod R: with
// R = 8 no two lanes of a quarter-warp share a bank quad, whatever rows they read.
// K1_CTX_COPIES_LOG (default 3) is a measurement knob: the host sets it from ACEAPEX_GPU_CTX_COPIES_LOG.
#ifndef K1_CTX_COPIES_LOG
#define K1_CTX_COPIES_LOG 3u
#endif
__device__ __forceinline__ u32 k1_ctx_copies_log(u32 order) {
    return order <= 4 ? K1_CTX_COPIES_LOG : min(K1_CTX_COPIES_LOG, 1u);
}

// Where a lane finds its copy of the successor rows in shared memory: rows nb .. nb + 3 at a + nb·8·R (the first
// 16 bytes) and b + nb·8·R (the second). The chain carries nb·8·R itself (`o` in k1_context_step), so that the
// next one is a shift and one LOP3 and the addresses one add each; `sh` and `m` step it (k1_context_literals sets
// them).
struct K1Rows {
    u32 a, b, sh, m;
};

// The 16-byte word i of the shared copies (see K1Rows) of a model whose rows start at `rows`: piece i >> rlog,
// rows 2p and 2p + 1.
__device__ __forceinline__ uint4 k1_ctx_piece(const uint2* rows, u32 i, u32 rlog) {
    const uint2* r = rows + 2 * (i >> rlog);
    return make_uint4(r[0].x, r[0].y, r[1].x, r[1].y);
}

// A 16-byte load from shared window address `a`.
__device__ __forceinline__ uint4 lds128(u32 a) {
    uint4 v;
    asm("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
    return v;
}

struct K1Tables {
    uint2 ctx[K1_CTX_ROWS];  // the context model (xtab rows) of `group`, when its order <= K1_CTX_ORDER, in
                             // 2^k1_ctx_copies_log(order) interleaved copies
    u32 lit[4096];          // `group`'s LIT decode table (dtab layout)
    CodeTables code;        // `group`'s LL, ML and OF tables (the compact layout parse_one reads)
    u64 group;              // the table group loaded (~0: none)
    u32 ctx_first;          // xtab index of the model in `ctx` (NO_SLOT: none)
};

// The whole CTA loads group `grp`'s tables into `k` (the caller syncs the CTA after).
__device__ __forceinline__ void load_k1_tables(const Ctx& c, u64 grp, K1Tables* k) {
    const u32 n = blockDim.x, i0 = threadIdx.x;
    const uint4* lit = (const uint4*)(c.dtab + grp * 4 * 4096 + 3 * 4096);
    for (u32 i = i0; i < 4096 / 4; i += n) ((uint4*)k->lit)[i] = lit[i];
    const uint4* code = (const uint4*)(c.ctab + grp * CT_WORDS);
    for (u32 i = i0; i < 3 * 4096 / 16; i += n) ((uint4*)k->code.syms)[i] = code[i];
    for (u32 i = i0; i < CT_LIT_FC; i += n) k->code.fc[i] = c.ctab[grp * CT_WORDS + CT_FC + i];
    const u32* g = c.xgrp + 2 * grp;
    const u32 order = g[0], first = g[1];
    const bool fits = order >= 1 && order <= K1_CTX_ORDER;
    if (fits) {
        const u32 rlog = k1_ctx_copies_log(order);
        for (u32 i = i0; i < (1u << (2 * order - 1 + rlog)); i += n)
            ((uint4*)k->ctx)[i] = k1_ctx_piece(c.xtab + first, i, rlog);
    }
    if (i0 == 0) {
        k->group = grp;
        k->ctx_first = fits ? first : NO_SLOT;
    }
}

// Lane 0's words of a slice's rANS stream (from its front), read as aligned 32-bit words: the one holding the next
// word's first byte and the two after it. Only aligned words that start before the stream's end are loaded (the payload buffer
// is padded, so they lie inside it); a word taken past the end is whatever bytes follow or a stale word, and
// `taken` exceeding the stream's words refuses the slice after the loop.
struct WordReader1 {
    const u32* p;    // the next aligned 32-bit word to load (into c2)
    const u32* end;  // the first aligned word wholly past the stream: it and those after it are not loaded
    u32 c0, c1, c2;  // three aligned words from the one holding the next word's first byte
    u32 sel;         // PRMT selector of the next word's two bytes in (c0, c1): b | (b + 1) << 4, b its byte in c0
    u32 taken;       // words taken (checked against the stream's length after the last literal)

    // *a where `load` holds and `a` lies before `end`, else `otherwise` (a predicated load, not a branch).
    __device__ __forceinline__ u32 ld_if(const u32* a, bool load, u32 otherwise) const {
        u32 v = otherwise;
        asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.nc.u32 %0, [%1];\n\t}"
            : "+r"(v)
            : "l"(a), "r"((u32)(load && a < end)));
        return v;
    }
    __device__ __forceinline__ void init(const u8* words, u32 nwords, u32 pos) {
        const u8* a = words + 2ull * pos;
        end = (const u32*)(((u64)(words + 2ull * nwords) + 3) & ~3ull);
        taken = 0;
        const u32* a0 = (const u32*)((u64)a & ~3ull);
        const u32 b = (u32)((u64)a & 3u);  // payloads are byte-aligned, so a word may straddle two aligned words
        sel = b | ((b + 1) << 4);
        c0 = ld_if(a0, true, 0u);
        c1 = ld_if(a0 + 1, true, 0u);
        c2 = ld_if(a0 + 2, true, 0u);
        p = a0 + 3;
    }
    // Renormalises `x` (FORMAT.md §3.4: below 2^16 it takes the next word). Branch-free: the 32 lanes of a warp
    // decode 32 slices, and some lane takes a word in nearly every step, so a branch here ran its body for a few
    // lanes in most steps (session 23 run 1: 16.8 of 32 lanes active; entropy alone on atha_chr1 1.06 -> 0.88 ms
    // predicated, run 2). Two PRMTs take the word (x << 16 | w); the words move on by one aligned word every
    // second take, the new one loaded two moves before it is read. (Session 23's 64-bit bit buffer took more
    // instructions in shifts; session 24 run 3 measured the two within ±2 % of each other.)
    __device__ __forceinline__ void renorm(u32* x) {
        const bool need = *x < 65536u;
        const u32 w = __byte_perm(c0, c1, sel);
        *x = need ? __byte_perm(*x, w, 0x1054u) : *x;
        taken += need ? 1u : 0u;
        const bool move = need && (sel & 2u) != 0;  // b >= 2: the next word starts in c1
        const u32 b = ((sel & 3u) + (need ? 2u : 0u)) & 3u;
        sel = b | ((b + 1) << 4);
        c0 = move ? c1 : c0;
        c1 = move ? c2 : c1;
        // Nothing but a move reads c2, so its load has two takes to land. (`move ? 0 : c2` as the value kept read
        // it in every take: 16 % of the loop's stall samples waited on that load, session 24 run 4.) Past the
        // stream c2 keeps a stale word; a stream that takes it is refused by `taken`.
        c2 = ld_if(p, move, c2);
        p += move ? 1 : 0;
    }
    __device__ __forceinline__ void refill() {}  // its loads run ahead by themselves (see WordRing1)
    __device__ __forceinline__ u32 taken_words() const { return taken; }
};

// Lane 1's words (FORMAT.md §3.4: a K = 2 slice's lane 1 takes the word stream from its back, word[nwords - 1]
// first) read as aligned 32-bit words going down, as WordReader1 reads lane 0's going up: the aligned word holding
// the next word's high byte and the two below it. Only aligned words that hold a byte of the stream are loaded (so
// every load lies inside the stream's payload); a word taken past the stream's front is a stale word or zeros, and
// the two lanes' words not adding up to the stream's refuses the slice after the loop.
struct WordReader1Back {
    const u32* p;      // the next aligned 32-bit word to load (into c2), going down
    const u32* begin;  // the aligned word holding the stream's first byte: those below it are not loaded
    const u32* end;    // the first aligned word wholly past the stream
    u32 c0, c1, c2;    // c0: the aligned word holding the next word's high byte, c1 the one below it, c2 below c1
    u32 sel;           // PRMT selector of the next word's two bytes in (c1, c0): (3 + b) | (4 + b) << 4, with b
                       // the high byte's place in c0 (b = 0: the low byte is c1's last)
    u32 taken;         // words taken

    __device__ __forceinline__ u32 ld_if(const u32* a, bool load, u32 otherwise) const {
        u32 v = otherwise;
        asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.nc.u32 %0, [%1];\n\t}"
            : "+r"(v)
            : "l"(a), "r"((u32)(load && a >= begin && a < end)));
        return v;
    }
    __device__ __forceinline__ void init(const u8* words, u32 nwords) {
        const u64 hi = (u64)words + 2ull * nwords - 1;  // the last word's high byte (nwords = 0: none is loaded)
        begin = (const u32*)((u64)words & ~3ull);
        end = (const u32*)(((u64)(words + 2ull * nwords) + 3) & ~3ull);
        taken = 0;
        const u32* a0 = (const u32*)(hi & ~3ull);
        const u32 b = (u32)(hi & 3u);
        sel = (3u + b) | ((4u + b) << 4);
        c0 = ld_if(a0, true, 0u);
        c1 = ld_if(a0 - 1, true, 0u);
        c2 = ld_if(a0 - 2, true, 0u);
        p = a0 - 3;
    }
    // As WordReader1::renorm, two bytes further down the stream a take.
    __device__ __forceinline__ void renorm(u32* x) {
        const bool need = *x < 65536u;
        const u32 w = __byte_perm(c1, c0, sel);
        *x = need ? __byte_perm(*x, w, 0x1054u) : *x;
        taken += need ? 1u : 0u;
        const u32 b0 = (sel & 15u) - 3u;
        const bool move = need && b0 < 2u;  // the next word's high byte is in c1
        const u32 b = (b0 + (need ? 2u : 0u)) & 3u;
        sel = (3u + b) | ((4u + b) << 4);
        c0 = move ? c1 : c0;
        c1 = move ? c2 : c1;
        c2 = ld_if(p, move, c2);
        p -= move ? 1 : 0;
    }
    __device__ __forceinline__ void refill() {}
    __device__ __forceinline__ u32 taken_words() const { return taken; }
    // Starts lane 1 of a slice whose `nwords` words are at `words` (see WordRing1::begin_lane).
    __device__ __forceinline__ void begin_lane(const u8* words, u32 nwords) { init(words, nwords); }
};

// Shared-memory loads and stores at shared window addresses (volatile: the ring below is written and read by the
// same thread, and volatile asm statements keep their order; no memory clobber, so global loads may pass them).
__device__ __forceinline__ u32 lds16(u32 a) {
    unsigned short v;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ void sts32(u32 a, u32 v) { asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v)); }
// Loads from tables the CTA wrote before a barrier and only reads after it (not volatile: they may move).
__device__ __forceinline__ u32 lds_u8(u32 a) {
    u32 v;
    asm("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}
__device__ __forceinline__ u32 lds32(u32 a) {
    u32 v;
    asm("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
    return v;
}

// A rANS lane's word stream staged in a ring of K1_RING_WORDS words in shared memory (the staged parses,
// parse_k1_staged and parse_k1_linear): a renormalisation is a compare, a PRMT, an add and the next word's shared load
// (~5 instructions), where WordReader1's aligned-word window took ~19 a literal and its global loads stalled the
// chain (long scoreboard, 0.40 of 3.2 cycles an instruction, session 30 run 1). Ring word i % K1_RING_WORDS holds
// stream word i. The parse stages the first ring's worth when it starts the slice (`init`, beside the payload's
// prefetch, before the code phase: staged after the token parse, the loads missed L1 and cost atha_chr1's parse 0.08
// ms, session 31 run 1); the literal phase starts at the word the code phase left (`start`), and `refill`, called
// every eight literals (which take at most eight words), keeps at least half a ring staged ahead, half a ring at a
// time: aligned 32-bit words, sixteen loads in flight, funnel-shifted to the stream's byte offset. The ring is
// aligned to its size, so a word's address is one LOP3. Words past the stream stage as zeros (aligned words wholly
// past it are not loaded, as in WordReader1), and a stream that takes more words than it has reads whatever the
// ring holds: taking more words than the stream has refuses the slice after the loop, as with WordReader1.
// K1_RING_BYTES (a power of two, 512 to 4096) and K1_STAGED_PREFETCH (1: the parse prefetches the whole word
// stream into L1 as the other parses do; 0: only its first 256 bytes, for the code phase) are measurement knobs: the
// host sets them from ACEAPEX_GPU_K1_RING_BYTES and ACEAPEX_GPU_K1_STAGED_PREFETCH.
#ifndef K1_RING_BYTES
#define K1_RING_BYTES 1024
#endif
#ifndef K1_STAGED_PREFETCH
#define K1_STAGED_PREFETCH 1
#endif
#define K1_RING_WORDS (K1_RING_BYTES / 2u)
// BACK: lane 1's words (FORMAT.md §3.4: taken from the stream's back, word[nwords - 1] first), staged in the order
// the lane takes them, so ring word i % K1_RING_WORDS holds the lane's i-th word, stream word nwords - 1 - i, and
// the renormalisation is the forward ring's. A staged 32-bit ring word holds two stream words swapped, so each is
// one PRMT of two aligned words (its selector fixed by the stream end's byte offset) going down from the end.
template <bool BACK>
struct WordRingT {
    const u32* src0;  // forward: the aligned global word holding the stream's first byte; BACK: the aligned word
                      // holding the byte at words + 2 nwords - 4 (where the lane's first two words start)
    const u32* lo;    // BACK: the aligned word holding the stream's first byte: those below it are not loaded
    const u32* end;   // the first aligned word wholly past the stream: it and those after it are not loaded
    u32 shift;        // forward: 8 x the stream's byte offset in an aligned word; BACK: the PRMT selector
    u32 ring;         // shared window address of the ring (aligned to K1_RING_BYTES)
    u32 at;           // 2 x the next word's index: its byte offset in the ring, unwrapped
    u32 w;            // the next word (ring byte offset at % K1_RING_BYTES)
    u32 staged;       // words [0, staged) have been staged (the last K1_RING_WORDS of them are in the ring)
    u32 avail;        // words the stream has
    u32 first;        // the word the literal phase started at

    __device__ __forceinline__ u32 ld(const u32* a) const {
        if constexpr (BACK) return a >= lo && a < end ? __ldg(a) : 0u;
        return a < end ? __ldg(a) : 0u;
    }
    // Stages words [staged, staged + K1_RING_WORDS / 2) into the half of the ring they map to.
    __device__ __forceinline__ void stage() {
        const u32 dst = ring + 2u * (staged % K1_RING_WORDS);
        if constexpr (BACK) {
            // Ring word pair q (the lane's words staged + 2q and + 2q + 1) is stream words j and j - 1, j = nwords -
            // 1 - staged - 2q: the four bytes at words + 2 (j - 1), which start in aligned word s - q.
            const u32* s = src0 - staged / 2u;
            u32 cur = ld(s + 1);
            for (u32 q = 0; q < K1_RING_WORDS / 4; q += 16) {
                u32 v[16];
#pragma unroll
                for (u32 k = 0; k < 16; k++) v[k] = ld(s - (q + k));
#pragma unroll
                for (u32 k = 0; k < 16; k++) {
                    sts32(dst + 4u * (q + k), __byte_perm(v[k], cur, shift));
                    cur = v[k];
                }
            }
        } else {
            const u32* s = src0 + staged / 2u;
            u32 cur = ld(s);
            for (u32 q = 0; q < K1_RING_WORDS / 4; q += 16) {
                u32 v[16];
#pragma unroll
                for (u32 k = 0; k < 16; k++) v[k] = ld(s + q + k + 1);
#pragma unroll
                for (u32 k = 0; k < 16; k++) {
                    sts32(dst + 4u * (q + k), __funnelshift_r(cur, v[k], shift));
                    cur = v[k];
                }
            }
        }
        staged += K1_RING_WORDS / 2;
    }
    // The slice's `nwords` words at `words` (byte-aligned), into the ring at shared window address `ring_`.
    __device__ __forceinline__ void init(const u8* words, u32 nwords, u32 ring_) {
        end = (const u32*)(((u64)(words + 2ull * nwords) + 3) & ~3ull);
        if constexpr (BACK) {
            const u64 t = (u64)words + 2ull * nwords - 4;
            src0 = (const u32*)(t & ~3ull);
            lo = (const u32*)((u64)words & ~3ull);
            const u32 o = (u32)(t & 3u);  // the bytes of the pair at t: o .. o + 3 of (aligned word, next one)
            shift = (o + 2u) | ((o + 3u) << 4) | (o << 8) | ((o + 1u) << 12);
        } else {
            src0 = (const u32*)((u64)words & ~3ull);
            shift = 8u * (u32)((u64)words & 3u);
        }
        ring = ring_;
        avail = nwords;
        staged = 0;
        at = 0;
        first = 0;
        stage();
        if (avail > K1_RING_WORDS / 2) stage();
    }
    // Keeps half a ring staged ahead of the next word (the half behind it is taken, so it can be overwritten).
    __device__ __forceinline__ void refill() {
        while (staged < avail && at / 2u + K1_RING_WORDS / 2 >= staged) stage();
    }
    // The next word is word `pos` (where the code phase left the stream); words staged before it that the ring no
    // longer needs are skipped.
    __device__ __forceinline__ void start(u32 pos) {
        at = 2u * pos;
        first = pos;
        if (pos >= staged) staged = pos & ~(K1_RING_WORDS / 2 - 1u);
        refill();
        w = lds16(ring | (at & (K1_RING_BYTES - 2u)));
    }
    // BACK: starts lane 1 of a slice whose `nwords` words are at `words`, in this ring (`ring` set; a slice's lane
    // 1 after its lane 0 in one thread takes over lane 0's ring).
    __device__ __forceinline__ void begin_lane(const u8* words, u32 nwords) {
        init(words, nwords, ring);
        start(0);
    }
    __device__ __forceinline__ void renorm(u32* x) {
        const bool need = *x < 65536u;
        *x = need ? __byte_perm(*x, w, 0x1054u) : *x;
        at += need ? 2u : 0u;
        w = lds16(ring | (at & (K1_RING_BYTES - 2u)));
    }
    __device__ __forceinline__ u32 taken_words() const { return at / 2u - first; }
};
typedef WordRingT<false> WordRing1;      // lane 0: the stream from its front
typedef WordRingT<true> WordRing1Back;  // lane 1: from its back

// Where a thread's slice's literals go: literal l to unit offset obase + l while l < end_l (token t's run), the next
// token's offset and run end loaded a token ahead. Literals are written a few at a time into aligned 8-byte words
// (a lane's stores each go to another slice, so a byte store per literal cost a memory transaction each: the 4.65
// GB generated archive's 222 M literals, 4.4 ms of its parse, session 20). `lw` is what the word `lwa` holds so
// far (NO_SLOT: none); a word's bytes that are not literals get zeros: they belong to matches of this unit, which
// nothing else writes during the parse and every resolution writes (or, for seeks, never reads) later. Words are
// stored through (a word written again holds the same bytes and more), so nothing waits for a flush.
// K1_LINEAR (parse_k1_linear): literal l to unit offset l, whatever its token: no token walk in the chain, eight
// literals one aligned word; finish_linear_k1 moves them to their offsets after the parse.
enum K1Place { K1_NONE, K1_WORDS, K1_STAMPS, K1_LINEAR };
struct LiteralSink1 {
    const u32* tp;
    const u32* li;
    u32 ntok, nlit, t, obase, end_l, n_tp, n_end, lwa;
    u64 lw;

    __device__ __forceinline__ void init(const u32* tp_, const u32* li_, u32 ntok_, u32 nlit_) {
        tp = tp_;
        li = li_;
        ntok = ntok_;
        nlit = nlit_;
        t = 0;
        obase = tp[0];  // li[0] = 0
        end_l = ntok > 1 ? li[1] : nlit;
        n_tp = ntok > 1 ? tp[1] : 0u;
        n_end = ntok > 2 ? li[2] : nlit;
        lwa = NO_SLOT;
        lw = 0;
    }
    // The unit offset of literal l (l < nlit, l increasing; the parse checked the sums, so a token holds it).
    __device__ __forceinline__ u32 offset(u32 l) {
        while (l >= end_l) {
            t++;
            obase = n_tp - end_l;
            end_l = n_end;
            n_tp = t + 1 < ntok ? tp[t + 1] : 0u;
            n_end = t + 2 < ntok ? li[t + 2] : nlit;
        }
        return obase + l;
    }
    // The low n bytes of v (1 <= n <= 8) to unit offsets o .. o + n - 1: one aligned word, or two.
    __device__ __forceinline__ void place(u8* bytes, u32 o, u64 v, u32 n) {
        const u32 a = o & ~7u, b = o & 7u;
        if (n < 8) v &= (1ull << (8 * n)) - 1;
        const u64 wa = (a == lwa ? lw : 0ull) | (v << (8 * b));
        *(u64*)(bytes + a) = wa;
        if (b + n > 8) {
            const u64 wb = v >> (64 - 8 * b);
            *(u64*)(bytes + a + 8) = wb;
            lw = wb;
            lwa = a + 8;
        } else {
            lw = wa;
            lwa = a;
        }
    }
    template <K1Place P>
    __device__ __forceinline__ void put(u8* bytes, u8* stamps, u32 l, u32 sym) {
        if constexpr (P == K1_NONE) return;
        if constexpr (P == K1_LINEAR) {
            bytes[l] = (u8)sym;
            return;
        }
        const u32 o = offset(l);
        if constexpr (P == K1_STAMPS) {
            bytes[o] = (u8)sym;
            stamps[o] = 1;  // a literal: depth 0
        } else {
            place(bytes, o, sym, 1);
        }
    }
    // Literals l .. l + 7 (l + 8 <= nlit), the bytes of v from the lowest. Mostly all eight lie in one run (atha_chr1:
    // ~200 literals a run), which is one or two word stores; else a piece per run.
    template <K1Place P>
    __device__ __forceinline__ void put8(u8* bytes, u8* stamps, u32 l, u64 v) {
        if constexpr (P == K1_NONE) return;
        if constexpr (P == K1_LINEAR) {  // l is a multiple of 8, and a unit starts 2^unit_log-aligned
            *(u64*)(bytes + l) = v;
            return;
        }
        if constexpr (P == K1_WORDS) {
            if (l + 7 < end_l) {  // then token t's run holds l (its start is at most the last literal placed + 1)
                place(bytes, obase + l, v, 8);
                return;
            }
            for (u32 k = 0; k < 8;) {
                const u32 o = offset(l + k), n = min(8 - k, end_l - (l + k));
                place(bytes, o, v >> (8 * k), n);
                k += n;
            }
        } else {
            for (u32 k = 0; k < 8; k++) put<P>(bytes, stamps, l + k, (u32)(v >> (8 * k)) & 0xFFu);
        }
    }
};

// One context-coded literal (FORMAT.md §3.5) of a rANS lane: the base `x` selects in row `e` of the current
// context, then `e` becomes the row of the next context. `o` locates the current context's four successor rows
// (((ctx << 2) | s) & mask for the bases s): SMEM, the byte offset nb·8·R of this lane's copy (see K1Rows: the four
// rows are two 16-byte loads at sr.a + o and sr.b + o); else their index nb in T, in global memory. Either way the
// next `o` is ((o << 2) | (s << sr.sh)) & sr.m, and the base is two selects, where the sum of three compares and
// ctx -> nb -> nb·mul took 11 instructions from the compares to the next loads (the staged literal loop 43.5 -> 39
// instructions a literal; H200, session 34 run 1: atha genome's entropy decode 0.411 -> 0.398 ms, fly x11's 0.375 ->
// 0.366).
template <bool SMEM, class WR>
__device__ __forceinline__ u32 k1_context_step(const uint2* T, const K1Rows& sr, u32& x, u32& o, uint2& e, WR& wr) {
    uint2 r0, r1, r2, r3;
    if constexpr (SMEM) {
        const uint4 a = lds128(sr.a + o), b = lds128(sr.b + o);
        r0 = make_uint2(a.x, a.y);
        r1 = make_uint2(a.z, a.w);
        r2 = make_uint2(b.x, b.y);
        r3 = make_uint2(b.z, b.w);
    } else {
        r0 = T[o];
        r1 = T[o + 1];
        r2 = T[o + 2];
        r3 = T[o + 3];
    }
    const u32 slot = x & 4095u;
    const u32 c1 = e.x & 0xFFFFu, c2 = e.x >> 16, c3 = e.y;
    const bool m1 = slot >= c1, m2 = slot >= c2, m3 = slot >= c3;
    // The base's slot range [lo, hi) (a base of frequency 0 has an empty one and is never chosen).
    const u32 lo = m2 ? (m3 ? c3 : c2) : (m1 ? c1 : 0u);
    const u32 hi = m2 ? (m3 ? 4096u : c3) : (m1 ? c2 : c1);
    const u32 s = m2 ? (m3 ? 3u : 2u) : (m1 ? 1u : 0u);
    x = (hi - lo) * (x >> 12) + slot - lo;
    wr.renorm(&x);
    o = ((o << 2) | (s << sr.sh)) & sr.m;
    e = m2 ? (m3 ? r3 : r2) : (m1 ? r1 : r0);
    return s;
}

// "ACGT"[s] for the bases s_k in bits 4k .. 4k + 3 of `sel`, k = 0 .. 3 (PRMT's selector).
__device__ __forceinline__ u32 acgt4(u32 sel) { return __byte_perm(0x54474341u, 0u, sel); }

// Context-coded literals [first, end) of a slice, one rANS lane's (`T` the model's rows, shared or global memory;
// the context starts at 0, as it does at each lane's first literal, FORMAT.md §3.5), eight at a time: the bases
// gather into a PRMT selector (an IMAD a literal) and go out as one 8-byte piece, so the token walk and the word
// merging are once every eight literals, not in every step of the chain. `first` is 0 or a multiple of 8 (the
// lane split), so K1_LINEAR's pieces stay aligned.
template <bool SMEM, K1Place P, class WR>
__device__ __forceinline__ void k1_context_literals(const uint2* T, u32 mask, u32 first, u32 end, u32* xp, WR& wr,
                                                    LiteralSink1& sink, u8* bytes, u8* stamps) {
    u32 x = *xp, o = 0;  // context 0: its successors are rows 0 .. 3
    uint2 e = T[0];      // row 0 (in shared memory the first 8 bytes of copy 0)
    // This lane's copy as shared window addresses, once: through a generic pointer every step converted it again
    // (S2UR and ULEA in the loop, session 23 run 5). In global memory `o` is a row index: nb itself.
    K1Rows sr = {0u, 0u, 2u, mask};
    if constexpr (SMEM) {
        const u32 rlog = k1_ctx_copies_log((32u - __clz(mask)) / 2u);
        sr.a = (u32)__cvta_generic_to_shared(T) + 16u * (threadIdx.x & ((1u << rlog) - 1u));
        sr.b = sr.a + (16u << rlog);
        sr.sh = 5u + rlog;         // nb·8·R = nb << (3 + rlog), and s enters nb two bits up
        sr.m = mask << (3u + rlog);
    }
    u32 l = first;
    for (; l + 8 <= end; l += 8) {
        wr.refill();
        u32 sel = 0;
#pragma unroll
        for (u32 k = 0; k < 8; k++) sel |= k1_context_step<SMEM>(T, sr, x, o, e, wr) << (4 * k);
        sink.put8<P>(bytes, stamps, l, (u64)acgt4(sel & 0xFFFFu) | ((u64)acgt4(sel >> 16) << 32));
    }
    for (; l < end; l++) sink.put<P>(bytes, stamps, l, acgt4(k1_context_step<SMEM>(T, sr, x, o, e, wr)));
    *xp = x;
}

// One LIT-table literal of a rANS lane (`L` the group's 4096 slot entries, dtab layout, shared or global): its
// byte. A slot with no symbol sets `bad` and decodes on as if it had one (the slice is refused after the loop).
template <class WR>
__device__ __forceinline__ u32 k1_table_step(const u32* L, u32& x, WR& wr, bool& bad) {
    const u32 slot = x & 4095u;
    const u32 e = L[slot];
    bad |= e == 0xFFFFFFFFu;
    x = (((e >> 8) & 0xFFFu) + 1) * (x >> 12) + slot - (e >> 20);
    wr.renorm(&x);
    return e & 0xFFu;
}

// LIT-table literals [first, end) of one rANS lane, eight at a time as in k1_context_literals.
template <K1Place P, class WR>
__device__ __forceinline__ void k1_table_literals(const u32* L, u32 first, u32 end, u32* xp, WR& wr,
                                                  LiteralSink1& sink, u8* bytes, u8* stamps, bool* bad) {
    u32 x = *xp;
    bool b = false;
    u32 l = first;
    for (; l + 8 <= end; l += 8) {
        wr.refill();
        u64 v = 0;
#pragma unroll
        for (u32 k = 0; k < 8; k++) v |= (u64)k1_table_step(L, x, wr, b) << (8 * k);
        sink.put8<P>(bytes, stamps, l, v);
    }
    for (; l < end; l++) sink.put<P>(bytes, stamps, l, k1_table_step(L, x, wr, b));
    *bad |= b;
    *xp = x;
}

// Literals [first, end) of unit `id`, one rANS lane's, from its state *x and words `wr`.
template <K1Place P, class WR>
__device__ __forceinline__ void k1_literals(const Ctx& c, u32 id, bool lit_ctx, u32 first, u32 end, u32* x, WR& wr,
                                            LiteralSink1& sink, u8* bytes, u8* stamps, const K1Tables* k1, bool* bad) {
    const u64 grp = id >> c.group_shift;
    const bool local = k1 != nullptr && k1->group == grp;
    if (lit_ctx) {
        const LitModel lm = lit_model_of(c, id);
        if (local && k1->ctx_first != NO_SLOT)
            k1_context_literals<true, P>(k1->ctx, lm.mask, first, end, x, wr, sink, bytes, stamps);
        else
            k1_context_literals<false, P>(lm.t, lm.mask, first, end, x, wr, sink, bytes, stamps);
    } else {
        const u32* L = local ? k1->lit : c.dtab + grp * 4 * 4096 + 3 * 4096;
        k1_table_literals<P>(L, first, end, x, wr, sink, bytes, stamps, bad);
    }
}

// One rANS lane's literals [first, end) in the placement `mode` asks for: MODE_FULL, to their unit offsets (K1_WORDS,
// or K1_STAMPS when the parse writes stamps; LINEAR, in literal order, K1_LINEAR, with no stamps), else decoded
// only (K1_NONE).
template <bool LINEAR, class WR>
__device__ __forceinline__ void k1_lane_literals(const Ctx& c, u32 id, bool lit_ctx, u32 first, u32 end, u32* x,
                                                 WR& wr, LiteralSink1& sink, u8* bytes, u8* stamps, u32 mode,
                                                 const K1Tables* k1, bool* bad) {
    if (mode == MODE_FULL) {
        if constexpr (LINEAR) {
            k1_literals<K1_LINEAR>(c, id, lit_ctx, first, end, x, wr, sink, bytes, stamps, k1, bad);
        } else if (stamps) {
            k1_literals<K1_STAMPS>(c, id, lit_ctx, first, end, x, wr, sink, bytes, stamps, k1, bad);
        } else {
            k1_literals<K1_WORDS>(c, id, lit_ctx, first, end, x, wr, sink, bytes, stamps, k1, bad);
        }
    } else {
        k1_literals<K1_NONE>(c, id, lit_ctx, first, end, x, wr, sink, bytes, stamps, k1, bad);
    }
}

// The literal phase of a slice (symbols [3 nmatch + 1, N) of its stream, FORMAT.md §3.4): rANS lane 0's literals
// [0, s) from the state `x` and word position `pos` its code phase left, its words read through `wr`; then, unless
// LINEAR with K = 2 (parse_k1_linear decodes lane 1 on a thread of its own, see lane1_literals), lane 1's literals
// [s, nlit) in this thread from state[1], its words from the stream's back through `wr1` (a WordReader1Back, or the
// staged parse's WordRing1Back over the ring lane 0 is done with), the sink standing at literal s. Each literal to
// its unit offset in `bytes` (mode MODE_FULL; LINEAR: literal l to offset l), or decoded only (MODE_NO_LITERALS,
// MODE_ENTROPY_ONLY, which also leaves the token arrays alone); then the end-of-stream checks: both lanes end at
// 2^16 and their words add up to the stream's (LINEAR with K = 2: lane 0 leaves its count in lane_end and
// finish_linear_k1 checks the sum).
template <bool LINEAR, class WR, class WR1>
__device__ __forceinline__ void literal_phase_k1_with(const Ctx& c, u32 id, u32* tp, const u32* li, u8* bytes,
                                                       u8* stamps, u32 mode, u32 x, u32 pos, const K1Tables* k1,
                                                       WR& wr, WR1& wr1) {
    const u32* m = c.meta + (u64)id * META_WORDS;
    const u32 nmatch = m[2], nlit = m[3], nwords = m[4];
    const bool lit_ctx = (m[6] & META_CTX) != 0;
    const u32 s = lane_split(nmatch, nlit, c.lanes);
    LiteralSink1 sink;
    bool bad = false;
    if (!LINEAR && mode == MODE_FULL) sink.init(tp, li, nmatch + 1, nlit);  // K1_LINEAR walks no tokens
    k1_lane_literals<LINEAR>(c, id, lit_ctx, 0, s, &x, wr, sink, bytes, stamps, mode, k1, &bad);
    // Words lane 0 took, code phase included; more than the stream holds (they read as 0) is a stream that ran out.
    const u32 taken0 = pos + wr.taken_words();
    if constexpr (LINEAR) {
        if (c.lanes == 2) {
            if (mode == MODE_ENTROPY_ONLY) tp[0] = taken0;  // a visible result: the decode is not dead code
            if (bad || x != 65536u || taken0 > nwords) report(c.status, bad || taken0 > nwords ? E_WORDS : E_FINAL, id);
            c.lane_end[2ull * id] = taken0;
            return;
        }
    }
    u32 x1 = 65536u, taken1 = 0;  // lane 1 (K = 1: empty, no state)
    if constexpr (!LINEAR) {
        if (c.lanes == 2) {
            const u8* states = slice_states(c, m);
            x1 = load_u32_le(states + 4);
            bad |= x1 < 65536u;  // an encoder never leaves a state below 2^16
            wr1.begin_lane(states + 8, nwords);
            k1_lane_literals<LINEAR>(c, id, lit_ctx, s, nlit, &x1, wr1, sink, bytes, stamps, mode, k1, &bad);
            taken1 = wr1.taken_words();
        }
    }
    const u32 taken = taken0 + taken1;
    if (mode == MODE_ENTROPY_ONLY) tp[0] = taken;  // a visible result: the decode is not dead code
    bad |= taken > nwords;
    if (bad || x != 65536u || x1 != 65536u || taken != nwords) report(c.status, bad ? E_WORDS : E_FINAL, id);
}

// The literal phase of a slice (see literal_phase_k1_with): STAGED, its words through the WordRing1 `ring` the
// parse staged (parse_k1_staged, parse_k1_linear) and lane 1's through a WordRing1Back in the same ring, else through
// a WordReader1 and a WordReader1Back; LINEAR (parse_k1_linear), its literals in literal order (K1_LINEAR).
template <bool STAGED = false, bool LINEAR = false>
__device__ __forceinline__ void literal_phase_k1(const Ctx& c, u32 id, u32* tp, const u32* li, u8* bytes, u8* stamps,
                                                  u32 mode, u32 x, u32 pos, const K1Tables* k1,
                                                  WordRing1* ring = nullptr) {
    if constexpr (STAGED) {
        ring->start(pos);
        WordRing1Back r1;
        r1.ring = ring->ring;
        literal_phase_k1_with<LINEAR>(c, id, tp, li, bytes, stamps, mode, x, pos, k1, *ring, r1);
    } else {
        const u32* m = c.meta + (u64)id * META_WORDS;
        WordReader1 wr;
        wr.init(slice_states(c, m) + 4 * c.lanes, m[4], pos);
        WordReader1Back r1;
        literal_phase_k1_with<false>(c, id, tp, li, bytes, stamps, mode, x, pos, k1, wr, r1);
    }
}

// Lane 1 of a K = 2 slice in parse_k1_linear, on a thread of its own beside the one that runs the slice's code
// phase and lane 0 (FORMAT.md §3.4: the lanes share no state): literals [s, nlit) from state[1], the
// context from 0, its words from the stream's back staged in its own ring (WordRing1Back at shared window address
// `ring`), each written at unit offset l in literal order (K1_LINEAR: s is a multiple of 8, so the 8-byte pieces
// stay aligned and never touch lane 0's literals) for finish_linear_k1 to move; then its final state is checked
// here and its word count left in lane_end for finish_linear_k1 to add to lane 0's.
__device__ __forceinline__ void lane1_literals(const Ctx& c, u32 id, u8* bytes, u32 mode, const K1Tables* k1,
                                               u32 ring) {
    const u32* m = c.meta + (u64)id * META_WORDS;
    if (m[7] == BAD_ENTRY) return;  // reported by lane 0's thread
    const u32 nmatch = m[2], nlit = m[3], nwords = m[4];
    const bool lit_ctx = (m[6] & META_CTX) != 0;
    const u32 s = lane_split(nmatch, nlit, 2);
    const u8* states = slice_states(c, m);
    u32 x = load_u32_le(states + 4);
    bool bad = x < 65536u;  // an encoder never leaves a state below 2^16
    u32 taken = 0;
    if (s < nlit) {
        WordRing1Back wr;
        wr.init(states + 8, nwords, ring);
        wr.start(0);
        LiteralSink1 sink;  // K1_LINEAR needs no tokens
        if (mode == MODE_FULL) k1_literals<K1_LINEAR>(c, id, lit_ctx, s, nlit, &x, wr, sink, bytes, nullptr, k1, &bad);
        else k1_literals<K1_NONE>(c, id, lit_ctx, s, nlit, &x, wr, sink, bytes, nullptr, k1, &bad);
        taken = wr.taken_words();
    }
    if (bad || x != 65536u || taken > nwords) report(c.status, bad || taken > nwords ? E_WORDS : E_FINAL, id);
    c.lane_end[2ull * id + 1] = taken;
}

// A slice's extra-bits stream read in order, LSB first (FORMAT.md §3.2), for the staged token parse (a thread a
// slice): a 64-bit buffer topped up by one aligned 32-bit word when a take needs more bits than it holds, where read_bits loads a
// byte at a time at every field's own offset. As in WordRing1, aligned words wholly past the stream are not loaded
// (they read as 0); the caller checks each token's bits against the stream's length before taking them. (Loading
// each word a refill ahead with a branch-free, predicated refill was slower: the token parse +0.006 ms on atha in
// both modes, session 32 run 2; the load is not on the loop's critical path.)
struct BitReader1 {
    const u32* p;    // the next aligned word to load
    const u32* end;  // the first aligned word wholly past the stream
    u64 buf;         // bits not yet taken, from the lowest
    u32 have;        // bits in buf (at most 63)

    __device__ __forceinline__ u32 word() {
        const u32 v = p < end ? __ldg(p) : 0u;
        p++;
        return v;
    }
    __device__ __forceinline__ void init(const u8* extra, u32 len) {
        const u32* a0 = (const u32*)((u64)extra & ~3ull);
        const u32 shift = 8u * (u32)((u64)extra & 3u);
        end = (const u32*)(((u64)(extra + len) + 3) & ~3ull);
        p = a0;
        buf = word() >> shift;
        have = 32u - shift;
    }
    // The next n bits (n <= 32).
    __device__ __forceinline__ u32 take(u32 n) {
        if (have < n) {
            buf |= (u64)word() << have;
            have += 32;
        }
        const u32 v = (u32)buf & (n >= 32 ? 0xFFFFFFFFu : (1u << n) - 1u);
        buf >>= n;
        have -= n;
        return v;
    }
    // The next n bits (n <= 64).
    __device__ __forceinline__ u64 take64(u32 n) {
        if (n <= 32) return take(n);
        const u64 lo = take(32);
        return lo | ((u64)take(n - 32) << 32);
    }
};

// Phase B of parse_one for a staged slice (parse_k1_staged, parse_k1_linear): the same values, checks and
// outputs as the generic group loop in parse_one (whose collectives are identities at W = 1), one token a step
// with the extra bits from a BitReader1, 32-bit sums, and the next token's codes loaded a step ahead. (The generic
// loop took ~300 instructions a token at W = 1, its read_bits a byte load at a time: ~9 % of parse_k1_staged's
// samples on atha_chr1 in genome mode, session 31 run 3; this loop: the token parse 0.062 -> 0.024 ms there, 0.27 ->
// 0.19 in general mode, session 32 run 1.) Stops at the first bad token (the caller reports
// E_VALUE; what a bad token left in the arrays is never read) and returns whether there was one; otherwise
// `*bits`, `*lits` and `*span` are the extra bits taken, the literals and the bytes the tokens cover.
__device__ __forceinline__ bool k1_token_values(u32* tp, u32* mp, u32* li, u64* bk, u32 ntok, u32 nmatch,
                                                const u8* extra, u32 extra_len, u32 unit_len, u64 unit_start,
                                                u64* bits, u32* lits, u32* span) {
    BitReader1 br;
    br.init(extra, extra_len);
    const u64 total_bits = 8ull * extra_len;
    u64 taken = 0;
    u32 lit_run = 0, pos_run = 0;
    u64 prev_diag = 0;  // the diagonal of the last match (RC_FLAG marks an anti-diagonal), as in parse_one
    bool have_prev = false;
    u32 llc = tp[0], mlc = nmatch > 0 ? mp[0] : 0u, ofc = nmatch > 0 ? (u32)bk[0] : 0u;
#pragma unroll 1
    for (u32 t = 0; t < ntok; t++) {
        const bool has_match = t < nmatch;
        u32 nll = 0, nml = 0, nof = 0;
        if (t + 1 < ntok) nll = tp[t + 1];
        if (t + 1 < nmatch) {
            nml = mp[t + 1];
            nof = (u32)bk[t + 1];
        }
        const u32 nb_ll = extra_bits_of(llc);
        const u32 nb_ml = has_match ? extra_bits_of(mlc) : 0u;
        const u32 nb_of = has_match ? of_extra_bits(ofc) : 0u;
        const u32 nb = nb_ll + nb_ml + nb_of;
        // A code outside its alphabet: an OF code refused as in parse_one, an LL or ML code with more than 32
        // extra bits a value above 2^33, past any unit's length (parse_one refuses the value).
        if (taken + nb > total_bits || nb_ll > 32 || nb_ml > 32 || (has_match && ofc >= OF_ALPHABET)) return true;
        taken += nb;
        const u64 lit = log_value(llc, br.take(nb_ll));
        u64 len = 0, dist = 0;
        if (has_match) {
            len = log_value(mlc, br.take(nb_ml)) + 2;
            dist = log_value(of_log_code(ofc), br.take64(nb_of)) + 1;
        }
        if (lit > unit_len || len > unit_len) return true;
        const u32 my_lit = lit_run, my_pos = pos_run;
        lit_run += (u32)lit;
        pos_run += (u32)(lit + len);
        if (lit_run > unit_len || pos_run > unit_len) return true;
        const u64 dst = unit_start + my_pos + lit;
        bool rc = has_match && ofc >= OF_REVERSE;
        if (has_match && is_continuation(ofc)) {
            // No explicit match before it in the slice: invalid (see parse_one).
            if (!have_prev) return true;
            prev_diag += (u64)continuation_delta(ofc);
            rc = match_rc(prev_diag);
            dist = rc ? 2ull * dst - match_dist(prev_diag) : prev_diag;
        } else if (has_match) {
            prev_diag = rc ? ((2ull * dst - dist) | RC_FLAG) : dist;
            have_prev = true;
        }
        if (dist > dst || (has_match && dist == 0) || (rc && dist + len - 1 > dst)) return true;
        tp[t] = my_pos;
        mp[t] = my_pos + (u32)lit;
        li[t] = my_lit;
        bk[t] = rc ? (dist | RC_FLAG) : dist;
        llc = nll;
        mlc = nml;
        ofc = nof;
    }
    *bits = taken;
    *lits = lit_run;
    *span = pos_run;
    return false;
}

// Phase B of a slice's parse on a group of W lanes: codes -> values with extra bits; token offsets, match starts and
// literal indices by group prefix sums; continuation distances by a segmented prefix sum over the matches'
// diagonals, carried from chunk to chunk in `prev_diag` / `have_prev`. A forward match's diagonal is its back; a
// reverse complement's is its anti-diagonal 2 dst - back (dst + the source's last byte) with RC_FLAG. An explicit
// match heads a segment with its diagonal, a continuation adds its delta (two's complement) and takes the segment's
// kind. The codes come in tp / mp / bk (as the code phase left them) and the values go back in their place; the
// bits, literals and bytes the tokens cover to *bits, *lits, *span for token_sums_fault. True: a value out of range
// (E_VALUE), the arrays then partly rewritten. (W = 1 staged parses run k1_token_values instead: the same values and
// checks, one token a step.)
template <int W>
__device__ __forceinline__ bool group_token_values(const Group<W>& g, u32* tp, u32* mp, u32* li, u64* bk, u32 ntok,
                                                   u32 nmatch, const u8* extra, u32 extra_len, u32 unit_len,
                                                   u64 unit_start, u64* bits, u32* lits, u32* span) {
    const u32 lane = g.lane;
    const u64 extra_bits_total = 8ull * extra_len;
    u64 bit_run = 0;
    u32 lit_run = 0, pos_run = 0;
    bool bad = false;
    u64 prev_diag = 0;
    bool have_prev = false;
    for (u32 chunk = 0; chunk < ntok; chunk += W) {
        u32 t = chunk + lane;
        bool has = t < ntok;
        bool has_match = t < nmatch;
        u32 llc = has ? tp[t] : 0;
        u32 mlc = has_match ? mp[t] : 0;
        u32 ofc = has_match ? (u32)bk[t] : 0;
        u32 nb_ll = extra_bits_of(llc), nb_ml = has_match ? extra_bits_of(mlc) : 0;
        u32 nb_of = has_match ? of_extra_bits(ofc) : 0;
        u32 nb = nb_ll + nb_ml + nb_of;
        u32 incl = g.scan(nb);
        u64 bitpos = bit_run + incl - nb;
        bit_run += g.last(incl);
        u64 lit = 0, len = 0, dist = 0;
        if (has) {
            if (bitpos + nb > extra_bits_total) {
                bad = true;
            } else {
                lit = log_value(llc, read_bits(extra, bitpos, nb_ll));
                if (has_match) {
                    len = log_value(mlc, read_bits(extra, bitpos + nb_ll, nb_ml)) + 2;
                    dist = log_value(of_log_code(ofc), read_bits(extra, bitpos + nb_ll + nb_ml, nb_of)) + 1;
                }
            }
        }
        if (lit > unit_len || len > unit_len) {
            bad = true;
            lit = 0;
            len = 0;
        }
        u32 lit32 = (u32)lit, span = (u32)(lit + len);
        u32 lit_incl = g.scan(lit32);
        u32 span_incl = g.scan(span);
        u32 my_lit = lit_run + lit_incl - lit32;
        u32 my_pos = pos_run + span_incl - span;
        lit_run += g.last(lit_incl);
        pos_run += g.last(span_incl);
        if (lit_run > unit_len || pos_run > unit_len) bad = true;
        // Absolute destination of this token's match (sums checked against unit_len above, so no overflow).
        const u64 dst = unit_start + my_pos + lit;
        bool rc = has_match && ofc >= OF_REVERSE;
        {
            const bool cont = has_match && is_continuation(ofc);
            bool head = has_match && !cont;
            // An explicit reverse complement's anti-diagonal needs dist <= dst to be meaningful; a larger dist
            // is refused below either way.
            const u64 diag = rc ? ((2ull * dst - dist) | RC_FLAG) : dist;
            u64 v = head ? diag : (cont ? (u64)continuation_delta(ofc) : 0ull);
            v = g.seg_scan(v, &head);
            if (!head) {
                v += prev_diag;
                head = have_prev;
            }
            if (cont) {
                // No explicit match before it in the slice: invalid. A back that went below 1 or past dst wrapped
                // to a huge value and fails the checks below, like one that reaches before the stream start.
                if (!head) bad = true;
                rc = match_rc(v);
                dist = rc ? 2ull * dst - match_dist(v) : v;
            }
            prev_diag = g.last64(v);
            have_prev = g.last(head ? 1u : 0u) != 0;
        }
        if (has_match && ofc >= OF_ALPHABET) bad = true;
        if (has) {
            if (dist > dst || (has_match && dist == 0) || (rc && dist + len - 1 > dst)) bad = true;
            tp[t] = my_pos;
            mp[t] = my_pos + (u32)lit;
            li[t] = my_lit;
            bk[t] = rc ? (dist | RC_FLAG) : dist;
        }
        if (g.any(bad)) break;
    }
    *bits = bit_run;
    *lits = lit_run;
    *span = pos_run;
    return g.any(bad);
}

// The checks after a slice's token values (group_token_values, k1_token_values): the extra stream consumed to its
// last byte, whose unused high bits are zero (E_EXTRA), and the tokens covering exactly the slice's literals and
// bytes (E_SUMS); 0 when they hold.
__device__ __forceinline__ u32 token_sums_fault(u64 bit_run, u32 lit_run, u32 pos_run, const u8* extra, u32 extra_len,
                                                u32 nlit, u32 unit_len) {
    if (bit_run > 8ull * extra_len || (bit_run + 7) / 8 != extra_len ||
        (extra_len > 0 && (bit_run & 7) != 0 && (extra[extra_len - 1] >> (bit_run & 7)) != 0))
        return E_EXTRA;
    if (lit_run != nlit || pos_run != unit_len) return E_SUMS;
    return 0;
}

// The `n` codes of one table (at shared window addresses `syms`, a symbol a slot, and `fc`, freq | cum << 16 a
// symbol; see CodeTables) of a staged code phase, each to out[t] when `store`: one symbol a step from state x, its
// words through `wr`, refilled every eight codes (`done` counts them). A symbol of frequency 0 (a slot no symbol
// covers, or an unused table) sets the result and decodes on (x stays a u32 and every index in range: the symbols
// of a host-built CodeTables are below their alphabet's size); the caller refuses the slice. (Unrolled by eight
// codes a refill, ~16 instructions a code instead of ~32, the full decode got slower on atha genome, 0.415 -> 0.446
// ms, and fly x11, 0.480 -> 0.51; H200, session 37 run 7.)
template <class T, class WR>
__device__ __forceinline__ bool k1_code_run(u32 syms, u32 fc, u32 n, T* out, bool store, u32& x, WR& wr, u32& done) {
    bool bad = false;
    for (u32 t = 0; t < n; t++) {
        if ((done++ & 7u) == 0) wr.refill();
        const u32 slot = x & 4095u;
        const u32 sym = lds_u8(syms + slot);
        const u32 f = lds32(fc + 4u * sym);
        bad |= f == 0;
        x = (f & 0xFFFFu) * (x >> 12) + slot - (f >> 16);
        wr.renorm(&x);
        if (store) out[t] = sym;
    }
    return bad;
}

// The code phase of a staged slice (parse_k1_staged, parse_k1_linear) with its group's code tables in the CTA's
// shared memory (K1Tables): the LL codes of the ntok tokens to tp, then the ML and OF codes of the nmatch matches to
// mp and bk, from rANS lane 0's state x and its words through `wr` (the ring). True when a code had no symbol.
// Each table's run is a loop of its own over shared window addresses with no branch in the step (~32 instructions
// a code): the loop that chose the table and the output array a code, through generic pointers, took ~90 (SASS),
// and a code-heavy slice's lane 0 is among the longest chains of atha genome's parse (up to 751 codes; a warp's
// lane-0 threads run their code phases and their literals as two divergent loops). H200, session 37 run 5, full
// decode: atha genome 0.454 -> 0.411 ms (entropy alone 0.262 -> 0.235), general 0.612 -> 0.591, fly x11 0.508 ->
// 0.477. (One shared load a code, from the tables in the dtab layout after the rings, 48 KB more shared memory a
// CTA, was slower: atha genome 0.393 -> 0.415 ms, general 0.564 -> 0.574, fly 0.483 -> 0.501; run 9.)
template <class WR>
__device__ __forceinline__ bool k1_codes_shared(const CodeTables* sm, u32* tp, u32* mp, u64* bk, u32 ntok,
                                                u32 nmatch, bool store, u32& x, WR& wr) {
    const u32 syms = (u32)__cvta_generic_to_shared(sm->syms), fc = (u32)__cvta_generic_to_shared(sm->fc);
    u32 done = 0;
    bool bad = k1_code_run(syms, fc, ntok, tp, store, x, wr, done);
    bad |= k1_code_run(syms + 4096u, fc + 4u * 64u, nmatch, mp, store, x, wr, done);
    bad |= k1_code_run(syms + 2u * 4096u, fc + 4u * 128u, nmatch, bk, store, x, wr, done);
    return bad;
}

// One group of W lanes (W = 1, or W = 32: the seek's token levels) decodes one unit (slice): the code phase on the
// group's lane 0 (every code is rANS lane 0's, FORMAT.md §3.4), token parse by group prefix sums, then (unless
// `mode` is MODE_TOKENS, which saves lane 0's state in `resume` instead) the literals of both rANS lanes, on the
// group's lane 0 (literal_phase_k1), to their unit offsets in `bytes` (a unit-local buffer of 2^unit_log bytes).
// LINEAR (parse_k1_linear) leaves the token parse to finish_linear_k1.
// STAGED (W = 1, parse_k1_staged): the literal phase reads the word stream through a WordRing1 at shared window
// address `ring`; LINEAR (parse_k1_linear) too, and it writes the literals in literal order.
template <int W, bool STAGED = false, bool LINEAR = false>
__device__ __forceinline__ void parse_one(const Ctx& c, const Group<W>& g, u32 id, u64 tok_base, u8* bytes,
                                          u8* stamps, u32 mode, u32* resume, const CodeTables* sm,
                                          const K1Tables* k1 = nullptr, u32 ring = 0) {
    const u8* file = c.file;
    u64* status = c.status;
    const u32 lane = g.lane;
    const u32* m = c.meta + (u64)id * META_WORDS;
    const u32 unit_len = m[7];
    if (unit_len == BAD_ENTRY) {
        if (lane == 0) report(status, E_HEADER, id);
        return;
    }
    if (stamps) {
        // Every byte of the slot starts unresolved; phase C stamps the literals.
        uint4* z = (uint4*)stamps;
        for (u32 i = lane; i < (1u << c.unit_log) / 16; i += W) z[i] = make_uint4(0, 0, 0, 0);
        g.sync();
    }
    const u64 payload = (u64)m[0] | ((u64)m[1] << 32);
    const u32 nmatch = m[2], nlit = m[3], nwords = m[4], extra_len = m[5], hdr_len = m[6] & META_HDR_MASK;
    const u32 ntok = nmatch + 1;
    const u8* states = file + payload + hdr_len;
    const u32 K = c.lanes;  // 4 K bytes of states before the words
    const u8* words = states + 4 * K;
    const u8* extra = words + 2ull * nwords;
    const u32* tab = c.dtab + (u64)(id >> c.group_shift) * 4 * 4096;
    const u64 unit_start = (u64)id << c.unit_log;
    u32* tp = c.tpos + tok_base;
    u32* mp = c.mpos + tok_base;
    u32* li = c.lidx + tok_base;
    u64* bk = c.back + tok_base;
    // Bring the slice's payload towards the SM now: the rANS loop reads it a word at a time (a seek level's
    // latency is this loop's).
    {
        const u64 len = hdr_len + 4ull * K + 2ull * nwords + extra_len;
        // Staged without K1_STAGED_PREFETCH: the word stream past its first 256 bytes is left to the ring's loads.
        const u64 skip_from = STAGED && !K1_STAGED_PREFETCH ? hdr_len + 4ull * K + 256 : len;
        const u64 skip_to = hdr_len + 4ull * K + 2ull * nwords;
        for (u64 off = (u64)lane * 128; off < len; off += 128ull * W)
            if (off < skip_from || off >= skip_to) asm volatile("prefetch.global.L1 [%0];" ::"l"(file + payload + off));
    }
    // STAGED: the word stream's first ring's worth into this unit's ring now (see WordRing1).
    WordRing1 wring;
    if constexpr (W == 1 && STAGED) wring.init(words, nwords, ring);

    // W = 1: the CTA's tables in shared memory serve the slices of its group (see K1Tables).
    if (W == 1 && k1 != nullptr && k1->group == (u64)(id >> c.group_shift)) sm = &k1->code;
    if (mode == MODE_TOKENS && !sm) prefetch_l1_shared(tab, 3 * 4096 * 4);  // the LL, ML and OF tables

    // Phase A: entropy-decode the LL, ML and OF codes (symbols [0, 3 nmatch + 1), the first of rANS lane 0) into
    // the token arrays, on the group's lane 0 from state[0] and the words at the stream's front. The other lanes
    // hold x = 2^16 and take no word.
    u32 x = lane == 0 ? load_u32_le(states) : 65536u;
    WordWindow<W> ww;  // the generic code phase's words (the staged parses read theirs from `wring`)
    if constexpr (!(W == 1 && STAGED)) ww.init(words, nwords, lane);
    // An encoder never leaves a state below 2^16 (the CPU decoder refuses it too).
    bool bad = x < 65536u;
    const u32 ncodes = 3u * nmatch + 1u;

    if constexpr (W == 1 && STAGED) {
        // Staged: the code phase's own loops, its words from the ring too (which holds the stream from word 0): the
        // LL codes of the ntok tokens, then the ML and the OF codes of the nmatch matches, one symbol a step; from the
        // CTA's code tables (k1_codes_shared) when they are this slice's group's, else from the group's tables in
        // global memory, as below. (The generic loop below took ~90 instructions a code, branches and 64-bit
        // indices included: ~10 % of parse_k1_staged's samples on atha genome, session 31 run 3; this loop: its full
        // decode 0.72 -> 0.67 ms, run 5.)
        wring.start(0);
        if (sm) {
            bad |= k1_codes_shared(sm, tp, mp, bk, ntok, nmatch, mode != MODE_ENTROPY_ONLY, x, wring);
        } else {
            u32 done = 0;  // codes decoded: a refill every eight (each takes at most one word)
#pragma unroll 1
            for (u32 which = 0; which < 3 && !bad; which++) {
                const u32 n = which == 0 ? ntok : nmatch;
                for (u32 t = 0; t < n; t++) {
                    if ((done++ & 7u) == 0) wring.refill();
                    const u32 slot = x & 4095u;
                    const u32 e = tab[which * 4096 + slot];
                    if (e == 0xFFFFFFFFu) {
                        bad = true;
                        break;
                    }
                    const u32 sym = e & 0xFF;
                    x = (((e >> 8) & 0xFFF) + 1) * (x >> 12) + slot - (e >> 20);
                    wring.renorm(&x);
                    if (mode != MODE_ENTROPY_ONLY) {
                        if (which == 0) tp[t] = sym;
                        else if (which == 1) mp[t] = sym;
                        else bk[t] = sym;
                    }
                }
            }
        }
    } else {
        // The generic loop: one code a step on lane 0, its words from the group's window.
        for (u32 i = 0; i < ncodes; i++) {
            bool act = lane == 0;
            if (act) {
                const u32 slot = x & 4095u;
                const u32 which = i < ntok ? 0u : (i < 2u * nmatch + 1u ? 1u : 2u);
                const u32 e = sm ? code_entry(sm, which, slot) : tab[which * 4096 + slot];
                if (e == 0xFFFFFFFFu) {
                    bad = true;
                    act = false;
                } else {
                    const u32 sym = e & 0xFF, freq = ((e >> 8) & 0xFFF) + 1, cum = e >> 20;
                    x = freq * (x >> 12) + slot - cum;
                    if (mode != MODE_ENTROPY_ONLY) {
                        if (which == 0) tp[i] = sym;
                        else if (which == 1) mp[i - ntok] = sym;
                        else bk[i - (2u * nmatch + 1u)] = sym;
                    }
                }
            }
            ww.take(g, act && x < 65536u, &x, &bad);
        }
    }
    if (g.any(bad)) {
        if (lane == 0) report(status, E_SYMBOL, id);
        return;
    }
    // Words the code phase took: where lane 0's literals start.
    u32 code_words;
    if constexpr (W == 1 && STAGED) code_words = wring.taken_words();
    else code_words = ww.pos;
    // MODE_ENTROPY_ONLY stops at the symbols. LINEAR leaves the token values to finish_linear_k1, a warp a unit
    // after the parse, so that the chain a thread runs is only its rANS symbols (the codes stay in tp / mp / bk).
    if (LINEAR || mode == MODE_ENTROPY_ONLY) {
        if (lane == 0) literal_phase_k1<STAGED, LINEAR>(c, id, tp, li, bytes, stamps, mode, x, code_words, k1, &wring);
        return;
    }
    g.sync();

    // Phase B: the token values (group_token_values; the staged parses k1_token_values) and their sums.
    u64 bit_run = 0;
    u32 lit_run = 0, pos_run = 0;
    if constexpr (W == 1 && STAGED) {
        bad = k1_token_values(tp, mp, li, bk, ntok, nmatch, extra, extra_len, unit_len, unit_start, &bit_run, &lit_run,
                              &pos_run);
    } else {
        bad = group_token_values<W>(g, tp, mp, li, bk, ntok, nmatch, extra, extra_len, unit_len, unit_start, &bit_run,
                                    &lit_run, &pos_run);
    }
    if (g.any(bad)) {
        if (lane == 0) report(status, E_VALUE, id);
        return;
    }
    if (const u32 fault = token_sums_fault(bit_run, lit_run, pos_run, extra, extra_len, nlit, unit_len)) {
        if (lane == 0) report(status, fault, id);
        return;
    }
    if (mode == MODE_TOKENS) {
        // The literals come later (literals_k1, literals_warp): save where lane 0 of the rANS stream stands.
        if (lane == 0) {
            resume[0] = code_words;
            resume[1] = x;
        }
        return;
    }
    g.sync();
    if (lane == 0) literal_phase_k1<STAGED, LINEAR>(c, id, tp, li, bytes, stamps, mode, x, code_words, k1, &wring);
}


// Parses worklist entries [level_begin(level), count): a group of W lanes per entry (W = 1: a thread; W = 32: a
// warp, the seek's token levels). Entry e's bytes go to bytes + e << unit_log and its tokens to tok_off[e]. Marks
// each parsed unit's slot for the later levels.
// STAGED (W = 1, parse_k1_staged): each unit of the CTA gets a ring of K1_RING_BYTES in the launch's dynamic shared
// memory for its word stream (the launch gives (rings a CTA + 1) x K1_RING_BYTES: the rings are aligned to their
// size), see WordRing1.
// LINEAR (parse_k1_linear) with K = 2: the CTA's first half of warps runs lane 0 of its units (code phase, then
// literals [0, s); the token values come after, in finish_linear_k1), the second half lane 1 (lane1_literals:
// literals [s, nlit)), warp w + half taking the units of warp w, so that each unit's two serial rANS chains run at
// once and no warp diverges on the code phase; a ring a thread (2 units' worth a unit). It writes no stamps (the
// host runs it without).
template <int W, bool STAGED = false, bool LINEAR = false>
__device__ __forceinline__ void parse_units(const Ctx& c, u32 level, u32 mode) {
    extern __shared__ uint4 dyn_smem[];
    const u32 begin = *level_begin(c, level);
    const u32 end = min(c.counters[0], c.wl_cap);
    if (blockIdx.x == 0 && threadIdx.x == 0) *level_begin(c, level + 1) = end;
    // MODE_SMEM (W = 32 only): this warp's CodeTables in the launch's dynamic shared memory.
    CodeTables* sm = nullptr;
    if (W == 32 && (mode & MODE_SMEM)) sm = (CodeTables*)((u8*)dyn_smem + (threadIdx.x / 32) * CODE_SMEM_BYTES);
    // W = 1: a unit is one thread's serial rANS chain, on the first `lanes` lanes of each warp (the others idle).
    // With few units (atha_chr1: 7,504 slices on 132 SMs) fewer a warp spread them over more warps, and each warp's
    // loads (its lanes' word streams and context rows, another slice each) serve fewer lanes (Device::k1_launch).
    const u32 lanes_field = (mode >> MODE_K1_LANES_SHIFT) & 63u;
    const u32 lanes = W == 1 && lanes_field != 0 ? min(lanes_field, 32u) : 32u;
    mode &= MODE_SMEM - 1;
    u64 loaded = ~0ull;  // the group whose tables `sm` holds
    // LINEAR, K = 2: lane 1 of each unit on a warp of the CTA's second half (CTA-uniform).
    const bool split = LINEAR && c.lanes == 2;
    const u32 lane_warps = split ? blockDim.x / 64u : blockDim.x / 32u;
    const bool lane1 = split && threadIdx.x / 32u >= lane_warps;
    const u32 warp = threadIdx.x / 32u - (lane1 ? lane_warps : 0u);
    // Groups (units parsed at once) of the CTA, and this thread's.
    const u32 groups_per_cta = W == 1 ? lane_warps * lanes : blockDim.x / W;
    const u32 in_cta = W == 1 ? warp * lanes + threadIdx.x % 32u : threadIdx.x / W;
    const bool idle = W == 1 && threadIdx.x % 32u >= lanes;
    const K1Tables* k1 = nullptr;
    if constexpr (W == 1) {
        // The tables of the CTA's first entry's group (see K1Tables; the grid and `end` are CTA-uniform).
        __shared__ __align__(16) K1Tables k1s;
        const u32 first = begin + blockIdx.x * groups_per_cta;
        if (first < end) load_k1_tables(c, c.worklist[first] >> c.group_shift, &k1s);
        else if (threadIdx.x == 0) k1s.group = ~0ull;
        __syncthreads();
        k1 = &k1s;
    }
    u32 ring = 0;
    if constexpr (STAGED) {
        const u32 base = (u32)__cvta_generic_to_shared(dyn_smem);
        ring = ((base + K1_RING_BYTES - 1) & ~(K1_RING_BYTES - 1)) +
               ((lane1 ? groups_per_cta : 0u) + in_cta) * K1_RING_BYTES;
    }
    const Group<W> g;
    const u32 group = blockIdx.x * groups_per_cta + in_cta;
    const u32 ngroups = gridDim.x * groups_per_cta;
    for (u32 e = idle ? end : begin + group; e < end; e += ngroups) {
        u32 id = c.worklist[e];
        const u64 slot = c.slot_of_unit ? e : id;
        if constexpr (LINEAR) {
            if (lane1) {
                if (mode != MODE_TOKENS) lane1_literals(c, id, c.bytes + (slot << c.unit_log), mode, k1, ring);
                continue;
            }
        }
        if (sm && (u64)(id >> c.group_shift) != loaded) {  // warp-uniform (a warp per entry)
            __syncwarp();
            loaded = id >> c.group_shift;
            load_code_tables(c, loaded, sm);
            __syncwarp();
        }
        // The seek path keeps an entry's tokens and bytes in its slot e; the full decode (no slot map) keeps them
        // at the unit's own place, and its worklist may list the units in any order (see ensure_full).
        u8* stamps = c.stamps && !LINEAR ? c.stamps + (slot << c.unit_log) : nullptr;
        u32* resume = c.resume ? c.resume + (u64)e * RESUME_WORDS : nullptr;
        parse_one<W, STAGED, LINEAR>(c, g, id, c.tok_off[slot], c.bytes + (slot << c.unit_log), stamps, mode, resume,
                                     sm, k1, ring);
        if (g.lane == 0 && c.slot_of_unit) c.slot_of_unit[id] = e;
    }
}

// One rANS lane's literals [first, end) of a slice in literals_warp, on one lane of the warp: from state x, its
// words through `wr`, each to lit[l] (shared memory), the context from 0 (context-coded, FORMAT.md §3.5) or the
// group's literal table in `sm`. A slot no symbol covers sets `bad` and stops.
template <class WR>
__device__ __forceinline__ void warp_lane_literals(const LitTables* sm, const LitModel& lm, bool lit_ctx, u32 first,
                                                   u32 end, u32& x, WR& wr, u8* lit, bool& bad) {
    u32 ctx = 0;
    for (u32 l = first; l < end; l++) {
        if (lit_ctx) {
            lit[l] = (u8)decode_base(lm, &ctx, &x);
        } else {
            const u32 slot = x & 4095u;
            const u32 sym = sm->syms[slot];
            const u32 f = sm->fc[sym];
            if (f == 0) {
                bad = true;
                return;
            }
            x = (f & 0xFFFFu) * (x >> 12) + slot - (f >> 16);
            lit[l] = (u8)sym;
        }
        wr.renorm(&x);
    }
}

// The literals of every entry parsed with MODE_TOKENS by levels < parsed_level, a whole warp per entry (the seek's
// literal launch for slices of at most 4 KiB): the warp's lane 0 runs rANS lane 0 from the state the token parse
// saved (literals [0, s), words from the stream's front, WordReader1) and, with K = 2, its lane 1 rANS lane 1 from
// state[1] (literals [s, nlit), words from the back, WordReader1Back), at the same time, with the group's literal
// table in shared memory, each literal in literal order to a shared buffer; the two lanes' ends are checked together
// (shuffles); then the warp scatters the buffer to the literals' offsets, a lane per token. So the serial chain of a
// step is the table lookups and the state update, not a token walk. Dynamic shared memory per warp: LIT_SMEM_BYTES
// + 2^unit_log.
extern "C" __global__ void literals_warp(Ctx c, u32 parsed_level) {
    extern __shared__ uint4 dyn_smem[];
    if (failed(c)) return;
    const u32 end = min(*level_begin(c, parsed_level), c.wl_cap);
    const u32 wib = threadIdx.x / 32;
    LitTables* sm = (LitTables*)((u8*)dyn_smem + wib * (LIT_SMEM_BYTES + (1u << c.unit_log)));
    u8* lit = (u8*)sm + LIT_SMEM_BYTES;
    const u32 lane = threadIdx.x & 31;
    const u32 warp = blockIdx.x * (blockDim.x / 32) + wib;
    const u32 nwarps = gridDim.x * (blockDim.x / 32);
    u64 loaded = ~0ull;
    for (u32 e = warp; e < end; e += nwarps) {
        const u32 id = c.worklist[e];
        const u32* m = c.meta + (u64)id * META_WORDS;
        if (m[7] == BAD_ENTRY) continue;  // reported by the parse (warp-uniform)
        __syncwarp();  // the previous entry's scatter is done with the buffer
        if ((u64)(id >> c.group_shift) != loaded) {
            loaded = id >> c.group_shift;
            load_lit_table(c, loaded, sm);
        }
        const u32* rs = c.resume + (u64)e * RESUME_WORDS;
        const u32 nmatch = m[2], nlit = m[3], nwords = m[4];
        const u32 ntok = nmatch + 1;
        const u32 s = lane_split(nmatch, nlit, c.lanes);
        const u8* states = slice_states(c, m);
        const u8* words = states + 4 * c.lanes;
        const bool lit_ctx = (m[6] & META_CTX) != 0;  // warp-uniform
        const LitModel lm = lit_model_of(c, id);
        __syncwarp();  // the table is loaded
        bool bad = false;
        u32 x = 65536u, taken = 0;  // lanes without a rANS lane: its end state, no words
        if (lane == 0) {
            WordReader1 wr;
            wr.init(words, nwords, rs[0]);
            x = rs[1];
            warp_lane_literals(sm, lm, lit_ctx, 0, s, x, wr, lit, bad);
            taken = rs[0] + wr.taken_words();
        } else if (lane == 1 && c.lanes == 2) {
            WordReader1Back wr;
            wr.init(words, nwords);
            x = load_u32_le(states + 4);
            bad = x < 65536u;  // an encoder never leaves a state below 2^16
            if (!bad) warp_lane_literals(sm, lm, lit_ctx, s, nlit, x, wr, lit, bad);
            taken = wr.taken_words();
        }
        const bool any_bad = __any_sync(FULL_MASK, bad);
        const u32 total = __shfl_sync(FULL_MASK, taken, 0) + __shfl_sync(FULL_MASK, taken, 1);
        const bool ends = __all_sync(FULL_MASK, x == 65536u);
        if (any_bad || total > nwords || !ends || total != nwords) {
            if (lane == 0) report(c.status, any_bad || total > nwords ? E_WORDS : E_FINAL, id);
            continue;
        }
        __syncwarp();  // every literal is in the buffer
        // Token t's literals [lidx[t], lidx[t + 1]) (nlit for the last) start at tpos[t]; the parse checked that
        // they lie inside the unit.
        const u64 tb = c.tok_off[e];
        u8* out = c.bytes + ((u64)e << c.unit_log);
        u8* stamps = c.stamps ? c.stamps + ((u64)e << c.unit_log) : nullptr;
        for (u32 t = lane; t < ntok; t += 32) {
            const u32 a = c.lidx[tb + t], b = t + 1 < ntok ? c.lidx[tb + t + 1] : nlit;
            const u32 o = c.tpos[tb + t];
            for (u32 k = a; k < b; k++) {
                out[o + k - a] = lit[k];
                if (stamps) stamps[o + k - a] = 1;  // a literal: depth 0
            }
        }
    }
}

// The literals of every entry parsed with MODE_TOKENS by levels < parsed_level (entries claimed by the last
// expansion but not parsed are left alone), from their saved rANS states, a thread per entry (both rANS lanes, one
// after the other: literal_phase_k1): one launch after the seek's last level, so the literal part of each slice's
// stream stays off the per-level path.
extern "C" __global__ void literals_k1(Ctx c, u32 parsed_level) {
    if (failed(c)) return;
    const u32 end = min(*level_begin(c, parsed_level), c.wl_cap);
    for (u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < end; e += gridDim.x * blockDim.x) {
        const u32 id = c.worklist[e];
        const u32* m = c.meta + (u64)id * META_WORDS;
        if (m[7] == BAD_ENTRY) continue;  // reported by the parse
        const u32* rs = c.resume + (u64)e * RESUME_WORDS;
        const u8* words = slice_states(c, m) + 4 * c.lanes;
        // The literal table and the rest of the word stream (lane 1's from its back included), towards L1 (see
        // prefetch_l1_shared).
        prefetch_l1_shared(c.dtab + (u64)(id >> c.group_shift) * 4 * 4096 + 3 * 4096, 4096 * 4);
        for (u64 off = 2ull * rs[0]; off < 2ull * m[4]; off += 128ull)
            asm volatile("prefetch.global.L1 [%0];" ::"l"(words + off));
        const u64 tb = c.tok_off[e];
        u8* stamps = c.stamps ? c.stamps + ((u64)e << c.unit_log) : nullptr;
        literal_phase_k1(c, id, c.tpos + tb, c.lidx + tb, c.bytes + ((u64)e << c.unit_log), stamps, MODE_FULL, rs[1],
                         rs[0], nullptr);
    }
}

// The parse entry points. parse_k1: a thread a unit (the full decode of many units, and ACEAPEX_GPU_SEEK_GROUP's
// seek levels); parse_k32: a warp a unit (the seek's token levels, MODE_TOKENS).
extern "C" __global__ void parse_k1(Ctx c, u32 level, u32 mode) { parse_units<1>(c, level, mode); }
extern "C" __global__ void parse_k32(Ctx c, u32 level, u32 mode) { parse_units<32>(c, level, mode); }
// parse_k1 with the word streams staged in shared memory (WordRing1): the full decode's launch of few units
// (Device::k1_launch), which has the shared memory for a ring a unit.
extern "C" __global__ void parse_k1_staged(Ctx c, u32 level, u32 mode) { parse_units<1, true>(c, level, mode); }
// parse_k1_staged whose literals go to their unit in literal order (K1_LINEAR), for finish_linear_k1 to move; with
// K = 2 each unit's lane 1 on a thread of its own (see parse_units).
extern "C" __global__ void parse_k1_linear(Ctx c, u32 level, u32 mode) {
    parse_units<1, true, true>(c, level, mode);
}

// The rest of a full-decode parse by parse_k1_linear (units of at most PLACE_MAX_UNIT bytes, every unit of the
// stream, each at its own place), a warp a unit, in the stages `stages` names:
// - always, with K = 2, the end-of-stream check that needs both of a unit's lane threads: the words lanes 0 and 1
//   took (lane_end) must add up to the unit's stream (each lane checked its own final state);
// - FINISH_TOKENS: the token values from the codes the parse left in tp / mp / bk (group_token_values on the warp,
//   then token_sums_fault), off the parse's serial chains: on atha_chr1 the W = 1 token parse in the chain cost
//   0.06 ms of the genome archive's full decode, 0.18 of the general one's (session 35 run 5);
// - FINISH_PLACE: the literals from the unit's first nlit bytes, where the parse wrote them in literal order, to
//   their offsets (literal k of token t to tpos[t] + k - lidx[t]), through shared memory, since an offset is never
//   below its literal's index. A unit whose only token starts at 0 has them in place;
// - FINISH_MAPS: the unit's chase maps (unit_chase_maps into `maps`), from the tokens just parsed, for the map chase
//   that follows (Resolve::Maps), instead of a launch of index_chase_maps after this one (session 38).
// (Placing a lane an aligned output word instead, one coalesced store a word and the tokens walked only at their
// boundaries, match bytes written 0: slower, the placement of atha genome +5 us, general +25, fly x11 +19; session
// 34 run 5.)
#define PLACE_MAX_UNIT 4096
#define PLACE_WARPS 4
#define FINISH_TOKENS 1
#define FINISH_PLACE 2
#define FINISH_MAPS 4
// The resident chase's maps (see chase_resident), as the host's ChaseMapPtrs passes them: the token index (a token
// position a bucket), the literal map (a bit a stream byte) and the chase records (one a token).
struct Maps {
    u32* index;
    u32* litmap;
    uint4* rec;
};
__device__ __forceinline__ void unit_chase_maps(const Ctx& c, u64 u, u32 lane, u32 lanes,
                                                const Maps& m);  // below, with the maps
extern "C" __global__ void finish_linear_k1(Ctx c, u32 n, u32 stages, Maps maps) {
    __shared__ __align__(16) u8 buf[PLACE_WARPS][PLACE_MAX_UNIT];
    if (failed(c)) return;
    const Group<32> g;
    const u32 lane = g.lane, wib = threadIdx.x / 32u;
    u8* lit = buf[wib];
    for (u32 id = blockIdx.x * PLACE_WARPS + wib; id < n; id += gridDim.x * PLACE_WARPS) {
        const u32* m = c.meta + (u64)id * META_WORDS;
        const u32 nmatch = m[2], ntok = nmatch + 1, nlit = m[3], nwords = m[4], unit_len = m[7];
        if (unit_len == BAD_ENTRY || nlit > PLACE_MAX_UNIT) continue;  // refused by the parse
        if (c.lanes == 2 && lane == 0) {
            const u32 taken = c.lane_end[2ull * id] + c.lane_end[2ull * id + 1];
            if (taken != nwords) report(c.status, taken > nwords ? E_WORDS : E_FINAL, id);
        }
        const u64 tb = c.tok_off[id];
        u32* tp = c.tpos + tb;
        u32* li = c.lidx + tb;
        if (stages & FINISH_TOKENS) {
            const u32 extra_len = m[5];
            const u8* extra = slice_states(c, m) + 4u * c.lanes + 2ull * nwords;
            u64 bits;
            u32 lits, span;
            const u64 unit_start = (u64)id << c.unit_log;
            if (group_token_values<32>(g, tp, c.mpos + tb, li, c.back + tb, ntok, nmatch, extra, extra_len, unit_len,
                                       unit_start, &bits, &lits, &span)) {
                if (lane == 0) report(c.status, E_VALUE, id);
                continue;  // warp-uniform
            }
            if (const u32 fault = token_sums_fault(bits, lits, span, extra, extra_len, nlit, unit_len)) {
                if (lane == 0) report(c.status, fault, id);
                continue;
            }
            g.sync();  // the values are read by other lanes below
        }
        // The placement, unless the literals are already in place (warp-uniform).
        if ((stages & FINISH_PLACE) && nlit != 0 && !(ntok == 1 && tp[0] == 0)) {
            u8* out = c.bytes + ((u64)id << c.unit_log);
            __syncwarp();  // the previous unit's scatter is done with the buffer
            for (u32 k = 4u * lane; k < nlit; k += 128u) *(u32*)(lit + k) = *(const u32*)(out + k);
            __syncwarp();
            // This lane's token t (the last with lidx[t] <= k) and its literals' shift tpos[t] - lidx[t], in
            // registers: the byte stores may alias the token arrays, so reading them in every step reloaded both (two
            // global loads and ~25 instructions a literal, session 36). (A token's run at a time instead, a lane a
            // byte and the run's bounds loaded by the warp, took ~7 instructions a literal instead of ~16, but its
            // runs wait on each other's loads: the placement +9 us on atha genome, +15 general, +22 fly x11; session
            // 38 run 4.)
            u32 t = 0, next = ntok > 1 ? li[1] : nlit, shift = tp[0] - li[0];
#pragma unroll 4
            for (u32 k = lane; k < nlit; k += 32u) {
                while (k >= next) {
                    t++;
                    shift = tp[t] - li[t];
                    next = t + 1 < ntok ? li[t + 1] : nlit;
                }
                out[k + shift] = lit[k];
            }
        }
        if (stages & FINISH_MAPS) unit_chase_maps(c, id, lane, 32, maps);
    }
}

// Puts the requested units on the worklist (entries 0..n, n <= wl_cap), allocating their token storage.
extern "C" __global__ void seed_batch(Ctx c, const u32* ids, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) c.counters[0] = n;
    if (i >= n) return;
    u32 id = ids[i];
    if (id >= c.nunits) {
        report(c.status, E_UNPARSED, id);
        return;
    }
    c.worklist[i] = id;
    c.slot_of_unit[id] = CLAIMING;
    u64 need = (u64)c.meta[(u64)id * META_WORDS + 2] + 1;
    u64 off = atomicAdd(c.pool_used, need);
    if (off + need > c.pool_cap) {
        report(c.status, E_WORKLIST, id);
        off = 0;
    }
    c.tok_off[i] = off;
}

// Claims unit b for parsing at the next level (at most once per batch). A plain read first: most pieces land in
// units already claimed (hot sources), and skipping their atomicCAS keeps them off one contended address.
__device__ void claim_unit(const Ctx& c, u32 b) {
    if (*(volatile u32*)&c.slot_of_unit[b] != NO_SLOT) return;
    if (atomicCAS(&c.slot_of_unit[b], NO_SLOT, CLAIMING) != NO_SLOT) return;
    u32 e = atomicAdd(&c.counters[0], 1u);
    if (e >= c.wl_cap) {
        report(c.status, E_WORKLIST, b);
        c.slot_of_unit[b] = NO_SLOT;  // not on the worklist, so reset_batch would not clear it
        return;
    }
    u64 need = (u64)c.meta[(u64)b * META_WORDS + 2] + 1;
    u64 off = atomicAdd(c.pool_used, need);
    if (off + need > c.pool_cap) {
        report(c.status, E_WORKLIST, b);
        off = 0;
    }
    c.worklist[e] = b;
    c.tok_off[e] = off;
}

// Pieces of [src, src + len) when it is split at unit boundaries.
__device__ __forceinline__ u32 range_pieces(const Ctx& c, u64 src, u32 len) {
    if (len == 0) return 0;
    return (u32)(((src + len - 1) >> c.unit_log) - (src >> c.unit_log) + 1);
}

// Whether a source piece in unit b must go on the next level's list. With `requested` > 0, a piece inside one of
// the requested units (worklist entries 0..requested, all parsed by level 0) is dropped: level 0 expanded every
// byte of those units, so the sources of this piece's bytes were claimed at level 1 and their closure followed
// from there (each byte's depth is within the bound, counted from level 0). A contiguous request's sources mostly
// lie inside the request itself, so this removes most of its range pieces.
__device__ __forceinline__ bool piece_needed(const Ctx& c, u64 b, u32 requested) {
    return requested == 0 || b >= c.nunits || c.slot_of_unit[b] >= requested;
}

// Pieces of [src, src + len), split at unit boundaries, that go on the next level's list (see piece_needed).
__device__ __forceinline__ u32 needed_pieces(const Ctx& c, u64 src, u32 len, u32 requested) {
    if (len == 0) return 0;
    if (requested == 0) return range_pieces(c, src, len);
    u32 n = 0;
    for (u64 b = src >> c.unit_log; b <= (src + len - 1) >> c.unit_log; b++) n += piece_needed(c, b, requested);
    return n;
}

// Writes [src, src + len), split at unit boundaries, to level `next`'s list from slot `idx` on (the caller
// reserved needed_pieces slots), and claims the units it lies in; pieces piece_needed drops are skipped.
__device__ void write_range(const Ctx& c, u32 next, u32 idx, u64 src, u32 len, u32 requested) {
    u64* rsrc = (next & 1) ? c.rsrc1 : c.rsrc0;
    u32* rlen = (next & 1) ? c.rlen1 : c.rlen0;
    while (len > 0) {
        u64 b = src >> c.unit_log;
        if (b >= c.nunits) {
            report(c.status, E_BACK, b);
            return;
        }
        u32 piece = (u32)min((u64)len, ((b + 1) << c.unit_log) - src);
        if (!piece_needed(c, b, requested)) {
            src += piece;
            len -= piece;
            continue;
        }
        if (idx >= c.range_cap) {
            report(c.status, E_RANGES, b);
            return;
        }
        rsrc[idx] = src;
        rlen[idx] = piece;
        idx++;
        claim_unit(c, (u32)b);
        src += piece;
        len -= piece;
    }
}

// The (at most two) source ranges of match-relative bytes [k0, k1) of a match from `msrc` at distance `dist` and
// length `len` (periodic fill: byte k comes from msrc + k mod dist). Returns how many.
__device__ __forceinline__ u32 match_sources(u64 msrc, u64 dist, u32 len, u32 k0, u32 k1, u64* s, u32* l) {
    if (dist >= (u64)len) {
        s[0] = msrc + k0;
        l[0] = k1 - k0;
        return 1;
    }
    u32 p = (u32)dist;
    if (k1 - k0 >= p) {
        s[0] = msrc;
        l[0] = p;
        return 1;
    }
    u32 a0 = k0 % p, a1 = a0 + (k1 - k0);
    if (a1 <= p) {
        s[0] = msrc + a0;
        l[0] = a1 - a0;
        return 1;
    }
    s[0] = msrc + a0;  // wraps around the period
    l[0] = p - a0;
    s[1] = msrc;
    l[1] = a1 - p;
    return 2;
}

// Level d -> d + 1: for every byte range needed at level d (for d = 0: each requested unit), the source ranges
// of the match bytes in it. A warp per range, a lane per overlapping token; the warp reserves the list slots of
// all its pieces with one atomicAdd (a prefix sum of the lanes' piece counts), not one per piece.
extern "C" __global__ void expand_ranges(Ctx c, u32 level, u32 skip_requested) {
    if (failed(c)) return;
    // Entries 0..requested are the requested units (parsed by level 0); see piece_needed.
    const u32 requested = skip_requested ? *level_begin(c, 1) : 0;
    const u32 nranges = level == 0 ? *level_begin(c, 1) : min(*range_count(c, level), c.range_cap);
    const u64* rsrc = (level & 1) ? c.rsrc1 : c.rsrc0;
    const u32* rlen = (level & 1) ? c.rlen1 : c.rlen0;
    const u32 warps_per_cta = blockDim.x / 32;
    const u32 warp = blockIdx.x * warps_per_cta + threadIdx.x / 32;
    const u32 nwarps = gridDim.x * warps_per_cta;
    const u32 lane = threadIdx.x & 31;
    for (u32 r = warp; r < nranges; r += nwarps) {
        u64 src;
        u32 len;
        if (level == 0) {
            u32 id = c.worklist[r];
            src = (u64)id << c.unit_log;
            len = c.meta[(u64)id * META_WORDS + 7];
        } else {
            src = rsrc[r];
            len = rlen[r];
        }
        u64 b = src >> c.unit_log;
        u32 s = b < c.nunits ? c.slot_of_unit[b] : NO_SLOT;
        if (s >= c.wl_cap) {
            if (lane == 0) report(c.status, E_UNPARSED, b);
            continue;
        }
        u64 bstart = b << c.unit_log;
        u32 lo = (u32)(src - bstart), hi = lo + len;
        u32 ntok = c.meta[b * META_WORDS + 2] + 1;
        u64 tb = c.tok_off[s];
        const u32* tp = c.tpos + tb;
        u32 t0 = last_le(tp, 0, ntok, lo);
        // The final token (t = ntok - 1) has no match. Every lane runs every pass (warp-collective prefix sum).
        for (u32 pass = t0;; pass += 32) {
            u32 t = pass + lane;
            bool in = t + 1 < ntok && tp[t] < hi;
            if (!__any_sync(FULL_MASK, in)) break;
            u64 ss[2] = {0, 0};
            u32 ll[2] = {0, 0};
            u32 nr = 0;
            if (in) {
                u32 ms = c.mpos[tb + t], me = tp[t + 1];
                u32 a = max(ms, lo), z = min(me, hi);
                if (a < z) {
                    const u64 bkv = c.back[tb + t];
                    const u64 dist = match_dist(bkv);
                    if (dist == 0 || dist > bstart + ms) {
                        report(c.status, E_BACK, b);
                    } else if (match_rc(bkv)) {
                        // Bytes [a, z) of a reverse complement copy [base - (z - ms - 1), base - (a - ms)].
                        ss[0] = bstart + ms - dist - (z - ms - 1);
                        ll[0] = z - a;
                        nr = 1;
                    } else {
                        nr = match_sources(bstart + ms - dist, dist, me - ms, a - ms, z - ms, ss, ll);
                    }
                }
            }
            const u32 n0 = nr > 0 ? needed_pieces(c, ss[0], ll[0], requested) : 0;
            u32 cnt = n0 + (nr > 1 ? needed_pieces(c, ss[1], ll[1], requested) : 0);
            u32 incl = warp_inclusive_scan(cnt);
            u32 total = __shfl_sync(FULL_MASK, incl, 31);
            u32 base = 0;
            if (lane == 31 && total > 0) base = atomicAdd(range_count(c, level + 1), total);
            base = __shfl_sync(FULL_MASK, base, 31);
            u32 idx = base + incl - cnt;
            if (nr > 0) write_range(c, level + 1, idx, ss[0], ll[0], requested);
            if (nr > 1) write_range(c, level + 1, idx + n0, ss[1], ll[1], requested);
        }
    }
}

// Resolves every byte of the requested units (entries 0..n) by following matches to a literal through the
// parsed units: a thread per byte, at most max_depth hops. Output: out[(e << unit_log) + offset].
extern "C" __global__ void chase_bytes(Ctx c, u32 n, u8* out) {
    if (failed(c)) return;
    const u64 total = (u64)n << c.unit_log;
    const u64 mask = (1ull << c.unit_log) - 1;
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < total; g += (u64)gridDim.x * blockDim.x) {
        u32 id = c.worklist[g >> c.unit_log];
        u32 off = (u32)(g & mask);
        if (off >= c.meta[(u64)id * META_WORDS + 7]) continue;
        u64 p = ((u64)id << c.unit_log) + off;
        bool flip = false;  // an odd number of reverse-complement hops so far
        for (u32 hops = 0;; hops++) {
            u64 b = p >> c.unit_log;
            u32 s = b < c.nunits ? c.slot_of_unit[b] : NO_SLOT;
            if (s >= c.wl_cap) {
                report(c.status, E_UNPARSED, b);
                break;
            }
            u64 tb = c.tok_off[s];
            u32 ntok = c.meta[b * META_WORDS + 2] + 1;
            u32 o = (u32)(p & mask);
            u32 t = last_le(c.tpos + tb, 0, ntok, o);
            u32 ms = c.mpos[tb + t];
            if (o < ms || t + 1 == ntok) {
                const u32 v = c.bytes[((u64)s << c.unit_log) + o];
                out[g] = flip ? complement(v) : v;
                break;
            }
            const u64 bkv = c.back[tb + t];
            if (hops == c.max_depth || match_dist(bkv) == 0) {
                report(c.status, hops == c.max_depth ? E_DEPTH : E_BACK, b);
                break;
            }
            flip ^= match_rc(bkv);
            // >= 0: the parse checked dist <= match start (and dist + len - 1 <= it for a reverse complement).
            p = source_of((b << c.unit_log) + ms - match_dist(bkv), bkv, o - ms);
        }
    }
}

// Resident seek (the whole archive parsed once, device-resident: `c` is the full decode's context, tokens of
// unit u at tok_off[u], literals at their stream positions in c.bytes; the other bytes may hold anything).
// Resolves every byte of the requested units ids[0..n) by following matches through those tokens to a literal,
// a thread per byte, at most max_depth hops: a cold request decodes its own bytes and nothing else, and no
// level of slice parsing stands between the request and its bytes. Output: out[(e << unit_log) + offset].
//
// Three maps over the resident parse, built once after it (index_chase_maps or finish_linear_k1, a warp a unit,
// unit_chase_maps), let a byte find out what it is without a search:
// - The token index: for every unit and every TOKEN_BUCKET-byte bucket of it, the token covering the bucket's
//   first byte, as its position in the token arrays (tok_off + t: the host uses the index only when every
//   position fits 32 bits; index_tokens builds it alone, a thread a bucket). A lookup starts at most a bucket's
//   tokens before its answer and scans forward through one or two cache lines, instead of a binary search of
//   ~10 dependent loads.
// - The literal map: bit (p & 31) of word p >> 5 is set when stream byte p is a literal. Most bytes are literals
//   (88 % of atha_chr1 in genome mode, 79 % as plain text), and their byte and map bit arrive in one round of
//   loads, with no token at all.
// - The chase records: token T's match start, the next token's start (where T ends) and back word, 16 bytes
//   together, so that a match byte's token costs one load, not three.
// (Up to session 37 they were three launches, index_tokens, index_literals and index_chase_tokens: 6.7, 10.5 and
// 6.9 us on atha genome, session 36 run 4.)
// The host may compile with -DTOKEN_BUCKET_LOG=N (ACEAPEX_GPU_TOKEN_BUCKET_LOG, to compare).
#ifndef TOKEN_BUCKET_LOG
#define TOKEN_BUCKET_LOG 6
#endif
// The token-index entry of stream byte `p`: one per 2^TOKEN_BUCKET_LOG bytes, a unit's starting at unit <<
// (unit_log - TOKEN_BUCKET_LOG) (index_tokens). P is the position type (see chase_at).
template <class P>
__device__ __forceinline__ const u32* index_entry(const u32* index, P p) {
    return index + (p >> TOKEN_BUCKET_LOG);
}
// The token-index entry of unit `u`'s bucket `b`: the position of the token covering its first byte.
__device__ __forceinline__ u32 token_index_entry(const Ctx& c, u64 u, u32 b) {
    const u64 tb = c.tok_off[u];
    return (u32)tb + last_le(c.tpos + tb, 0, c.meta[u * META_WORDS + 2] + 1, b << TOKEN_BUCKET_LOG);
}
extern "C" __global__ void index_tokens(Ctx c, u32* index) {
    const u32 per_unit_log = c.unit_log - TOKEN_BUCKET_LOG;
    const u64 total = c.nunits << per_unit_log;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (u64)gridDim.x * blockDim.x)
        index[i] = token_index_entry(c, i >> per_unit_log, (u32)(i & ((1u << per_unit_log) - 1)));
}

// The token of unit offset `o` among the unit's `ntok` tokens at `tp` = tpos + `tb`, from the unit's row of the
// token index.
__device__ __forceinline__ u32 indexed_token(const u32* tp, u64 tb, const u32* row, u32 ntok, u32 o) {
    u32 t = row[o >> TOKEN_BUCKET_LOG] - (u32)tb;
    while (t + 1 < ntok && tp[t + 1] <= o) t++;
    return t;
}

// Bits lo .. hi - 1 of a word (lo < hi <= 32).
__device__ __forceinline__ u32 bit_span(u32 lo, u32 hi) {
    return (hi >= 32 ? FULL_MASK : (1u << hi) - 1u) & ~((1u << lo) - 1u);
}

// The literal map (above): a word's bits are the literal runs of the tokens that overlap its 32 bytes (a token's
// literals are [tpos, mpos); the unit's last token is literals to the unit's end). Bytes past a unit's length
// have no bit. Word `w` (of the unit's 2^unit_log / 32) of unit `u`, whose `nt` tokens start at `tb`; its first
// token is found by a search, so that the map needs no token index written first.
__device__ __forceinline__ u32 literal_map_word(const Ctx& c, u64 tb, u32 nt, u32 len, u32 w) {
    const u32 o0 = w << 5;
    u32 bits = 0;
    if (o0 < len) {
        const u32 end = min(o0 + 32u, len);
        // Token starts strictly increase and the loop ends at nt: at most 33 steps.
        for (u32 t = last_le(c.tpos + tb, 0, nt, o0); t < nt; t++) {
            const u32 s = max(c.tpos[tb + t], o0);
            if (s >= end) break;
            const u32 e = t + 1 == nt ? end : min(c.mpos[tb + t], end);
            if (e > s) bits |= bit_span(s - o0, e - o0);
        }
    }
    return bits;
}

// The chase record of token `t` of the unit whose `nt` tokens start at `tb` (above). A unit's last token
// (literals only) has {0xFFFFFFFF, 0xFFFFFFFF, back}, so a scan stops there and a byte in it is a literal.
__device__ __forceinline__ uint4 chase_record(const Ctx& c, u64 tb, u32 nt, u32 t) {
    const bool last = t + 1 == nt;
    const u64 bk = c.back[tb + t];
    return make_uint4(last ? 0xFFFFFFFFu : c.mpos[tb + t], last ? 0xFFFFFFFFu : c.tpos[tb + t + 1], (u32)bk,
                      (u32)(bk >> 32));
}

// The chase maps of unit `u` (the token index's buckets, the literal map's words and the chase records of its
// tokens: see above), on `lanes` lanes of which this is `lane`, each entry written by one lane from the unit's
// tokens alone, so that the lanes need no order among them.
__device__ __forceinline__ void unit_chase_maps(const Ctx& c, u64 u, u32 lane, u32 lanes, const Maps& m) {
    const u64 tb = c.tok_off[u];
    const u32 nt = c.meta[u * META_WORDS + 2] + 1, len = c.meta[u * META_WORDS + 7];
    const u32 buckets_log = c.unit_log - TOKEN_BUCKET_LOG, words_log = c.unit_log - 5;
    for (u32 b = lane; b < (1u << buckets_log); b += lanes)
        m.index[(u << buckets_log) + b] = token_index_entry(c, u, b);
    for (u32 w = lane; w < (1u << words_log); w += lanes)
        m.litmap[(u << words_log) + w] = literal_map_word(c, tb, nt, len, w);
    for (u32 t = lane; t < nt; t += lanes) m.rec[tb + t] = chase_record(c, tb, nt, t);
}

// The chase maps over every parsed unit, a warp a unit (one launch; finish_linear_k1 builds them with FINISH_MAPS
// instead, from the tokens it has just written).
extern "C" __global__ void index_chase_maps(Ctx c, Maps m) {
    const u32 lane = threadIdx.x & 31;
    const u64 warps = ((u64)gridDim.x * blockDim.x) >> 5;
    for (u64 u = ((u64)blockIdx.x * blockDim.x + threadIdx.x) >> 5; u < c.nunits; u += warps)
        unit_chase_maps(c, u, lane, 32, m);
}

// Loads through the non-coherent path, issued where they stand: nvcc sinks a plain load into the branch that first
// uses it, which would put a round of latency between a literal's map bit and its byte, and between a hop's
// loads. Only for buffers no thread writes during the kernel.
__device__ __forceinline__ u32 ld_now_u8(const u8* p) {
    u32 v;
    asm volatile("ld.global.nc.u8 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ u32 ld_now_u32(const u32* p) {
    u32 v;
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ uint4 ld_now_v4(const uint4* p) {
    uint4 v;
    asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}
// ptxas still sinks an .nc load past a branch after which only one path uses it (the first position's literal
// test); a relaxed load it must issue where it stands. For a load whose latency should hide behind another's.
__device__ __forceinline__ u32 ld_issued_u32(const u32* p) {
    u32 v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

// Follows stream byte `p` through matches to a literal, at most max_depth hops, and returns it, complemented once
// per reverse-complement hop (0 after a fault, which it reports). Every position, the requested one too, costs
// one round of independent loads: its map bit and byte (final for a literal: most positions) and, for the case
// that it is a match byte, its index entry. A match byte then loads its token's chase record (one more only when
// a token starts between its bucket's first byte and `p`) and moves to its source. `lit`, `v` and `t` are the
// first position's loads, which the caller issues. (A copy of each bucket's token record beside its entry, loaded
// with it, saved that record round in most hops, but not time on atha genome: its chase 0.073 -> 0.075 ms,
// general 0.216 -> 0.207, fly x11 0.165 -> 0.161, for a map of a quarter of the stream's size; session 38 run 4.)
// (Sessions 13-25 found the first byte's token by a warp search instead, loaded a literal's match start before its
// byte, and a token's next start, match start and back word from three arrays. chasestats,
// examples/chasestats.rs, counts 5.2 -> 2.2 dependent rounds a warp for atha_chr1 in genome mode, 9.2 -> 6.0 as
// plain text, 12.8 -> 9.9 for fly x11; session 26 measured the time to follow the loads more than the rounds.)
// P is the position type: u32 where every stream position fits (chase_matches on a stream under 2 GiB: a hop
// ~15 instructions shorter than with u64, whose shifts, adds and compares are two instructions each), else u64.
template <class P>
__device__ __forceinline__ u32 chase_at(const Ctx& c, const Maps& m, P p, u32 lit, u32 v, u32 t) {
    const P mask = ((P)1 << c.unit_log) - 1;
    bool flip = false;  // an odd number of reverse-complement hops so far
    for (u32 hops = 0;; hops++) {
        const u32 o = (u32)(p & mask);
        if ((lit >> (o & 31)) & 1) return flip ? complement(v) : v;
        if (hops == c.max_depth) {  // a match after max_depth of them
            report(c.status, E_DEPTH, p >> c.unit_log);
            return 0;
        }
        // The unit's last record ends at 0xFFFFFFFF, so the scan stops inside the unit.
        uint4 r = ld_now_v4(m.rec + t);
        while (r.y <= o) r = ld_now_v4(m.rec + ++t);
        // A literal by its token though the map said otherwise cannot happen (the map is made from these tokens);
        // its byte is then the literal's.
        if (o < r.x) return flip ? complement(v) : v;
        const u64 bkv = (u64)r.z | ((u64)r.w << 32);
        // Below the match's start (the parse checked dist <= it), so it fits P.
        const P dist = (P)match_dist(bkv);
        if (dist == 0) {
            report(c.status, E_BACK, p >> c.unit_log);
            return 0;
        }
        flip ^= match_rc(bkv);
        // >= 0 and < p: the parse checked dist <= match start (and dist + len - 1 <= it for a reverse complement).
        p = source_in<P>((p & ~mask) + r.x - dist, bkv, o - r.x);
        lit = ld_now_u32(m.litmap + (p >> 5));
        v = ld_now_u8(c.bytes + p);
        t = ld_now_u32(index_entry(m.index, p));
    }
}

extern "C" __global__ void chase_resident(Ctx c, const u32* ids, u32 n, u8* out, Maps m) {
    const u64 total = (u64)n << c.unit_log;
    const u64 mask = (1ull << c.unit_log) - 1;
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < total; g += (u64)gridDim.x * blockDim.x) {
        const u64 id = ids[g >> c.unit_log];
        const u32 off = (u32)(g & mask);
        // Only the stream's last unit may be short.
        if (id >= c.nunits || (id + 1 == c.nunits && off >= c.meta[id * META_WORDS + 7])) continue;
        // The first position's loads go out together: a literal (most bytes) waits for its map word and byte,
        // a match byte finds its token with no further round.
        const u64 p = (id << c.unit_log) + off;
        const u32 lit = ld_now_u32(m.litmap + (p >> 5));
        const u32 v = ld_now_u8(c.bytes + p);
        const u32 t = ld_issued_u32(index_entry(m.index, p));
        out[g] = (u8)chase_at(c, m, p, lit, v, t);
    }
}

// Full decode through the chase maps (Resolve::Maps): after the parse of every unit and the three maps above, every
// match byte of the stream is chased to its literal and written in place, a lane a byte of a 32-byte window. A warp
// takes its windows in batches of 32 a grid stride apart (so that a long repeat's windows still spread over the
// grid): each lane loads one window's literal-map word and index entry (the window's 32 bytes share both: a
// bucket is at least 32 bytes), and then the warp chases only the windows that hold a match byte, one after
// another, a lane a byte (chase_at from there). An all-literal window costs a lane's share of one round of loads,
// not a round of its own: 83.5 % of atha_chr1's windows in genome mode are all literals (examples/chasestats.rs).
// Reading a literal through the non-coherent path while other threads write match bytes of its cache line is
// sound: no literal byte changes, and a match byte's own resident value is never read. There is no order between
// matches (no flags, no waits), each byte costs its chain's hops (most sources are literals: one), and the depth
// bound is checked. Only the stream's last unit may be short. After a failed parse nothing runs: the tokens of a
// unit that failed were never checked, and a hop through them could leave the stream (the maps themselves stay
// inside each unit's tokens and bytes whatever they hold).
// (Sessions 27-37 ran a thread a stream byte with no batches, each loading its map word and index entry: atha
// genome's chase 0.083 ms, general 0.223, fly x11 0.168, against 0.074, 0.216, 0.164 in batches, session 38 run 2.
// Slower, then: 2 or 4 bytes a grid stride apart a thread, their first loads issued together (session 28); a warp
// per 1,024 bytes that listed its window's match bytes in shared memory and chased them a lane a byte in turn, its
// lanes chasing one byte after another (atha genome 0.116 -> 0.245 ms, general 0.276 -> 0.415, fly x11 0.228 ->
// 0.408; session 34 run 1); 2 or 4 consecutive bytes a thread sharing one map word and index bucket, their match
// bytes chased in turn (2: atha genome 0.083 -> 0.078 ms but general 0.224 -> 0.287, fly 0.167 -> 0.187; 4: slower
// on all three; session 34 run 4); a warp a token, a lane a byte of its match, 3.5 times as long, since a
// thousand-byte match's bytes then wait on each other's chains (atha genome 0.083 -> 0.291 ms, general 0.222 ->
// 0.491, fly x11 0.169 -> 0.526; 8 or 16 lanes a token slower still; session 38 run 1).)
// A batch: the literal-map word and index entry of the window of each lane (set bits also for bytes past the stream,
// which are not chased), in the launch's dynamic shared memory, CHASE_BATCH_BYTES a warp.
#define CHASE_BATCH_BYTES 256
struct ChaseBatch {
    u32 lit[32];
    u32 tok[32];
};
static_assert(sizeof(ChaseBatch) == CHASE_BATCH_BYTES, "the host sizes the launch's shared memory by it");
// Lane `lane`'s window of the batch whose first window is `first` (of `windows`, the stream's `total` bytes, windows
// of one batch `warps` apart): its map word and index entry into `b`.
template <class P>
__device__ __forceinline__ void chase_batch_load(const Maps& m, P first, P warps, P windows, P total, u32 lane,
                                                 ChaseBatch& b) {
    const P w = first + (P)lane * warps;
    u32 lit = FULL_MASK, t = 0;
    if (w < windows) {
        lit = ld_now_u32(m.litmap + w);
        t = ld_now_u32(index_entry(m.index, w << 5));
        const P end = (w << 5) + 32;
        if (end > total) lit |= FULL_MASK << (u32)(32 - (end - total));  // 1 to 31 bytes past the stream
    }
    b.lit[lane] = lit;
    b.tok[lane] = t;
}
// The batch's windows with a match byte, in turn, this lane's byte of each.
template <class P>
__device__ __forceinline__ void chase_batch_run(const Ctx& c, const Maps& m, P first, P warps, u32 lane,
                                                const ChaseBatch& b) {
    for (u32 j = 0; j < 32; j++) {
        const u32 lit = b.lit[j];
        if (lit == FULL_MASK || ((lit >> lane) & 1)) continue;  // a literal (or past the stream)
        const P p = ((first + (P)j * warps) << 5) + lane;
        // A bucket under 32 bytes (-DTOKEN_BUCKET_LOG=3 or 4, measurements): the byte's own entry.
        const u32 t = TOKEN_BUCKET_LOG >= 5 ? b.tok[j] : ld_now_u32(index_entry(m.index, p));
        c.bytes[p] = (u8)chase_at<P>(c, m, p, lit, 0, t);
    }
}
template <class P>
__device__ __forceinline__ void chase_stream(const Ctx& c, const Maps& m, P total) {
    extern __shared__ uint4 dyn_smem[];
    ChaseBatch& b = ((ChaseBatch*)dyn_smem)[threadIdx.x / 32];
    const u32 lane = threadIdx.x & 31;
    const P warps = ((P)gridDim.x * blockDim.x) / 32, windows = (total + 31) / 32;
    for (P first = ((P)blockIdx.x * blockDim.x + threadIdx.x) / 32; first < windows; first += 32 * warps) {
        chase_batch_load<P>(m, first, warps, windows, total, lane, b);
        __syncwarp();
        chase_batch_run<P>(c, m, first, warps, lane, b);
        __syncwarp();  // the batch is read before the next is loaded
    }
}

extern "C" __global__ void chase_matches(Ctx c, Maps m) {
    if (c.nunits == 0 || failed(c)) return;
    const u64 last = c.nunits - 1;
    const u64 total = (last << c.unit_log) + c.meta[last * META_WORDS + 7];
    // Under 2^31, so that a u32 window index (under 2^26) plus 32 grid strides (the launch's threads, at most 2^31)
    // cannot wrap around.
    if (total < (1ull << 31)) chase_stream<u32>(c, m, (u32)total);
    else chase_stream<u64>(c, m, total);
}

// Clears the batch's claims (the host zeroes the counters after it).
extern "C" __global__ void reset_batch(Ctx c) {
    u32 n = min(c.counters[0], c.wl_cap);
    for (u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x)
        c.slot_of_unit[c.worklist[e]] = NO_SLOT;
}

// Address in c.bytes / c.stamps of stream position `pos`. The full decode holds the whole stream; the seek path
// holds parsed units in worklist slots (slot_of_unit), of which the first `parsed` are parsed. False when the
// byte is not held.
__device__ __forceinline__ bool byte_addr(const Ctx& c, bool seek, u32 parsed, u64 pos, u64* addr) {
    if (!seek) {
        *addr = pos;
        return true;
    }
    u64 b = pos >> c.unit_log;
    if (b >= c.nunits) return false;
    u32 s = c.slot_of_unit[b];
    if (s >= parsed) return false;  // NO_SLOT, CLAIMING, or claimed but not parsed
    *addr = ((u64)s << c.unit_log) | (pos & ((1ull << c.unit_log) - 1));
    return true;
}

// One round of match resolution for the 32 matches of a warp (lane: entry e, token t, `has`).
//
// Resolution is per byte, and a byte's stamp is 1 + its depth (literals: 1; 0 = not resolved yet). A byte of a
// match is resolved as soon as its source byte is: it gets the source's stamp + 1, and a stamp above
// max_depth + 1 is a depth violation (E_DEPTH, FORMAT.md §1). Sources are read as they are when the warp gets
// there, including bytes other warps resolved earlier in the same round: a writer stores the bytes of a step,
// fences (fence.acq_rel.gpu) and only then stores their stamps, and a reader loads a source's stamp first and
// its byte only once the stamp says it is final (both through L2, ld.relaxed.gpu), so a final stamp is never
// seen with a stale byte. Warps run roughly in stream order and every source lies before its match, so most
// chains resolve in round 0: a later round only finishes what raced ahead of its sources. A byte of depth d is
// final after round d - 1 at the latest, so max_depth + 1 rounds resolve every archive that honours its bound.
// (Whole matches cannot wait for their whole source: overlapping sources chain, and a match-level depth is
// unbounded even when every byte's depth is bounded.) A match with bytes left goes to the next round's list; on
// the seek path a byte whose source is not held is dropped (nothing requested depends on it: the level
// expansion parsed every unit a requested byte needs).
//
// The matches are walked byte-parallel: a warp prefix sum over their lengths flattens them into one run of
// bytes, 32 consecutive bytes per step, so reads and writes are coalesced whatever the match lengths.
//
// Only the match bytes [klo, khi) are walked (a deferred match's unresolved span; round 0: the whole match). With
// `trim`, a deferred match carries the span from its first to its last still-unresolved byte to the next round,
// so resolved prefixes and suffixes are not walked again; without it, the span it came with.
__device__ void resolve_warp(const Ctx& c, bool seek, u32 parsed, u32 round, u32 e, u32 t, u32 klo, u32 khi,
                             bool has, u64* list_out, u64* klist_out, u32* list_counts, u32 list_cap, bool trim,
                             u32 piece) {
    const u32 lane = threadIdx.x & 31;
    // Per warp of the CTA: the lowest and one past the highest unresolved byte of each of its 32 matches.
    __shared__ u32 span_lo[32][32], span_hi[32][32];
    const u32 wib = threadIdx.x / 32;
    u8* out = c.bytes;
    u8* stamps = c.stamps;
    u32 len = 0;
    // dst: address of the match in c.bytes; src: its source base (stream position of the match start - its
    // distance, see source_of); bkv: its back[] word (distance and kind).
    u64 dst = 0, src = 0, bkv = 1;
    if (has) {
        u32 id = seek ? c.worklist[e] : e;
        u64 tb = c.tok_off[e];
        u32 ms = c.mpos[tb + t];
        u32 mlen = c.tpos[tb + t + 1] - ms;
        khi = min(khi, mlen);
        klo = min(klo, khi);
        len = khi - klo;
        bkv = c.back[tb + t];
        dst = ((u64)e << c.unit_log) + ms;
        src = ((u64)id << c.unit_log) + ms - match_dist(bkv);  // parse checked 1 <= dist <= match start
    }
    span_lo[wib][lane] = 0xFFFFFFFFu;
    span_hi[wib][lane] = 0;
    __syncwarp();
    u32 incl = warp_inclusive_scan(len);
    u32 total = __shfl_sync(FULL_MASK, incl, 31);
    u32 pending = 0;  // bit m: match m still has a byte to resolve
    // Two bytes per lane per step, with the loads of both issued together, so that a long match is walked with
    // two memory round trips per 64 bytes (stamps, then the final source bytes) rather than per 32.
    for (u32 g0 = 0; g0 < total; g0 += 64) {
        u32 m[2], kk[2];
        u64 dst_at[2], src_at[2];
        bool in[2], held[2];
        u8 dst_stamp[2], src_stamp[2], value[2];
        bool rcm[2];
#pragma unroll
        for (u32 h = 0; h < 2; h++) {
            u32 g = g0 + 32 * h + lane;
            // The lane whose range [incl - len, incl) holds g: the first with incl > g.
            u32 mm = 0;
#pragma unroll
            for (u32 step = 16; step > 0; step >>= 1) {
                u32 v = __shfl_sync(FULL_MASK, incl, mm + step - 1);
                if (v <= g) mm += step;
            }
            m[h] = mm;
            u64 mdst = __shfl_sync(FULL_MASK, dst, mm);
            u64 msrc = __shfl_sync(FULL_MASK, src, mm);
            u64 mbk = __shfl_sync(FULL_MASK, bkv, mm);
            u32 mstart = __shfl_sync(FULL_MASK, incl, mm) - __shfl_sync(FULL_MASK, len, mm);
            in[h] = g < total;
            u32 k = g - mstart + __shfl_sync(FULL_MASK, klo, mm);
            kk[h] = k;
            dst_at[h] = mdst + k;
            rcm[h] = match_rc(mbk);
            held[h] = in[h] && byte_addr(c, seek, parsed, source_of(msrc, mbk, k), &src_at[h]);
        }
#pragma unroll
        for (u32 h = 0; h < 2; h++) {
            dst_stamp[h] = in[h] ? stamps[dst_at[h]] : 1;
            src_stamp[h] = held[h] ? load_relaxed_u8(stamps + src_at[h]) : 0;
        }
        // A byte is only read once its stamp said final (the writer fenced between the byte and the stamp).
#pragma unroll
        for (u32 h = 0; h < 2; h++)
            value[h] = src_stamp[h] != 0 && dst_stamp[h] == 0 ? load_relaxed_u8(out + src_at[h]) : 0;
#pragma unroll
        for (u32 h = 0; h < 2; h++)
            if (rcm[h]) value[h] = (u8)complement(value[h]);
        bool wrote = false;
#pragma unroll
        for (u32 h = 0; h < 2; h++) {
            if (dst_stamp[h] != 0 || !held[h]) continue;  // resolved already, or (seek) a source not held
            if (src_stamp[h] != 0) {
                out[dst_at[h]] = value[h];
                wrote = true;
            } else {
                pending |= 1u << m[h];
                if (trim) {
                    atomicMin(&span_lo[wib][m[h]], kk[h]);
                    atomicMax(&span_hi[wib][m[h]], kk[h] + 1);
                }
            }
        }
        if (__any_sync(FULL_MASK, wrote)) {
            // Release: every byte of this step reaches L2 before any of its stamps.
            fence_acq_rel_gpu();
#pragma unroll
            for (u32 h = 0; h < 2; h++) {
                if (dst_stamp[h] != 0 || !held[h] || src_stamp[h] == 0) continue;
                u32 stamp = (u32)src_stamp[h] + 1;
                if (stamp > c.max_depth + 1) {
                    u64 slot = dst_at[h] >> c.unit_log;
                    report(c.status, E_DEPTH, seek ? c.worklist[slot] : slot);
                    continue;  // left unresolved: the run has failed
                }
                store_relaxed_u8(stamps + dst_at[h], stamp);
            }
        }
    }
    pending = __reduce_or_sync(FULL_MASK, pending);
    __syncwarp();
    bool defer = has && ((pending >> lane) & 1);
    if (trim && defer) {
        klo = span_lo[wib][lane];
        khi = span_hi[wib][lane];
    }
    // With `piece`, a deferred span goes to the list in pieces of at most `piece` bytes: a later round's warp
    // takes 32 list entries, and 32 whole spans of up to a unit each would leave a few warps walking tens of KB
    // while the rest of the GPU idles (measured: 10 % occupancy, rounds 1-2 at 0.3-0.4 ms on atha).
    u32 pieces = !defer ? 0 : piece == 0 ? 1 : max(1u, (khi - klo + piece - 1) / piece);
    u32 incl_pieces = warp_inclusive_scan(pieces);
    u32 all_pieces = __shfl_sync(FULL_MASK, incl_pieces, 31);
    if (all_pieces) {
        u32 base = 0;
        if (lane == 0) base = atomicAdd(&list_counts[round], all_pieces);
        base = __shfl_sync(FULL_MASK, base, 0);
        u32 slot = base + incl_pieces - pieces;
        for (u32 i = 0; i < pieces; i++, slot++) {
            if (slot >= list_cap) {
                report(c.status, E_WORKLIST, e);
                break;
            }
            u32 a = piece == 0 ? klo : klo + i * piece;
            u32 b = piece == 0 ? khi : min(khi, a + piece);
            list_out[slot] = ((u64)e << 32) | t;
            klist_out[slot] = ((u64)a << 32) | b;
        }
    }
}

// Full decode, round `round`: round 0 walks every match (a warp per task of 32 consecutive matches of one unit,
// task_off[e] = first task of unit e), later rounds the list the previous round left.
extern "C" __global__ void resolve_round(Ctx c, u32 n, const u32* task_off, u32 ntasks, u32 round,
                                         const u64* list_in, u64* list_out, const u64* klist_in, u64* klist_out,
                                         u32* list_counts, u32 list_cap, u32 trim) {
    if (failed(c)) return;
    const u32 items = round == 0 ? ntasks : min(*(volatile u32*)&list_counts[round - 1], list_cap);
    const u32 warps_per_cta = blockDim.x / 32;
    const u32 warp = blockIdx.x * warps_per_cta + threadIdx.x / 32;
    const u32 nwarps = gridDim.x * warps_per_cta;
    const u32 lane = threadIdx.x & 31;
    const u32 units = round == 0 ? items : (items + 31) / 32;
    for (u32 unit = warp; unit < units; unit += nwarps) {
        u32 e = 0, t = 0, klo = 0, khi = 0xFFFFFFFFu;
        bool has = false;
        if (round == 0) {
            e = last_le(task_off, 0, n, unit);
            t = (unit - task_off[e]) * 32 + lane;
            has = t < c.meta[(u64)e * META_WORDS + 2];
        } else if (unit * 32 + lane < items) {
            u64 entry = list_in[unit * 32 + lane];
            u64 span = klist_in[unit * 32 + lane];
            e = (u32)(entry >> 32);
            t = (u32)entry;
            klo = (u32)(span >> 32);
            khi = (u32)span;
            has = true;
        }
        resolve_warp(c, false, n, round, e, t, klo, khi, has, list_out, klist_out, list_counts, list_cap, trim != 0,
                     RESOLVE_PIECE);
    }
}

// Full decode, after round 0: resolves every byte the list of round 0 left (`list`/`klist`, list_counts[0]
// entries of at most RESOLVE_PIECE bytes), a thread per byte, by following its matches through the tokens (at
// most max_depth hops) to a byte that was final before this launch: a literal or a byte round 0 resolved. It
// reads no byte this launch writes (it writes bytes, never stamps), so the bytes need no ordering and one launch
// replaces the rounds that resolved one more level each. The depth of the byte is the hops plus the depth of the
// final byte it reached, and more than max_depth is a depth violation (E_DEPTH), as in resolve_warp.
// With `index` (the token index of index_tokens, built after this decode's parse) a hop finds its token by a
// short scan from the index; without it (null), by binary search.
extern "C" __global__ void resolve_chase(Ctx c, const u64* list, const u64* klist, const u32* list_counts,
                                         u32 list_cap, const u32* index) {
    if (failed(c)) return;
    const u64 entries = min(*(volatile u32*)&list_counts[0], list_cap);
    const u64 mask = (1ull << c.unit_log) - 1;
    for (u64 g = (u64)blockIdx.x * blockDim.x + threadIdx.x; g < entries * RESOLVE_PIECE;
         g += (u64)gridDim.x * blockDim.x) {
        u64 entry = list[g / RESOLVE_PIECE];
        u64 span = klist[g / RESOLVE_PIECE];
        u32 k = (u32)(span >> 32) + (u32)(g % RESOLVE_PIECE);
        if (k >= (u32)span) continue;
        u64 e = entry >> 32;
        u64 tb = c.tok_off[e];
        u32 t = (u32)entry;
        u32 ms = c.mpos[tb + t];
        u64 bkv = c.back[tb + t];
        u64 dst = (e << c.unit_log) + ms + k;
        if (c.stamps[dst] != 0) continue;  // resolved in round 0 after all (the span is from first to last left)
        u64 p = source_of((e << c.unit_log) + ms - match_dist(bkv), bkv, k);  // parse checked dist <= ms
        bool flip = match_rc(bkv);  // an odd number of reverse-complement hops so far
        for (u32 hops = 1;; hops++) {
            u32 stamp = c.stamps[p];
            if (stamp != 0) {
                if (stamp - 1 + hops > c.max_depth) report(c.status, E_DEPTH, e);
                else c.bytes[dst] = flip ? (u8)complement(c.bytes[p]) : c.bytes[p];
                break;
            }
            if (hops == c.max_depth) {
                report(c.status, E_DEPTH, e);
                break;
            }
            // p is a match byte round 0 left too: its token, and that match's source byte.
            u64 b = p >> c.unit_log;
            u32 o = (u32)(p & mask);
            u64 pb = c.tok_off[b];
            u32 ntok = c.meta[b * META_WORDS + 2] + 1;
            u32 pt = index ? indexed_token(c.tpos + pb, pb, index + (b << (c.unit_log - TOKEN_BUCKET_LOG)), ntok, o)
                          : last_le(c.tpos + pb, 0, ntok, o);
            u32 pms = c.mpos[pb + pt];
            u64 pd = c.back[pb + pt];
            if (o < pms || pt + 1 == ntok || match_dist(pd) == 0) {  // a literal without its stamp: cannot happen
                report(c.status, E_SUMS, b);
                break;
            }
            flip ^= match_rc(pd);
            p = source_of((b << c.unit_log) + pms - match_dist(pd), pd, o - pms);
        }
    }
}

// ---- Full decode by match levels (ACEAPEX_GPU_RESOLVE=levels) ----
//
// A match's level is 1 + the highest level among the matches its source overlaps (literals have level 0; a forward
// match's overlap with itself, a periodic fill, does not count). Matches of one level read only bytes of lower levels,
// so copying level 1, then level 2, ... resolves every match with plain copies: no per-byte stamps, no fences, and
// every match byte is written once, coalesced. The levels are found on the device from the parsed tokens, by
// `level_ordered` (one launch: tasks in stream order, lanes retry until their sources have levels) or by `level_pass`
// passes (each sets the level of every match whose source matches all have one and lists the rest for the next).
// `level_order` then lists every match's pieces of RESOLVE_PIECE bytes by level, `copy_level` copies one dense level's
// pieces (a warp per piece), `copy_tail` a run of consecutive sparse levels in one launch, and `chase_unleveled`
// resolves the rest byte by byte. A match's level is not bounded by max_depth, which bounds bytes: a source that
// overlaps a deeper match by one byte still takes its level, and chains of such overlaps reach levels above 100 (match
// bytes above level 24: atha_chr1 8 %, a 185 MB generated genome 1.5 %). So levels stop at a cap: a match above it gets
// LEVEL_OVER, and so does every match whose source overlaps one. Those get levels in the next epoch (level_rebase marks
// the copied matches LEVEL_DONE, final like literals, and the search runs again over the rest); what the last epoch
// leaves is chased. This path does not check the depth bound: the bytes it produces are the archive's whatever the
// depth; the seek paths and the CPU decoder check it.
//
// level[g], a u16 per token (g = tok_off[e] + t): 0 while unknown, else the level or LEVEL_OVER. hist[l]:
// pieces of level l (bucket 0: LEVEL_OVER), order_start[l]: the first of them in `order`, order_start[LEVELS]:
// the end. A piece is e << 32 | t << 13 | its number (t < 2^19 and numbers < 2^13: units are at most 2^20
// bytes, matches at least 2). Levels were one byte, capped at 250, until session 18: the 4.65 GB generated
// archive chains 1802 levels deep, and each epoch over the cap cost a search, a bucketing and a rebase of every
// match; 4095 levels take such chains in one search.
typedef u16 level_t;
#define LEVELS 4096
#define LEVEL_OVER 65535
// A match copied in an earlier epoch (level_rebase): final, like a literal, for the levels of the next epoch.
#define LEVEL_DONE 65534
#define PIECE_T_SHIFT 13

__device__ __forceinline__ u32 pieces_of(u32 len) { return (len + RESOLVE_PIECE - 1) / RESOLVE_PIECE; }

// The level of match (e, t) from the levels of the matches its source overlaps: 0 while one of them has none,
// LEVEL_OVER when one of them is over the cap or this one would be.
__device__ u32 match_level(const Ctx& c, const level_t* level, u64 e, u32 t, u32 cap) {
    const u64 tb = c.tok_off[e];
    const u32 ms = c.mpos[tb + t];
    const u32 len = c.tpos[tb + t + 1] - ms;
    const u64 bk = c.back[tb + t];
    const u64 dst = (e << c.unit_log) + ms;
    const u64 base = dst - match_dist(bk);  // the parse checked dist <= match start
    // The source bytes, [s0, s1): a reverse complement reads base down to base - (len - 1) (the parse checked
    // base >= len - 1); a forward match base .. base + len, of which only what lies before dst is another match's.
    const u64 s0 = match_rc(bk) ? base - (len - 1) : base;
    const u64 s1 = match_rc(bk) ? base + 1 : min(base + len, dst);
    const u64 mask = (1ull << c.unit_log) - 1;
    u64 b = s0 >> c.unit_log;
    u64 pb = c.tok_off[b];
    u32 ntok = c.meta[b * META_WORDS + 2] + 1;
    u32 pt = last_le(c.tpos + pb, 0, ntok, (u32)(s0 & mask));
    u32 lv = 0;
    // Every step moves to the next token or unit, and the tokens walked cover at most len + 1 bytes' worth of
    // starts before s1: the loop ends.
    for (;;) {
        const u64 ub = b << c.unit_log;
        if (ub + c.tpos[pb + pt] >= s1) break;
        if (pt + 1 < ntok) {
            const u64 m0 = ub + c.mpos[pb + pt], m1 = ub + c.tpos[pb + pt + 1];
            if (m0 < m1 && m1 > s0 && m0 < s1) {
                const u32 l = *(volatile const level_t*)&level[pb + pt];
                if (l == LEVEL_DONE) {
                    pt++;
                    continue;
                }
                if (l == 0) return 0;
                if (l == LEVEL_OVER) return LEVEL_OVER;
                lv = max(lv, l);
            }
            pt++;
        } else {
            if (++b >= c.nunits) break;
            pb = c.tok_off[b];
            ntok = c.meta[b * META_WORDS + 2] + 1;
            pt = 0;
        }
    }
    return lv >= cap ? LEVEL_OVER : lv + 1;
}

// Pass `pass` of the level search (levels up to `cap` < LEVEL_OVER): pass 0 over every match (a warp per task of
// 32 matches of one unit, as resolve_round's round 0), later passes over the list the previous one left
// (list_counts[pass - 1] entries). Matches still without a level go to list_out, counted in list_counts[pass];
// the last pass (`last`) gives them LEVEL_OVER instead.
extern "C" __global__ void level_pass(Ctx c, u32 n, const u32* task_off, u32 ntasks, u32 pass, u32 last, u32 cap,
                                      level_t* level, u32* hist, const u64* list_in, u64* list_out, u32* list_counts,
                                      u32 list_cap) {
    __shared__ u32 h[LEVELS];
    for (u32 i = threadIdx.x; i < LEVELS; i += blockDim.x) h[i] = 0;
    __syncthreads();
    if (!failed(c)) {
        const u32 listed = pass == 0 ? 0 : min(*(volatile u32*)&list_counts[pass - 1], list_cap);
        const u32 items = pass == 0 ? ntasks : (listed + 31) / 32;
        const u32 warps_per_cta = blockDim.x / 32;
        const u32 nwarps = gridDim.x * warps_per_cta;
        const u32 lane = threadIdx.x & 31;
        for (u32 w = blockIdx.x * warps_per_cta + threadIdx.x / 32; w < items; w += nwarps) {
            u32 e = 0, t = 0;
            bool has = false;
            if (pass == 0) {
                e = last_le(task_off, 0, n, w);
                t = (w - task_off[e]) * 32 + lane;
                has = t < c.meta[(u64)e * META_WORDS + 2];
            } else if (w * 32 + lane < listed) {
                const u64 entry = list_in[w * 32 + lane];
                e = (u32)(entry >> 32);
                t = (u32)entry;
                has = true;
            }
            bool left = false;
            if (has) {
                const u64 g = c.tok_off[e] + t;
                u32 l = match_level(c, level, e, t, cap);
                if (l == 0 && last) l = LEVEL_OVER;
                if (l != 0) {
                    level[g] = (level_t)l;
                    atomicAdd(&h[l == LEVEL_OVER ? 0 : l], pieces_of(c.tpos[g + 1] - c.mpos[g]));
                } else {
                    left = true;
                }
            }
            const u32 ballot = __ballot_sync(FULL_MASK, left);
            if (ballot != 0) {
                u32 at = 0;
                if (lane == 0) at = atomicAdd(&list_counts[pass], __popc(ballot));
                at = __shfl_sync(FULL_MASK, at, 0) + __popc(ballot & ((1u << lane) - 1u));
                if (left) {
                    if (at < list_cap) list_out[at] = ((u64)e << 32) | t;
                    else report(c.status, E_WORKLIST, e);
                }
            }
        }
    }
    __syncthreads();
    for (u32 i = threadIdx.x; i < LEVELS; i += blockDim.x)
        if (h[i] != 0) atomicAdd(&hist[i], h[i]);
}

// The level search in one launch (ACEAPEX_GPU_RESOLVE=levels:0): warps take tasks of 32 matches in stream order
// by ticket and retry the lanes whose sources have no level yet until every lane has its level (or LEVEL_OVER).
// Every source lies before its match, and a task's ticket is taken only after every earlier one's, by a warp
// that is running, so the earliest unfinished match can always finish: the launch ends. Chains of near sources
// are walked one link per retry, a few hundred nanoseconds each, instead of one pass each.
extern "C" __global__ void level_ordered(Ctx c, u32 n, const u32* task_off, u32 ntasks, u32 cap, level_t* level,
                                         u32* hist, u32* ticket) {
    __shared__ u32 h[LEVELS];
    for (u32 i = threadIdx.x; i < LEVELS; i += blockDim.x) h[i] = 0;
    __syncthreads();
    const u32 lane = threadIdx.x & 31;
    for (;;) {
        u32 w = 0;
        if (lane == 0) w = atomicAdd(ticket, 1u);
        w = __shfl_sync(FULL_MASK, w, 0);
        if (w >= ntasks || failed(c)) break;
        const u32 e = last_le(task_off, 0, n, w);
        const u32 t = (w - task_off[e]) * 32 + lane;
        const u64 g = c.tok_off[e] + t;
        // A match copied in an earlier epoch keeps its LEVEL_DONE.
        bool todo = t < c.meta[(u64)e * META_WORDS + 2] && level[g] == 0;
        for (u32 tries = 0; __any_sync(FULL_MASK, todo); tries++) {
            if (todo) {
                const u32 l = match_level(c, level, e, t, cap);
                if (l != 0) {
                    *(volatile level_t*)&level[g] = (level_t)l;
                    atomicAdd(&h[l == LEVEL_OVER ? 0 : l], pieces_of(c.tpos[g + 1] - c.mpos[g]));
                    todo = false;
                }
            }
            if (tries > 4) __nanosleep(200);
            // Cannot happen on a parse that passed its checks; a failed one stops everything.
            if ((tries & 63) == 63 && (failed(c) || tries > (1u << 22))) {
                if (todo) report(c.status, E_DEPTH, e);
                break;
            }
        }
    }
    __syncthreads();
    for (u32 i = threadIdx.x; i < LEVELS; i += blockDim.x)
        if (h[i] != 0) atomicAdd(&hist[i], h[i]);
}

// ---- Full decode by copies in stream order (Resolve::Flow, session 20) ----
//
// One launch after the parse copies every match: no levels, no buckets, no host synchronisation, no chase. Warps
// take tasks of 32 consecutive matches of one unit by ticket, in stream order (as level_ordered), and a lane's match
// is copied as soon as every match its source overlaps has been: `done` holds a flag per token (a u16, the levels'
// buffer), set after the copy and a fence. A lane that must wait keeps its place in the walk over its source's
// matches and goes on from there at the next try. Every source lies before its match (the parse checked it) and
// tickets are taken in stream order by running warps, so the earliest match not copied yet can always be copied:
// the launch ends. Sources are loaded through L2 (ld.global.cg): an SM's L1 may hold a line from before another
// SM copied into it. The copies of the levels path need a launch per dense level and a sort of every piece by
// level first (the 4.65 GB generated archive: 1808 levels; level search, bucketing and copies 26.8 of its 37.7 ms,
// session 19); here the dependency is waited for per match, where it exists.
#define FLOW_DONE 1

// Walks the matches that overlap the source bytes [s0, s1) from token `pt` of unit `b` (first token `pb`, `ntok`
// tokens): true once past s1 (every source byte is a literal or a copied match's byte), false at the first match
// not copied yet, where the walk stays for the next try. Every step moves to the next token or unit: it ends.
__device__ __forceinline__ bool flow_sources_done(const Ctx& c, const level_t* done, u64 s0, u64 s1, u64* b, u64* pb,
                                                  u32* ntok, u32* pt) {
    for (;;) {
        const u64 ub = *b << c.unit_log;
        if (ub + c.tpos[*pb + *pt] >= s1) return true;
        if (*pt + 1 < *ntok) {
            const u64 m0 = ub + c.mpos[*pb + *pt], m1 = ub + c.tpos[*pb + *pt + 1];
            if (m0 < m1 && m1 > s0 && m0 < s1 && *(volatile const level_t*)&done[*pb + *pt] != FLOW_DONE)
                return false;
            (*pt)++;
        } else {
            if (++*b >= c.nunits) return true;
            *pb = c.tok_off[*b];
            *ntok = c.meta[*b * META_WORDS + 2] + 1;
            *pt = 0;
        }
    }
}

// The complement (FORMAT.md §1) of each byte of a word: A<->T, C<->G in either case, every other byte itself, as
// complement() does byte by byte. Folding case with | 0x20 maps only the two cases of a letter onto its lowercase.
__device__ __forceinline__ u32 complement4(u32 v) {
    const u32 y = v | 0x20202020u;
    const u32 at = __vcmpeq4(y, 0x61616161u) | __vcmpeq4(y, 0x74747474u);  // a, t: xor 0x15
    const u32 cg = __vcmpeq4(y, 0x63636363u) | __vcmpeq4(y, 0x67676767u);  // c, g: xor 0x04
    return v ^ (at & 0x15151515u) ^ (cg & 0x04040404u);
}

// The 4 stream bytes from position `p` (which may be unaligned, below 0 or reach past the end: the bytes outside
// [0, end) read as 0), from the aligned words holding them, through L2 (see copy_flow).
__device__ __forceinline__ u32 load4_cg(const u8* bytes, long long p, long long end) {
    const long long lo = p & ~3ll;
    const u32 sh = (u32)(p & 3);
    const u32 a = lo >= 0 && lo + 4 <= end ? __ldcg((const u32*)(bytes + lo)) : 0u;
    const u32 b = sh != 0 && lo + 8 <= end ? __ldcg((const u32*)(bytes + lo + 4)) : 0u;
    return __funnelshift_r(a, b, 8 * sh);
}

// Stores the bytes of word `v` meant for stream positions `w` .. w + 3 that lie in [lo, hi): the whole word when
// all four do (only this match writes them), else byte by byte (a neighbour may be writing the others).
__device__ __forceinline__ void store4_in(u8* bytes, u64 w, u32 v, u64 lo, u64 hi) {
    if (w >= lo && w + 4 <= hi) {
        *(u32*)(bytes + w) = v;
        return;
    }
#pragma unroll
    for (u32 j = 0; j < 4; j++)
        if (w + j >= lo && w + j < hi) bytes[w + j] = (u8)(v >> (8 * j));
}

// The warp copies one match: `len` bytes to `dst` from `base` (see source_of) with back word `bk`. A forward match
// whose source does not overlap it, and a reverse complement, go by aligned words of the destination, 64 a round
// (lane i: words i and i + 32, so each instruction covers 128 consecutive bytes), each assembled from the two
// aligned source words that hold its bytes; a periodic fill goes byte by byte through source_of. Sources load
// through L2 (see copy_flow); every load of a round is issued before its stores.
__device__ __forceinline__ void flow_copy_one(const Ctx& c, u64 dst, u64 base, u64 bk, u32 len, u32 lane) {
    u8* bytes = c.bytes;
    const u64 dist = match_dist(bk);
    const bool rc = match_rc(bk);
    if (!rc && dist < len) {
        for (u32 k0 = 0; k0 < len; k0 += 128) {
            u32 v[4];
#pragma unroll
            for (u32 j = 0; j < 4; j++) {
                const u32 k = k0 + lane + 32 * j;
                v[j] = k < len ? (u32)__ldcg(bytes + source_of(base, bk, k)) : 0u;
            }
#pragma unroll
            for (u32 j = 0; j < 4; j++) {
                const u32 k = k0 + lane + 32 * j;
                if (k < len) bytes[dst + k] = (u8)v[j];
            }
        }
        return;
    }
    const long long end = (long long)(c.nunits << c.unit_log);
    const u64 w0 = dst & ~3ull, hi = dst + len;
    const u32 nwords = (u32)((hi - 1 - w0) / 4 + 1);
    for (u32 r = 0; r < nwords; r += 64) {
        u32 v[2];
#pragma unroll
        for (u32 j = 0; j < 2; j++) {
            const u32 i = r + lane + 32 * j;
            const long long w = (long long)(w0 + 4ull * i);
            if (i >= nwords) {
                v[j] = 0;
            } else if (!rc) {
                v[j] = load4_cg(bytes, w - (long long)dist, end);
            } else {
                // Bytes w .. w + 3 copy base - k .. base - k - 3 (k = w - dst), complemented: the 4 source bytes
                // from base - k - 3, reversed.
                const long long y = (long long)base - (w - (long long)dst) - 3;
                v[j] = complement4(__byte_perm(load4_cg(bytes, y, end), 0, 0x0123));
            }
        }
#pragma unroll
        for (u32 j = 0; j < 2; j++) {
            const u32 i = r + lane + 32 * j;
            if (i < nwords) store4_in(bytes, w0 + 4ull * i, v[j], dst, hi);
        }
    }
}

// The warp copies the matches of the lanes in `go` (each lane's dst, source base, back word and length), one after
// another.
__device__ __forceinline__ void flow_copy(const Ctx& c, u32 go, u64 dst, u64 base, u64 bk, u32 len, u32 lane) {
    while (go != 0) {
        const u32 m = __ffs(go) - 1;
        go &= go - 1;
        flow_copy_one(c, __shfl_sync(FULL_MASK, dst, m), __shfl_sync(FULL_MASK, base, m),
                      __shfl_sync(FULL_MASK, bk, m), __shfl_sync(FULL_MASK, len, m), lane);
    }
}

// Every match of the stream, copied once its sources are final (see above). task_unit[w]: the unit of task w;
// task_off[e]: the first task of unit e; `ticket`: zeroed by the host.
__device__ __forceinline__ void copy_flow_tasks(const Ctx& c, const u32* task_unit, const u32* task_off, u32 ntasks,
                                          level_t* done, u32* ticket) {
    const u32 lane = threadIdx.x & 31;
    const u64 mask = (1ull << c.unit_log) - 1;
    for (;;) {
        u32 w = 0;
        if (lane == 0) w = atomicAdd(ticket, 1u);
        w = __shfl_sync(FULL_MASK, w, 0);
        if (w >= ntasks || failed(c)) break;
        const u32 e = task_unit[w];
        const u32 t = (w - task_off[e]) * 32 + lane;
        const u64 tb = c.tok_off[e];
        bool todo = t < c.meta[(u64)e * META_WORDS + 2];
        u64 dst = 0, base = 0, bk = 0, s0 = 0, s1 = 0, b = 0, pb = 0;
        u32 len = 0, ntok = 1, pt = 0;
        if (todo) {
            const u32 ms = c.mpos[tb + t];
            len = c.tpos[tb + t + 1] - ms;
            bk = c.back[tb + t];
            dst = ((u64)e << c.unit_log) + ms;
            base = dst - match_dist(bk);  // the parse checked dist <= match start
            // The source bytes, as in match_level: a reverse complement reads base down to base - (len - 1), a
            // forward match base .. base + len, of which only what lies before dst is another match's.
            s0 = match_rc(bk) ? base - (len - 1) : base;
            s1 = match_rc(bk) ? base + 1 : min(base + len, dst);
            b = s0 >> c.unit_log;
            pb = c.tok_off[b];
            ntok = c.meta[b * META_WORDS + 2] + 1;
            pt = last_le(c.tpos + pb, 0, ntok, (u32)(s0 & mask));
        }
        for (u32 tries = 0; __any_sync(FULL_MASK, todo); tries++) {
            const bool ready = todo && flow_sources_done(c, done, s0, s1, &b, &pb, &ntok, &pt);
            const u32 go = __ballot_sync(FULL_MASK, ready);
            if (go != 0) {
                // Acquire: the flags this warp's lanes read come before the source bytes any lane loads.
                __syncwarp();
                __threadfence();
                flow_copy(c, go, dst, base, bk, len, lane);
                // Release: every lane's bytes reach L2 before the flags.
                __syncwarp();
                __threadfence();
                if (ready) {
                    *(volatile level_t*)&done[tb + t] = FLOW_DONE;
                    todo = false;
                }
                continue;
            }
            if (tries > 2) __nanosleep(100);
            // Cannot happen on a parse that passed its checks; a failed one stops everything (the whole warp: the
            // ticket's shuffle needs every lane).
            if ((tries & 63) == 63 && __any_sync(FULL_MASK, failed(c) || tries > (1u << 22))) {
                if (todo) report(c.status, E_DEPTH, e);
                break;
            }
        }
    }
}
extern "C" __global__ void copy_flow(Ctx c, const u32* task_unit, const u32* task_off, u32 ntasks, level_t* done,
                                     u32* ticket) {
    copy_flow_tasks(c, task_unit, task_off, ntasks, done, ticket);
}

// One CTA of LEVEL_SCAN_THREADS threads: order_start[l] = the pieces of the buckets below l (bucket 0,
// LEVEL_OVER, first), and cursor[l] = order_start[l] for level_order. Each thread sums LEVELS /
// LEVEL_SCAN_THREADS buckets, the sums are scanned in shared memory, and each thread writes its buckets' starts.
#define LEVEL_SCAN_THREADS 1024
extern "C" __global__ void level_starts(const u32* hist, u32* order_start, u32* cursor) {
    __shared__ u32 part[LEVEL_SCAN_THREADS];
    if (blockIdx.x != 0) return;
    constexpr u32 per = LEVELS / LEVEL_SCAN_THREADS;
    const u32 x = threadIdx.x, i0 = x * per;
    u32 sum = 0;
    for (u32 j = 0; j < per; j++) sum += hist[i0 + j];
    part[x] = sum;
    __syncthreads();
    // Inclusive scan of the partial sums (Hillis-Steele: log2(1024) steps).
    for (u32 d = 1; d < LEVEL_SCAN_THREADS; d <<= 1) {
        const u32 v = x >= d ? part[x - d] : 0u;
        __syncthreads();
        part[x] += v;
        __syncthreads();
    }
    u32 at = part[x] - sum;
    for (u32 j = 0; j < per; j++) {
        order_start[i0 + j] = at;
        cursor[i0 + j] = at;
        at += hist[i0 + j];
    }
    if (x == LEVEL_SCAN_THREADS - 1) order_start[LEVELS] = at;
}

// Lists the pieces of every match in its level's bucket of `order`, walking the matches as level_pass's pass 0.
// The lanes of a warp with the same bucket take their slots with one atomic.
extern "C" __global__ void level_order(Ctx c, u32 n, const u32* task_off, u32 ntasks, const level_t* level, u32* cursor,
                                       u64* order, u32 cap) {
    if (failed(c)) return;
    const u32 warps_per_cta = blockDim.x / 32;
    const u32 nwarps = gridDim.x * warps_per_cta;
    const u32 lane = threadIdx.x & 31;
    for (u32 w = blockIdx.x * warps_per_cta + threadIdx.x / 32; w < ntasks; w += nwarps) {
        const u32 e = last_le(task_off, 0, n, w);
        const u32 t = (w - task_off[e]) * 32 + lane;
        const u64 g = c.tok_off[e] + t;
        // Matches copied in an earlier epoch are not listed again.
        const bool has = t < c.meta[(u64)e * META_WORDS + 2] && level[g] != LEVEL_DONE;
        u32 l = has ? level[g] : LEVELS;  // LEVELS: no match in this lane
        if (l == LEVEL_OVER) l = 0;
        const u32 np = has ? pieces_of(c.tpos[g + 1] - c.mpos[g]) : 0;
        // This lane's offset among the pieces of its bucket's lanes, and their total (at the bucket's first lane).
        const u32 peers = __match_any_sync(FULL_MASK, l);
        u32 before = 0, total = 0;
        for (u32 i = 0; i < 32; i++) {
            const u32 v = __shfl_sync(FULL_MASK, np, i);
            if ((peers >> i) & 1u) {
                total += v;
                if (i < lane) before += v;
            }
        }
        const u32 leader = __ffs(peers) - 1;
        u32 at = 0;
        if (has && lane == leader) at = atomicAdd(&cursor[l], total);
        at = __shfl_sync(FULL_MASK, at, leader) + before;
        for (u32 i = 0; i < np; i++) {
            if (at + i < cap) order[at + i] = ((u64)e << 32) | ((u64)t << PIECE_T_SHIFT) | i;
            else report(c.status, E_WORKLIST, e);
        }
    }
}

// Ends an epoch of the level search (levels 1 ..= `copied` are copied): those matches become LEVEL_DONE, final
// like literals, and every other match (over the cap, or of a sparse level above `copied`) unknown again, so that
// the next epoch's `level_ordered` finds their levels anew above the copied bytes: chains deeper than the cap
// are copied a cap's worth of levels per epoch instead of chased byte by byte (a 4.4 GB archive of four mutated
// genome copies left 50 ms of its 77 ms full decode to the chase, session 17 run 2). Also zeroes the histogram
// and the ticket for that search.
extern "C" __global__ void level_rebase(Ctx c, u32 n, const u32* task_off, u32 ntasks, level_t* level, u32 copied,
                                        u32* hist, u32* ticket) {
    const u64 tid = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < LEVELS) hist[tid] = 0;
    if (tid == 0) *ticket = 0;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 i = tid; i < (u64)ntasks * 32; i += stride) {
        const u32 w = (u32)(i / 32), lane = (u32)(i % 32);
        const u32 e = last_le(task_off, 0, n, w);
        const u32 t = (w - task_off[e]) * 32 + lane;
        if (t >= c.meta[(u64)e * META_WORDS + 2]) continue;
        const u64 g = c.tok_off[e] + t;
        const u32 l = level[g];
        if (l == LEVEL_DONE) continue;
        level[g] = (level_t)(l >= 1 && l <= copied ? LEVEL_DONE : 0u);
    }
}

// A piece's match: its destination, source base (see source_of), back word, and length.
struct PieceMatch {
    u64 dst, base, bk;
    u32 len, k0;
};
__device__ __forceinline__ PieceMatch piece_match(const Ctx& c, u64 piece) {
    const u64 e = piece >> 32;
    const u32 t = (u32)piece >> PIECE_T_SHIFT;
    const u64 g = c.tok_off[e] + t;
    PieceMatch m;
    const u32 ms = c.mpos[g];
    m.len = c.tpos[g + 1] - ms;
    m.bk = c.back[g];
    m.dst = (e << c.unit_log) + ms;
    m.base = m.dst - match_dist(m.bk);  // the parse checked dist <= match start
    m.k0 = ((u32)piece & ((1u << PIECE_T_SHIFT) - 1u)) * RESOLVE_PIECE;
    return m;
}

// Copies one dense level's pieces, order[first .. first + items) (the host has the histogram, so it passes them
// and no thread waits for order_start): a warp per piece of 128 bytes, every piece of the level in flight at once.
// Lane i takes bytes i, i + 32, i + 64 and i + 96 of the piece, so that each load and store instruction of the
// warp covers 32 consecutive bytes (session 17: 2-8 % faster full decodes than 4 consecutive bytes a lane). The
// sources are final: lower levels, or for a periodic fill bytes before the match that are.
// Session 19 measured two other ways and kept neither (H200, the 4.65 GB generated archive, whose copies take
// ~18.5 ms this way): a 16-byte descriptor per piece written by level_order (destination, source, length) with 4
// pieces a warp, so that a copy waits for one metadata load instead of three dependent ones: 78 registers a
// thread instead of 28, and copies of 26.5 ms (run 1); and one cooperative launch per run of dense levels with a
// grid barrier between levels instead of a launch each (2 CTAs of 512 threads an SM): 23.5 ms (run 3). These
// copies are bound by the pieces in flight (one a warp, every SM full), not by the ~1700 launches; but two pieces
// a warp (44 registers: 40 warps an SM, 80 pieces in flight) lost too: a 1.1 GB generated archive decoded in
// 13.3 ms against 10.5 (run 4).
extern "C" __global__ void copy_level(Ctx c, const u64* order, u32 first, u32 items) {
    if (failed(c)) return;
    const u32 warps_per_cta = blockDim.x / 32;
    const u32 nwarps = gridDim.x * warps_per_cta;
    const u32 lane = threadIdx.x & 31;
    for (u32 w = blockIdx.x * warps_per_cta + threadIdx.x / 32; w < items; w += nwarps) {
        const PieceMatch m = piece_match(c, order[first + w]);
        u32 v[4];
#pragma unroll
        for (u32 j = 0; j < 4; j++) {
            const u32 k = m.k0 + lane + 32 * j;
            v[j] = k < m.len ? c.bytes[source_of(m.base, m.bk, k)] : 0u;
        }
#pragma unroll
        for (u32 j = 0; j < 4; j++) {
            const u32 k = m.k0 + lane + 32 * j;
            if (k < m.len) c.bytes[m.dst + k] = (u8)(match_rc(m.bk) ? complement(v[j]) : v[j]);
        }
    }
}

// Copies the sparse levels la ..= lb (the host sends levels of fewer than TAIL_MAX_PIECES pieces) with one CTA in
// one launch (session 18): the high levels of a deep archive hold a few pieces each (atha_chr1: 76 of its 107
// levels under 64 pieces; four 100 MB generated genomes: 202 of 270 under 512), and a launch per level costs
// about 3.5 us (the 4.65 GB generated archive: 1802 levels, 42 ms of copies, session 17 run 3). Within one CTA a
// level ends at a __syncthreads(), which also makes its bytes visible to the next level's loads. A warp copies
// TAIL_UNROLL pieces at once, lanes interleaved as in copy_level: every load and store instruction covers 32
// consecutive bytes of one piece. (Session 18 run 3 had groups of 4 lanes per piece instead: each instruction
// touched 8 pieces' lines, and a level cost ~7 us on atha.) All metadata loads of a round go out together,
// then all source loads, then the stores.
#define TAIL_THREADS 512
#define TAIL_UNROLL 4
extern "C" __global__ void __launch_bounds__(TAIL_THREADS)
    copy_tail(Ctx c, const u64* order, const u32* order_start, u32 la, u32 lb) {
    if (failed(c)) return;  // the same for every thread: nothing else runs
    constexpr u32 warps = TAIL_THREADS / 32;
    const u32 warp = threadIdx.x / 32, lane = threadIdx.x & 31;
    for (u32 l = la; l <= lb; l++) {
        const u32 begin = order_start[l], end = order_start[l + 1];
        for (u32 i0 = begin + warp; i0 < end; i0 += warps * TAIL_UNROLL) {
            PieceMatch m[TAIL_UNROLL];
            u32 v[TAIL_UNROLL][4];
#pragma unroll
            for (u32 r = 0; r < TAIL_UNROLL; r++) {
                const u32 i = i0 + r * warps;
                m[r] = i < end ? piece_match(c, order[i]) : PieceMatch{0, 0, 0, 0, 0};
            }
#pragma unroll
            for (u32 r = 0; r < TAIL_UNROLL; r++)
#pragma unroll
                for (u32 j = 0; j < 4; j++) {
                    const u32 k = m[r].k0 + lane + 32 * j;
                    v[r][j] = k < m[r].len ? (u32)c.bytes[source_of(m[r].base, m[r].bk, k)] : 0u;
                }
#pragma unroll
            for (u32 r = 0; r < TAIL_UNROLL; r++) {
                const bool rc = match_rc(m[r].bk);
#pragma unroll
                for (u32 j = 0; j < 4; j++) {
                    const u32 k = m[r].k0 + lane + 32 * j;
                    if (k < m[r].len) c.bytes[m[r].dst + k] = (u8)(rc ? complement(v[r][j]) : v[r][j]);
                }
            }
        }
        __syncthreads();
    }
}

// Resolves, after levels 1 ..= `copied` are copied, the pieces of the other matches byte by byte: bucket 0 (over
// the cap) and the levels above `copied` (the host leaves sparse high levels to this chase rather than launch a
// copy for each). A thread per byte follows its sources through the tokens (at most max_depth hops) to a
// literal or a copied match's byte, which are final. It writes only bytes of the chased matches and reads only
// final ones, so its threads need no ordering.
extern "C" __global__ void chase_unleveled(Ctx c, const u64* order, const u32* order_start, const level_t* level,
                                           u32 copied) {
    if (failed(c)) return;
    const u32 n0 = order_start[1] - order_start[0];
    const u32 above = order_start[copied + 1];
    const u64 total = (u64)(n0 + (order_start[LEVELS] - above)) * RESOLVE_PIECE;
    const u64 mask = (1ull << c.unit_log) - 1;
    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (u64)gridDim.x * blockDim.x) {
        const u32 q = (u32)(i / RESOLVE_PIECE);
        const PieceMatch m = piece_match(c, order[q < n0 ? order_start[0] + q : above + (q - n0)]);
        const u32 k = m.k0 + (u32)(i % RESOLVE_PIECE);
        if (k >= m.len) continue;
        u64 p = source_of(m.base, m.bk, k);
        bool flip = match_rc(m.bk);
        for (u32 hops = 1;; hops++) {
            const u64 b = p >> c.unit_log;
            const u64 pb = c.tok_off[b];
            const u32 ntok = c.meta[b * META_WORDS + 2] + 1;
            const u32 o = (u32)(p & mask);
            const u32 pt = last_le(c.tpos + pb, 0, ntok, o);
            const u32 pms = c.mpos[pb + pt];
            // A literal or a byte of a copied match: final. A byte of a chased match (never this one's:
            // source_of maps a periodic fill before dst) is followed further.
            const u32 pl = o < pms || pt + 1 == ntok ? 0u : level[pb + pt];
            if ((pl != LEVEL_OVER && pl <= copied) || pl == LEVEL_DONE) {
                const u32 v = c.bytes[p];
                c.bytes[m.dst + k] = (u8)(flip ? complement(v) : v);
                break;
            }
            const u64 pd = c.back[pb + pt];
            if (hops == c.max_depth || match_dist(pd) == 0) {
                report(c.status, hops == c.max_depth ? E_DEPTH : E_SUMS, b);
                break;
            }
            flip ^= match_rc(pd);
            p = source_of((b << c.unit_log) + pms - match_dist(pd), pd, o - pms);
        }
    }
}

// Seek path, round `round`, over the entries parsed by levels < parsed_level: round 0 walks every match of
// them (units of 32 matches, max_chunks per entry), later rounds the list the previous round left.
extern "C" __global__ void seek_resolve(Ctx c, u32 parsed_level, u32 max_chunks, u32 round, const u64* list_in,
                                        u64* list_out, const u64* klist_in, u64* klist_out, u32* list_counts,
                                        u32 list_cap) {
    if (failed(c)) return;
    const u32 parsed = min(*level_begin(c, parsed_level), c.wl_cap);
    const u64 units = round == 0 ? (u64)parsed * max_chunks
                                 : (min(*(volatile u32*)&list_counts[round - 1], list_cap) + 31ull) / 32;
    const u32 items = round == 0 ? 0 : min(*(volatile u32*)&list_counts[round - 1], list_cap);
    const u32 warps_per_cta = blockDim.x / 32;
    const u64 warp = (u64)blockIdx.x * warps_per_cta + threadIdx.x / 32;
    const u64 nwarps = (u64)gridDim.x * warps_per_cta;
    const u32 lane = threadIdx.x & 31;
    for (u64 unit = warp; unit < units; unit += nwarps) {
        u32 e = 0, t = 0, klo = 0, khi = 0xFFFFFFFFu;
        bool has = false;
        if (round == 0) {
            e = (u32)(unit / max_chunks);
            u32 chunk = (u32)(unit % max_chunks);
            u32 nmatch = c.meta[(u64)c.worklist[e] * META_WORDS + 2];
            if (chunk * 32 >= nmatch) continue;  // warp-uniform
            t = chunk * 32 + lane;
            has = t < nmatch;
        } else if (unit * 32 + lane < items) {
            u64 entry = list_in[unit * 32 + lane];
            u64 span = klist_in[unit * 32 + lane];
            e = (u32)(entry >> 32);
            t = (u32)entry;
            klo = (u32)(span >> 32);
            khi = (u32)span;
            has = true;
        }
        resolve_warp(c, true, parsed, round, e, t, klo, khi, has, list_out, klist_out, list_counts, list_cap, true, 0);
    }
}
