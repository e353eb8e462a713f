//! The tracker and the labeller: each segment to its connection (`tracker`), what the segment
//! was (`label`), and each ICMP error to the connection and packet it answers (`icmp`).

pub mod icmp;
pub mod label;
pub mod tracker;

pub use tracker::{Tracker, TrackerOptions};
