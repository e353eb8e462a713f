//! A capture written back as pcapng, with comments on chosen packets (`pcapq annotate`).
//!
//! Every record of every input is copied, in order, into one pcapng file; Wireshark shows the
//! comments and filters on them (`frame.comment`). Frame numbers do not move: the blocks of a
//! pcapng input are read by the reader's own block loop (`CaptureReader::for_each_ng_block`),
//! which numbers them as it numbers them for the analysis, so frame n of an input as pcapq
//! numbers it is the n-th frame of that input's part of the output.
//!
//! - Classic pcap: a section header block, one interface description block (the file's link
//!   type and snaplen; `if_tsresol` 9 for nanosecond timestamps), then one enhanced packet
//!   block per record with the same timestamp units, lengths and bytes, in the file's byte order.
//! - pcapng: every block is copied as it is, except that a section header block gets the
//!   section comment, and an enhanced or obsolete packet block its comment after its own
//!   options. A simple packet block has no options: it is copied without one.
//!
//! The inputs are opened with the reader's own code (gzip, `-` for standard input) and streamed
//! a block at a time. An input that breaks off (cut short, damaged) leaves a complete pcapng
//! file holding every record before the break, and an `InputStopped` error that says where.
//!
//! References are to the pcapng specification, draft-ietf-opsawg-pcapng.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;

use pcap_parser::PcapError;

use crate::reader::error::shown;
use crate::reader::pcap::{PcapRecords, Stop};
use crate::reader::source::{self, StreamFault};
use crate::reader::{self, CaptureReader, Format, NgKind, ReadError, ReadStop, MAX_RECORD_LEN, PCAP_HEADER_LEN};

/// What the writer adds.
pub struct Comments<'a> {
    /// Appends the comment of a packet to the string given (empty), by (index of its file
    /// among the inputs, its frame number in that file: 1-based, as the reader numbers
    /// records). Asked only of the packets that can carry one: pcap records, enhanced and
    /// obsolete packet blocks, in the order they are written. Nothing appended writes none; a
    /// comment longer than an option holds (65535 bytes) is cut between characters.
    pub packet: &'a dyn Fn(u32, u64, &mut String),
    /// A comment added to every section header block written (pcapq's summary and version);
    /// "" adds none.
    pub section: &'a str,
}

/// What went into the output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Packets: pcap records, enhanced, simple and obsolete packet blocks.
    pub packets: u64,
    /// Packets given a comment.
    pub commented: u64,
    /// Frames: the packets, and the blocks Wireshark also shows as frames (custom blocks,
    /// systemd journal export blocks).
    pub records: u64,
}

/// Reading an input stopped before its end. The output is a complete pcapng file holding every
/// record before the break; the `io::Error` returned carries this (`get_ref`, `downcast_ref`).
#[derive(Debug)]
pub struct InputStopped {
    /// The input, as given (`-` is standard input).
    pub path: String,
    /// Where and why, as the reader says it.
    pub stop: ReadStop,
    /// What the output holds, every input before this one included.
    pub written: Written,
}

impl fmt::Display for InputStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = shown(&self.path);
        match &self.stop {
            ReadStop::End => write!(f, "{path}: written to its end"),
            ReadStop::Truncated { offset, frame } => write!(
                f,
                "{path}: the capture is cut short: record {frame} at byte {offset} is incomplete; wrote the {} records before it",
                frame.saturating_sub(1)
            ),
            ReadStop::GzipCut { offset, frame } => write!(
                f,
                "{path}: the capture is cut short: its gzip data ends early; wrote the {} records before byte {offset} of the uncompressed capture",
                frame.saturating_sub(1)
            ),
            ReadStop::Corrupt { offset, frame, reason } => write!(
                f,
                "{path}: the capture is damaged at byte {offset} (record {frame}): {reason}; wrote the {} records before it",
                frame.saturating_sub(1)
            ),
            ReadStop::IoError { offset, reason } => write!(f, "{path}: {reason} at byte {offset}; wrote what came before"),
        }
    }
}

impl std::error::Error for InputStopped {}

/// §3.1 block types: Section Header, Interface Description, Enhanced Packet.
const SHB_TYPE: u32 = 0x0A0D_0D0A;
const IDB_TYPE: u32 = 0x0000_0001;
const EPB_TYPE: u32 = 0x0000_0006;
/// §4.1 Byte-Order Magic, written in the section's byte order.
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// §3.1: Block Type and Block Total Length before the body, Block Total Length again after it.
const BLOCK_HEADER_LEN: usize = 8;
const BLOCK_TRAILER_LEN: usize = 4;
/// §4.1: the Section Length (bytes 16..24), then the options.
const SHB_SECTION_LENGTH: std::ops::Range<usize> = 16..24;
const SHB_OPTIONS_AT: usize = 24;
/// §4.3 EPB (and the appendix's Obsolete Packet Block): 20 bytes of fields before the packet data.
const PACKET_FIELDS_LEN: usize = 20;
/// §3.5: an option is a code and a length (16 bits each), then the value padded to 32 bits.
const OPTION_HEADER_LEN: usize = 4;
const OPT_ENDOFOPT: u16 = 0;
const OPT_COMMENT: u16 = 1;
/// The largest option value a 16-bit length can give.
const MAX_OPTION_VALUE_LEN: usize = 0xFFFF;
/// §4.2 if_tsresol: 10^-9 seconds.
const IF_TSRESOL: u16 = 9;
const TSRESOL_NANOSECONDS: u8 = 9;

/// Bytes handed to the writing thread at a time.
const OUTPUT_CHUNK_LEN: usize = 1024 * 1024;
/// Chunks going round between the copy and the writing thread: the copy waits for a written
/// one when it has built them all.
const CHUNKS: usize = 4;

/// The stream a source gives (a file or stdin, gzip undone, its first bytes peeked).
type Stream = std::io::Chain<std::io::Cursor<Vec<u8>>, Box<dyn Read + Send>>;

/// Copies every record of `inputs`, in order, into a new pcapng file at `output`, with the
/// comments `comments` gives (module documentation). The output is created once the first input
/// opens as a capture, and is never one of the inputs.
///
/// Errors: an input that cannot be opened (the `io::Error` carries the reader's `ReadError`);
/// an input that breaks off (it carries an `InputStopped`, and the output holds every record
/// before the break); writing the output failed (the message names it).
pub fn write_annotated(inputs: &[String], output: &Path, comments: &Comments<'_>) -> io::Result<Written> {
    let Some(first) = inputs.first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no capture to annotate"));
    };
    refuse_overwriting_an_input(inputs, output)?;
    let first = Input::open(first).map_err(open_error)?;
    let mut sink = Sink::create(output)?;
    let copied = copy_inputs(first, inputs, &mut sink, comments);
    let finished = sink.finish();
    copied?;
    finished
}

/// Copies the inputs in order, `first` already open, until one cannot be opened or breaks off.
fn copy_inputs(first: Input, inputs: &[String], sink: &mut Sink<'_>, comments: &Comments<'_>) -> io::Result<()> {
    let mut opened = Some(first);
    for (index, path) in inputs.iter().enumerate() {
        let input = match opened.take() {
            Some(input) => input,
            None => Input::open(path).map_err(open_error)?,
        };
        let file = u32::try_from(index).unwrap_or(u32::MAX);
        let stop = input.copy(sink, file, comments)?;
        if stop != ReadStop::End {
            return Err(stopped(InputStopped { path: path.clone(), stop, written: sink.written }));
        }
    }
    Ok(())
}

/// An input opened and its header read, ready to copy.
struct Input {
    path: String,
    records: Records,
}

enum Records {
    /// Classic pcap: the reader's record loop, and what the file header says.
    Pcap { records: PcapRecords<Stream>, order: Order, linktype: u16, snaplen: u32, nanoseconds: bool, fault: StreamFault, gzip: bool },
    /// pcapng: the capture reader, whose block loop gives each block its frame number.
    PcapNg(CaptureReader),
}

