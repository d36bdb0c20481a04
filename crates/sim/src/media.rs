//! Media sources for rate-controlled flows (issue 4): what the application has to send.
//!
//! - [`MediaSource::Greedy`]: always has data.
//! - [`MediaSource::AppLimited`]: produces data at a fixed rate (a codec that cannot follow the
//!   transport, seed 003 sec. 5.4).
//! - [`MediaSource::Video`]: frames of given sizes at a frame rate, from a trace (a file of frame
//!   sizes, one per line) or from [`synthetic_video`] (mean rate and GOP structure).
//!
//! Pauses (media pause and resume, draft-ietf-rmcat-eval-test) are a list of intervals without
//! data. A source is asked, at `now`, how many bytes are ready; the engine drains them at the
//! controller's rate.

use crate::error::SimError;
use crate::rng::SimRng;
use coupling::{Duration, Instant};
use rand_distr::{Distribution, LogNormal};

#[derive(Clone, Debug, PartialEq)]
pub enum MediaSource {
    Greedy,
    AppLimited { rate_bps: f64 },
    Video(VideoTrace),
}

/// Frames at `fps`, sizes in bytes, repeated when the trace ends.
#[derive(Clone, Debug, PartialEq)]
pub struct VideoTrace {
    pub fps: f64,
    pub frame_bytes: Vec<u32>,
}

impl VideoTrace {
    /// Reads a trace file: one frame size in bytes per line (blank lines and `#` comments
    /// ignored).
    pub fn parse(text: &str, fps: f64, name: &str) -> Result<VideoTrace, SimError> {
        let mut frames = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let n: u32 = line.parse().map_err(|_| {
                SimError::invalid(
                    format!("{name} line {}", i + 1),
                    line,
                    "a frame size in bytes",
                )
            })?;
            frames.push(n);
        }
        let t = VideoTrace {
            fps,
            frame_bytes: frames,
        };
        t.check(name)?;
        Ok(t)
    }

    pub fn check(&self, name: &str) -> Result<(), SimError> {
        check_fps(&format!("{name}.fps"), self.fps)?;
        if self.frame_bytes.is_empty() {
            return Err(SimError::invalid(
                format!("{name}.frame_bytes"),
                "no frames",
                "at least one frame",
            ));
        }
        Ok(())
    }

    pub fn mean_rate_bps(&self) -> f64 {
        self.frame_bytes.iter().map(|&b| b as f64).sum::<f64>() * 8.0 * self.fps
            / self.frame_bytes.len() as f64
    }
}

/// The highest frame rate a video source may have: far above any real one, low enough that a
/// minute of frames (what a synthetic trace holds) is a small allocation (issue 13: `fps=1e9`
/// asked for 240 GB, `fps=inf` panicked).
pub const MAX_FPS: f64 = 1000.0;
/// The most frames a synthetic trace may hold (a minute at [`MAX_FPS`]).
pub const MAX_TRACE_FRAMES: usize = 60_000;

/// `fps` is a frame rate in (0, [`MAX_FPS`]]; `field` names it in the error.
pub fn check_fps(field: &str, fps: f64) -> Result<(), SimError> {
    if fps.is_finite() && fps > 0.0 && fps <= MAX_FPS {
        Ok(())
    } else {
        Err(SimError::invalid(
            field,
            fps,
            "a frame rate in (0, 1000] per second",
        ))
    }
}

