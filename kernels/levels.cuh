// Full decode by match levels (ACEAPEX_GPU_RESOLVE=levels): each match's level found once, then the matches copied
// a level at a time (`copy_level`, `copy_tail`) and what lies over the cap chased (`chase_unleveled`).
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

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
