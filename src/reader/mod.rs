//! Reading captures: classic pcap and pcapng (through the `pcap-parser` crate), gzip, stdin;
//! standard input and a file still being written read as they arrive (`live`).
//!
//! The reader streams: it holds one buffer of `BUFFER_LEN` bytes (grown, up to `MAX_RECORD_LEN`,
//! only for a record that does not fit), never the file. Every record, packet or not, gets the
//! next frame number, as Wireshark numbers them: 1-based, counting every record in the file.

mod ahead;
pub(crate) mod error;
pub mod live;
pub mod notes;
pub(crate) mod pcap;
pub(crate) mod source;

pub use error::{ReadError, ReadStop};
pub use notes::CaptureNotes;
pub use source::Format;
use source::StreamFault;

use pcap_parser::pcapng::{Block, OptionCode};
use std::io::Read;

use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{PcapBlockOwned, PcapError};

/// Bytes read at once, classic pcap's records or pcapng's blocks. A file is read with `read()`
/// into this buffer: the kernel's copy streams the page cache into it, and the records are
/// then parsed from the processor's cache. Small enough to stay there, large enough that the
/// calls are few; faster than a memory map of the file.
pub(crate) const BUFFER_LEN: usize = 256 * 1024;
/// The classic pcap file header: magic, version, thiszone, sigfigs, snaplen, network.
pub(crate) const PCAP_HEADER_LEN: usize = 24;

/// The largest record we accept. libpcap's MAXIMUM_SNAPLEN is 262144; pcapng blocks add options.
/// A length field above this is corrupt, not a jumbo packet.
pub const MAX_RECORD_LEN: usize = 4 * 1024 * 1024;

/// pcapng Obsolete Packet Block (block type 2), which `pcap-parser` hands over as unknown.
pub(crate) const OPB_BLOCK_TYPE: u32 = 0x0000_0002;

/// LINKTYPE_RAW, and the DLT_RAW values some old captures carry instead of it.
const LINKTYPE_RAW: u32 = 101;
const DLT_RAW_VALUES: [u32; 2] = [12, 14];

/// One captured packet, borrowed from the reader's buffer.
#[derive(Debug)]
pub struct RawPacket<'a> {
    /// 1-based record number in the file (Wireshark's frame number).
    pub frame: u64,
    /// Nanoseconds since the Unix epoch.
    pub time_ns: i64,
    /// LINKTYPE_* value of the packet's interface.
    pub linktype: u32,
    /// Length on the wire; `data.len()` is the captured length.
    pub orig_len: u32,
    pub data: &'a [u8],
}

/// What a capture file turned out to be, filled in while reading.
#[derive(Clone, Debug, Default)]
pub struct CaptureInfo {
    pub format: Option<Format>,
    pub gzip: bool,
    /// Records read: packets and, in pcapng, the other blocks Wireshark shows as frames
    /// (custom blocks, systemd journal export blocks). The last frame number given.
    pub records: u64,
    pub sections: u32,
    pub interfaces: u32,
    pub first_time_ns: Option<i64>,
    pub last_time_ns: Option<i64>,
    /// Packets whose timestamp is earlier than the packet before them.
    pub time_went_backwards: u64,
    /// What a pcapng file says about itself (application, interfaces, comments); `None` for pcap.
    pub notes: Option<CaptureNotes>,
    /// Packets the capturing tool says it dropped (pcapng Interface Statistics Blocks:
    /// isb_ifdrop plus isb_osdrop, the latest block of each interface); `None` until one says.
    pub dropped: Option<u64>,
}

/// Per-interface facts from a pcapng IDB (or the pcap file header).
#[derive(Clone, Copy, Debug)]
struct Interface {
    linktype: u32,
    snaplen: u32,
    /// Timestamp units per second (10^n or 2^n).
    units_per_second: u64,
    /// if_tsoffset: seconds added to every timestamp.
    offset_seconds: i64,
    /// Drops its latest Interface Statistics Block counted (`CaptureInfo::dropped`).
    dropped: u64,
}

/// The stream a capture is read from (a file or stdin, gzip undone, first bytes peeked).
type Stream = std::io::Chain<std::io::Cursor<Vec<u8>>, Box<dyn std::io::Read + Send>>;

/// How the records of the capture are read.
enum Records {
    /// Classic pcap: our own record loop.
    Pcap(pcap::PcapRecords<Stream>),
    /// pcapng: pcap-parser's streaming block reader.
    PcapNg(Box<dyn PcapReaderIterator + Send>),
}

/// A streaming capture reader. `for_each_packet` drives it.
pub struct CaptureReader {
    path: String,
    records: Option<Records>,
    section: Section,
    fault: StreamFault,
    pub info: CaptureInfo,
}

/// What the current section (the pcap file header, or a pcapng SHB and its IDBs) says.
#[derive(Default)]
struct Section {
    interfaces: Vec<Interface>,
    /// Byte order of the current pcapng section.
    big_endian: bool,
}

impl CaptureReader {
    pub fn open(path: &str) -> Result<CaptureReader, ReadError> {
        CaptureReader::of_source(path, source::open(path)?)
    }

    /// A reader of a capture held in memory (tests, fuzzing); `name` names it in messages.
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<CaptureReader, ReadError> {
        CaptureReader::of_source(name, source::from_stream(name, Box::new(std::io::Cursor::new(bytes)))?)
    }

