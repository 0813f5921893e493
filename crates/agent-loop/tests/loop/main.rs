//! The loop's integration tests: one binary.

// An in-memory gateway on the real hooks-core policy, a recording model, and
// fake model APIs served over real HTTP on 127.0.0.1.
mod support;
// The loop with the hook points: [S1]-[S6], [H3], [P1]-[P3], cancellation.
mod scenarios;
// The OpenAI-compatible provider against a fake server: wire format, [I1], [V1].
mod openai;
// The Anthropic provider against a fake server: wire format, [I1], [V1], [P2].
mod anthropic;
// The hook points beyond the seed's two: [E1]-[E6].
mod hookpoints;
// Both providers streaming from fake servers: split UTF-8, tool-call pieces,
// cuts, error events, stalls, refusals, the size cap, cancellation, and the
// same history as whole answers.
mod streaming;
// Sessions that survive: the observer's records, resumed by a new agent.
mod sessions;
// Random scripts, hooks, compactions and cancellations.
mod properties;
