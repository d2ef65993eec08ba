// What one context-coded literal step costs a serial rANS chain on the device, and what its parts cost: a
// microbenchmark of the full decode's parse chain (kernels/literals.cuh k1_context_step) beside variants of it, on
// made-up tables and word streams (the step's cost does not depend on the bytes, only on how often it
// renormalises: ~2 bits a literal here, as in atha_chr1's genome mode).
//
// Launch as parse_k1_linear launches atha_chr1 (one CTA of four warps an SM, one warp a scheduler, each thread one
// chain in a 1 KB word ring of its own); every thread decodes STEPS literals and records its cycles. Printed: the
// mean and the slowest thread's cycles a literal, and the kernel's time.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I kernels bench/gpu/stepbench/stepbench.cu -o stepbench && ./stepbench
//
// Why: a device call is scarce, and the full decode's timing mixes the step with everything around it. Session 40
// measured with it which part of the step bounds the chain before changing the kernel or the format
// (bench/gpu/results/session40/run{1,2}-stepbench.txt, and run 3's log; docs/BENCH-GPU.md "Session 40"): the row
// loaded after the base (V6 then) became the kernel's step, so V0-V3 time the kernels as they are now and V6 is
// gone. The host code is left out when NVRTC compiles the file (__CUDACC_RTC__), so that the kernels can be checked
// and counted without a GPU (scripts/nvrtc_compile.py's compile with this file's text after the kernels' own).
#include "decode.cu"

#ifndef __CUDACC_RTC__
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#endif

#define STEPS 2048u
#define SB_THREADS 128u
#define SB_RLOG 3u  // eight copies of the order-4 model, as the kernel keeps it
#define PAIR_RLOG 1u  // two copies of the 16-symbol rows (16 KB, what the kernel has room for)

struct SbOut {
    unsigned long long* cycles;  // a thread's cycles
    u32* check;                  // a thread's final state and symbols (so nothing is dead code)
    u8* scatter;                 // 4 KiB a thread: the kernel's K1_LINEAR stores
    u8* coal;                    // STEPS bytes a thread, the warp's pieces interleaved
};

// A 16-byte load from shared window address `a` (the kernels' step no longer has one).
__device__ __forceinline__ uint4 sb_lds128(u32 a) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
    return v;
}

// A ring reader that takes no words (the renormalisation's shift with a constant): what the ring costs.
struct NoRing {
    __device__ __forceinline__ void refill() {}
    __device__ __forceinline__ void renorm(u32* x) {
        const bool need = *x < 65536u;
        *x = need ? __byte_perm(*x, 0x5a5au, 0x1054u) : *x;
    }
};

// The ring as the kernel's WordRing1, never refilled: the words wrap around the ring.
__device__ __forceinline__ WordRing1 make_ring(u32 ring) {
    WordRing1 r;
    r.ring = ring;
    r.at = 2u * (threadIdx.x * 7u);
    r.staged = 0;
    r.avail = 0;
    r.first = 0;
    r.w = lds16(ring | (r.at & (K1_RING_BYTES - 2u)));
    return r;
}

// The symbol of `slot` among four with cumulative frequencies c0 <= c1 <= c2 <= c3 <= c4 (c0 and c4 the range's
// ends), and its slot range [lo, hi): the kernel's three compares and selects.
__device__ __forceinline__ u32 sb_pick(u32 slot, u32 c0, u32 c1, u32 c2, u32 c3, u32 c4, u32& lo, u32& hi) {
    const bool m1 = slot >= c1, m2 = slot >= c2, m3 = slot >= c3;
    lo = m2 ? (m3 ? c3 : c2) : (m1 ? c1 : c0);
    hi = m2 ? (m3 ? c4 : c3) : (m1 ? c2 : c1);
    return m2 ? (m3 ? 3u : 2u) : (m1 ? 1u : 0u);
}

// 10-bit rows (a format change to measure): c1 | c2 << 10 | c3 << 20, the scale 2^10; the four successor rows one
// 16-byte load. `o` = piece index << (4 + rlog).
template <class WR>
__device__ __forceinline__ u32 step10(u32 a, u32 sh, u32 m, u32& x, u32& o, u32& e, WR& wr) {
    const uint4 r = sb_lds128(a + o);
    const u32 slot = x & 1023u;
    u32 lo, hi;
    const u32 s = sb_pick(slot, 0u, e & 1023u, (e >> 10) & 1023u, e >> 20, 1024u, lo, hi);
    x = (hi - lo) * (x >> 10) + slot - lo;
    wr.renorm(&x);
    o = ((o << 2) | (s << sh)) & m;
    e = s == 3u ? r.w : s == 2u ? r.z : s == 1u ? r.y : r.x;
    return s;
}

