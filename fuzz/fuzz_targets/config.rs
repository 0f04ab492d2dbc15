#![no_main]
//! The config parser under libFuzzer; see karpenter_tui::fuzzing for what it asserts.
use karpenter_tui::fuzzing::Target;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| Target::Config.run(data));
