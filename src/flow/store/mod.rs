//! Record storage: where connection records live while the tracker works on them (`records`),
//! the hot table of live flows and the tombstones of finished ones (`table`, `tombstones`), the
//! sink of counted records (`spill`), the window of capture time a long watch keeps (`window`),
//! and the trait through which a finished record is counted (`counter`).

pub mod counter;
mod prefetch;
pub mod records;
pub mod spill;
pub mod table;
pub mod tombstones;
pub mod window;

pub use counter::{Counted, Counter};
pub use records::{ConnectionStore, Finished, Retired, MAX_KEPT_WITH_PROBLEMS};
pub use table::FlowTable;
