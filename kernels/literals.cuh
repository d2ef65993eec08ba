// A thread per rANS lane, its literals in registers: the context model's shared-memory copies (`K1Tables`), where
// literals land (`LiteralSink1`), the context-coded and table-coded literal steps and loops, and a slice's literal
// phase (`literal_phase_k1`, and `lane1_literals` for lane 1 on a thread of its own).
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

// ---- A thread per rANS lane, its literals in registers (the full decode's and the seek's literal phase) ----
//
// A rANS lane's literals are one serial chain: each step's slot needs the state the step before left. So the time
// of a decode of few slices (atha_chr1: 7,504 slices, ~3,600 literals each) is the length of that chain in cycles,
// not a throughput (hence format version 7's second lane, FORMAT.md §3.4: with K = 2 a slice's literals are two
// independent chains of about half the length each, which parse_k1_linear runs on two threads): session 20's
// K = 1 literal loop took ~740 cycles a literal there (entropy alone 1.35 ms on an H200). This loop issues its
// memory accesses ahead of the chain:
//  * the context model is in shared memory when its order is at most K1_CTX_ORDER (else global, through L1), in
//    copies that spread a warp's loads over the banks (K1Rows), and a step loads the next context's row as soon as
//    its base is known (one 8-byte load); from global memory, where a load takes far longer, the four rows a
//    literal's successor context can have (consecutive: ((ctx << 2) | s) & mask) are loaded while the literal
//    itself decodes, so the next step only selects one by the base just decoded;
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

// How many copies of an order-k model the CTA keeps (log2): a literal loads one 8-byte row at a random place, and
// the lanes of a half-warp (an 8-byte load is served a half-warp at a time) collide where their rows share banks.
// Copy j of row nb is the 8-byte entry nb·R + j, and lane l reads copy l mod R: with R = 8 the eight lanes of a
// half-warp that read different copies hit different banks, and only lanes l and l + 8 can collide (when their rows
// have the same parity).
// K1_CTX_COPIES_LOG (default 3) is a measurement knob: the host sets it from ACEAPEX_GPU_CTX_COPIES_LOG.
#ifndef K1_CTX_COPIES_LOG
#define K1_CTX_COPIES_LOG 3u
#endif
// Shared-memory rows (copies included) of the context model: 16 KB, an order-4 model eight times over or an order-5
// one twice (a CTA's static shared memory is at most 48 KB: sixteen copies did not fit beside the other tables).
#define K1_CTX_ROWS 2048u
__device__ __forceinline__ u32 k1_ctx_copies_log(u32 order) {
    return order <= 4 ? K1_CTX_COPIES_LOG : min(K1_CTX_COPIES_LOG, 1u);
}

// Where a lane finds its copy of a context's row in shared memory: row nb at a + nb·8·R. The chain carries nb·8·R
// itself (`o` in k1_context_step), so that the next one is a shift and one LOP3 and the address one add; `sh` and
// `m` step it (k1_context_literals sets them). In global memory `o` is a row index, and `a` unused.
struct K1Rows {
    u32 a, sh, m;
};

// The 16-byte word i of the shared copies (see K1_CTX_COPIES_LOG) of a model whose rows start at `rows`: the 8-byte
// entries 2i and 2i + 1, copies of rows 2i >> rlog and (2i + 1) >> rlog.
__device__ __forceinline__ uint4 k1_ctx_piece(const uint2* rows, u32 i, u32 rlog) {
    const uint2 r0 = rows[(2 * i) >> rlog], r1 = rows[(2 * i + 1) >> rlog];
    return make_uint4(r0.x, r0.y, r1.x, r1.y);
}

// An 8-byte load from shared window address `a`.
__device__ __forceinline__ uint2 lds64(u32 a) {
    uint2 v;
    asm("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a));
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
            // (Two pieces as one 16-byte store, the first waiting for the second, were slower: atha genome's parse
            // with literals 0.231 -> 0.282 ms, general 0.321 -> 0.343, fly x11 0.303 -> 0.360; H200, session 39
            // run 5.)
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
// context, then `e` becomes the row of the next context, ((ctx << 2) | s) & mask. SMEM: `o` is the current
// context's byte offset nb·8·R in this lane's copy (see K1Rows), and the next row is one 8-byte load once the base
// is known. Global memory: `o` is the index nb in T of the current context's first successor row, and its four
// successor rows are loaded while the literal decodes, the base then selecting one. Either way the next `o` is ((o
// << 2) | (s << sr.sh)) & sr.m, and the base is two selects, where the sum of three compares and ctx -> nb -> nb·mul
// took 11 instructions from the compares to the next loads (the staged literal loop 43.5 -> 39 instructions a
// literal; H200, session 34 run 1: atha genome's entropy decode 0.411 -> 0.398 ms, fly x11's 0.375 -> 0.366).
// (Shared memory had the four successor rows loaded ahead too, two 16-byte loads a step and four more selects:
// H200, session 40, bench/gpu/stepbench, the full decode's loop took 82.7 cycles a literal against 75.2 with the row
// loaded after the base, though the decoding-only loop 67.2 against 75.2; in the kernels, run 3: atha genome's
// entropy stage 0.163 -> 0.159 ms, its parse with the literals' stores 0.228 -> 0.211, the full decode 0.325 ->
// 0.302.)
template <bool SMEM, class WR>
__device__ __forceinline__ u32 k1_context_step(const uint2* T, const K1Rows& sr, u32& x, u32& o, uint2& e, WR& wr) {
    uint2 r0, r1, r2, r3;
    if constexpr (!SMEM) {
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
    if constexpr (SMEM) e = lds64(sr.a + o);
    else e = m2 ? (m3 ? r3 : r2) : (m1 ? r1 : r0);
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
    u32 x = *xp, o = 0;  // context 0 (its successors are rows 0 .. 3)
    uint2 e = T[0];      // row 0 (in shared memory copy 0 of it, as good as this lane's)
    // This lane's copy as a shared window address, once: through a generic pointer every step converted it again
    // (S2UR and ULEA in the loop, session 23 run 5). In global memory `o` is a row index: nb itself.
    K1Rows sr = {0u, 2u, mask};
    if constexpr (SMEM) {
        const u32 rlog = k1_ctx_copies_log((32u - __clz(mask)) / 2u);
        sr.a = (u32)__cvta_generic_to_shared(T) + 8u * (threadIdx.x & ((1u << rlog) - 1u));
        sr.sh = 3u + rlog;  // ctx·8·R = ctx << (3 + rlog), and s enters ctx at bit 0
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