/// A synthetic trace: `frames` frames at `fps` with mean rate `mean_rate_bps`, a GOP of `gop`
/// frames starting with an I-frame `i_to_p` times the size of a P-frame, and log-normal noise of
/// standard deviation `sigma` (of the log) on every frame.
pub fn synthetic_video(
    mean_rate_bps: f64,
    fps: f64,
    gop: usize,
    i_to_p: f64,
    sigma: f64,
    frames: usize,
    rng: &mut SimRng,
) -> Result<VideoTrace, SimError> {
    let name = "synthetic_video";
    check_fps(&format!("{name}.fps"), fps)?;
    if frames > MAX_TRACE_FRAMES {
        return Err(SimError::invalid(
            format!("{name}.frames"),
            frames,
            "at most 60000 frames (MAX_TRACE_FRAMES)",
        ));
    }
    if !(mean_rate_bps.is_finite() && mean_rate_bps > 0.0) {
        return Err(SimError::invalid(
            format!("{name}.mean_rate_bps"),
            mean_rate_bps,
            "a rate > 0",
        ));
    }
    if gop == 0 {
        return Err(SimError::invalid(
            format!("{name}.gop"),
            0,
            "a GOP of at least one frame",
        ));
    }
    if !(i_to_p.is_finite() && i_to_p >= 1.0) {
        return Err(SimError::invalid(
            format!("{name}.i_to_p"),
            i_to_p,
            "an I/P size ratio >= 1",
        ));
    }
    if !(sigma.is_finite() && sigma >= 0.0) {
        return Err(SimError::invalid(
            format!("{name}.sigma"),
            sigma,
            "a standard deviation >= 0",
        ));
    }
    if frames == 0 {
        return Err(SimError::invalid(
            format!("{name}.frames"),
            0,
            "at least one frame",
        ));
    }
    let mean_frame = mean_rate_bps / 8.0 / fps;
    // One I-frame of i_to_p units and (gop - 1) P-frames of one unit average mean_frame.
    let p_size = mean_frame * gop as f64 / (i_to_p + gop as f64 - 1.0);
    // E[lognormal(mu, sigma)] = exp(mu + sigma^2 / 2) = 1.
    let noise = LogNormal::new(-sigma * sigma / 2.0, sigma).expect("sigma checked");
    let frame_bytes = (0..frames)
        .map(|i| {
            let base = if i % gop == 0 {
                p_size * i_to_p
            } else {
                p_size
            };
            (base * noise.sample(rng)).round().max(1.0) as u32
        })
        .collect();
    let t = VideoTrace { fps, frame_bytes };
    t.check(name)?;
    Ok(t)
}

/// A source's state during a run.
#[derive(Clone, Debug)]
pub struct MediaState {
    source: MediaSource,
    pauses: Vec<(Instant, Instant)>,
    /// Bytes produced and not yet sent (ignored for a greedy source).
    backlog: f64,
    last: Instant,
    next_frame: usize,
    next_frame_at: Instant,
}

impl MediaState {
    pub fn new(
        source: MediaSource,
        start: Instant,
        pauses: Vec<(Instant, Instant)>,
        name: &str,
    ) -> Result<Self, SimError> {
        match &source {
            MediaSource::AppLimited { rate_bps } if !(rate_bps.is_finite() && *rate_bps > 0.0) => {
                return Err(SimError::invalid(
                    format!("{name}.rate_bps"),
                    rate_bps,
                    "a rate > 0",
                ))
            }
            MediaSource::Video(t) => t.check(name)?,
            _ => {}
        }
        for (i, (a, b)) in pauses.iter().enumerate() {
            if b <= a {
                return Err(SimError::invalid(
                    format!("{name}.pauses[{i}]"),
                    format!("{a}..{b}"),
                    "an interval that ends after it starts",
                ));
            }
        }
        Ok(MediaState {
            source,
            pauses,
            backlog: 0.0,
            last: start,
            next_frame: 0,
            next_frame_at: start,
        })
    }

    pub fn is_paused(&self, now: Instant) -> bool {
        self.pauses.iter().any(|&(a, b)| now >= a && now < b)
    }

    /// When the source next gains data while it has none (end of a pause, next frame).
    pub fn next_data_at(&self, now: Instant) -> Option<Instant> {
        if let Some(&(_, b)) = self.pauses.iter().find(|&&(a, b)| now >= a && now < b) {
            return Some(b);
        }
        match self.source {
            MediaSource::Greedy => None,
            MediaSource::AppLimited { .. } => Some(now + Duration::from_millis(1)),
            MediaSource::Video(_) => Some(self.next_frame_at.max(now)),
        }
    }

