// Full decode by copies in stream order (Resolve::Flow, the default on archives with many match bytes): every
// match copied by one `copy_flow` launch once its sources are.
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

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
