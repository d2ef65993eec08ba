// The seek's worklist: `seed_batch` puts the requested units on it, `expand_ranges` turns each level's byte
// ranges into their sources and claims the units that hold them, `chase_bytes` resolves the requested bytes
// through the parsed units, `reset_batch` clears the claims.
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

// Token storage for unit `id` (its nmatch + 1 tokens) from the batch's pool: where it starts, or 0 when the pool
// is out (reported; the batch then fails and falls back to the CPU).
__device__ __forceinline__ u64 take_token_storage(const Ctx& c, u32 id) {
    const u64 need = (u64)c.meta[(u64)id * META_WORDS + 2] + 1;
    const u64 off = atomicAdd(c.pool_used, need);
    if (off + need <= c.pool_cap) return off;
    report(c.status, E_WORKLIST, id);
    return 0;
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
    c.tok_off[i] = take_token_storage(c, id);
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
    c.worklist[e] = b;
    c.tok_off[e] = take_token_storage(c, b);
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

// Clears the batch's claims (the host zeroes the counters after it).
extern "C" __global__ void reset_batch(Ctx c) {
    u32 n = min(c.counters[0], c.wl_cap);
    for (u32 e = blockIdx.x * blockDim.x + threadIdx.x; e < n; e += gridDim.x * blockDim.x)
        c.slot_of_unit[c.worklist[e]] = NO_SLOT;
}
