//! pcapq's core: reads tcpdump captures and rebuilds every TCP connection with its events.
//!
//! Layers, each depending only on the ones before it:
//! `reader` (pcap, pcapng, gzip, stdin) → `decode` (link, IP, TCP) → `flow` (connections and
//! their events) → `detect` (verdicts, episodes) → `census` (every finished connection counted
//! once) → `analysis` (one run over the inputs) → `output` (JSON); `evidence` joins a proxy's
//! log lines to the connections, `align` two capture points; `reader::live` and `watch` read
//! standard input as it arrives. Only `bindings` knows about Python.
//!
//! No unsafe code, with one exception: the cache prefetch hint of the sweep of finished flows
//! (`flow/store/prefetch.rs`, x86-64 only).
#![deny(unsafe_code)]

pub mod align;
pub mod analysis;
pub mod census;
pub mod detect;
pub mod evidence;
pub mod decode;
pub mod flow;
pub mod output;
pub mod reader;
pub mod watch;

mod slugs;

#[cfg(feature = "python")]
mod bindings;
