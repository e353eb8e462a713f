//! `align_points`: two capture points aligned (src/align), as the JSON `paths` entry and the
//! connections each point shares with the other, by the ids of the points' analyses.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use rustc_hash::FxHashMap;

use super::{catch, errors, python_value, Analysis};
use crate::align::conns::Conn;
use crate::flow::{Endpoint, FrameRef};

/// A point's connections by 4-tuple and VLAN: (id, first packet, first and last time).
type Index = FxHashMap<(Endpoint, Endpoint, u32), Vec<(u64, FrameRef, i64, i64)>>;

fn index(analysis: &mut Analysis) -> Index {
    analysis.settle();
    let mut index = Index::default();
    // Read from the sink or the records; an error reading the sink leaves the index short.
    let _ = analysis.inner.for_each_connection(|c| {
        index.entry((c.client, c.server, c.vlan)).or_default().push((c.id, c.first, c.first_time_ns, c.last_time_ns));
        Ok(())
    });
    index
}

/// The id of the analysis's connection that is `conn`: the one that began with the same
/// packet, else the one on its 4-tuple (either way round: a guess of which side is the client
/// may differ) live when it began.
fn id_of(index: &Index, conn: &Conn) -> Option<u64> {
    let candidates = [(conn.client, conn.server), (conn.server, conn.client)]
        .into_iter()
        .filter_map(|(c, s)| index.get(&(c, s, conn.vlan)))
        .flatten();
    let mut live = None;
    for &(id, first, first_ns, last_ns) in candidates {
        if first == conn.first {
            return Some(id);
        }
        if live.is_none() && first_ns <= conn.first_ns && conn.first_ns <= last_ns {
            live = Some(id);
        }
    }
    live
}

/// Aligns the captures of two points, `first` and `second` (each its files in time order),
/// named `names` in the report. With `analyses` (the two points' analyses, in the same
/// order), connections are named by their ids there (where the analysis keeps them).
/// Returns (the `paths` entry, the ids at the first point of the connections it shares with
/// the second, the same at the second).
///
/// Raises:
///     CaptureError: a file cannot be opened or is not a capture.
#[pyfunction]
#[pyo3(signature = (first, second, names, analyses = None))]
pub fn align_points<'py>(
    py: Python<'py>,
    first: Vec<String>,
    second: Vec<String>,
    names: (String, String),
    analyses: Option<(Py<Analysis>, Py<Analysis>)>,
) -> PyResult<(Bound<'py, PyDict>, Vec<u64>, Vec<u64>)> {
    let aligned = py.allow_threads(|| catch(|| crate::align::align(&first, &second, crate::align::Options::default())))?;
    let al = aligned.map_err(|e| errors::capture_error(&e))?;
    let indexes: [Index; 2] = match &analyses {
        Some((a, b)) => [index(&mut a.borrow_mut(py)), index(&mut b.borrow_mut(py))],
        None => [Index::default(), Index::default()],
    };
    let [ia, ib] = &indexes;
    let id_a = |c: &Conn| id_of(ia, c);
    let id_b = |c: &Conn| id_of(ib, c);
    let value = crate::output::paths::path_json(&al, [&names.0, &names.1], [&id_a, &id_b]);
    let shared = |p: usize, index: &Index| -> Vec<u64> {
        let mut ids: Vec<u64> = al.aligned[p].iter().filter_map(|&i| id_of(index, &al.conns[p][i as usize])).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    let entry = python_value(py, &value)?.downcast_into::<PyDict>()?;
    Ok((entry, shared(0, ia), shared(1, ib)))
}
