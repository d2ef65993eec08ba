// The resident seek of kernels/chase.cuh (index_chase_maps, index_tokens, chase_at,
// chase_resident) and the full decode's chase through the same maps (chase_matches' batches) against a
// sequential decode: random streams of units whose tokens are literal runs and forward, periodic-fill and
// reverse-complement matches with absolute sources anywhere before them, resident as the full decode's parse
// leaves them (literals at their positions, anything in the match bytes). Every requested byte whose chain is at
// most max_depth deep equals the decode, and the status holds a depth fault exactly when some chain is deeper.
// The kernels run as one block of one warp, its 32 threads one after another (none of them uses a warp
// collective).
#include "prelude.h"

#define __global__
#define __shared__
uint4 dyn_smem[64];  // chase_matches' batches (the harness calls their functions itself)
static inline void __syncwarp() {}
#define FULL_MASK 0xFFFFFFFFu
#define META_WORDS 8
#define E_BACK 7
#define E_DEPTH 8
static const Dim3 blockIdx{0}, blockDim{32}, gridDim{1};
#define LAUNCH(kernel_call) \
    for (threadIdx.x = 0; threadIdx.x < 32; threadIdx.x++) kernel_call
// The fields of the kernel's Ctx that the resident seek reads.
struct Ctx {
    const u32* meta;
    u64* tok_off;
    u32* tpos;
    u32* mpos;
    u64* back;
    u8* bytes;
    u64* status;
    u64 nunits;
    u32 unit_log;
    u32 max_depth;
};
static inline void report(u64* status, u32 code, u64 unit) {
    if (status[0] == 0) status[0] = ((u64)code << 40) | (unit & 0xFFFFFFFFFFull);
}
static inline bool failed(const Ctx& c) { return c.status[0] != 0; }
using std::max;
#include "resident_chase.inc"

static u8 complement_of(u8 b) { return (u8)complement(b); }

