//! Sample-rate conversion for synthesized speech (espeak-ng's 22.05 kHz to the 48 kHz everything
//! else runs at, and 16 kHz for the shipped pack): good enough for a test voice, no dependency.

/// Resamples mono PCM to 48 kHz; see [`resample`].
pub fn resample_to_48k(pcm: &[i16], rate: u32) -> Vec<i16> {
    resample(pcm, rate, 48_000)
}

/// Resamples mono PCM by linear interpolation, with a 63-tap windowed-sinc low-pass at 45 % of the
/// lower rate — after interpolating when upsampling (it removes the interpolation images, ≈ 70 dB
/// down), before when downsampling (against aliasing). Plenty for a test voice, and a few ms per
/// second of audio.
pub fn resample(pcm: &[i16], from: u32, to: u32) -> Vec<i16> {
    if from == to || pcm.is_empty() || from == 0 || to == 0 {
        return pcm.to_vec();
    }
    let x: Vec<f32> = pcm.iter().map(|&s| f32::from(s)).collect();
    let cutoff = 0.45 * from.min(to) as f32;
    let y = if to > from {
        fir(
            &interpolate(&x, from, to),
            &lowpass_taps(cutoff / to as f32),
        )
    } else {
        interpolate(&fir(&x, &lowpass_taps(cutoff / from as f32)), from, to)
    };
    y.iter()
        .map(|&v| v.round().clamp(-32768.0, 32767.0) as i16)
        .collect()
}

fn interpolate(x: &[f32], from: u32, to: u32) -> Vec<f32> {
    let out_len = (x.len() as u64 * u64::from(to) / u64::from(from)) as usize;
    let step = f64::from(from) / f64::from(to);
    (0..out_len)
        .map(|j| {
            let pos = j as f64 * step;
            let i = pos as usize;
            let f = (pos - i as f64) as f32;
            let a = x[i.min(x.len() - 1)];
            let b = x[(i + 1).min(x.len() - 1)];
            a + (b - a) * f
        })
        .collect()
}

/// Zero-phase FIR filtering (the taps are symmetric; the output is aligned with the input).
fn fir(x: &[f32], taps: &[f32]) -> Vec<f32> {
    let half = taps.len() / 2;
    (0..x.len())
        .map(|j| {
            taps.iter()
                .enumerate()
                .filter_map(|(k, &t)| {
                    (j + k)
                        .checked_sub(half)
                        .and_then(|i| x.get(i))
                        .map(|&v| t * v)
                })
                .sum()
        })
        .collect()
}

/// 63-tap Blackman-windowed sinc low-pass with cutoff `fc` (a fraction of the sample rate),
/// normalized to unity gain at DC.
pub(crate) fn lowpass_taps(fc: f32) -> Vec<f32> {
    const N: usize = 63;
    let mid = (N / 2) as f32;
    let mut taps: Vec<f32> = (0..N)
        .map(|n| {
            let x = n as f32 - mid;
            let sinc = if x == 0.0 {
                2.0 * fc
            } else {
                (2.0 * std::f32::consts::PI * fc * x).sin() / (std::f32::consts::PI * x)
            };
            let w = 2.0 * std::f32::consts::PI * n as f32 / (N - 1) as f32;
            sinc * (0.42 - 0.5 * w.cos() + 0.08 * (2.0 * w).cos())
        })
        .collect();
    let sum: f32 = taps.iter().sum();
    taps.iter_mut().for_each(|t| *t /= sum);
    taps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::test_signal::rms_dbfs;

    #[test]
    fn upsampling_keeps_length_and_level() {
        // espeak-ng's rate, one second of a sawtooth.
        let pcm: Vec<i16> = (0..22_050i32)
            .map(|i| ((i % 50) * 300 - 7_500) as i16)
            .collect();
        let up = resample_to_48k(&pcm, 22_050);
        assert_eq!(up.len(), 48_000);
        assert!((rms_dbfs(&up) - rms_dbfs(&pcm)).abs() < 1.5);
    }
}
