//! One body posted to browser control's claim or result route: parsed
//! consistently, refused as `bad-request`, and re-encoded to itself.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_app::fuzzing::browser_bodies(data));
