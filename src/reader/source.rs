//! Opening a capture: a file or stdin, gzip-compressed or not, and what its first bytes say it is.

use std::fs::File;
use std::io::{self, Chain, Cursor, Read};
use std::sync::{Arc, Mutex};

use flate2::read::MultiGzDecoder;

use super::ahead::ReadAhead;
use super::ReadError;

/// How many bytes are read up front to recognise the format. Enough for any section header block
/// tcpdump or dumpcap writes, so the pcapng reader finds its whole first block in one read.
const PEEK_LEN: usize = 64 * 1024;

/// The container format, from the first four bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Format {
    /// Classic libpcap, either byte order, micro- or nanosecond timestamps.
    Pcap,
    /// pcapng (a section header block comes first).
    PcapNg,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Pcap => "pcap",
            Format::PcapNg => "pcapng",
        }
    }
}

/// A byte stream positioned at the start of a capture, with its format known.
pub struct Source {
    pub format: Format,
    pub gzip: bool,
    pub stream: Chain<Cursor<Vec<u8>>, Box<dyn Read + Send>>,
    /// The first read error under the capture reader (which keeps only that reading failed).
    pub fault: StreamFault,
}

/// What went wrong under the capture reader, which pcap-parser reduces to "reading failed".
/// Shared between the stream and the reader that reports the stop.
#[derive(Clone, Default)]
pub struct StreamFault(Arc<Mutex<Fault>>);

#[derive(Default)]
struct Fault {
    /// The first read error's text.
    error: Option<String>,
    /// The gzip data ended before its end-of-stream marker.
    gzip_cut: bool,
}

impl StreamFault {
    fn note(&self, e: &io::Error, gzip_cut: bool) {
        if let Ok(mut fault) = self.0.lock() {
            fault.error.get_or_insert_with(|| e.to_string());
            fault.gzip_cut |= gzip_cut;
        }
    }

    /// The text of the first read error, if there was one.
    pub fn error(&self) -> Option<String> {
        self.0.lock().ok()?.error.clone()
    }

    pub fn gzip_cut(&self) -> bool {
        self.0.lock().map(|f| f.gzip_cut).unwrap_or(false)
    }
}

/// Notes every read error in a `StreamFault`. Gzip data that ends early ends the stream there:
/// what was inflated before the cut is read like a capture cut short.
struct Watched {
    inner: Box<dyn Read + Send>,
    fault: StreamFault,
    gzip: bool,
}

impl Read for Watched {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                let cut = self.gzip && e.kind() == io::ErrorKind::UnexpectedEof;
                self.fault.note(&e, cut);
                if cut {
                    Ok(0)
                } else {
                    Err(e)
                }
            }
            ok => ok,
        }
    }
}

/// Opens `path` (`-` is stdin), undoes gzip if the stream starts with its magic, and recognises
/// the capture format. Nothing is written anywhere.
pub fn open(path: &str) -> Result<Source, ReadError> {
    let raw: Box<dyn Read + Send> = if path == "-" {
        Box::new(io::stdin())
    } else {
        let meta = std::fs::metadata(path).map_err(|e| ReadError::io(path, e))?;
        if meta.is_dir() {
            return Err(ReadError::IsDirectory { path: path.to_string() });
        }
        Box::new(File::open(path).map_err(|e| ReadError::io(path, e))?)
    };
    from_stream(path, raw)
}

/// Like `open`, on a stream already open; `name` names it in messages.
pub fn from_stream(name: &str, raw: Box<dyn Read + Send>) -> Result<Source, ReadError> {
    let path = name;
    let fault = StreamFault::default();
    let (head, rest) = peek(raw, PEEK_LEN).map_err(|e| ReadError::io(path, e))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        let inflated = MultiGzDecoder::new(Cursor::new(head).chain(rest));
        let watched: Box<dyn Read + Send> = Box::new(Watched { inner: Box::new(inflated), fault: fault.clone(), gzip: true });
        // Inflated on a thread of its own, beside the decoding.
        let ahead: Box<dyn Read + Send> = Box::new(ReadAhead::spawn(watched).map_err(|e| ReadError::io(path, e))?);
        let (head, rest) = peek(ahead, PEEK_LEN).map_err(|e| ReadError::gzip(path, e))?;
        if head.len() < 4 && fault.gzip_cut() {
            let reason = io::Error::new(io::ErrorKind::UnexpectedEof, "cut short before any capture data");
            return Err(ReadError::gzip(path, reason));
        }
        return recognise(path, head, rest, true, fault);
    }
    recognise(path, head, rest, false, fault)
}

