//! Frequency tables (FORMAT.md §2.4): statistics, normalisation to 4096, serialisation, decode lookup.

use crate::error::DecodeError;

/// Table alphabets, in serialisation order.
pub const LL_ALPHABET: usize = 64;
pub const ML_ALPHABET: usize = 64;
pub const OF_ALPHABET: usize = 96;
pub const LIT_ALPHABET: usize = 256;
pub const SCALE_BITS: u32 = 12;

/// Symbol counts of one table group, per alphabet.
#[derive(Debug, Clone)]
pub struct SymbolStats {
    pub ll: [u64; LL_ALPHABET],
    pub ml: [u64; ML_ALPHABET],
    pub of: [u64; OF_ALPHABET],
    pub lit: [u64; LIT_ALPHABET],
}

impl Default for SymbolStats {
    fn default() -> Self {
        SymbolStats { ll: [0; LL_ALPHABET], ml: [0; ML_ALPHABET], of: [0; OF_ALPHABET], lit: [0; LIT_ALPHABET] }
    }
}

/// One normalised table, ready for encoding and decoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Normalised frequencies (sum 4096), or empty when unused.
    pub freq: Vec<u16>,
    pub cum: Vec<u16>,
}

/// The four tables of a group: LL, ML, OF, LIT.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSet {
    pub ll: Table,
    pub ml: Table,
    pub of: Table,
    pub lit: Table,
}

impl TableSet {
    /// Builds normalised tables from a group's statistics.
    pub fn from_stats(stats: &SymbolStats) -> TableSet {
        let _ = stats;
        todo!("codec helper")
    }

    /// Appends the serialised table set (§2.4) to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let _ = out;
        todo!("codec helper")
    }

    /// Parses a serialised table set that must fill `bytes` exactly.
    pub fn read(bytes: &[u8]) -> Result<TableSet, DecodeError> {
        let _ = bytes;
        todo!("codec helper")
    }
}
