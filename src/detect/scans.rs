//! Port scans among the problem connections: one source address probing many ports of one
//! address (SYN scans and connect scans alike leave connections that carried no payload and were
//! refused, reset or never completed; see `facts::Fact::Probe`). Counted per pair, in a table of
//! bounded size.

use std::net::IpAddr;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::flow::{Endpoint, FrameRef};

/// A source that probed at least this many ports of one address is scanning it. A proxy talks
/// to one port, or a handful, of each upstream address.
pub const SCAN_MIN_PORTS: usize = 16;
/// Fewer ports do when every probe was one SYN never sent again: no client kernel leaves an
/// unanswered SYN unrepeated (net.ipv4.tcp_syn_retries), a scanner's raw SYNs do.
pub const SCAN_MIN_PORTS_ONE_SYN: usize = 5;
/// Pairs followed at most: a spoofed flood brings a new pair with every SYN.
const MAX_PAIRS: usize = 65_536;
const MAX_FRAMES: usize = 6;

/// One source probing one address.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub source: Option<IpAddr>,
    pub target: Option<IpAddr>,
    pub ports: FxHashSet<u16>,
    pub probes: u64,
    /// Probes the target answered with a SYN-ACK (an open port) or with an RST (closed).
    pub open: u64,
    pub refused: u64,
    /// Probes that were one SYN and nothing more.
    pub one_syn: u64,
    pub first_ns: i64,
    pub last_ns: i64,
    pub frames: Vec<FrameRef>,
}

impl Scan {
    pub fn is_scan(&self) -> bool {
        let ports = self.ports.len();
        ports >= SCAN_MIN_PORTS || (ports >= SCAN_MIN_PORTS_ONE_SYN && self.one_syn == self.probes)
    }
}

/// A probe's own facts, for the scan table (`ScanBook::add`), kept with its seed (`digest::Seed::probe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Probe {
    pub client: IpAddr,
    pub first: FrameRef,
    pub open: bool,
    pub refused: bool,
    pub one_syn: bool,
}

#[derive(Default)]
pub struct ScanBook {
    pairs: FxHashMap<(IpAddr, IpAddr), Scan>,
    pub untracked: u64,
}

impl ScanBook {
    /// Counts `n` probes alike to `server`, the first at `time_ns`.
    pub fn add(&mut self, probe: &Probe, server: Endpoint, time_ns: i64, n: u32) {
        let Probe { client, first, open, refused, one_syn } = *probe;
        let key = (client, server.ip);
        if !self.pairs.contains_key(&key) && self.pairs.len() >= MAX_PAIRS {
            self.untracked += u64::from(n);
            return;
        }
        let s = self.pairs.entry(key).or_insert_with(|| Scan {
            source: Some(client),
            target: Some(server.ip),
            first_ns: time_ns,
            last_ns: time_ns,
            ..Scan::default()
        });
        s.ports.insert(server.port);
        let n = u64::from(n);
        s.probes += n;
        s.open += n * u64::from(open);
        s.refused += n * u64::from(refused);
        s.one_syn += n * u64::from(one_syn);
        s.first_ns = s.first_ns.min(time_ns);
        s.last_ns = s.last_ns.max(time_ns);
        if s.frames.len() < MAX_FRAMES {
            s.frames.push(first);
        }
    }

    /// Is (client, server address) a scan?
    pub fn is_scan(&self, client: IpAddr, server: IpAddr) -> bool {
        self.pairs.get(&(client, server)).is_some_and(Scan::is_scan)
    }

    /// The scans, busiest first.
    pub fn scans(&self) -> Vec<&Scan> {
        let mut out: Vec<&Scan> = self.pairs.values().filter(|s| s.is_scan()).collect();
        out.sort_by_key(|s| (std::cmp::Reverse(s.ports.len()), s.first_ns, s.source, s.target));
        out
    }
}
