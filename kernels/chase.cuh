// The map chase: the maps over a parse of every unit (token index, literal map, chase records: `unit_chase_maps`),
// `chase_resident` for a resident seek's bytes and `chase_matches` for every match byte of a full decode.
//
// Part of the kernels' one translation unit: kernels/decode.cu includes it after the parts it builds on.

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