impl Input {
    /// Opens `path` as the reader does, and reads its file header or checks its first block.
    fn open(path: &str) -> Result<Input, ReadError> {
        let source = source::open(path)?;
        let bad_header = |e: &PcapError<&[u8]>| ReadError::BadHeader { path: path.to_string(), reason: reader::header_reason(e) };
        let records = match source.format {
            Format::Pcap => {
                let mut stream = source.stream;
                let mut head = [0u8; PCAP_HEADER_LEN];
                stream.read_exact(&mut head).map_err(|_| bad_header(&PcapError::UnexpectedEof))?;
                let (_, header) =
                    pcap_parser::pcap::parse_pcap_header(&head).map_err(|_| bad_header(&PcapError::HeaderNotRecognized))?;
                let order = Order { big_endian: header.is_bigendian() };
                // The link type is the low 16 bits; the FCS length above them has no place in an IDB's link type.
                let linktype = (header.network.0 as u32 & 0xFFFF) as u16;
                let nanoseconds = header.is_nanosecond_precision();
                let records = PcapRecords::new(stream, order.big_endian, PCAP_HEADER_LEN as u64);
                Records::Pcap { records, order, linktype, snaplen: header.snaplen, nanoseconds, fault: source.fault, gzip: source.gzip }
            }
            Format::PcapNg => Records::PcapNg(CaptureReader::of_source(path, source)?),
        };
        Ok(Input { path: path.to_string(), records })
    }

    /// Copies every record into `sink`; returns how reading ended.
    fn copy(self, sink: &mut Sink<'_>, file: u32, comments: &Comments<'_>) -> io::Result<ReadStop> {
        let Input { path, records } = self;
        match records {
            Records::Pcap { mut records, order, linktype, snaplen, nanoseconds, fault, gzip } => {
                let broken = Broken { path: &path, fault: &fault, gzip };
                sink.new_section(order, comments.section)?;
                sink.new_interface(order, linktype, snaplen, nanoseconds)?;
                copy_pcap(&mut records, order, nanoseconds, &broken, sink, file, comments)
            }
            Records::PcapNg(mut reader) => copy_pcapng(&mut reader, sink, file, comments),
        }
    }
}

/// A pcap file's records as enhanced packet blocks of interface 0.
fn copy_pcap(
    records: &mut PcapRecords<Stream>,
    order: Order,
    nanoseconds: bool,
    broken: &Broken<'_>,
    sink: &mut Sink<'_>,
    file: u32,
    comments: &Comments<'_>,
) -> io::Result<ReadStop> {
    // §4.3: the timestamp counts if_tsresol units, as the pcap record's fraction does.
    let units_per_second: u64 = if nanoseconds { 1_000_000_000 } else { 1_000_000 };
    let mut frame = 0u64;
    let mut comment = String::new();
    loop {
        let offset = records.offset();
        match records.next_record() {
            Ok(record) => {
                frame += 1;
                let ticks = u64::from(record.seconds) * units_per_second + u64::from(record.fraction);
                comment.clear();
                (comments.packet)(file, frame, &mut comment);
                let commented = sink.new_packet(order, ticks, record.orig_len, record.data, &comment)?;
                sink.count_packet(commented);
            }
            Err(Stop::End) => return Ok(broken.cut_or(ReadStop::End, offset, frame)),
            Err(Stop::Truncated) => return Ok(broken.cut_or(ReadStop::Truncated { offset, frame: frame + 1 }, offset, frame)),
            Err(Stop::Oversized(claimed)) => {
                return Ok(ReadStop::Corrupt {
                    offset,
                    frame: frame + 1,
                    reason: format!("a record claims {claimed} bytes, more than the {MAX_RECORD_LEN} a capture record can hold"),
                })
            }
            Err(Stop::Io) => return Ok(ReadStop::IoError { offset, reason: broken.read_failure() }),
        }
    }
}

/// A pcapng file's blocks, as they are but for the comments, read by the capture reader: its
/// frame numbers, and its breaks.
fn copy_pcapng(reader: &mut CaptureReader, sink: &mut Sink<'_>, file: u32, comments: &Comments<'_>) -> io::Result<ReadStop> {
    let mut comment = String::new();
    reader.for_each_ng_block(|block| {
        let order = Order { big_endian: block.big_endian };
        match block.kind {
            NgKind::SectionHeader => sink.copy_section_header(block.raw, order, comments.section),
            NgKind::Packet { packet, options_after } => {
                let options_at = options_after.and_then(options_after_packet_data);
                comment.clear();
                if options_at.is_some() {
                    (comments.packet)(file, packet.frame, &mut comment);
                }
                let commented = match options_at {
                    Some(options_at) if !comment.is_empty() => sink.copy_with_comment(block.raw, options_at, order, &comment)?,
                    _ => sink.put(block.raw).map(|()| false)?,
                };
                sink.count_packet(commented);
                Ok(())
            }
            NgKind::Frame => {
                sink.written.records += 1;
                sink.put(block.raw)
            }
            NgKind::Other => sink.put(block.raw),
        }
    })
}

/// What is needed to say how an input broke off.
struct Broken<'i> {
    path: &'i str,
    fault: &'i StreamFault,
    gzip: bool,
}

impl Broken<'_> {
    /// `GzipCut` instead of `stop` when the gzip data ended early. `frames`: the frames written.
    fn cut_or(&self, stop: ReadStop, offset: u64, frames: u64) -> ReadStop {
        if self.fault.gzip_cut() {
            ReadStop::GzipCut { offset, frame: frames + 1 }
        } else {
            stop
        }
    }

    fn read_failure(&self) -> String {
        match self.fault.error() {
            Some(why) if self.gzip => format!("the gzip data is damaged ({why})"),
            Some(why) => format!("could not read {}: {why}", self.path),
            None => format!("could not read {}", self.path),
        }
    }
}

/// §4.3: an EPB's options follow its packet data, padded to 32 bits (an OPB's too).
fn options_after_packet_data(caplen: u64) -> Option<usize> {
    let at = (BLOCK_HEADER_LEN + PACKET_FIELDS_LEN) as u64 + caplen.checked_next_multiple_of(4)?;
    usize::try_from(at).ok()
}

/// Where the options of `raw` end, searched from `from` up to `end`: the opt_endofopt (true),
/// or the end of the last whole option (false). §3.5.
fn end_of_options(raw: &[u8], from: usize, end: usize, order: Order) -> (usize, bool) {
    let mut at = from;
    while at + OPTION_HEADER_LEN <= end {
        let (Some(code), Some(len)) = (order.read_u16(raw, at), order.read_u16(raw, at + 2)) else { break };
        if code == OPT_ENDOFOPT {
            return (at, true);
        }
        let next = at + OPTION_HEADER_LEN + padded(usize::from(len));
        if next > end {
            break;
        }
        at = next;
    }
    (at, false)
}

/// A byte order: a pcapng section's (§4.1 Byte-Order Magic), or a pcap file's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Order {
    big_endian: bool,
}

