// staged_chain.cpp with the staged chain stepped by k1_lean_step (MODE_STAGE_LEAN).
#define K1_LEAN true
#define K1_INC "lean_chain.inc"
#include "staged_chain.cpp"
