// Shared by every kernel: the integer types, the constants and error codes the host mirrors, the mode switches of
// the time breakdown, the kernel context `Ctx` and the chase maps `Maps` (both passed by value, mirrored field for
// field on the host), the warp helpers, the thread groups (`Group`) and the decode-table layouts the parsers load
// into shared memory (`CodeTables`, `LitTables`).
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

#define FULL_MASK 0xFFFFFFFFu
#define NO_SLOT 0xFFFFFFFFu
#define CLAIMING 0xFFFFFFFEu
#define BAD_ENTRY 0xFFFFFFFFu
// A worklist entry that holds no unit: the full decode's order for few units keeps each table group's place with
// them (src/engine/gpu/device/full.rs parse_order; mirrored there).
#define NO_UNIT 0xFFFFFFFFu
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
    u32* tpos;            // token arrays (kernels/decode.cu's head)
    u32* mpos;
    u64* back;
    u8* bytes;            // entry e's decoded bytes at e << unit_log
    u32* slot_of_unit;    // unit id -> entry, NO_SLOT or CLAIMING; null on the full path
    u32* counters;        // see level_begin, range_count below
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
    const u32* xgrp;      // literal context model per group: order, first context (decode.cu's head)
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

// The resident chase's maps (see chase_resident), as the host's ChaseMapPtrs passes them: the token index (a token
// position a bucket), the literal map (a bit a stream byte) and the chase records (one a token).
struct Maps {
    u32* index;
    u32* litmap;
    uint4* rec;
};