// The ring with the word after the next one loaded too: a renormalisation takes w0 and moves w1 into it, so the
// word it takes was loaded two steps earlier, not one.
struct Ring2 {
    u32 ring, at, w0, w1;
    __device__ __forceinline__ void refill() {}
    __device__ __forceinline__ void renorm(u32* x) {
        const bool need = *x < 65536u;
        *x = need ? __byte_perm(*x, w0, 0x1054u) : *x;
        at += need ? 2u : 0u;
        w0 = need ? w1 : w0;
        w1 = lds16(ring | ((at + 2u) & (K1_RING_BYTES - 2u)));
    }
};
__device__ __forceinline__ Ring2 make_ring2(u32 ring) {
    Ring2 r;
    r.ring = ring;
    r.at = 2u * (threadIdx.x * 7u);
    r.w0 = lds16(ring | (r.at & (K1_RING_BYTES - 2u)));
    r.w1 = lds16(ring | ((r.at + 2u) & (K1_RING_BYTES - 2u)));
    return r;
}

// The kernel's K1Rows for an order-4 model in SB_RLOG copies, this lane's copy at shared address `a` (as
// k1_context_literals sets it).
__device__ __forceinline__ K1Rows sb_rows(u32 a) { return {a, 3u + SB_RLOG, 255u << (3u + SB_RLOG)}; }

// The kernel's step (the row loaded after the base; V6 before session 40 made it the kernel's) in a loop of eight, its output: OUT 0 the bases gathered into a PRMT
// selector a step (as the kernel does), 1 read off the context every four steps (its low 8 bits are the last four
// bases) through a 256-entry table of four letters; STORE 0 none, 1 an 8-byte piece to the thread's own 4 KiB
// (the kernel's K1_LINEAR), 2 warp-interleaved, 3 the 2-bit codes (the context bytes) eight at a time, one 8-byte
// store every 32 literals.
template <int OUT, int STORE, class WR>
__device__ __forceinline__ u32 loop_after(u32 a, u32 tab, u32& x, WR& wr, const SbOut& out, u32 gt, u32 lane) {
    const u32 R = SB_RLOG;
    const K1Rows sr = sb_rows(a);
    u32 o = 0, acc = 0;
    uint2 e = make_uint2(0x0c000400u, 0x1000u - 0x400u);
    u64 codes = 0;
    u8* own = out.scatter + ((u64)gt << 12);
    u64* dst = (u64*)out.coal + (u64)(gt / 32u) * (STEPS / 8u) * 32u + lane;
    for (u32 l = 0; l < STEPS; l += 8) {
        u32 sel = 0, t0 = 0, t1 = 0;
#pragma unroll
        for (u32 k = 0; k < 8; k++) {
            const u32 sb = k1_context_step<true>(nullptr, sr, x, o, e, wr);
            if constexpr (OUT == 0) sel |= sb << (4 * k);
            if constexpr (OUT == 1 && STORE != 3) {
                if (k == 3) t0 = lds32(tab + ((o >> (1u + R)) & 0x3FCu));
                if (k == 7) t1 = lds32(tab + ((o >> (1u + R)) & 0x3FCu));
            }
            if constexpr (STORE == 3) {
                if (k == 3) t0 = (o >> (3u + R)) & 255u;
                if (k == 7) t1 = (o >> (3u + R)) & 255u;
            }
        }
        u64 piece;
        if constexpr (OUT == 0) piece = (u64)acgt4(sel & 0xFFFFu) | ((u64)acgt4(sel >> 16) << 32);
        else piece = (u64)t0 | ((u64)t1 << 32);
        if constexpr (STORE == 0) acc += (u32)piece ^ (u32)(piece >> 32);
        if constexpr (STORE == 1) *(u64*)(own + l) = piece;
        if constexpr (STORE == 2) dst[(l / 8u) * 32u] = piece;
        if constexpr (STORE == 3) {
            codes |= (u64)(t0 | t1 << 8) << (16 * ((l / 8u) & 3u));
            if ((l & 31u) == 24u) {
                *(u64*)(own + l / 4u - 6u) = codes;
                codes = 0;
            }
        }
    }
    return acc;
}