fn recognise(
    path: &str,
    head: Vec<u8>,
    rest: Box<dyn Read + Send>,
    gzip: bool,
    fault: StreamFault,
) -> Result<Source, ReadError> {
    let format = match head.get(..4) {
        None if head.is_empty() => return Err(ReadError::Empty { path: path.to_string() }),
        None => return Err(ReadError::NotACapture { path: path.to_string(), reason: format!("only {} bytes", head.len()) }),
        // pcap magic 0xa1b2c3d4 (microseconds) and 0xa1b23c4d (nanoseconds), in either byte order.
        Some([0xa1, 0xb2, 0xc3, 0xd4] | [0xd4, 0xc3, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d] | [0x4d, 0x3c, 0xb2, 0xa1]) => {
            Format::Pcap
        }
        // pcapng section header block type 0x0A0D0D0A reads the same in both byte orders.
        Some([0x0a, 0x0d, 0x0d, 0x0a]) => Format::PcapNg,
        Some(magic) => {
            return Err(ReadError::NotACapture { path: path.to_string(), reason: describe_magic(magic, &head) })
        }
    };
    let rest: Box<dyn Read + Send> = if gzip { rest } else { Box::new(Watched { inner: rest, fault: fault.clone(), gzip: false }) };
    Ok(Source { format, gzip, stream: Cursor::new(head).chain(rest), fault })
}

/// A short guess at what a non-capture file is, for the error message.
fn describe_magic(magic: &[u8], head: &[u8]) -> String {
    let hex = magic.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ");
    let printable = head.iter().take(512).all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace());
    if magic == [0xa1, 0xb2, 0xcd, 0x34] || magic == [0x34, 0xcd, 0xb2, 0xa1] {
        "a modified (Kuznetzov) pcap, which is not supported; convert it with `editcap -F pcap`".into()
    } else if printable {
        "it is text, not a pcap or pcapng capture (tcpdump -w writes captures; tcpdump's printed output cannot be analysed)".into()
    } else {
        format!("unknown magic number {hex}; expected pcap (a1b2c3d4), pcapng (0a0d0d0a) or gzip (1f8b)")
    }
}

