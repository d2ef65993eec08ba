//! The CPU reference decoder: resolves any range of the logical stream through absolute sources.
//!
//! Owned by the archive/decoder work; see [`crate::archive`].
