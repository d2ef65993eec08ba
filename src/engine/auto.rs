//! The `auto` decoder's choice between the CPU and the GPU engine, made by measurement.
//!
//! Which engine answers a batch faster depends on the batch size, the archive, the machine and its load: a GPU
//! seek pays a launch and two transfers (tens of µs with resident seeks, see engine/gpu/device/resident.rs),
//! a cold CPU block anything from ~100 µs to milliseconds (the depth of its sources, the cores free, what the
//! caches hold). A fixed threshold is right on one machine only. So `auto` keeps, per batch-size class, an
//! exponentially weighted mean of the wall time per block that each engine took, sends a batch to the engine
//! with the lower mean, and sends every [`PROBE_EVERY`]th batch of a class to the other one, so that its mean
//! follows changes (load, warm caches). Until both engines have been measured in a class, batches alternate
//! between them. The first batch each engine runs in a class is not counted: it carries one-time costs (the
//! GPU's resident parse and graph capture, the CPU's cold parsed-slice cache).

use std::sync::Mutex;
use std::time::Duration;

/// Batch-size classes: 1 block, 2–3, 4–15, 16–63, 64 and more.
const CLASS_BOUNDS: [usize; 4] = [2, 4, 16, 64];
const CLASSES: usize = CLASS_BOUNDS.len() + 1;
/// Every PROBE_EVERY-th batch of a class goes to the engine that is currently slower.
pub const PROBE_EVERY: u64 = 32;
/// Measurements per engine and class before the means decide (batches alternate until then).
const WARMUP: u32 = 3;
/// Weight of a new measurement in the mean.
const ALPHA: f64 = 0.125;

/// The engine chosen for a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Cpu,
    Gpu,
}

#[derive(Debug, Clone, Copy, Default)]
struct EngineStats {
    /// Batches run (the first is not counted in the mean).
    runs: u32,
    /// Mean µs per block over the counted batches.
    mean_us: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct ClassStats {
    batches: u64,
    cpu: EngineStats,
    gpu: EngineStats,
}

impl ClassStats {
    fn engine(&mut self, pick: Pick) -> &mut EngineStats {
        match pick {
            Pick::Cpu => &mut self.cpu,
            Pick::Gpu => &mut self.gpu,
        }
    }
}

/// Per batch-size class means of both engines, shared by all readers of an archive.
#[derive(Debug, Default)]
pub struct AutoChooser {
    classes: Mutex<[ClassStats; CLASSES]>,
}

/// One class's state, for the stats file and logs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassSnapshot {
    /// Smallest batch (in blocks) of the class.
    pub min_blocks: usize,
    pub batches: u64,
    /// Mean µs per block, once measured.
    pub cpu_us_per_block: Option<f64>,
    pub gpu_us_per_block: Option<f64>,
}

fn class_of(blocks: usize) -> usize {
    CLASS_BOUNDS.iter().take_while(|&&b| blocks >= b).count()
}

impl AutoChooser {
    pub fn new() -> AutoChooser {
        AutoChooser::default()
    }

    /// The engine for a batch of `blocks` blocks.
    pub fn pick(&self, blocks: usize) -> Pick {
        let mut classes = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        let class = &mut classes[class_of(blocks)];
        class.batches += 1;
        let (cpu, gpu) = (class.cpu, class.gpu);
        // Warm-up: one run that is not counted plus WARMUP counted ones each, alternating.
        let measured = |e: EngineStats| e.runs > WARMUP;
        if !measured(cpu) || !measured(gpu) {
            return if cpu.runs <= gpu.runs { Pick::Cpu } else { Pick::Gpu };
        }
        let faster = if gpu.mean_us < cpu.mean_us { Pick::Gpu } else { Pick::Cpu };
        let slower = if faster == Pick::Gpu { Pick::Cpu } else { Pick::Gpu };
        if class.batches % PROBE_EVERY == 0 {
            slower
        } else {
            faster
        }
    }

    /// Records that `pick` decoded a batch of `blocks` blocks in `elapsed` (wall time, request to bytes).
    pub fn record(&self, blocks: usize, pick: Pick, elapsed: Duration) {
        if blocks == 0 {
            return;
        }
        let us = elapsed.as_secs_f64() * 1e6 / blocks as f64;
        let mut classes = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        let stats = classes[class_of(blocks)].engine(pick);
        stats.runs = stats.runs.saturating_add(1);
        match stats.runs {
            1 => {} // one-time costs: not counted
            2 => stats.mean_us = us,
            _ => stats.mean_us += ALPHA * (us - stats.mean_us),
        }
    }

