//! The census's books filled on a thread of their own. Of what `Census::count` does with a
//! finished connection, the per-server statistics, the timeline and the give-ups need nothing
//! back: the tracking thread hands each connection over, with the outcome and symptoms it
//! judged, and goes on to the next segment. They are a share of the tracking thread's work that
//! the reading thread, which waits for the tracking one, has room for.
//!
//! The books come back whole at the end (`Beside::join`), filled in the order the connections
//! were counted: the same books as counting them on the tracking thread.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use crate::census::Timeline;
use crate::detect::servers::ServerBook;
use crate::detect::timeouts::GiveUps;
use crate::detect::{Outcome, Symptoms};
use crate::flow::Connection;

/// Connections handed over at once: few hand-overs, about 200 KiB a batch.
const BATCH_LEN: usize = 512;
/// Batches on their way at once; the tracking thread waits when the books fall this far behind.
const BATCHES_IN_FLIGHT: usize = 4;

/// A connection to add to the books: a copy of its record, with its outcome and symptoms.
type Entry = (Connection, Outcome, Symptoms);

/// The books `Census::count` adds every connection to, once.
#[derive(Debug, Default)]
pub struct Books {
    pub servers: ServerBook,
    pub timeline: Timeline,
    pub give_ups: GiveUps,
}

impl Books {
    fn add(&mut self, conn: &Connection, outcome: Outcome, symptoms: Symptoms) {
        super::add_to_books(&mut self.servers, &mut self.timeline, &mut self.give_ups, conn, outcome, symptoms);
    }
}

/// The thread that fills the books, and the batch being gathered for it.
pub struct Beside {
    batch: Vec<Entry>,
    full: Option<SyncSender<Vec<Entry>>>,
    /// Batches handed back, emptied. In a mutex only to make the census `Sync` (a Python
    /// object holds it); one thread takes them.
    empty: Mutex<Receiver<Vec<Entry>>>,
    thread: Option<JoinHandle<Books>>,
}

impl std::fmt::Debug for Beside {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Beside({} waiting)", self.batch.len())
    }
}

impl Beside {
    /// Starts the thread; `None` if it cannot be started (the books are then filled here).
    pub fn start() -> Option<Beside> {
        let (full, full_rx) = mpsc::sync_channel::<Vec<Entry>>(BATCHES_IN_FLIGHT);
        let (empty_tx, empty) = mpsc::channel::<Vec<Entry>>();
        let thread = std::thread::Builder::new().name("pcapq-census".into()).spawn(move || fill(full_rx, empty_tx)).ok()?;
        Some(Beside { batch: Vec::with_capacity(BATCH_LEN), full: Some(full), empty: Mutex::new(empty), thread: Some(thread) })
    }

    pub fn add(&mut self, conn: &Connection, outcome: Outcome, symptoms: Symptoms) {
        self.batch.push((conn.clone(), outcome, symptoms));
        if self.batch.len() >= BATCH_LEN {
            self.send();
        }
    }

    fn send(&mut self) {
        let handed_back = self.empty.get_mut().ok().and_then(|empty| empty.try_recv().ok());
        let next = handed_back.unwrap_or_else(|| Vec::with_capacity(BATCH_LEN));
        let batch = std::mem::replace(&mut self.batch, next);
        if let Some(full) = &self.full {
            // The thread hangs up only when it panicked; `join` raises the panic.
            let _ = full.send(batch);
        }
    }

    /// Every connection handed over added: the books.
    pub fn join(mut self) -> Books {
        if !self.batch.is_empty() {
            self.send();
        }
        self.full = None;
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(books)) => books,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => Books::default(),
        }
    }
}

/// The thread: adds each batch's connections in order, hands the emptied batch back.
fn fill(full: Receiver<Vec<Entry>>, empty: Sender<Vec<Entry>>) -> Books {
    let mut books = Books::default();
    for mut batch in full {
        for (conn, outcome, symptoms) in batch.drain(..) {
            books.add(&conn, outcome, symptoms);
        }
        let _ = empty.send(batch);
    }
    books
}
