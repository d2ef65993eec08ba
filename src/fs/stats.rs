//! Counters of the filesystem layer and a lock-free read-latency histogram, rendered as the JSON of the
//! reserved file `/.aceapex/stats`.
//!
//! Every FUSE worker thread records every read, so recording must not take a lock: the histogram is a fixed
//! array of atomic counters over log-linear buckets (four sub-buckets per power of two of microseconds, i.e.
//! ≤ 25 % relative error), which is plenty to tell 80 µs from 800 µs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Values below this many microseconds get one bucket each.
const LINEAR_LIMIT: u64 = 16;
/// Sub-buckets per power of two above [`LINEAR_LIMIT`].
const SUB_BUCKETS: u64 = 4;
/// Powers of two covered above the linear range: 2^4 µs … 2^44 µs (beyond any real latency).
const OCTAVES: u64 = 40;
const BUCKETS: usize = (LINEAR_LIMIT + OCTAVES * SUB_BUCKETS) as usize;

/// Latency histogram in microseconds; `record` is wait-free.
pub struct LatencyHistogram {
    counts: Box<[AtomicU64]>,
    max_us: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram { counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(), max_us: AtomicU64::new(0) }
    }
}

/// Percentiles read from a [`LatencyHistogram`], in microseconds (upper bounds of their buckets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

fn bucket_of(us: u64) -> usize {
    if us < LINEAR_LIMIT {
        return us as usize;
    }
    let octave = 63 - u64::from(us.leading_zeros()); // floor(log2 us) ≥ 4
    let sub = (us >> (octave - 2)) & (SUB_BUCKETS - 1);
    let index = LINEAR_LIMIT + (octave - 4) * SUB_BUCKETS + sub;
    index.min(BUCKETS as u64 - 1) as usize
}

/// The largest value that falls in bucket `index`.
fn bucket_upper_bound(index: usize) -> u64 {
    let index = index as u64;
    if index < LINEAR_LIMIT {
        return index;
    }
    let octave = (index - LINEAR_LIMIT) / SUB_BUCKETS + 4;
    let sub = (index - LINEAR_LIMIT) % SUB_BUCKETS;
    let step = 1u64 << (octave - 2);
    (1u64 << octave) + (sub + 1) * step - 1
}

impl LatencyHistogram {
    pub fn record(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.counts[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    /// Percentiles of everything recorded so far (concurrent records may or may not be included).
    pub fn summary(&self) -> LatencySummary {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let total: u64 = counts.iter().sum();
        let max_us = self.max_us.load(Ordering::Relaxed);
        let percentile = |p: f64| -> u64 {
            if total == 0 {
                return 0;
            }
            let rank = ((total as f64) * p).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, &c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return bucket_upper_bound(i).min(max_us);
                }
            }
            max_us
        };
        LatencySummary {
            count: total,
            p50_us: percentile(0.50),
            p90_us: percentile(0.90),
            p99_us: percentile(0.99),
            max_us,
        }
    }
}

/// Counters of the filesystem layer (the cache and engines keep their own, reported by the backend).
#[derive(Default)]
pub struct FsStats {
    pub reads: AtomicU64,
    pub bytes_served: AtomicU64,
    pub read_errors: AtomicU64,
    pub opens: AtomicU64,
    /// Bytes served from the stream cache (decoded by stream runs) rather than by the random-access path.
    pub streamed_bytes: AtomicU64,
    pub read_latency: LatencyHistogram,
}

impl FsStats {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The layer's counters as a JSON object.
    pub fn to_json(&self) -> serde_json::Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        serde_json::json!({
            "reads": get(&self.reads),
            "bytes_served": get(&self.bytes_served),
            "read_errors": get(&self.read_errors),
            "opens": get(&self.opens),
            "read_latency": self.read_latency.summary(),
            "streamed_bytes": get(&self.streamed_bytes),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_are_monotonic_and_contain_their_values() {
        let mut last = 0;
        for us in 0..100_000u64 {
            let b = bucket_of(us);
            assert!(b >= last, "bucket order at {us}");
            assert!(us <= bucket_upper_bound(b), "{us} above bucket {b} bound {}", bucket_upper_bound(b));
            if b > 0 {
                assert!(us > bucket_upper_bound(b - 1), "{us} belongs in an earlier bucket");
            }
            last = b;
        }
    }

    #[test]
    fn percentiles_of_known_distribution() {
        let h = LatencyHistogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.max_us, 1000);
        // Bucket bounds are within 25 % above the exact percentile.
        for (got, exact) in [(s.p50_us, 500), (s.p90_us, 900), (s.p99_us, 990)] {
            assert!(got >= exact && got <= exact * 5 / 4, "got {got}, exact {exact}");
        }
    }

    #[test]
    fn empty_histogram_reports_zero() {
        let s = LatencyHistogram::default().summary();
        assert_eq!((s.count, s.p50_us, s.p99_us, s.max_us), (0, 0, 0, 0));
    }

    proptest! {
        #[test]
        fn any_value_has_a_bucket(us in any::<u64>()) {
            let b = bucket_of(us);
            prop_assert!(b < BUCKETS);
            if b < BUCKETS - 1 {
                prop_assert!(us <= bucket_upper_bound(b));
            }
        }
    }
}
