//! The Python module `pcapq._core`. The only place that knows about Python.
//!
//! The work runs with the GIL released, and a panic in the core becomes `InternalError` here
//! instead of unwinding into Python.

mod diagnosis;
mod errors;
mod join;
mod live;
mod paths;
mod whatif;

use std::io::{self, Write};
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::analysis::{self, AnalyzeOptions};
use crate::decode::link;
use crate::flow::Connection;
use crate::detect;
use crate::flow::TrackerOptions;
use crate::flow::store::MAX_KEPT_WITH_PROBLEMS;
use crate::output::json;
use errors::{internal_error, CaptureError, InternalError, PcapqError};

/// Panics are caught and reported as `InternalError`; the default hook would also print them.
fn quiet_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| panic::set_hook(Box::new(|_| {})));
}

fn catch<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    quiet_panics();
    panic::catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_string());
        internal_error(what)
    })
}

/// The result of one analysis, held in Rust. Python reads summaries and asks for connections
/// one at a time or writes them all as JSON; it never gets one object per packet.
#[pyclass(module = "pcapq._core")]
pub struct Analysis {
    inner: analysis::Analysis,
    /// Fields added to connections in the JSON document, by id (`note_connections`).
    notes: rustc_hash::FxHashMap<u64, serde_json::Map<String, serde_json::Value>>,
}

impl Analysis {
    fn of(inner: analysis::Analysis) -> Analysis {
        Analysis { inner, notes: Default::default() }
    }

    /// The analysis as its reports read it: a mergeable analysis that did not keep every record
    /// counts its open records now, and cannot be merged afterwards. Its per-server moments are
    /// sorted, for the queries that count them.
    fn settle(&mut self) {
        self.inner.settle();
        self.inner.sort_servers();
    }

    /// After `settle`.
    fn server_stats(&self) -> Vec<&detect::servers::ServerStats> {
        self.inner.servers()
    }

    fn server(&self, server: &str) -> PyResult<&detect::servers::ServerStats> {
        let endpoint = parse_endpoint(server)?;
        self.inner
            .server(&endpoint)
            .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(server.to_string()))
    }
}

