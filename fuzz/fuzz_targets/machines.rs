//! The bus and the browser request machine driven by arbitrary transition
//! sequences, their invariants checked after every step.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_domain::fuzzing::machines(data));
