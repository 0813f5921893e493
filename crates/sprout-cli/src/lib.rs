//! `sprout-cli`: the library behind the `sprout` binary.
//!
//! Not built yet. The `sprout` command line (`run`, `demo`, `hooks list`,
//! `hooks call`, `hook-server …`) will live here, as a library so that tests can
//! drive it in process, with a `main.rs` of a few lines.
//!
//! Today it holds nothing that pretends to work.
