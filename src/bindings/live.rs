//! `LiveInput` and `analyze_stdin`: standard input read live, counted as it arrives and
//! stoppable from Python (Ctrl-C), with the analysis of what was read (`crate::live`), and
//! watched while it is read (`crate::watch`, `LiveInput.look`).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::{analyze_options, catch, errors, Analysis};
use crate::analysis;
use crate::live::{LiveCounters, LiveStream};
use crate::reader::CaptureReader;
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
        d.set_item("open", look.open)?;
        d.set_item("latest_time", look.latest_ns.map(|t| t as f64 / 1e9))?;
        d.set_item("segments", look.segments)?;
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

fn event_dict<'py>(py: Python<'py>, e: &EpisodeEvent) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("kind", e.kind.slug())?;
    d.set_item("server", e.server.to_string())?;
    d.set_item("time", e.at_ns as f64 / 1e9)?;
    d.set_item("first_time", e.first_ns as f64 / 1e9)?;
    d.set_item("last_time", e.last_ns as f64 / 1e9)?;
    d.set_item("signs", e.signs.iter().filter(|s| SIGNS.contains(s)).map(|s| s.slug()).collect::<Vec<_>>())?;
    d.set_item("connections", e.connections)?;
    Ok(d)
}

/// Reads standard input live as one capture (`analyze(["-"], ...)`), or with `follow` the
/// capture file tcpdump is writing there (waiting for more at its end), until its end or
/// `live.stop()`, with the GIL released; with `watch`, each segment is tracked as it arrives and
/// `live.look()` tells what happened. With `spill_dir`, every connection goes, as it finishes, to
/// a temporary file there instead of memory (as `analyze_many`'s). With `keep_s`, the analysis
/// covers the last `keep_s` seconds of capture time, plus the totals since the start
/// (`crate::flow::window`). Raises CaptureError if it is not a capture or `follow` cannot be
/// opened.
#[pyfunction]
#[pyo3(signature = (live, *, keep_connections = true, keep_events = true, max_connections = 0, watch = false, spill_dir = None, follow = None, keep_s = None))]
#[allow(clippy::too_many_arguments)]
pub fn analyze_stdin(
    py: Python<'_>,
    live: &LiveInput,
    keep_connections: bool,
    keep_events: bool,
    max_connections: usize,
    watch: bool,
    spill_dir: Option<std::path::PathBuf>,
    follow: Option<std::path::PathBuf>,
    keep_s: Option<f64>,
) -> PyResult<Analysis> {
    if keep_s.is_some_and(|s| !(s.is_finite() && s >= 1.0)) {
        return Err(pyo3::exceptions::PyValueError::new_err("keep_s must be at least 1 second"));
    }
    let options = analyze_options(keep_connections, keep_events, false, max_connections, None);
    let counters = live.counters.clone();
    let watched = live.watch.clone();
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
