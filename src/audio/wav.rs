//! 16-bit PCM WAV reading: espeak-ng's output, and the fixtures the audio tests play.

/// Reads a 16-bit PCM WAV (any channel count, mixed down to mono). espeak-ng writing to a pipe
/// cannot seek back to fill in sizes, so a data chunk longer than the file means "to the end".
pub fn parse_wav(b: &[u8]) -> Result<(u32, Vec<i16>), &'static str> {
    if b.len() < 12 || &b[0..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return Err("not a RIFF/WAVE file");
    }
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let mut fmt: Option<(u16, u16, u32, u16)> = None;
    let mut i = 12;
    while i + 8 <= b.len() {
        let id = &b[i..i + 4];
        let size = u32_at(i + 4) as usize;
        let body = i + 8;
        if id == b"fmt " {
            if size < 16 || body + 16 > b.len() {
                return Err("short fmt chunk");
            }
            fmt = Some((
                u16_at(body),
                u16_at(body + 2),
                u32_at(body + 4),
                u16_at(body + 14),
            ));
        } else if id == b"data" {
            let (format, channels, rate, bits) = fmt.ok_or("data before fmt")?;
            // 1 = PCM; 0xFFFE = WAVE_FORMAT_EXTENSIBLE (assumed PCM at 16 bits).
            if !(format == 1 || format == 0xfffe) || bits != 16 || channels == 0 || rate == 0 {
                return Err("not 16-bit PCM");
            }
            let end = body.saturating_add(size).min(b.len());
            let ch = usize::from(channels);
            let pcm = b[body..end]
                .chunks_exact(2 * ch)
                .map(|frame| {
                    let sum: i32 = frame
                        .chunks_exact(2)
                        .map(|s| i32::from(i16::from_le_bytes([s[0], s[1]])))
                        .sum();
                    (sum / ch as i32) as i16
                })
                .collect();
            return Ok((rate, pcm));
        }
        i = body.saturating_add(size).saturating_add(size & 1);
    }
    Err("no data chunk")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_stereo_wav_is_mixed_down() {
        let mut wav = Vec::new();
        wav.extend_from_slice(b"RIFF\x24\xf0\xff\x7fWAVE");
        wav.extend_from_slice(b"fmt \x10\0\0\0");
        wav.extend_from_slice(&1u16.to_le_bytes());
        wav.extend_from_slice(&2u16.to_le_bytes());
        wav.extend_from_slice(&22_050u32.to_le_bytes());
        wav.extend_from_slice(&(22_050u32 * 4).to_le_bytes());
        wav.extend_from_slice(&4u16.to_le_bytes());
        wav.extend_from_slice(&16u16.to_le_bytes());
        // A streamed data chunk: the size field says "huge".
        wav.extend_from_slice(b"data\x00\xf0\xff\x7f");
        for i in 0..22_050i32 {
            let s = ((i % 50) * 400 - 10_000) as i16;
            wav.extend_from_slice(&s.to_le_bytes());
            wav.extend_from_slice(&(s / 2).to_le_bytes());
        }
        let (rate, pcm) = parse_wav(&wav).unwrap();
        assert_eq!((rate, pcm.len()), (22_050, 22_050));
        assert_eq!(pcm[1], ((-9600 + -4800) / 2) as i16);
        assert!(parse_wav(b"RIFF\0\0\0\0WAVE").is_err());
        assert!(parse_wav(b"not a wav").is_err());
    }
}
