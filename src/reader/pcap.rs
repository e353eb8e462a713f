//! Classic pcap records, read straight from a buffer.
//!
//! Most captures are classic pcap from `tcpdump -w`, and at millions of packets per second the
//! per-record cost of a general block parser shows. A record is a 16-byte header (seconds,
//! fraction, captured length, original length) and the captured bytes, so this loop reads them
//! itself; `pcap-parser` still reads the file header (`CaptureReader::open`).

use std::io::{self, Read};

use super::{BUFFER_LEN, MAX_RECORD_LEN};

pub const RECORD_HEADER_LEN: usize = 16;
/// `ensure`'s error when reading failed (a real count of bytes left never gets this large).
const READ_FAILED: usize = usize::MAX;

/// One record, borrowed from the buffer.
pub struct Record<'a> {
    pub seconds: u32,
    pub fraction: u32,
    pub orig_len: u32,
    pub data: &'a [u8],
}

/// Why there is no next record.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// The stream ended on a record boundary.
    End,
    /// The stream ended inside a record.
    Truncated,
    /// The record header claims more than `MAX_RECORD_LEN` bytes.
    Oversized(u64),
    /// Reading failed.
    Io,
}

/// The four fields of a record header (seconds, fraction, captured length, original length);
/// `None` if `header` is shorter than `RECORD_HEADER_LEN`.
#[inline]
pub fn record_header(header: &[u8], big_endian: bool) -> Option<(u32, u32, u32, u32)> {
    let h: &[u8; RECORD_HEADER_LEN] = header.get(..RECORD_HEADER_LEN)?.try_into().ok()?;
    let field = |at: usize| -> u32 {
        let bytes = [h[at], h[at + 1], h[at + 2], h[at + 3]];
        if big_endian {
            u32::from_be_bytes(bytes)
        } else {
            u32::from_le_bytes(bytes)
        }
    };
    Some((field(0), field(4), field(8), field(12)))
}

pub struct PcapRecords<R> {
    stream: R,
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes of the stream before `buffer[start]`.
    consumed: u64,
    big_endian: bool,
}

impl<R: Read> PcapRecords<R> {
    /// Reads records from `stream`, positioned just after the 24-byte file header.
    pub fn new(stream: R, big_endian: bool, header_len: u64) -> PcapRecords<R> {
        PcapRecords { stream, buffer: vec![0; BUFFER_LEN], start: 0, end: 0, consumed: header_len, big_endian }
    }

    /// Byte offset of the next record in the stream.
    pub fn offset(&self) -> u64 {
        self.consumed
    }

