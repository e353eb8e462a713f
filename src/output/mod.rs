//! Machine-readable output written by the core (the Python front renders everything for people).

pub mod json;
pub mod parquet;
