//! Host LRU of decoded blocks.
