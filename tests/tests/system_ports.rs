//! The operating system's clock and entropy pass the same suites as the fakes.

use mosaic_adapters::system::{OsEntropy, SystemClock};

#[test]
fn the_system_clock_passes_the_clock_suite() {
    mosaic_ports::conformance::clock::run(|| SystemClock);
}

#[test]
fn os_entropy_passes_the_entropy_suite() {
    mosaic_ports::conformance::entropy::run(|| OsEntropy);
}