#[pymethods]
impl Analysis {
    /// Counts over the whole capture.
    fn summary<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.settle();
        // The same fields as the JSON document's `summary`.
        let view = json::summary_view(&self.inner);
        let value = serde_json::to_value(&view).map_err(|e| internal_error(e.to_string()))?;
        let d = python_value(py, &value)?.downcast_into::<PyDict>()?;
        Ok(d)
    }

    /// One dict per input file: path, format, gzip, packets, tcp_segments, first_time,
    /// last_time, link_types, read_stop ("end", "truncated", "corrupt", "io_error"),
    /// read_stop_detail, pcapng (what a pcapng file says about itself, or None; docs/json.md).
    fn captures<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for f in &self.inner.files {
            let d = PyDict::new(py);
            d.set_item("path", &f.path)?;
            d.set_item("format", f.format.map(|x| x.name()))?;
            d.set_item("gzip", f.gzip)?;
            d.set_item("packets", f.packets)?;
            d.set_item("tcp_segments", f.tcp_segments)?;
            d.set_item("first_time", f.first_time_ns.map(epoch))?;
            d.set_item("last_time", f.last_time_ns.map(epoch))?;
            let links = PyDict::new(py);
            for (t, n) in &f.link_types {
                links.set_item(crate::reader::CaptureReader::linktype_name(*t), n)?;
            }
            d.set_item("link_types", links)?;
            d.set_item("read_stop", f.stop.kind())?;
            d.set_item("read_stop_detail", f.stop.describe())?;
            d.set_item("pcapng", python_value(py, &json::notes_value(f))?)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Frames that were not usable TCP segments: {reason slug: (count, meaning)}.
    fn skipped<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (slug, meaning, n) in self.inner.skipped.by_reason() {
            d.set_item(slug, (n, meaning))?;
        }
        Ok(d)
    }

    /// Sentences about anything that makes the result incomplete (truncation, unknown link types).
    fn warnings(&mut self) -> Vec<String> {
        self.settle();
        self.inner.warnings()
    }

    fn __len__(&mut self) -> usize {
        self.settle();
        self.inner.connections.len()
    }

    /// Connections as dicts shaped like the JSON document's: all of them, or only those with
    /// a problem (an outcome other than completed or open, or any symptom).
    /// `lean`: only what the findings read, flat (id, client, server, first_file, first_frame,
    /// first_time, last_time, outcome, symptoms, follows, follows_after, completed,
    /// syn_attempts, synack_attempts, synack_time, ack_time, request_acked, request_sent,
    /// client_last_data, server_first_data, server_last_data, client_closed, duplicates, vlan,
    /// added_latency, reset, and series as `pcapq.lean.Series`), made without the JSON
    /// detour.
    /// `server` ("ip:port"): only connections to that server.
    #[pyo3(signature = (*, problems_only = false, lean = false, server = None))]
    fn connections<'py>(&mut self, py: Python<'py>, problems_only: bool, lean: bool, server: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        self.settle();
        let end_ns = self.inner.end_ns();
        let list = PyList::empty(py);
        let shapes = if lean { Some(LeanShapes::import(py)?) } else { None };
        let server = server.map(parse_endpoint).transpose()?;
        for c in &self.inner.connections {
            if server.is_some_and(|s| c.server != s) {
                continue;
            }
            if problems_only {
                let (outcome, symptoms) = detect::classify(c, end_ns);
                if !detect::servers::has_problem(outcome, symptoms) {
                    continue;
                }
            }
            if let Some(shapes) = &shapes {
                list.append(lean_connection(py, shapes, c, end_ns)?)?;
            } else {
                list.append(python_value(py, &json::connection_value(c, end_ns))?)?;
            }
        }
        Ok(list)
    }

    /// One dict per server endpoint: connections, outcomes, symptoms, first_time, last_time,
    /// answered (connections the server sent data on), one_syn (connections that were one
    /// client SYN and nothing more), packets and data_retransmits (both ways), resent_segments and
    /// spurious_resends (data segments re-sent, and of them those shown spurious), and the median handshake gaps at the
    /// capture point (syn_to_synack, synack_to_ack, seconds; None without clean handshakes);
    /// binned_through: None, or the epoch second up to which its waits and answers are counted
    /// per second (a capture with more than `servers::EXACT_MOMENTS` of them), so `waiting_at`
    /// and `answered_between` there are estimates, off by at most the connections of the second
    /// a time falls in.
    fn servers<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.settle();
        let list = PyList::empty(py);
        for s in self.server_stats() {
            let d = PyDict::new(py);
            d.set_item("server", s.server.to_string())?;
            d.set_item("connections", s.connections)?;
            let outcomes = PyDict::new(py);
            for o in detect::Outcome::ALL {
                outcomes.set_item(o.slug(), s.outcomes[o.index()])?;
            }
            d.set_item("outcomes", outcomes)?;
            let symptoms = PyDict::new(py);
            for sy in detect::Symptom::ALL {
                symptoms.set_item(sy.slug(), s.symptoms[sy.index()])?;
            }
            d.set_item("symptoms", symptoms)?;
            d.set_item("first_time", epoch(s.first_ns))?;
            d.set_item("last_time", epoch(s.last_ns))?;
            d.set_item("answered", s.answered.total(detect::moments::Kind::Begins))?;
            d.set_item("binned_through", s.binned_through())?;
            d.set_item("one_syn", s.one_syn)?;
            d.set_item("packets", s.packets)?;
            d.set_item("data_retransmits", s.data_retransmits)?;
            d.set_item("resent_segments", s.resent_segments)?;
            d.set_item("spurious_resends", s.spurious_resends)?;
            d.set_item("syn_to_synack", s.median_syn_to_synack_ns().map(seconds))?;
            d.set_item("synack_to_ack", s.median_synack_to_ack_ns().map(seconds))?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The settings the capture shows, per listener ("ip:port", "[v6]:port") that shows any
    /// (src/detect/settings): {"listener": ..., then per setting shown, in the order of
    /// `detect::settings::SETTINGS`, {"value", "low", "high", "confidence", "evidence"}}.
    fn inferred_settings<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.settle();
        let end_ns = self.inner.end_ns();
        let d = PyDict::new(py);
        for s in self.server_stats() {
            let inferred = detect::settings::infer(&s.shown, end_ns);
            if inferred.is_empty() {
                continue;
            }
            let mut one = serde_json::Map::new();
            one.insert("listener".into(), serde_json::Value::String(s.server.to_string()));
            for (name, estimate) in inferred {
                one.insert(name.into(), estimate.to_json());
            }
            d.set_item(s.server.to_string(), python_value(py, &serde_json::Value::Object(one))?)?;
        }
        Ok(d)
    }

    /// For `server` ("ip:port"): at each of `times` (epoch seconds), how many connections its
    /// clients considered established were still waiting for its first answer.
    fn waiting_at(&mut self, server: &str, times: Vec<f64>) -> PyResult<Vec<usize>> {
        self.settle();
        let stats = self.server(server)?;
        Ok(times.iter().map(|t| stats.waiting_at((t * 1e9).round() as i64).value as usize).collect())
    }

    /// Per (client address, server endpoint), the most source ports it held at once (in use, or
    /// in TIME-WAIT for 60 s after the connection), highest first: client, server, peak, at
    /// (epoch seconds), `range`, the size of Linux's default ephemeral port range, and `error`,
    /// how much too high `peak` can be (0 unless the pair's spans were counted per second).
    fn port_pressure<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.settle();
        let list = PyList::empty(py);
        for p in self.inner.port_pressure() {
            let d = PyDict::new(py);
            d.set_item("client", p.client.to_string())?;
            d.set_item("server", p.server.to_string())?;
            d.set_item("peak", p.peak)?;
            d.set_item("at", epoch(p.at_ns))?;
            d.set_item("range", detect::servers::EPHEMERAL_PORTS)?;
            d.set_item("error", p.error)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Connections that were one client SYN and nothing more (a SYN flood, a port scan), in
    /// aggregate: connections, answered_synack, answered_rst, sources (distinct addresses),
    /// sources_at_least (true when there were more than could be counted), targets (distinct
    /// server endpoints), targets_at_least, top_sources and top_targets ([(endpoint, count)],
    /// most first), first_time and last_time (epoch seconds or None), frames ([{file, frame}]).
    fn one_syn<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        const TOP: usize = 5;
        let t = self.inner.one_syn();
        let d = PyDict::new(py);
        d.set_item("connections", t.connections)?;
        d.set_item("answered_synack", t.answered_synack)?;
        d.set_item("answered_rst", t.answered_rst)?;
        let (sources, more_sources) = t.sources();
        d.set_item("sources", sources)?;
        d.set_item("sources_at_least", more_sources)?;
        let (targets, more_targets) = t.target_count();
        d.set_item("targets", targets)?;
        d.set_item("targets_at_least", more_targets)?;
        let top_sources: Vec<(String, u64)> = t.top_sources(TOP).into_iter().map(|(ip, n)| (ip.to_string(), n)).collect();
        d.set_item("top_sources", top_sources)?;
        let top_targets: Vec<(String, u64)> = t.targets(TOP).into_iter().map(|(e, n)| (e.to_string(), n)).collect();
        d.set_item("top_targets", top_targets)?;
        d.set_item("first_time", t.first_ns.map(epoch))?;
        d.set_item("last_time", t.last_ns.map(epoch))?;
        let frames = PyList::empty(py);
        for f in &t.frames {
            let fd = PyDict::new(py);
            fd.set_item("file", f.file)?;
            fd.set_item("frame", f.frame)?;
            frames.append(fd)?;
        }
        d.set_item("frames", frames)?;
        Ok(d)
    }

    /// For `server`: how many connections it answered (first data) between `start` and `end`.
    fn answered_between(&mut self, server: &str, start: f64, end: f64) -> PyResult<usize> {
        self.settle();
        let stats = self.server(server)?;
        let (from, to) = ((start * 1e9).round() as i64, (end * 1e9).round() as i64);
        Ok(stats.answered_between(from, to).value as usize)
    }

    /// Per-second counts over every connection (also those not kept), as columns of equal
    /// length: seconds (epoch, rounded down, only seconds that saw anything), new (outcome slug
    /// -> connections whose first packet fell in that second), retransmissions, waiting_in and
    /// waiting_out (connections that began / stopped waiting for the server's answer).
    /// `server` ("ip:port"): only connections to that server.
    #[pyo3(signature = (server = None))]
    fn timeline<'py>(&mut self, py: Python<'py>, server: Option<&str>) -> PyResult<Bound<'py, PyDict>> {
        self.settle();
        let server = server.map(parse_endpoint).transpose()?;
        let timeline = self.inner.timeline();
        let mut seconds = Vec::new();
        let mut new: Vec<Vec<u64>> = vec![Vec::new(); detect::Outcome::COUNT];
        let (mut retransmissions, mut waiting_in, mut waiting_out) = (Vec::new(), Vec::new(), Vec::new());
        for (second, counts) in timeline.seconds(server) {
            seconds.push(second);
            for (column, n) in new.iter_mut().zip(counts.new) {
                column.push(n);
            }
            retransmissions.push(counts.retransmissions);
            waiting_in.push(counts.waiting_in);
            waiting_out.push(counts.waiting_out);
        }
        let d = PyDict::new(py);
        d.set_item("seconds", seconds)?;
        let by_outcome = PyDict::new(py);
        for (o, column) in detect::Outcome::ALL.iter().zip(new) {
            by_outcome.set_item(o.slug(), column)?;
        }
        d.set_item("new", by_outcome)?;
        d.set_item("retransmissions", retransmissions)?;
        d.set_item("waiting_in", waiting_in)?;
        d.set_item("waiting_out", waiting_out)?;
        Ok(d)
    }

    /// How many connections have a problem (also those beyond the records kept), and the `n`
    /// worst of the records kept as lean dicts (as `connections(lean=True)`), worst first:
    /// failed outcomes, then any symptom, then the most added latency, then the earliest, then
    /// the lowest id.
    fn worst<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<(usize, Bound<'py, PyList>)> {
        self.settle();
        let end_ns = self.inner.end_ns();
        let (count, ranked) = detect::worst::rank_worst(&self.inner.connections, end_ns, n);
        let count = count + self.inner.not_kept as usize;
        let shapes = LeanShapes::import(py)?;
        let list = PyList::empty(py);
        for i in ranked {
            list.append(lean_connection(py, &shapes, &self.inner.connections[i], end_ns)?)?;
        }
        Ok((count, list))
    }

    /// `worst`, each connection as the row a report's table shows, a tuple: (index, id, client,
    /// server, outcome, symptoms, first_time, last_time, added_latency, first_file,
    /// first_frame), `index` its place in `connections()`. A tuple of ten values instead of a
    /// lean dict: the HTML report ranks up to 20,000 rows of a large capture.
    fn worst_rows<'py>(&mut self, py: Python<'py>, n: usize) -> PyResult<(usize, Bound<'py, PyList>)> {
        self.settle();
        let end_ns = self.inner.end_ns();
        let (count, ranked) = detect::worst::rank_worst(&self.inner.connections, end_ns, n);
        let count = count + self.inner.not_kept as usize;
        let list = PyList::empty(py);
        for i in ranked {
            let c = &self.inner.connections[i];
            let v = detect::judge(c, end_ns);
            let symptoms = pyo3::types::PyTuple::new(py, v.symptoms.iter().map(|s| s.slug()).collect::<Vec<_>>())?;
            let row = (
                i,
                c.id,
                c.client.to_string(),
                c.server.to_string(),
                v.outcome.slug(),
                symptoms,
                epoch(c.first_time_ns),
                epoch(c.last_time_ns),
                seconds(v.added_latency_ns),
                c.first.file,
                c.first.frame,
            );
            list.append(row.into_pyobject(py)?)?;
        }
        Ok((count, list))
    }

    /// The problem connections per listener, in episodes, with their marks: what the
    /// diagnosis's rules count and select over (`Problems`).
    fn problems(slf: Bound<'_, Self>) -> PyResult<diagnosis::Problems> {
        let book = {
            let mut this = slf.borrow_mut();
            this.settle();
            let this = &*this;
            let end_ns = this.inner.end_ns();
            let book = &this.inner.census().servers;
            detect::episodes::Book::build(&this.inner.connections, &this.inner.counted.digest, end_ns, &this.server_stats(),
                this.inner.counted.servers.flow_lengths.trimmed_at(), &|ip| book.sent_as_client(ip))
        };
        Ok(diagnosis::Problems::new(slf.unbind(), book))
    }

    /// Ties log lines to the connections they describe (docs/evidence.md). Line `i` is at
    /// `times[i]` (epoch seconds on the log's clock, read as UTC), in file `files[i]`, about
    /// upstream `upstreams[i]` (an endpoint, or None for any), from the proxy's source port
    /// `local_ports[i]` (None: not said; said, the tie is exact), with the attempt's connect
    /// time and time to the first byte as the proxy measured them `timings[i]` (seconds or
    /// None: a connection whose own differ is tied only when no other fits), of kind `kinds[i]`
    /// (`VOCABULARY["log_kinds"]`). Per file: `resolutions[file]` (seconds a line's time stands
    /// for) and `zones[file]` (log clock minus UTC when the file says so; None: searched).
    /// `starts[i]`: when the attempt began, on the log's clock (None: not said to the
    /// millisecond); `via[i]`: the line of the same request in another file (an error line's
    /// access line), whose connection it is tied to when its kind fits (both optional: none).
    /// Returns ties ([(line, connection id, connection index, shape, (connect, first byte),
    /// (connect agrees, first byte agrees), ambiguous with, through)]: seconds from the first
    /// SYN to the handshake's ACK and to the server's first byte, or None; whether the line's
    /// timings agree with them, or None; the ids of the connections the line fits as well;
    /// the line it was tied through, or None), files ([{ties, through, zone,
    /// zone_searched, skew, skew_pairs}]), silent ({shape: {count, ids}}: failed connections
    /// no line describes) and capture ((first, last) epoch seconds).
    ///
    /// Raises:
    ///     ValueError: the arrays differ in length, a kind is unknown or an upstream is not an endpoint.
    #[pyo3(signature = (times, files, upstreams, local_ports, timings, kinds, resolutions, zones, starts=None, via=None))]
    #[allow(clippy::too_many_arguments)]
    fn join_log<'py>(
        &mut self, py: Python<'py>, times: Vec<f64>, files: Vec<u32>, upstreams: Vec<Option<String>>, local_ports: Vec<Option<u16>>,
        timings: Vec<(Option<f64>, Option<f64>)>, kinds: Vec<String>, resolutions: Vec<f64>, zones: Vec<Option<f64>>,
        starts: Option<Vec<Option<f64>>>, via: Option<Vec<Option<usize>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.settle();
        let starts = starts.unwrap_or_else(|| vec![None; times.len()]);
        let via = via.unwrap_or_else(|| vec![None; times.len()]);
        join::join_log(py, &self.inner, times, files, upstreams, local_ports, timings, kinds, resolutions, zones, starts, via)
    }

    /// Adds fields to connections in the JSON document: `notes` maps a connection id to a JSON
    /// object string whose fields are added (`proxy_log`).
    ///
    /// Raises:
    ///     ValueError: a value is not a JSON object.
    fn note_connections(&mut self, notes: std::collections::HashMap<u64, String>) -> PyResult<()> {
        for (id, text) in notes {
            let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("note: {e}")))?;
            let serde_json::Value::Object(fields) = value else {
                return Err(pyo3::exceptions::PyValueError::new_err("a note must be a JSON object"));
            };
            self.notes.entry(id).or_default().extend(fields);
        }
        Ok(())
    }

    /// Connection `index` (0-based, in order of first packet) as a JSON object string.
    fn connection_json(&mut self, index: usize) -> PyResult<String> {
        self.settle();
        let c = self.inner.connections.get(index).ok_or_else(|| pyo3::exceptions::PyIndexError::new_err("no such connection"))?;
        Ok(json::connection_json(c, self.inner.end_ns()))
    }

    /// The words pcapq writes on the packets of connection `index` (output/labels.rs), as
    /// (file, frame, text): one per event, in event order, then one per ICMP error that
    /// answered one of its packets.
    fn connection_labels(&mut self, index: usize) -> PyResult<Vec<(u32, u64, String)>> {
        self.settle();
        let c = self.inner.connections.get(index).ok_or_else(|| pyo3::exceptions::PyIndexError::new_err("no such connection"))?;
        let labels = crate::output::labels::connection_labels(c, self.inner.end_ns());
        Ok(labels.into_iter().map(|label| (label.file, label.frame, label.text)).collect())
    }

    /// Writes the capture `paths` (the files this analysis read, in the same order) back as
    /// pcapng at `output`, every record kept, with pcapq's words as packet comments on the
    /// packets of the connections kept (`ids`: only these) and `section` on each section
    /// header (docs/wireshark.md). `findings`: (title, connection ids) of each finding, naming
    /// the finding of each problem connection on its first packet. Returns {packets,
    /// commented, records, connections}.
    ///
    /// Raises:
    ///     CaptureError: an input could not be opened, or broke off (args: message, kind,
    ///         path; the output holds the records before the break).
    ///     OSError: the output could not be written.
    #[pyo3(signature = (paths, output, ids, findings, section))]
    fn write_annotated<'py>(
        &mut self, py: Python<'py>, paths: Vec<String>, output: std::path::PathBuf, ids: Option<Vec<u64>>,
        findings: Vec<(String, Vec<u64>)>, section: String,
    ) -> PyResult<Bound<'py, PyDict>> {
        use crate::output::{annotate, comments};
        self.settle();
        let inner = &self.inner;
        let wanted: Option<rustc_hash::FxHashSet<u64>> = ids.map(|ids| ids.into_iter().collect());
        let result = py.allow_threads(|| {
            catch(|| {
                let selected: Vec<&crate::flow::Connection> =
                    inner.connections.iter().filter(|c| wanted.as_ref().is_none_or(|w| w.contains(&c.id))).collect();
                let end_ns = inner.end_ns();
                // The connections are labelled on a thread of their own as the capture is copied.
                std::thread::scope(|scope| {
                    let notes = comments::packet_comments(scope, &selected, end_ns, &findings)?;
                    let lookup = |file: u32, frame: u64, out: &mut String| notes.write_comment(file, frame, out);
                    let written = annotate::write_annotated(&paths, &output, &annotate::Comments { packet: &lookup, section: &section });
                    let connections = notes.finish();
                    written.map(|w| (w, connections))
                })
            })
        })?;
        let (written, connections) = result.map_err(|e| annotate_error(e, &output))?;
        let d = PyDict::new(py);
        d.set_item("packets", written.packets)?;
        d.set_item("commented", written.commented)?;
        d.set_item("records", written.records)?;
        d.set_item("connections", connections)?;
        Ok(d)
    }

    /// Joins the analysis of the capture that came right after this one (made with
    /// `mergeable=True`). Both are used up: they are empty afterwards.
    fn merge(&mut self, later: &mut Analysis) -> PyResult<Analysis> {
        let earlier = std::mem::take(&mut self.inner);
        let later = std::mem::take(&mut later.inner);
        let inner = catch(move || earlier.merge(later))?.map_err(pyo3::exceptions::PyValueError::new_err)?;
        Ok(Analysis::of(inner))
    }

    /// The analysis as compact, versioned bytes (for another process to merge); see
    /// `from_bytes`. Does not use it up.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let inner = &self.inner;
        let bytes = py.allow_threads(|| catch(|| inner.to_bytes()))?.map_err(internal_error)?;
        Ok(pyo3::types::PyBytes::new(py, &bytes))
    }

    /// The analysis `to_bytes` serialised. Raises ValueError for other bytes, or bytes from a
    /// pcapq with another serialisation format.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Analysis> {
        let inner = py.allow_threads(|| catch(|| analysis::Analysis::from_bytes(data)))?.map_err(pyo3::exceptions::PyValueError::new_err)?;
        Ok(Analysis::of(inner))
    }

    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, pyo3::types::PyBytes>,))> {
        let from_bytes = py.get_type::<Analysis>().getattr("from_bytes")?;
        Ok((from_bytes, (self.to_bytes(py)?,)))
    }

    /// Writes the JSON document (docs/json.md) to `target`: a path, which the core writes
    /// itself, or a text file object, given chunks of 1 MiB. An exception raised by
    /// `target.write` (BrokenPipeError, a full disk) propagates as it was raised.
    #[pyo3(signature = (target, pretty = false, extra = None))]
    fn write_json(&mut self, py: Python<'_>, target: Bound<'_, PyAny>, pretty: bool, extra: Option<String>) -> PyResult<()> {
        self.settle();
        if let Some(e) = &extra {
            let parsed: serde_json::Value = serde_json::from_str(e).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("extra: {e}")))?;
            if !parsed.is_object() {
                return Err(pyo3::exceptions::PyValueError::new_err("extra must be a JSON object"));
            }
        }
        let extra = extra.as_deref();
        if let Ok(path) = target.extract::<std::path::PathBuf>() {
            let inner = &mut self.inner;
            let notes = &self.notes;
            let written = py.allow_threads(|| {
                catch(|| {
                    let file = std::fs::File::create(&path)?;
                    let mut out = io::BufWriter::with_capacity(CHUNK, file);
                    json::write_document_noted(inner, &mut out, pretty, extra, notes)?;
                    out.flush()
                })
            })?;
            return written.map_err(|e| pyo3::exceptions::PyOSError::new_err((e.raw_os_error().unwrap_or(0), e.to_string(), path)));
        }
        let mut writer = PyTextWriter { file: target, buffer: Vec::with_capacity(CHUNK), error: None };
        let written = catch(|| {
            let mut out = io::BufWriter::with_capacity(64 * 1024, &mut writer);
            json::write_document_noted(&mut self.inner, &mut out, pretty, extra, &self.notes)?;
            out.flush()?;
            drop(out);
            writer.flush()
        })?;
        match (written, writer.error.take()) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(raised)) => Err(raised),
            (Err(e), None) => Err(pyo3::exceptions::PyOSError::new_err(e.to_string())),
        }
    }

    /// What users felt of the connections with `ids` (src/detect/felt.rs): connections (those
    /// found among the records kept), failed (a failed outcome; a server's close the client
    /// never reacted to is none), delayed (not failed, and waited
    /// on re-sends at least `threshold`), resends (packets sent again), waited (seconds lost to
    /// re-sends, added up), longest (the longest such wait), threshold (seconds: the largest of
    /// Linux's minimum RTO, 200 ms, and four median handshake round trips of the capture).
    fn felt<'py>(&mut self, py: Python<'py>, ids: Vec<u64>) -> PyResult<Bound<'py, PyDict>> {
        self.settle();
        let threshold = detect::felt::threshold_ns(detect::felt::median_rtt_ns(self.server_stats()));
        let f = detect::felt::felt(&self.inner.connections, &ids, self.inner.end_ns(), threshold);
        let d = PyDict::new(py);
        d.set_item("connections", f.connections)?;
        d.set_item("failed", f.failed)?;
        d.set_item("delayed", f.delayed)?;
        d.set_item("resends", f.resends)?;
        d.set_item("waited", seconds(f.waited_ns))?;
        d.set_item("longest", seconds(f.longest_ns))?;
        d.set_item("threshold", seconds(f.threshold_ns))?;
        Ok(d)
    }

    /// The proxy's timeouts inferred from when its connections gave up (src/detect/timeouts.rs):
    /// {"connect": {...}, "read": {...}}, a kind absent when the capture does not show it; each
    /// with seconds, connections (that gave up at it), gave_up (in all), measured (False:
    /// bounded by the SYNs around it and rounded to a whole second, a guess) and range ((above,
    /// at most) seconds where every give-up's FIN was held back behind its request, else None).
    fn proxy_timeouts<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.settle();
        let inferred = self.inner.census().give_ups.infer();
        let d = PyDict::new(py);
        for (kind, t) in [("connect", inferred.connect), ("read", inferred.read)] {
            let Some(t) = t else { continue };
            let one = PyDict::new(py);
            one.set_item("seconds", t.seconds)?;
            one.set_item("connections", t.connections)?;
            one.set_item("gave_up", t.gave_up)?;
            one.set_item("measured", t.measured)?;
            one.set_item("range", t.range)?;
            d.set_item(kind, one)?;
        }
        Ok(d)
    }

    /// The load offered to `listener` ("ip:port"), from an analysis that kept every
    /// connection: `observed`, what the capture shows, counted as a replay counts; `runs`, the
    /// load replayed with each of `runs`' settings (src/whatif), service draws seeded with
    /// `seed`. `capture_workers`, the workers the capture's server had, takes the wait for a
    /// worker out of the service times it showed. Raises ValueError if the analysis did not
    /// keep every connection, KeyError if a run lacks a setting.
    #[pyo3(signature = (listener, capture_workers, runs, seed = 0))]
    fn whatif<'py>(
        &mut self,
        py: Python<'py>,
        listener: &str,
        capture_workers: Option<u32>,
        runs: Vec<Bound<'py, PyDict>>,
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        whatif::whatif(py, &self.inner, listener, capture_workers, runs, seed)
    }
}

