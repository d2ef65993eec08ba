// The K = 1 literal chain of kernels/decode.cu (k1_context_literals with k1_context_step, WordReader1 and
// LiteralSink1; the model's rows in global memory, and in the shared-memory copies of K1Rows) on streams the
// crate's own rANS encoder made (tests/kernel_host_model.rs writes them): every literal decodes to the base the
// encoder took, lands at its offset, and the stream ends where it must (state 2^16, every word taken).
#include "prelude.h"
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
        const u32 mask = rd(f), nlit = rd(f), state = rd(f), nwords = rd(f), offset = rd(f), ntok = rd(f);
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
        // The global-memory path, then (for a model that fits) the shared-memory path as each lane of a
        // quarter-warp runs it: its own copy of the model in the layout load_k1_tables writes. Each with the words
        // read by WordReader1 and staged by WordRing1 (its ring after the model's copies, as a CTA's rings lie
        // after its tables).
        const u32 order = (32u - __clz(mask)) / 2u;
        const u32 ring = K1_CTX_ROWS * 8;
        std::vector<uint4> smem((ring + K1_RING_BYTES) / 16);
        host_smem = (u8*)smem.data();
        host_smem_len = ring + K1_RING_BYTES;
        if (order <= K1_CTX_ORDER) {
            const u32 rlog = k1_ctx_copies_log(order);
            for (u32 i = 0; i < (1u << (2 * order - 1 + rlog)); i++)
                smem[i] = k1_ctx_piece((const uint2*)rows.data(), i, rlog);
        }
        for (int lane = -1; lane < (order <= K1_CTX_ORDER ? 8 : 0); lane++) {
            for (int staged = 0; staged < 2; staged++) {
                std::vector<u8> out(unit + 16, 0xEE);
                LiteralSink1 sink;
                sink.init(tp.data(), li.data(), ntok, nlit);
                u32 x = state, taken = 0;
                auto decode = [&](auto& wr) {
                    if (lane < 0) {
                        k1_context_literals<false, K1_WORDS>((const uint2*)rows.data(), mask, nlit, &x, wr, sink,
                                                             out.data(), nullptr);
                    } else {
                        threadIdx.x = (u32)lane;
                        k1_context_literals<true, K1_WORDS>((const uint2*)smem.data(), mask, nlit, &x, wr, sink,
                                                            out.data(), nullptr);
                    }
                    taken = wr.taken_words();
                };
                if (staged) {
                    WordRing1 wr;
                    wr.init(words, nwords, ring);
                    wr.start(0);
                    decode(wr);
                } else {
                    WordReader1 wr;
                    wr.init(words, nwords, 0);
                    decode(wr);
                }
                if (x != 65536u || taken != nwords) {
                    printf("FAIL: case %u lane %d staged %d: %u literals: final state %x (want 10000), %u of %u words "
                           "taken\n",
                           c, lane, staged, nlit, x, taken, nwords);
                    return 1;
                }
                for (u32 t = 0; t < ntok; t++) {
                    const u32 end = t + 1 < ntok ? li[t + 1] : nlit;
                    for (u32 l = li[t]; l < end; l++) {
                        const u8 got = out[tp[t] + l - li[t]], want = (u8)"ACGT"[bases[l]];
                        if (got != want) {
                            printf("FAIL: case %u lane %d staged %d: literal %u (token %u) at offset %u is %c, want "
                                   "%c\n",
                                   c, lane, staged, l, t, tp[t] + l - li[t], got, want);
                            return 1;
                        }
                    }
                }
            }
        }
    }
    printf("ok\n");
    return 0;
}
