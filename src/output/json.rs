//! The JSON document (schema in docs/json.md). Version 1; later versions only add fields.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use crate::analysis::{Analysis, FileReport, Summary};
use crate::decode::{flags, link};
use crate::detect::{self, Series};
use crate::flow::connection::HandshakeOptions;
use crate::flow::icmp::{IcmpAnswer, IcmpSummary};
use crate::census::Tally;
use crate::flow::{Connection, Detail, Event, FrameRef, Side};
use crate::reader::{CaptureNotes, CaptureReader};

pub const SCHEMA_NAME: &str = "pcapq.analysis";
pub const SCHEMA_VERSION: u32 = 1;

/// A duration in seconds.
pub(super) fn seconds(ns: i64) -> f64 {
    ns as f64 / 1e9
}

/// A point in time as Unix epoch seconds, rounded to the microsecond: an f64 cannot hold
/// nanoseconds at today's epoch, and rounding first keeps the printed number short and exact.
pub(crate) fn epoch(ns: i64) -> f64 {
    let us = ns.div_euclid(1000) + i64::from(ns.rem_euclid(1000) >= 500);
    us as f64 / 1e6
}

/// TCP flags the way tcpdump prints them: F S R P U W E, then "." for ACK.
pub fn flags_text(bits: u8) -> String {
    let mut out = String::with_capacity(8);
    for (bit, letter) in [
        (flags::FIN, 'F'),
        (flags::SYN, 'S'),
        (flags::RST, 'R'),
        (flags::PSH, 'P'),
        (flags::URG, 'U'),
        (flags::CWR, 'W'),
        (flags::ECE, 'E'),
        (flags::ACK, '.'),
    ] {
        if bits & bit != 0 {
            out.push(letter);
        }
    }
    if out.is_empty() {
        out.push_str("none");
    }
    out
}

#[derive(Serialize)]
struct Document<'a> {
    schema: &'static str,
    schema_version: u32,
    pcapq_version: &'static str,
    captures: Vec<CaptureView<'a>>,
    summary: SummaryView,
    skipped: BTreeMap<&'static str, u64>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct CaptureView<'a> {
    path: &'a str,
    format: Option<&'static str>,
    gzip: bool,
    packets: u64,
    tcp_segments: u64,
    sections: u32,
    interfaces: u32,
    first_time: Option<f64>,
    last_time: Option<f64>,
    link_types: BTreeMap<String, u64>,
    read_stop: &'static str,
    read_stop_detail: Option<String>,
    /// What a pcapng file says about itself; null for classic pcap.
    pcapng: Option<NotesView<'a>>,
}

#[derive(Serialize)]
struct NotesView<'a> {
    hardware: Option<&'a str>,
    os: Option<&'a str>,
    application: Option<&'a str>,
    comments: &'a [String],
    interfaces: Vec<InterfaceView<'a>>,
    packet_comments: Vec<PacketCommentView<'a>>,
    packet_comments_total: u64,
}

#[derive(Serialize)]
struct InterfaceView<'a> {
    name: Option<&'a str>,
    description: Option<&'a str>,
    link_type: String,
}

#[derive(Serialize)]
struct PacketCommentView<'a> {
    frame: u64,
    comment: &'a str,
}