const CHUNK: usize = 1 << 20;

/// A moment as Unix epoch seconds, rounded to the microsecond as the JSON document and the
/// Parquet tables write it (`output::json::epoch`): the same number for the same moment in the
/// Python API, the JSON and Parquet.
fn epoch(ns: i64) -> f64 {
    crate::output::json::epoch(ns)
}

/// A duration in seconds.
fn seconds(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// The fields of a connection the findings read, as a flat dict whose series are
/// `pcapq.lean.Series` tuples (see `Analysis.connections`).
pub(crate) fn lean_connection<'py>(py: Python<'py>, shapes: &LeanShapes<'py>, c: &Connection, end_ns: i64) -> PyResult<Bound<'py, PyDict>> {
    let v = detect::judge(c, end_ns);
    let d = PyDict::new(py);
    d.set_item("id", c.id)?;
    d.set_item("client", c.client.to_string())?;
    d.set_item("server", c.server.to_string())?;
    d.set_item("first_file", c.first.file)?;
    d.set_item("first_frame", c.first.frame)?;
    d.set_item("first_time", epoch(c.first_time_ns))?;
    d.set_item("last_time", epoch(c.last_time_ns))?;
    d.set_item("outcome", v.outcome.slug())?;
    d.set_item("symptoms", pyo3::types::PyTuple::new(py, v.symptoms.iter().map(|s| s.slug()).collect::<Vec<_>>())?)?;
    d.set_item("follows", c.follows)?;
    d.set_item("follows_after", c.follows_after_ns.get().map(epoch))?;
    d.set_item("completed", c.handshake_completed())?;
    d.set_item("syn_attempts", c.syn_count)?;
    d.set_item("synack_attempts", c.synack_count)?;
    d.set_item("synack_time", c.synack_time_ns.get().map(epoch))?;
    d.set_item("ack_time", c.handshake_ack_time_ns.get().map(epoch))?;
    d.set_item("request_acked", c.milestones.client_data_acked_ns.get().map(epoch))?;
    d.set_item("request_sent", c.milestones.client_data_ns.get().map(epoch))?;
    d.set_item("client_last_data", c.milestones.client_last_data_ns.get().map(epoch))?;
    d.set_item("server_first_data", c.milestones.server_data_ns.get().map(epoch))?;
    d.set_item("server_last_data", c.milestones.server_last_data_ns.get().map(epoch))?;
    d.set_item("client_closed", c.milestones.client_closed_ns.get().map(epoch))?;
    match c.milestones.server_closed() {
        Some(close) => {
            let closed = PyDict::new(py);
            closed.set_item("file", close.at.file)?;
            closed.set_item("frame", close.at.frame)?;
            closed.set_item("time", epoch(close.time_ns))?;
            d.set_item("server_closed", closed)?;
        }
        None => d.set_item("server_closed", py.None())?,
    }
    d.set_item("duplicates", c.duplicates)?;
    d.set_item("vlan", pyo3::types::PyTuple::new(py, link::vlan_list(c.vlan))?)?;
    d.set_item("added_latency", seconds(v.added_latency_ns))?;
    match c.milestones.first_rst() {
        Some(r) => {
            let reset = PyDict::new(py);
            reset.set_item("from", r.from.name())?;
            reset.set_item("file", r.at.file)?;
            reset.set_item("frame", r.at.frame)?;
            reset.set_item("time", epoch(r.time_ns))?;
            reset.set_item("answers", r.answers.map_or("nothing", |a| a.slug()))?;
            reset.set_item("after", r.after_ns.map(epoch))?;
            match r.answers_frame {
                Some(f) => {
                    let frame = PyDict::new(py);
                    frame.set_item("file", f.file)?;
                    frame.set_item("frame", f.frame)?;
                    reset.set_item("answers_frame", frame)?;
                }
                None => reset.set_item("answers_frame", py.None())?,
            }
            d.set_item("reset", reset)?;
        }
        None => d.set_item("reset", py.None())?,
    }
    let send = |t: &detect::TimedSend| shapes.send.call1((t.at.file, t.at.frame, epoch(t.time_ns), t.interval_ns.map(seconds)));
    let mut series = Vec::with_capacity(v.series.len());
    for s in &v.series {
        let (Some(first), Some(last)) = (s.sends.first(), s.sends.last()) else { continue };
        let second = s.sends.get(1).map(send).transpose()?;
        let timed_retries = s.sends.iter().skip(1).filter(|t| !t.triggered).count();
        let args = (s.kind.slug(), s.from.name(), s.schedule.slug(), s.sends.len(), timed_retries, epoch(first.time_ns), second, send(last)?);
        series.push(shapes.series.call1(args)?);
    }
    d.set_item("series", pyo3::types::PyTuple::new(py, series)?)?;
    d.set_item("icmp", python_value(py, &json::icmp_value(c))?)?;
    d.set_item("black_hole", python_value(py, &json::black_hole_value(c))?)?;
    Ok(d)
}

/// "10.0.0.2:9000" or "[2001:db8::2]:9000", as the endpoints are written.
fn parse_endpoint(text: &str) -> PyResult<crate::flow::Endpoint> {
    let addr: std::net::SocketAddr =
        text.parse().map_err(|_| pyo3::exceptions::PyValueError::new_err(format!("not an endpoint: {text}")))?;
    Ok(crate::flow::Endpoint { ip: addr.ip(), port: addr.port() })
}

/// An error of `annotate::write_annotated` as Python sees it: an input that would not open or
/// broke off is a CaptureError, the rest an OSError about the output.
fn annotate_error(e: io::Error, output: &std::path::Path) -> PyErr {
    if let Some(stopped) = e.get_ref().and_then(|inner| inner.downcast_ref::<crate::output::annotate::InputStopped>()) {
        return CaptureError::new_err((stopped.to_string(), stopped.stop.kind(), stopped.path.clone()));
    }
    if let Some(read) = e.get_ref().and_then(|inner| inner.downcast_ref::<crate::reader::ReadError>()) {
        return errors::capture_error(read);
    }
    pyo3::exceptions::PyOSError::new_err((e.raw_os_error().unwrap_or(0), e.to_string(), output.to_path_buf()))
}

/// The named tuples of `pcapq.lean`.
pub(crate) struct LeanShapes<'py> {
    send: Bound<'py, PyAny>,
    series: Bound<'py, PyAny>,
}

