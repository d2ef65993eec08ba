//! Byte sizes as people write them: `16K`, `1M`, `4G`, `4096`, `2GiB`, `512kb` — shared by the command line
//! (`--block-size`, `--memory`) and the mount options (`cache_size=`, `readahead=`).
//!
//! Suffixes are binary (K = 1024): a block size of `16K` must be exactly 2^14, and nobody means 16 000 bytes when
//! they ask for a 16 KB block.

/// Parses a size with an optional K/M/G/T suffix (binary multiples; an optional trailing `B`/`iB` and any case are
/// accepted). Errors say what was seen; overflow is an error, not a wrap.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let digits_end = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, suffix) = trimmed.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!("invalid size {text:?}: expected a number with an optional K, M, G or T suffix"));
    }
    let number: u64 = digits.parse().map_err(|_| format!("invalid size {text:?}: number too large"))?;
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("invalid size {text:?}: unknown suffix {suffix:?} (use K, M, G or T)")),
    };
    number.checked_mul(1u64 << shift).ok_or_else(|| format!("invalid size {text:?}: does not fit in 64 bits"))
}