int main() {
    for (int it = 0; it < 3000; it++) {
        const u32 unit_log = 9 + rnd() % 3;
        const u32 unit = 1u << unit_log;
        const u64 nunits = 1 + rnd() % 24;
        const u32 last_len = rnd() % 2 ? unit : 1 + rnd() % unit;
        const u64 stream = ((nunits - 1) << unit_log) + last_len;
        std::vector<u32> meta(nunits * META_WORDS, 0);
        std::vector<u64> tok_off(nunits + 1, 0);
        std::vector<u32> tpos, mpos;
        std::vector<u64> back;
        std::vector<u8> ref(stream), bytes((size_t)nunits << unit_log), depth(stream);
        const bool short_matches = rnd() % 2;
        for (u64 u = 0; u < nunits; u++) {
            const u32 len = u + 1 == nunits ? last_len : unit;
            const u64 base = u << unit_log;
            tok_off[u] = tpos.size();
            u32 pos = 0, nmatch = 0;
            for (;;) {
                u32 lit = rnd() % 4 == 0 ? 0 : rnd() % (rnd() % 3 == 0 ? 200 : 10);
                if (pos + lit > len) lit = len - pos;
                for (u32 k = 0; k < lit; k++) {
                    ref[base + pos + k] = (u8)"ACGTacgtNx"[rnd() % 10];
                    bytes[base + pos + k] = ref[base + pos + k];
                    depth[base + pos + k] = 0;
                }
                tpos.push_back(pos);
                pos += lit;
                const u64 dst = base + pos;
                const u32 mlen = 2 + rnd() % (short_matches ? 8 : 60);
                if (pos + mlen > len || dst < 1) {  // the last token: literals to the unit's end
                    for (u32 k = pos; k < len; k++) {
                        ref[base + k] = (u8)"ACGTacgtNx"[rnd() % 10];
                        bytes[base + k] = ref[base + k];
                        depth[base + k] = 0;
                    }
                    mpos.push_back(len);
                    back.push_back(0);
                    break;
                }
                // Sources: often close (deep chains through recent matches), sometimes anywhere before.
                const bool rc = dst >= mlen && rnd() % 4 == 0;
                const u64 most = rc ? dst - mlen + 1 : dst;
                u64 dist = rnd() % 2 ? 1 + rnd() % std::min<u64>(most, 64) : 1 + ((u64)rnd() << 8 | rnd() % 256) % most;
                for (u32 k = 0; k < mlen; k++) {
                    const u64 s = rc ? dst - dist - k : dst - dist + k % dist;
                    ref[dst + k] = rc ? complement_of(ref[s]) : ref[s];
                    depth[dst + k] = (u8)std::min(depth[s] + 1, 250);
                    bytes[dst + k] = (u8)rnd();  // a match byte's resident value is not to be read
                }
                mpos.push_back(pos);
                back.push_back(dist | (rc ? RC_FLAG : 0));
                pos += mlen;
                nmatch++;
            }
            meta[u * META_WORDS + 2] = nmatch;
            meta[u * META_WORDS + 7] = len;
        }
        tok_off[nunits] = tpos.size();
        for (u64 p = stream; p < bytes.size(); p++) bytes[p] = 0xEE;  // past the stream: never written
        tpos.push_back(0);  // the arrays hold tokens + 1 entries
        mpos.push_back(0);
        back.push_back(0);
        std::vector<u32> index(nunits << (unit_log - TOKEN_BUCKET_LOG)), litmap(((size_t)nunits << unit_log) / 32);
        u64 status = 0;
        Ctx c{meta.data(), tok_off.data(), tpos.data(), mpos.data(), back.data(), bytes.data(), &status, nunits,
              unit_log, 1 + rnd() % 16};
        std::vector<uint4> rec(tpos.size(), uint4{0xEEEEEEEEu, 0, 0xEEEEEEEEu, 0xEEEEEEEEu});
        const Maps m{index.data(), litmap.data(), rec.data()};
        LAUNCH(index_chase_maps(c, m));
        {  // the token index alone (Resolve::Chase's) is the maps' own
            std::vector<u32> alone(index.size(), 0xEEEEEEEEu);
            LAUNCH(index_tokens(c, alone.data()));
            if (alone != index) {
                printf("FAIL: case %d: index_tokens and index_chase_maps disagree\n", it);
                return 1;
            }
        }
        // A random ascending set of units, the last (maybe short) one among them at times.
        std::vector<u32> ids;
        for (u32 u = 0; u < nunits; u++)
            if (rnd() % 3 != 0) ids.push_back(u);
        if (ids.empty()) ids.push_back((u32)(nunits - 1));
        std::vector<u8> out(ids.size() << unit_log, 0xEE);
        LAUNCH(chase_resident(c, ids.data(), (u32)ids.size(), out.data(), m));
        bool deep = false;
        for (size_t k = 0; k < ids.size(); k++) {
            const u64 base = (u64)ids[k] << unit_log;
            const u32 len = meta[ids[k] * META_WORDS + 7];
            for (u32 o = 0; o < unit; o++) {
                const u8 got = out[(k << unit_log) + o];
                if (o >= len) {
                    if (got != 0xEE) {
                        printf("FAIL: case %d: unit %u offset %u past its %u bytes was written\n", it, ids[k], o, len);
                        return 1;
                    }
                    continue;
                }
                if (depth[base + o] > c.max_depth) {
                    deep = true;
                    continue;
                }
                if (got != ref[base + o]) {
                    printf("FAIL: case %d: unit %u offset %u (depth %u, max %u): %u, decoded %u\n", it, ids[k], o,
                           depth[base + o], c.max_depth, got, ref[base + o]);
                    return 1;
                }
            }
        }
        if (deep != ((status >> 40) == E_DEPTH)) {
            printf("FAIL: case %d: a chain deeper than %u: %d, status %llx\n", it, c.max_depth, deep,
                   (unsigned long long)status);
            return 1;
        }
        // The full decode's chase: every match byte of the stream in place, the literals untouched, the same depth
        // fault (after which the threads that start later stop, so only a clean run is compared byte by byte). The
        // bytes past the stream's end are not written, and after a failed parse nothing is.
        {
            // chase_matches' loop (chase_stream) on `warps` warps one after another, each batch's loads on every
            // lane before its chases (the kernel's __syncwarp), so that a batch's windows lie `warps` apart.
            const u32 warps = 1 + rnd() % 4;
            auto launch = [&](const Ctx& fc) {
                if (fc.nunits == 0 || failed(fc)) return;
                const u32 total = (u32)stream, windows = (total + 31) / 32;
                for (u32 w = 0; w < warps; w++)
                    for (u32 first = w; first < windows; first += 32 * warps) {
                        ChaseBatch b;
                        for (u32 lane = 0; lane < 32; lane++)
                            chase_batch_load<u32>(m, first, warps, windows, total, lane, b);
                        for (u32 lane = 0; lane < 32; lane++)
                            chase_batch_run<u32>(fc, m, first, warps, lane, b);
                    }
            };
            u64 full_status = 0;
            std::vector<u8> full = bytes;
            Ctx fc = c;
            fc.bytes = full.data();
            fc.status = &full_status;
            if (it % 10 == 0) {
                full_status = (u64)E_BACK << 40;  // the parse failed
                launch(fc);
                if (full != bytes) {
                    printf("FAIL: case %d: the full chase wrote bytes after a failed parse\n", it);
                    return 1;
                }
                full_status = 0;
            }
            launch(fc);
            bool any_deep = false;
            for (u64 p = 0; p < full.size(); p++) {
                if (p >= stream) {
                    if (full[p] != bytes[p]) {
                        printf("FAIL: case %d: byte %llu past the stream was written\n", it, (unsigned long long)p);
                        return 1;
                    }
                    continue;
                }
                if (depth[p] > c.max_depth) any_deep = true;
                if (depth[p] > c.max_depth || full_status != 0) continue;
                if (full[p] != ref[p]) {
                    printf("FAIL: case %d: full chase, byte %llu (depth %u, max %u): %u, decoded %u\n", it,
                           (unsigned long long)p, depth[p], c.max_depth, full[p], ref[p]);
                    return 1;
                }
            }
            if (any_deep != ((full_status >> 40) == E_DEPTH)) {
                printf("FAIL: case %d: full chase, a chain deeper than %u: %d, status %llx\n", it, c.max_depth, any_deep,
                       (unsigned long long)full_status);
                return 1;
            }
        }
        // The map itself: a bit exactly for the literals of every unit's bytes.
        for (u64 p = 0; p < stream; p++) {
            const bool bit = (litmap[p >> 5] >> (p & 31)) & 1;
            if (bit != (depth[p] == 0)) {
                printf("FAIL: case %d: byte %llu: map bit %d, literal %d\n", it, (unsigned long long)p, bit,
                       depth[p] == 0);
                return 1;
            }
        }
    }
    printf("ok\n");
    return 0;
}
