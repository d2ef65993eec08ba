//! The filesystem layer.
