//! One analysis: read the inputs in order, decode, track, and keep what reports need.
//!
//! Inputs given together are one capture: the tracker's state carries from one file to the next,
//! so a connection that spans a file boundary stays one connection.

use crate::decode::{self, Segment, Skip};
use crate::flow::store::table::FlowTable;
use crate::census::{Census, Tally, Timeline};
use crate::detect::{probes::OneSynTally, servers::{PortPressure, ServerStats}};
use crate::flow::store::spill::Spill;
use crate::flow::store::{ConnectionStore, Finished};
use crate::decode::icmp::IcmpMessage;
use crate::flow::icmp::{IcmpMatch, IcmpSummary};
use crate::flow::{merge, Connection, FrameRef, SegmentKey, Tracker, TrackerOptions};
use crate::reader::{CaptureNotes, CaptureReader, Format, ReadError, ReadStop};
use crate::watch::Watch;

#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct AnalyzeOptions {
    pub tracker: TrackerOptions,
}

/// What one input file held and how reading it ended.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct FileReport {
    pub path: String,
    pub format: Option<Format>,
    pub gzip: bool,
    pub packets: u64,
    pub tcp_segments: u64,
    pub sections: u32,
    pub interfaces: u32,
    pub first_time_ns: Option<i64>,
    pub last_time_ns: Option<i64>,
    pub time_went_backwards: u64,
    /// (LINKTYPE, packets), in order of first appearance.
    pub link_types: Vec<(u32, u64)>,
    pub stop: ReadStop,
    /// What a pcapng file says about itself, its strings made safe to show.
    pub notes: Option<CaptureNotes>,
}

/// Counts of frames that were not usable TCP segments, by reason.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct SkipCounts {
    counts: Vec<(Skip, u64)>,
}

impl SkipCounts {
    pub fn add(&mut self, skip: Skip, n: u64) {
        match self.counts.iter_mut().find(|(s, _)| *s == skip) {
            Some((_, count)) => *count += n,
            None => self.counts.push((skip, n)),
        }
    }

    /// Counts by reason slug, sorted by slug; unknown link types fold into one reason.
    pub fn by_reason(&self) -> Vec<(&'static str, &'static str, u64)> {
        let mut out: Vec<(&'static str, &'static str, u64)> = Vec::new();
        for (skip, n) in &self.counts {
            match out.iter_mut().find(|(slug, _, _)| *slug == skip.slug()) {
                Some((_, _, count)) => *count += n,
                None => out.push((skip.slug(), skip.meaning(), *n)),
            }
        }
        out.sort();
        out
    }

    /// Link types that could not be decoded, with their packet counts, sorted.
    pub fn unknown_link_types(&self) -> Vec<(u32, u64)> {
        let mut out: Vec<(u32, u64)> =
            self.counts.iter().filter_map(|(s, n)| if let Skip::UnknownLinkType(t) = s { Some((*t, *n)) } else { None }).collect();
        out.sort();
        out
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    pub fn merge(&mut self, other: &SkipCounts) {
        for (skip, n) in &other.counts {
            self.add(*skip, *n);
        }
    }
}

/// The result of analysing one capture (one or more time-adjacent files).
#[derive(Default, serde::Serialize, serde::Deserialize)]
pub struct Analysis {
    pub files: Vec<FileReport>,
    /// Every connection in order of its first packet (`keep_connections` on), or only those
    /// with a problem (off).
    pub connections: Vec<Connection>,
    /// With `keep_connections` off: every connection, counted as it finished (empty when
    /// every record is kept: `census()` counts the records then)...
    pub counted: Census,
    /// ...and how many connections with a problem were counted and not kept whole (the census
    /// has their seeds: `Census::digest`).
    pub not_kept: u64,
    /// With `keep_connections` on: the census of the records, made when first asked for.
    #[serde(skip)]
    census_of_records: std::sync::OnceLock<Census>,
    /// Tracker state of the connections still remembered when the input ended (what a merge
    /// with the next capture continues from).
    pub live: FlowTable,
    /// With `keep_connections` off and `mergeable` on: the records not counted yet (live at
    /// the end, or able to join the capture before), in order of id. `settle` counts them.
    pub open: Vec<Connection>,
    /// The id the next connection would get.
    pub next_id: u64,
    /// Connections finalised early because more than `max_live` were live at once.
    pub evicted: u64,
    pub skipped: SkipCounts,
    pub options: AnalyzeOptions,
    /// ICMP errors: by kind, and how many were tied to a connection.
    pub icmp: IcmpSummary,
    /// Every connection's record, from the sink the run handed them to when they were counted
    /// (`analyze_captures_spilled`); not kept when the analysis is merged or serialised.
    #[serde(skip)]
    pub spill: Option<Spill>,
    /// A run that kept a window of capture time (`pcapq watch --keep`): the census and the
    /// records are the window's; this has what it covers and the totals since the start.
    #[serde(skip)]
    pub window: Option<WindowTotals>,
}

/// What a run with a window of capture time covers (`flow::store::window`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowTotals {
    /// Every connection counted since the first segment.
    pub all_time: Tally,
    /// The first segment's time.
    pub first_ns: i64,
    /// Where the window begins.
    pub from_ns: i64,
    /// The window asked for.
    pub keep_ns: i64,
}

