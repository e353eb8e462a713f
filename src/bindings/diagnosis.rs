//! What the diagnosis (`pcapq.diagnose`) reads: per listener, episodes of problem connections
//! reduced to marks, selections over them, and a bounded number of example connections.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{epoch, lean_connection, Analysis, LeanShapes};
use crate::detect::checks::{Check, Checks};
use crate::detect::episodes::{self, Book, Filter};
use crate::detect::marks;
use crate::flow::Endpoint;

/// The problem connections of one analysis, per listener (`Analysis.problems()`).
#[pyclass(module = "pcapq._core")]
pub struct Problems {
    analysis: Py<Analysis>,
    book: Book,
}

impl Problems {
    pub fn new(analysis: Py<Analysis>, book: Book) -> Problems {
        Problems { analysis, book }
    }
}

#[pymethods]
impl Problems {
    /// Server endpoints with at least one problem connection, in order.
    fn servers(&self) -> Vec<String> {
        self.book.servers().iter().map(Endpoint::to_string).collect()
    }

    /// The episodes of `server`, in time order.
    fn episodes(&self, server: &str) -> PyResult<Vec<Episode>> {
        let endpoint = super::parse_endpoint(server)?;
        Ok(self.book.episodes(endpoint).into_iter().map(|inner| Episode { inner }).collect())
    }

    /// Sources that probed many ports of one address: source, target, ports, probes, open,
    /// refused, first_time, last_time, frames ([{file, frame}]), busiest first.
    fn scans<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for s in self.book.scans.scans() {
            let d = PyDict::new(py);
            d.set_item("source", s.source.map(|ip| ip.to_string()))?;
            d.set_item("target", s.target.map(|ip| ip.to_string()))?;
            d.set_item("ports", s.ports.len())?;
            d.set_item("probes", s.probes)?;
            d.set_item("open", s.open)?;
            d.set_item("refused", s.refused)?;
            d.set_item("first_time", epoch(s.first_ns))?;
            d.set_item("last_time", epoch(s.last_ns))?;
            let frames = PyList::empty(py);
            for f in &s.frames {
                let fd = PyDict::new(py);
                fd.set_item("file", f.file)?;
                fd.set_item("frame", f.frame)?;
                frames.append(fd)?;
            }
            d.set_item("frames", frames)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Up to `limit` of the selection's connections whose records were kept, earliest first,
    /// as lean dicts (`Analysis.connections(lean=True)`).
    fn examples<'py>(&self, py: Python<'py>, selection: &Selection, limit: usize) -> PyResult<Bound<'py, PyList>> {
        let analysis = self.analysis.borrow(py);
        let end_ns = analysis.inner.end_ns();
        let shapes = LeanShapes::import(py)?;
        let list = PyList::empty(py);
        let kept = selection.records.iter().filter_map(|&i| analysis.inner.connections.get(i as usize));
        for c in kept.take(limit) {
            list.append(lean_connection(py, &shapes, c, end_ns)?)?;
        }
        Ok(list)
    }

    /// What the retransmission series of the problem connections show: syn_schedules ({slug:
    /// series of three sends or more}), syn_series, first_syn_retry (median wait, seconds, or
    /// None), synack_series, synack_retries (most timer re-sends in one series),
    /// synack_cut_short, first_rto (median wait before a data series' first re-send, or None),
    /// first_rto_series, pmtu_discovered (connections where path MTU discovery worked),
    /// pmtu_mtu (the smallest MTU a too-big error gave them, or None).
    fn timings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = &self.book.timings;
        let d = PyDict::new(py);
        let schedules = PyDict::new(py);
        for (slug, n) in &t.syn_schedules {
            schedules.set_item(slug, n)?;
        }
        d.set_item("syn_schedules", schedules)?;
        d.set_item("syn_series", t.syn_series)?;
        d.set_item("first_syn_retry", median(&t.first_syn_retry_ns).map(|ns| ns / 1e9))?;
        d.set_item("synack_series", t.synack_series)?;
        d.set_item("synack_retries", t.synack_retries)?;
        d.set_item("synack_cut_short", t.synack_cut_short)?;
        d.set_item("first_rto", median(&t.first_rto_ns).map(|ns| ns / 1e9))?;
        d.set_item("first_rto_series", t.first_rto_ns.len())?;
        d.set_item("pmtu_discovered", t.pmtu_discovered)?;
        d.set_item("pmtu_mtu", t.pmtu_mtu)?;
        Ok(d)
    }

    /// The earliest handshake ACK among the selection's connections (epoch seconds), if any.
    fn earliest_ack(&self, selection: &Selection) -> Option<f64> {
        selection.earliest_ack_ns.map(epoch)
    }
}

