//! One socket request line through the broker's own request pipeline over
//! the in-memory ports: refusals change nothing but their record, parsing
//! is a function of the line, restarts rebuild the live state.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_app::fuzzing::request_line(data));