    pub fn next_record(&mut self) -> Result<Record<'_>, Stop> {
        self.ensure(RECORD_HEADER_LEN).map_err(|left| match left {
            0 => Stop::End,
            READ_FAILED => Stop::Io,
            _ => Stop::Truncated,
        })?;
        let header = self.buffer.get(self.start..self.end).unwrap_or_default();
        let (seconds, fraction, caplen, orig_len) = record_header(header, self.big_endian).ok_or(Stop::Truncated)?;
        if caplen as usize > MAX_RECORD_LEN {
            return Err(Stop::Oversized(u64::from(caplen)));
        }
        let len = RECORD_HEADER_LEN + caplen as usize;
        self.ensure(len).map_err(|left| if left == READ_FAILED { Stop::Io } else { Stop::Truncated })?;
        let data_start = self.start + RECORD_HEADER_LEN;
        self.start += len;
        self.consumed += len as u64;
        let data = self.buffer.get(data_start..data_start + caplen as usize).ok_or(Stop::Truncated)?;
        Ok(Record { seconds, fraction, orig_len, data })
    }

    /// Makes `need` bytes available from `start`, reading as needed. Err carries how many
    /// bytes were left when the stream ended, or `READ_FAILED`.
    fn ensure(&mut self, need: usize) -> Result<(), usize> {
        if self.end - self.start >= need {
            return Ok(());
        }
        if self.buffer.len() - self.start < need {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buffer.len() < need {
                self.buffer.resize(need, 0);
            }
        }
        while self.end - self.start < need {
            let space = self.buffer.get_mut(self.end..).unwrap_or_default();
            match self.stream.read(space) {
                Ok(0) => return Err(self.end - self.start),
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(READ_FAILED),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(be: bool, caplen: u32, data: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        for v in [7u32, 500, caplen, 60] {
            r.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
        }
        r.extend_from_slice(data);
        r
    }

    /// A reader that hands out one byte per read, as a slow pipe can.
    struct Trickle(Vec<u8>, usize);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.get(self.1), buf.first_mut()) {
                (Some(&b), Some(slot)) => {
                    *slot = b;
                    self.1 += 1;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn test_records_both_byte_orders_then_end() {
        for be in [false, true] {
            let mut bytes = record(be, 3, &[1, 2, 3]);
            bytes.extend(record(be, 0, &[]));
            let mut r = PcapRecords::new(Trickle(bytes, 0), be, 24);
            let first = r.next_record().unwrap();
            assert_eq!((first.seconds, first.fraction, first.orig_len, first.data), (7, 500, 60, &[1u8, 2, 3][..]));
            assert_eq!(r.offset(), 24 + 19);
            assert_eq!(r.next_record().unwrap().data.len(), 0);
            assert_eq!(r.next_record().err(), Some(Stop::End));
        }
    }

    #[test]
    fn test_record_cut_short_is_truncated() {
        let bytes = record(false, 10, &[1, 2, 3]);
        let mut r = PcapRecords::new(&bytes[..], false, 24);
        assert_eq!(r.next_record().err(), Some(Stop::Truncated));
        let mut r = PcapRecords::new(&bytes[..5], false, 24);
        assert_eq!(r.next_record().err(), Some(Stop::Truncated));
    }

    #[test]
    fn test_absurd_caplen_is_oversized() {
        let bytes = record(false, 0x7fff_fff0, &[]);
        let mut r = PcapRecords::new(&bytes[..], false, 24);
        assert_eq!(r.next_record().err(), Some(Stop::Oversized(0x7fff_fff0)));
    }

    #[test]
    fn test_record_larger_than_the_buffer_grows_it() {
        let data = vec![9u8; BUFFER_LEN + 100];
        let bytes = record(false, data.len() as u32, &data);
        let mut r = PcapRecords::new(&bytes[..], false, 24);
        assert_eq!(r.next_record().unwrap().data.len(), BUFFER_LEN + 100);
    }

    // -----------------------------------------------------------------------------------------
    // Properties: our record loop reads what pcap-parser's legacy reader reads.

    use pcap_parser::traits::PcapReaderIterator;
    use pcap_parser::{LegacyPcapReader, PcapBlockOwned, PcapError};
    use proptest::prelude::*;

    /// A classic pcap file (header and records) in the given byte order.
    fn file(be: bool, records: &[(u32, u32, u32, Vec<u8>)]) -> Vec<u8> {
        let word = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let half = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut out = Vec::new();
        out.extend_from_slice(&word(0xa1b2_c3d4));
        out.extend_from_slice(&half(2));
        out.extend_from_slice(&half(4));
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&word(262_144));
        out.extend_from_slice(&word(1));
        for (seconds, fraction, orig_len, data) in records {
            for v in [*seconds, *fraction, data.len() as u32, *orig_len] {
                out.extend_from_slice(&word(v));
            }
            out.extend_from_slice(data);
        }
        out
    }

    type Owned = (u32, u32, u32, Vec<u8>);

    /// Every record pcap-parser reads before it stops.
    fn by_pcap_parser(bytes: &[u8]) -> Vec<Owned> {
        let mut out = Vec::new();
        let Ok(mut reader) = LegacyPcapReader::new(1 << 16, bytes) else { return out };
        loop {
            match reader.next() {
                Ok((len, block)) => {
                    if let PcapBlockOwned::Legacy(b) = block {
                        out.push((b.ts_sec, b.ts_usec, b.origlen, b.data.to_vec()));
                    }
                    reader.consume(len);
                }
                Err(PcapError::Incomplete(_)) => {
                    if reader.refill().is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        out
    }

    /// Every record our loop reads before it stops, and why it stopped.
    fn by_our_loop(bytes: &[u8], be: bool) -> (Vec<Owned>, Stop) {
        let mut out = Vec::new();
        let mut r = PcapRecords::new(Trickle(bytes.get(24..).unwrap_or_default().to_vec(), 0), be, 24);
        loop {
            match r.next_record() {
                Ok(rec) => out.push((rec.seconds, rec.fraction, rec.orig_len, rec.data.to_vec())),
                Err(stop) => return (out, stop),
            }
        }
    }

    fn records() -> impl Strategy<Value = Vec<Owned>> {
        prop::collection::vec((any::<u32>(), 0u32..1_000_000, any::<u32>(), prop::collection::vec(any::<u8>(), 0..200)), 0..20)
    }

    proptest! {
        #[test]
        fn prop_records_match_pcap_parser(be in any::<bool>(), recs in records()) {
            let bytes = file(be, &recs);
            let (ours, stop) = by_our_loop(&bytes, be);
            prop_assert_eq!(stop, Stop::End);
            prop_assert_eq!(&ours, &recs);
            prop_assert_eq!(by_pcap_parser(&bytes), recs);
        }

        #[test]
        fn prop_cut_file_reads_the_whole_records_before_the_cut(be in any::<bool>(), recs in records(), cut in any::<prop::sample::Index>()) {
            let bytes = file(be, &recs);
            let at = 24 + cut.index(bytes.len() - 24 + 1);
            let cut_bytes = &bytes[..at];
            let (ours, stop) = by_our_loop(cut_bytes, be);
            prop_assert_eq!(&ours, &by_pcap_parser(cut_bytes));
            prop_assert!(recs.starts_with(&ours));
            if ours.len() < recs.len() {
                let whole_before: usize = ours.iter().map(|r| 16 + r.3.len()).sum::<usize>() + 24;
                prop_assert_eq!(stop, if at == whole_before { Stop::End } else { Stop::Truncated });
            }
        }

        #[test]
        fn prop_garbage_after_the_header_never_panics(be in any::<bool>(), tail in prop::collection::vec(any::<u8>(), 0..2000)) {
            let mut bytes = file(be, &[]);
            bytes.extend_from_slice(&tail);
            let (ours, _) = by_our_loop(&bytes, be);
            prop_assert!(ours.len() <= tail.len() / 16);
        }
    }
}
