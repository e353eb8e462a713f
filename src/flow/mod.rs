//! Connections rebuilt from segments. Here: a connection's identity (`key`: 4-tuple plus ISN),
//! its record (`connection`, `event`, `icmp`, `tallied`) and the tracker's working state of it
//! (`state`, `stage`, `seq`). Below, one folder per job: `track` (the tracker and the
//! per-segment labeller), `store` (where records live: the hot table, tombstones, the spill
//! file, the window of capture time), and `merge` (joining the parts of a capture read in
//! pieces). Each imports only what is above it in that list: `track` the store, the store
//! neither `track` nor `merge`.

pub mod connection;
pub mod event;
pub mod icmp;
pub mod key;
pub mod merge;
pub mod seq;
pub mod stage;
pub mod state;
pub mod store;
pub mod tallied;
pub mod track;
#[cfg(test)]
pub(crate) mod wire;

pub use connection::{ConnState, Connection};
pub use event::{Detail, Event, EventKind, FrameRef, PacketRole, Side};
pub use key::{Endpoint, FlowKey, SegmentKey};
pub use state::Flow;
pub use track::{Tracker, TrackerOptions};
