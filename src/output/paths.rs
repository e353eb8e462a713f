//! The `paths` entry of the JSON document (docs/json.md, "Two capture points"): what the
//! alignment of two capture points found (src/align).

use serde_json::{json, Map, Value};

use super::json::{epoch, flags_text};
use crate::align::clock::Delays;
use crate::align::conns::{Conn, Dir};
use crate::align::Alignment;

/// The point names, first and second, as the report names them.
pub type Names<'a> = [&'a str; 2];
/// A point's id of one of its connections (None when its report does not list it).
pub type IdOf<'a> = &'a dyn Fn(&Conn) -> Option<u64>;

/// Seconds from nanoseconds, to the nanosecond (and 0, not -0).
fn secs(ns: f64) -> f64 {
    ns.round() / 1e9 + 0.0
}

fn delays(d: &Delays) -> Value {
    let s = |seconds: f64| secs(seconds * 1e9);
    json!({"packets": d.packets, "min": s(d.min), "mean": s(d.mean), "spread": s(d.spread), "max": s(d.max)})
}

fn per_point<T: Into<Value>>(names: Names<'_>, values: [T; 2]) -> Value {
    let [a, b] = values;
    let mut m = Map::new();
    m.insert(names[0].to_string(), a.into());
    m.insert(names[1].to_string(), b.into());
    Value::Object(m)
}

/// The entry for the alignment `al` of the points `names`; `ids[p](conn)` is the id in point
/// p's `connections[]` of its connection `conn` (None when the report does not list it).
pub fn path_json(al: &Alignment, names: Names<'_>, ids: [IdOf<'_>; 2]) -> Value {
    let fit = al.fit.as_ref();
    let client_side = fit.map(|f| if f.first_is_client_side { names[0] } else { names[1] });
    let first_is_client_side = fit.is_none_or(|f| f.first_is_client_side);
    let connections: Vec<Value> = al
        .connections
        .iter()
        .map(|pc| {
            let conn = |p: usize| pc.conn[p].map(|i| &al.conns[p][i as usize]);
            let vanished: Vec<Value> = pc
                .vanished
                .iter()
                .map(|v| {
                    let u = &v.packet;
                    let (file, frame) = (u.at.file, u.at.frame);
                    // The point the packet passes first on its way (the one nearer its sender).
                    let first_passed = usize::from((u.dir == Dir::ClientToServer) != first_is_client_side);
                    let place = if v.seen_at == first_passed { "between_points" } else { "before_first_point" };
                    json!({
                        "direction": u.dir.slug(),
                        "seq": u.seq,
                        "len": u.len,
                        "flags": flags_text(u.flags),
                        "time": epoch(u.time_ns),
                        "seen_at": names[v.seen_at],
                        "missing_at": names[1 - v.seen_at],
                        "vanished": place,
                        "file": file,
                        "frame": frame,
                    })
                })
                .collect();
            let by_dir = |dir: Dir| pc.vanished.iter().filter(|v| v.packet.dir == dir).count();
            json!({
                "client": per_point(names, [0, 1].map(|p| conn(p).map(|c| c.client.to_string()))),
                "server": per_point(names, [0, 1].map(|p| conn(p).map(|c| c.server.to_string()))),
                "ids": per_point(names, [0, 1].map(|p| conn(p).and_then(|c| ids[p](c)))),
                "vanished_client_to_server": by_dir(Dir::ClientToServer),
                "vanished_server_to_client": by_dir(Dir::ServerToClient),
                "vanished": vanished,
            })
        })
        .collect();
    let loss: Vec<Value> = al
        .loss_per_second
        .iter()
        .map(|s| json!({"second": s.second, "client_to_server": s.by_dir[0], "server_to_client": s.by_dir[1]}))
        .collect();
    let sum_dir = |dir: Dir| al.loss_per_second.iter().map(|s| s.by_dir[dir as usize]).sum::<u64>();
    json!({
        "points": names,
        "client_side": client_side,
        "clock_offset": fit.map_or(secs(al.running_offset_ns as f64), |f| secs(f.offset_ns)),
        "offset_at": fit.map(|f| epoch(f.at_ns)),
        "drift_ppm": fit.map(|f| (f.drift * 1e9).round() / 1000.0 + 0.0),
        "offset_uncertainty": fit.map(|f| secs(f.uncertainty_ns)),
        "offset_windows": fit.map_or(0, |f| f.windows),
        "matched_packets": al.matched,
        "packets": per_point(names, al.packets),
        "vanished_packets": {"client_to_server": sum_dir(Dir::ClientToServer), "server_to_client": sum_dir(Dir::ServerToClient)},
        "one_point_only": per_point(names, al.not_expected),
        "resegmented": per_point(names, al.resegmented),
        "translated": al.translated,
        "delays": fit.map(|f| json!({"client_to_server": delays(&f.delays[0]), "server_to_client": delays(&f.delays[1])})),
        "loss_per_second": loss,
        "connections": connections,
    })
}