impl<'py> LeanShapes<'py> {
    fn import(py: Python<'py>) -> PyResult<LeanShapes<'py>> {
        let module = py.import("pcapq.lean")?;
        Ok(LeanShapes { send: module.getattr("Send")?, series: module.getattr("Series")? })
    }
}

/// A JSON value as the Python object `json.loads` would make of it.
fn python_value<'py>(py: Python<'py>, value: &serde_json::Value) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::IntoPyObjectExt;
    Ok(match value {
        serde_json::Value::Null => py.None().into_bound(py),
        serde_json::Value::Bool(b) => b.into_bound_py_any(py)?,
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(u) => u.into_bound_py_any(py)?,
            None => n.as_f64().unwrap_or(f64::NAN).into_bound_py_any(py)?,
        },
        serde_json::Value::String(s) => s.into_bound_py_any(py)?,
        serde_json::Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(python_value(py, item)?)?;
            }
            list.into_any()
        }
        serde_json::Value::Object(fields) => {
            let d = PyDict::new(py);
            for (k, v) in fields {
                d.set_item(k, python_value(py, v)?)?;
            }
            d.into_any()
        }
    })
}

/// Adapts a Python text file object (`.write(str)`) to `io::Write`, in 1 MiB chunks. The
/// exception of a failed write is kept in `error`; `io::Error` carries only that it failed.
struct PyTextWriter<'py> {
    file: Bound<'py, PyAny>,
    buffer: Vec<u8>,
    error: Option<PyErr>,
}

