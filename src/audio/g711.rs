//! ITU-T G.711 companding: μ-law (PCMU, RTP payload type 0) and A-law (PCMA, 8), one byte per
//! 8 kHz sample, stateless.
//!
//! Written here rather than taken from a crate: each law is a few lines of bit arithmetic
//! (the segment/mantissa layout of G.711 §2–3, as in the widely copied Sun `g711.c`), the crates
//! that carry it bring a codec framework or registry along, and at least one popular one shipped
//! a μ-law encoder that emitted non-standard codes for a share of inputs. The tests below pin
//! the known code points and the round trip of all 256 codes, which is what matters for interop.

/// μ-law's bias added before the segment search (G.711 works on 14-bit magnitudes; this is its
/// 16-bit form).
const ULAW_BIAS: i32 = 0x84;
/// Largest magnitude μ-law encodes without overflowing its top segment.
const ULAW_CLIP: i32 = 32635;

/// Encodes one linear 16-bit sample as μ-law.
pub fn linear_to_ulaw(sample: i16) -> u8 {
    let x = i32::from(sample);
    let (sign, magnitude) = if x < 0 { (0x80, -x) } else { (0x00, x) };
    let biased = magnitude.min(ULAW_CLIP) + ULAW_BIAS;
    // The segment is the position of the top bit above bit 7 (0..=7).
    let segment = (31 - biased.leading_zeros() as i32 - 7).clamp(0, 7);
    let mantissa = (biased >> (segment + 3)) & 0x0f;
    !(sign | (segment << 4) | mantissa) as u8
}

/// Decodes one μ-law byte to a linear 16-bit sample.
pub fn ulaw_to_linear(code: u8) -> i16 {
    let u = !code;
    let t = ((i32::from(u & 0x0f) << 3) + ULAW_BIAS) << ((u & 0x70) >> 4);
    (if u & 0x80 != 0 {
        ULAW_BIAS - t
    } else {
        t - ULAW_BIAS
    }) as i16
}

/// Upper bounds of A-law's eight segments, on the 13-bit magnitude.
const ALAW_SEGMENT_END: [i32; 8] = [0x1f, 0x3f, 0x7f, 0xff, 0x1ff, 0x3ff, 0x7ff, 0xfff];

/// Encodes one linear 16-bit sample as A-law (even bits inverted on the wire, as G.711 says).
pub fn linear_to_alaw(sample: i16) -> u8 {
    let x = i32::from(sample) >> 3;
    let (mask, magnitude) = if x >= 0 { (0xd5, x) } else { (0x55, -x - 1) };
    let Some(segment) = ALAW_SEGMENT_END.iter().position(|&end| magnitude <= end) else {
        return (0x7f ^ mask) as u8;
    };
    let shift = if segment < 2 { 1 } else { segment };
    let code = ((segment as i32) << 4) | ((magnitude >> shift) & 0x0f);
    (code ^ mask) as u8
}

/// Decodes one A-law byte to a linear 16-bit sample.
pub fn alaw_to_linear(code: u8) -> i16 {
    let a = code ^ 0x55;
    let mut t = i32::from(a & 0x0f) << 4;
    let segment = (a & 0x70) >> 4;
    match segment {
        0 => t += 8,
        1 => t += 0x108,
        _ => t = (t + 0x108) << (segment - 1),
    }
    (if a & 0x80 != 0 { t } else { -t }) as i16
}

/// Which G.711 law.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Law {
    /// μ-law, PCMU.
    Mu,
    /// A-law, PCMA.
    A,
}

impl Law {
    pub fn encode(self, sample: i16) -> u8 {
        match self {
            Law::Mu => linear_to_ulaw(sample),
            Law::A => linear_to_alaw(sample),
        }
    }

    pub fn decode(self, code: u8) -> i16 {
        match self {
            Law::Mu => ulaw_to_linear(code),
            Law::A => alaw_to_linear(code),
        }
    }

    /// The code for a zero sample: what a frame of silence is filled with.
    pub fn silence(self) -> u8 {
        self.encode(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulaw_known_values() {
        assert_eq!(linear_to_ulaw(0), 0xff);
        assert_eq!(ulaw_to_linear(0xff), 0);
        assert_eq!(ulaw_to_linear(0x7f), 0); // "negative zero"
        assert_eq!(ulaw_to_linear(0x80), 32124);
        assert_eq!(ulaw_to_linear(0x00), -32124);
        assert_eq!(linear_to_ulaw(i16::MAX), 0x80);
        assert_eq!(linear_to_ulaw(i16::MIN), 0x00);
        // The first step above zero: codes 0xfe / 0x7e are ±8.
        assert_eq!(ulaw_to_linear(0xfe), 8);
        assert_eq!(ulaw_to_linear(0x7e), -8);
        assert_eq!(linear_to_ulaw(1000), 0xce);
        assert_eq!(ulaw_to_linear(0xce), 988);
        assert_eq!(linear_to_ulaw(-1000), 0x4e);
    }

    #[test]
    fn alaw_known_values() {
        assert_eq!(linear_to_alaw(0), 0xd5);
        assert_eq!(alaw_to_linear(0xd5), 8);
        assert_eq!(alaw_to_linear(0x55), -8);
        assert_eq!(alaw_to_linear(0xaa), 32256);
        assert_eq!(alaw_to_linear(0x2a), -32256);
        assert_eq!(linear_to_alaw(i16::MAX), 0xaa);
        assert_eq!(linear_to_alaw(i16::MIN), 0x2a);
        assert_eq!(linear_to_alaw(1000), 0xfa);
        assert_eq!(alaw_to_linear(0xfa), 1008);
        assert_eq!(linear_to_alaw(-1000), 0x7a);
    }

    #[test]
    fn all_256_codes_round_trip() {
        for code in 0..=255u8 {
            assert_eq!(
                linear_to_alaw(alaw_to_linear(code)),
                code,
                "A-law {code:#04x}"
            );
            // μ-law's 0x7f is negative zero, which encodes back as (positive) zero.
            let want = if code == 0x7f { 0xff } else { code };
            assert_eq!(
                linear_to_ulaw(ulaw_to_linear(code)),
                want,
                "μ-law {code:#04x}"
            );
        }
    }

    #[test]
    fn quantization_error_stays_within_the_step() {
        // Every 16-bit value comes back within half a segment step (G.711's quantization),
        // and the sign and the ordering survive.
        for law in [Law::Mu, Law::A] {
            let mut prev = i16::MIN;
            for x in (i16::MIN..=i16::MAX).step_by(7) {
                let y = law.decode(law.encode(x));
                let err = (i32::from(x) - i32::from(y)).abs();
                let step = (i32::from(x).abs() / 16).max(16);
                assert!(err <= step, "{law:?}: {x} -> {y}");
                assert!(y >= prev, "{law:?}: not monotonic at {x}");
                prev = y;
            }
        }
        assert_eq!(Law::Mu.silence(), 0xff);
        assert_eq!(Law::A.silence(), 0xd5);
    }
}
