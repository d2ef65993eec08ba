//! Fuzz target: see [`aceapex_fuzz::fasta_layout`] for what the input means and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aceapex_fuzz::fasta_layout(data));
