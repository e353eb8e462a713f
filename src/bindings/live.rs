//! `LiveInput` and `analyze_stdin`: standard input read live, counted as it arrives and
//! stoppable from Python (Ctrl-C), with the analysis of what was read (`crate::reader::live`), and
//! watched while it is read (`crate::watch`, `LiveInput.look`, `LiveInput.metrics`).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{analyze_options, catch, epoch, errors, Analysis};
use crate::analysis;
use crate::reader::live::{LiveCounters, LiveStream};
use crate::reader::CaptureReader;
use crate::detect::{Outcome, Symptoms};
use crate::watch::metrics::{Histogram, ListenerMetrics, BUCKETS, RESET_ANSWERS};
use crate::watch::{EpisodeEvent, Interval, Watch, SIGNS};

/// Standard input as it is being read: bytes and capture records that arrived so far, and a
/// way to end the input early. Read from any thread while `analyze_stdin` works on another.
#[pyclass(module = "pcapq._core", frozen)]
pub struct LiveInput {
    counters: Arc<LiveCounters>,
    watch: Arc<Mutex<Watch>>,
}

#[pymethods]
impl LiveInput {
    #[new]
    fn new() -> LiveInput {
        LiveInput { counters: Arc::new(LiveCounters::default()), watch: Arc::default() }
    }

    /// What happened since the last look (`analyze_stdin(..., watch=True)` only; empty
    /// otherwise): the `max_servers` busiest listeners of the interval, the episodes that opened
    /// or recovered, and with `end` those still open. Starts a new interval.
    #[pyo3(signature = (max_servers = 8, end = false))]
    fn look<'py>(&self, py: Python<'py>, max_servers: usize, end: bool) -> PyResult<Bound<'py, PyDict>> {
        let look = self.watch.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take(max_servers, end);
        let d = PyDict::new(py);
        let servers = look.servers.iter().map(|(server, interval)| interval_dict(py, &server.to_string(), interval)).collect::<PyResult<Vec<_>>>()?;
        d.set_item("servers", servers)?;
        d.set_item("more_servers", look.more_servers)?;
        d.set_item("events", look.events.iter().map(|e| event_dict(py, e)).collect::<PyResult<Vec<_>>>()?)?;
        d.set_item("events_dropped", look.events_dropped)?;
        d.set_item("episodes_forgotten", look.forgotten)?;
        d.set_item("open", look.open)?;
        d.set_item("latest_time", look.latest_ns.map(epoch))?;
        d.set_item("segments", look.segments)?;
        Ok(d)
    }

    /// Per listener, counts since the start (`analyze_stdin(..., watch=True)` only; no
    /// listener otherwise), for a Prometheus exporter. Costs what the listeners do.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.watch.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).metrics();
        let d = PyDict::new(py);
        d.set_item("segments", m.segments)?;
        d.set_item("latest_time", m.latest_ns.map(epoch))?;
        d.set_item("dropped", m.dropped)?;
        d.set_item("listeners_other", m.listeners_other)?;
        d.set_item("buckets", BUCKETS.to_vec())?;
        d.set_item("listeners", m.listeners.iter().map(|l| listener_dict(py, l)).collect::<PyResult<Vec<_>>>()?)?;
        Ok(d)
    }

    /// Bytes that arrived on standard input so far.
    #[getter]
    fn bytes(&self) -> u64 {
        self.counters.bytes()
    }

    /// Capture records that arrived so far, or None for a compressed stream.
    #[getter]
    fn packets(&self) -> Option<u64> {
        self.counters.packets()
    }

    /// True once `stop` was called.
    #[getter]
    fn stopped(&self) -> bool {
        self.counters.stopped()
    }

    /// True when the writer closed the input (rather than the input being stopped).
    #[getter]
    fn ended(&self) -> bool {
        self.counters.ended()
    }

    /// True when a followed file ended because tcpdump started over: its path names another
    /// file now, or the file shrank.
    #[getter]
    fn replaced(&self) -> bool {
        self.counters.replaced()
    }

    /// Ends the input: after what the writer still sends within half a second (at most 3 s),
    /// or at once with `now`. The analysis then settles what was read, as at the end of a file.
    #[pyo3(signature = (now = false))]
    fn stop(&self, now: bool) {
        if now {
            self.counters.stop_now();
        } else {
            self.counters.stop();
        }
    }
}

fn interval_dict<'py>(py: Python<'py>, server: &str, i: &Interval) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("server", server)?;
    d.set_item("connections", i.connections)?;
    d.set_item("answered", i.answered)?;
    d.set_item("failed", i.failed)?;
    let signs = PyDict::new(py);
    for (sign, n) in SIGNS.iter().zip(i.signs).filter(|(_, n)| *n > 0) {
        signs.set_item(sign.slug(), n)?;
    }
    d.set_item("signs", signs)?;
    Ok(d)
}