/// Reads what recognising the format and reading the first block needs (fewer bytes only at the
/// end of the stream, at most `len`), and hands back the rest of the stream. A stream that
/// arrives slowly (`tcpdump -w - | pcapq watch -`) is not held up waiting for more.
fn peek(mut stream: Box<dyn Read + Send>, len: usize) -> io::Result<(Vec<u8>, Box<dyn Read + Send>)> {
    let mut head = Vec::with_capacity(len);
    let mut chunk = vec![0u8; len];
    while head.len() < first_block_len(&head).min(len) {
        let want = len - head.len();
        match stream.read(chunk.get_mut(..want).unwrap_or_default()) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok((head, stream))
}

/// How many bytes of the stream's head are needed: 4 to tell the format; then gzip's magic
/// (the inflated stream is peeked again), pcap's 24-byte file header, or pcapng's whole section
/// header block (its length at 4..8, in the byte order its magic at 8..12 gives); anything else
/// is looked at up to 512 bytes for the error message.
fn first_block_len(head: &[u8]) -> usize {
    const TEXT_LOOK: usize = 512;
    match head.get(..4) {
        None => 4,
        Some([0x1f, 0x8b, ..]) => 4,
        Some([0xa1, 0xb2, 0xc3, 0xd4] | [0xd4, 0xc3, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d] | [0x4d, 0x3c, 0xb2, 0xa1]) => 24,
        Some([0x0a, 0x0d, 0x0d, 0x0a]) => match (head.get(4..8), head.get(8..12)) {
            (Some(len), Some(magic)) => {
                let len: [u8; 4] = len.try_into().unwrap_or([0; 4]);
                let big_endian = magic == [0x1a, 0x2b, 0x3c, 0x4d];
                let len = if big_endian { u32::from_be_bytes(len) } else { u32::from_le_bytes(len) };
                (len as usize).max(12)
            }
            _ => 12,
        },
        Some(_) => TEXT_LOOK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(name: &str, bytes: &[u8]) -> String {
        let dir = std::env::temp_dir().join(format!("pcapq-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
        path.to_string_lossy().into_owned()
    }

    #[test]
    fn test_open_empty_file_is_empty_error() {
        let path = temp_file("empty.pcap", b"");
        assert!(matches!(open(&path), Err(ReadError::Empty { .. })));
    }

    #[test]
    fn test_open_text_file_says_text() {
        let path = temp_file("notes.txt", b"12:00:00.000 IP 10.0.0.1.5555 > 10.0.0.2.80: Flags [S]\n");
        let err = open(&path).err().unwrap();
        assert!(err.to_string().contains("it is text"), "{err}");
    }

    #[test]
    fn test_open_recognises_both_pcap_byte_orders_and_pcapng() {
        for (magic, format) in [
            ([0xd4, 0xc3, 0xb2, 0xa1], Format::Pcap),
            ([0xa1, 0xb2, 0xc3, 0xd4], Format::Pcap),
            ([0x4d, 0x3c, 0xb2, 0xa1], Format::Pcap),
            ([0x0a, 0x0d, 0x0d, 0x0a], Format::PcapNg),
        ] {
            let path = temp_file("magic.bin", &magic);
            assert_eq!(open(&path).ok().unwrap().format, format);
        }
    }

    #[test]
    fn test_open_missing_file_names_path() {
        let err = open("/nonexistent/dump.pcap").err().unwrap();
        assert!(err.to_string().contains("/nonexistent/dump.pcap"));
        assert!(matches!(err, ReadError::NotFound { .. }));
    }

    #[test]
    fn test_open_gzip_cut_in_its_header_is_gzip_error() {
        use flate2::write::GzEncoder;
        let mut enc = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&[0xd4, 0xc3, 0xb2, 0xa1]).unwrap();
        let gz = enc.finish().unwrap();
        let path = temp_file("cut-header.pcap.gz", &gz[..8]);
        let err = open(&path).err().unwrap();
        assert_eq!(err.kind(), "gzip", "{err}");
        assert!(err.to_string().contains("cut short"), "{err}");
    }

    #[test]
    fn test_open_gzip_is_transparent() {
        use flate2::write::GzEncoder;
        let mut enc = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&[0x0a, 0x0d, 0x0d, 0x0a, 1, 2, 3]).unwrap();
        let path = temp_file("dump.pcapng.gz", &enc.finish().unwrap());
        let source = open(&path).ok().unwrap();
        assert!(source.gzip);
        assert_eq!(source.format, Format::PcapNg);
    }

    /// A writer that sent `0` in pieces of `1` bytes and has nothing more yet: reading past
    /// them is an error here (a live pipe would block).
    struct Arrived(Vec<u8>, usize);

    impl Read for Arrived {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("read past what has arrived"));
            }
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0.drain(..n);
            Ok(n)
        }
    }

    #[test]
    fn test_from_stream_reads_no_more_than_the_first_block_needs() {
        let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1];
        pcap.extend_from_slice(&[0; 20]);
        let source = from_stream("-", Box::new(Arrived(pcap, 5))).ok().unwrap();
        assert_eq!(source.format, Format::Pcap);
        // A pcapng section header block of 28 bytes, arriving 3 bytes at a time.
        let mut shb = vec![0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0];
        shb.extend_from_slice(&[0xff; 8]);
        shb.extend_from_slice(&[28, 0, 0, 0]);
        let source = from_stream("-", Box::new(Arrived(shb, 3))).ok().unwrap();
        assert_eq!(source.format, Format::PcapNg);
    }
}
