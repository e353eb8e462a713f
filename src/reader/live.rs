//! Standard input read live (`tcpdump -w - port 9000 | pcapq analyze -`): counted as it
//! arrives, and stoppable.
//!
//! A relay thread reads standard input in chunks and hands them to the capture reader through
//! a bounded channel, counting bytes and capture records as they arrive (`LiveCounters`), so a
//! progress line can show them while the reader works. `LiveCounters::stop` ends the stream:
//! the reader then sees the end of the input and the analysis settles what it read, as at the
//! end of a file. Stopping first drains: what the writer still sends within `DRAIN_QUIET` of
//! the last chunk (tcpdump flushes its buffer when Ctrl-C reaches it too) is read, for at most
//! `DRAIN_MAX`; `stop_now` ends at once.
//!
//! A capture file that tcpdump is still writing (`tcpdump -w dump.pcap`, `pcapq watch --follow
//! dump.pcap`) is read the same way (`LiveStream::follow`): at the end of the file the relay
//! waits `FOLLOW_POLL` and reads again, so a record cut at the current end is completed when
//! tcpdump writes the rest of it. The file ends when the path names another file (another inode:
//! tcpdump was started again, or the file was rotated away) or when it shrank (tcpdump truncated
//! it on a restart): `LiveCounters::replaced` says so.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes read from standard input at a time.
const CHUNK_LEN: usize = 64 * 1024;
/// Chunks on their way to the reader at once (4 MiB).
const CHUNKS_IN_FLIGHT: usize = 64;
/// How often a reader waiting for input looks whether it was told to stop.
const POLL: Duration = Duration::from_millis(100);
/// While draining, the input ends once the writer has been quiet this long...
const DRAIN_QUIET: Duration = Duration::from_millis(500);
/// ...or this long after the stop, whichever comes first.
const DRAIN_MAX: Duration = Duration::from_secs(3);
/// How long a followed file's reader waits at its end before it looks again.
const FOLLOW_POLL: Duration = Duration::from_millis(150);

const RUNNING: u8 = 0;
const DRAINING: u8 = 1;
const STOPPED: u8 = 2;

/// What the relay has seen so far, and the stop request; shared with whoever shows progress.
#[derive(Debug, Default)]
pub struct LiveCounters {
    bytes: AtomicU64,
    packets: AtomicU64,
    /// The input is not a pcap or pcapng stream the record counter understands (gzip).
    packets_unknown: AtomicBool,
    stop: AtomicU8,
    /// The input ended on its own (the writer closed it).
    ended: AtomicBool,
    /// A followed file ended because the path names another file now, or it shrank.
    replaced: AtomicBool,
    /// The stream was dropped: a followed file's relay stops waiting for more.
    closed: AtomicBool,
}

impl LiveCounters {
    /// Bytes that arrived on standard input so far.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Capture records that arrived so far (complete or not), or None when the stream is
    /// compressed and its records cannot be counted on the way.
    pub fn packets(&self) -> Option<u64> {
        (!self.packets_unknown.load(Ordering::Relaxed)).then(|| self.packets.load(Ordering::Relaxed))
    }

    /// Ends the input after draining what the writer still sends (see the module's comment).
    pub fn stop(&self) {
        let _ = self.stop.compare_exchange(RUNNING, DRAINING, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Ends the input at once.
    pub fn stop_now(&self) {
        self.stop.store(STOPPED, Ordering::SeqCst);
    }

    /// Was the input told to stop (`stop` or `stop_now`)?
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst) != RUNNING
    }

    /// Did the input end on its own (its writer closed it)?
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::SeqCst)
    }

    /// Did a followed file end because tcpdump started over (another file at its path, or
    /// the file shrank)?
    pub fn replaced(&self) -> bool {
        self.replaced.load(Ordering::SeqCst)
    }
}

/// Standard input as a stream that counts and can be stopped: give it to
/// `CaptureReader::from_stream`.
pub struct LiveStream {
    chunks: Receiver<io::Result<Vec<u8>>>,
    pending: Vec<u8>,
    at: usize,
    counters: Arc<LiveCounters>,
    drain_until: Option<Instant>,
}

impl LiveStream {
    /// Starts the relay thread on standard input.
    pub fn stdin(counters: Arc<LiveCounters>) -> LiveStream {
        LiveStream::of(Box::new(io::stdin()), counters)
    }

    /// Starts the relay thread on the capture file at `path`, followed as tcpdump writes it
    /// (see the module's comment). Fails when the file cannot be opened.
    pub fn follow(path: &Path, counters: Arc<LiveCounters>) -> io::Result<LiveStream> {
        let file = Following::open(path, counters.clone())?;
        Ok(LiveStream::of(Box::new(file), counters))
    }

