//! Python exceptions raised by the core. Every error carries a stable `kind` slug that the CLI
//! maps to an exit code (docs/exit-codes.md).

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use crate::reader::ReadError;

create_exception!(_core, PcapqError, PyException, "Base class of every error pcapq raises.");
create_exception!(_core, CaptureError, PcapqError, "A capture could not be opened or is not a capture. args: (message, kind, path).");
create_exception!(_core, InternalError, PcapqError, "A bug in pcapq: the core panicked. args: (message,).");

pub fn capture_error(e: &ReadError) -> PyErr {
    let path = match e {
        ReadError::NotFound { path }
        | ReadError::PermissionDenied { path }
        | ReadError::IsDirectory { path }
        | ReadError::Io { path, .. }
        | ReadError::Gzip { path, .. }
        | ReadError::Empty { path }
        | ReadError::NotACapture { path, .. }
        | ReadError::BadHeader { path, .. } => path.clone(),
    };
    CaptureError::new_err((e.to_string(), e.kind(), path))
}

pub fn internal_error(what: String) -> PyErr {
    InternalError::new_err((format!("internal error in pcapq's core ({what}); please report it with the capture if you can share it"),))
}