// Rows of 16 bytes, {c1, c2, c3, 0} (a shared-memory layout, not a format change): no field to extract before the
// compares. Copy j of row nb at 16 (nb R + j), so a quarter-warp's eight 16-byte loads hit eight bank quads; `o` =
// nb << (4 + rlog). In a loop of eight with the bases gathered; STORE as in loop_after (0 or 1).
template <int STORE, class WR>
__device__ __forceinline__ u32 loop_wide(u32 a, u32& x, WR& wr, const SbOut& out, u32 gt) {
    const u32 R = SB_RLOG, sh = 4u + R, m = 255u << (4u + R);
    u32 o = 0, acc = 0;
    uint4 e = sb_lds128(a);
    u8* own = out.scatter + ((u64)gt << 12);
    for (u32 l = 0; l < STEPS; l += 8) {
        u32 sel = 0;
#pragma unroll
        for (u32 k = 0; k < 8; k++) {
            const u32 slot = x & 4095u;
            u32 lo, hi;
            const u32 sb = sb_pick(slot, 0u, e.x, e.y, e.z, 4096u, lo, hi);
            x = (hi - lo) * (x >> 12) + slot - lo;
            wr.renorm(&x);
            o = ((o << 2) | (sb << sh)) & m;
            e = sb_lds128(a + o);
            sel |= sb << (4 * k);
        }
        const u64 piece = (u64)acgt4(sel & 0xFFFFu) | ((u64)acgt4(sel >> 16) << 32);
        if constexpr (STORE == 0) acc += (u32)piece ^ (u32)(piece >> 32);
        else *(u64*)(own + l) = piece;
    }
    return acc;
}

// A LIT-table step (kernels/literals.cuh k1_table_step) with its slot entry through a 32-bit shared address
// (`lds32`) instead of the kernel's generic pointer (V18 against V19: the table-coded structure slices end the
// parse, ~150 cycles a literal in session 40's run 3).
template <class WR>
__device__ __forceinline__ u32 table_step_lds(u32 la, u32& x, WR& wr, bool& bad) {
    const u32 slot = x & 4095u;
    const u32 e = lds32(la + 4u * slot);
    bad |= e == 0xFFFFFFFFu;
    x = (((e >> 8) & 0xFFFu) + 1) * (x >> 12) + slot - (e >> 20);
    wr.renorm(&x);
    return e & 0xFFu;
}

// No context model: one fixed row (what the model's rows and their selection cost).
template <class WR>
__device__ __forceinline__ u32 step_fixed(u32 c1, u32 c2, u32 c3, u32& x, WR& wr) {
    const u32 slot = x & 4095u;
    u32 lo, hi;
    const u32 s = sb_pick(slot, 0u, c1, c2, c3, 4096u, lo, hi);
    x = (hi - lo) * (x >> 12) + slot - lo;
    wr.renorm(&x);
    return s;
}

// Two bases a rANS symbol (a format change to measure): 16 symbols a context, its row C[0..15] (C[0] = 0) as eight
// words C[2i] | C[2i+1] << 16, C[16] = 4096; the first base by three compares with C[4], C[8], C[12], the second by
// three within its quarter. The next context's row is loaded once both are known (16 successors are too many to
// load ahead): two 16-byte loads at a + ctx·32R and + 16R. Returns the pair b1·4 + b2.
template <class WR>
__device__ __forceinline__ u32 step_pair(u32 a, u32 rs, u32 mask, u32& x, u32& ctx, uint4& w0, uint4& w1, WR& wr) {
    const u32 slot = x & 4095u;
    const u32 C4 = w0.z & 0xFFFFu, C8 = w1.x & 0xFFFFu, C12 = w1.z & 0xFFFFu;
    const bool m1 = slot >= C4, m2 = slot >= C8, m3 = slot >= C12;
    const u32 A = m2 ? (m3 ? w1.z : w1.x) : (m1 ? w0.z : w0.x);
    const u32 B = m2 ? (m3 ? w1.w : w1.y) : (m1 ? w0.w : w0.y);
    const u32 N = m2 ? (m3 ? 4096u : C12) : (m1 ? C8 : C4);
    const u32 b1 = m2 ? (m3 ? 3u : 2u) : (m1 ? 1u : 0u);
    u32 lo, hi;
    const u32 b2 = sb_pick(slot, A & 0xFFFFu, A >> 16, B & 0xFFFFu, B >> 16, N, lo, hi);
    x = (hi - lo) * (x >> 12) + slot - lo;
    wr.renorm(&x);
    const u32 sym = b1 * 4u + b2;
    ctx = ((ctx << 4) | sym) & mask;
    const u32 ad = a + (ctx << rs);
    w0 = sb_lds128(ad);
    w1 = sb_lds128(ad + (16u << PAIR_RLOG));
    return sym;
}