impl PyTextWriter<'_> {
    /// Writes out the buffer up to `len` bytes (a character boundary).
    fn send(&mut self, len: usize) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let chunk = self.buffer.get(..len).unwrap_or_default();
        let text = std::str::from_utf8(chunk).map_err(io::Error::other)?;
        let result = self.file.call_method1("write", (text,));
        self.buffer.drain(..len);
        if let Err(e) = result {
            self.error = Some(e);
            return Err(io::Error::other("the file object's write() raised"));
        }
        Ok(())
    }
}

impl Write for PyTextWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(buf);
        if self.buffer.len() >= CHUNK {
            // Up to the last ASCII byte: always a character boundary in UTF-8.
            let cut = self.buffer.iter().rposition(|b| b.is_ascii()).map_or(0, |i| i + 1);
            self.send(cut)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send(self.buffer.len())
    }
}

/// Reads the captures in `paths` (in order, as one capture; "-" is stdin) and rebuilds every
/// TCP connection. `keep_connections` keeps every connection's record (off, finished
/// connections are only counted: memory follows the live ones); `keep_events` keeps the events
/// of the connections kept (without `keep_connections`, of those with a problem); `mergeable`
/// keeps what `Analysis.merge` needs to join this analysis onto the one of the capture before
/// (without `keep_connections`: the records of connections live at the end or able to join the
/// capture before, counted when the analysis is first read). `max_connections` (0: no limit)
/// caps the connections live at once: beyond it the longest idle are finalised early, counted in
/// a warning. Without `keep_connections`, `max_kept_problems` records of problem connections are
/// kept whole (for examples; None: 20,000), the others in short form (the findings count them).
/// `progress`, when given, is called with the bytes of capture records read so far,
/// every few MiB and once at the end; an exception it raises is raised once the reading ends.
/// Raises CaptureError if a file cannot be opened or is not a capture.
#[pyfunction]
#[pyo3(signature = (paths, *, keep_connections = true, keep_events = true, mergeable = false, max_connections = 0, max_kept_problems = None, progress = None))]
#[allow(clippy::too_many_arguments)]
fn analyze(
    py: Python<'_>,
    paths: Vec<String>,
    keep_connections: bool,
    keep_events: bool,
    mergeable: bool,
    max_connections: usize,
    max_kept_problems: Option<usize>,
    progress: Option<PyObject>,
) -> PyResult<Analysis> {
    let options = analyze_options(keep_connections, keep_events, mergeable, max_connections, max_kept_problems);
    let mut raised: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        catch(|| {
            let mut report = |bytes: u64| {
                // The GIL is taken only for the call, every few MiB.
                if let (Some(callback), None) = (&progress, &raised) {
                    raised = Python::with_gil(|py| callback.call1(py, (bytes,)).err());
                }
            };
            analysis::analyze_with_progress(&paths, options, &mut report)
        })
    })?;
    if let Some(e) = raised {
        return Err(e);
    }
    match result {
        Ok(inner) => Ok(Analysis::of(inner)),
        Err(e) => Err(errors::capture_error(&e)),
    }
}