fn listener_dict<'py>(py: Python<'py>, l: &ListenerMetrics) -> PyResult<Bound<'py, PyDict>> {
    let (d, row) = (PyDict::new(py), &l.row);
    d.set_item("listener", l.listener.map_or_else(|| "other".to_string(), |e| e.to_string()))?;
    d.set_item("connections", row.connections)?;
    d.set_item("answered", row.answered)?;
    let ended = PyDict::new(py);
    for o in Outcome::ALL {
        ended.set_item(o.slug(), row.ended[o.index()])?;
    }
    d.set_item("ended", ended)?;
    let signs = PyDict::new(py);
    for (sign, n) in SIGNS.iter().zip(row.signs) {
        signs.set_item(sign.slug(), n)?;
    }
    d.set_item("signs", signs)?;
    let mut resets = Vec::new();
    for (side, by_answer) in ["client", "server"].into_iter().zip(&row.resets) {
        for (answered, &count) in RESET_ANSWERS.iter().zip(by_answer).filter(|(_, &n)| n > 0) {
            let r = PyDict::new(py);
            r.set_item("side", side)?;
            r.set_item("answered", *answered)?;
            r.set_item("count", count)?;
            resets.push(r);
        }
    }
    d.set_item("resets", resets)?;
    let icmp = PyDict::new(py);
    for (kind, &n) in crate::decode::icmp::IcmpKind::ALL.iter().zip(&row.icmp).filter(|(_, &n)| n > 0) {
        icmp.set_item(kind.slug(), n)?;
    }
    d.set_item("icmp", icmp)?;
    d.set_item("handshake_seconds", histogram_dict(py, &row.handshake)?)?;
    d.set_item("first_byte_seconds", histogram_dict(py, &row.first_byte)?)?;
    d.set_item("retransmission_delay_seconds", histogram_dict(py, &row.retransmission_delay)?)?;
    d.set_item("waiting", row.waiting)?;
    d.set_item("episode_open", l.episode.is_some())?;
    d.set_item("episode_signs", sign_slugs(l.episode.unwrap_or_default()))?;
    Ok(d)
}

fn histogram_dict<'py>(py: Python<'py>, h: &Histogram) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("counts", h.counts.to_vec())?;
    d.set_item("sum", h.sum_seconds())?;
    d.set_item("count", h.count)?;
    Ok(d)
}

/// The live signs among `signs`, in `SIGNS` order.
fn sign_slugs(signs: Symptoms) -> Vec<&'static str> {
    signs.iter().filter(|s| SIGNS.contains(s)).map(|s| s.slug()).collect()
}

fn event_dict<'py>(py: Python<'py>, e: &EpisodeEvent) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", e.kind.slug())?;
    d.set_item("server", e.server.to_string())?;
    d.set_item("time", epoch(e.at_ns))?;
    d.set_item("first_time", epoch(e.first_ns))?;
    d.set_item("last_time", epoch(e.last_ns))?;
    d.set_item("signs", sign_slugs(e.signs))?;
    d.set_item("connections", e.connections)?;
    Ok(d)
}

// The signature's literal default, which the stub repeats.
const _: () = assert!(crate::watch::metrics::DEFAULT_MAX_LISTENERS == 20);

/// Reads standard input live as one capture (`analyze(["-"], ...)`), or with `follow` the
/// capture file tcpdump is writing there (waiting for more at its end), until its end or
/// `live.stop()`, with the GIL released; with `watch`, each segment is tracked as it arrives,
/// `live.look()` tells what happened, and `live.metrics()` the counts since the start, at most
/// `metrics_listeners` listeners named. With `spill_dir`, every connection goes, as it
/// finishes, to a temporary file there instead of memory (as `analyze_many`'s). With `keep_s`,
/// the analysis covers the last `keep_s` seconds of capture time, plus the totals since the
/// start (`crate::flow::store::window`). Raises CaptureError if it is not a capture or `follow` cannot
/// be opened.
#[pyfunction]
#[pyo3(signature = (live, *, keep_connections = true, keep_events = true, max_connections = 0, watch = false, spill_dir = None, metrics_listeners = 20, follow = None, keep_s = None))]
#[allow(clippy::too_many_arguments)]
pub fn analyze_stdin(
    py: Python<'_>,
    live: &LiveInput,
    keep_connections: bool,
    keep_events: bool,
    max_connections: usize,
    watch: bool,
    spill_dir: Option<std::path::PathBuf>,
    metrics_listeners: usize,
    follow: Option<std::path::PathBuf>,
    keep_s: Option<f64>,
) -> PyResult<Analysis> {
    if keep_s.is_some_and(|s| !(s.is_finite() && s >= 1.0)) {
        return Err(pyo3::exceptions::PyValueError::new_err("keep_s must be at least 1 second"));
    }
    let options = analyze_options(keep_connections, keep_events, false, max_connections, None);
    let counters = live.counters.clone();
    let watched = live.watch.clone();
    if watch {
        watched.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).enable_metrics(metrics_listeners);
    }
    let keep_ns = keep_s.map(|s| (s * 1e9) as i64);
    let result = py.allow_threads(|| {
        catch(|| {
            let (name, stream) = match &follow {
                Some(path) => {
                    let name = path.display().to_string();
                    match LiveStream::follow(path, counters) {
                        Ok(stream) => (name, stream),
                        Err(e) => return Err(crate::reader::ReadError::io(&name, e)),
                    }
                }
                None => ("-".to_string(), LiveStream::stdin(counters)),
            };
            let reader = CaptureReader::from_stream(&name, Box::new(stream)).map(|r| (name.clone(), r));
            analysis::analyze_live(reader, options, watch.then_some(&*watched), spill_dir.as_deref(), keep_ns)
        })
    })?;
    result.map(Analysis::of).map_err(|e| errors::capture_error(&e))
}
