//! Joining the connections of two time-adjacent captures analysed separately.
//!
//! The later capture's analysis must have been made with `TrackerOptions::mergeable`: each of
//! its connections that could have begun earlier keeps its first `PREFIX_LEN` segments and a
//! snapshot of its record after them. A join replays those segments into the earlier
//! capture's live connection (so they are labelled with the earlier state: a SYN with the same
//! ISN becomes a retransmission, data below the earlier highest sequence a retransmission),
//! then adds what the later analysis counted after the snapshot.
//!
//! The result equals analysing both captures in one run when every connection's sequence
//! state is re-established within its prefix, which holds unless a connection re-sends data
//! from the earlier capture more than `PREFIX_LEN` segments into the later one.

use rustc_hash::FxHashMap;

use super::connection::{Connection, Milestones, RetransmitLog, Send};
use super::event::{Detail, FrameRef, Side};
use super::key::{Endpoint, FlowKey};
use super::state::Flow;
use super::store::table::{is_forgotten, FlowTable};
use super::store::Counter;
use super::track::tracker::{server_time_wait, starts_new_connection, Tracker};

/// Connections and the flow table of an analysis, as `Tracker::finish()` returns them: every
/// record (index = id), or the open records of an analysis that did not keep every record
/// (in order of id; the table refers to them by index).
pub struct Tracked {
    pub connections: Vec<Connection>,
    pub live: FlowTable,
}

/// How the later analysis's connection ids map to the merged numbering: connections joined
/// to an earlier one take its id, the others are numbered after the earlier analysis's.
pub struct IdMap {
    base: u64,
    /// (later id, merged id) of the joined connections, by later id.
    joined: Vec<(u64, u64)>,
}

impl IdMap {
    pub fn merged(&self, later_id: u64) -> u64 {
        match self.joined.binary_search_by_key(&later_id, |&(l, _)| l) {
            Ok(i) => self.joined[i].1,
            Err(i) => self.base + later_id - i as u64,
        }
    }

    /// The id after the last one, for a later analysis whose next id was `later_next`.
    pub fn next_id(&self, later_next: u64) -> u64 {
        self.base + later_next - self.joined.len() as u64
    }
}

/// Joins the connections in `later` onto the tracker of the earlier capture, whose ids end
/// before `base`. `file_offset` is the number of input files of the earlier analysis: the
/// later one's file indices move up by it. Returns the id map and the later table's tombstones
/// of records it did not keep.
pub fn join<C: Counter>(tracker: &mut Tracker<C>, later: Tracked, file_offset: u32, base: u64) -> (IdMap, FlowTable) {
    let (mut flows, dropped) = later.live.into_flows();
    for (_, flow) in &mut flows {
        flow.direction.iter_mut().for_each(|d| d.shift_files(file_offset));
    }
    let mut later_live: FxHashMap<usize, (FlowKey, Flow)> = flows.into_iter().map(|(key, flow)| (flow.slot(), (key, flow))).collect();
    let mut ids = IdMap { base, joined: Vec::new() };

    for (index, mut conn) in later.connections.into_iter().enumerate() {
        let later_id = conn.id;
        shift_files(&mut conn, file_offset);
        let key = FlowKey::new(conn.client, conn.server).with_vlan(conn.vlan);
        let live_flow = later_live.remove(&index);
        let first = conn.prefix.as_ref().and_then(|p| p.segments.first().copied());
        let earlier_flow = tracker.table.get_mut(&key, &mut tracker.store).map(|f| (f.slot(), f.last_time_ns, server_time_wait(f)));

        let joins = match (first, earlier_flow) {
            (Some(first), Some((e, last_time_ns, _))) => {
                let earlier_conn = tracker.store.get(e);
                !is_forgotten(last_time_ns, earlier_conn.state, first.time_ns)
                    && !starts_new_connection(earlier_conn, earlier_conn.side_of(Endpoint::source(&first.segment)), &first.segment)
            }
            _ => false,
        };
        let earlier_time_wait = earlier_flow.is_some_and(|(_, _, time_wait)| time_wait);
        let earlier_flow = earlier_flow.map(|(e, _, _)| e);

        if joins {
            let e = earlier_flow.unwrap_or_default();
            graft(tracker, e, key, conn, live_flow);
            ids.joined.push((later_id, tracker.store.get(e).id));
            continue;
        }

        // A new connection. If the earlier capture had one on the same 4-tuple, this replaces it.
        if let Some(previous) = conn.follows {
            conn.follows = Some(ids.merged(previous));
        }
        if let Some(e) = earlier_flow {
            if first.is_some_and(|f| {
                let earlier_conn = tracker.store.get(e);
                starts_new_connection(earlier_conn, earlier_conn.side_of(Endpoint::source(&f.segment)), &f.segment)
            }) {
                let earlier_conn = tracker.store.get(e);
                conn.follows = Some(earlier_conn.id);
                conn.follows_after_ns.set(Some(conn.first_time_ns - earlier_conn.last_time_ns));
                conn.follows_server_time_wait = earlier_time_wait;
            }
            tracker.table.remove(&key);
        }
        let new_index = tracker.store.adopt_as(conn, ids.merged(later_id));
        if let Some((key, mut flow)) = live_flow {
            flow.set_slot(new_index);
            tracker.table.insert(key, flow);
        }
    }
    (ids, dropped)
}