// V: 0 the kernel's loop (k1_context_literals, no stores), 1 the same with its stores (K1_LINEAR, 4 KiB a thread
// apart), 2 the kernel's step with the warp's pieces interleaved (one store a warp: 256 contiguous bytes), 3 the
// kernel's step in this loop (no stores), 4 no ring, 5 no model (a fixed row), 7 10-bit rows, 8 two bases a symbol;
// 9-15 the kernel's step with other outputs and stores (loop_after), 16-17 rows of 16 bytes, 18-19 a LIT-table
// (table-coded) step. (6, the row loaded
// after the base, is the kernel's step since session 40: V3.)
template <int V>
__global__ void __launch_bounds__(SB_THREADS) stepbench(const uint2* rows12, const u32* rows10, const u32* pairs,
                                                        const u16* words, SbOut out) {
    extern __shared__ uint4 dyn[];
    __shared__ __align__(16) uint2 ctx12[256u << SB_RLOG];
    __shared__ __align__(16) u32 ctx10[256u << SB_RLOG];
    __shared__ __align__(16) uint4 ctxp[2u * 256u << PAIR_RLOG];
    __shared__ u32 acgt_tab[256];
    for (u32 i = threadIdx.x; i < 256; i += blockDim.x) acgt_tab[i] = acgt4(((i >> 6) & 3u) | ((i >> 4) & 3u) << 4 | ((i >> 2) & 3u) << 8 | (i & 3u) << 12);
    const u32 tid = threadIdx.x, lane = tid & 31u;
    for (u32 i = tid; i < (128u << SB_RLOG); i += blockDim.x) ((uint4*)ctx12)[i] = k1_ctx_piece(rows12, i, SB_RLOG);
    for (u32 i = tid; i < (64u << SB_RLOG); i += blockDim.x) {
        const u32 p = i >> SB_RLOG;
        ((uint4*)ctx10)[i] = make_uint4(rows10[4 * p], rows10[4 * p + 1], rows10[4 * p + 2], rows10[4 * p + 3]);
    }
    for (u32 i = tid; i < (512u << PAIR_RLOG); i += blockDim.x) {
        const u32 p = i >> PAIR_RLOG;  // 16-byte piece p of the pair rows: row p / 2, words 4 (p % 2) ..
        ctxp[i] = make_uint4(pairs[4 * p], pairs[4 * p + 1], pairs[4 * p + 2], pairs[4 * p + 3]);
    }
    // This thread's 1 KB ring (aligned to its size, as the kernel's), filled with the thread's words.
    const u32 base = ((u32)__cvta_generic_to_shared(dyn) + K1_RING_BYTES - 1) & ~(K1_RING_BYTES - 1);
    const u32 ring = base + tid * K1_RING_BYTES;
    const u32 gt = blockIdx.x * blockDim.x + tid;
    const u32 wide = base + SB_THREADS * K1_RING_BYTES;  // 256 rows x 2^SB_RLOG copies x 16 bytes
    // A LIT table (dtab layout) of 256 bytes at 16 slots each (~8 bits a literal, as range-coded data), after them.
    const u32 lit = wide + (256u << SB_RLOG) * 16u;
    for (u32 slot = tid; slot < 4096u; slot += blockDim.x)
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(lit + 4u * slot),
                     "r"((slot >> 4) | (15u << 8) | ((slot & ~15u) << 20)));
    for (u32 i = tid; i < (256u << SB_RLOG); i += blockDim.x) {
        const uint2 r = rows12[i >> SB_RLOG];
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(wide + 16u * i), "r"(r.x & 0xFFFFu),
                     "r"(r.x >> 16), "r"(r.y), "r"(0u));
    }
    for (u32 i = 0; i < K1_RING_WORDS / 2; i++) {
        const u32 v = (u32)words[(gt * 131u + 2 * i) % 65536u] | (u32)words[(gt * 131u + 2 * i + 1) % 65536u] << 16;
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(ring + 4u * i), "r"(v));
    }
    __syncthreads();
    u32 x = 0x10000u | (gt * 2654435761u) | 0x80000000u;
    u32 acc = 0;
    const u32 mask = 255u;  // order 4
    const u32 copy = 16u * (tid & ((1u << SB_RLOG) - 1u));
    // This lane's copy of the 8-byte rows (the kernel's layout, k1_ctx_piece).
    const u32 rows_at = (u32)__cvta_generic_to_shared(ctx12) + copy / 2u;
    const long long t0 = clock64();
    if constexpr (V == 0 || V == 1) {
        WordRing1 wr = make_ring(ring);
        LiteralSink1 sink;
        k1_context_literals<true, V == 0 ? K1_NONE : K1_LINEAR>(ctx12, mask, 0, STEPS, &x, wr, sink,
                                                               out.scatter + ((u64)gt << 12), nullptr);
    } else if constexpr (V == 2 || V == 3 || V == 4) {
        const K1Rows sr = sb_rows(rows_at);
        u32 o = 0;
        uint2 e = ctx12[0];
        WordRing1 wr = make_ring(ring);
        NoRing nr;
        u64* dst = (u64*)out.coal + (u64)(gt / 32u) * (STEPS / 8u) * 32u + lane;
        for (u32 l = 0; l < STEPS; l += 8) {
            u32 sel = 0;
#pragma unroll
            for (u32 k = 0; k < 8; k++) {
                if constexpr (V == 4) sel |= k1_context_step<true>(ctx12, sr, x, o, e, nr) << (4 * k);
                else sel |= k1_context_step<true>(ctx12, sr, x, o, e, wr) << (4 * k);
            }
            if constexpr (V == 2) dst[(l / 8u) * 32u] = (u64)acgt4(sel & 0xFFFFu) | ((u64)acgt4(sel >> 16) << 32);
            else acc += sel;
        }
    } else if constexpr (V == 5) {
        const uint2 r = rows12[gt & 255u];
        const u32 c1 = r.x & 0xFFFFu, c2 = r.x >> 16, c3 = r.y;
        WordRing1 wr = make_ring(ring);
        for (u32 l = 0; l < STEPS; l += 8) {
            u32 sel = 0;
#pragma unroll
            for (u32 k = 0; k < 8; k++) sel |= step_fixed(c1, c2, c3, x, wr) << (4 * k);
            acc += sel;
        }
    } else if constexpr (V == 7) {
        const u32 a = (u32)__cvta_generic_to_shared(ctx10) + copy;
        u32 o = 0, e = rows10[0];
        WordRing1 wr = make_ring(ring);
        for (u32 l = 0; l < STEPS; l += 8) {
            u32 sel = 0;
#pragma unroll
            for (u32 k = 0; k < 8; k++)
                sel |= step10(a, 4u + SB_RLOG, (mask >> 2) << (4u + SB_RLOG), x, o, e, wr) << (4 * k);
            acc += sel;
        }
    } else if constexpr (V == 18 || V == 19) {
        WordRing1 wr = make_ring(ring);
        bool bad = false;
        if constexpr (V == 18) {
            LiteralSink1 sink;
            // Shared or global as far as the compiler knows (the kernel's `local ? k1->lit : c.dtab + ...`), so a
            // generic load, as there.
            const u32* shared_lit = (const u32*)((u8*)dyn + (lit - (u32)__cvta_generic_to_shared(dyn)));
            const u32* L = gt == ~0u ? (const u32*)out.check : shared_lit;
            k1_table_literals<K1_NONE>(L, 0, STEPS, &x, wr, sink, nullptr, nullptr, &bad);
        } else {
            for (u32 l = 0; l < STEPS; l += 8) {
                u64 v = 0;
#pragma unroll
                for (u32 k = 0; k < 8; k++) v |= (u64)table_step_lds(lit, x, wr, bad) << (8 * k);
                acc += (u32)v ^ (u32)(v >> 32);
            }
        }
        acc += bad;
    } else if constexpr (V == 16 || V == 17) {
        WordRing1 wr = make_ring(ring);
        acc = loop_wide<V == 16 ? 1 : 0>(wide + 16u * (tid & ((1u << SB_RLOG) - 1u)), x, wr, out, gt);
    } else if constexpr (V >= 9) {
        const u32 a = rows_at;
        const u32 tab = (u32)__cvta_generic_to_shared(acgt_tab);
        if constexpr (V == 14) {
            Ring2 wr = make_ring2(ring);
            acc = loop_after<0, 0>(a, tab, x, wr, out, gt, lane);
        } else {
            WordRing1 wr = make_ring(ring);
            if constexpr (V == 9) acc = loop_after<0, 1>(a, tab, x, wr, out, gt, lane);
            if constexpr (V == 10) acc = loop_after<1, 1>(a, tab, x, wr, out, gt, lane);
            if constexpr (V == 11) acc = loop_after<1, 0>(a, tab, x, wr, out, gt, lane);
            if constexpr (V == 12) acc = loop_after<1, 2>(a, tab, x, wr, out, gt, lane);
            if constexpr (V == 13) acc = loop_after<1, 3>(a, tab, x, wr, out, gt, lane);
            if constexpr (V == 15) acc = loop_after<0, 0>(a, tab, x, wr, out, gt, lane);
        }
    } else {
        const u32 a = (u32)__cvta_generic_to_shared(ctxp) + 16u * (tid & ((1u << PAIR_RLOG) - 1u));
        u32 ctx = 0;
        uint4 w0 = ctxp[0], w1 = ctxp[1u << PAIR_RLOG];
        WordRing1 wr = make_ring(ring);
        for (u32 l = 0; l < STEPS; l += 8) {  // four pairs: eight bases
            u32 sel = 0;
#pragma unroll
            for (u32 k = 0; k < 4; k++) sel |= step_pair(a, 5u + PAIR_RLOG, mask, x, ctx, w0, w1, wr) << (8 * k);
            acc += sel;
        }
    }
    const long long t1 = clock64();
    out.cycles[gt] = (unsigned long long)(t1 - t0);
    out.check[gt] = x ^ acc;
}

