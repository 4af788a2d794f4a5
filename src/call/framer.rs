//! Cuts appended audio into 20 ms frames.
//!
//! A WebSocket client appends audio in chunks of any size (a 100 ms chunk, a whole file, an odd
//! number of bytes), but the listener and its input buffer work in packets of at most 120 ms,
//! like RTP's. Re-framing to 20 ms makes appended audio look to the media side exactly like a
//! telephony stream, so VAD, echo and barge-in need no second path.

use bytes::{Bytes, BytesMut};

use crate::audio::Codec;

#[derive(Debug)]
pub struct Framer {
    frame_bytes: usize,
    pending: BytesMut,
}

impl Framer {
    /// `codec` must be a sample codec (PCM16 or G.711), which WebSocket formats always are.
    pub fn new(codec: Codec) -> Framer {
        let frame_bytes = codec
            .frame_bytes()
            .expect("WebSocket audio formats are sample codecs");
        Framer {
            frame_bytes,
            pending: BytesMut::with_capacity(frame_bytes),
        }
    }

    /// Takes `audio` and returns every whole frame now complete; the rest waits for the next
    /// chunk.
    pub fn push(&mut self, audio: &[u8]) -> Vec<Bytes> {
        self.pending.extend_from_slice(audio);
        let whole = self.pending.len() / self.frame_bytes;
        (0..whole)
            .map(|_| self.pending.split_to(self.frame_bytes).freeze())
            .collect()
    }

    /// Drops a partial frame (the input buffer was cleared).
    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_chunking_gives_the_same_whole_frames() {
        let audio: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let mut one = Framer::new(Codec::Pcm24);
        let whole: Vec<Bytes> = one.push(&audio);
        assert_eq!(whole.len(), 5); // 960-byte frames; 200 bytes wait
        let mut odd = Framer::new(Codec::Pcm24);
        let mut pieces = Vec::new();
        for chunk in audio.chunks(333) {
            pieces.extend(odd.push(chunk));
        }
        assert_eq!(pieces, whole);
        let mut g711 = Framer::new(Codec::Pcmu);
        assert_eq!(g711.push(&[0xff; 170]).len(), 1);
        g711.clear();
        assert!(
            g711.push(&[0xff; 150]).is_empty(),
            "the partial frame was dropped"
        );
    }
}
