//! Connections: identity (4-tuple plus ISN), the tracker that assigns segments to them, and the
//! events the labeller (`label`) marks packets with.

pub mod connection;
pub mod event;
pub mod icmp;
pub mod key;
pub mod label;
pub mod merge;
mod prefetch;
pub mod seq;
pub mod spill;
pub mod stage;
pub mod state;
pub mod store;
pub mod table;
pub mod tallied;
pub mod tombstones;
pub mod tracker;
pub mod window;
#[cfg(test)]
pub(crate) mod wire;

pub use connection::{ConnState, Connection};
pub use event::{Detail, Event, EventKind, FrameRef, PacketRole, Side};
pub use key::{Endpoint, FlowKey, SegmentKey};
pub use state::Flow;
pub use tracker::{Tracker, TrackerOptions};
