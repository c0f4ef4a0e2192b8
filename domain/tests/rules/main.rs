//! The domain's rules, tested where they live: one test binary, so a
//! mutation run (docs/contributing.md) builds and links one binary per
//! mutant instead of one per file.

mod addresses;
mod browser;
mod bus_verbs;
mod changes;
mod evidence;
mod group_commit;
mod journal;
mod messages;
mod refusal_windows;
mod text;
mod tokens;