    /// Every class's state, smallest batches first.
    pub fn snapshot(&self) -> Vec<ClassSnapshot> {
        let classes = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        let mean = |e: &EngineStats| (e.runs >= 2).then_some(e.mean_us);
        classes
            .iter()
            .enumerate()
            .map(|(i, c)| ClassSnapshot {
                min_blocks: if i == 0 { 1 } else { CLASS_BOUNDS[i - 1] },
                batches: c.batches,
                cpu_us_per_block: mean(&c.cpu),
                gpu_us_per_block: mean(&c.gpu),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `batches` batches of `blocks` through the chooser with engines that take the given µs per block,
    /// returning how many went to the GPU.
    fn drive(chooser: &AutoChooser, blocks: usize, batches: u64, cpu_us: f64, gpu_us: f64) -> u64 {
        let mut gpu = 0;
        for _ in 0..batches {
            let pick = chooser.pick(blocks);
            let us = match pick {
                Pick::Cpu => cpu_us,
                Pick::Gpu => {
                    gpu += 1;
                    gpu_us
                }
            };
            chooser.record(blocks, pick, Duration::from_secs_f64(us * blocks as f64 * 1e-6));
        }
        gpu
    }

    #[test]
    fn classes_split_by_batch_size() {
        assert_eq!([1, 2, 3, 4, 15, 16, 63, 64, 1000].map(class_of), [0, 1, 1, 2, 2, 3, 3, 4, 4]);
    }

    #[test]
    fn the_faster_engine_gets_all_but_the_probes() {
        let chooser = AutoChooser::new();
        // Warm-up alternates (8 batches), then the GPU is faster: it gets every batch but each PROBE_EVERY-th.
        drive(&chooser, 1, 8, 300.0, 40.0);
        let to_gpu = drive(&chooser, 1, 320, 300.0, 40.0);
        assert_eq!(to_gpu, 320 - 320 / PROBE_EVERY);
        // Another class is measured on its own: there the CPU wins.
        drive(&chooser, 100, 8, 5.0, 20.0);
        assert_eq!(drive(&chooser, 100, 320, 5.0, 20.0), 320 / PROBE_EVERY);
    }

    #[test]
    fn a_change_of_speed_is_followed_through_the_probes() {
        let chooser = AutoChooser::new();
        drive(&chooser, 1, 200, 300.0, 40.0);
        // The GPU becomes slow (e.g. the device is busy): its own batches measure it, and the choice flips.
        drive(&chooser, 1, 100, 300.0, 2000.0);
        let to_gpu = drive(&chooser, 1, 320, 300.0, 2000.0);
        assert_eq!(to_gpu, 320 / PROBE_EVERY);
        // The CPU becomes the slow one (load): the probes see it and the GPU takes over again.
        drive(&chooser, 1, 32 * 40, 5000.0, 40.0);
        assert!(drive(&chooser, 1, 320, 5000.0, 40.0) >= 320 - 320 / PROBE_EVERY);
    }

    #[test]
    fn the_first_run_of_each_engine_is_not_counted() {
        let chooser = AutoChooser::new();
        // A slow first GPU batch (one-time costs) does not count against it.
        assert_eq!(chooser.pick(1), Pick::Cpu);
        chooser.record(1, Pick::Cpu, Duration::from_micros(300));
        assert_eq!(chooser.pick(1), Pick::Gpu);
        chooser.record(1, Pick::Gpu, Duration::from_millis(50));
        let snap = chooser.snapshot();
        assert_eq!((snap[0].cpu_us_per_block, snap[0].gpu_us_per_block), (None, None));
        drive(&chooser, 1, 6, 300.0, 40.0);
        let snap = chooser.snapshot();
        assert_eq!(snap[0].gpu_us_per_block, Some(40.0));
        assert_eq!(snap[0].cpu_us_per_block, Some(300.0));
        assert_eq!(snap[0].min_blocks, 1);
        assert_eq!(snap[4].min_blocks, 64);
    }
}