/// `max_kept_problems` None: the default cap (`MAX_KEPT_WITH_PROBLEMS`).
fn analyze_options(keep_connections: bool, keep_events: bool, mergeable: bool, max_live: usize, max_kept_problems: Option<usize>) -> AnalyzeOptions {
    let max_kept_problems = max_kept_problems.unwrap_or(MAX_KEPT_WITH_PROBLEMS);
    AnalyzeOptions { tracker: TrackerOptions { keep_events, mergeable, keep_connections, max_live, max_kept_problems } }
}

/// Analyses each file of `paths` on its own as a mergeable part (`analyze([path],
/// mergeable=True, ...)`), on `jobs` threads (0: one per core) with the GIL released;
/// `progress(index, bytes)` as `analyze`'s, for the file `paths[index]`. Returns
/// the parts in the order of `paths`, to be joined with `Analysis.merge`. Raises CaptureError
/// for the first file (in order) that cannot be opened or is not a capture.
#[pyfunction]
#[pyo3(signature = (paths, *, jobs = 0, keep_connections = true, keep_events = true, max_connections = 0, max_kept_problems = None, progress = None))]
#[allow(clippy::too_many_arguments)]
fn analyze_parts(
    py: Python<'_>,
    paths: Vec<String>,
    jobs: usize,
    keep_connections: bool,
    keep_events: bool,
    max_connections: usize,
    max_kept_problems: Option<usize>,
    progress: Option<PyObject>,
) -> PyResult<Vec<Analysis>> {
    let options = analyze_options(keep_connections, keep_events, true, max_connections, max_kept_problems);
    run_reporting(py, progress, |report| analysis::analyze_parts_with_progress(&paths, options, jobs, report))
}

