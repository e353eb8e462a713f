//! Classic pcap files read through a memory map instead of `read()` calls: records are parsed
//! where the page cache holds them, without copying them into a buffer first.
//!
//! The file is mapped one window of `WINDOW_LEN` bytes at a time, the previous window unmapped,
//! so the process's resident memory holds one window of the file, not all of it. A file that
//! shrinks while it is read is the risk of any map: touching a page past its new end raises
//! SIGBUS. Before mapping a window the file's length is read again and the window ends there,
//! so only a file cut while a window is being read can do that.

use std::fs::File;

use memmap2::{Mmap, MmapOptions};

use super::pcap::{Record, RecordSource, Stop, RECORD_HEADER_LEN};
use super::MAX_RECORD_LEN;

/// Bytes mapped at once. Mapped pages count in the resident set as long as they stay mapped:
/// a small window keeps that small, at the cost of an mmap call every window.
const WINDOW_LEN: u64 = 8 << 20;
/// Window starts are multiples of this: mmap's offset must be a multiple of the page size
/// (4 KiB on x86-64, up to 64 KiB elsewhere).
const WINDOW_ALIGN: u64 = 64 << 10;

/// A read-only file, mapped one window at a time.
pub struct MappedFile {
    file: File,
    len: u64,
    window: Option<Mmap>,
    window_start: u64,
    window_len: u64,
}

impl MappedFile {
    pub fn new(file: File, len: u64) -> MappedFile {
        MappedFile::with_window(file, len, WINDOW_LEN)
    }

    fn with_window(file: File, len: u64, window_len: u64) -> MappedFile {
        MappedFile { file, len, window: None, window_start: 0, window_len: window_len.max(WINDOW_ALIGN) }
    }

    /// The file's length, as last read.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The bytes from `offset` to the end of the window, at least `need` of them: the window
    /// moves when they are not all in it. `None` when mapping failed or the file is now
    /// shorter than `offset + need`.
    #[inline]
    pub fn bytes_at(&mut self, offset: u64, need: usize) -> Option<&[u8]> {
        let in_window = offset.checked_sub(self.window_start).and_then(|at| usize::try_from(at).ok());
        let fits = match (&self.window, in_window) {
            (Some(map), Some(at)) => map.len().checked_sub(at).is_some_and(|left| left >= need),
            _ => false,
        };
        if !fits {
            self.remap(offset, offset.checked_add(need as u64)?)?;
        }
        let map = self.window.as_ref()?;
        map.get(usize::try_from(offset - self.window_start).ok()?..)
    }

    #[cold]
    fn remap(&mut self, offset: u64, end: u64) -> Option<()> {
        // Unmap first: two windows at once would double what is resident.
        self.window = None;
        self.len = self.file.metadata().ok()?.len().min(self.len);
        if end > self.len {
            return None;
        }
        let start = offset - offset % WINDOW_ALIGN;
        let stop = (start + self.window_len).max(end).min(self.len);
        let len = usize::try_from(stop - start).ok()?;
        // The one unsafe call in pcapq (src/lib.rs denies unsafe code): memmap2 cannot promise
        // that the mapped bytes do not change underneath, as another process may write or cut
        // the file. We only read the bytes, through bounds-checked slices, so changed bytes
        // are only wrong data; a cut is checked above (see the module comment for the rest).
        #[allow(unsafe_code)]
        let map = unsafe { MmapOptions::new().offset(start).len(len).populate().map(&self.file) }.ok()?;
        // Records are read front to back, once: the kernel may read ahead and drop pages behind.
        let _ = map.advise(memmap2::Advice::Sequential);
        self.window_start = start;
        self.window = Some(map);
        Some(())
    }
}

/// Classic pcap records from a mapped file.
pub struct MappedRecords {
    file: MappedFile,
    /// Byte offset of the next record.
    offset: u64,
    big_endian: bool,
}

impl MappedRecords {
    /// Reads records from `file`, starting just after its 24-byte file header.
    pub fn new(file: MappedFile, big_endian: bool, header_len: u64) -> MappedRecords {
        MappedRecords { file, offset: header_len, big_endian }
    }
}

impl RecordSource for MappedRecords {
    fn offset(&self) -> u64 {
        self.offset
    }