/// Counts over the whole capture, for the summary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub packets: u64,
    pub tcp_segments: u64,
    pub skipped: u64,
    pub connections: Tally,
}

impl Analysis {
    /// Joins the analysis of the capture that came right after this one (analysed with
    /// `mergeable` on): files are appended, connections spanning the boundary become one.
    /// Both must keep every record, or neither; one that does not keep every record must not
    /// have been settled (read) yet.
    pub fn merge(self, later: Analysis) -> Result<Analysis, String> {
        let (mine, theirs) = (self.options.tracker, later.options.tracker);
        if mine.keep_connections != theirs.keep_connections {
            return Err("an analysis that kept every connection cannot be merged with one that did not".into());
        }
        if !theirs.mergeable {
            return Err("the later analysis was not made mergeable".into());
        }
        if !mine.keep_connections && !self.is_open() {
            return Err("the earlier analysis was not made mergeable, or was already read (merge before reading)".into());
        }
        if !later.is_open() && !theirs.keep_connections {
            return Err("the later analysis was already read (merge before reading)".into());
        }
        if mine.keep_connections {
            self.merge_records(later)
        } else {
            Ok(self.merge_folded(later))
        }
    }

    /// Whether this analysis can still continue into a later one: it keeps every record, or
    /// it was made mergeable and not settled.
    fn is_open(&self) -> bool {
        self.options.tracker.mergeable
    }

    fn merge_records(self, later: Analysis) -> Result<Analysis, String> {
        let file_offset = self.files.len() as u32;
        let base = self.connections.len() as u64;
        let mut tracker = Tracker::<Census>::resume(self.options.tracker, self.connections, self.live);
        let later_tracked = merge::Tracked { connections: later.connections, live: later.live };
        merge::join(&mut tracker, later_tracked, file_offset, base);
        let (finished, live) = tracker.finish();
        let mut files = self.files;
        files.extend(later.files);
        let mut skipped = self.skipped;
        skipped.merge(&later.skipped);
        let next_id = finished.connections.len() as u64;
        let evicted = self.evicted + later.evicted;
        Ok(Analysis {
            files,
            connections: finished.connections,
            live,
            next_id,
            evicted,
            skipped,
            options: self.options,
            icmp: { let mut icmp = self.icmp; icmp.merge(&later.icmp); icmp },
            ..Analysis::default()
        })
    }

    /// Merges analyses that counted finished connections instead of keeping them: the open
    /// records are joined as records are, the counts are added, and what the later analysis
    /// kept (connections with a problem, tombstones) is renumbered.
    fn merge_folded(self, later: Analysis) -> Analysis {
        let file_offset = self.files.len() as u32;
        let end_ns = self.end_ns().max(later.end_ns());
        let earlier = Finished { connections: self.connections, census: self.counted, not_kept: self.not_kept, open: self.open, next_id: self.next_id, spill: None, covered: None };
        let base = earlier.next_id;
        let store = ConnectionStore::resume_folded(earlier, true, self.options.tracker.max_kept_problems);
        // Replayed segments must not start prefixes of their own.
        let replay = TrackerOptions { mergeable: false, ..self.options.tracker };
        let mut tracker = Tracker::resume_with(replay, store, self.live);
        let later_tracked = merge::Tracked { connections: later.open, live: later.live };
        let (ids, dropped) = merge::join(&mut tracker, later_tracked, file_offset, base);

        let mut problems = later.connections;
        for conn in &mut problems {
            merge::renumber(conn, &ids, file_offset);
        }
        let mut counted = later.counted;
        counted.digest.renumber(|id| ids.merged(id), file_offset);
        tracker.store.census_mut().add(counted);
        tracker.store.absorb_problems(problems, later.not_kept, end_ns);
        tracker.store.set_next_id(ids.next_id(later.next_id));
        tracker.table.adopt_tombstones(dropped, |id| ids.merged(id));
        // No merge can join these records to an earlier capture any more: count what is done.
        tracker.store.forget_prefixes();
        tracker.table.settle(&mut tracker.store, end_ns);
        let referenced: std::collections::HashSet<usize> = tracker.table.live_slots().collect();
        for slot in tracker.store.used_slots() {
            if !referenced.contains(&slot) {
                tracker.store.fold(slot, end_ns);
            }
        }
        let (finished, live) = tracker.finish();

        let mut files = self.files;
        files.extend(later.files);
        let mut skipped = self.skipped;
        skipped.merge(&later.skipped);
        let mut icmp = self.icmp;
        icmp.merge(&later.icmp);
        let mut merged = Analysis::of_run(files, finished, live, self.evicted + later.evicted, skipped, self.options);
        merged.icmp = icmp;
        merged
    }

