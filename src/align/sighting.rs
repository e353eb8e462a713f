//! One TCP packet as a capture point saw it, with what tells it apart from every other packet
//! of the same capture window (`MatchKey`) and what says where it was (`FrameRef`, time). And
//! the reading of one point's files into sightings, on a thread of its own.
//!
//! The key is what a router, a NAT or a VLAN trunk between the two points leaves as it is: the
//! IPv4 Identification (RFC 791 §3.1; a NAT keeps it, Linux v6.6 net/netfilter/nf_nat_proto.c:
//! nf_nat_ipv4_manip_pkt() rewrites only addresses, ports and checksums), the TCP sequence and
//! acknowledgement numbers, the flags and the payload length (RFC 9293 §3.1), and a digest of
//! the first payload bytes. Addresses and ports may differ (NAT); TTL, checksums and VLAN tags
//! are not read.

use std::sync::mpsc;

use crate::decode::{self, ip, link, Segment};
use crate::flow::{Endpoint, FrameRef};
use crate::reader::{CaptureReader, ReadError};

/// Payload bytes the digest covers: enough to tell two segments of one length apart, and no
/// more than a 96-byte snaplen leaves of a segment with timestamps (14 + 20 + 32 + 30).
pub const DIGEST_BYTES: usize = 16;

/// What must be equal for two sightings to be one packet (the digest aside: `digests_agree`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MatchKey {
    pub seq: u32,
    pub ack: u32,
    pub len: u32,
    pub ip_id: u16,
    pub flags: u8,
}

/// One TCP packet at one capture point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sighting {
    pub time_ns: i64,
    pub at: FrameRef,
    pub src: Endpoint,
    pub dst: Endpoint,
    pub vlan: u32,
    pub key: MatchKey,
    /// FNV-1a of the first `DIGEST_BYTES` payload bytes (all of a shorter payload); 0 when the
    /// snaplen cut them (unknown: agrees with any).
    pub digest: u32,
}

impl Sighting {
    pub fn of(segment: &Segment, digest: u32, at: FrameRef, time_ns: i64) -> Sighting {
        Sighting {
            time_ns,
            at,
            src: Endpoint::source(segment),
            dst: Endpoint::destination(segment),
            vlan: segment.vlan,
            key: MatchKey { seq: segment.seq, ack: segment.ack, len: segment.payload_len, ip_id: segment.ip_id, flags: segment.flags },
            digest,
        }
    }
}

/// Whether two digests can be of one payload (0 is unknown).
pub fn digests_agree(a: u32, b: u32) -> bool {
    a == 0 || b == 0 || a == b
}

/// The digest of a frame's TCP payload (`Sighting::digest`), 0 when it cannot be read.
pub fn payload_digest(linktype: u32, frame: &[u8], payload_len: u32) -> u32 {
    if payload_len == 0 {
        // Nothing to tell apart; a non-zero constant so that "unknown" stays distinct.
        return 1;
    }
    let Ok((at, _)) = link::ip_offset(linktype, frame) else { return 0 };
    let Some(packet) = frame.get(at..) else { return 0 };
    let header = match packet.first().map(|b| b >> 4) {
        Some(4) => ip::ipv4(packet),
        Some(6) => ip::ipv6(packet),
        _ => return 0,
    };
    let Ok(header) = header else { return 0 };
    let Some(tcp) = packet.get(header.header_len..) else { return 0 };
    let Some(&offset) = tcp.get(12) else { return 0 };
    let start = usize::from(offset >> 4) * 4;
    let want = (payload_len as usize).min(DIGEST_BYTES);
    let Some(bytes) = tcp.get(start..start + want) else { return 0 };
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h.max(2)
}

/// What a point's reading found besides its sightings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PointRead {
    /// First and last record of any kind (ARP, ICMP, TCP): when the capture was running.
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    pub tcp_packets: u64,
}

/// Sightings handed over at once from the reading thread.
pub const BATCH: usize = 4096;
/// Batches in flight per point: the reading thread runs at most this far ahead.
const IN_FLIGHT: usize = 4;

/// Reads the files of one point in order on a thread of its own, handing their sightings over
/// in batches: the receiver gets `Ok(batch)`s, then one `Err` if a file cannot be opened,
/// and the join handle returns what was read. The thread stops when the receiver hangs up.
pub fn spawn_reader(paths: Vec<String>) -> (mpsc::Receiver<Result<Vec<Sighting>, ReadError>>, std::thread::JoinHandle<PointRead>) {
    let (tx, rx) = mpsc::sync_channel(IN_FLIGHT);
    let handle = std::thread::spawn(move || {
        let mut read = PointRead::default();
        for (file, path) in paths.iter().enumerate() {
            let mut reader = match CaptureReader::open(path) {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return read;
                }
            };
            let mut batch = Vec::with_capacity(BATCH);
            let mut hung_up = false;
            reader.for_each_packet(|packet| {
                if hung_up {
                    return;
                }
                if let Ok(segment) = decode::decode(packet.linktype, packet.data) {
                    let digest = payload_digest(packet.linktype, packet.data, segment.payload_len);
                    batch.push(Sighting::of(&segment, digest, FrameRef { file: file as u32, frame: packet.frame }, packet.time_ns));
                    read.tcp_packets += 1;
                    if batch.len() >= BATCH {
                        hung_up = tx.send(Ok(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)))).is_err();
                    }
                }
            });
            if let Some(t) = reader.info.first_time_ns {
                read.first_ns = Some(read.first_ns.map_or(t, |f| f.min(t)));
            }
            if let Some(t) = reader.info.last_time_ns {
                read.last_ns = Some(read.last_ns.map_or(t, |l| l.max(t)));
            }
            if hung_up || (!batch.is_empty() && tx.send(Ok(batch)).is_err()) {
                return read;
            }
        }
        read
    });
    (rx, handle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(40 + payload.len() as u16).to_be_bytes());
        ip[9] = 6;
        f.extend_from_slice(&ip);
        let mut tcp = vec![0u8; 20];
        tcp[12] = 5 << 4;
        f.extend_from_slice(&tcp);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn test_digest_tells_payloads_of_one_length_apart() {
        let a = payload_digest(link::LINKTYPE_ETHERNET, &frame(b"GET /a HTTP/1.1\r\n"), 17);
        let b = payload_digest(link::LINKTYPE_ETHERNET, &frame(b"GET /b HTTP/1.1\r\n"), 17);
        assert_ne!(a, b);
        assert!(a > 1 && b > 1);
    }

    #[test]
    fn test_digest_unknown_when_the_snaplen_cut_the_payload() {
        let f = frame(b"GET /a HTTP/1.1\r\n");
        assert_eq!(payload_digest(link::LINKTYPE_ETHERNET, &f[..f.len() - 10], 17), 0);
        assert!(digests_agree(0, 12345));
        assert!(!digests_agree(7, 12345));
    }
}