/// Runs `work` with the GIL released, passing it the reporter of `progress`; the analyses as
/// Python objects, the first CaptureError, or the exception `progress` raised.
fn run_reporting(
    py: Python<'_>,
    progress: Option<PyObject>,
    work: impl FnOnce(&(dyn Fn(usize, u64) + Sync)) -> Vec<Result<analysis::Analysis, crate::reader::ReadError>> + Send,
) -> PyResult<Vec<Analysis>> {
    let reporter = ProgressReporter::new(progress);
    let results = py.allow_threads(|| catch(|| work(&|i, b| reporter.report(i, b))))?;
    reporter.finish()?;
    results.into_iter().map(|r| r.map(Analysis::of).map_err(|e| errors::capture_error(&e))).collect()
}

/// A Python progress callback `progress(index, bytes)` called from the threads reading
/// captures; the first exception it raises stops further calls and is raised at the end.
struct ProgressReporter {
    callback: Option<PyObject>,
    raised: std::sync::Mutex<Option<PyErr>>,
}

impl ProgressReporter {
    fn new(callback: Option<PyObject>) -> ProgressReporter {
        ProgressReporter { callback, raised: std::sync::Mutex::new(None) }
    }

    fn report(&self, index: usize, bytes: u64) {
        let Some(callback) = &self.callback else { return };
        let mut raised = self.raised.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if raised.is_none() {
            // The GIL is taken only for the call, every few MiB of each capture.
            *raised = Python::with_gil(|py| callback.call1(py, (index, bytes)).err());
        }
    }

    fn finish(self) -> PyResult<()> {
        match self.raised.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner()) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// Analyses several captures, each a list of files read in order as one capture (as
/// `analyze` does), on `jobs` threads (0: one per core) with the GIL released;
/// `progress(index, bytes)` as `analyze`'s, for `captures[index]`. Returns the
/// analyses in order. With `spill_dir`, every connection is counted as it finishes and its
/// record handed to a temporary file in that directory (unlinked at once), instead of being
/// kept in memory: `write_json` and `write_parquet` read them from there (`keep_connections`
/// is then off). Raises CaptureError for the first capture (in order) with a file that cannot
/// be opened or is not a capture.
#[pyfunction]
#[pyo3(signature = (captures, *, jobs = 0, keep_connections = true, keep_events = true, max_connections = 0, progress = None, spill_dir = None))]
#[allow(clippy::too_many_arguments)]
fn analyze_many(
    py: Python<'_>,
    captures: Vec<Vec<String>>,
    jobs: usize,
    keep_connections: bool,
    keep_events: bool,
    max_connections: usize,
    progress: Option<PyObject>,
    spill_dir: Option<std::path::PathBuf>,
) -> PyResult<Vec<Analysis>> {
    let options = analyze_options(keep_connections, keep_events, false, max_connections, None);
    run_reporting(py, progress, |report| match &spill_dir {
        Some(dir) => analysis::analyze_captures_spilled(&captures, options, jobs, report, dir),
        None => analysis::analyze_captures_with_progress(&captures, options, jobs, report),
    })
}

/// Writes the Parquet tables (docs/parquet.md) of `points`, each `(analysis, capture point name,
/// findings)` with its findings as the JSON document's `findings` array in precedence order
/// (a connection that several findings list gets the cause of the first). `target` is the
/// connections file, or with `directory` the directory that gets `connections.parquet`,
/// `events.parquet` and `findings.parquet`. Each analysis must hold every connection (kept,
/// or handed to a sink with `spill_dir`).
///
/// Raises:
///     ValueError: an analysis kept only the connections with a problem, or the findings are not
///         a JSON array of findings.
///     OSError: a file could not be written.
#[pyfunction]
#[pyo3(signature = (target, points, *, directory = false))]
fn write_parquet(py: Python<'_>, target: std::path::PathBuf, points: Vec<(Py<Analysis>, String, String)>, directory: bool) -> PyResult<()> {
    use crate::output::parquet;
    let mut analyses: Vec<PyRefMut<'_, Analysis>> = points.iter().map(|(a, _, _)| a.try_borrow_mut(py)).collect::<Result<_, _>>()?;
    let mut tables = Vec::with_capacity(points.len());
    for (analysis, (_, name, findings)) in analyses.iter_mut().zip(&points) {
        analysis.settle();
        if !analysis.inner.has_every_connection() {
            return Err(pyo3::exceptions::PyValueError::new_err("this analysis kept only the connections with a problem"));
        }
        let findings: Vec<parquet::Finding> =
            serde_json::from_str(findings).map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("findings: {e}")))?;
        // The proxy log's line of each connection (`note_connections`).
        let proxy_logs = analysis
            .notes
            .iter()
            .filter_map(|(&id, fields)| Some((id, serde_json::from_value(fields.get("proxy_log")?.clone()).ok()?)))
            .collect();
        tables.push(parquet::Point { analysis: &mut analysis.inner, name: name.clone(), findings, proxy_logs });
    }
    let where_to = if directory { parquet::Target::Directory(&target) } else { parquet::Target::File(&target) };
    let written = catch(|| parquet::write(&mut tables, where_to))?;
    written.map_err(|e| pyo3::exceptions::PyOSError::new_err((e.raw_os_error().unwrap_or(0), e.to_string(), target.clone())))
}

