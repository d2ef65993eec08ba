// The literal chain of kernels/literals.cuh (k1_context_literals with k1_context_step, the word readers and
// LiteralSink1; the model's rows in global memory, and in the shared-memory copies of K1Rows) on streams the
// crate's own rANS encoder made in one lane or two (tests/kernel_host_model.rs writes them): lane 0 decodes
// literals [0, s) with the words from the stream's front (WordReader1, or WordRing1), lane 1 literals [s, nlit)
// from the back (WordReader1Back, or WordRing1Back), its context from 0 (FORMAT.md §3.4, §3.5). Every literal decodes
// to the base the encoder took and lands at its offset (placed at the tokens' offsets with lane 1 continuing lane
// 0's sink, as one thread runs both; or in literal order with a sink of its own, as parse_k1_linear's lane-1
// threads do), and the streams end where they must (both states 2^16, the lanes' words adding up to the stream's).
#include "prelude.h"
static u32 host_load(const u32* a) { return *a; }
#include "context_chain.inc"

static u32 rd(FILE* f) {
    u32 v = 0;
    if (fread(&v, 4, 1, f) != 1) {
        printf("FAIL: the input ends early\n");
        exit(1);
    }
    return v;
}

int main(int argc, char** argv) {
    FILE* f = argc > 1 ? fopen(argv[1], "rb") : nullptr;
    if (!f) {
        printf("FAIL: no input\n");
        return 1;
    }
    const u32 cases = rd(f);
    for (u32 c = 0; c < cases; c++) {
        const u32 mask = rd(f), nlit = rd(f), lanes = rd(f), split = rd(f), state0 = rd(f), state1 = rd(f);
        const u32 nwords = rd(f), offset = rd(f), ntok = rd(f);
        std::vector<u32> tp(ntok), li(ntok), rows(2 * (mask + 1));
        for (auto& v : tp) v = rd(f);
        for (auto& v : li) v = rd(f);
        for (auto& v : rows) v = rd(f);
        std::vector<u32> store((offset + 2 * nwords + 32) / 4 + 1, 0);
        u8* words = (u8*)store.data() + offset;
        for (u32 i = 0; i < nwords; i++) {
            const u32 w = rd(f);
            words[2 * i] = (u8)w;
            words[2 * i + 1] = (u8)(w >> 8);
        }
        std::vector<u8> bases(nlit);
        for (auto& b : bases) b = (u8)rd(f);
        const u32 unit = rd(f);
        if (split > nlit || (lanes == 2 && split < nlit && split % 8 != 0) || (lanes == 1 && split != nlit)) {
            printf("FAIL: case %u: split %u of %u literals in %u lanes\n", c, split, nlit, lanes);
            return 1;
        }
        // The global-memory path, then (for a model that fits) the shared-memory path as each lane of a
        // quarter-warp runs it: its own copy of the model in the layout load_k1_tables writes. Each with the words
        // read by the readers and staged by the rings (two rings after the model's copies, as a CTA's rings lie
        // after its tables), and each in both placements.
        const u32 order = (32u - __clz(mask)) / 2u;
        const u32 ring = K1_CTX_ROWS * 8;
        std::vector<uint4> smem((ring + 2 * K1_RING_BYTES) / 16);
        host_smem = (u8*)smem.data();
        host_smem_len = ring + 2 * K1_RING_BYTES;
        if (order <= K1_CTX_ORDER) {
            const u32 rlog = k1_ctx_copies_log(order);
            for (u32 i = 0; i < (1u << (2 * order - 1 + rlog)); i++)
                smem[i] = k1_ctx_piece((const uint2*)rows.data(), i, rlog);
        }
        for (int lane = -1; lane < (order <= K1_CTX_ORDER ? 8 : 0); lane++) {
            for (int staged = 0; staged < 2; staged++) {
                for (int linear = 0; linear < 2; linear++) {
                    std::vector<u8> out(unit + 16, 0xEE);
                    LiteralSink1 sink, sink1;
                    sink.init(tp.data(), li.data(), ntok, nlit);
                    sink1.init(tp.data(), li.data(), ntok, nlit);
                    u32 x0 = state0, x1 = lanes == 2 ? state1 : 65536u, taken0 = 0, taken1 = 0;
                    // Literals [first, end) from *x through `wr`, into `s`.
                    auto decode = [&](u32 first, u32 end, u32* x, auto& wr, LiteralSink1& s) {
                        if (lane >= 0) threadIdx.x = (u32)lane;
                        const uint2* T = lane < 0 ? (const uint2*)rows.data() : (const uint2*)smem.data();
                        if (lane < 0 && linear)
                            k1_context_literals<false, K1_LINEAR>(T, mask, first, end, x, wr, s, out.data(), nullptr);
                        else if (lane < 0)
                            k1_context_literals<false, K1_WORDS>(T, mask, first, end, x, wr, s, out.data(), nullptr);
                        else if (linear)
                            k1_context_literals<true, K1_LINEAR>(T, mask, first, end, x, wr, s, out.data(), nullptr);
                        else
                            k1_context_literals<true, K1_WORDS>(T, mask, first, end, x, wr, s, out.data(), nullptr);
                        return wr.taken_words();
                    };
                    // Lane 1 continues lane 0's sink when one thread runs both (placed at the tokens' offsets), or
                    // has its own (literal order, as a thread of its own).
                    LiteralSink1& s1 = linear ? sink1 : sink;
                    if (staged) {
                        WordRing1 wr;
                        wr.init(words, nwords, ring);
                        wr.start(0);
                        taken0 = decode(0, split, &x0, wr, sink);
                        if (lanes == 2) {
                            // Sequential: lane 0's ring, taken over; a thread of its own: a ring of its own.
                            WordRing1Back wr1;
                            wr1.init(words, nwords, linear ? ring + K1_RING_BYTES : ring);
                            wr1.start(0);
                            taken1 = decode(split, nlit, &x1, wr1, s1);
                        }
                    } else {
                        WordReader1 wr;
                        wr.init(words, nwords, 0);
                        taken0 = decode(0, split, &x0, wr, sink);
                        if (lanes == 2) {
                            WordReader1Back wr1;
                            wr1.init(words, nwords);
                            taken1 = decode(split, nlit, &x1, wr1, s1);
                        }
                    }
                    if (x0 != 65536u || x1 != 65536u || taken0 + taken1 != nwords) {
                        printf("FAIL: case %u lane %d staged %d linear %d: %u literals in %u lanes (split %u): final "
                               "states %x %x (want 10000), %u + %u of %u words taken\n",
                               c, lane, staged, linear, nlit, lanes, split, x0, x1, taken0, taken1, nwords);
                        return 1;
                    }
                    for (u32 t = 0; t < ntok; t++) {
                        const u32 end = t + 1 < ntok ? li[t + 1] : nlit;
                        for (u32 l = li[t]; l < end; l++) {
                            const u32 at = linear ? l : tp[t] + l - li[t];
                            const u8 got = out[at], want = (u8)"ACGT"[bases[l]];
                            if (got != want) {
                                printf("FAIL: case %u lane %d staged %d linear %d: literal %u (token %u, split %u) "
                                       "at offset %u is %c, want %c\n",
                                       c, lane, staged, linear, l, t, split, at, got, want);
                                return 1;
                            }
                        }
                    }
                }
            }
        }
    }
    printf("ok\n");
    return 0;
}
