//! End-to-end tests of `hooks-mcp` over real processes and real sockets.

// Shared rig: fixture specs, a host that records events, /proc checks.
mod support;
// Hook rounds over stdio: answers [R1]-[R4], allowlist [A1]-[A3], objections.
mod rounds;
// Deadlines, cancellation, kills and restarts [T1]-[T5].
mod timeouts;
// Start-up, environment, tools, shutdown and process cleanup.
mod lifecycle;
// A hook round against a Streamable HTTP server on 127.0.0.1.
mod http;
// Servers that flood, stop reading or list without end [issue 10].
mod hostile;
// The hook points beyond the seed's two: [C4], [K1], [E3], [E6].
mod hookpoints;
