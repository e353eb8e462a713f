//! Log lines joined to connections (`Analysis.join_log`): Python passes compact arrays of the
//! lines it parsed, the core ties them and hands back the ties, the clock offset per file and
//! the failed connections no line describes.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::{epoch, parse_endpoint, seconds};
use crate::analysis;
use crate::evidence::join::{self, Candidate, Line, LineKind, Shape};

/// Failed connections no line describes: at most this many ids per shape.
const SILENT_IDS: usize = 20;

#[allow(clippy::too_many_arguments)]
pub fn join_log<'py>(
    py: Python<'py>,
    inner: &analysis::Analysis,
    times: Vec<f64>,
    files: Vec<u32>,
    upstreams: Vec<Option<String>>,
    local_ports: Vec<Option<u16>>,
    timings: Vec<(Option<f64>, Option<f64>)>,
    kinds: Vec<String>,
    resolutions: Vec<f64>,
    zones: Vec<Option<f64>>,
    starts: Vec<Option<f64>>,
    via: Vec<Option<usize>>,
) -> PyResult<Bound<'py, PyDict>> {
    let n = times.len();
    if files.len() != n || upstreams.len() != n || local_ports.len() != n || timings.len() != n || kinds.len() != n
        || starts.len() != n || via.len() != n
    {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "times, files, upstreams, local_ports, timings, kinds, starts and via differ in length",
        ));
    }
    let mut lines = Vec::with_capacity(n);
    for i in 0..n {
        let kind = kinds.get(i).map(String::as_str).unwrap_or_default();
        let kind = LineKind::from_slug(kind)
            .ok_or_else(|| pyo3::exceptions::PyValueError::new_err(format!("not a log line kind: {kind}")))?;
        let upstream = match upstreams.get(i).and_then(Option::as_deref) {
            Some(text) => Some(parse_endpoint(text)?),
            None => None,
        };
        let file = files.get(i).copied().unwrap_or(0) as usize;
        let resolution = resolutions.get(file).copied().unwrap_or(1.0);
        lines.push((file, Line {
            time_ns: (times.get(i).copied().unwrap_or(0.0) * 1e9).round() as i64,
            resolution_ns: (resolution * 1e9).round() as i64,
            upstream,
            local_port: local_ports.get(i).copied().flatten(),
            connect_ns: timings.get(i).and_then(|t| t.0).map(|s| (s * 1e9).round() as i64),
            header_ns: timings.get(i).and_then(|t| t.1).map(|s| (s * 1e9).round() as i64),
            start_ns: starts.get(i).copied().flatten().map(|s| (s * 1e9).round() as i64),
            kind,
        }));
    }
    let end_ns = inner.end_ns();
    let start_ns = inner.connections.iter().map(|c| c.first_time_ns).min().unwrap_or(end_ns);
    let candidates: Vec<Candidate> = py.allow_threads(|| {
        inner
            .connections
            .iter()
            .enumerate()
            .filter_map(|(i, c)| join::candidate(c, i as u32, end_ns))
            .collect()
    });
    let file_count = lines.iter().map(|(f, _)| f + 1).max().unwrap_or(0).max(zones.len());
    let mut tied = vec![false; candidates.len()];
    let ties_out = PyList::empty(py);
    let mut files_out: Vec<Option<Bound<'py, PyDict>>> = (0..file_count).map(|_| None).collect();
    // Line -> (candidate, the candidates it is ambiguous with), as each file is joined.
    let mut tied_line: rustc_hash::FxHashMap<usize, (usize, Vec<usize>)> = Default::default();
    // Files whose lines are tied through another's first.
    let through = |file: usize| lines.iter().zip(&via).any(|((f, _), v)| *f == file && v.is_some());
    let order: Vec<usize> = (0..file_count).filter(|&f| !through(f)).chain((0..file_count).filter(|&f| through(f))).collect();
    for file in order {
        let positions: Vec<usize> = lines.iter().enumerate().filter(|(_, (f, _))| *f == file).map(|(i, _)| i).collect();
        let own: Vec<Line> = positions.iter().filter_map(|&i| lines.get(i).map(|(_, l)| *l)).collect();
        let zone = zones.get(file).copied().flatten().map(|s| (s * 1e9).round() as i64);
        // A line tied through the line of its request in another file: the same connection,
        // where its kind fits that connection's shape.
        let preset: Vec<join::Tie> = positions
            .iter()
            .enumerate()
            .filter_map(|(at, &i)| {
                let (candidate, _) = tied_line.get(&via.get(i).copied().flatten()?)?;
                let line = own.get(at)?;
                candidates.get(*candidate).filter(|c| line.kind.fits(c.shape))?;
                Some(join::Tie { line: at, candidate: *candidate })
            })
            .collect();
        let j = py.allow_threads(|| join::join_with(&own, &candidates, zone, (start_ns, end_ns), &preset));
        for t in &j.ties {
            let (Some(&line), Some(c)) = (positions.get(t.line), candidates.get(t.candidate)) else { continue };
            if let Some(x) = tied.get_mut(t.candidate) {
                *x = true;
            }
            let through_line = preset.contains(t).then(|| via.get(line).copied().flatten()).flatten();
            let ambiguous: Vec<usize> = match through_line {
                Some(other) => tied_line.get(&other).map(|(_, a)| a.clone()).unwrap_or_default(),
                None => j.ambiguous.get(&t.line).cloned().unwrap_or_default(),
            };
            let ambiguous_ids: Vec<u64> = ambiguous.iter().filter_map(|&ci| candidates.get(ci).map(|c| c.id)).collect();
            tied_line.insert(line, (t.candidate, ambiguous));
            let agree = |logged: Option<i64>, seen: Option<i64>| logged.zip(seen).map(|(l, s)| join::times_agree(l, s));
            let said = lines.get(line).map(|(_, l)| *l);
            let (connect_agrees, header_agrees) = said.map_or((None, None), |l| (agree(l.connect_ns, c.connect_ns), agree(l.header_ns, c.first_byte_ns)));
            ties_out.append((
                line,
                c.id,
                c.index,
                c.shape.slug(),
                (c.connect_ns.map(seconds), c.first_byte_ns.map(seconds)),
                (connect_agrees, header_agrees),
                ambiguous_ids,
                through_line,
            ))?;
        }
        let d = PyDict::new(py);
        d.set_item("ties", j.ties.len())?;
        d.set_item("through", preset.len())?;
        d.set_item("zone", seconds(j.zone_ns))?;
        d.set_item("zone_searched", zone.is_none())?;
        d.set_item("skew", j.skew_ns.map(seconds))?;
        d.set_item("skew_pairs", j.skew_pairs)?;
        if let Some(slot) = files_out.get_mut(file) {
            *slot = Some(d);
        }
    }
    let files_out = PyList::new(py, files_out.into_iter().map(|d| d.unwrap_or_else(|| PyDict::new(py))))?;
    let silent = PyDict::new(py);
    for shape in Shape::ALL.iter().filter(|s| s.is_failure()) {
        let ids: Vec<u64> = candidates
            .iter()
            .zip(&tied)
            .filter(|(c, t)| c.shape == *shape && !**t)
            .map(|(c, _)| c.id)
            .collect();
        if !ids.is_empty() {
            let e = PyDict::new(py);
            e.set_item("count", ids.len())?;
            e.set_item("ids", ids.iter().take(SILENT_IDS).collect::<Vec<_>>())?;
            silent.set_item(shape.slug(), e)?;
        }
    }
    let d = PyDict::new(py);
    d.set_item("ties", ties_out)?;
    d.set_item("files", files_out)?;
    d.set_item("silent", silent)?;
    d.set_item("capture", (epoch(start_ns), epoch(end_ns)))?;
    Ok(d)
}

/// The words of the join, for the vocabulary.
pub fn kinds() -> Vec<&'static str> {
    LineKind::ALL.iter().map(|k| k.slug()).collect()
}

pub fn shapes() -> Vec<&'static str> {
    Shape::ALL.iter().map(|s| s.slug()).collect()
}
