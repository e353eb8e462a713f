//! pcapq's core: reads tcpdump captures and rebuilds every TCP connection with its events.
//!
//! Layers, each importing only the ones before it (tests/test_imports.py checks the order):
//!
//! 1. `slugs`: the enums named by slugs (`slug_enum!`), for every layer
//! 2. `reader`: pcap, pcapng, gzip, standard input; `reader::live` a capture as it arrives
//! 3. `decode`: link, IP, TCP, ICMP
//! 4. `flow`: connections and their events
//! 5. `detect`: verdicts, episodes
//! 6. `census`: every finished connection counted once
//! 7. `watch`: a capture followed live, per listener
//! 8. `analysis`: one run over the inputs
//! 9. `whatif`: a listener's offered load replayed with other settings
//! 10. `evidence`: a proxy's log lines joined to the connections
//! 11. `align`: two capture points matched packet for packet
//! 12. `output`: JSON, Parquet, the annotated pcapng
//! 13. `bindings`: the only one that knows Python
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
pub mod whatif;

mod slugs;

#[cfg(feature = "python")]
mod bindings;