    /// What a tracker left (`Tracker::finish`) over `files`.
    fn of_run(files: Vec<FileReport>, finished: Finished<Census>, live: FlowTable, evicted: u64, skipped: SkipCounts, options: AnalyzeOptions) -> Analysis {
        // Only a mergeable run's table is read again (by the merge).
        let live = if options.tracker.mergeable { live } else { live.counts_only() };
        Analysis {
            files,
            connections: finished.connections,
            counted: finished.census,
            not_kept: finished.not_kept,
            census_of_records: std::sync::OnceLock::new(),
            live,
            open: finished.open,
            next_id: finished.next_id,
            evicted,
            skipped,
            options,
            icmp: IcmpSummary::default(),
            spill: finished.spill,
            window: finished.covered.map(|c| WindowTotals { all_time: c.all_time.tally, first_ns: c.first_ns, from_ns: c.from_ns, keep_ns: c.keep_ns }),
        }
    }

    /// Counts the open records of an analysis that did not keep every record, as if its
    /// capture ended here. Afterwards it cannot be merged with a later one.
    pub fn settle(&mut self) {
        if self.options.tracker.keep_connections || !self.options.tracker.mergeable {
            return;
        }
        let end_ns = self.end_ns();
        let finished = Finished {
            connections: std::mem::take(&mut self.connections),
            census: std::mem::take(&mut self.counted),
            not_kept: self.not_kept,
            open: std::mem::take(&mut self.open),
            next_id: self.next_id,
            spill: self.spill.take(),
            covered: None,
        };
        let mut store = ConnectionStore::resume_folded(finished, false, self.options.tracker.max_kept_problems);
        store.forget_prefixes();
        let settled = store.finish(end_ns, &mut Vec::new());
        self.connections = settled.connections;
        self.counted = settled.census;
        self.not_kept = settled.not_kept;
        self.spill = settled.spill;
        self.live = FlowTable::default();
        self.options.tracker.mergeable = false;
    }

    /// When the capture ends: its latest packet.
    pub fn end_ns(&self) -> i64 {
        self.files.iter().filter_map(|f| f.last_time_ns).max().unwrap_or(0)
    }

    /// Whether `connections` holds every connection (else only those with a problem).
    pub fn keeps_every_connection(&self) -> bool {
        self.options.tracker.keep_connections
    }

    /// Whether `for_each_connection` sees every connection: the run kept every record, or
    /// handed them all to a sink.
    pub fn has_every_connection(&self) -> bool {
        self.keeps_every_connection() || self.spill.is_some()
    }

    /// Calls `each` with every connection in order of id: from the sink the run handed them to,
    /// or the records kept (only those with a problem unless `keeps_every_connection`). What the
    /// writers of every connection (JSON, Parquet) read.
    pub fn for_each_connection(&mut self, mut each: impl FnMut(&Connection) -> std::io::Result<()>) -> std::io::Result<()> {
        match &mut self.spill {
            Some(spill) => spill.for_each(each),
            None => self.connections.iter().try_for_each(&mut each),
        }
    }

    /// Every connection counted: as each finished, or, when every record is kept, from the
    /// records (once, when first asked for). The summary, the per-second timeline and the
    /// per-server statistics all come from here.
    pub fn census(&self) -> &Census {
        if self.keeps_every_connection() {
            self.census_of_records.get_or_init(|| Census::of_records(&self.connections, self.end_ns()))
        } else {
            &self.counted
        }
    }

    pub fn summary(&self) -> Summary {
        Summary {
            packets: self.files.iter().map(|f| f.packets).sum(),
            tcp_segments: self.files.iter().map(|f| f.tcp_segments).sum(),
            skipped: self.skipped.total(),
            connections: self.census().tally,
        }
    }

    /// Per-second counts over every connection.
    pub fn timeline(&self) -> Timeline {
        self.census().timeline.clone()
    }

    /// The census, to be changed in place (made first from the records when every one is kept).
    fn census_mut(&mut self) -> &mut Census {
        if self.keeps_every_connection() {
            self.census();
            if let Some(census) = self.census_of_records.get_mut() {
                return census;
            }
        }
        &mut self.counted
    }

    /// Sorts the per-server moments in place, which `servers()`' queries need.
    pub fn sort_servers(&mut self) {
        self.census_mut().servers.sort_moments();
    }

    /// Per server endpoint, in order of address; `sort_servers` first.
    pub fn servers(&self) -> Vec<&ServerStats> {
        self.census().servers.stats()
    }

    /// One server's statistics; `sort_servers` first.
    pub fn server(&self, server: &crate::flow::Endpoint) -> Option<&ServerStats> {
        self.census().servers.get(server)
    }