/// Moves a record of the later analysis into the merged numbering: files and ids.
pub fn renumber(conn: &mut Connection, ids: &IdMap, file_offset: u32) {
    shift_files(conn, file_offset);
    conn.id = ids.merged(conn.id);
    conn.follows = conn.follows.map(|f| ids.merged(f));
}

/// Replays the later connection's prefix into earlier connection `e`, then adds what the later
/// analysis saw after its snapshot.
fn graft<C: Counter>(tracker: &mut Tracker<C>, e: usize, key: FlowKey, later: Connection, live_flow: Option<(FlowKey, Flow)>) {
    let Some(prefix) = later.prefix else { return };
    for seen in &prefix.segments {
        tracker.track(&seen.segment, seen.at, seen.time_ns);
    }
    let Some(snapshot) = prefix.snapshot else {
        // The whole connection was in the prefix: the replay did everything.
        return;
    };
    let last_replayed = prefix.segments.last().map(|s| s.at).unwrap_or_default();
    let conn = tracker.store.get_mut(e);
    // The later analysis may have guessed the client the other way round.
    let flipped = later.client != conn.client;
    let side = |s: Side| if flipped { s.other() } else { s };
    for s in [Side::Client, Side::Server] {
        let target = side(s).index();
        conn.counts[target].add_since(&later.counts[s.index()], &snapshot.counts[s.index()]);
    }
    conn.syn_count += later.syn_count - snapshot.syn_count;
    conn.synack_count += later.synack_count - snapshot.synack_count;
    conn.snaplen_cut += later.snaplen_cut - snapshot.snaplen_cut;
    conn.duplicates += later.duplicates - snapshot.duplicates;
    conn.repeats_told_by_delay += later.repeats_told_by_delay - snapshot.repeats_told_by_delay;
    conn.milestones.syns_after_rst += later.milestones.syns_after_rst - snapshot.milestones.syns_after_rst;
    conn.milestones.client_bytes_after_server_close += later.milestones.client_bytes_after_server_close
        - snapshot.milestones.client_bytes_after_server_close;
    // A handshake completed before the boundary was not known to the later analysis.
    let completed_before = conn.handshake_completed();
    conn.handshake_ack_time_ns.set(conn.handshake_ack_time_ns.get().or(later.handshake_ack_time_ns.get()));
    conn.last_time_ns = conn.last_time_ns.max(later.last_time_ns);
    conn.set_state(later.state);
    let later_events = later.events.into_iter().filter(|ev| ev.at > last_replayed);
    for mut event in later_events {
        event.from = side(event.from);
        if let Detail::Attempt { after_handshake_ack, .. } = &mut event.detail {
            *after_handshake_ack |= completed_before;
        }
        conn.push(event, true);
    }
    conn.events_dropped += later.events_dropped;
    join_milestones(&mut conn.milestones, &later.milestones, flipped);
    if let Some(log) = &later.retransmits {
        join_retransmits(conn, log, last_replayed, &side);
    }
    // ICMP errors are never replayed: the later analysis's are all new.
    if let Some(log) = later.icmp {
        let merged = conn.icmp.get_or_insert_with(Box::default);
        merged.answers.extend(log.answers.into_iter().map(|mut a| {
            a.answers = side(a.answers);
            a
        }));
        merged.more += log.more;
    }

    match live_flow {
        Some((_, mut flow)) => {
            flow.set_slot(e);
            if flipped {
                flow.direction.swap(0, 1);
                flow.client_is_low = !flow.client_is_low;
            }
            tracker.table.insert(key, flow);
        }
        // Forgotten by the later analysis: forget it here too.
        None => {
            tracker.table.remove(&key);
        }
    }
}

