//! Rounds of timed operations and their summaries.
//!
//! A figure runs its operations in rounds. A rate is the median over rounds
//! of (operations ÷ the round's wall time), so one slow stretch of the disk
//! moves one round, not the figure; percentiles pool every sample.

use std::time::{Duration, Instant};

use procfs::process::Process;
use serde_json::Value;

use crate::output::{round1, Failure, Fields};

/// One round: each operation's latency and the round's wall time.
#[derive(Debug, Clone, Default)]
pub struct Round {
    /// Each operation's latency.
    pub samples: Vec<Duration>,
    /// The wall time of the whole round, between-operation work included.
    pub elapsed: Duration,
    /// Bytes this process handed to `write`-family calls during the round
    /// (`wchar` of `/proc/self/io`: WAL frames, checkpoints), if readable.
    pub written: Option<u64>,
    /// CPU time of this whole process (every thread: the broker's when it
    /// runs in-process, and the clients') during the round.
    pub cpu: Duration,
}

impl Round {
    /// Runs `op` `n` times, timing each call and the whole round.
    ///
    /// # Errors
    /// The first failure of `op`.
    pub fn run(n: usize, mut op: impl FnMut() -> Result<(), Failure>) -> Result<Self, Failure> {
        let mut samples = Vec::with_capacity(n);
        let before = written_bytes();
        let cpu_before = cpu_time();
        let start = Instant::now();
        for _ in 0..n {
            let t = Instant::now();
            op()?;
            samples.push(t.elapsed());
        }
        let elapsed = start.elapsed();
        let written = before
            .zip(written_bytes())
            .map(|(b, a)| a.saturating_sub(b));
        Ok(Self {
            samples,
            elapsed,
            written,
            cpu: cpu_time().saturating_sub(cpu_before),
        })
    }

    /// Operations per second over the round.
    pub fn rate(&self) -> f64 {
        self.samples.len() as f64 / self.elapsed.as_secs_f64()
    }

    /// The median latency in µs.
    pub fn p50_us(&self) -> f64 {
        percentile_us(&self.samples, 50.0)
    }

    /// The mean latency in µs.
    pub fn mean_us(&self) -> f64 {
        mean_us(&self.samples)
    }
}

/// Several rounds of the same operation.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// The rounds, in the order they ran.
    pub rounds: Vec<Round>,
}

impl Series {
    /// Every sample of every round.
    pub fn pooled(&self) -> Vec<Duration> {
        self.rounds
            .iter()
            .flat_map(|r| r.samples.iter().copied())
            .collect()
    }

    /// The number of operations.
    pub fn count(&self) -> usize {
        self.rounds.iter().map(|r| r.samples.len()).sum()
    }

    /// The median over rounds of the round rate.
    pub fn rate(&self) -> f64 {
        median(self.rounds.iter().map(Round::rate).collect())
    }

    /// The median over rounds of the round's p50, in µs.
    pub fn round_p50_us(&self) -> f64 {
        median(self.rounds.iter().map(Round::p50_us).collect())
    }

    /// The median over rounds of the round's mean, in µs.
    pub fn round_mean_us(&self) -> f64 {
        median(self.rounds.iter().map(Round::mean_us).collect())
    }

    /// The pooled percentile `p` in µs.
    pub fn percentile_us(&self, p: f64) -> f64 {
        percentile_us(&self.pooled(), p)
    }

    /// The pooled mean in µs.
    pub fn mean_us(&self) -> f64 {
        mean_us(&self.pooled())
    }

    /// Bytes written per operation over every round (NaN if unknown).
    pub fn written_per_op(&self) -> f64 {
        let total: Option<u64> = self.rounds.iter().map(|r| r.written).sum();
        total.map_or(f64::NAN, |t| t as f64 / self.count() as f64)
    }

    /// CPU µs of the whole process per operation over every round.
    pub fn cpu_us_per_op(&self) -> f64 {
        let cpu: Duration = self.rounds.iter().map(|r| r.cpu).sum();
        cpu.as_secs_f64() * 1e6 / self.count() as f64
    }

    /// The fields every rate figure reports, with the rate under `rate_key`.
    pub fn fields(&self, rate_key: &'static str) -> Fields {
        vec![
            (rate_key, round1(self.rate())),
            ("p50_us", round1(self.percentile_us(50.0))),
            ("p99_us", round1(self.percentile_us(99.0))),
            ("mean_us", round1(self.mean_us())),
            ("n", Value::from(self.count())),
            ("written_bytes_per_op", round1(self.written_per_op())),
            ("cpu_us_per_op", round1(self.cpu_us_per_op())),
            ("rounds", Value::from(self.rounds.len())),
            (
                "round_rates",
                Value::from(
                    self.rounds
                        .iter()
                        .map(|r| (r.rate() * 10.0).round() / 10.0)
                        .collect::<Vec<_>>(),
                ),
            ),
        ]
    }
}