#ifndef __CUDACC_RTC__
#define CK(call)                                                                          \
    do {                                                                                  \
        cudaError_t err_ = (call);                                                        \
        if (err_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

static u32 rnd_state = 12345u;
static u32 rnd() {
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 17;
    rnd_state ^= rnd_state << 5;
    return rnd_state;
}

// n increasing cumulative frequencies in (0, scale), every symbol at least 1.
static std::vector<u32> cums(u32 n, u32 scale) {
    std::vector<u32> c;
    while (true) {
        c.clear();
        for (u32 i = 0; i < n; i++) c.push_back(1 + rnd() % (scale - 1));
        std::sort(c.begin(), c.end());
        bool ok = true;
        for (u32 i = 1; i < n; i++) ok &= c[i] > c[i - 1];
        if (ok) return c;
    }
}

template <int V>
static void run(const char* name, int sms, const uint2* r12, const u32* r10, const u32* rp, const u16* w, SbOut out,
                unsigned long long* hcyc) {
    const u32 dyn = (SB_THREADS + 1) * K1_RING_BYTES + (256u << SB_RLOG) * 16u + 4096u * 4u;
    CK(cudaFuncSetAttribute(stepbench<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    float best = 1e9f;
    for (int rep = 0; rep < 4; rep++) {
        CK(cudaEventRecord(a));
        stepbench<V><<<sms, SB_THREADS, dyn>>>(r12, r10, rp, w, out);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        if (rep > 0 && ms < best) best = ms;
    }
    const u32 n = sms * SB_THREADS;
    CK(cudaMemcpy(hcyc, out.cycles, n * 8ull, cudaMemcpyDeviceToHost));
    double sum = 0, mx = 0;
    for (u32 i = 0; i < n; i++) {
        sum += (double)hcyc[i];
        mx = std::max(mx, (double)hcyc[i]);
    }
    printf("| %d | %-58s | %7.1f | %7.1f | %7.1f |\n", V, name, sum / n / STEPS, mx / STEPS, best * 1000.0);
}

int main() {
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    std::vector<uint2> r12(256);
    std::vector<u32> r10(256), rp(256 * 8);
    for (u32 c = 0; c < 256; c++) {
        auto a = cums(3, 4096);
        r12[c] = make_uint2(a[0] | a[1] << 16, a[2]);
        auto b = cums(3, 1024);
        r10[c] = b[0] | b[1] << 10 | b[2] << 20;
        auto p = cums(15, 4096);
        p.insert(p.begin(), 0u);
        for (u32 i = 0; i < 8; i++) rp[8 * c + i] = p[2 * i] | p[2 * i + 1] << 16;
    }
    std::vector<u16> words(65536);
    for (auto& v : words) v = (u16)rnd();
    uint2* d12;
    u32 *d10, *dp;
    u16* dw;
    SbOut out;
    const u32 n = sms * SB_THREADS;
    CK(cudaMalloc(&d12, 256 * 8));
    CK(cudaMalloc(&d10, 256 * 4));
    CK(cudaMalloc(&dp, 256 * 32));
    CK(cudaMalloc(&dw, 65536 * 2));
    CK(cudaMalloc(&out.cycles, n * 8ull));
    CK(cudaMalloc(&out.check, n * 4ull));
    CK(cudaMalloc(&out.scatter, (u64)n << 12));
    CK(cudaMalloc(&out.coal, (u64)n * STEPS));
    CK(cudaMemcpy(d12, r12.data(), 256 * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d10, r10.data(), 256 * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dp, rp.data(), 256 * 32, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dw, words.data(), 65536 * 2, cudaMemcpyHostToDevice));
    std::vector<unsigned long long> h(n);
    printf("%d SMs, %u threads a CTA, %u literals a thread\n\n", sms, SB_THREADS, STEPS);
    printf("| V | step | cycles a literal (mean) | (slowest thread) | kernel us |\n| --- | --- | ---: | ---: | ---: |\n");
    run<0>("kernel loop (k1_context_literals, K1_NONE)", sms, d12, d10, dp, dw, out, h.data());
    run<1>("kernel loop, K1_LINEAR stores (4 KiB apart)", sms, d12, d10, dp, dw, out, h.data());
    run<2>("kernel step, warp-interleaved stores", sms, d12, d10, dp, dw, out, h.data());
    run<3>("kernel step, no stores", sms, d12, d10, dp, dw, out, h.data());
    run<4>("kernel step, no ring (constant word)", sms, d12, d10, dp, dw, out, h.data());
    run<5>("no model: one fixed row", sms, d12, d10, dp, dw, out, h.data());
    run<7>("10-bit rows, successors one 16-byte load", sms, d12, d10, dp, dw, out, h.data());
    run<8>("two bases a symbol (16-symbol rows), per base", sms, d12, d10, dp, dw, out, h.data());
    run<15>("3 + bases gathered (selector), no stores", sms, d12, d10, dp, dw, out, h.data());
    run<9>("3 + bases gathered, K1_LINEAR stores", sms, d12, d10, dp, dw, out, h.data());
    run<10>("3 + letters off the context (table), K1_LINEAR stores", sms, d12, d10, dp, dw, out, h.data());
    run<11>("3 + letters off the context, no stores", sms, d12, d10, dp, dw, out, h.data());
    run<12>("3 + letters off the context, warp-interleaved stores", sms, d12, d10, dp, dw, out, h.data());
    run<13>("3 + 2-bit codes off the context, a store per 32", sms, d12, d10, dp, dw, out, h.data());
    run<14>("3 + bases gathered, ring two words ahead, no stores", sms, d12, d10, dp, dw, out, h.data());
    run<17>("3 with 16-byte rows {c1, c2, c3}, bases gathered, no stores", sms, d12, d10, dp, dw, out, h.data());
    run<16>("3 with 16-byte rows, bases gathered, K1_LINEAR stores", sms, d12, d10, dp, dw, out, h.data());
    run<18>("LIT table, the kernel's loop (generic load), no stores", sms, d12, d10, dp, dw, out, h.data());
    run<19>("LIT table, the entry through lds32, no stores", sms, d12, d10, dp, dw, out, h.data());
    return 0;
}
#endif
