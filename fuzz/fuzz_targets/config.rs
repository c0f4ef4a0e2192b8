//! One normalized business definition: every loader agrees, and a business
//! that loads says back what its source says.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_app::fuzzing::config(data));
