//! Byte sizes on the command line: `16K`, `1M`, `4G`, `4096`, `2GiB`, `512kb`.
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

/// Smallest and largest block sizes the format allows (FORMAT.md §1: `12 ≤ block_log ≤ 20`).
pub const MIN_BLOCK_LOG: u8 = 12;
pub const MAX_BLOCK_LOG: u8 = 20;

/// Parses a block size (`4K` … `1M`, a power of two) into the header's `block_log`.
pub fn parse_block_log(text: &str) -> Result<u8, String> {
    let size = parse_size(text)?;
    if !size.is_power_of_two() {
        return Err(format!("block size {text:?} = {size} is not a power of two"));
    }
    let log = size.trailing_zeros() as u8;
    if !(MIN_BLOCK_LOG..=MAX_BLOCK_LOG).contains(&log) {
        return Err(format!("block size {text:?} = {size} is outside 4K ..= 1M"));
    }
    Ok(log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_suffixed_sizes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("16K"), Ok(16 << 10));
        assert_eq!(parse_size("16k"), Ok(16 << 10));
        assert_eq!(parse_size("16KiB"), Ok(16 << 10));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("2T"), Ok(2 << 40));
        assert_eq!(parse_size(" 512kb "), Ok(512 << 10));
    }

    #[test]
    fn bad_sizes_are_errors() {
        for bad in ["", "K", "-1", "1.5M", "12Q", "99999999999999999999", "17179869184G"] {
            assert!(parse_size(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn block_sizes() {
        assert_eq!(parse_block_log("4K"), Ok(12));
        assert_eq!(parse_block_log("16K"), Ok(14));
        assert_eq!(parse_block_log("1M"), Ok(20));
        assert_eq!(parse_block_log("65536"), Ok(16));
        assert!(parse_block_log("2K").is_err());
        assert!(parse_block_log("2M").is_err());
        assert!(parse_block_log("24K").is_err());
    }
}
