//! Machine-readable output written by the core (the Python front renders everything for people).

pub mod annotate;
pub mod comments;
pub mod json;
pub mod labels;
pub mod parquet;
pub mod paths;
