//! Evidence beyond the capture that the core weighs: the proxy's log lines joined to the
//! connections they describe (`join`). The Python package `pcapq.evidence` reads the logs and
//! the host's counters, and hands the lines here.

pub mod join;
