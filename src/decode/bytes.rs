//! Bounds-checked big-endian field access. Every decoder reads through these, so a short or
//! lying packet yields `None`, never a panic.

/// The first `N` bytes as a fixed-size header. After this one length check, reading a field
/// at a constant offset needs no check of its own (and cannot panic).
#[inline]
pub fn header<const N: usize>(data: &[u8]) -> Option<&[u8; N]> {
    data.get(..N)?.try_into().ok()
}

#[inline]
pub fn u8_at(data: &[u8], at: usize) -> Option<u8> {
    data.get(at).copied()
}

#[inline]
pub fn be16(data: &[u8], at: usize) -> Option<u16> {
    let bytes: [u8; 2] = data.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(u16::from_be_bytes(bytes))
}

#[inline]
pub fn be32(data: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(bytes))
}

#[inline]
pub fn le32(data: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

#[inline]
pub fn array<const N: usize>(data: &[u8], at: usize) -> Option<[u8; N]> {
    data.get(at..at.checked_add(N)?)?.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_header_needs_all_its_bytes() {
        assert_eq!(header::<2>(&[1, 2, 3]), Some(&[1, 2]));
        assert_eq!(header::<4>(&[1, 2, 3]), None);
    }

    #[test]
    fn test_fields_past_the_end_are_none() {
        let data = [1, 2, 3];
        assert_eq!(be16(&data, 1), Some(0x0203));
        assert_eq!(be16(&data, 2), None);
        assert_eq!(be32(&data, 0), None);
        assert_eq!(be32(&data, usize::MAX), None);
        assert_eq!(array::<2>(&data, usize::MAX - 1), None);
    }
}
