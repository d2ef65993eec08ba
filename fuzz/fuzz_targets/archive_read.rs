//! Fuzz target: see [`aceapex_fuzz::archive_read`] for what the input means and what is checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| aceapex_fuzz::archive_read(data));
