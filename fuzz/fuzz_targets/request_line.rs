//! One socket request line, parsed and dispatched against an in-memory
//! broker: refusals change nothing but their record, parsing is a function
//! of the line, restarts rebuild the live state.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_app::fuzzing::request_line(data));