    /// Starts the relay thread on `input` (tests use a pipe of their own).
    pub fn of(input: Box<dyn Read + Send>, counters: Arc<LiveCounters>) -> LiveStream {
        let (tx, rx) = mpsc::sync_channel(CHUNKS_IN_FLIGHT);
        let relay_counters = counters.clone();
        // The thread ends with the input, or when the reader is gone; when the reader stopped
        // while the writer is silent, it stays blocked in read() until the process exits.
        std::thread::Builder::new()
            .name("pcapq-stdin".into())
            .spawn(move || relay(input, &tx, &relay_counters))
            .map(drop)
            .unwrap_or_else(|_| counters.stop_now());
        LiveStream { chunks: rx, pending: Vec::new(), at: 0, counters, drain_until: None }
    }

    /// The next chunk, or None at the end of the input (or of the drain).
    fn next_chunk(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            let wait = match self.counters.stop.load(Ordering::SeqCst) {
                STOPPED => return Ok(None),
                DRAINING => {
                    let until = *self.drain_until.get_or_insert_with(|| Instant::now() + DRAIN_MAX);
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(None);
                    }
                    left.min(DRAIN_QUIET)
                }
                _ => POLL,
            };
            match self.chunks.recv_timeout(wait) {
                Ok(Ok(chunk)) if chunk.is_empty() => {
                    self.counters.ended.store(true, Ordering::SeqCst);
                    return Ok(None);
                }
                Ok(Ok(chunk)) => return Ok(Some(chunk)),
                Ok(Err(e)) => return Err(e),
                Err(RecvTimeoutError::Timeout) if self.counters.stop.load(Ordering::SeqCst) == RUNNING => {}
                // Quiet while draining (the stop arriving during a wait just loops).
                Err(RecvTimeoutError::Timeout) => {
                    if wait == DRAIN_QUIET || self.drain_until.is_some_and(|u| Instant::now() >= u) {
                        return Ok(None);
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
            }
        }
    }
}

impl Drop for LiveStream {
    fn drop(&mut self) {
        self.counters.closed.store(true, Ordering::SeqCst);
    }
}

impl Read for LiveStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at >= self.pending.len() {
            match self.next_chunk()? {
                Some(chunk) => {
                    self.pending = chunk;
                    self.at = 0;
                }
                None => return Ok(0),
            }
        }
        let left = self.pending.get(self.at..).unwrap_or_default();
        let n = left.len().min(buf.len());
        buf.get_mut(..n).unwrap_or_default().copy_from_slice(left.get(..n).unwrap_or_default());
        self.at += n;
        Ok(n)
    }
}

/// A capture file read as it grows: at its end, a read waits for more instead of returning 0,
/// until the file is replaced, the stream is stopped at once, or dropped.
struct Following {
    file: File,
    path: PathBuf,
    /// The opened file's device and inode.
    identity: (u64, u64),
    at: u64,
    /// The file's first four bytes, as far as read.
    magic: Vec<u8>,
    counters: Arc<LiveCounters>,
}

/// The first four bytes of what tcpdump writes (pcap of either byte order and time unit,
/// pcapng), and of gzip.
fn capture_magic(head: &[u8]) -> bool {
    matches!(
        head,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xd4, 0xc3, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d] | [0x4d, 0x3c, 0xb2, 0xa1] | [0x0a, 0x0d, 0x0d, 0x0a] | [0x1f, 0x8b, _, _]
    )
}

impl Following {
    fn open(path: &Path, counters: Arc<LiveCounters>) -> io::Result<Following> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "is a directory"));
        }
        Ok(Following { file, path: path.to_path_buf(), identity: (meta.dev(), meta.ino()), at: 0, magic: Vec::new(), counters })
    }

    /// Does the path name another file now, or did the file shrink below what was read?
    fn replaced(&self) -> bool {
        let now = match std::fs::metadata(&self.path) {
            Ok(meta) => (meta.dev(), meta.ino()),
            // Removed (or no longer readable): tcpdump's next file will be another.
            Err(_) => return true,
        };
        now != self.identity || self.file.metadata().is_ok_and(|meta| meta.len() < self.at)
    }
}

