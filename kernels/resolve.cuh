// Match resolution over byte stamps (`resolve_warp`): `resolve_round` and `resolve_chase` for the full decode,
// `seek_resolve` for the seek. Alternatives to the map chase and the copy flow, kept for comparison
// (ACEAPEX_GPU_RESOLVE).
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

// Item i of a resolve list (a match: its entry and token) and of its span list (the bytes of it left: klo, khi).
__device__ __forceinline__ void list_item(const u64* list, const u64* klist, u64 i, u32* e, u32* t, u32* klo,
                                          u32* khi) {
    const u64 entry = list[i], span = klist[i];
    *e = (u32)(entry >> 32);
    *t = (u32)entry;
    *klo = (u32)(span >> 32);
    *khi = (u32)span;
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
            list_item(list_in, klist_in, unit * 32 + lane, &e, &t, &klo, &khi);
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
            list_item(list_in, klist_in, unit * 32 + lane, &e, &t, &klo, &khi);
            has = true;
        }
        resolve_warp(c, true, parsed, round, e, t, klo, khi, has, list_out, klist_out, list_counts, list_cap, true, 0);
    }
}