/// The core's words, for the Python side and its stub (tests/test_vocabulary.py checks both).
fn vocabulary(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use crate::detect::{facts::Fact, schedule::Schedule, Outcome, SeriesKind, Symptom};
    use crate::flow::{EventKind, PacketRole};
    let d = PyDict::new(py);
    d.set_item("outcomes", Outcome::ALL.iter().map(|o| o.slug()).collect::<Vec<_>>())?;
    d.set_item("failed_outcomes", Outcome::ALL.iter().filter(|o| o.is_failure()).map(|o| o.slug()).collect::<Vec<_>>())?;
    d.set_item("symptoms", Symptom::ALL.iter().map(|s| s.slug()).collect::<Vec<_>>())?;
    d.set_item("facts", Fact::ALL.iter().map(|f| f.slug()).collect::<Vec<_>>())?;
    let rules = PyDict::new(py);
    for f in Fact::ALL {
        rules.set_item(f.slug(), f.rule())?;
    }
    d.set_item("fact_rules", rules)?;
    d.set_item("marks", detect::marks::NAMES.to_vec())?;
    d.set_item("event_kinds", EventKind::ALL.iter().map(|e| e.slug()).collect::<Vec<_>>())?;
    d.set_item("schedules", Schedule::SLUGS.to_vec())?;
    d.set_item("series_kinds", SeriesKind::ALL.iter().map(|k| k.slug()).collect::<Vec<_>>())?;
    d.set_item("packet_roles", PacketRole::ALL.iter().map(|r| r.slug()).collect::<Vec<_>>())?;
    d.set_item("log_kinds", join::kinds())?;
    d.set_item("log_shapes", join::shapes())?;
    d.set_item("icmp_kinds", crate::decode::icmp::IcmpKind::ALL.iter().map(|k| k.slug()).collect::<Vec<_>>())?;
    // The ICMP kinds each fact stands for, in `Fact::ALL` order.
    let icmp_facts = PyDict::new(py);
    for fact in Fact::ALL {
        let kinds: Vec<&str> = crate::decode::icmp::IcmpKind::ALL
            .iter()
            .filter(|k| detect::facts::icmp_fact(k.class()) == Some(fact))
            .map(|k| k.slug())
            .collect();
        if !kinds.is_empty() {
            icmp_facts.set_item(fact.slug(), kinds)?;
        }
    }
    d.set_item("icmp_facts", icmp_facts)?;
    d.set_item("live_signs", crate::watch::SIGNS.iter().map(|s| s.slug()).collect::<Vec<_>>())?;
    d.set_item("episode_events", crate::watch::EpisodeEventKind::ALL.iter().map(|k| k.slug()).collect::<Vec<_>>())?;
    d.set_item("reset_answers", crate::watch::metrics::RESET_ANSWERS.to_vec())?;
    d.set_item("metric_buckets", crate::watch::metrics::BUCKETS.to_vec())?;
    d.set_item("signs", detect::checks::Sign::ALL.iter().map(|s| s.slug()).collect::<Vec<_>>())?;
    let checks = detect::checks::Check::ALL;
    d.set_item("checks", checks.iter().map(|c| c.slug()).collect::<Vec<_>>())?;
    let texts = PyDict::new(py);
    for c in checks {
        let (held, failed) = c.sentences();
        let t = PyDict::new(py);
        t.set_item("cites", c.cites())?;
        t.set_item("held", held)?;
        t.set_item("failed", failed)?;
        t.set_item("competes", c.vetoes())?;
        t.set_item("signs", c.signs().iter().map(|s| s.slug()).collect::<Vec<_>>())?;
        texts.set_item(c.slug(), t)?;
    }
    d.set_item("check_texts", texts)?;
    Ok(d)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("JSON_SCHEMA_VERSION", json::SCHEMA_VERSION)?;
    m.add_class::<Analysis>()?;
    m.add_class::<diagnosis::Problems>()?;
    m.add_class::<diagnosis::Episode>()?;
    m.add_class::<diagnosis::Selection>()?;
    m.add("VOCABULARY", vocabulary(m.py())?)?;
    m.add_function(wrap_pyfunction!(analyze, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_parts, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_many, m)?)?;
    m.add_function(wrap_pyfunction!(write_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(paths::align_points, m)?)?;
    m.add("PARQUET_SCHEMA_VERSION", crate::output::parquet::SCHEMA_VERSION)?;
    m.add_class::<live::LiveInput>()?;
    m.add_function(wrap_pyfunction!(live::analyze_stdin, m)?)?;
    m.add("PcapqError", m.py().get_type::<PcapqError>())?;
    m.add("CaptureError", m.py().get_type::<CaptureError>())?;
    m.add("InternalError", m.py().get_type::<InternalError>())?;
    Ok(())
}
