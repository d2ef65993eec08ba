//! The lazy parse of the fast levels: one decision per position instead of a shortest path over all of them.
//!
//! The optimal parse relaxes every length of every candidate at every byte, which costs a few hundred
//! nanoseconds a byte whatever the data; the fast levels take this zstd-lazy style parse instead. At each
//! position it gathers the same candidates as the optimal parse (hash tables, long repeats, recent distances and
//! the continuations of the previous match), caps them by the depth bound, and scores each by what it saves
//! against coding its bytes as literals under the same price model (distance or continuation code, length code,
//! closure price). The best saving is taken, unless the next position (`lazy_steps` times) offers a larger one;
//! a match of at least `sufficient_len` bytes is taken at once. Depths are written as tokens are chosen, so
//! later candidates in the same block see them, and the price model learns from every block as in the optimal
//! parse. Reverse-complement candidates (bare bases) compete with the forward ones under their own prices.

use super::{BlockTokens, Priced, SegmentParser, CONTINUATION_GAP, DECAY_LITERALS, MATCH_BIAS, MIN_CONTINUATION};
use crate::codec::block::{continuation_index, PrevMatch, Token, COMPLEMENT};
use crate::pack::cost::Prices;
use crate::pack::matcher::Candidate;
use crate::pack::parser::distance_class;

/// The best match at a position and what it saves against literals (1/256 bit).
#[derive(Debug, Clone, Copy)]
struct Choice {
    cand: Priced,
    saving: i64,
}