/// What the later analysis learned after its snapshot, where the merged record does not know it yet.
fn join_milestones(merged: &mut Milestones, later: &Milestones, flipped: bool) {
    let (client_data, server_data) =
        if flipped { (later.server_data_ns.get(), later.client_data_ns.get()) } else { (later.client_data_ns.get(), later.server_data_ns.get()) };
    merged.client_data_ns.set(merged.client_data_ns.get().or(client_data));
    merged.server_data_ns.set(merged.server_data_ns.get().or(server_data));
    let (client_last, server_last) =
        if flipped { (later.server_last_data_ns.get(), later.client_last_data_ns.get()) } else { (later.client_last_data_ns.get(), later.server_last_data_ns.get()) };
    merged.client_last_data_ns.set(client_last.or(merged.client_last_data_ns.get()));
    merged.server_last_data_ns.set(server_last.or(merged.server_last_data_ns.get()));
    if !flipped {
        merged.client_data_acked_ns.set(merged.client_data_acked_ns.get().or(later.client_data_acked_ns.get()));
        merged.client_closed_ns.set(merged.client_closed_ns.get().or(later.client_closed_ns.get()));
        if merged.server_closed_ns.get().is_none() {
            (merged.server_closed_ns, merged.server_closed_at) = (later.server_closed_ns, later.server_closed_at);
        }
    }
    if merged.first_rst().is_none() {
        merged.set_first_rst(later.first_rst().map(|mut r| {
            if flipped {
                r.from = r.from.other();
            }
            r
        }));
    }
}

/// Appends the sends the later analysis logged after the replayed prefix.
fn join_retransmits(conn: &mut Connection, later: &RetransmitLog, last_replayed: FrameRef, side: &dyn Fn(Side) -> Side) {
    let after = |s: &&Send| s.at > last_replayed;
    let (syn, synack) = if side(Side::Client) == Side::Client { (&later.syn, &later.synack) } else { (&later.synack, &later.syn) };
    let log = conn.retransmits_mut();
    for send in syn.iter().filter(after) {
        RetransmitLog::handshake(&mut log.syn, None, *send);
    }
    for send in synack.iter().filter(after) {
        RetransmitLog::handshake(&mut log.synack, None, *send);
    }
    for series in &later.data {
        for send in series.sends.iter().filter(after) {
            log.data(side(series.from), series.seq, None, *send, series.into_half_open);
        }
        // What the later analysis learnt of the series after the snapshot: the receiver got it
        // twice (D-SACK), or the original arrived.
        if let Some(joined) = log.data.iter_mut().find(|d| d.from == side(series.from) && d.seq == series.seq) {
            joined.dsacked |= series.dsacked;
            joined.original_arrived |= series.original_arrived;
        }
    }
}

fn shift_files(conn: &mut Connection, offset: u32) {
    let shift = |f: &mut FrameRef| f.file += offset;
    shift(&mut conn.first);
    for event in conn.events.iter_mut() {
        shift(&mut event.at);
        match &mut event.detail {
            Detail::Attempt { original: Some(f), .. } | Detail::Rst { answers_frame: Some(f), .. } => shift(f),
            Detail::DupAck { of, .. } => shift(of),
            _ => {}
        }
    }
    if let Some(prefix) = conn.prefix.as_mut() {
        prefix.segments.iter_mut().for_each(|s| shift(&mut s.at));
    }
    if let Some(rst) = conn.milestones.first_rst.as_deref_mut() {
        shift(&mut rst.at);
        if let Some(f) = rst.answers_frame.as_mut() {
            shift(f);
        }
    }
    if conn.milestones.server_closed_ns.get().is_some() {
        shift(&mut conn.milestones.server_closed_at);
    }
    if let Some(log) = conn.retransmits.as_mut() {
        let sends = log.syn.iter_mut().chain(log.synack.iter_mut()).chain(log.data.iter_mut().flat_map(|d| d.sends.iter_mut()));
        sends.for_each(|s| shift(&mut s.at));
    }
    if let Some(log) = conn.icmp.as_mut() {
        for answer in log.answers.iter_mut() {
            shift(&mut answer.at);
            if let Some(f) = answer.answers_frame.as_mut() {
                shift(f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // --- ids of the later analysis in the merged numbering ---

    #[test]
    fn test_id_map_joined_keep_earlier_id_others_follow_without_gaps() {
        // The earlier analysis numbered 0..10; later ids 0 and 3 joined earlier 7 and 9.
        let ids = IdMap { base: 10, joined: vec![(0, 7), (3, 9)] };
        let merged: Vec<u64> = (0..6).map(|l| ids.merged(l)).collect();
        assert_eq!(merged, vec![7, 10, 11, 9, 12, 13]);
        assert_eq!(ids.next_id(6), 14);
    }
}