/// The CPU time this process has used so far, over all its threads.
pub fn cpu_time() -> Duration {
    clock(rustix::time::ClockId::ProcessCPUTime)
}

/// The CPU time the calling thread has used so far.
pub fn thread_cpu_time() -> Duration {
    clock(rustix::time::ClockId::ThreadCPUTime)
}

fn clock(id: rustix::time::ClockId) -> Duration {
    let t = rustix::time::clock_gettime(id);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
    Duration::new(secs, nanos)
}

/// The CPU time used so far by this process's threads named `name`
/// (their `comm`), from the first field of each one's
/// `/proc/self/task/<tid>/schedstat` (nanoseconds on a CPU); `None` when
/// none is found or one is unreadable.
pub fn named_threads_cpu_time(name: &str) -> Option<Duration> {
    let mut total = None;
    for task in Process::myself().ok()?.tasks().ok()?.flatten() {
        let Ok(stat) = task.stat() else {
            continue; // the thread ended meanwhile
        };
        if stat.comm != name {
            continue;
        }
        let nanos = task.schedstat().ok()?.sum_exec_runtime;
        total = Some(total.unwrap_or(Duration::ZERO) + Duration::from_nanos(nanos));
    }
    total
}

/// `wchar` of `/proc/self/io`: bytes this process passed to `write`,
/// `pwrite` and friends so far.
pub fn written_bytes() -> Option<u64> {
    Some(Process::myself().ok()?.io().ok()?.wchar)
}

/// The median of `values` (the mean of the middle two for an even count;
/// NaN for none).
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// The nearest-rank percentile `p` (0 < p ≤ 100) of `samples`, in µs (NaN
/// for none).
pub fn percentile_us(samples: &[Duration], p: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    sorted[index].as_secs_f64() * 1e6
}

/// The mean of `samples` in µs (NaN for none).
pub fn mean_us(samples: &[Duration]) -> f64 {
    let total: Duration = samples.iter().sum();
    total.as_secs_f64() * 1e6 / samples.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&x| Duration::from_micros(x)).collect()
    }

    #[test]
    fn a_named_thread_is_charged_its_own_cpu_time() {
        let (sent, spent) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bench-probe".into())
            .spawn(move || {
                while thread_cpu_time() < Duration::from_millis(20) {
                    std::hint::black_box(0u64);
                }
                sent.send(thread_cpu_time()).unwrap();
                released.recv().ok();
            })
            .unwrap();
        let own = spent.recv().unwrap();
        let seen = named_threads_cpu_time("bench-probe").unwrap();
        release.send(()).unwrap();
        thread.join().unwrap();
        assert!(seen >= own, "{seen:?} < {own:?}");
        assert!(
            seen < own + Duration::from_millis(20),
            "{seen:?} vs {own:?}"
        );
        assert_eq!(named_threads_cpu_time("no-such-thread"), None);
    }

    #[test]
    fn written_bytes_count_a_write() {
        use std::io::Write;
        let mut file = tempfile::tempfile().unwrap();
        let before = written_bytes().unwrap();
        file.write_all(&[0; 4096]).unwrap();
        let after = written_bytes().unwrap();
        assert!(after >= before + 4096, "{before} then {after}");
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = us(&(1..=100).collect::<Vec<_>>());
        assert_eq!(percentile_us(&s, 50.0), 50.0);
        assert_eq!(percentile_us(&s, 99.0), 99.0);
        assert_eq!(percentile_us(&s, 100.0), 100.0);
        assert_eq!(percentile_us(&us(&[7]), 99.0), 7.0);
        assert!(percentile_us(&[], 50.0).is_nan());
    }

    #[test]
    fn medians_and_means() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
        assert_eq!(mean_us(&us(&[1, 2, 3])), 2.0);
    }

    #[test]
    fn a_series_rate_is_the_median_round_rate_and_bytes_pool() {
        let round = |n: usize, ms: u64| Round {
            samples: vec![Duration::from_micros(1); n],
            elapsed: Duration::from_millis(ms),
            written: Some(10 * n as u64),
            cpu: Duration::from_micros(5 * n as u64),
        };
        let series = Series {
            rounds: vec![round(100, 100), round(100, 50), round(100, 1000)],
        };
        assert_eq!(series.rate(), 1000.0);
        assert_eq!(series.count(), 300);
        assert_eq!(series.written_per_op(), 10.0);
        assert_eq!(series.cpu_us_per_op(), 5.0);
        let mut unknown = series.clone();
        unknown.rounds[1].written = None;
        assert!(unknown.written_per_op().is_nan());
    }
}
