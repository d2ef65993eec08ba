// The unit parser (`parse_one`, `parse_units`) and its launches: a worklist level or every unit (`parse_k1`,
// `parse_k32`, `parse_k1_staged`, `parse_k1_linear`), the seek's literal kernels (`literals_k1`, `literals_warp`),
// and `finish_linear_k1`, the rest of a linear full-decode parse (token values, literal placement, chase maps).
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

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

#ifdef K1_CLOCKS
// A measurement (ACEAPEX_GPU_K1_CLOCKS=1, `gpubench --clocks`), off in every other build: for each unit's rANS
// lane thread of a linear parse (record 2 unit + lane), the cycles it took (clock64), when it started and ended
// (globaltimer, ns) and its SM, for the host to read back (Device::k1_clocks) and set against the unit's codes
// and literals: which chains end last, and what a code and a literal step cost on them. A thread records when its
// warp reconverges after the parse, so a record is in effect its warp's (a warp runs as long as its longest thread).
__device__ u64 k1_clocks[K1_CLOCKS][4];
__device__ __forceinline__ u64 global_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void k1_clock_record(u32 id, bool lane1, long long cycles0, u64 ns0) {
    const u64 r = 2ull * id + (lane1 ? 1u : 0u);
    if (r >= K1_CLOCKS) return;
    u32 sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    k1_clocks[r][0] = (u64)(clock64() - cycles0);
    k1_clocks[r][1] = ns0;
    k1_clocks[r][2] = global_ns();
    k1_clocks[r][3] = sm;
}
#endif

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
        const u32 first_id = first < end ? c.worklist[first] : NO_UNIT;
        if (first_id != NO_UNIT) load_k1_tables(c, first_id >> c.group_shift, &k1s);
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
    // A place the full decode's order keeps (NO_UNIT): that order comes only with a launch that gives every entry
    // a thread of its own (src/engine/gpu/device/full.rs literal_kinds_apart), so the thread has nothing to do. (A
    // test in the loop changed the code ptxas made of it, and general mode's parse ran 3 % slower, session 39
    // run 6.)
    const bool none = W == 1 && begin + group < end && c.worklist[begin + group] == NO_UNIT;
    for (u32 e = idle || none ? end : begin + group; e < end; e += ngroups) {
        u32 id = c.worklist[e];
        const u64 slot = c.slot_of_unit ? e : id;
#ifdef K1_CLOCKS
        const long long cycles0 = clock64();
        const u64 ns0 = global_ns();
#endif
        if constexpr (LINEAR) {
            if (lane1) {
                if (mode != MODE_TOKENS) lane1_literals(c, id, c.bytes + (slot << c.unit_log), mode, k1, ring);
#ifdef K1_CLOCKS
                k1_clock_record(id, true, cycles0, ns0);
#endif
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
#ifdef K1_CLOCKS
        if constexpr (LINEAR) k1_clock_record(id, false, cycles0, ns0);
#endif
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

__device__ __forceinline__ void unit_chase_maps(const Ctx& c, u64 u, u32 lane, u32 lanes,
                                                const Maps& m);  // kernels/chase.cuh
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
