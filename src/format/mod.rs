//! The on-disk layout of an `.acx` archive (FORMAT.md §2): header, footer, index, table and tree sections.
//!
//! Parsing validates every count, length and offset against explicit limits before use; writing produces
//! exactly what parsing accepts.

pub mod tree;
