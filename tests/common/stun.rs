//! Hand-built STUN, for tests that speak to a relay without a WebRTC stack.

/// A minimal STUN Binding request with just USERNAME: all a relay reads from a new source.
pub fn binding_request(username: &str) -> Vec<u8> {
    let mut attr = vec![0x00, 0x06];
    attr.extend_from_slice(&(username.len() as u16).to_be_bytes());
    attr.extend_from_slice(username.as_bytes());
    while attr.len() % 4 != 0 {
        attr.push(0);
    }
    let mut m = vec![0x00, 0x01];
    m.extend_from_slice(&(attr.len() as u16).to_be_bytes());
    m.extend_from_slice(&0x2112A442u32.to_be_bytes());
    m.extend_from_slice(&rand::random::<[u8; 12]>());
    m.extend_from_slice(&attr);
    m
}
