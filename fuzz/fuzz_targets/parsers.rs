//! The strict parsers (timestamp, date, task ref, ids, names, capability):
//! everything accepted has exactly one text form.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| mosaic_domain::fuzzing::parsers(data));