    /// A reader of a source already open (`source::open`).
    pub(crate) fn of_source(path: &str, source: source::Source) -> Result<CaptureReader, ReadError> {
        let bad_header = |e: PcapError<&[u8]>| ReadError::BadHeader { path: path.to_string(), reason: header_reason(&e) };
        let mut info = CaptureInfo { format: Some(source.format), gzip: source.gzip, ..CaptureInfo::default() };
        let mut section = Section::default();
        let records = match source.format {
            Format::Pcap => {
                let mut stream = source.stream;
                let mut head = [0u8; PCAP_HEADER_LEN];
                stream.read_exact(&mut head).map_err(|_| bad_header(PcapError::UnexpectedEof))?;
                let big_endian = pcap_section(path, &head, &mut info, &mut section)?;
                Records::Pcap(pcap::PcapRecords::new(stream, big_endian, PCAP_HEADER_LEN as u64))
            }
            Format::PcapNg => Records::PcapNg(Box::new(pcap_parser::PcapNGReader::new(BUFFER_LEN, source.stream).map_err(bad_header)?)),
        };
        Ok(CaptureReader { path: path.to_string(), records: Some(records), section, fault: source.fault, info })
    }

    /// Calls `on_packet` for every packet in file order. Returns how reading ended: the end of
    /// the file, or a break (truncation, corruption, I/O error) after which nothing more can be read.
    pub fn for_each_packet(&mut self, on_packet: impl FnMut(&RawPacket<'_>)) -> ReadStop {
        match self.records.take() {
            Some(Records::Pcap(mut records)) => self.for_each_pcap_record(&mut records, on_packet),
            Some(Records::PcapNg(mut blocks)) => self.for_each_ng_packet(blocks.as_mut(), on_packet),
            None => ReadStop::End,
        }
    }

    /// Calls `on_block` for every block of a pcapng capture in file order, each with its frame
    /// number if it takes one (the numbering `for_each_packet` gives); stops at the first error
    /// `on_block` returns. A classic pcap capture has no blocks: `Ok(ReadStop::End)` at once.
    pub(crate) fn for_each_ng_block<E>(&mut self, on_block: impl FnMut(NgBlock<'_>) -> Result<(), E>) -> Result<ReadStop, E> {
        match self.records.take() {
            Some(Records::PcapNg(mut blocks)) => self.walk_ng_blocks(blocks.as_mut(), on_block),
            Some(records @ Records::Pcap(_)) => {
                self.records = Some(records);
                Ok(ReadStop::End)
            }
            None => Ok(ReadStop::End),
        }
    }

    fn for_each_pcap_record(&mut self, records: &mut pcap::PcapRecords<Stream>, mut on_packet: impl FnMut(&RawPacket<'_>)) -> ReadStop {
        let Some(iface) = self.section.interfaces.first().copied() else { return ReadStop::End };
        loop {
            let offset = records.offset();
            match records.next_record() {
                Ok(record) => {
                    let time_ns = seconds_and_fraction_to_ns(record.seconds, record.fraction, iface.units_per_second);
                    self.info.records += 1;
                    note_time(&mut self.info, time_ns);
                    let packet = RawPacket { frame: self.info.records, time_ns, linktype: iface.linktype, orig_len: record.orig_len, data: record.data };
                    on_packet(&packet);
                }
                Err(pcap::Stop::End) => return self.cut_or(ReadStop::End, offset),
                Err(pcap::Stop::Truncated) => {
                    return self.cut_or(ReadStop::Truncated { offset, frame: self.info.records + 1 }, offset);
                }
                Err(pcap::Stop::Oversized(claimed)) => {
                    return ReadStop::Corrupt {
                        offset,
                        frame: self.info.records + 1,
                        reason: format!("a record claims {claimed} bytes, more than the {MAX_RECORD_LEN} a capture record can hold"),
                    }
                }
                Err(pcap::Stop::Io) => return ReadStop::IoError { offset, reason: self.read_failure() },
            }
        }
    }

    fn for_each_ng_packet(&mut self, inner: &mut (dyn PcapReaderIterator + Send), mut on_packet: impl FnMut(&RawPacket<'_>)) -> ReadStop {
        let packets = self.walk_ng_blocks(inner, |block| {
            if let NgKind::Packet { packet, .. } = block.kind {
                on_packet(&packet);
            }
            Ok::<(), std::convert::Infallible>(())
        });
        match packets {
            Ok(stop) => stop,
            Err(never) => match never {},
        }
    }

    /// The one pcapng block loop: what each block is (`ng_block`), its frame number, and where
    /// and how reading stops.
    fn walk_ng_blocks<E>(
        &mut self,
        inner: &mut (dyn PcapReaderIterator + Send),
        mut on_block: impl FnMut(NgBlock<'_>) -> Result<(), E>,
    ) -> Result<ReadStop, E> {
        loop {
            let consumed_before = inner.consumed() as u64;
            let buffer_at = inner.data().as_ptr() as usize;
            match inner.next() {
                Ok((len, block)) => {
                    let read = match block {
                        PcapBlockOwned::NG(block) => ng_block(&mut self.section, &mut self.info, block),
                        _ => None,
                    };
                    // The packet's bytes as a range of the block's: `raw` borrows the buffer again.
                    let read = read.map(|read| {
                        read.map_data(|data| {
                            let start = (data.as_ptr() as usize).wrapping_sub(buffer_at);
                            start..start + data.len()
                        })
                    });
                    let raw = inner.data().get(..len).unwrap_or_default();
                    let kind = match read {
                        None => NgKind::Other,
                        Some(NgRead::SectionHeader) => NgKind::SectionHeader,
                        Some(NgRead::Packet { time_ns, linktype, orig_len, data, options_after }) => {
                            self.info.records += 1;
                            note_time(&mut self.info, time_ns);
                            let data = raw.get(data).unwrap_or_default();
                            NgKind::Packet { packet: RawPacket { frame: self.info.records, time_ns, linktype, orig_len, data }, options_after }
                        }
                        Some(NgRead::Frame) => {
                            self.info.records += 1;
                            NgKind::Frame
                        }
                    };
                    on_block(NgBlock { raw, big_endian: self.section.big_endian, kind })?;
                    inner.consume(len);
                }
                Err(PcapError::Eof) => return Ok(self.cut_or(ReadStop::End, consumed_before)),
                Err(PcapError::Incomplete(_)) => {
                    if let Some(stop) = self.oversized_record(inner, consumed_before).or_else(|| self.lying_block(inner, consumed_before)) {
                        return Ok(stop);
                    }
                    if let Err(stop) = self.refill(inner, consumed_before) {
                        return Ok(stop);
                    }
                }
                Err(PcapError::UnexpectedEof) => {
                    let truncated = ReadStop::Truncated { offset: consumed_before, frame: self.info.records + 1 };
                    return Ok(self
                        .oversized_record(inner, consumed_before)
                        .or_else(|| self.lying_block(inner, consumed_before))
                        .unwrap_or_else(|| self.cut_or(truncated, consumed_before)));
                }
                Err(PcapError::BufferTooSmall) => {
                    if let Some(stop) = self.oversized_record(inner, consumed_before) {
                        return Ok(stop);
                    }
                    let capacity = inner.data().len().max(BUFFER_LEN);
                    if capacity >= MAX_RECORD_LEN || !inner.grow(MAX_RECORD_LEN) {
                        return Ok(ReadStop::Corrupt {
                            offset: consumed_before,
                            frame: self.info.records + 1,
                            reason: format!("a record claims more than {} bytes", MAX_RECORD_LEN),
                        });
                    }
                    if let Err(stop) = self.refill(inner, consumed_before) {
                        return Ok(stop);
                    }
                }
                Err(PcapError::ReadError) => {
                    return Ok(ReadStop::IoError { offset: consumed_before, reason: self.read_failure() });
                }
                Err(e) => {
                    return Ok(ReadStop::Corrupt { offset: consumed_before, frame: self.info.records + 1, reason: record_reason(&e) });
                }
            }
        }
    }

    /// `Corrupt` when the next record claims more than `MAX_RECORD_LEN` bytes: such a length
    /// field is damage, not a record the file is too short to hold.
    fn oversized_record(&self, inner: &dyn PcapReaderIterator, offset: u64) -> Option<ReadStop> {
        let claimed = claimed_record_len(self.info.format?, inner.data(), self.section.big_endian)?;
        (claimed > MAX_RECORD_LEN as u64).then(|| ReadStop::Corrupt {
            offset,
            frame: self.info.records + 1,
            reason: format!("a record claims {claimed} bytes, more than the {MAX_RECORD_LEN} a capture record can hold"),
        })
    }

    /// `Corrupt` when the whole block is in the buffer and pcap-parser still asks for more: a
    /// length inside the block (an EPB's captured length, an option's length) points past its
    /// end. More data would not help; waiting for it would read the rest of the file as this block.
    fn lying_block(&self, inner: &dyn PcapReaderIterator, offset: u64) -> Option<ReadStop> {
        let claimed = claimed_record_len(self.info.format?, inner.data(), self.section.big_endian)?;
        (claimed <= inner.data().len() as u64).then(|| ReadStop::Corrupt {
            offset,
            frame: self.info.records + 1,
            reason: format!("a field inside the {claimed}-byte block points past its end"),
        })
    }

    fn refill(&self, inner: &mut dyn PcapReaderIterator, offset: u64) -> Result<(), ReadStop> {
        let failed = inner.refill().is_err();
        if failed {
            return Err(ReadStop::IoError { offset, reason: self.read_failure() });
        }
        Ok(())
    }

    /// `GzipCut` instead of `stop` when the gzip data ended early: the inflated capture may end
    /// on a record boundary, yet records are missing.
    fn cut_or(&self, stop: ReadStop, offset: u64) -> ReadStop {
        if self.fault.gzip_cut() {
            ReadStop::GzipCut { offset, frame: self.info.records + 1 }
        } else {
            stop
        }
    }

    /// Why reading failed, from the stream's first error.
    fn read_failure(&self) -> String {
        match self.fault.error() {
            Some(why) if self.info.gzip => format!("the gzip data is damaged ({why})"),
            Some(why) => format!("could not read {}: {why}", self.path),
            None => format!("could not read {}", self.path),
        }
    }

    /// The LINKTYPE_ name without its prefix ("ETHERNET", "LINUX_SLL2"), or the number.
    pub fn linktype_name(linktype: u32) -> String {
        let name = match linktype {
            0 => "NULL",
            1 => "ETHERNET",
            12 | 14 | 101 => "RAW",
            108 => "LOOP",
            113 => "LINUX_SLL",
            228 => "IPV4",
            229 => "IPV6",
            276 => "LINUX_SLL2",
            other => return format!("LINKTYPE_{other}"),
        };
        name.to_string()
    }
}

/// Reads a classic pcap file header into `info` and `section`; returns whether the file is big-endian.
fn pcap_section(path: &str, head: &[u8; PCAP_HEADER_LEN], info: &mut CaptureInfo, section: &mut Section) -> Result<bool, ReadError> {
    let (_, header) = pcap_parser::pcap::parse_pcap_header(head)
        .map_err(|_| ReadError::BadHeader { path: path.to_string(), reason: header_reason(&PcapError::HeaderNotRecognized) })?;
    info.sections = 1;
    info.interfaces = 1;
    section.big_endian = header.is_bigendian();
    section.interfaces.push(Interface {
        linktype: file_linktype(header.network.0 as u32),
        snaplen: header.snaplen,
        units_per_second: if header.is_nanosecond_precision() { 1_000_000_000 } else { 1_000_000 },
        offset_seconds: 0,
        dropped: 0,
    });
    Ok(header.is_bigendian())
}

impl CaptureReader {
    /// A reader of a stream already open (standard input read live, `live`); `name`
    /// names it in messages.
    pub fn from_stream(name: &str, stream: Box<dyn std::io::Read + Send>) -> Result<CaptureReader, ReadError> {
        CaptureReader::of_source(name, source::from_stream(name, stream)?)
    }
}

/// One pcapng block as `CaptureReader::for_each_ng_block` reads it.
pub(crate) struct NgBlock<'a> {
    /// The block's bytes as they are in the file.
    pub raw: &'a [u8],
    /// The byte order of the block's section.
    pub big_endian: bool,
    pub kind: NgKind<'a>,
}

/// What a pcapng block is: what decides its frame number.
pub(crate) enum NgKind<'a> {
    SectionHeader,
    /// A packet (its frame number in `packet.frame`), and the length of the packet data its
    /// options follow (enhanced and obsolete packet blocks; a simple packet block has none).
    Packet { packet: RawPacket<'a>, options_after: Option<u64> },
    /// Not a packet, yet a frame of its own (custom, systemd journal export blocks).
    Frame,
    /// No frame: interface descriptions and statistics, a packet of an unknown interface...
    Other,
}

/// What `ng_block` makes of a block that is a section header or a frame; `D`, the packet data.
enum NgRead<D> {
    SectionHeader,
    Packet { time_ns: i64, linktype: u32, orig_len: u32, data: D, options_after: Option<u64> },
    Frame,
}

impl<D> NgRead<D> {
    fn map_data<T>(self, f: impl FnOnce(D) -> T) -> NgRead<T> {
        match self {
            NgRead::SectionHeader => NgRead::SectionHeader,
            NgRead::Packet { time_ns, linktype, orig_len, data, options_after } => {
                NgRead::Packet { time_ns, linktype, orig_len, data: f(data), options_after }
            }
            NgRead::Frame => NgRead::Frame,
        }
    }
}

/// What a pcapng block is to the reader (`None`: no frame, nothing to copy but its bytes), a
/// packet's time, link type, original length and data included; records what the block says
/// about the section and its interfaces. A packet takes a frame number when its interface is
/// known; custom and systemd journal export blocks always do.
fn ng_block<'b>(section: &mut Section, info: &mut CaptureInfo, block: Block<'b>) -> Option<NgRead<&'b [u8]>> {
    match block {
        Block::SectionHeader(shb) => {
            // pcapng §4.1: interface ids are numbered per section, and each section has
            // its own byte order.
            info.sections += 1;
            section.big_endian = shb.big_endian();
            section.interfaces.clear();
            let notes = info.notes.get_or_insert_with(CaptureNotes::default);
            for option in &shb.options {
                let value = option_value(option);
                match option.code {
                    OptionCode::Comment => notes.add_comment(value),
                    OptionCode::ShbHardware if notes.hardware.is_none() => notes.hardware = notes::clean_text(value),
                    OptionCode::ShbOs if notes.os.is_none() => notes.os = notes::clean_text(value),
                    OptionCode::ShbUserAppl if notes.application.is_none() => notes.application = notes::clean_text(value),
                    _ => {}
                }
            }
            Some(NgRead::SectionHeader)
        }
        Block::InterfaceDescription(idb) => {
            info.interfaces += 1;
            // pcap-parser's ts_resolution() rejects every binary resolution and reads
            // if_tsoffset as little-endian in any section, so both are decoded here.
            let mut units_per_second = 1_000_000;
            let mut offset_seconds = 0;
            let notes = info.notes.get_or_insert_with(CaptureNotes::default);
            let mut note = notes::InterfaceNote { linktype: file_linktype(idb.linktype.0 as u32), ..Default::default() };
            for option in &idb.options {
                match option.code {
                    OptionCode::Comment => notes.add_comment(option_value(option)),
                    OptionCode::IfName => note.name = notes::clean_text(option_value(option)),
                    OptionCode::IfDescription => note.description = notes::clean_text(option_value(option)),
                    OptionCode::IfTsresol => {
                        if let Some(units) = option.value.first().and_then(|&r| units_per_second_of(r)) {
                            units_per_second = units;
                        }
                    }
                    OptionCode::IfTsoffset => {
                        if let Some(bytes) = option.value.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                            offset_seconds = if section.big_endian { i64::from_be_bytes(bytes) } else { i64::from_le_bytes(bytes) };
                        }
                    }
                    _ => {}
                }
            }
            notes.add_interface(note);
            section.interfaces.push(Interface { linktype: file_linktype(idb.linktype.0 as u32), snaplen: idb.snaplen, units_per_second, offset_seconds, dropped: 0 });
            None
        }
        Block::EnhancedPacket(epb) => {
            let iface = *section.interfaces.get(epb.if_id as usize)?;
            let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
            let time_ns = ticks_to_ns(ticks, iface.units_per_second, iface.offset_seconds);
            for option in epb.options.iter().filter(|o| o.code == OptionCode::Comment) {
                // This packet takes the next frame number.
                info.notes.get_or_insert_with(CaptureNotes::default).add_packet_comment(info.records + 1, option_value(option));
            }
            let data = clamp(epb.data, epb.caplen);
            Some(NgRead::Packet { time_ns, linktype: iface.linktype, orig_len: epb.origlen, data, options_after: Some(u64::from(epb.caplen)) })
        }
        Block::SimplePacket(spb) => {
            // pcapng §4.4: an SPB belongs to interface 0 and has no timestamp; its captured
            // length is min(original length, snaplen).
            let iface = *section.interfaces.first()?;
            let snap = if iface.snaplen == 0 { u32::MAX } else { iface.snaplen };
            let time_ns = info.last_time_ns.unwrap_or(0);
            let data = clamp(spb.data, spb.origlen.min(snap));
            Some(NgRead::Packet { time_ns, linktype: iface.linktype, orig_len: spb.origlen, data, options_after: None })
        }
        // pcap-parser reads an unknown block's type little-endian, whatever the section's byte order.
        Block::Unknown(unknown) if section_order(unknown.block_type, section.big_endian) == OPB_BLOCK_TYPE => {
            let opb = parse_obsolete_packet(unknown.data, section.big_endian)?;
            let iface = *section.interfaces.get(usize::from(opb.interface))?;
            let time_ns = ticks_to_ns(opb.ticks, iface.units_per_second, iface.offset_seconds);
            let options_after = Some(opb.data.len() as u64);
            Some(NgRead::Packet { time_ns, linktype: iface.linktype, orig_len: opb.orig_len, data: opb.data, options_after })
        }
        Block::InterfaceStatistics(isb) => {
            // pcapng §4.6: the counters run from the start of the capture, so a later block
            // of the same interface replaces what an earlier one said.
            let iface = section.interfaces.get_mut(isb.if_id as usize)?;
            let said = isb.options.iter().filter_map(|o| isb_drops(o, section.big_endian)).reduce(|a, b| a.saturating_add(b))?;
            let total = info.dropped.unwrap_or(0).saturating_sub(iface.dropped).saturating_add(said);
            iface.dropped = said;
            info.dropped = Some(total);
            None
        }
        // Wireshark shows these as frames of their own: they take a frame number.
        Block::Custom(_) | Block::SystemdJournalExport(_) => Some(NgRead::Frame),
        _ => None,
    }
}

/// pcapng ISB options isb_ifdrop (code 5: dropped by the interface) and isb_osdrop (code 7:
/// dropped by the capturing OS, what tcpdump reports as "dropped by kernel").
const ISB_IFDROP: u16 = 5;
const ISB_OSDROP: u16 = 7;

/// The packets an Interface Statistics Block option says were dropped, if it says so: a u64
/// in the section's byte order (pcap-parser reads it little-endian in any section).
fn isb_drops(option: &pcap_parser::PcapNGOption<'_>, big_endian: bool) -> Option<u64> {
    if option.code.0 != ISB_IFDROP && option.code.0 != ISB_OSDROP {
        return None;
    }
    let bytes = <[u8; 8]>::try_from(option_value(option)).ok()?;
    Some(if big_endian { u64::from_be_bytes(bytes) } else { u64::from_le_bytes(bytes) })
}

/// An option's value without its padding (pcap-parser keeps the padding in `value`).
fn option_value<'o>(option: &'o pcap_parser::PcapNGOption<'_>) -> &'o [u8] {
    let value = option.value();
    value.get(..usize::from(option.len)).unwrap_or(value)
}

/// A block type read little-endian, as the section's byte order reads it.
pub(crate) fn section_order(block_type_le: u32, big_endian: bool) -> u32 {
    if big_endian {
        block_type_le.swap_bytes()
    } else {
        block_type_le
    }
}

/// The link type a file's header or IDB gives, with DLT_RAW (12, 14) as LINKTYPE_RAW: one link
/// type, counted once.
fn file_linktype(linktype: u32) -> u32 {
    if DLT_RAW_VALUES.contains(&linktype) {
        LINKTYPE_RAW
    } else {
        linktype
    }
}

/// The length a record claims in its own header: pcap's 16-byte record header plus caplen, or a
/// pcapng block's total length. `None` until the length field is in `data`.
pub(crate) fn claimed_record_len(format: Format, data: &[u8], big_endian: bool) -> Option<u64> {
    let u32_at = |at: usize, be: bool| -> Option<u32> {
        let bytes: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        Some(if be { u32::from_be_bytes(bytes) } else { u32::from_le_bytes(bytes) })
    };
    match format {
        Format::Pcap => u32_at(8, big_endian).map(|caplen| 16 + u64::from(caplen)),
        Format::PcapNg => {
            // A section header block carries its own byte order (magic 0x1A2B3C4D at byte 8).
            let be = if data.get(..4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a]) {
                match data.get(8..12) {
                    Some([0x1a, 0x2b, 0x3c, 0x4d]) => true,
                    Some([0x4d, 0x3c, 0x2b, 0x1a]) => false,
                    _ => big_endian,
                }
            } else {
                big_endian
            };
            u32_at(4, be).map(u64::from)
        }
    }
}

