//! Reading ahead on a thread of its own: a gzip capture's inflating runs beside the decoding,
//! so the two cores of a run share three jobs (inflate; read and decode; track) instead of the
//! reading thread doing the first two alone.

use std::io::{self, Read};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread;

/// Bytes asked of the inner stream per read.
const CHUNK: usize = 128 * 1024;
/// Chunks in flight between the two threads (and so in memory at once, plus the one read).
const IN_FLIGHT: usize = 8;

/// A stream read by a thread that runs ahead of its reader. Each read of the inner stream is
/// passed on as it comes (a stream that arrives slowly is not held up), an error once, and the
/// end as an empty chunk; buffers go back to the thread to be filled again.
pub struct ReadAhead {
    chunks: Receiver<io::Result<Vec<u8>>>,
    spare: SyncSender<Vec<u8>>,
    current: Vec<u8>,
    at: usize,
    ended: bool,
}

impl ReadAhead {
    pub fn spawn(mut inner: Box<dyn Read + Send>) -> io::Result<ReadAhead> {
        let (send, chunks) = sync_channel::<io::Result<Vec<u8>>>(IN_FLIGHT);
        let (spare, spares) = sync_channel::<Vec<u8>>(IN_FLIGHT + 1);
        thread::Builder::new().name("pcapq-read-ahead".into()).spawn(move || loop {
            let mut buf = spares.try_recv().unwrap_or_default();
            buf.resize(CHUNK, 0);
            let (item, last) = match inner.read(&mut buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => (Err(e), true),
                Ok(n) => {
                    buf.truncate(n);
                    (Ok(buf), n == 0)
                }
            };
            // Stop at the end or the first error, or when the reader is gone.
            if send.send(item).is_err() || last {
                return;
            }
        })?;
        Ok(ReadAhead { chunks, spare, current: Vec::new(), at: 0, ended: false })
    }
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.at == self.current.len() {
            if self.ended {
                return Ok(0);
            }
            match self.chunks.recv() {
                Ok(Ok(chunk)) if chunk.is_empty() => self.ended = true,
                Ok(Ok(chunk)) => {
                    let used = std::mem::replace(&mut self.current, chunk);
                    self.at = 0;
                    // Back to the thread, unless it has enough spares.
                    let _ = self.spare.try_send(used);
                }
                Ok(Err(e)) => {
                    self.ended = true;
                    return Err(e);
                }
                Err(_) => {
                    self.ended = true;
                    return Err(io::Error::other("the thread reading ahead stopped"));
                }
            }
        }
        let n = buf.len().min(self.current.len() - self.at);
        if let (Some(to), Some(from)) = (buf.get_mut(..n), self.current.get(self.at..self.at + n)) {
            to.copy_from_slice(from);
        }
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives `data` in reads of at most `step` bytes, then fails with `fail` if given.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        fail: Option<io::ErrorKind>,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.at == self.data.len() {
                return match self.fail.take() {
                    Some(kind) => Err(io::Error::new(kind, "broken")),
                    None => Ok(0),
                };
            }
            let n = buf.len().min(self.step).min(self.data.len() - self.at);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn test_reads_every_byte_in_order_whatever_the_sizes() {
        for (len, step, want) in [(0, 1, 7), (1, 1, 1), (1_000_003, 70_000, 4096), (3 * CHUNK + 5, CHUNK, 1)] {
            let data = bytes(len);
            let mut ahead = ReadAhead::spawn(Box::new(Trickle { data: data.clone(), at: 0, step, fail: None })).unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0u8; want];
            loop {
                let n = ahead.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            assert_eq!(got, data, "{len} bytes in reads of {step}, taken {want} at a time");
            assert_eq!(ahead.read(&mut buf).unwrap(), 0, "the end stays the end");
        }
    }

    #[test]
    fn test_an_error_comes_after_the_bytes_before_it_and_ends_the_stream() {
        let data = bytes(300_000);
        let mut ahead = ReadAhead::spawn(Box::new(Trickle { data: data.clone(), at: 0, step: 50_000, fail: Some(io::ErrorKind::InvalidData) })).unwrap();
        let mut got = Vec::new();
        let err = loop {
            let mut buf = vec![0u8; 10_000];
            match ahead.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        assert_eq!(got, data);
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert_eq!(ahead.read(&mut [0u8; 16]).unwrap(), 0);
    }
}
