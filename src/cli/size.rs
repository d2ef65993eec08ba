//! Block sizes on the command line (`--block-size 16K`): a power of two the format allows. Plain byte sizes
//! (`--memory 4G`) parse with [`crate::units::parse_size`], shared with the mount options.

pub use crate::units::parse_size;

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
