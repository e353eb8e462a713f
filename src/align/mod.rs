//! Two capture points, one story: the packets two captures of the same connections both saw,
//! matched one for one, the clock offset between the captures, and the packets one point saw
//! and the other did not (docs/two-points.md).
//!
//! `sighting` reads a point's files into packets with their match key, on a thread per point;
//! `conns` tells each point's connections apart; `matcher` pairs the packets within a window of
//! a few seconds as the two streams go by; `clock` fits the offset and drift from the pairs;
//! `report` sorts the packets seen at one point only into vanished ones and the rest.

pub mod clock;
pub mod conns;
pub mod matcher;
pub mod report;
pub mod sighting;

use std::collections::VecDeque;
use std::sync::mpsc::Receiver;

pub use report::Alignment;
use sighting::Sighting;

use crate::reader::ReadError;

/// How long a packet seen at one point waits for its copy at the other (on the first point's
/// clock, after the running offset): longer than any one-way delay between two capture points
/// of one path, short enough that memory holds a few seconds of packets.
pub const WINDOW_NS: i64 = 3_000_000_000;
/// Packets of each point read before the merge starts, for the first guess of the offset.
pub const PROBE: usize = 50_000;
/// When the two probes share nothing: packets of each point read again from its start, at
/// most, looking for the other's probe (`matcher::offset_from_stream`).
pub const SCAN: usize = 2_000_000;

#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub window_ns: i64,
    pub probe: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options { window_ns: WINDOW_NS, probe: PROBE }
    }
}

/// Aligns the captures of two points (each its files in time order).
pub fn align(first: &[String], second: &[String], options: Options) -> Result<Alignment, ReadError> {
    let (rx_a, reading_a) = sighting::spawn_reader(first.to_vec());
    let (rx_b, reading_b) = sighting::spawn_reader(second.to_vec());
    let mut streams = [Stream::new(rx_a), Stream::new(rx_b)];
    let mut scan = |probe_a: &[Sighting], probe_b: &[Sighting]| scan(second, probe_a, true).or_else(|| scan(first, probe_b, false));
    let result = align_streams(&mut streams, options, &mut scan);
    // Hanging up stops a reading thread that is still going (an error on the other side).
    let [a, b] = streams;
    let errors = [a.error, b.error];
    drop((a.rx, b.rx));
    let reads = [reading_a, reading_b].map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
    if let Some(e) = errors.into_iter().flatten().next() {
        return Err(e);
    }
    Ok(report::assemble(result, reads))
}

/// The first guess of the offset from the files of a point read again from their start
/// against the other point's probe (`matcher::offset_from_stream`); the reading stops early.
fn scan(paths: &[String], probe: &[Sighting], probe_is_first: bool) -> Option<i64> {
    let (rx, reading) = sighting::spawn_reader(paths.to_vec());
    let found = matcher::offset_from_stream(probe, rx.iter().map_while(Result::ok).flatten().take(SCAN), probe_is_first);
    drop(rx);
    let _ = reading.join();
    found
}

/// The first guess of the offset from the two probes when they share no packet.
pub type Fallback<'a> = &'a mut dyn FnMut(&[Sighting], &[Sighting]) -> Option<i64>;

/// Runs the matcher over two streams of sightings, each in its point's time order.
pub fn align_streams(streams: &mut [Stream; 2], options: Options, fallback: Fallback<'_>) -> matcher::Matcher {
    let [a, b] = streams;
    a.fill(options.probe);
    b.fill(options.probe);
    // The probes: the first `probe` packets of each (a stream held in memory has them all).
    a.buffered();
    b.buffered();
    let (probe_a, probe_b) = (a.probe(options.probe), b.probe(options.probe));
    let offset = matcher::coarse_offset(probe_a, probe_b).or_else(|| fallback(probe_a, probe_b)).unwrap_or(0);
    let mut m = matcher::Matcher::new(offset, options.window_ns);
    loop {
        if a.error.is_some() || b.error.is_some() {
            break;
        }
        let side = match (a.peek_time(), b.peek_time()) {
            (None, None) => break,
            (Some(_), None) => 0,
            (None, Some(_)) => 1,
            (Some(ta), Some(tb)) => usize::from(m.adjusted(1, tb) < ta),
        };
        let s = if side == 0 { a.next() } else { b.next() };
        if let Some(s) = s {
            m.feed(side, s);
        }
    }
    m
}

/// One point's sightings as they arrive from its reading thread (or from memory, in tests).
pub struct Stream {
    buffer: VecDeque<Sighting>,
    rx: Option<Receiver<Result<Vec<Sighting>, ReadError>>>,
    pub error: Option<ReadError>,
}

impl Stream {
    pub fn new(rx: Receiver<Result<Vec<Sighting>, ReadError>>) -> Stream {
        Stream { buffer: VecDeque::new(), rx: Some(rx), error: None }
    }

    pub fn of(sightings: Vec<Sighting>) -> Stream {
        Stream { buffer: sightings.into(), rx: None, error: None }
    }

    /// Takes batches until `n` are buffered or the stream ends.
    fn fill(&mut self, n: usize) {
        while self.buffer.len() < n {
            let Some(rx) = &self.rx else { return };
            match rx.recv() {
                Ok(Ok(batch)) => self.buffer.extend(batch),
                Ok(Err(e)) => {
                    self.error = Some(e);
                    self.rx = None;
                }
                Err(_) => self.rx = None,
            }
        }
    }

    fn buffered(&mut self) -> &[Sighting] {
        self.buffer.make_contiguous()
    }

    /// The first `n` buffered sightings, once `buffered` made them contiguous.
    fn probe(&self, n: usize) -> &[Sighting] {
        let all = self.buffer.as_slices().0;
        all.get(..n).unwrap_or(all)
    }

    fn peek_time(&mut self) -> Option<i64> {
        if self.buffer.is_empty() {
            self.fill(1);
        }
        self.buffer.front().map(|s| s.time_ns)
    }

    fn next(&mut self) -> Option<Sighting> {
        if self.buffer.is_empty() {
            self.fill(1);
        }
        self.buffer.pop_front()
    }
}

#[cfg(test)]
mod tests;