impl Order {
    fn u16(self, v: u16) -> [u8; 2] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn u32(self, v: u32) -> [u8; 4] {
        if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn read_u16(self, bytes: &[u8], at: usize) -> Option<u16> {
        let field: [u8; 2] = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(if self.big_endian { u16::from_be_bytes(field) } else { u16::from_le_bytes(field) })
    }
}

/// `len` rounded up to 32 bits (§3.1, §3.5).
fn padded(len: usize) -> usize {
    len + padding(len)
}

fn padding(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// The longest start of `text` that fits `room` bytes and an option value, cut between characters.
fn fit(text: &str, room: usize) -> &str {
    let mut len = text.len().min(room).min(MAX_OPTION_VALUE_LEN);
    while !text.is_char_boundary(len) {
        len -= 1;
    }
    text.get(..len).unwrap_or_default()
}

/// The output file and what has gone into it. A thread of its own empties and writes the file
/// (`write_chunks`), a chunk at a time: emptying a big file and the kernel's copy into the page
/// cache take about as long as reading and building the blocks, and run beside them.
struct Sink<'p> {
    /// The chunk being built.
    chunk: Vec<u8>,
    to_writer: Sender<Vec<u8>>,
    /// Chunks written, given back to be built again; the others at the start.
    written_chunks: Receiver<Vec<u8>>,
    /// The writing thread; `None` once joined.
    writer: Option<JoinHandle<io::Result<()>>>,
    path: &'p Path,
    written: Written,
}

impl<'p> Sink<'p> {
    /// Opens the file at `path`, creating it if need be, and starts the writing thread.
    fn create(path: &'p Path) -> io::Result<Sink<'p>> {
        let file = File::options().write(true).create(true).open(path).map_err(|e| output_error(path, e))?;
        let (to_writer, full_chunks) = mpsc::channel();
        let (give_back, written_chunks) = mpsc::channel();
        for _ in 1..CHUNKS {
            // Cannot fail: `written_chunks` is here.
            let _ = give_back.send(Vec::with_capacity(OUTPUT_CHUNK_LEN));
        }
        let owned_path = path.to_path_buf();
        let writer = std::thread::Builder::new()
            .name("pcapq-writer".to_string())
            .spawn(move || write_chunks(file, &owned_path, &full_chunks, &give_back))
            .map_err(|e| output_error(path, e))?;
        let chunk = Vec::with_capacity(OUTPUT_CHUNK_LEN);
        Ok(Sink { chunk, to_writer, written_chunks, writer: Some(writer), path, written: Written::default() })
    }

    /// Hands the last chunk over and waits until everything is written.
    fn finish(mut self) -> io::Result<Written> {
        let last = std::mem::take(&mut self.chunk);
        if !last.is_empty() && self.to_writer.send(last).is_err() {
            return Err(self.writer_error());
        }
        let Sink { to_writer, writer, path, written, .. } = self;
        // The writing thread ends once it has written every chunk sent.
        drop(to_writer);
        match writer.map(JoinHandle::join) {
            Some(Ok(result)) => result.map(|()| written),
            _ => Err(writer_stopped(path)),
        }
    }

    /// Hands the chunk built to the writing thread, and starts another once one is free.
    fn hand_over(&mut self) -> io::Result<()> {
        let full = std::mem::take(&mut self.chunk);
        if self.to_writer.send(full).is_err() {
            return Err(self.writer_error());
        }
        match self.written_chunks.recv() {
            Ok(next) => self.chunk = next,
            Err(_) => return Err(self.writer_error()),
        }
        Ok(())
    }

    /// The error the writing thread stopped at (it stops at the first).
    fn writer_error(&mut self) -> io::Error {
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            _ => writer_stopped(self.path),
        }
    }

    fn count_packet(&mut self, commented: bool) {
        self.written.packets += 1;
        self.written.records += 1;
        self.written.commented += u64::from(commented);
    }

    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.chunk.len() + bytes.len() > OUTPUT_CHUNK_LEN && !self.chunk.is_empty() {
            self.hand_over()?;
        }
        self.chunk.extend_from_slice(bytes);
        Ok(())
    }

    fn put_padding(&mut self, len: usize) -> io::Result<()> {
        self.put([0u8; 3].get(..padding(len)).unwrap_or_default())
    }

    /// §3.5: code, length, the value, padding to 32 bits. `value` is at most `MAX_OPTION_VALUE_LEN`.
    fn put_option(&mut self, order: Order, code: u16, value: &[u8]) -> io::Result<()> {
        let len = u16::try_from(value.len()).unwrap_or(u16::MAX);
        self.put(&order.u16(code))?;
        self.put(&order.u16(len))?;
        self.put(value.get(..usize::from(len)).unwrap_or(value))?;
        self.put_padding(usize::from(len))
    }

    /// §4.1: a section header block of version 1.0, its length not given, with `comment`.
    fn new_section(&mut self, order: Order, comment: &str) -> io::Result<()> {
        let comment = fit(comment, MAX_OPTION_VALUE_LEN);
        let options = if comment.is_empty() { 0 } else { 2 * OPTION_HEADER_LEN + padded(comment.len()) };
        let total = (BLOCK_HEADER_LEN + 16 + options + BLOCK_TRAILER_LEN) as u32;
        self.put(&order.u32(SHB_TYPE))?;
        self.put(&order.u32(total))?;
        self.put(&order.u32(BYTE_ORDER_MAGIC))?;
        self.put(&order.u16(1))?;
        self.put(&order.u16(0))?;
        // Section Length -1: not specified.
        self.put(&[0xFF; 8])?;
        if !comment.is_empty() {
            self.put_option(order, OPT_COMMENT, comment.as_bytes())?;
            self.put_option(order, OPT_ENDOFOPT, &[])?;
        }
        self.put(&order.u32(total))
    }

    /// §4.2: an interface description block; if_tsresol 9 for nanoseconds, left out for the
    /// default 10^-6.
    fn new_interface(&mut self, order: Order, linktype: u16, snaplen: u32, nanoseconds: bool) -> io::Result<()> {
        let options = if nanoseconds { 2 * OPTION_HEADER_LEN + padded(1) } else { 0 };
        let total = (BLOCK_HEADER_LEN + 8 + options + BLOCK_TRAILER_LEN) as u32;
        self.put(&order.u32(IDB_TYPE))?;
        self.put(&order.u32(total))?;
        self.put(&order.u16(linktype))?;
        self.put(&[0, 0])?;
        self.put(&order.u32(snaplen))?;
        if nanoseconds {
            self.put_option(order, IF_TSRESOL, &[TSRESOL_NANOSECONDS])?;
            self.put_option(order, OPT_ENDOFOPT, &[])?;
        }
        self.put(&order.u32(total))
    }

