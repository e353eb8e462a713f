//! `LiveInput` and `analyze_stdin`: standard input read live, counted as it arrives and
//! stoppable from Python (Ctrl-C), with the analysis of what was read (`crate::live`).

use std::sync::Arc;

use pyo3::prelude::*;

use super::{analyze_options, catch, errors, Analysis};
use crate::analysis;
use crate::live::{LiveCounters, LiveStream};
use crate::reader::CaptureReader;

/// Standard input as it is being read: bytes and capture records that arrived so far, and a
/// way to end the input early. Read from any thread while `analyze_stdin` works on another.
#[pyclass(module = "pcapq._core", frozen)]
pub struct LiveInput {
    counters: Arc<LiveCounters>,
}

#[pymethods]
impl LiveInput {
    #[new]
    fn new() -> LiveInput {
        LiveInput { counters: Arc::new(LiveCounters::default()) }
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

/// Reads standard input live as one capture (`analyze(["-"], ...)`), until its end or
/// `live.stop()`, with the GIL released. Raises CaptureError if it is not a capture.
#[pyfunction]
#[pyo3(signature = (live, *, keep_connections = true, keep_events = true, max_connections = 0))]
pub fn analyze_stdin(
    py: Python<'_>,
    live: &LiveInput,
    keep_connections: bool,
    keep_events: bool,
    max_connections: usize,
) -> PyResult<Analysis> {
    let options = analyze_options(keep_connections, keep_events, false, max_connections);
    let counters = live.counters.clone();
    let result = py.allow_threads(|| {
        catch(|| {
            let stream = LiveStream::stdin(counters);
            let reader = CaptureReader::from_stream("-", Box::new(stream)).map(|r| ("-".to_string(), r));
            analysis::analyze_readers(std::iter::once(reader), options, &mut |_| {})
        })
    })?;
    result.map(Analysis::of).map_err(|e| errors::capture_error(&e))
}