    /// Accrues data up to `now`; returns the bytes ready to send (`f64::INFINITY` when greedy).
    pub fn ready(&mut self, now: Instant) -> f64 {
        let paused = self.is_paused(now);
        match &self.source {
            MediaSource::Greedy => {
                if paused {
                    0.0
                } else {
                    f64::INFINITY
                }
            }
            MediaSource::AppLimited { rate_bps } => {
                if !paused {
                    self.backlog += rate_bps / 8.0 * now.saturating_since(self.last).as_secs_f64();
                }
                self.last = now;
                // A codec does not bank unbounded credit: at most 100 ms of data waits.
                self.backlog = self.backlog.min(rate_bps / 8.0 * 0.1);
                if paused {
                    0.0
                } else {
                    self.backlog
                }
            }
            MediaSource::Video(t) => {
                let gap = Duration::from_nanos((1e9 / t.fps) as u64);
                while self.next_frame_at <= now {
                    if !self.is_paused(self.next_frame_at) {
                        self.backlog += t.frame_bytes[self.next_frame % t.frame_bytes.len()] as f64;
                    }
                    self.next_frame += 1;
                    self.next_frame_at = self.next_frame_at + gap;
                }
                self.backlog
            }
        }
    }

    /// `bytes` were sent.
    pub fn consume(&mut self, bytes: f64) {
        if !matches!(self.source, MediaSource::Greedy) {
            self.backlog = (self.backlog - bytes).max(0.0);
        }
    }

    /// The rate the application wants (desired rate DR for the FSE); infinite when greedy.
    pub fn desired_rate_bps(&self) -> f64 {
        match &self.source {
            MediaSource::Greedy => f64::INFINITY,
            MediaSource::AppLimited { rate_bps } => *rate_bps,
            MediaSource::Video(t) => t.mean_rate_bps(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded;

    #[test]
    fn synthetic_video_has_the_mean_rate_and_gop() {
        let mut rng = seeded(3);
        let t = synthetic_video(1e6, 30.0, 30, 5.0, 0.2, 30 * 600, &mut rng).unwrap();
        let rate = t.mean_rate_bps();
        assert!((rate - 1e6).abs() < 2e4, "{rate}");
        let i_mean: f64 = t
            .frame_bytes
            .iter()
            .step_by(30)
            .map(|&b| b as f64)
            .sum::<f64>()
            / 600.0;
        let p_mean: f64 = t
            .frame_bytes
            .iter()
            .skip(1)
            .step_by(30)
            .map(|&b| b as f64)
            .sum::<f64>()
            / 600.0;
        assert!((i_mean / p_mean - 5.0).abs() < 0.5, "{}", i_mean / p_mean);
        assert!(synthetic_video(1e6, 30.0, 0, 5.0, 0.2, 10, &mut rng)
            .unwrap_err()
            .to_string()
            .contains("gop"));
    }

    #[test]
    fn trace_files_parse_and_errors_name_the_line() {
        let t = VideoTrace::parse("# frames\n1200\n\n800 # P\n", 25.0, "trace").unwrap();
        assert_eq!(t.frame_bytes, vec![1200, 800]);
        let e = VideoTrace::parse("100\nabc\n", 25.0, "trace").unwrap_err();
        assert!(e.to_string().contains("trace line 2"), "{e}");
    }

    #[test]
    fn sources_produce_data_and_pause() {
        let s = Instant::ZERO;
        let mut g = MediaState::new(
            MediaSource::Greedy,
            s,
            vec![(Instant::from_secs(1), Instant::from_secs(2))],
            "m",
        )
        .unwrap();
        assert!(g.ready(Instant::from_millis(500)).is_infinite());
        assert_eq!(g.ready(Instant::from_millis(1500)), 0.0);
        assert_eq!(
            g.next_data_at(Instant::from_millis(1500)),
            Some(Instant::from_secs(2))
        );
        let mut a =
            MediaState::new(MediaSource::AppLimited { rate_bps: 8e5 }, s, vec![], "m").unwrap();
        assert!((a.ready(Instant::from_millis(50)) - 5000.0).abs() < 1e-6);
        a.consume(5000.0);
        assert_eq!(a.ready(Instant::from_millis(50)), 0.0);
        let trace = VideoTrace {
            fps: 10.0,
            frame_bytes: vec![1000, 500],
        };
        let mut v = MediaState::new(MediaSource::Video(trace), s, vec![], "m").unwrap();
        assert_eq!(v.ready(Instant::ZERO), 1000.0);
        assert_eq!(v.ready(Instant::from_millis(150)), 1500.0);
        assert!(
            MediaState::new(MediaSource::AppLimited { rate_bps: -1.0 }, s, vec![], "m").is_err()
        );
    }
}
