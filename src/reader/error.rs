//! What can go wrong while reading, worded for the person who gave us the file.

use std::fmt;
use std::io;

/// The capture cannot be read at all: nothing was analysed.
#[derive(Debug)]
pub enum ReadError {
    NotFound { path: String },
    PermissionDenied { path: String },
    IsDirectory { path: String },
    Io { path: String, reason: String },
    Gzip { path: String, reason: String },
    Empty { path: String },
    NotACapture { path: String, reason: String },
    BadHeader { path: String, reason: String },
}

impl ReadError {
    pub fn io(path: &str, e: io::Error) -> ReadError {
        let path = path.to_string();
        match e.kind() {
            io::ErrorKind::NotFound => ReadError::NotFound { path },
            io::ErrorKind::PermissionDenied => ReadError::PermissionDenied { path },
            _ => ReadError::Io { path, reason: e.to_string() },
        }
    }

    pub fn gzip(path: &str, e: io::Error) -> ReadError {
        ReadError::Gzip { path: path.to_string(), reason: e.to_string() }
    }

    /// A stable slug for the kind of error, shared with Python and the docs.
    pub fn kind(&self) -> &'static str {
        match self {
            ReadError::NotFound { .. } => "not_found",
            ReadError::PermissionDenied { .. } => "permission_denied",
            ReadError::IsDirectory { .. } => "is_directory",
            ReadError::Io { .. } => "io",
            ReadError::Gzip { .. } => "gzip",
            ReadError::Empty { .. } => "empty",
            ReadError::NotACapture { .. } => "not_a_capture",
            ReadError::BadHeader { .. } => "bad_header",
        }
    }
}

pub(crate) fn shown(path: &str) -> &str {
    if path == "-" {
        "standard input"
    } else {
        path
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotFound { path } => write!(f, "{}: no such file", shown(path)),
            ReadError::PermissionDenied { path } => write!(f, "{}: permission denied", shown(path)),
            ReadError::IsDirectory { path } => write!(f, "{}: is a directory, not a capture file", shown(path)),
            ReadError::Io { path, reason } => write!(f, "{}: {reason}", shown(path)),
            ReadError::Gzip { path, reason } => write!(f, "{}: not valid gzip data ({reason})", shown(path)),
            ReadError::Empty { path } => write!(f, "{}: empty, no capture in it", shown(path)),
            ReadError::NotACapture { path, reason } => write!(f, "{}: not a capture: {reason}", shown(path)),
            ReadError::BadHeader { path, reason } => write!(f, "{}: not a readable capture: {reason}", shown(path)),
        }
    }
}

impl std::error::Error for ReadError {}

/// How reading a capture ended. Everything before the stop has been analysed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReadStop {
    /// The whole file was read.
    End,
    /// The file ends in the middle of a record (a capture that was still being written, or cut).
    Truncated { offset: u64, frame: u64 },
    /// The gzip data ends early, at byte `offset` of the inflated capture: like `Truncated`, but
    /// the cut may fall between records.
    GzipCut { offset: u64, frame: u64 },
    /// A record's length fields cannot be right; nothing after it can be found.
    Corrupt { offset: u64, frame: u64, reason: String },
    IoError { offset: u64, reason: String },
}

impl ReadStop {
    pub fn kind(&self) -> &'static str {
        match self {
            ReadStop::End => "end",
            ReadStop::Truncated { .. } | ReadStop::GzipCut { .. } => "truncated",
            ReadStop::Corrupt { .. } => "corrupt",
            ReadStop::IoError { .. } => "io_error",
        }
    }

    /// The sentence for the warning, `None` when the file was read to its end.
    pub fn describe(&self) -> Option<String> {
        match self {
            ReadStop::End => None,
            ReadStop::Truncated { offset, frame } => Some(format!(
                "the capture is cut short: record {frame} at byte {offset} is incomplete; analysed the {} records before it",
                frame.saturating_sub(1)
            )),
            ReadStop::GzipCut { offset, frame } => Some(format!(
                "the capture is cut short: its gzip data ends early; analysed the {} records before byte {offset} of the uncompressed capture",
                frame.saturating_sub(1)
            )),
            ReadStop::Corrupt { offset, frame, reason } => Some(format!(
                "the capture is damaged at byte {offset} (record {frame}): {reason}; analysed the {} records before it",
                frame.saturating_sub(1)
            )),
            ReadStop::IoError { offset, reason } => Some(format!("{reason} at byte {offset}; analysed what came before")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_display_missing_file() {
        let e = ReadError::io("dump.pcap", io::Error::from(io::ErrorKind::NotFound));
        assert_eq!(e.to_string(), "dump.pcap: no such file");
        assert_eq!(e.kind(), "not_found");
    }

    #[test]
    fn test_display_stdin_is_named() {
        let e = ReadError::Empty { path: "-".into() };
        assert_eq!(e.to_string(), "standard input: empty, no capture in it");
    }

    #[test]
    fn test_truncated_describes_offset_and_records_kept() {
        let stop = ReadStop::Truncated { offset: 4096, frame: 12 };
        assert_eq!(
            stop.describe().unwrap(),
            "the capture is cut short: record 12 at byte 4096 is incomplete; analysed the 11 records before it"
        );
        assert_eq!(ReadStop::End.describe(), None);
    }

    #[test]
    fn test_gzip_cut_is_truncated_and_says_gzip() {
        let stop = ReadStop::GzipCut { offset: 2170, frame: 30 };
        assert_eq!(stop.kind(), "truncated");
        assert_eq!(
            stop.describe().unwrap(),
            "the capture is cut short: its gzip data ends early; analysed the 29 records before byte 2170 of the uncompressed capture"
        );
    }
}
