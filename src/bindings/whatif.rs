//! `Analysis.whatif`: a listener's offered load replayed with other settings (src/whatif).

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::whatif::{self, Load, Outcome, Settings};

/// One run's settings from a dict of the stub's `WhatifSettings`: every key required.
fn settings(d: &Bound<'_, PyDict>) -> PyResult<Settings> {
    fn get<'py, T: FromPyObject<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
        d.get_item(key)?
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(key.to_string()))?
            .extract()
    }
    let timeout: Option<f64> = get(d, "client_timeout_s")?;
    Ok(Settings {
        backlog: get(d, "backlog")?,
        workers: get::<u32>(d, "workers")?.max(1),
        syncookies: get(d, "syncookies")?,
        synack_retries: get(d, "synack_retries")?,
        syn_retries: get(d, "syn_retries")?,
        syn_linear_timeouts: get(d, "syn_linear_timeouts")?,
        client_timeout_ns: timeout.filter(|t| t.is_finite() && *t > 0.0).map(|t| (t * 1e9).round() as i64),
        abort_on_overflow: get(d, "abort_on_overflow")?,
    })
}

fn outcome<'py>(py: Python<'py>, o: &Outcome) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("connections", o.connections)?;
    d.set_item("answered", o.answered)?;
    d.set_item("failed", o.failed)?;
    d.set_item("failed_connecting", o.failed_connecting)?;
    d.set_item("failed_waiting", o.failed_waiting)?;
    d.set_item("failed_reset", o.failed_reset)?;
    d.set_item("syn_retransmitted", o.syn_retransmitted)?;
    d.set_item("listen_overflows", o.listen_overflows)?;
    d.set_item("wait_p50_s", o.wait_p50_ns.map(super::seconds))?;
    d.set_item("wait_p99_s", o.wait_p99_ns.map(super::seconds))?;
    d.set_item("failed_range", o.spread.map(|s| s.failed))?;
    d.set_item("syn_retransmitted_range", o.spread.map(|s| s.syn_retransmitted))?;
    Ok(d)
}

/// `Analysis.whatif` (src/bindings/mod.rs).
pub(super) fn whatif<'py>(
    py: Python<'py>,
    analysis: &crate::analysis::Analysis,
    listener: &str,
    capture_workers: Option<u32>,
    runs: Vec<Bound<'py, PyDict>>,
    seed: u64,
) -> PyResult<Bound<'py, PyDict>> {
    if !analysis.options.tracker.keep_connections {
        return Err(pyo3::exceptions::PyValueError::new_err("whatif needs an analysis that kept every connection"));
    }
    let endpoint = super::parse_endpoint(listener)?;
    let runs = runs.iter().map(settings).collect::<PyResult<Vec<Settings>>>()?;
    let connections = &analysis.connections;
    let (observed, replayed) = py.allow_threads(|| {
        super::catch(|| {
            let load = Load::of(connections, &endpoint, capture_workers);
            let replayed: Vec<Outcome> = runs.iter().map(|s| whatif::replay_median(&load, s, seed)).collect();
            (load.observed(), replayed)
        })
    })?;
    let d = PyDict::new(py);
    d.set_item("observed", outcome(py, &observed)?)?;
    let list = PyList::empty(py);
    for o in &replayed {
        list.append(outcome(py, o)?)?;
    }
    d.set_item("runs", list)?;
    Ok(d)
}
