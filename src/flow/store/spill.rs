//! The sink of finished connections: where the store hands each record once its connection is
//! counted, so that the writers of every connection (JSON, Parquet, src/output) can read them
//! back in order of id after the run, while memory holds only the live ones.
//!
//! Records go to a temporary file, unlinked as soon as it is made (nothing is left behind if
//! the process dies), in postcard's binary form; an index by id says where each one is. A
//! record written again (a late packet revived its connection) replaces the earlier one.

use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::flow::Connection;

/// Bytes of records held before they are written to the file.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

pub struct Spill {
    file: Option<File>,
    /// Records not written to the file yet; they start at `flushed`.
    buffer: Vec<u8>,
    flushed: u64,
    /// By id: where the record starts and its length (0: no record for that id).
    index: Vec<(u64, u32)>,
    /// The first failure to make, write or read the file, as a sentence.
    error: Option<String>,
}

impl Spill {
    /// A new sink in a temporary file in `dir`. A failure is kept and reported by `error`.
    pub fn create(dir: &Path) -> Spill {
        let mut spill = Spill { file: None, buffer: Vec::with_capacity(WRITE_BUFFER_BYTES), flushed: 0, index: Vec::new(), error: None };
        match make_unlinked(dir) {
            Ok(file) => spill.file = Some(file),
            Err(e) => spill.error = Some(format!("cannot make a temporary file in {}: {e}", dir.display())),
        }
        spill
    }

    /// Why the records are not all there, if they are not.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Keeps `conn`, replacing an earlier record of its id.
    pub fn put(&mut self, conn: &Connection) {
        if self.error.is_some() {
            return;
        }
        let start = self.flushed + self.buffer.len() as u64;
        let before = self.buffer.len();
        match postcard::to_extend(conn, std::mem::take(&mut self.buffer)) {
            Ok(buffer) => self.buffer = buffer,
            Err(e) => {
                self.error = Some(format!("cannot store connection {}: {e}", conn.id));
                return;
            }
        }
        let len = (self.buffer.len() - before) as u32;
        let id = conn.id as usize;
        if self.index.len() <= id {
            self.index.resize(id + 1, (0, 0));
        }
        self.index[id] = (start, len);
        if self.buffer.len() >= WRITE_BUFFER_BYTES {
            self.flush();
        }
    }

    fn flush(&mut self) {
        let Some(file) = &mut self.file else { return };
        if let Err(e) = file.write_all(&self.buffer) {
            self.error = Some(format!("cannot write the temporary file of connections: {e}"));
        }
        self.flushed += self.buffer.len() as u64;
        self.buffer.clear();
    }

    /// The record of `id`, if one was put.
    pub fn get(&mut self, id: u64) -> Option<Connection> {
        let mut bytes = Vec::new();
        self.read(id, &mut bytes)
    }

    /// Reads the record of `id` using `bytes` as room.
    fn read(&mut self, id: u64, bytes: &mut Vec<u8>) -> Option<Connection> {
        let &(start, len) = self.index.get(id as usize)?;
        if len == 0 || self.error.is_some() {
            return None;
        }
        let len = len as usize;
        let record: &[u8] = if start >= self.flushed {
            let at = (start - self.flushed) as usize;
            self.buffer.get(at..at + len)?
        } else {
            bytes.resize(len, 0);
            if let Err(e) = self.file.as_ref()?.read_exact_at(bytes, start) {
                self.error = Some(format!("cannot read the temporary file of connections: {e}"));
                return None;
            }
            bytes
        };
        match postcard::from_bytes(record) {
            Ok(conn) => Some(conn),
            Err(e) => {
                self.error = Some(format!("damaged record of connection {id} in the temporary file: {e}"));
                None
            }
        }
    }

    /// Records kept, one per id.
    pub fn len(&self) -> usize {
        self.index.iter().filter(|(_, len)| *len > 0).count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `each` with every record in order of id. Fails with the first error of the sink or
    /// of `each`.
    pub fn for_each(&mut self, mut each: impl FnMut(&Connection) -> io::Result<()>) -> io::Result<()> {
        self.flush();
        let mut bytes = Vec::new();
        for id in 0..self.index.len() as u64 {
            if let Some(conn) = self.read(id, &mut bytes) {
                each(&conn)?;
            }
            if let Some(e) = &self.error {
                return Err(io::Error::other(e.clone()));
            }
        }
        match &self.error {
            Some(e) => Err(io::Error::other(e.clone())),
            None => Ok(()),
        }
    }
}

/// A new file in `dir` for reading and writing, its name removed at once.
fn make_unlinked(dir: &Path) -> io::Result<File> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static MADE: AtomicU64 = AtomicU64::new(0);
    let name = format!(".pcapq-connections-{}-{}.tmp", std::process::id(), MADE.fetch_add(1, Ordering::Relaxed));
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::connection::ConnState;
    use crate::flow::Endpoint;

    fn record(id: u64, packets: u64) -> Connection {
        let client = Endpoint { ip: std::net::IpAddr::from([10, 0, 0, 1]), port: 40000 };
        let server = Endpoint { ip: std::net::IpAddr::from([10, 0, 0, 2]), port: 9000 };
        let mut c = Connection::revived(id, client, server, ConnState::Established, Default::default(), Default::default(), 1_000);
        c.counts[0].packets = packets;
        c
    }

    #[test]
    fn test_spill_gives_records_back_in_id_order_the_last_put_winning() {
        let dir = std::env::temp_dir();
        let mut spill = Spill::create(&dir);
        for (id, packets) in [(2, 20), (0, 1), (1, 10), (0, 3)] {
            spill.put(&record(id, packets));
        }
        assert_eq!(spill.get(0).map(|c| c.counts[0].packets), Some(3));
        let mut seen = Vec::new();
        spill.for_each(|c| Ok(seen.push((c.id, c.counts[0].packets)))).unwrap();
        assert_eq!(seen, vec![(0, 3), (1, 10), (2, 20)]);
        // Read back from the file as well as from the buffer.
        assert_eq!(spill.get(2).map(|c| c.counts[0].packets), Some(20));
        assert_eq!(spill.len(), 3);
    }

    #[test]
    fn test_spill_in_missing_directory_reports_why() {
        let mut spill = Spill::create(Path::new("/nonexistent/pcapq"));
        spill.put(&record(0, 1));
        let err = spill.for_each(|_| Ok(())).unwrap_err().to_string();
        assert!(err.starts_with("cannot make a temporary file in /nonexistent/pcapq"), "{err}");
    }
}