    /// §4.3: an enhanced packet block of interface 0 with `comment` unless it is empty.
    /// Returns whether the comment was written.
    fn new_packet(&mut self, order: Order, ticks: u64, orig_len: u32, data: &[u8], comment: &str) -> io::Result<bool> {
        let fixed = BLOCK_HEADER_LEN + PACKET_FIELDS_LEN + padded(data.len()) + BLOCK_TRAILER_LEN;
        let room = MAX_RECORD_LEN.saturating_sub(fixed + 2 * OPTION_HEADER_LEN + 3);
        let comment = fit(comment, room);
        let options = if comment.is_empty() { 0 } else { 2 * OPTION_HEADER_LEN + padded(comment.len()) };
        let (Ok(total), Ok(caplen)) = (u32::try_from(fixed + options), u32::try_from(data.len())) else {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "a packet too long for a pcapng block"));
        };
        // Block type and length, interface 0, timestamp (high, low), captured and original length.
        let fields = [EPB_TYPE, total, 0, (ticks >> 32) as u32, ticks as u32, caplen, orig_len];
        let mut header = [0u8; BLOCK_HEADER_LEN + PACKET_FIELDS_LEN];
        for (at, value) in header.chunks_exact_mut(4).zip(fields) {
            at.copy_from_slice(&order.u32(value));
        }
        self.put(&header)?;
        self.put(data)?;
        if comment.is_empty() {
            // The data's padding and the trailing length, in one write.
            let mut tail = [0u8; 3 + BLOCK_TRAILER_LEN];
            if let Some(trailer) = tail.get_mut(3..) {
                trailer.copy_from_slice(&order.u32(total));
            }
            self.put(tail.get(3 - padding(data.len())..).unwrap_or_default())?;
            return Ok(false);
        }
        // The data's padding, the comment option's code and length (§3.5), in one write; `fit`
        // kept the comment within an option's length.
        let [code_0, code_1] = order.u16(OPT_COMMENT);
        let [len_0, len_1] = order.u16(u16::try_from(comment.len()).unwrap_or(u16::MAX));
        let opening = [0, 0, 0, code_0, code_1, len_0, len_1];
        self.put(opening.get(3 - padding(data.len())..).unwrap_or_default())?;
        self.put(comment.as_bytes())?;
        // The comment's padding, opt_endofopt (code and length 0) and the trailing length.
        let [total_0, total_1, total_2, total_3] = order.u32(total);
        let closing = [0, 0, 0, 0, 0, 0, 0, total_0, total_1, total_2, total_3];
        self.put(closing.get(3 - padding(comment.len())..).unwrap_or_default())?;
        Ok(true)
    }

    /// §4.1: a section header block as it is, with `comment` after its options and its Section
    /// Length -1 ("not specified": the comments change the section's length).
    fn copy_section_header(&mut self, raw: &[u8], order: Order, comment: &str) -> io::Result<()> {
        let mut shb = raw.to_vec();
        if let Some(section_length) = shb.get_mut(SHB_SECTION_LENGTH) {
            section_length.fill(0xFF);
        }
        self.copy_with_comment(&shb, SHB_OPTIONS_AT, order, comment).map(drop)
    }

    /// The block `raw` with an opt_comment after its options (§3.5): before its opt_endofopt,
    /// or after its last option and followed by an opt_endofopt. Both Block Total Length fields
    /// (§3.1) count what is added. `raw` unchanged, and false, when `comment` is empty or the
    /// block has no room for options at `options_at`.
    fn copy_with_comment(&mut self, raw: &[u8], options_at: usize, order: Order, comment: &str) -> io::Result<bool> {
        let options_end = raw.len().saturating_sub(BLOCK_TRAILER_LEN);
        if options_at > options_end || options_at < BLOCK_HEADER_LEN {
            self.put(raw)?;
            return Ok(false);
        }
        let (insert_at, has_end) = end_of_options(raw, options_at, options_end, order);
        let end_len = if has_end { 0 } else { OPTION_HEADER_LEN };
        // The block stays within what the reader reads back.
        let room = MAX_RECORD_LEN.saturating_sub(raw.len() + OPTION_HEADER_LEN + end_len + 3);
        let comment = fit(comment, room);
        let total = u32::try_from(raw.len() + OPTION_HEADER_LEN + padded(comment.len()) + end_len);
        let parts = (raw.get(..4), raw.get(BLOCK_HEADER_LEN..insert_at), raw.get(insert_at..options_end));
        let (Ok(total), (Some(block_type), Some(before), Some(after))) = (total, parts) else {
            self.put(raw)?;
            return Ok(false);
        };
        if comment.is_empty() {
            self.put(raw)?;
            return Ok(false);
        }
        self.put(block_type)?;
        self.put(&order.u32(total))?;
        self.put(before)?;
        self.put_option(order, OPT_COMMENT, comment.as_bytes())?;
        if !has_end {
            self.put_option(order, OPT_ENDOFOPT, &[])?;
        }
        self.put(after)?;
        self.put(&order.u32(total))?;
        Ok(true)
    }
}

/// The writing thread of a `Sink`: empties `file` (at `path`), writes each chunk sent from its
/// start, and gives the chunk back to be built again. Stops at the first error.
///
/// An existing file is cut to its first byte rather than emptied, and cut at the end of what
/// was written at the end: ext4 writes a file emptied and written again to disk when it is
/// closed (its `auto_da_alloc`), and that close took as long as the whole copy (0.15 s for
/// 430 MB). The first chunk overwrites the byte. Only a regular file is cut (not /dev/null, a
/// pipe or a terminal).
fn write_chunks(mut file: File, path: &Path, full_chunks: &Receiver<Vec<u8>>, give_back: &Sender<Vec<u8>>) -> io::Result<()> {
    let metadata = file.metadata().map_err(|e| output_error(path, e))?;
    let regular = metadata.is_file();
    if regular && metadata.len() > 1 {
        file.set_len(1).map_err(|e| output_error(path, e))?;
    }
    let mut len = 0u64;
    let mut written = Ok(());
    for mut chunk in full_chunks {
        written = file.write_all(&chunk);
        if written.is_err() {
            break;
        }
        len += chunk.len() as u64;
        chunk.clear();
        // Unused when the copy is over.
        let _ = give_back.send(chunk);
    }
    let cut = if regular { file.set_len(len) } else { Ok(()) };
    written.and(cut).map_err(|e| output_error(path, e))
}