fn note_time(info: &mut CaptureInfo, time_ns: i64) {
    if let Some(last) = info.last_time_ns {
        if time_ns < last {
            info.time_went_backwards += 1;
        }
    }
    info.first_time_ns.get_or_insert(time_ns);
    info.last_time_ns = Some(time_ns);
}

/// pcapng §4.2 if_tsresol: with bit 7 clear the unit is 10^-n seconds, with it set 2^-n.
/// `None` for a resolution finer than a u64 can count (10^-20, 2^-64).
fn units_per_second_of(tsresol: u8) -> Option<u64> {
    let exponent = u32::from(tsresol & 0x7f);
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(exponent)
    } else {
        1u64.checked_shl(exponent).filter(|_| exponent < 64)
    }
}

/// The captured bytes, never longer than the record says.
fn clamp(data: &[u8], caplen: u32) -> &[u8] {
    data.get(..caplen as usize).unwrap_or(data)
}

#[inline]
fn seconds_and_fraction_to_ns(seconds: u32, fraction: u32, units_per_second: u64) -> i64 {
    // u32 x 10^9 fits a u64; pcap's two resolutions need no division.
    let fraction_ns = match units_per_second {
        1_000_000 => u64::from(fraction) * 1_000,
        1_000_000_000 => u64::from(fraction),
        units => u64::from(fraction) * 1_000_000_000 / units.max(1),
    };
    i64::from(seconds) * 1_000_000_000 + fraction_ns as i64
}

