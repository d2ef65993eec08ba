// context_chain.cpp's streams through MODE_STAGE's path instead: k1_context_staged into a staging column (column
// 5 of a CTA of 32), then k1_place_staged. K1_LEAN (lean_chain.cpp) steps the chain by k1_lean_step.
#define K1_STAGE_ROWS 257
#ifndef K1_LEAN
#define K1_LEAN false
#define K1_INC "staged_chain.inc"
#endif
#define K1_DECODE(rows, mask, nlit, x, wr, sink, tp, li, ntok, out)                   \
    do {                                                                              \
        static std::vector<u32> staging(K1_STAGE_ROWS * 32);                          \
        (void)sink;                                                                   \
        k1_context_staged<false, K1_LEAN>(rows, mask, nlit, x, wr, staging.data() + 5, 32);    \
        k1_place_staged(tp, li, ntok, nlit, staging.data() + 5, 32, out);             \
    } while (0)
#include "context_chain.cpp"