    /// Connections that were one client SYN and nothing more (a SYN flood, a port scan).
    pub fn one_syn(&self) -> OneSynTally {
        self.census().servers.one_syn().clone()
    }

    /// Per (client address, server endpoint), the most source ports held at once.
    pub fn port_pressure(&self) -> Vec<PortPressure> {
        self.census().servers.port_pressure()
    }

    /// Sentences about anything that makes the result less than complete.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.files {
            if let Some(why) = f.stop.describe() {
                out.push(format!("{}: {why}", shown(&f.path)));
            }
            if f.time_went_backwards > 0 {
                let (packets, have, them) = if f.time_went_backwards == 1 { ("packet", "has", "it") } else { ("packets", "have", "them") };
                out.push(format!(
                    "{}: {} {packets} {have} an earlier timestamp than the packet before {them}; events are kept in file order",
                    shown(&f.path),
                    f.time_went_backwards
                ));
            }
        }
        if self.evicted > 0 {
            out.push(format!(
                "{} connections were finalised early, the longest idle first, to keep at most {} live at once (--max-connections); a later packet of one of them starts a new, partial connection",
                self.evicted, self.options.tracker.max_live
            ));
        }
        if self.not_kept > 0 {
            let digest = &self.counted.digest;
            let merged = match digest.merged_within_ns() {
                0 => String::new(),
                ns => format!("; alike ones within {} s were merged, so a finding lists one id for several", ns / 1_000_000_000),
            };
            out.push(format!(
                "{} more connections with a problem than the {} records kept: the findings count them, their examples and the worst connections come from the records kept{merged}",
                self.not_kept,
                self.options.tracker.max_kept_problems
            ));
        }
        if self.live.retired_early > 0 {
            out.push(format!(
                "{} half-open connections were set aside early, more than {} being open at once (a SYN flood or a scan); \
                 they are counted, and a late packet of theirs still finds them",
                self.live.retired_early,
                crate::flow::store::table::MAX_LIVE_FLOWS
            ));
        }
        if self.live.forgotten_early > 0 {
            out.push(format!(
                "{} half-open connections were forgotten early, more than {} being remembered at once; a late packet of theirs starts a new connection",
                self.live.forgotten_early,
                crate::flow::store::table::MAX_TOMBSTONES
            ));
        }
        if self.live.finished_forgotten_early > 0 {
            out.push(format!(
                "{} finished connections were forgotten before 120 s had passed, more than {} being remembered at once \
                 (over 3,333 new connections a second); a later packet on one of their 4-tuples starts a new connection, \
                 not linked to the one before",
                self.live.finished_forgotten_early,
                crate::flow::store::table::MAX_TOMBSTONES
            ));
        }
        let lengths = &self.counted.servers.flow_lengths;
        if let Some(limit) = lengths.trimmed_at() {
            out.push(format!(
                "the capture looks cut to the first {limit} frames of each flow: {} connections stop unclosed at that count and none is longer; \
                 nothing is claimed of what did not follow in them",
                lengths.unclosed_at_longest
            ));
        }
        for (linktype, n) in self.skipped.unknown_link_types() {
            out.push(format!("{n} packets of link type {linktype} ({}) were not decoded", CaptureReader::linktype_name(linktype)));
        }
        out
    }
}

/// A pcap record header's size (pcapng's is larger): what `progress` adds per packet.
const RECORD_HEADER_BYTES: u64 = 16;

/// Serialised analyses (`Analysis::to_bytes`) start with this.
const PART_MAGIC: &[u8; 8] = b"PCAPQPRT";
/// The layout of the serialised analysis; bumped whenever a serialised type changes.
pub const PART_FORMAT: u16 = 3;

impl Analysis {
    /// The analysis as bytes, for another process to merge: `PART_MAGIC`, `PART_FORMAT`
    /// (u16, little-endian), the pcapq version (one length byte, then UTF-8), then the
    /// analysis in postcard's compact binary form.
    pub fn to_bytes(&self) -> Result<Vec<u8>, String> {
        let version = env!("CARGO_PKG_VERSION").as_bytes();
        let mut out = Vec::with_capacity(64 * 1024);
        out.extend_from_slice(PART_MAGIC);
        out.extend_from_slice(&PART_FORMAT.to_le_bytes());
        out.push(version.len() as u8);
        out.extend_from_slice(version);
        postcard::to_io(self, &mut out).map_err(|e| e.to_string())?;
        Ok(out)
    }

    /// Reads what `to_bytes` wrote. Fails with a sentence on anything else, or on bytes
    /// written by a pcapq with another `PART_FORMAT`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Analysis, String> {
        let not_ours = || "not a serialised pcapq analysis".to_string();
        let rest = bytes.strip_prefix(PART_MAGIC.as_slice()).ok_or_else(not_ours)?;
        let (format, rest) = rest.split_first_chunk::<2>().ok_or_else(not_ours)?;
        let (len, rest) = rest.split_first().ok_or_else(not_ours)?;
        let (version, body) = rest.split_at_checked(usize::from(*len)).ok_or_else(not_ours)?;
        let format = u16::from_le_bytes(*format);
        if format != PART_FORMAT {
            return Err(format!(
                "this analysis was serialised by pcapq {} (format {format}); this is pcapq {} (format {PART_FORMAT}): run the same pcapq version everywhere",
                String::from_utf8_lossy(version),
                env!("CARGO_PKG_VERSION")
            ));
        }
        postcard::from_bytes(body).map_err(|e| format!("damaged serialised analysis: {e}"))
    }
}

