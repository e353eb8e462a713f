//! What the capture's offered load would have done with other settings of the listener: the
//! load taken from the capture (`load`), replayed through a model of the kernel's listen queues
//! and a prefork server (`model`).

pub mod load;
pub mod model;

pub use load::{Load, Offered};
pub use model::{replay, Settings};

/// What one listener's connections came to, counted the same way for the capture (`observed`)
/// and for a replay of its load.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub connections: u64,
    pub answered: u64,
    pub failed: u64,
    /// Failed without ever getting a SYN-ACK: every SYN was dropped until the client gave up.
    pub failed_connecting: u64,
    /// Failed after the handshake, waiting for an answer (the request dropped, queued or served late).
    pub failed_waiting: u64,
    /// Failed on an RST from the server.
    pub failed_reset: u64,
    /// Connections whose client sent its SYN more than once.
    pub syn_retransmitted: u64,
    /// Segments dropped because the accept queue was full (Linux's LISTEN_OVERFLOWS); in the
    /// capture, an estimate from the SYNs never answered and the SYN-ACKs re-sent after the
    /// client's ACK.
    pub listen_overflows: u64,
    /// The answered connections' waits from their first SYN until a worker had their request.
    pub wait_p50_ns: Option<i64>,
    pub wait_p99_ns: Option<i64>,
}

/// The `q`-quantile (0..=1) of `values` by the nearest rank; None when empty.
pub fn quantile(values: &mut [i64], q: f64) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values.get(rank - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_quantile_nearest_rank() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(quantile(&mut v, 0.5), Some(3));
        assert_eq!(quantile(&mut v, 0.99), Some(5));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
