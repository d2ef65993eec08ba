// A slice's token values from its codes: the extra-bits reader (`BitReader1`), the token parses of a thread and of
// a group (`k1_token_values`, `group_token_values`), their end checks (`token_sums_fault`) and the staged code
// phase (`k1_code_run`, `k1_codes_shared`).
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

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