    fn next_record(&mut self) -> Result<Record<'_>, Stop> {
        let left = self.file.len().saturating_sub(self.offset);
        if left == 0 {
            return Err(Stop::End);
        }
        if left < RECORD_HEADER_LEN as u64 {
            return Err(Stop::Truncated);
        }
        let big_endian = self.big_endian;
        let offset = self.offset;
        let header = self.file.bytes_at(offset, RECORD_HEADER_LEN).ok_or(Stop::Io)?;
        let (seconds, fraction, caplen, orig_len) = super::pcap::record_header(header, big_endian).ok_or(Stop::Io)?;
        if caplen as usize > MAX_RECORD_LEN {
            return Err(Stop::Oversized(u64::from(caplen)));
        }
        let len = RECORD_HEADER_LEN + caplen as usize;
        if left < len as u64 {
            return Err(Stop::Truncated);
        }
        self.offset += len as u64;
        let bytes = self.file.bytes_at(offset, len).ok_or(Stop::Io)?;
        let data = bytes.get(RECORD_HEADER_LEN..len).ok_or(Stop::Truncated)?;
        Ok(Record { seconds, fraction, orig_len, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reader::pcap::PcapRecords;
    use proptest::prelude::*;
    use std::io::Write;

    /// Records (seconds, fraction, orig_len, data) after a 24-byte header of zeros.
    fn file_bytes(be: bool, records: &[(u32, u32, u32, Vec<u8>)]) -> Vec<u8> {
        let word = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut out = vec![0u8; 24];
        for (seconds, fraction, orig_len, data) in records {
            for v in [*seconds, *fraction, data.len() as u32, *orig_len] {
                out.extend_from_slice(&word(v));
            }
            out.extend_from_slice(data);
        }
        out
    }

    fn temp(name: &str, bytes: &[u8]) -> (File, u64) {
        let dir = std::env::temp_dir().join(format!("pcapq-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
        (File::open(&path).unwrap(), bytes.len() as u64)
    }

    type Owned = (u32, u32, u32, Vec<u8>);

    fn read_all(source: &mut dyn RecordSource) -> (Vec<Owned>, Stop, u64) {
        let mut out = Vec::new();
        loop {
            let offset = source.offset();
            match source.next_record() {
                Ok(r) => out.push((r.seconds, r.fraction, r.orig_len, r.data.to_vec())),
                Err(stop) => return (out, stop, offset),
            }
        }
    }

    #[test]
    fn test_records_across_window_edges_are_whole() {
        // Records of 1000 bytes in windows of 64 KiB: many straddle a window's end.
        let recs: Vec<Owned> = (0..300u32).map(|i| (i, i, 1000, vec![i as u8; 1000 - 16])).collect();
        let bytes = file_bytes(false, &recs);
        let (file, len) = temp("windows.pcap", &bytes);
        let mut mapped = MappedRecords::new(MappedFile::with_window(file, len, WINDOW_ALIGN), false, 24);
        let (got, stop, offset) = read_all(&mut mapped);
        assert_eq!(got, recs);
        assert_eq!((stop, offset), (Stop::End, len));
    }

    #[test]
    fn test_file_cut_after_opening_stops_reading_there() {
        let recs: Vec<Owned> = (0..200u32).map(|i| (i, 0, 600, vec![7; 600])).collect();
        let bytes = file_bytes(true, &recs);
        let (file, len) = temp("shrinks.pcap", &bytes);
        let mut mapped = MappedRecords::new(MappedFile::with_window(file, len, WINDOW_ALIGN), true, 24);
        assert!(mapped.next_record().is_ok());
        let dir = std::env::temp_dir().join(format!("pcapq-mapped-{}", std::process::id()));
        std::fs::OpenOptions::new().write(true).open(dir.join("shrinks.pcap")).unwrap().set_len(80_000).unwrap();
        let (got, stop, _) = read_all(&mut mapped);
        assert!(got.len() < 199, "{}", got.len());
        assert!(matches!(stop, Stop::Truncated | Stop::Io | Stop::End), "{stop:?}");
    }

    fn records() -> impl Strategy<Value = Vec<Owned>> {
        prop::collection::vec((any::<u32>(), 0u32..1_000_000, any::<u32>(), prop::collection::vec(any::<u8>(), 0..200)), 0..20)
    }

    proptest! {
        #[test]
        fn prop_mapped_reads_what_the_stream_reads(be in any::<bool>(), recs in records(), cut in any::<prop::sample::Index>()) {
            let bytes = file_bytes(be, &recs);
            let at = 24 + cut.index(bytes.len() - 24 + 1);
            let cut_bytes = &bytes[..at];
            let (file, len) = temp(&format!("prop-{be}-{at}.pcap"), cut_bytes);
            let mut mapped = MappedRecords::new(MappedFile::new(file, len), be, 24);
            let mut stream = PcapRecords::new(&cut_bytes[24..], be, 24);
            prop_assert_eq!(read_all(&mut mapped), read_all(&mut stream));
        }
    }
}
