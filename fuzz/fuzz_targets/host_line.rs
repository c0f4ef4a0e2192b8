//! One line of the host channel (`boot`, `bindLaunch`, `close`): parsed
//! consistently, and re-encoded to itself where an encoder exists.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_app::fuzzing::host_line(data));