impl Read for Following {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.file.read(buf)?;
            if n > 0 {
                self.at += n as u64;
                let want = 4 - self.magic.len().min(4);
                self.magic.extend_from_slice(buf.get(..n.min(want)).unwrap_or_default());
                return Ok(n);
            }
            // Not a capture: nothing more is worth waiting for (the reader says what it is).
            if self.magic.len() == 4 && !capture_magic(&self.magic) {
                return Ok(0);
            }
            let stop = self.counters.stop.load(Ordering::SeqCst);
            if stop == STOPPED || self.counters.closed.load(Ordering::SeqCst) {
                return Ok(0);
            }
            if self.replaced() {
                // What the old file got between the last read and the check is read first.
                let n = self.file.read(buf)?;
                if n > 0 {
                    self.at += n as u64;
                    return Ok(n);
                }
                self.counters.replaced.store(true, Ordering::SeqCst);
                return Ok(0);
            }
            std::thread::sleep(FOLLOW_POLL);
        }
    }
}

/// Copies `input` to `tx` chunk by chunk, counting; an empty chunk marks the end.
fn relay(mut input: Box<dyn Read + Send>, tx: &SyncSender<io::Result<Vec<u8>>>, counters: &LiveCounters) {
    let mut records = RecordCounter::default();
    loop {
        let mut chunk = vec![0u8; CHUNK_LEN];
        match input.read(&mut chunk) {
            Ok(0) => {
                let _ = tx.send(Ok(Vec::new()));
                return;
            }
            Ok(n) => {
                chunk.truncate(n);
                counters.bytes.fetch_add(n as u64, Ordering::Relaxed);
                records.feed(&chunk);
                match records.records() {
                    Some(n) => counters.packets.store(n, Ordering::Relaxed),
                    None => counters.packets_unknown.store(true, Ordering::Relaxed),
                }
                if tx.send(Ok(chunk)).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
    }
}

/// Counts the records of a pcap or pcapng stream from their framing alone (record and block
/// lengths), as the bytes pass: for the progress line, not the analysis.
#[derive(Debug, Default)]
pub struct RecordCounter {
    format: Framing,
    /// Bytes of the header being collected.
    head: Vec<u8>,
    /// Bytes of the current record's body still to pass.
    skip: u64,
    records: u64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// Before the first four bytes.
    #[default]
    Start,
    /// Classic pcap: after the 24-byte file header, 16-byte record headers (caplen at 8..12).
    Pcap { big_endian: bool, file_header_done: bool },
    /// pcapng: blocks of type (4), total length (4), with the byte order from each SHB.
    PcapNg { big_endian: bool },
    /// Not something countable (gzip), or framing that makes no sense.
    Unknown,
}

/// pcapng blocks that carry a packet: enhanced, simple, and the obsolete packet block.
const NG_PACKET_BLOCKS: [u32; 3] = [6, 3, 2];
const NG_SHB: u32 = 0x0A0D_0D0A;
/// Record lengths beyond this mean the framing is lost (the reader says why).
const MAX_FRAMED_LEN: u64 = 256 << 20;

impl RecordCounter {
    /// Records seen so far, or None when the stream cannot be counted.
    pub fn records(&self) -> Option<u64> {
        (self.format != Framing::Unknown).then_some(self.records)
    }

    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && self.format != Framing::Unknown {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len() as u64);
                self.skip -= n;
                bytes = bytes.get(n as usize..).unwrap_or_default();
                continue;
            }
            let want = self.header_len();
            let take = (want - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(bytes.get(..take).unwrap_or_default());
            bytes = bytes.get(take..).unwrap_or_default();
            if self.head.len() == want {
                let head = std::mem::take(&mut self.head);
                self.on_header(&head);
            }
        }
    }

    fn header_len(&self) -> usize {
        match self.format {
            Framing::Start => 4,
            Framing::Pcap { file_header_done: false, .. } => 20,
            Framing::Pcap { .. } => 16,
            Framing::PcapNg { .. } => 12,
            Framing::Unknown => 0,
        }
    }

    fn on_header(&mut self, h: &[u8]) {
        let word = |at: usize, big: bool| -> u32 {
            let b: [u8; 4] = h.get(at..at + 4).and_then(|s| s.try_into().ok()).unwrap_or([0; 4]);
            if big {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        self.format = match self.format {
            Framing::Start => match h {
                [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => Framing::Pcap { big_endian: true, file_header_done: false },
                [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => Framing::Pcap { big_endian: false, file_header_done: false },
                [0x0a, 0x0d, 0x0d, 0x0a] => {
                    // The SHB's type is read again as a block header: keep its four bytes.
                    self.head = vec![0x0a, 0x0d, 0x0d, 0x0a];
                    self.format = Framing::PcapNg { big_endian: false };
                    return;
                }
                _ => Framing::Unknown,
            },
            Framing::Pcap { big_endian, file_header_done: false } => Framing::Pcap { big_endian, file_header_done: true },
            Framing::Pcap { big_endian, .. } => {
                self.records += 1;
                self.skip = u64::from(word(8, big_endian));
                if self.skip > MAX_FRAMED_LEN {
                    Framing::Unknown
                } else {
                    self.format
                }
            }
            Framing::PcapNg { big_endian } => {
                let big_endian = if word(0, false) == NG_SHB { h.get(8..12) == Some(&[0x1a, 0x2b, 0x3c, 0x4d][..]) } else { big_endian };
                let block_type = word(0, big_endian);
                let len = u64::from(word(4, big_endian));
                if NG_PACKET_BLOCKS.contains(&block_type) {
                    self.records += 1;
                }
                if !(12..=MAX_FRAMED_LEN).contains(&len) {
                    Framing::Unknown
                } else {
                    self.skip = len - 12;
                    Framing::PcapNg { big_endian }
                }
            }
            Framing::Unknown => Framing::Unknown,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcap(records: &[usize]) -> Vec<u8> {
        let mut out = vec![0xd4, 0xc3, 0xb2, 0xa1];
        out.extend_from_slice(&[0; 20]);
        for len in records {
            let mut header = [0u8; 16];
            header[8..12].copy_from_slice(&(*len as u32).to_le_bytes());
            out.extend_from_slice(&header);
            out.extend(std::iter::repeat(0xee).take(*len));
        }
        out
    }

    fn ng_block(block_type: u32, body: usize) -> Vec<u8> {
        let len = (12 + body) as u32;
        let mut out = block_type.to_le_bytes().to_vec();
        out.extend_from_slice(&len.to_le_bytes());
        out.extend(std::iter::repeat(0).take(body));
        out.extend_from_slice(&len.to_le_bytes());
        out
    }

    // ---- counting records as bytes pass ----

    #[test]
    fn test_counter_pcap_counts_records_fed_byte_by_byte() {
        let bytes = pcap(&[60, 0, 1514, 54]);
        let mut counter = RecordCounter::default();
        for b in &bytes {
            counter.feed(std::slice::from_ref(b));
        }
        assert_eq!(counter.records(), Some(4));
    }

    #[test]
    fn test_counter_pcap_counts_a_record_whose_body_has_not_arrived() {
        let bytes = pcap(&[100]);
        let mut counter = RecordCounter::default();
        counter.feed(&bytes[..24 + 16 + 10]);
        assert_eq!(counter.records(), Some(1));
    }

    #[test]
    fn test_counter_pcapng_counts_packet_blocks_only() {
        let mut shb = 0x0A0D_0D0Au32.to_le_bytes().to_vec();
        shb.extend_from_slice(&28u32.to_le_bytes());
        shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        shb.extend_from_slice(&[1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        shb.extend_from_slice(&28u32.to_le_bytes());
        let mut bytes = shb;
        bytes.extend(ng_block(1, 8)); // IDB
        bytes.extend(ng_block(6, 40));
        bytes.extend(ng_block(6, 80));
        bytes.extend(ng_block(3, 20));
        let mut counter = RecordCounter::default();
        for piece in bytes.chunks(7) {
            counter.feed(piece);
        }
        assert_eq!(counter.records(), Some(3));
    }

    #[test]
    fn test_counter_gzip_is_not_counted() {
        let mut counter = RecordCounter::default();
        counter.feed(&[0x1f, 0x8b, 8, 0, 0, 0]);
        assert_eq!(counter.records(), None);
    }

    // ---- the stream ----

    #[test]
    fn test_stream_ends_with_its_input_and_counts_it() {
        let bytes = pcap(&[60, 60]);
        let counters = Arc::new(LiveCounters::default());
        let mut stream = LiveStream::of(Box::new(io::Cursor::new(bytes.clone())), counters.clone());
        let mut read = Vec::new();
        stream.read_to_end(&mut read).unwrap();
        assert_eq!(read, bytes);
        assert_eq!(counters.bytes(), bytes.len() as u64);
        assert_eq!(counters.packets(), Some(2));
        assert!(!counters.stopped());
    }

    /// A writer that sends its bytes, then stays silent forever (a tcpdump seeing no traffic).
    struct Silent(Option<Vec<u8>>);

    impl Read for Silent {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match self.0.take() {
                Some(bytes) => {
                    buf[..bytes.len()].copy_from_slice(&bytes);
                    Ok(bytes.len())
                }
                None => loop {
                    std::thread::sleep(Duration::from_secs(3600));
                },
            }
        }
    }

    #[test]
    fn test_stream_stopped_while_the_writer_is_silent_ends_after_what_arrived() {
        let bytes = pcap(&[60]);
        let counters = Arc::new(LiveCounters::default());
        let mut stream = LiveStream::of(Box::new(Silent(Some(bytes.clone()))), counters.clone());
        let mut first = vec![0u8; bytes.len()];
        stream.read_exact(&mut first).unwrap();
        let stopper = counters.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            stopper.stop();
        });
        let started = Instant::now();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
        assert!(started.elapsed() < DRAIN_MAX, "{:?}", started.elapsed());
        assert!(counters.stopped());
    }

    // ---- a file followed as it is written ----

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("pcapq-follow-{}-{name}", std::process::id()))
    }

    fn append(path: &Path, bytes: &[u8]) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(bytes).unwrap();
    }

    /// Reads `stream` until `len` bytes came, on a thread, so that a stuck read fails the test.
    fn read_until(mut stream: LiveStream, len: usize) -> std::thread::JoinHandle<(Vec<u8>, LiveStream)> {
        std::thread::spawn(move || {
            let mut read = vec![0u8; len];
            stream.read_exact(&mut read).unwrap();
            (read, stream)
        })
    }

    #[test]
    fn test_follow_reads_records_appended_while_it_reads_and_waits_for_a_cut_record() {
        let path = temp_path("append.pcap");
        let bytes = pcap(&[60, 80, 100]);
        std::fs::write(&path, &bytes[..24]).unwrap();
        let counters = Arc::new(LiveCounters::default());
        let stream = LiveStream::follow(&path, counters.clone()).unwrap();
        let reading = read_until(stream, bytes.len());
        let writer_path = path.clone();
        let written = bytes.clone();
        let writer = std::thread::spawn(move || {
            // Each record in two pieces, the cut in the middle of its header or its body.
            let mut at = 24;
            for cut in [10, 30, 60] {
                std::thread::sleep(Duration::from_millis(250));
                append(&writer_path, &written[at..at + cut]);
                at += cut;
                std::thread::sleep(Duration::from_millis(250));
                let end = if at < written.len() { (at + 40).min(written.len()) } else { at };
                append(&writer_path, &written[at..end]);
                at = end;
            }
            append(&writer_path, &written[at..]);
        });
        writer.join().unwrap();
        let (read, mut stream) = reading.join().unwrap();
        assert_eq!(read, bytes);
        assert_eq!(counters.packets(), Some(3));
        assert!(!counters.ended() && !counters.replaced());
        // Stopped while the file is quiet: the stream ends with what was read.
        counters.stop();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty() && !counters.replaced());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn test_follow_ends_when_the_path_names_another_file() {
        let path = temp_path("replaced.pcap");
        let bytes = pcap(&[60]);
        std::fs::write(&path, &bytes).unwrap();
        let counters = Arc::new(LiveCounters::default());
        let mut stream = LiveStream::follow(&path, counters.clone()).unwrap();
        let mut first = vec![0u8; bytes.len()];
        stream.read_exact(&mut first).unwrap();
        // tcpdump started again on the same name: a new file (the old one renamed away).
        let moved = temp_path("replaced.pcap.old");
        std::fs::rename(&path, &moved).unwrap();
        std::fs::write(&path, pcap(&[60, 60])).unwrap();
        let started = Instant::now();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty(), "{} bytes of the new file were read", rest.len());
        assert!(counters.replaced() && counters.ended());
        assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
        std::fs::remove_file(&path).unwrap();
        std::fs::remove_file(&moved).unwrap();
    }

    #[test]
    fn test_follow_ends_when_the_file_shrank() {
        let path = temp_path("shrank.pcap");
        let bytes = pcap(&[60, 60]);
        std::fs::write(&path, &bytes).unwrap();
        let counters = Arc::new(LiveCounters::default());
        let mut stream = LiveStream::follow(&path, counters.clone()).unwrap();
        let mut first = vec![0u8; bytes.len()];
        stream.read_exact(&mut first).unwrap();
        // tcpdump -w on an existing file truncates it (same inode) and writes a new header.
        std::fs::write(&path, &bytes[..24]).unwrap();
        let mut rest = Vec::new();
        stream.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty() && counters.replaced());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn test_follow_a_missing_file_is_an_error() {
        let err = LiveStream::follow(&temp_path("missing.pcap"), Arc::default()).err().unwrap();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