fn shown(path: &str) -> &str {
    if path == "-" {
        "standard input"
    } else {
        path
    }
}

/// Analyses the files in order as one capture. Fails only if a file cannot be opened or is not
/// a capture; damage inside a file stops reading that file and is reported in its `FileReport`.
pub fn analyze(paths: &[String], options: AnalyzeOptions) -> Result<Analysis, ReadError> {
    analyze_with_progress(paths, options, &mut |_| {})
}

/// How often `analyze_with_progress` reports: every this many bytes of records read.
pub const PROGRESS_EVERY_BYTES: u64 = 4 << 20;

/// `analyze`, calling `progress(bytes)` every `PROGRESS_EVERY_BYTES` and once at the end with
/// the bytes of capture records read so far over all files (record headers plus captured data,
/// after decompression).
pub fn analyze_with_progress(paths: &[String], options: AnalyzeOptions, progress: &mut dyn FnMut(u64)) -> Result<Analysis, ReadError> {
    let readers = paths.iter().map(|path| CaptureReader::open(path).map(|reader| (path.clone(), reader)));
    analyze_readers(readers, options, progress)
}

/// `analyze_with_progress` over readers already made (each with the name its file is reported
/// under), opened one at a time as the iterator yields them.
pub fn analyze_readers(
    readers: impl IntoIterator<Item = Result<(String, CaptureReader), ReadError>>,
    options: AnalyzeOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<Analysis, ReadError> {
    analyze_readers_on(readers, options, progress, two_threads(), None, None, None)
}

/// `analyze_readers` on one live stream (standard input, or a file tcpdump is writing).
/// Watched (`pcapq watch`), each segment is tracked as soon as it is read, on this thread, and
/// what it changed goes to `watch` at once. With `spill_dir`, as `analyze_captures_spilled`:
/// every connection goes to a sink there as it is counted, not kept in memory. With `keep_ns`
/// (and records not all kept), the analysis covers the connections counted in the last
/// `keep_ns` of capture time, with the totals since the start in `Analysis::window`
/// (`flow::store::window`).
pub fn analyze_live(
    reader: Result<(String, CaptureReader), ReadError>,
    options: AnalyzeOptions,
    watch: Option<&std::sync::Mutex<Watch>>,
    spill_dir: Option<&std::path::Path>,
    keep_ns: Option<i64>,
) -> Result<Analysis, ReadError> {
    let options = if spill_dir.is_some() { spilling(options) } else { options };
    let two_threads = watch.is_none() && keep_ns.is_none() && two_threads();
    analyze_readers_on(std::iter::once(reader), options, &mut |_| {}, two_threads, watch, spill_dir, keep_ns)
}

/// Whether one capture is read on two threads: reading and decoding on one, tracking on the
/// other. Worth it when a second core is there; `PCAPQ_ONE_THREAD` in the environment says no
/// (bench/run.py times both).
fn two_threads() -> bool {
    std::env::var_os("PCAPQ_ONE_THREAD").is_none() && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
}

/// Segments decoded per batch handed from the reading thread to the tracking one: enough to
/// make the hand-over rare, few enough (about 100 KiB) to stay in the cache between the two.
const BATCH_LEN: usize = 1024;
/// On one thread a batch only needs to be small enough to stay in the first-level cache
/// between decoding and tracking (about 5 KiB).
const ONE_THREAD_BATCH_LEN: usize = 64;
/// Batches on their way at once.
const BATCHES_IN_FLIGHT: usize = 4;

/// A decoded segment with its flow key (`SegmentKey::of`, worked out on the reading thread), its
/// frame number and time.
struct Decoded {
    segment: Segment,
    keyed: SegmentKey,
    frame: u64,
    time_ns: i64,
}

/// Decoded segments of one file, in file order, and the record bytes they came from.
#[derive(Default)]
struct Batch {
    segments: Vec<Decoded>,
    /// ICMP errors, each with the number of segments before it in this batch.
    icmp: Vec<(usize, IcmpMessage, u64, i64)>,
    bytes: u64,
}

/// What reading one file gave besides its segments.
struct FileRead {
    stop: ReadStop,
    tcp_segments: u64,
    link_types: Vec<(u32, u64)>,
}

/// Reads every packet of `reader`, counts link types and what is not TCP, and calls `on_batch`
/// with the segments decoded, `batch_len` at a time (`batch` is reused once it returns).
fn read_file(reader: &mut CaptureReader, skipped: &mut SkipCounts, batch_len: usize, mut on_batch: impl FnMut(&mut Batch)) -> FileRead {
    let mut tcp_segments = 0u64;
    let mut link_types: Vec<(u32, u64)> = Vec::new();
    let mut batch = Batch { segments: Vec::with_capacity(batch_len), icmp: Vec::new(), bytes: 0 };
    let stop = reader.for_each_packet(|packet| {
        batch.bytes += RECORD_HEADER_BYTES + packet.data.len() as u64;
        match link_types.iter_mut().find(|(t, _)| *t == packet.linktype) {
            Some((_, n)) => *n += 1,
            None => link_types.push((packet.linktype, 1)),
        }
        match decode::decode(packet.linktype, packet.data) {
            Ok(segment) => {
                tcp_segments += 1;
                let keyed = SegmentKey::of(&segment);
                batch.segments.push(Decoded { segment, keyed, frame: packet.frame, time_ns: packet.time_ns });
                if batch.segments.len() >= batch_len {
                    on_batch(&mut batch);
                }
            }
            // Only IP protocols other than TCP are looked at again, for ICMP errors.
            Err(Skip::NotTcp) => match decode::icmp::decode(packet.linktype, packet.data) {
                Some(message) => batch.icmp.push((batch.segments.len(), message, packet.frame, packet.time_ns)),
                None => skipped.add(Skip::NotTcp, 1),
            },
            Err(skip) => skipped.add(skip, 1),
        }
    });
    on_batch(&mut batch);
    FileRead { stop, tcp_segments, link_types }
}

/// `read_file` on a thread of its own, handing the batches to `on_batch` on this one.
fn read_file_beside(reader: &mut CaptureReader, skipped: &mut SkipCounts, mut on_batch: impl FnMut(&mut Batch)) -> FileRead {
    use std::sync::mpsc;
    let (full_tx, full_rx) = mpsc::sync_channel::<Batch>(BATCHES_IN_FLIGHT);
    let (empty_tx, empty_rx) = mpsc::channel::<Batch>();
    std::thread::scope(|scope| {
        let reading = scope.spawn(move || {
            read_file(reader, skipped, BATCH_LEN, |batch| {
                let next = empty_rx.try_recv().unwrap_or_else(|_| Batch { segments: Vec::with_capacity(BATCH_LEN), icmp: Vec::new(), bytes: 0 });
                // The tracking side hangs up only when it panicked; the panic is raised below.
                let _ = full_tx.send(std::mem::replace(batch, next));
            })
        });
        for mut batch in full_rx {
            on_batch(&mut batch);
            let _ = empty_tx.send(batch);
        }
        match reading.join() {
            Ok(read) => read,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// Feeds decoded segments of file `file` to the tracker; when watched, hands what each changed
/// to `watch` at once. `windowed`: the store counts by slice of capture time (`flow::store::window`).
fn track_segments(tracker: &mut Tracker<Census>, segments: &[Decoded], file: u32, watch: Option<&std::sync::Mutex<Watch>>, windowed: bool) {
    for Decoded { segment, keyed, frame, time_ns } in segments {
        if windowed {
            tracker.tick(*time_ns);
        }
        tracker.on_keyed_segment(segment, keyed, FrameRef { file, frame: *frame }, *time_ns);
        if let Some(watch) = watch {
            hand_to_watch(tracker, watch, *time_ns);
        }
    }
}

/// What the segment at `time_ns` changed, and the connections that left the hot table, to the
/// watch. Out of line: the loop above stays as small when nothing is watched.
#[inline(never)]
fn hand_to_watch(tracker: &mut Tracker<Census>, watch: &std::sync::Mutex<Watch>, time_ns: i64) {
    // Poisoned only by a panic while counting on this thread, which ends the run anyway.
    let mut watch = watch.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    watch.seen(time_ns);
    for change in tracker.take_changes() {
        watch.note(&change);
    }
    for (conn, at_ns) in tracker.store.take_ends() {
        watch.ended(&conn, at_ns);
    }
}

/// An ICMP error the tracker tied to a connection (`tied`), to the watch's metrics.
#[cold]
fn icmp_to_watch(watch: &std::sync::Mutex<Watch>, message: &IcmpMessage, tied: IcmpMatch) {
    if let IcmpMatch::Tied(side) = tied {
        if let Some(server) = crate::watch::metrics::icmp_listener(message, side) {
            watch.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).icmp(server, message.kind);
        }
    }
}

fn analyze_readers_on(
    readers: impl IntoIterator<Item = Result<(String, CaptureReader), ReadError>>,
    options: AnalyzeOptions,
    progress: &mut dyn FnMut(u64),
    two_threads: bool,
    watch: Option<&std::sync::Mutex<Watch>>,
    spill_dir: Option<&std::path::Path>,
    keep_ns: Option<i64>,
) -> Result<Analysis, ReadError> {
    let mut read_bytes = 0u64;
    let mut next_report = PROGRESS_EVERY_BYTES;
    let mut tracker: Tracker<Census> = Tracker::new(options.tracker);
    if watch.is_some() {
        tracker.note_changes();
    }
    // Watched, a segment must not wait in a batch for more to arrive.
    let batch_len = if watch.is_some() { 1 } else { ONE_THREAD_BATCH_LEN };
    if let Some(dir) = spill_dir {
        tracker.store.spill_to(Spill::create(dir));
    }
    if let Some(keep_ns) = keep_ns {
        tracker.store.keep_window(keep_ns);
    }
    let windowed = keep_ns.is_some();
    if two_threads && watch.is_none() && !windowed {
        // Reading waits for tracking: the census's books go on a third thread.
        tracker.store.census_mut().count_beside();
    }
    let mut files = Vec::new();
    let mut skipped = SkipCounts::default();
    let mut icmp = IcmpSummary::default();
    for (index, opened) in readers.into_iter().enumerate() {
        let (path, mut reader) = opened?;
        let file = index as u32;
        let track = |batch: &mut Batch| {
            // ICMP errors go in at their place among the segments (before the one at `before`).
            let mut from = 0;
            for (before, message, frame, time_ns) in &batch.icmp {
                let upto = (*before).clamp(from, batch.segments.len());
                track_segments(&mut tracker, &batch.segments[from..upto], file, watch, windowed);
                from = upto;
                let tied = tracker.on_icmp(message, FrameRef { file, frame: *frame }, *time_ns);
                icmp.count(message.kind, tied);
                if let Some(watch) = watch {
                    icmp_to_watch(watch, message, tied);
                }
            }
            track_segments(&mut tracker, &batch.segments[from..], file, watch, windowed);
            batch.icmp.clear();
            read_bytes += batch.bytes;
            if read_bytes >= next_report {
                progress(read_bytes);
                next_report = read_bytes + PROGRESS_EVERY_BYTES;
            }
            batch.segments.clear();
            batch.bytes = 0;
        };
        let read = if two_threads { read_file_beside(&mut reader, &mut skipped, track) } else { read_file(&mut reader, &mut skipped, batch_len, track) };
        let info = &reader.info;
        if let (Some(watch), Some(dropped)) = (watch, info.dropped) {
            watch.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).add_dropped(dropped);
        }
        files.push(FileReport {
            path,
            format: info.format,
            gzip: info.gzip,
            packets: info.records,
            tcp_segments: read.tcp_segments,
            sections: info.sections,
            interfaces: info.interfaces,
            first_time_ns: info.first_time_ns,
            last_time_ns: info.last_time_ns,
            time_went_backwards: info.time_went_backwards,
            link_types: read.link_types,
            stop: read.stop,
            notes: info.notes.clone(),
        });
    }
    progress(read_bytes);
    if let Some(watch) = watch {
        watch.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).end_input(tracker.connections());
    }
    let evicted = tracker.evicted;
    let (mut finished, live) = tracker.finish();
    finished.census.join_beside();
    let mut analysis = Analysis::of_run(files, finished, live, evicted, skipped, options);
    analysis.icmp = icmp;
    Ok(analysis)
}

/// Analyses several captures, each a list of files read in order as one capture (as `analyze`
/// does), on `jobs` threads (0: one per core). Results come back in the order of `captures`.
pub fn analyze_captures(captures: &[Vec<String>], options: AnalyzeOptions, jobs: usize) -> Vec<Result<Analysis, ReadError>> {
    analyze_captures_with_progress(captures, options, jobs, &|_, _| {})
}

/// `analyze_captures`, calling `progress(index, bytes)` as `analyze_with_progress` does for
/// `captures[index]`, from whichever thread reads it.
pub fn analyze_captures_with_progress(
    captures: &[Vec<String>],
    options: AnalyzeOptions,
    jobs: usize,
    progress: &(dyn Fn(usize, u64) + Sync),
) -> Vec<Result<Analysis, ReadError>> {
    analyze_captures_on(captures, options, jobs, progress, None)
}

/// `analyze_captures_with_progress` without keeping every record in memory: each capture hands
/// its connections, as they are counted, to a sink in a temporary file in `spill_dir`
/// (`Analysis::spill`), from which the writers of every connection read them in order.
/// Only the records of problem connections are kept in memory, and the run is not mergeable
/// (`spilling`).
pub fn analyze_captures_spilled(
    captures: &[Vec<String>],
    options: AnalyzeOptions,
    jobs: usize,
    progress: &(dyn Fn(usize, u64) + Sync),
    spill_dir: &std::path::Path,
) -> Vec<Result<Analysis, ReadError>> {
    analyze_captures_on(captures, spilling(options), jobs, progress, Some(spill_dir))
}

/// `options` for a run whose records go to a spill: none kept in memory but those with a
/// problem, and not mergeable (the spill takes a record when it is counted, which a mergeable
/// run does later, or never: `ConnectionStore::spill_to`).
fn spilling(options: AnalyzeOptions) -> AnalyzeOptions {
    AnalyzeOptions { tracker: TrackerOptions { keep_connections: false, mergeable: false, ..options.tracker } }
}

fn analyze_captures_on(
    captures: &[Vec<String>],
    options: AnalyzeOptions,
    jobs: usize,
    progress: &(dyn Fn(usize, u64) + Sync),
    spill_dir: Option<&std::path::Path>,
) -> Vec<Result<Analysis, ReadError>> {
    use rayon::prelude::*;
    // Several captures at once keep the cores busy already: each is read on one thread.
    let beside = captures.len() == 1 && two_threads();
    let one = |(index, paths): (usize, &Vec<String>)| {
        let readers = paths.iter().map(|path| CaptureReader::open(path).map(|reader| (path.clone(), reader)));
        analyze_readers_on(readers, options, &mut |bytes| progress(index, bytes), beside, None, spill_dir, None)
    };
    let run = || captures.par_iter().enumerate().map(one).collect();
    match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
        Ok(pool) => pool.install(run),
        // No threads to be had: one after the other.
        Err(_) => captures.iter().enumerate().map(one).collect(),
    }
}

/// Analyses each file on its own, as a mergeable part, on up to `jobs` threads (0: one per
/// core). Results come back in the order of `paths`.
pub fn analyze_parts(paths: &[String], options: AnalyzeOptions, jobs: usize) -> Vec<Result<Analysis, ReadError>> {
    analyze_parts_with_progress(paths, options, jobs, &|_, _| {})
}

/// `analyze_parts`, calling `progress(index, bytes)` for the file `paths[index]`.
pub fn analyze_parts_with_progress(
    paths: &[String],
    options: AnalyzeOptions,
    jobs: usize,
    progress: &(dyn Fn(usize, u64) + Sync),
) -> Vec<Result<Analysis, ReadError>> {
    let options = AnalyzeOptions { tracker: TrackerOptions { mergeable: true, ..options.tracker } };
    let one_each: Vec<Vec<String>> = paths.iter().map(|p| vec![p.clone()]).collect();
    analyze_captures_with_progress(&one_each, options, jobs, progress)
}

#[cfg(test)]
mod tests {
    use super::*;

    // --- serialised analyses ---

    #[test]
    fn test_to_bytes_round_trip_keeps_counts_and_files() {
        let mut a = Analysis { next_id: 3, evicted: 2, ..Analysis::default() };
        a.counted.tally.connections = 3;
        a.files.push(FileReport {
            path: "ring.pcap1".into(),
            format: Some(Format::Pcap),
            gzip: false,
            packets: 10,
            tcp_segments: 9,
            sections: 1,
            interfaces: 1,
            first_time_ns: Some(1),
            last_time_ns: Some(2),
            time_went_backwards: 0,
            link_types: vec![(1, 10)],
            stop: ReadStop::End,
            notes: None,
        });
        let back = Analysis::from_bytes(&a.to_bytes().unwrap()).unwrap();
        assert_eq!(back.summary(), a.summary());
        assert_eq!((back.next_id, back.evicted, back.files[0].path.as_str()), (3, 2, "ring.pcap1"));
    }

    #[test]
    fn test_from_bytes_other_format_names_both_versions() {
        let mut bytes = Analysis::default().to_bytes().unwrap();
        bytes[8] = 7;
        let err = Analysis::from_bytes(&bytes).err().unwrap();
        assert!(err.contains("(format 7)") && err.contains("(format 3)"), "{err}");
        assert_eq!(Analysis::from_bytes(b"PCAPQ").err().unwrap(), "not a serialised pcapq analysis");
    }

    // --- two threads and three ---

    /// The shipped captures read on one thread and on two (the census's books on a third):
    /// the same analysis, byte for byte, whether every record is kept or only those with a
    /// problem, with their events or without.
    #[test]
    fn test_threads_change_nothing() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("captures");
        let mut paths: Vec<String> = std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).map(|e| e.path().display().to_string()).filter(|p| p.ends_with(".pcap")).collect();
        paths.sort();
        assert!(paths.len() >= 10, "{paths:?}");
        for (keep_connections, keep_events) in [(false, false), (false, true), (true, true)] {
            let options = AnalyzeOptions { tracker: TrackerOptions { keep_events, keep_connections, ..Default::default() } };
            for path in &paths {
                let run = |two_threads: bool| {
                    let reader = CaptureReader::open(path).map(|r| (path.clone(), r));
                    let a = analyze_readers_on(std::iter::once(reader), options, &mut |_| {}, two_threads, None, None, None).unwrap();
                    a.to_bytes().unwrap()
                };
                assert!(run(false) == run(true), "{path} (keep_connections {keep_connections}, keep_events {keep_events})");
            }
        }
    }
}