impl SegmentParser<'_> {
    /// Parses the block `[start, end)` lazily (see the module docs); blocks must be given in stream order.
    pub(super) fn parse_block_lazy(&mut self, start: u64, end: u64) -> BlockTokens {
        if self.first_block {
            self.counts.set_literals_from(&self.data[start as usize..end as usize]);
            self.first_block = false;
        }
        let prices = Prices::from_counts(&self.counts);
        self.block_start = start;
        self.sum_literal_prices(start, end, &prices);
        let mut out = BlockTokens::default();
        // `prev`: the last match (None: none); `last_end`: where it ended.
        let (mut prev, mut last_end) = (None, start);
        let mut lit_from = start;
        let mut pos = start;
        while pos < end {
            let Some(mut best) = self.best_at(pos, end, prev, last_end, &prices) else {
                let step = match self.params.skip_log {
                    Some(log) => (1 + ((pos - lit_from) >> log)).min(end - pos),
                    None => 1,
                };
                for k in pos..pos + step {
                    self.set_depth(k, 0);
                }
                pos += step;
                continue;
            };
            let mut at = pos;
            for _ in 0..self.params.lazy_steps.unwrap_or(0) {
                if best.cand.len >= self.params.sufficient_len || at + 1 >= end {
                    break;
                }
                match self.best_at(at + 1, end, prev, last_end, &prices) {
                    // Deferring codes byte `at` as a literal: the later match must save more than the first.
                    Some(next) if next.saving > best.saving => {
                        self.set_depth(at, 0);
                        at += 1;
                        best = next;
                    }
                    _ => break,
                }
            }
            let mut c = best.cand;
            // A match found after skipped positions may start earlier: extend it back over the literals. A
            // reverse complement extended by a byte reads one more byte after its source's last (its distance
            // shrinks by 2), which must stay before the new first byte.
            if c.rc {
                while at > lit_from
                    && c.back >= 3
                    && self.data[(at - 1) as usize] == COMPLEMENT[self.data[(at - c.back + 1) as usize] as usize]
                    && self.depth_at(at - c.back + 1) < self.max_depth
                {
                    at -= 1;
                    c.back -= 2;
                    c.len += 1;
                }
            } else {
                while at > lit_from
                    && at > c.back
                    && self.data[(at - 1) as usize] == self.data[(at - 1 - c.back) as usize]
                    && self.depth_at(at - 1 - c.back) < self.max_depth
                {
                    at -= 1;
                    c.len += 1;
                }
            }
            out.literals.extend_from_slice(&self.data[lit_from as usize..at as usize]);
            out.tokens.push(Token { lit_len: (at - lit_from) as u32, match_len: c.len, back: c.back, rc: c.rc });
            self.copy_depths(at, c.back, c.rc, c.len);
            if !c.rc {
                self.remember_rep(c.back);
            }
            prev = Some(PrevMatch { back: c.back, dst: at, rc: c.rc });
            pos = at + c.len as u64;
            last_end = pos;
            lit_from = pos;
        }
        out.literals.extend_from_slice(&self.data[lit_from as usize..end as usize]);
        out.tokens.push(Token { lit_len: (end - lit_from) as u32, match_len: 0, back: 0, rc: false });
        self.counts.add_tokens(&out.tokens, &out.literals);
        if self.counts.lit.iter().sum::<u32>() > DECAY_LITERALS {
            self.counts.decay();
        }
        out
    }

    /// The candidate at `pos` that saves the most against literals, if any saves anything. `prev` and
    /// `last_end` describe the last match, whose continuations are tried within [`CONTINUATION_GAP`] literals
    /// and in the same slice (as the encoder codes them).
    // Inlined: called at nearly every position, and as a call its `prev` argument went through memory, written
    // just before and read back wider than written (a store-forwarding stall on every call).
    #[inline(always)]
    fn best_at(
        &mut self,
        pos: u64,
        end: u64,
        prev: Option<PrevMatch>,
        last_end: u64,
        prices: &Prices,
    ) -> Option<Choice> {
        let limit = (end - pos) as u32;
        let slice_start = pos >> self.params.slice_log << self.params.slice_log;
        let prev = prev.filter(|_| pos - last_end <= CONTINUATION_GAP as u64 && last_end > slice_start);
        self.collect(pos, limit, prev);
        let mut best: Option<Choice> = None;
        for k in 0..self.cands.len() {
            let c = self.cands[k];
            let len = self.cap_by_depth(pos, c);
            let continuation = continuation_index(c.back, c.rc, pos, prev);
            let continues = continuation.is_some();
            let min_len =
                if continues { MIN_CONTINUATION } else { self.params.min_match[distance_class(c.back)] as u32 };
            if len < min_len {
                continue;
            }
            let price = prices.distance_coded(c.back, c.rc, continuation)
                + self.closure_price(pos, Candidate { len, ..c }, continues);
            let cost = price as u64 + prices.match_len(len) as u64 + prices.lit_run(0) as u64 + MATCH_BIAS;
            let saving = self.literal_price(pos, len) as i64 - cost as i64;
            if saving > 0 && best.is_none_or(|b| saving > b.saving) {
                best = Some(Choice { cand: Priced { back: c.back, len, rc: c.rc, price, continues }, saving });
            }
        }
        best
    }

    /// What coding `len` bytes at `pos` as literals would cost: the exact literal prices of the first bytes, the
    /// average of those for the rest of a long match (whose saving is large either way). Read off the block's
    /// [`Self::sum_literal_prices`]: a candidate summed up to 64 prices, and on bare bases the parser prices
    /// about one candidate every three positions, most of them long repeats that do not pay.
    fn literal_price(&self, pos: u64, len: u32) -> u64 {
        const EXACT: usize = 64;
        let at = (pos - self.block_start) as usize;
        let exact = (len as usize).min(EXACT);
        let sum = self.lit_sums[at + exact] - self.lit_sums[at];
        sum + (len as usize - exact) as u64 * sum / exact as u64
    }

    /// Fills `lit_sums` for the block `[start, end)` under `prices` (see [`Self::literal_price`]).
    fn sum_literal_prices(&mut self, start: u64, end: u64, prices: &Prices) {
        let mut total = 0;
        self.lit_sums.clear();
        self.lit_sums.push(0);
        self.lit_sums.extend(self.data[start as usize..end as usize].iter().map(|&b| {
            total += prices.lit[b as usize] as u64;
            total
        }));
    }
}