impl<'a> NotesView<'a> {
    fn of(n: &'a CaptureNotes) -> NotesView<'a> {
        NotesView {
            hardware: n.hardware.as_deref(),
            os: n.os.as_deref(),
            application: n.application.as_deref(),
            comments: &n.comments,
            interfaces: n
                .interfaces
                .iter()
                .map(|i| InterfaceView {
                    name: i.name.as_deref(),
                    description: i.description.as_deref(),
                    link_type: CaptureReader::linktype_name(i.linktype),
                })
                .collect(),
            packet_comments: n.packet_comments.iter().map(|(frame, comment)| PacketCommentView { frame: *frame, comment }).collect(),
            packet_comments_total: n.packet_comments_total,
        }
    }
}

impl<'a> CaptureView<'a> {
    fn of(f: &'a FileReport) -> CaptureView<'a> {
        CaptureView {
            path: &f.path,
            format: f.format.map(|x| x.name()),
            gzip: f.gzip,
            packets: f.packets,
            tcp_segments: f.tcp_segments,
            sections: f.sections,
            interfaces: f.interfaces,
            first_time: f.first_time_ns.map(epoch),
            last_time: f.last_time_ns.map(epoch),
            link_types: f.link_types.iter().map(|(t, n)| (CaptureReader::linktype_name(*t), *n)).collect(),
            read_stop: f.stop.kind(),
            read_stop_detail: f.stop.describe(),
            pcapng: f.notes.as_ref().map(NotesView::of),
        }
    }
}

#[derive(Serialize)]
pub struct SummaryView {
    pub packets: u64,
    pub tcp_segments: u64,
    pub skipped: u64,
    #[serde(flatten)]
    pub connections: Tally,
    /// ICMP errors in the capture; absent when there were none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icmp: Option<IcmpSummaryView>,
    /// A watch with a window of capture time (`--keep`): the counts above are the window's,
    /// these every connection's since the watch began; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub all_time: Option<AllTimeView>,
}

#[derive(Serialize)]
pub struct AllTimeView {
    /// The first packet's time (Unix seconds).
    pub since: f64,
    /// Where the window of the report begins (Unix seconds), and the window asked for.
    pub window_start: f64,
    pub keep_seconds: f64,
    #[serde(flatten)]
    pub connections: Tally,
}

#[derive(Serialize)]
pub struct IcmpSummaryView {
    pub total: u64,
    /// Tied to a connection and the packet they answered.
    pub tied: u64,
    /// Quoting a TCP 4-tuple with no connection in the capture.
    pub no_connection: u64,
    /// Quoting a sequence number outside its connection's window (Linux ignores those too).
    pub out_of_window: u64,
    /// Quoting fewer than 8 bytes of TCP.
    pub truncated: u64,
    /// Quoting UDP or another protocol, or nothing readable.
    pub not_tcp: u64,
    pub by_kind: BTreeMap<&'static str, u64>,
}

impl IcmpSummaryView {
    pub fn of(s: &IcmpSummary) -> Option<IcmpSummaryView> {
        (s.total() > 0).then(|| IcmpSummaryView {
            total: s.total(),
            tied: s.tied,
            no_connection: s.no_connection,
            out_of_window: s.out_of_window,
            truncated: s.truncated,
            not_tcp: s.not_tcp,
            by_kind: s.by_slug().into_iter().collect(),
        })
    }
}

/// One ICMP error that answered a packet of the connection.
#[derive(Serialize)]
struct IcmpView {
    file: u32,
    frame: u64,
    time: f64,
    /// Seconds from the connection's first packet.
    offset: f64,
    /// Who sent it: the peer's host, or a router or firewall on the way.
    sender: String,
    kind: &'static str,
    meaning: &'static str,
    mtu: Option<u32>,
    /// Whose packet it answers, that packet's relative sequence number, IP length and DF bit.
    answers: &'static str,
    answers_role: Option<&'static str>,
    answers_frame: Option<FrameView>,
    seq: Option<u32>,
    quoted_len: u32,
    dont_fragment: bool,
    /// What a Linux connect() fails with when this answers the SYN (null: it does not fail).
    errno: Option<u16>,
    errno_text: Option<&'static str>,
}

fn icmp_view(c: &Connection, a: &IcmpAnswer) -> IcmpView {
    let errno = a.kind.connect_errno(a.sender.is_ipv6());
    IcmpView {
        file: a.at.file,
        frame: a.at.frame,
        time: epoch(a.time_ns),
        offset: seconds(a.time_ns - c.first_time_ns),
        sender: a.sender.to_string(),
        kind: a.kind.slug(),
        meaning: a.kind.meaning(),
        mtu: a.mtu,
        answers: a.answers.name(),
        answers_role: a.answers_role.map(|r| r.slug()),
        answers_frame: a.answers_frame.map(FrameView::from),
        seq: c.base_seq[a.answers.index()].map(|base| a.seq.wrapping_sub(base)),
        quoted_len: a.quoted_len,
        dont_fragment: a.dont_fragment,
        errno: errno.map(|e| e.0),
        errno_text: errno.map(|e| e.1),
    }
}

impl From<Summary> for SummaryView {
    fn from(s: Summary) -> Self {
        SummaryView { packets: s.packets, tcp_segments: s.tcp_segments, skipped: s.skipped, connections: s.connections, icmp: None, all_time: None }
    }
}

#[derive(Serialize)]
struct ConnectionView {
    id: u64,
    client: String,
    server: String,
    ip_version: u8,
    /// VLAN IDs, outer first; only for a connection captured on a VLAN.
    #[serde(skip_serializing_if = "Option::is_none")]
    vlan: Option<Vec<u16>>,
    partial: bool,
    follows: Option<u64>,
    /// Seconds from the last packet of the connection it follows to its first.
    follows_after: Option<f64>,
    state: &'static str,
    first_file: u32,
    first_frame: u64,
    first_time: f64,
    last_time: f64,
    duration: f64,
    isn: SidePair<Option<u32>>,
    handshake: HandshakeView,
    sides: SidePair<SideView>,
    snaplen_cut: u32,
    /// Frames that were copies of the frame before them; only when there were some.
    #[serde(skip_serializing_if = "Option::is_none")]
    duplicates: Option<u32>,
    outcome: &'static str,
    symptoms: Vec<&'static str>,
    /// The checks of a sign's explanations (detect::checks) that held and failed; absent when
    /// the connection showed no sign they weigh.
    #[serde(skip_serializing_if = "Option::is_none")]
    checks: Option<ChecksView>,
    /// When the client first sent data, the server first acknowledged it, and first answered.
    request: RequestView,
    /// The first RST, if any.
    reset: Option<ResetView>,
    /// Seconds the retransmissions cost (docs/diagnosis.md).
    added_latency: f64,
    series: Vec<SeriesView>,
    events: Vec<EventView>,
    events_dropped: u32,
    /// ICMP errors that answered its packets; absent when none did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    icmp: Vec<IcmpView>,
}

#[derive(Serialize)]
struct ChecksView {
    held: Vec<&'static str>,
    failed: Vec<&'static str>,
}

fn checks_view(c: &Connection) -> Option<ChecksView> {
    use crate::detect::checks::{self, Check};
    let k = checks::of(c);
    (!k.is_empty()).then(|| ChecksView {
        held: Check::ALL.iter().filter(|&&x| k.held(x)).map(|x| x.slug()).collect(),
        failed: Check::ALL.iter().filter(|&&x| k.failed(x)).map(|x| x.slug()).collect(),
    })
}

#[derive(Serialize)]
struct RequestView {
    sent: Option<f64>,
    acked: Option<f64>,
    answered: Option<f64>,
}

#[derive(Serialize)]
struct ResetView {
    from: &'static str,
    file: u32,
    frame: u64,
    time: f64,
    answers: &'static str,
    answers_frame: Option<FrameView>,
    after: Option<f64>,
}

#[derive(Serialize)]
struct SeriesView {
    kind: &'static str,
    from: &'static str,
    /// Relative sequence number, for data.
    seq: Option<u32>,
    schedule: &'static str,
    sends: Vec<SendView>,
}

#[derive(Serialize)]
struct SendView {
    file: u32,
    frame: u64,
    time: f64,
    /// Seconds since the previous send.
    interval: Option<f64>,
    /// Seconds the schedule predicts for that interval.
    expected: Option<f64>,
    /// interval - expected.
    deviation: Option<f64>,
    triggered: bool,
}

fn series_view(c: &Connection, s: &Series) -> SeriesView {
    let base = c.base_seq[s.from.index()];
    SeriesView {
        kind: s.kind.slug(),
        from: s.from.name(),
        seq: s.seq.zip(base).map(|(seq, base)| seq.wrapping_sub(base)),
        schedule: s.schedule.slug(),
        sends: s
            .sends
            .iter()
            .map(|t| SendView {
                file: t.at.file,
                frame: t.at.frame,
                time: epoch(t.time_ns),
                interval: t.interval_ns.map(seconds),
                expected: t.expected_ns.map(seconds),
                deviation: t.interval_ns.zip(t.expected_ns).map(|(i, e)| seconds(i - e)),
                triggered: t.triggered,
            })
            .collect(),
    }
}

#[derive(Serialize)]
struct SidePair<T> {
    client: T,
    server: T,
}

#[derive(Serialize)]
struct HandshakeView {
    completed: bool,
    syn_attempts: u32,
    synack_attempts: u32,
    syn_time: Option<f64>,
    synack_time: Option<f64>,
    ack_time: Option<f64>,
    /// First SYN to the handshake ACK, seconds.
    duration: Option<f64>,
}

#[derive(Serialize)]
struct SideView {
    packets: u64,
    payload_bytes: u64,
    data_retransmits: u32,
    dup_acks: u32,
    zero_windows: u32,
    unseen_segments: u32,
    fin: bool,
    rst: bool,
    options: Option<OptionsView>,
}

#[derive(Serialize)]
struct OptionsView {
    mss: Option<u16>,
    window_scale: Option<u8>,
    sack_permitted: bool,
    timestamps: bool,
}

impl From<HandshakeOptions> for OptionsView {
    fn from(o: HandshakeOptions) -> Self {
        OptionsView { mss: o.mss, window_scale: o.window_scale, sack_permitted: o.sack_permitted, timestamps: o.timestamps }
    }
}

#[derive(Serialize)]
struct EventView {
    file: u32,
    frame: u64,
    time: f64,
    /// Seconds since the connection's first packet.
    offset: f64,
    kind: &'static str,
    from: &'static str,
    flags: String,
    seq: Option<u32>,
    ack: Option<u32>,
    len: u32,
    win: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    original: Option<FrameView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since_previous: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after_handshake_ack: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dup_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dup_of: Option<FrameView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answers: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answers_frame: Option<FrameView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<f64>,
}

#[derive(Serialize)]
struct FrameView {
    file: u32,
    frame: u64,
}

impl From<FrameRef> for FrameView {
    fn from(f: FrameRef) -> Self {
        FrameView { file: f.file, frame: f.frame }
    }
}

/// The event's sequence and acknowledgment numbers relative to each side's ISN, as Wireshark
/// shows them (the ACK number only when the ACK flag is set).
pub(super) fn relative_seq_ack(c: &Connection, e: &Event) -> (Option<u32>, Option<u32>) {
    let seq = c.base_seq[e.from.index()].map(|base| e.seq.wrapping_sub(base));
    let ack = if e.flags & flags::ACK != 0 { c.base_seq[e.from.other().index()].map(|base| e.ack.wrapping_sub(base)) } else { None };
    (seq, ack)
}

fn event_view(c: &Connection, e: &Event) -> EventView {
    let (seq, ack) = relative_seq_ack(c, e);
    let mut v = EventView {
        file: e.at.file,
        frame: e.at.frame,
        time: epoch(e.time_ns),
        offset: seconds(e.time_ns - c.first_time_ns),
        kind: e.kind.slug(),
        from: e.from.name(),
        flags: flags_text(e.flags),
        seq,
        ack,
        len: e.len,
        win: e.window,
        attempt: None,
        original: None,
        since_previous: None,
        after_handshake_ack: None,
        dup_count: None,
        dup_of: None,
        answers: None,
        answers_frame: None,
        after: None,
    };
    match e.detail {
        Detail::None => {}
        Detail::Attempt { attempt, original, since_previous_ns, after_handshake_ack } => {
            v.attempt = Some(attempt);
            v.original = original.map(FrameView::from);
            v.since_previous = since_previous_ns.map(seconds);
            v.after_handshake_ack = Some(after_handshake_ack);
        }
        Detail::DupAck { count, of } => {
            v.dup_count = Some(count);
            v.dup_of = Some(of.into());
        }
        Detail::Rst { answers, answers_frame, after_ns } => {
            v.answers = Some(answers.map_or("nothing", |r| r.slug()));
            v.answers_frame = answers_frame.map(FrameView::from);
            v.after = after_ns.map(seconds);
        }
    }
    v
}

fn side_view(c: &Connection, side: Side) -> SideView {
    let d = &c.counts[side.index()];
    SideView {
        packets: d.packets,
        payload_bytes: d.payload_bytes,
        data_retransmits: d.data_retransmits,
        dup_acks: d.dup_acks,
        zero_windows: d.zero_windows,
        unseen_segments: d.unseen_before,
        fin: d.fin,
        rst: d.rst,
        options: c.options[side.index()].map(OptionsView::from),
    }
}

fn connection_view(c: &Connection, end_ns: i64) -> ConnectionView {
    let verdict = detect::judge(c, end_ns);
    ConnectionView {
        id: c.id,
        client: c.client.to_string(),
        server: c.server.to_string(),
        ip_version: if c.client.ip.is_ipv4() { 4 } else { 6 },
        vlan: (c.vlan != 0).then(|| link::vlan_list(c.vlan)),
        partial: c.partial,
        follows: c.follows,
        follows_after: c.follows_after_ns.get().map(seconds),
        state: c.state.slug(),
        first_file: c.first.file,
        first_frame: c.first.frame,
        first_time: epoch(c.first_time_ns),
        last_time: epoch(c.last_time_ns),
        duration: seconds(c.last_time_ns - c.first_time_ns),
        isn: SidePair {
            client: if c.syn_count > 0 { c.base_seq[0] } else { None },
            server: if c.synack_count > 0 { c.base_seq[1] } else { None },
        },
        handshake: HandshakeView {
            completed: c.handshake_completed(),
            syn_attempts: c.syn_count,
            synack_attempts: c.synack_count,
            syn_time: c.syn_time_ns.get().map(epoch),
            synack_time: c.synack_time_ns.get().map(epoch),
            ack_time: c.handshake_ack_time_ns.get().map(epoch),
            duration: c.handshake_duration_ns().map(seconds),
        },
        sides: SidePair { client: side_view(c, Side::Client), server: side_view(c, Side::Server) },
        snaplen_cut: c.snaplen_cut,
        duplicates: (c.duplicates > 0).then_some(c.duplicates),
        outcome: verdict.outcome.slug(),
        symptoms: verdict.symptoms.iter().map(|s| s.slug()).collect(),
        checks: checks_view(c),
        request: RequestView {
            sent: c.milestones.client_data_ns.get().map(epoch),
            acked: c.milestones.client_data_acked_ns.get().map(epoch),
            answered: c.milestones.server_data_ns.get().map(epoch),
        },
        reset: c.milestones.first_rst().map(|r| ResetView {
            from: r.from.name(),
            file: r.at.file,
            frame: r.at.frame,
            time: epoch(r.time_ns),
            answers: r.answers.map_or("nothing", |a| a.slug()),
            answers_frame: r.answers_frame.map(FrameView::from),
            after: r.after_ns.map(seconds),
        }),
        added_latency: seconds(verdict.added_latency_ns),
        series: verdict.series.iter().map(|s| series_view(c, s)).collect(),
        events: c.events.iter().map(|e| event_view(c, e)).collect(),
        events_dropped: c.events_dropped,
        icmp: c.icmp_answers().iter().map(|a| icmp_view(c, a)).collect(),
    }
}

/// One connection as a JSON value, for a capture that ends at `end_ns`.
pub fn connection_value(c: &Connection, end_ns: i64) -> serde_json::Value {
    serde_json::to_value(connection_view(c, end_ns)).unwrap_or_default()
}

/// One connection as a JSON object, for a capture that ends at `end_ns`.
pub fn connection_json(c: &Connection, end_ns: i64) -> String {
    serde_json::to_string(&connection_view(c, end_ns)).unwrap_or_default()
}

/// The connection's ICMP answers as the JSON document shows them (`connections[].icmp`).
pub fn icmp_value(c: &Connection) -> serde_json::Value {
    let views: Vec<IcmpView> = c.icmp_answers().iter().map(|a| icmp_view(c, a)).collect();
    serde_json::to_value(views).unwrap_or_default()
}

/// The connection's path MTU black hole (detect::icmp::black_hole), or null.
pub fn black_hole_value(c: &Connection) -> serde_json::Value {
    match detect::icmp::black_hole(c) {
        Some(h) => serde_json::json!({"from": h.from.name(), "len": h.len, "ip_len": h.ip_len, "mtu": h.mtu,
                                      "frag_needed": h.frag_needed, "vanished": h.vanished,
                                      "largest_through": h.largest_through}),
        None => serde_json::Value::Null,
    }
}

/// A capture's pcapng notes as the JSON document shows them (null for classic pcap).
pub fn notes_value(f: &FileReport) -> serde_json::Value {
    f.notes.as_ref().map_or(serde_json::Value::Null, |n| serde_json::to_value(NotesView::of(n)).unwrap_or_default())
}

pub fn summary_view(a: &Analysis) -> SummaryView {
    let mut view: SummaryView = a.summary().into();
    view.icmp = IcmpSummaryView::of(&a.icmp);
    view.all_time = a.window.map(|w| AllTimeView {
        since: w.first_ns as f64 / 1e9,
        window_start: w.from_ns as f64 / 1e9,
        keep_seconds: w.keep_ns as f64 / 1e9,
        connections: w.all_time,
    });
    view
}

/// Writes the whole document. Connections are written one at a time, so memory does not grow
/// with the output. `extra` is a JSON object whose fields go in before `connections` (the
/// findings, which Python adds).
pub fn write_document<W: Write>(a: &mut Analysis, out: &mut W, pretty: bool, extra: Option<&str>) -> io::Result<()> {
    write_document_noted(a, out, pretty, extra, &Default::default())
}

/// As `write_document`, adding to each connection the fields `notes` holds for its id (what a
/// proxy's log said about it: `proxy_log`).
pub fn write_document_noted<W: Write>(
    a: &mut Analysis,
    out: &mut W,
    pretty: bool,
    extra: Option<&str>,
    notes: &rustc_hash::FxHashMap<u64, serde_json::Map<String, serde_json::Value>>,
) -> io::Result<()> {
    let doc = Document {
        schema: SCHEMA_NAME,
        schema_version: SCHEMA_VERSION,
        pcapq_version: env!("CARGO_PKG_VERSION"),
        captures: a.files.iter().map(CaptureView::of).collect(),
        summary: summary_view(a),
        skipped: a.skipped.by_reason().into_iter().map(|(slug, _, n)| (slug, n)).collect(),
        warnings: a.warnings(),
    };
    let head = if pretty { serde_json::to_vec_pretty(&doc) } else { serde_json::to_vec(&doc) }.map_err(io::Error::other)?;
    // Reopen the object to append the connections array.
    let close: &[u8] = if pretty { b"\n}" } else { b"}" };
    let head = head.strip_suffix(close).unwrap_or(&head);
    out.write_all(head)?;
    if let Some(fields) = extra.map(str::trim).and_then(|e| e.strip_prefix('{')).and_then(|e| e.strip_suffix('}')) {
        let fields = fields.trim_end();
        if !fields.trim().is_empty() {
            out.write_all(b",")?;
            out.write_all(fields.as_bytes())?;
        }
    }
    out.write_all(if pretty { b",\n  \"connections\": [" } else { b",\"connections\":[" })?;
    let end_ns = a.end_ns();
    let mut first = true;
    a.for_each_connection(|c| {
        if !std::mem::take(&mut first) {
            out.write_all(b",")?;
        }
        if let Some(fields) = notes.get(&c.id) {
            let mut value = serde_json::to_value(connection_view(c, end_ns)).map_err(io::Error::other)?;
            if let Some(object) = value.as_object_mut() {
                object.extend(fields.clone());
            }
            if pretty {
                out.write_all(b"\n    ")?;
                let text = serde_json::to_string_pretty(&value).map_err(io::Error::other)?;
                out.write_all(text.replace('\n', "\n    ").as_bytes())?;
            } else {
                serde_json::to_writer(&mut *out, &value).map_err(io::Error::other)?;
            }
        } else if pretty {
            out.write_all(b"\n    ")?;
            let text = serde_json::to_string_pretty(&connection_view(c, end_ns)).map_err(io::Error::other)?;
            out.write_all(text.replace('\n', "\n    ").as_bytes())?;
        } else {
            serde_json::to_writer(&mut *out, &connection_view(c, end_ns)).map_err(io::Error::other)?;
        }
        Ok(())
    })?;
    out.write_all(if pretty { b"\n  ]\n}\n" } else { b"]}\n" })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_flags_text_matches_tcpdump() {
        assert_eq!(flags_text(flags::SYN), "S");
        assert_eq!(flags_text(flags::SYN | flags::ACK), "S.");
        assert_eq!(flags_text(flags::PSH | flags::ACK), "P.");
        assert_eq!(flags_text(flags::FIN | flags::PSH | flags::ACK), "FP.");
        assert_eq!(flags_text(flags::RST), "R");
        assert_eq!(flags_text(0), "none");
    }

    #[test]
    fn test_epoch_rounds_to_microseconds() {
        assert_eq!(epoch(1_795_242_024_886_201_100).to_string(), "1795242024.886201");
        assert_eq!(epoch(1_795_242_024_886_201_600).to_string(), "1795242024.886202");
    }
}