/// The middle value, or the mean of the two middle ones (as `statistics.median`).
fn median(values: &[i64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    match (n, sorted.get(n / 2)) {
        (0, _) | (_, None) => None,
        (n, Some(&upper)) if n % 2 == 1 => Some(upper as f64),
        (_, Some(&upper)) => Some((sorted.get(n / 2 - 1).copied().unwrap_or(upper) as f64 + upper as f64) / 2.0),
    }
}

/// One listener's problem connections close together in time.
#[pyclass(module = "pcapq._core")]
pub struct Episode {
    inner: episodes::Episode,
}

fn bits(names: Vec<String>) -> PyResult<u64> {
    names.iter().try_fold(0u64, |acc, name| {
        let bit = marks::bit(name)
            .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("not a mark: {name}")))?;
        Ok(acc | bit)
    })
}

fn filter(all_of: Vec<String>, any_of: Vec<String>, none_of: Vec<String>, claimed: bool) -> PyResult<Filter> {
    Ok(Filter { all: bits(all_of)?, any: bits(any_of)?, none: bits(none_of)?, claimed })
}

#[pymethods]
impl Episode {
    #[getter]
    fn server(&self) -> String {
        self.inner.server.to_string()
    }

    #[getter]
    fn first(&self) -> f64 {
        epoch(self.inner.first_ns())
    }

    #[getter]
    fn last(&self) -> f64 {
        epoch(self.inner.last_ns())
    }

    /// Its connections.
    fn __len__(&self) -> usize {
        self.inner.connections() as usize
    }

    /// How many connections match (see `select`).
    #[pyo3(signature = (all_of = Vec::new(), any_of = Vec::new(), none_of = Vec::new(), claimed = false))]
    fn count(&self, all_of: Vec<String>, any_of: Vec<String>, none_of: Vec<String>, claimed: bool) -> PyResult<u64> {
        let f = filter(all_of, any_of, none_of, claimed)?;
        Ok(self.inner.members.iter().filter(|m| f.matches(m)).map(|m| u64::from(m.weight)).sum())
    }

    /// The connections with every mark of `all_of`, one of `any_of` (if given) and none of
    /// `none_of`; only those no earlier rule claimed, unless `claimed`.
    ///
    /// Raises:
    ///     ValueError: a name is not a mark (`VOCABULARY["marks"]`).
    #[pyo3(signature = (all_of = Vec::new(), any_of = Vec::new(), none_of = Vec::new(), claimed = false))]
    fn select(&self, all_of: Vec<String>, any_of: Vec<String>, none_of: Vec<String>, claimed: bool) -> PyResult<Selection> {
        let f = filter(all_of, any_of, none_of, claimed)?;
        Ok(Selection::of(&self.inner, self.inner.select(&f)))
    }

    /// The connections of either selection (both of this episode).
    fn union(&self, a: &Selection, b: &Selection) -> Selection {
        let mut positions: Vec<u32> = a.positions.iter().chain(&b.positions).copied().collect();
        positions.sort_unstable();
        positions.dedup();
        Selection::of(&self.inner, positions)
    }