/// pcapng timestamps count units since the epoch (plus if_tsoffset seconds).
fn ticks_to_ns(ticks: u64, units_per_second: u64, offset_seconds: i64) -> i64 {
    let units = u128::from(units_per_second.max(1));
    let whole = u128::from(ticks) / units;
    let rest = u128::from(ticks) % units;
    let ns = whole * 1_000_000_000 + rest * 1_000_000_000 / units;
    let ns = i64::try_from(ns).unwrap_or(i64::MAX);
    ns.saturating_add(offset_seconds.saturating_mul(1_000_000_000))
}

pub(crate) struct ObsoletePacket<'a> {
    pub(crate) interface: u16,
    pub(crate) ticks: u64,
    pub(crate) orig_len: u32,
    pub(crate) data: &'a [u8],
}

/// pcapng appendix (Obsolete Packet Block): interface id u16, drops count u16, timestamp
/// high/low u32, captured length u32, packet length u32, then the data. `body` is the block
/// between the two length fields.
pub(crate) fn parse_obsolete_packet(body: &[u8], be: bool) -> Option<ObsoletePacket<'_>> {
    let field = |at: usize| -> Option<u32> {
        let bytes: [u8; 4] = body.get(at..at + 4)?.try_into().ok()?;
        Some(if be { u32::from_be_bytes(bytes) } else { u32::from_le_bytes(bytes) })
    };
    let half = |at: usize| -> Option<u16> {
        let bytes: [u8; 2] = body.get(at..at + 2)?.try_into().ok()?;
        Some(if be { u16::from_be_bytes(bytes) } else { u16::from_le_bytes(bytes) })
    };
    let caplen = field(12)? as usize;
    Some(ObsoletePacket {
        interface: half(0)?,
        ticks: (u64::from(field(4)?) << 32) | u64::from(field(8)?),
        orig_len: field(16)?,
        data: body.get(20..20usize.checked_add(caplen)?)?,
    })
}

