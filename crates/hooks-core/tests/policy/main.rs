//! The policy's integration tests: one binary, three modules.

// The scenario language and its trace renderer.
mod support;
// One scenario or more per rule id of the contract (docs/hooks.md), as script and trace.
mod scenarios;
// Properties over random sessions, checked after every step.
mod properties;