    /// The selection's connections whose id is among `ids` (`keep`), or those whose id is not.
    /// What a rule reads of facts the core did not mark (two capture points aligned,
    /// pcapq.two_points).
    #[pyo3(signature = (selection, ids, keep = true))]
    fn among(&self, selection: &Selection, ids: std::collections::HashSet<u64>, keep: bool) -> Selection {
        let positions = selection
            .positions
            .iter()
            .copied()
            .filter(|&p| self.inner.members.get(p as usize).is_some_and(|m| ids.contains(&m.id) == keep))
            .collect();
        Selection::of(&self.inner, positions)
    }

    /// Marks the selection's connections as explained: later selections leave them out.
    fn claim(&mut self, selection: &Selection) {
        self.inner.claim(&selection.positions);
    }
}

/// Connections of one episode that a rule selected.
#[pyclass(module = "pcapq._core")]
pub struct Selection {
    /// Positions in the episode, ascending (time order).
    positions: Vec<u32>,
    /// Where the records kept are in `Analysis::connections`, in the same order.
    records: Vec<u32>,
    ids: Vec<u64>,
    /// Connections: more than `ids` when merged seeds of the digest stand for several.
    connections: u64,
    first_ns: Option<i64>,
    last_ns: Option<i64>,
    earliest_ack_ns: Option<i64>,
    /// Per check (`checks::Check::ALL`), the connections in which it held and failed.
    checks: Vec<(u64, u64)>,
}

impl Selection {
    fn of(episode: &episodes::Episode, positions: Vec<u32>) -> Selection {
        let members: Vec<&episodes::Member> = positions.iter().filter_map(|&p| episode.members.get(p as usize)).collect();
        let mut ids: Vec<u64> = members.iter().map(|m| m.id).collect();
        ids.sort_unstable();
        Selection {
            records: members.iter().filter_map(|m| m.record()).map(|i| i as u32).collect(),
            connections: members.iter().map(|m| u64::from(m.weight)).sum(),
            first_ns: members.iter().map(|m| m.first_ns).min(),
            last_ns: members.iter().map(|m| m.last_ns).max(),
            earliest_ack_ns: members.iter().filter_map(|m| m.ack_ns).min(),
            checks: tally_checks(&members),
            ids,
            positions,
        }
    }
}

/// Per check, the connections (by weight) in which it held and in which it failed.
fn tally_checks(members: &[&episodes::Member]) -> Vec<(u64, u64)> {
    let mut out = vec![(0, 0); Check::COUNT];
    for m in members {
        let checks = Checks::from_bits(m.checks);
        for (i, &check) in Check::ALL.iter().enumerate() {
            if let Some(tally) = out.get_mut(i) {
                tally.0 += u64::from(m.weight) * u64::from(checks.held(check));
                tally.1 += u64::from(m.weight) * u64::from(checks.failed(check));
            }
        }
    }
    out
}

#[pymethods]
impl Selection {
    /// Per check the capture could test on these connections (`VOCABULARY["checks"]`): in
    /// how many it held and in how many it failed.
    #[getter]
    fn checks(&self) -> std::collections::BTreeMap<&'static str, (u64, u64)> {
        Check::ALL.iter().zip(&self.checks).filter(|(_, &(h, f))| h + f > 0).map(|(c, &t)| (c.slug(), t)).collect()
    }

    /// Its connections (as many as `ids` unless the capture had more problem connections than
    /// records kept: see `Analysis.warnings`).
    fn __len__(&self) -> usize {
        self.connections as usize
    }

    fn __bool__(&self) -> bool {
        !self.ids.is_empty()
    }

    /// Connection ids, ascending: one per connection, or per group of alike connections
    /// counted in short form.
    #[getter]
    fn ids(&self) -> Vec<u64> {
        self.ids.clone()
    }

    /// The first packet of the earliest connection (epoch seconds), or None when empty.
    #[getter]
    fn first(&self) -> Option<f64> {
        self.first_ns.map(epoch)
    }

    /// The last packet of the latest connection, or None when empty.
    #[getter]
    fn last(&self) -> Option<f64> {
        self.last_ns.map(epoch)
    }
}