pub(crate) fn header_reason(e: &PcapError<&[u8]>) -> String {
    match e {
        PcapError::Incomplete(_) | PcapError::UnexpectedEof => "the file header is cut short".into(),
        PcapError::HeaderNotRecognized => "the file header is not recognised".into(),
        PcapError::ReadError => "reading failed".into(),
        _ => "the file header is malformed".into(),
    }
}

pub(crate) fn record_reason(e: &PcapError<&[u8]>) -> String {
    match e {
        PcapError::HeaderNotRecognized => "a block header is not recognised".into(),
        _ => "a record's length fields are inconsistent".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_ticks_to_ns_decimal_and_binary_resolutions() {
        // 10^-6: 1.5 s
        assert_eq!(ticks_to_ns(1_500_000, 1_000_000, 0), 1_500_000_000);
        // 10^-9
        assert_eq!(ticks_to_ns(1_000_000_001, 1_000_000_000, 0), 1_000_000_001);
        // 2^-10: 1024 units per second, 1536 ticks = 1.5 s
        assert_eq!(ticks_to_ns(1536, 1024, 0), 1_500_000_000);
        // if_tsoffset adds whole seconds
        assert_eq!(ticks_to_ns(0, 1_000_000, 10), 10_000_000_000);
    }

    #[test]
    fn test_ticks_to_ns_saturates_on_absurd_timestamps() {
        assert_eq!(ticks_to_ns(u64::MAX, 1, 0), i64::MAX);
    }

    #[test]
    fn test_units_per_second_decimal_and_binary() {
        assert_eq!(units_per_second_of(6), Some(1_000_000));
        assert_eq!(units_per_second_of(9), Some(1_000_000_000));
        assert_eq!(units_per_second_of(0x80 | 20), Some(1 << 20));
        assert_eq!(units_per_second_of(0x80 | 64), None);
        assert_eq!(units_per_second_of(20), None);
    }

    #[test]
    fn test_seconds_and_fraction_microseconds_and_nanoseconds() {
        assert_eq!(seconds_and_fraction_to_ns(2, 250_000, 1_000_000), 2_250_000_000);
        assert_eq!(seconds_and_fraction_to_ns(2, 250, 1_000_000_000), 2_000_000_250);
    }

    #[test]
    fn test_obsolete_packet_block_little_endian() {
        let mut body = Vec::new();
        body.extend_from_slice(&1u16.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        body.extend_from_slice(&5_000_000u32.to_le_bytes());
        body.extend_from_slice(&3u32.to_le_bytes());
        body.extend_from_slice(&60u32.to_le_bytes());
        body.extend_from_slice(&[7, 8, 9, 0]);
        body.extend_from_slice(&32u32.to_le_bytes());
        let opb = parse_obsolete_packet(&body, false).unwrap();
        assert_eq!(opb.interface, 1);
        assert_eq!(opb.ticks, 5_000_000);
        assert_eq!(opb.orig_len, 60);
        assert_eq!(opb.data, &[7, 8, 9]);
    }

    #[test]
    fn test_claimed_record_len_pcap_both_byte_orders() {
        let mut le = vec![0u8; 16];
        le[8..12].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
        assert_eq!(claimed_record_len(Format::Pcap, &le, false), Some(16 + 0x7fff_fff0));
        let mut be = vec![0u8; 16];
        be[8..12].copy_from_slice(&60u32.to_be_bytes());
        assert_eq!(claimed_record_len(Format::Pcap, &be, true), Some(76));
        assert_eq!(claimed_record_len(Format::Pcap, &le[..10], false), None);
    }

    #[test]
    fn test_claimed_record_len_pcapng_block_and_section_byte_order() {
        let mut epb = vec![6, 0, 0, 0];
        epb.extend_from_slice(&0xffff_fff0u32.to_le_bytes());
        assert_eq!(claimed_record_len(Format::PcapNg, &epb, false), Some(0xffff_fff0));
        // A big-endian SHB after a little-endian section is read in its own byte order.
        let mut shb = vec![0x0a, 0x0d, 0x0d, 0x0a];
        shb.extend_from_slice(&28u32.to_be_bytes());
        shb.extend_from_slice(&[0x1a, 0x2b, 0x3c, 0x4d]);
        assert_eq!(claimed_record_len(Format::PcapNg, &shb, false), Some(28));
    }

    #[test]
    fn test_absurd_caplen_mid_file_is_corrupt_not_truncated() {
        let mut file = Vec::new();
        for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, 1] {
            file.extend_from_slice(&v.to_le_bytes());
        }
        for caplen in [4u32, 0x7fff_fff0] {
            for v in [1_700_000_000u32, 0, caplen, caplen] {
                file.extend_from_slice(&v.to_le_bytes());
            }
            file.extend_from_slice(&[0; 4]);
        }
        let dir = std::env::temp_dir().join(format!("pcapq-reader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("caplen.pcap");
        std::fs::write(&path, &file).unwrap();
        let mut reader = CaptureReader::open(path.to_str().unwrap()).ok().unwrap();
        let mut frames = Vec::new();
        let stop = reader.for_each_packet(|p| frames.push(p.frame));
        assert_eq!(frames, vec![1]);
        assert!(matches!(stop, ReadStop::Corrupt { offset: 44, frame: 2, .. }), "{stop:?}");
    }

    /// A little-endian pcap with `n` records of 40 bytes each.
    fn pcap_with_records(n: u32) -> Vec<u8> {
        let mut file = Vec::new();
        for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, 101] {
            file.extend_from_slice(&v.to_le_bytes());
        }
        for i in 0..n {
            for v in [1_700_000_000 + i, 0, 40, 40] {
                file.extend_from_slice(&v.to_le_bytes());
            }
            file.extend_from_slice(&[0x45; 40]);
        }
        file
    }

    fn read_all(name: &str, bytes: &[u8]) -> (u64, ReadStop) {
        let dir = std::env::temp_dir().join(format!("pcapq-reader-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let mut reader = CaptureReader::open(path.to_str().unwrap()).ok().unwrap();
        let mut packets = 0;
        let stop = reader.for_each_packet(|_| packets += 1);
        (packets, stop)
    }

    #[test]
    fn test_gzip_cut_short_keeps_records_and_says_truncated() {
        use std::io::Write;
        let plain = pcap_with_records(20_000);
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&plain).unwrap();
        let gz = enc.finish().unwrap();
        // Cut far past the 64 KiB peek and right before the 8-byte trailer.
        for (name, cut) in [("half.pcap.gz", gz.len() / 2), ("trailer.pcap.gz", gz.len() - 8)] {
            let (packets, stop) = read_all(name, &gz[..cut]);
            assert!(matches!(stop, ReadStop::GzipCut { .. }), "{name}: {stop:?}");
            assert_eq!(stop.kind(), "truncated");
            assert!(packets > 0 && packets <= 20_000, "{name}: {packets}");
        }
        let (packets, stop) = read_all("whole.pcap.gz", &gz);
        assert_eq!((packets, stop), (20_000, ReadStop::End));
    }

    #[test]
    fn test_gzip_damaged_mid_stream_is_io_error_with_reason() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&pcap_with_records(20_000)).unwrap();
        let mut gz = enc.finish().unwrap();
        let len = gz.len();
        // A wrong CRC in the trailer: every record inflates, then the stream fails.
        gz[len - 8] ^= 0xff;
        let (packets, stop) = read_all("crc.pcap.gz", &gz);
        assert_eq!(packets, 20_000);
        match stop {
            ReadStop::IoError { reason, .. } => assert!(reason.starts_with("the gzip data is damaged ("), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn test_obsolete_packet_block_too_short_is_none() {
        assert!(parse_obsolete_packet(&[0; 10], false).is_none());
        assert!(parse_obsolete_packet(&[0xff; 24], true).is_none());
    }

    /// A pcapng block in the given byte order; `body` is padded to 4 bytes.
    fn ng(be: bool, block_type: u32, body: &[u8]) -> Vec<u8> {
        let word = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let padded = body.len().div_ceil(4) * 4;
        let total = (12 + padded) as u32;
        let mut out = Vec::new();
        out.extend_from_slice(&word(block_type));
        out.extend_from_slice(&word(total));
        out.extend_from_slice(body);
        out.resize(8 + padded, 0);
        out.extend_from_slice(&word(total));
        out
    }

    /// SHB and one IDB of `linktype` (default resolution, microseconds).
    fn ng_head(be: bool, linktype: u16) -> Vec<u8> {
        let mut shb = Vec::new();
        shb.extend_from_slice(&if be { 0x1a2b_3c4du32.to_be_bytes() } else { 0x1a2b_3c4du32.to_le_bytes() });
        shb.extend_from_slice(&if be { [0, 1, 0, 0] } else { [1, 0, 0, 0] });
        shb.extend_from_slice(&(-1i64).to_le_bytes());
        let mut idb = Vec::new();
        idb.extend_from_slice(&if be { linktype.to_be_bytes() } else { linktype.to_le_bytes() });
        idb.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        let mut out = ng(be, 0x0a0d_0d0a, &shb);
        out.extend(ng(be, 1, &idb));
        out
    }

    /// Frame, time_ns, linktype and captured bytes of one packet.
    type Seen = (u64, i64, u32, Vec<u8>);

    /// Every packet read, and how many records.
    fn packets_of(name: &str, bytes: &[u8]) -> (Vec<Seen>, u64) {
        let dir = std::env::temp_dir().join(format!("pcapq-reader-blocks-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let mut reader = CaptureReader::open(path.to_str().unwrap()).ok().unwrap();
        let mut out = Vec::new();
        let stop = reader.for_each_packet(|p| out.push((p.frame, p.time_ns, p.linktype, p.data.to_vec())));
        assert_eq!(stop, ReadStop::End);
        (out, reader.info.records)
    }

    /// An Interface Statistics Block of interface 0 with `(code, u64)` options.
    fn isb(be: bool, options: &[(u16, u64)]) -> Vec<u8> {
        let mut body = Vec::new();
        for word in [0u32, 0, 0] {
            body.extend_from_slice(&if be { word.to_be_bytes() } else { word.to_le_bytes() });
        }
        for &(code, value) in options {
            body.extend_from_slice(&if be { code.to_be_bytes() } else { code.to_le_bytes() });
            body.extend_from_slice(&if be { 8u16.to_be_bytes() } else { 8u16.to_le_bytes() });
            body.extend_from_slice(&if be { value.to_be_bytes() } else { value.to_le_bytes() });
        }
        body.extend_from_slice(&[0, 0, 0, 0]);
        ng(be, 5, &body)
    }

    fn dropped_of(name: &str, bytes: &[u8]) -> Option<u64> {
        let mut reader = CaptureReader::from_bytes(name, bytes.to_vec()).ok().unwrap();
        assert_eq!(reader.for_each_packet(|_| {}), ReadStop::End);
        reader.info.dropped
    }

    #[test]
    fn test_isb_drops_latest_block_counts_in_either_byte_order() {
        for be in [false, true] {
            let mut file = ng_head(be, 101);
            // isb_ifrecv (4) is no drop; a block without drop options says nothing.
            file.extend(isb(be, &[(4, 1000)]));
            assert_eq!(dropped_of("isb-none.pcapng", &file), None, "big-endian {be}");
            file.extend(isb(be, &[(4, 1000), (5, 3), (7, 4)]));
            // A later block of the same interface replaces the earlier one's counts.
            file.extend(isb(be, &[(5, 5), (7, 6)]));
            assert_eq!(dropped_of("isb.pcapng", &file), Some(11), "big-endian {be}");
        }
    }

    #[test]
    fn test_isb_of_unknown_interface_is_ignored() {
        let mut file = ng_head(false, 101);
        let mut block = isb(false, &[(7, 9)]);
        block[8] = 3; // if_id 3: no such interface
        file.extend(block);
        assert_eq!(dropped_of("isb-unknown.pcapng", &file), None);
    }

    #[test]
    fn test_obsolete_packet_block_in_big_endian_section() {
        let mut body = Vec::new();
        body.extend_from_slice(&0u16.to_be_bytes());
        body.extend_from_slice(&0u16.to_be_bytes());
        body.extend_from_slice(&0u32.to_be_bytes());
        body.extend_from_slice(&2_500_000u32.to_be_bytes());
        body.extend_from_slice(&3u32.to_be_bytes());
        body.extend_from_slice(&3u32.to_be_bytes());
        body.extend_from_slice(&[0x45, 0, 0]);
        let mut file = ng_head(true, 101);
        file.extend(ng(true, OPB_BLOCK_TYPE, &body));
        let (packets, records) = packets_of("opb-be.pcapng", &file);
        assert_eq!(packets, vec![(1, 2_500_000_000, 101, vec![0x45, 0, 0])]);
        assert_eq!(records, 1);
    }

    #[test]
    fn test_custom_and_journal_blocks_take_frame_numbers() {
        for be in [false, true] {
            let word = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
            let mut epb = Vec::new();
            for v in [0, 0, 1_000_000, 1, 1] {
                epb.extend_from_slice(&word(v));
            }
            epb.push(0x45);
            let custom = [word(32473).as_slice(), b"note"].concat();
            let mut file = ng_head(be, 101);
            file.extend(ng(be, 6, &epb));
            file.extend(ng(be, 0x0000_0bad, &custom));
            file.extend(ng(be, 0x4000_0bad, &custom));
            file.extend(ng(be, 9, b"MESSAGE=x\n"));
            // Name resolution and unknown blocks are not frames.
            file.extend(ng(be, 4, &[0, 0, 0, 0]));
            file.extend(ng(be, 0x0000_1234, b"zz"));
            file.extend(ng(be, 6, &epb));
            let (packets, records) = packets_of("custom.pcapng", &file);
            let frames: Vec<u64> = packets.iter().map(|p| p.0).collect();
            assert_eq!(frames, vec![1, 5], "big endian: {be}");
            assert_eq!(records, 5);
        }
    }

    #[test]
    fn test_dlt_raw_values_read_as_linktype_raw() {
        for linktype in [12u32, 14, 101] {
            let mut file = Vec::new();
            for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65_535, linktype, 1_700_000_000, 7, 1, 1] {
                file.extend_from_slice(&v.to_le_bytes());
            }
            file.push(0x45);
            let (packets, _) = packets_of("raw.pcap", &file);
            assert_eq!(packets, vec![(1, 1_700_000_000_000_007_000, 101, vec![0x45])]);
        }
    }
}
