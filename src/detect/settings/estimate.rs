//! One inferred setting: a value (or none, with a range), how sure, and what it rests on.

/// A setting's value as the capture shows it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    Count(u64),
    Seconds(f64),
    Flag(bool),
    /// Only a range is shown.
    Unknown,
}

/// A bound of a range: a count or seconds, as the value is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    Count(u64),
    Seconds(f64),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub value: Value,
    pub low: Option<Bound>,
    pub high: Option<Bound>,
    pub confidence: f64,
    /// What it rests on, in words, most telling first.
    pub evidence: Vec<String>,
}

impl Estimate {
    /// A count known to lie between `low` and `high` (None: unbounded), `value` when one is shown.
    pub fn count(value: Option<u64>, low: Option<u64>, high: Option<u64>, confidence: f64, evidence: Vec<String>) -> Estimate {
        Estimate {
            value: value.map_or(Value::Unknown, Value::Count),
            low: low.map(Bound::Count),
            high: high.map(Bound::Count),
            confidence,
            evidence,
        }
    }

    pub fn flag(value: bool, confidence: f64, evidence: Vec<String>) -> Estimate {
        Estimate { value: Value::Flag(value), low: None, high: None, confidence, evidence }
    }

    /// As JSON: {"value", "low", "high", "confidence", "evidence"}.
    pub fn to_json(&self) -> serde_json::Value {
        let bound = |b: Option<Bound>| match b {
            Some(Bound::Count(n)) => serde_json::json!(n),
            Some(Bound::Seconds(s)) => serde_json::json!(s),
            None => serde_json::Value::Null,
        };
        let value = match self.value {
            Value::Count(n) => serde_json::json!(n),
            Value::Seconds(s) => serde_json::json!(s),
            Value::Flag(b) => serde_json::json!(b),
            Value::Unknown => serde_json::Value::Null,
        };
        serde_json::json!({
            "value": value,
            "low": bound(self.low),
            "high": bound(self.high),
            "confidence": (self.confidence * 100.0).round() / 100.0,
            "evidence": self.evidence,
        })
    }
}

/// "1 connection", "3 connections".
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
