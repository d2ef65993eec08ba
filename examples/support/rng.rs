//! A small deterministic generator (xorshift64*) shared by the examples, so their runs repeat on every machine;
//! statistical quality is irrelevant for what they generate. Included with `#[path = "support/rng.rs"] mod rng;`.

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform-enough in `0..n` (`0` for `n = 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
