//! The crash campaigns' host: while the campaign's clients run on threads
//! of their own, the broker (a real `mosaic-bus broker` child) is killed
//! with SIGKILL at random moments of their traffic; after each kill the
//! operator runs `mosaic-bus unlock` and the host boots the broker again on
//! the same data root with the same configuration, and hands the new
//! broker to the clients.
//!
//! Every campaign reads its length and seed from the environment:
//! `MOSAIC_CRASH_ROUNDS` (kills, [`DEFAULT_ROUNDS`] by default) and
//! `MOSAIC_CRASH_SEED` (the kill moments, and whatever else the campaign
//! draws, from its own default seed).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{env_number, unlock, Broker};

/// Kills in a default run.
pub const DEFAULT_ROUNDS: u64 = 3;

/// The longest stretch of traffic before a kill, in milliseconds (the
/// shortest is a fifth of it).
pub const MAX_TRAFFIC_MS: u64 = 1_500;

/// A tiny xorshift64 generator: reproducible choices without a dependency.
pub struct Rng(u64);

impl Rng {
    /// A generator of `seed` (any seed, zero included).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// The next number.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One crash campaign: its name (in its log lines), how many times the
/// broker is killed, and its seed.
pub struct Campaign {
    name: &'static str,
    /// How many times the broker is killed.
    pub rounds: usize,
    /// The seed of the kill moments; the campaign's clients may draw from
    /// it too.
    pub seed: u64,
}

impl Campaign {
    /// The campaign `name` with the rounds and seed the environment sets,
    /// else [`DEFAULT_ROUNDS`] and `default_seed`.
    pub fn from_env(name: &'static str, default_seed: u64) -> Campaign {
        let rounds = env_number("MOSAIC_CRASH_ROUNDS", DEFAULT_ROUNDS);
        Campaign {
            name,
            rounds: usize::try_from(rounds).expect("MOSAIC_CRASH_ROUNDS fits"),
            seed: env_number("MOSAIC_CRASH_SEED", default_seed),
        }
    }

    /// Crashes `broker`, booted on `root` with `config`, [`Campaign::rounds`]
    /// times: each time traffic runs for a stretch the seed draws (up to
    /// [`MAX_TRAFFIC_MS`]), the broker is killed, unlocked and booted
    /// again, and `booted` hands the new broker to the clients with its
    /// generation (1 for the first reboot). The last broker then serves
    /// one more stretch and is never killed.
    ///
    /// Returns the last broker, still serving, and the moment each killed
    /// generation was killed (generation 0 first).
    pub fn crash(
        &self,
        root: &Path,
        config: &Value,
        mut broker: Broker,
        mut booted: impl FnMut(&Broker, usize),
    ) -> (Broker, Vec<Instant>) {
        let mut rng = Rng::new(self.seed);
        let mut traffic = || {
            let ms = MAX_TRAFFIC_MS / 5 + rng.below(MAX_TRAFFIC_MS * 4 / 5);
            Duration::from_millis(ms)
        };
        let mut kills = Vec::with_capacity(self.rounds);
        for round in 1..=self.rounds {
            // The crash lands at a random moment of the clients' traffic;
            // the stretch is what is being drawn, not a wait for anything.
            std::thread::sleep(traffic());
            kills.push(Instant::now());
            broker.kill();
            let evidence = unlock(root);
            broker = Broker::boot(root, config);
            booted(&broker, round);
            eprintln!(
                "{}: round {round} of {}: killed, unlocked ({}), booted again",
                self.name,
                self.rounds,
                evidence.display()
            );
        }
        std::thread::sleep(traffic());
        (broker, kills)
    }
}