/// An error writing the output, naming it.
fn output_error(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// The writing thread ended without saying why (it panicked).
fn writer_stopped(path: &Path) -> io::Error {
    io::Error::other(format!("{}: the thread writing it stopped", path.display()))
}

/// An input that cannot be opened, as an `io::Error` carrying the reader's `ReadError`.
fn open_error(e: ReadError) -> io::Error {
    let kind = match e {
        ReadError::NotFound { .. } => io::ErrorKind::NotFound,
        ReadError::PermissionDenied { .. } => io::ErrorKind::PermissionDenied,
        ReadError::Io { .. } => io::ErrorKind::Other,
        ReadError::IsDirectory { .. } => io::ErrorKind::InvalidInput,
        ReadError::Gzip { .. } | ReadError::Empty { .. } | ReadError::NotACapture { .. } | ReadError::BadHeader { .. } => {
            io::ErrorKind::InvalidData
        }
    };
    io::Error::new(kind, e)
}

fn stopped(e: InputStopped) -> io::Error {
    let kind = match e.stop {
        ReadStop::Truncated { .. } | ReadStop::GzipCut { .. } => io::ErrorKind::UnexpectedEof,
        ReadStop::Corrupt { .. } => io::ErrorKind::InvalidData,
        ReadStop::End | ReadStop::IoError { .. } => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

/// Creating the output truncates it: it must not be one of the inputs.
fn refuse_overwriting_an_input(inputs: &[String], output: &Path) -> io::Result<()> {
    let Ok(output_file) = std::fs::canonicalize(output) else { return Ok(()) };
    let overwritten =
        inputs.iter().filter(|path| path.as_str() != "-").any(|path| std::fs::canonicalize(path).is_ok_and(|p| p == output_file));
    if overwritten {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: is one of the captures read; write the annotated capture to another file", output.display()),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::CaptureInfo;
    use pcap_parser::pcapng::{parse_block_be, parse_block_le, parse_option_be, parse_option_le, Block, PcapNGOption};
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::process::Command;

    const SECTION: &str = "pcapq 0.1.0: annotated";

    fn temp_path(name: &str) -> String {
        let dir = std::env::temp_dir().join(format!("pcapq-annotate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name).to_string_lossy().into_owned()
    }

    fn temp_file(name: &str, bytes: &[u8]) -> String {
        let path = temp_path(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    fn word(be: bool, v: u32) -> [u8; 4] {
        Order { big_endian: be }.u32(v)
    }

    fn half(be: bool, v: u16) -> [u8; 2] {
        Order { big_endian: be }.u16(v)
    }

    /// A classic pcap; each record is (seconds, fraction, original length, data).
    fn pcap(be: bool, nanoseconds: bool, linktype: u32, records: &[(u32, u32, u32, &[u8])]) -> Vec<u8> {
        let mut file = word(be, if nanoseconds { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }).to_vec();
        file.extend(half(be, 2));
        file.extend(half(be, 4));
        for v in [0, 0, 65_535, linktype] {
            file.extend(word(be, v));
        }
        for &(seconds, fraction, orig_len, data) in records {
            for v in [seconds, fraction, data.len() as u32, orig_len] {
                file.extend(word(be, v));
            }
            file.extend_from_slice(data);
        }
        file
    }

    fn pad(bytes: &mut Vec<u8>) {
        bytes.resize(bytes.len().div_ceil(4) * 4, 0);
    }

    /// A pcapng block; `body` is padded to 32 bits.
    fn ng(be: bool, block_type: u32, body: &[u8]) -> Vec<u8> {
        let mut body = body.to_vec();
        pad(&mut body);
        let total = (12 + body.len()) as u32;
        [word(be, block_type).as_slice(), &word(be, total), &body, &word(be, total)].concat()
    }

    fn option(be: bool, code: u16, value: &[u8]) -> Vec<u8> {
        let mut out = [half(be, code).as_slice(), &half(be, value.len() as u16), value].concat();
        pad(&mut out);
        out
    }

    fn end(be: bool) -> Vec<u8> {
        option(be, 0, &[])
    }

    fn shb(be: bool, section_length: i64, options: &[u8]) -> Vec<u8> {
        let length = if be { section_length.to_be_bytes() } else { section_length.to_le_bytes() };
        let body = [word(be, BYTE_ORDER_MAGIC).as_slice(), &half(be, 1), &half(be, 0), &length, options].concat();
        ng(be, SHB_TYPE, &body)
    }

    fn idb(be: bool, linktype: u16, options: &[u8]) -> Vec<u8> {
        ng(be, IDB_TYPE, &[half(be, linktype).as_slice(), &[0, 0], &word(be, 0), options].concat())
    }

    fn epb(be: bool, interface: u32, ticks: u64, orig_len: u32, data: &[u8], options: &[u8]) -> Vec<u8> {
        let mut body = Vec::new();
        for v in [interface, (ticks >> 32) as u32, ticks as u32, data.len() as u32, orig_len] {
            body.extend(word(be, v));
        }
        body.extend_from_slice(data);
        pad(&mut body);
        body.extend_from_slice(options);
        ng(be, EPB_TYPE, &body)
    }

    fn spb(be: bool, data: &[u8]) -> Vec<u8> {
        ng(be, 3, &[word(be, data.len() as u32).as_slice(), data].concat())
    }

    fn opb(be: bool, interface: u16, ticks: u64, data: &[u8]) -> Vec<u8> {
        let mut body = [half(be, interface), half(be, 0)].concat();
        for v in [(ticks >> 32) as u32, ticks as u32, data.len() as u32, data.len() as u32] {
            body.extend(word(be, v));
        }
        body.extend_from_slice(data);
        ng(be, 2, &body)
    }

    /// Frame, time_ns, link type, original length and bytes of one packet.
    type Packet = (u64, i64, u32, u32, Vec<u8>);

    fn read_back(path: &str) -> (Vec<Packet>, ReadStop, CaptureInfo) {
        let mut reader = CaptureReader::open(path).ok().unwrap();
        let mut packets = Vec::new();
        let stop = reader.for_each_packet(|p| packets.push((p.frame, p.time_ns, p.linktype, p.orig_len, p.data.to_vec())));
        (packets, stop, reader.info.clone())
    }

    /// Annotates `inputs` into `output` with the comments of `picks`; also returns the
    /// (file, frame) pairs asked about.
    fn annotate(inputs: &[String], output: &str, picks: &[((u32, u64), &str)]) -> (io::Result<Written>, Vec<(u32, u64)>) {
        let asked = RefCell::new(Vec::new());
        let picks: HashMap<(u32, u64), String> = picks.iter().map(|(at, text)| (*at, text.to_string())).collect();
        let lookup = |file: u32, frame: u64, out: &mut String| {
            asked.borrow_mut().push((file, frame));
            if let Some(text) = picks.get(&(file, frame)) {
                out.push_str(text);
            }
        };
        let result = write_annotated(inputs, Path::new(output), &Comments { packet: &lookup, section: SECTION });
        (result, asked.into_inner())
    }

    /// One block of an output, as pcap-parser reads it.
    struct Seen {
        block_type: u32,
        big_endian: bool,
        /// Option codes and values, without padding.
        options: Vec<(u16, Vec<u8>)>,
        section_length: Option<i64>,
        raw: Vec<u8>,
    }

    impl Seen {
        fn comments(&self) -> Vec<String> {
            self.options.iter().filter(|o| o.0 == OPT_COMMENT).map(|o| String::from_utf8(o.1.clone()).unwrap()).collect()
        }

        fn codes(&self) -> Vec<u16> {
            self.options.iter().map(|o| o.0).collect()
        }
    }

    fn options_of(options: &[PcapNGOption<'_>]) -> Vec<(u16, Vec<u8>)> {
        options.iter().map(|o| (o.code.0, o.value()[..usize::from(o.len)].to_vec())).collect()
    }

    fn blocks_of(bytes: &[u8]) -> Vec<Seen> {
        let mut rest = bytes;
        let mut be = false;
        let mut seen = Vec::new();
        while !rest.is_empty() {
            if rest[..4] == word(false, SHB_TYPE) {
                be = rest[8..12] == [0x1a, 0x2b, 0x3c, 0x4d];
            }
            let (next, block) = if be { parse_block_be(rest) } else { parse_block_le(rest) }.unwrap();
            let raw = rest[..rest.len() - next.len()].to_vec();
            let block_type = Order { big_endian: be }.read_u16(&raw, if be { 2 } else { 0 }).unwrap() as u32;
            let (options, section_length) = match &block {
                Block::SectionHeader(shb) => (options_of(&shb.options), Some(shb.section_len)),
                Block::InterfaceDescription(idb) => (options_of(&idb.options), None),
                Block::EnhancedPacket(epb) => (options_of(&epb.options), None),
                // The options of an obsolete packet block follow its padded data.
                Block::Unknown(unknown) if block_type == 2 => {
                    let caplen = Order { big_endian: be }.read_u16(unknown.data, if be { 14 } else { 12 }).unwrap();
                    let mut at = &unknown.data[20 + padded(usize::from(caplen))..];
                    let mut options = Vec::new();
                    while !at.is_empty() {
                        let (next, o) = if be { parse_option_be::<PcapError<&[u8]>>(at) } else { parse_option_le(at) }.unwrap();
                        options.push((o.code.0, o.value()[..usize::from(o.len)].to_vec()));
                        at = next;
                    }
                    (options, None)
                }
                _ => (Vec::new(), None),
            };
            seen.push(Seen { block_type, big_endian: be, options, section_length, raw });
            rest = next;
        }
        seen
    }

    fn records() -> Vec<(u32, u32, u32, &'static [u8])> {
        vec![
            (1_700_000_000, 1, 60, &[1; 60]),
            (1_700_000_000, 999_999, 1514, &[2; 64]),
            (1_700_000_001, 5, 3, &[3, 3, 3]),
            (1_700_000_001, 6, 0, &[]),
            (1_700_000_002, 7, 41, &[5; 41]),
        ]
    }

    #[test]
    fn test_pcap_records_become_enhanced_packets_commented_on_chosen_frames() {
        let input = temp_file("micro.pcap", &pcap(false, false, 1, &records()));
        let output = temp_path("micro.pcapng");
        let picks = [((0, 2), "retransmission"), ((0, 3), ""), ((0, 5), "reset")];
        let (written, asked) = annotate(std::slice::from_ref(&input), &output, &picks);
        assert_eq!(written.unwrap(), Written { packets: 5, commented: 2, records: 5 });
        assert_eq!(asked, (1..=5).map(|frame| (0, frame)).collect::<Vec<_>>());

        let (before, _, _) = read_back(&input);
        let (after, stop, info) = read_back(&output);
        assert_eq!((after, stop), (before, ReadStop::End));
        assert_eq!(info.format, Some(Format::PcapNg));
        let notes = info.notes.unwrap();
        assert_eq!(notes.packet_comments, vec![(2, "retransmission".to_string()), (5, "reset".to_string())]);
        assert_eq!(notes.comments, vec![SECTION.to_string()]);

        let blocks = blocks_of(&std::fs::read(&output).unwrap());
        let types: Vec<u32> = blocks.iter().map(|b| b.block_type).collect();
        assert_eq!(types, [SHB_TYPE & 0xffff, IDB_TYPE, EPB_TYPE, EPB_TYPE, EPB_TYPE, EPB_TYPE, EPB_TYPE]);
        assert!(blocks.iter().all(|b| !b.big_endian));
        assert_eq!(blocks[0].comments(), [SECTION]);
        assert_eq!(blocks[0].section_length, Some(-1));
        // Microseconds are the default resolution: no if_tsresol.
        assert!(blocks[1].options.is_empty());
        assert_eq!(blocks[3].codes(), [OPT_COMMENT, OPT_ENDOFOPT]);
        // The empty comment is not written.
        assert!(blocks[4].options.is_empty());
    }

    #[test]
    fn test_nanosecond_big_endian_pcap_stays_nanosecond_and_big_endian() {
        let records = [(1_700_000_000, 123_456_789, 20, [0x45; 20].as_slice()), (1_700_000_000, 999_999_999, 28, &[0x45; 28])];
        let input = temp_file("nano-be.pcap", &pcap(true, true, 101, &records));
        let output = temp_path("nano-be.pcapng");
        let (written, _) = annotate(std::slice::from_ref(&input), &output, &[((0, 2), "late")]);
        assert_eq!(written.unwrap(), Written { packets: 2, commented: 1, records: 2 });
        let (before, _, _) = read_back(&input);
        let (after, stop, _) = read_back(&output);
        assert_eq!(before[0].1, 1_700_000_000_123_456_789);
        assert_eq!((after, stop), (before, ReadStop::End));

        let blocks = blocks_of(&std::fs::read(&output).unwrap());
        assert!(blocks.iter().all(|b| b.big_endian));
        assert_eq!(blocks[1].options, [(IF_TSRESOL, vec![9]), (OPT_ENDOFOPT, vec![])]);
        assert_eq!(blocks[3].comments(), ["late"]);
    }

    /// Two sections: a little-endian one with two interfaces and every kind of block, then a
    /// big-endian one whose SHB gives its length. Frames 1 to 8 as the reader numbers them.
    fn two_sections() -> Vec<u8> {
        with_unknown_interface(two_sections_for_wireshark())
    }

    /// `two_sections` with an EPB of an interface its section does not have after the custom
    /// block: no frame number for the reader, a damaged file for Wireshark.
    fn with_unknown_interface(file: Vec<u8>) -> Vec<u8> {
        let blocks = blocks_of(&file);
        let at: usize = blocks[..8].iter().map(|b| b.raw.len()).sum();
        let unknown = epb(false, 5, 1_700_000_001_000_000, 4, &[9; 4], &[]);
        [&file[..at], &unknown, &file[at..]].concat()
    }

    fn two_sections_for_wireshark() -> Vec<u8> {
        let mut file = shb(false, -1, &[option(false, 4, b"tcpdump"), option(false, 1, b"captured on eth0"), end(false)].concat());
        file.extend(idb(false, 1, &[]));
        file.extend(idb(false, 101, &[option(false, 9, &[9]), end(false)].concat()));
        file.extend(epb(false, 0, 1_700_000_000_000_000, 60, &[0xaa; 60], &[option(false, 1, b"first look"), end(false)].concat()));
        file.extend(epb(false, 1, 1_700_000_000_123_456_789, 1500, &[0x45; 21], &[]));
        file.extend(spb(false, &[0x45; 33]));
        file.extend(ng(false, 4, &[0, 0, 0, 0]));
        file.extend(ng(false, 0x0000_0bad, &[word(false, 32473).as_slice(), b"note"].concat()));
        file.extend(opb(false, 1, 1_700_000_001_500_000_000, &[0x45, 0, 0]));
        file.extend(ng(false, 9, b"__REALTIME_TIMESTAMP=1700000001600000\nMESSAGE=x\n"));
        // Options without opt_endofopt.
        file.extend(epb(false, 0, 1_700_000_002_000_000, 7, &[0x11; 7], &option(false, 1, b"no end marker")));
        let mut second = idb(true, 1, &[]);
        second.extend(epb(true, 0, 1_700_000_003_000_000, 14, &[0x22; 14], &[]));
        file.extend(shb(true, second.len() as i64, &[]));
        file.extend(second);
        file
    }

    #[test]
    fn test_pcapng_blocks_keep_their_frame_numbers_and_take_comments() {
        let input = temp_file("two-sections.pcapng", &two_sections());
        let output = temp_path("two-sections-annotated.pcapng");
        let picks = [
            ((0, 1), "ours 1"),
            ((0, 3), "on a simple packet"),
            ((0, 4), "on a custom block"),
            ((0, 5), "ours 5"),
            ((0, 7), "ours 7"),
            ((0, 8), "ours 8"),
        ];
        let (written, asked) = annotate(std::slice::from_ref(&input), &output, &picks);
        assert_eq!(written.unwrap(), Written { packets: 6, commented: 4, records: 8 });
        // Neither the simple packet (3) nor the custom block (4) can carry a comment.
        assert_eq!(asked, [(0, 1), (0, 2), (0, 5), (0, 7), (0, 8)]);

        let (before, _, info_before) = read_back(&input);
        let (after, stop, info) = read_back(&output);
        assert_eq!(before.iter().map(|p| p.0).collect::<Vec<_>>(), [1, 2, 3, 5, 7, 8]);
        assert_eq!((after, stop), (before, ReadStop::End));
        assert_eq!((info.records, info.sections, info.interfaces), (info_before.records, 2, 3));
        let comments: Vec<(u64, String)> = info.notes.unwrap().packet_comments;
        let expected = [(1, "first look"), (1, "ours 1"), (7, "no end marker"), (7, "ours 7"), (8, "ours 8")];
        assert_eq!(comments, expected.map(|(frame, text)| (frame, text.to_string())));

        let original = blocks_of(&std::fs::read(&input).unwrap());
        let blocks = blocks_of(&std::fs::read(&output).unwrap());
        assert_eq!(blocks.iter().map(|b| b.block_type).collect::<Vec<_>>(), original.iter().map(|b| b.block_type).collect::<Vec<_>>());
        // The section header keeps its options; the section comment comes last.
        assert_eq!(blocks[0].codes(), [4, OPT_COMMENT, OPT_COMMENT, OPT_ENDOFOPT]);
        assert_eq!(blocks[0].comments(), ["captured on eth0", SECTION]);
        // An existing comment stays before ours.
        assert_eq!(blocks[3].comments(), ["first look", "ours 1"]);
        assert_eq!(blocks[3].codes().last(), Some(&OPT_ENDOFOPT));
        assert_eq!(blocks[9].comments(), ["ours 5"]);
        assert_eq!(blocks[11].codes(), [OPT_COMMENT, OPT_COMMENT, OPT_ENDOFOPT]);
        assert_eq!(blocks[11].comments(), ["no end marker", "ours 7"]);
        // The second section stays big-endian, its length now "not specified".
        assert!(blocks[12..].iter().all(|b| b.big_endian) && blocks[..12].iter().all(|b| !b.big_endian));
        let second_length = (original[13].raw.len() + original[14].raw.len()) as i64;
        assert_eq!((original[12].section_length, blocks[12].section_length), (Some(second_length), Some(-1)));
        assert_eq!(blocks[12].comments(), [SECTION]);
        assert_eq!(blocks[14].comments(), ["ours 8"]);
        for untouched in [1, 2, 4, 5, 6, 7, 8, 10, 13] {
            assert_eq!(blocks[untouched].raw, original[untouched].raw, "block {untouched}");
        }
    }

    #[test]
    fn test_pcapng_without_comments_is_copied_byte_for_byte() {
        let mut file = two_sections();
        // The second section header's length becomes -1 once it may change.
        let at = blocks_of(&file)[..12].iter().map(|b| b.raw.len()).sum::<usize>() + 16;
        assert_eq!(file[at - 16..at - 12], word(true, SHB_TYPE));
        file[at..at + 8].fill(0xff);
        let input = temp_file("plain.pcapng", &file);
        let output = temp_path("plain-copy.pcapng");
        let asked = RefCell::new(0);
        let lookup = |_: u32, _: u64, _: &mut String| *asked.borrow_mut() += 1;
        let written = write_annotated(&[input], Path::new(&output), &Comments { packet: &lookup, section: "" }).unwrap();
        assert_eq!(written, Written { packets: 6, commented: 0, records: 8 });
        assert_eq!(*asked.borrow(), 5);
        assert!(std::fs::read(&output).unwrap() == file);
    }

    #[test]
    fn test_gzip_inputs_are_read_through() {
        let plain = pcap(false, false, 1, &records());
        let ng_plain = two_sections();
        for (name, bytes) in [("micro.pcap.gz", gzip(&plain)), ("sections.pcapng.gz", gzip(&ng_plain))] {
            let input = temp_file(name, &bytes);
            let output = temp_path(&format!("{name}.pcapng"));
            let (written, _) = annotate(std::slice::from_ref(&input), &output, &[((0, 2), "second")]);
            assert_eq!(written.unwrap().commented, 1, "{name}");
            let (before, _, _) = read_back(&input);
            let (after, stop, info) = read_back(&output);
            assert_eq!((after, stop), (before, ReadStop::End), "{name}");
            assert!(!info.gzip);
            assert!(info.notes.unwrap().packet_comments.contains(&(2, "second".to_string())), "{name}");
        }
    }

    #[test]
    fn test_two_inputs_follow_one_another_in_one_file() {
        let first = temp_file("first.pcap", &pcap(false, false, 1, &records()[..3]));
        let mut second = shb(false, -1, &[]);
        second.extend(idb(false, 1, &[]));
        second.extend(epb(false, 0, 1_700_000_010_000_000, 10, &[7; 10], &[]));
        second.extend(epb(false, 0, 1_700_000_011_000_000, 11, &[8; 11], &[]));
        let second = temp_file("second.pcapng", &second);
        let output = temp_path("both.pcapng");
        let inputs = [first.clone(), second.clone()];
        let (written, asked) = annotate(&inputs, &output, &[((0, 2), "first file, frame 2"), ((1, 1), "second file, frame 1")]);
        assert_eq!(written.unwrap(), Written { packets: 5, commented: 2, records: 5 });
        assert_eq!(asked, [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2)]);

        let (after, stop, info) = read_back(&output);
        let (one, _, _) = read_back(&first);
        let (two, _, _) = read_back(&second);
        let expected: Vec<Packet> = one.into_iter().chain(two.into_iter().map(|p| (p.0 + 3, p.1, p.2, p.3, p.4))).collect();
        assert_eq!((after, stop), (expected, ReadStop::End));
        let notes = info.notes.unwrap();
        assert_eq!(notes.packet_comments, [(2, "first file, frame 2".to_string()), (4, "second file, frame 1".to_string())]);
        let blocks = blocks_of(&std::fs::read(&output).unwrap());
        let sections: Vec<&Seen> = blocks.iter().filter(|b| b.block_type == SHB_TYPE & 0xffff).collect();
        assert_eq!(sections.len(), 2);
        assert!(sections.iter().all(|s| s.comments() == [SECTION]));
    }

    fn stopped_of(e: &io::Error) -> &InputStopped {
        e.get_ref().and_then(|inner| inner.downcast_ref::<InputStopped>()).unwrap()
    }

    #[test]
    fn test_truncated_input_keeps_the_packets_before_the_break() {
        let whole = pcap(false, false, 1, &records());
        // Record 3 starts at 24 + (16 + 60) + (16 + 64) = 180; cut inside its header.
        let input = temp_file("cut.pcap", &whole[..190]);
        let output = temp_path("cut.pcapng");
        let (result, _) = annotate(&[input], &output, &[((0, 1), "kept")]);
        let e = result.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let stop = stopped_of(&e);
        assert_eq!(stop.stop, ReadStop::Truncated { offset: 180, frame: 3 });
        assert_eq!(stop.written, Written { packets: 2, commented: 1, records: 2 });
        let said = "cut.pcap: the capture is cut short: record 3 at byte 180 is incomplete; wrote the 2 records before it";
        assert!(e.to_string().ends_with(said), "{e}");
        let (after, end, _) = read_back(&output);
        assert_eq!(after.len(), 2);
        assert_eq!(end, ReadStop::End);

        // pcapng cut inside its fifth frame, after a first whole input.
        let sections = two_sections();
        let first = temp_file("whole-first.pcap", &whole);
        let input = temp_file("cut-sections.pcapng", &sections[..sections.len() - 20]);
        let (result, _) = annotate(&[first, input], &output, &[]);
        let e = result.unwrap_err();
        let stop = stopped_of(&e);
        assert!(matches!(stop.stop, ReadStop::Truncated { frame: 8, .. }), "{:?}", stop.stop);
        assert_eq!(stop.written, Written { packets: 5 + 5, commented: 0, records: 5 + 7 });
        let (after, end, _) = read_back(&output);
        assert_eq!((after.len(), end), (10, ReadStop::End));
    }

    #[test]
    fn test_gzip_cut_short_keeps_what_was_inflated() {
        let records: Vec<(u32, u32, u32, &[u8])> = (0..20_000).map(|i| (1_700_000_000 + i, 0, 40, [0x45; 40].as_slice())).collect();
        let gz = gzip(&pcap(false, false, 101, &records));
        let input = temp_file("cut.pcap.gz", &gz[..gz.len() / 2]);
        let output = temp_path("cut-gz.pcapng");
        let (result, _) = annotate(&[input], &output, &[((0, 1), "first")]);
        let e = result.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let stop = stopped_of(&e);
        assert!(matches!(stop.stop, ReadStop::GzipCut { .. }), "{:?}", stop.stop);
        assert!(e.to_string().contains("its gzip data ends early; wrote the "), "{e}");
        let (after, end, _) = read_back(&output);
        assert_eq!((after.len() as u64, end), (stop.written.packets, ReadStop::End));
        assert!(stop.written.packets > 0 && stop.written.packets < 20_000);
    }

    #[test]
    fn test_blocks_larger_than_the_read_buffer_are_copied_whole() {
        let big: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let mut file = shb(false, -1, &[]);
        file.extend(idb(false, 1, &[]));
        file.extend(epb(false, 0, 1, 300_000, &big, &[]));
        file.extend(epb(false, 0, 2, 4, &[1; 4], &[]));
        let inputs = [temp_file("big.pcapng", &file), temp_file("big.pcap", &pcap(true, false, 1, &[(1, 0, 300_000, &big)]))];
        let output = temp_path("big-annotated.pcapng");
        let (written, _) = annotate(&inputs, &output, &[((0, 1), "big"), ((0, 2), "small"), ((1, 1), "big too")]);
        assert_eq!(written.unwrap(), Written { packets: 3, commented: 3, records: 3 });
        let (after, end, info) = read_back(&output);
        assert_eq!(end, ReadStop::End);
        assert_eq!(after.iter().map(|p| p.4.len()).collect::<Vec<_>>(), [300_000, 4, 300_000]);
        assert!(after[0].4 == big && after[2].4 == big);
        let comments = info.notes.unwrap().packet_comments;
        assert_eq!(comments, [(1, "big".to_string()), (2, "small".to_string()), (3, "big too".to_string())]);
    }

    #[test]
    fn test_damaged_block_is_corrupt_and_says_where() {
        let mut file = shb(false, -1, &[]);
        file.extend(idb(false, 1, &[]));
        file.extend(epb(false, 0, 1, 4, &[1; 4], &[]));
        let offset = file.len();
        let mut damaged = epb(false, 0, 2, 4, &[2; 4], &[]);
        damaged[4..8].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
        file.extend(damaged);
        let input = temp_file("damaged.pcapng", &file);
        let output = temp_path("damaged-annotated.pcapng");
        let (result, _) = annotate(&[input], &output, &[]);
        let e = result.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(matches!(&stopped_of(&e).stop, ReadStop::Corrupt { offset: o, frame: 2, .. } if *o == offset as u64), "{e}");
        let (after, end, _) = read_back(&output);
        assert_eq!((after.len(), end), (1, ReadStop::End));
    }

    #[test]
    fn test_input_that_cannot_be_opened_leaves_no_output() {
        let output = temp_path("never-written.pcapng");
        let (result, _) = annotate(&["/nonexistent/dump.pcap".to_string()], &output, &[]);
        let e = result.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(matches!(e.get_ref().and_then(|inner| inner.downcast_ref::<ReadError>()), Some(ReadError::NotFound { .. })));
        assert!(!Path::new(&output).exists());
        let text = temp_file("notes.txt", b"12:00:00.000 IP 10.0.0.1.5555 > 10.0.0.2.80: Flags [S]\n");
        let (result, _) = annotate(&[text], &output, &[]);
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert!(!Path::new(&output).exists());
    }

    #[test]
    fn test_output_that_is_an_input_is_refused() {
        let bytes = pcap(false, false, 1, &records());
        let input = temp_file("self.pcap", &bytes);
        let (result, _) = annotate(std::slice::from_ref(&input), &input, &[]);
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::InvalidInput);
        assert_eq!(std::fs::read(&input).unwrap(), bytes);
    }

    #[test]
    fn test_comment_longer_than_an_option_is_cut_between_characters() {
        let input = temp_file("long.pcap", &pcap(false, false, 1, &records()[..1]));
        let output = temp_path("long.pcapng");
        let long = "é".repeat(40_000);
        let (written, _) = annotate(&[input], &output, &[((0, 1), &long)]);
        assert_eq!(written.unwrap().commented, 1);
        let blocks = blocks_of(&std::fs::read(&output).unwrap());
        let comment = &blocks[2].comments()[0];
        assert_eq!(comment.len(), 65_534);
        assert!(long.starts_with(comment.as_str()));
        assert_eq!(fit("aé", 2), "a");
    }

    /// Times reading and annotating a million packets, pcap then pcapng:
    /// `cargo test --release --lib annotate::tests::test_speed -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn test_speed_of_a_million_packets() {
        let mut file = pcap(false, false, 1, &[]);
        for i in 0..1_000_000u32 {
            for v in [1_700_000_000 + i / 1000, i % 1000, 60, 60] {
                file.extend(word(false, v));
            }
            file.extend_from_slice(&[0x45; 60]);
        }
        let pcap_path = temp_file("million.pcap", &file);
        drop(file);
        let pcapng_path = temp_path("million.pcapng");
        let every_thousandth = |_: u32, frame: u64, out: &mut String| {
            if frame.is_multiple_of(1000) {
                out.push_str("a comment");
            }
        };
        let comments = Comments { packet: &every_thousandth, section: SECTION };
        write_annotated(std::slice::from_ref(&pcap_path), Path::new(&pcapng_path), &comments).unwrap();
        for input in [&pcap_path, &pcapng_path] {
            let started = std::time::Instant::now();
            let mut reader = CaptureReader::open(input).ok().unwrap();
            let mut bytes = 0usize;
            reader.for_each_packet(|p| bytes += p.data.len());
            let read = started.elapsed();
            let started = std::time::Instant::now();
            let output = temp_path("million-out.pcapng");
            let written = write_annotated(std::slice::from_ref(input), Path::new(&output), &comments).unwrap();
            let annotated = started.elapsed();
            assert_eq!((written.packets, written.commented), (1_000_000, 1000));
            eprintln!("{input}: read {read:?}, annotated {annotated:?} ({bytes} bytes of packets)");
        }
        for path in [pcap_path, pcapng_path, temp_path("million-out.pcapng")] {
            std::fs::remove_file(path).unwrap();
        }
    }

    /// Runs `tool` with `args`; its standard output.
    fn run(tool: &str, args: &[&str]) -> String {
        let out = Command::new(tool).args(args).output().unwrap();
        assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn tool_exists(tool: &str) -> bool {
        Command::new(tool).arg("-v").output().is_ok_and(|out| out.status.success())
    }

    /// Frame number → its comments as tshark prints them (several joined by ",").
    fn tshark_comments(path: &str) -> Vec<(u64, String)> {
        let fields = run("tshark", &["-r", path, "-T", "fields", "-e", "frame.number", "-e", "frame.comment"]);
        fields
            .lines()
            .map(|line| {
                let (number, comment) = line.split_once('\t').unwrap();
                (number.parse().unwrap(), comment.to_string())
            })
            .collect()
    }

    #[test]
    fn test_wireshark_tools_see_the_comments_on_their_frames() {
        if !["tshark", "capinfos", "editcap"].iter().all(|tool| tool_exists(tool)) {
            eprintln!("skipped: tshark, capinfos or editcap is missing");
            return;
        }
        let shipped = format!("{}/captures/accept_queue_overflow.pcap", env!("CARGO_MANIFEST_DIR"));
        let (packets, _, _) = read_back(&shipped);
        let count = packets.len() as u64;
        // The same capture as pcapng, its frame 3 with a comment of its own.
        let as_pcapng = temp_path("shipped.pcapng");
        run("editcap", &["-F", "pcapng", "-a", "3:kept from the capture", &shipped, &as_pcapng]);
        let nanoseconds = temp_file("nano-be-tools.pcap", &pcap(true, true, 101, &[(1_700_000_000, 123_456_789, 20, &[0x45; 20])]));
        let output = temp_path("shipped-annotated.pcapng");
        let picks =
            [((0, 1), "first SYN"), ((0, count), "last one"), ((1, 3), "ours after it"), ((1, 5), "Überlauf ✓"), ((2, 1), "nanoseconds")];
        let inputs = [shipped.clone(), as_pcapng, nanoseconds];
        let (written, _) = annotate(&inputs, &output, &picks);
        assert_eq!(written.unwrap(), Written { packets: 2 * count + 1, commented: 5, records: 2 * count + 1 });

        let seen = tshark_comments(&output);
        assert_eq!(seen.len() as u64, 2 * count + 1);
        let expected = |frame: u64| match frame {
            1 => "first SYN",
            f if f == count => "last one",
            f if f == count + 3 => "kept from the capture,ours after it",
            f if f == count + 5 => "Überlauf ✓",
            f if f == 2 * count + 1 => "nanoseconds",
            _ => "",
        };
        for (index, (frame, comment)) in seen.iter().enumerate() {
            assert_eq!(*frame, index as u64 + 1);
            assert_eq!(comment, expected(*frame), "frame {frame}");
        }
        let filtered = run("tshark", &["-r", &output, "-Y", "frame.comment contains \"SYN\"", "-T", "fields", "-e", "frame.number"]);
        assert_eq!(filtered.trim(), "1");
        let time = run("tshark", &["-r", &output, "-Y", "frame.comment == \"nanoseconds\"", "-T", "fields", "-e", "frame.time_epoch"]);
        assert_eq!(time.trim(), "1700000000.123456789");

        // Every kind of block and a big-endian section: Wireshark numbers the frames as the reader does.
        let sections = temp_file("sections-for-tools.pcapng", &two_sections_for_wireshark());
        let output_sections = temp_path("sections-for-tools-annotated.pcapng");
        let picks = [((0, 1), "ours 1"), ((0, 2), "ours 2"), ((0, 5), "ours 5"), ((0, 7), "ours 7"), ((0, 8), "ours 8")];
        let (written, _) = annotate(&[sections], &output_sections, &picks);
        assert_eq!(written.unwrap(), Written { packets: 6, commented: 5, records: 8 });
        let expected = ["first look,ours 1", "ours 2", "", "", "ours 5", "", "no end marker,ours 7", "ours 8"];
        let expected: Vec<(u64, String)> = (1..).zip(expected.map(String::from)).collect();
        assert_eq!(tshark_comments(&output_sections), expected);

        let info = run("capinfos", &[&output]);
        assert!(info.contains("pcapng"), "{info}");
        assert!(info.lines().any(|l| l.starts_with("Number of packets:") && l.ends_with(&format!(" {}", 2 * count + 1))), "{info}");
        assert!(info.contains(&format!("Capture comment:     {SECTION}")), "{info}");
        assert!(info.contains("nanoseconds (9)"), "{info}");
    }
}
