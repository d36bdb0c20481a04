//! Recording: the time series (flows, media flows and queues sampled at an interval) and the
//! packet taps (a per-packet trace and pcap captures of chosen links).

use super::fabric::Fabric;
use super::media_flows::MediaFlows;
use super::sched::{Event, Scheduler};
use super::tcp_flows::TcpFlows;
use crate::error::SimError;
use crate::net::LinkId;
use crate::packet::Packet;
use crate::pcap::PcapWriter;
use crate::stats::{
    DetectorSample, FlowSample, MediaSample, PacketEvent, PacketEventKind, QueueSample,
};
use crate::transport::coupled::CouplingGroups;
use coupling::{Duration, Instant};
use std::io::Write;

/// The shortest sampling interval (the time series of a run are for looking at).
pub const MIN_SAMPLE_INTERVAL: Duration = Duration::from_micros(1);
/// The most time-series rows a run keeps (flows, media and queues together: about 60 bytes each
/// here, and a few hundred as the Python lists `results()` returns); sampling stops there and
/// `Results::sampling_stopped_at_s` says when.
pub const MAX_SAMPLE_ROWS: usize = 2_000_000;

#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub interval: Option<Duration>,
    monitored_links: Vec<LinkId>,
    pub flow_samples: Vec<FlowSample>,
    pub queue_samples: Vec<QueueSample>,
    pub media_samples: Vec<MediaSample>,
    pub detector_samples: Vec<DetectorSample>,
    /// When the time series stopped at MAX_SAMPLE_ROWS rows, if they did.
    pub stopped_at: Option<Instant>,
}

impl Recorder {
    /// Samples every `interval` from now on (the first sample now), the flows and the queues of
    /// `links`. Returns whether sampling was off until now.
    pub fn sample_every(
        &mut self,
        interval: Duration,
        links: &[LinkId],
        fabric: &Fabric,
        sched: &mut Scheduler,
    ) -> Result<bool, SimError> {
        if interval < MIN_SAMPLE_INTERVAL {
            return Err(SimError::invalid(
                "sample_interval",
                format!("{} s", interval.as_secs_f64()),
                "an interval of at least 1 us (MIN_SAMPLE_INTERVAL)",
            ));
        }
        for (i, l) in links.iter().enumerate() {
            if l.0 as usize >= fabric.net.links.len() {
                return Err(SimError::invalid(
                    format!("monitored_links[{i}]"),
                    l.0,
                    "an existing link",
                ));
            }
        }
        let first = self.interval.is_none();
        if first {
            sched.schedule(sched.now(), Event::Sample);
        }
        self.interval = Some(interval);
        // Each link once: a link listed a thousand times was sampled a thousand times (issue 13).
        self.monitored_links = links.to_vec();
        self.monitored_links.sort_unstable();
        self.monitored_links.dedup();
        Ok(first)
    }

    pub fn sample(
        &mut self,
        sched: &mut Scheduler,
        tcp: &mut TcpFlows,
        media: &MediaFlows,
        fabric: &Fabric,
        coupling: &CouplingGroups,
        measured: &[usize],
    ) {
        let Some(interval) = self.interval else {
            return;
        };
        let rows = self.flow_samples.len()
            + self.media_samples.len()
            + self.queue_samples.len()
            + self.detector_samples.len();
        let t = sched.now();
        if rows >= MAX_SAMPLE_ROWS {
            // The time series stop here (results say when): many flows sampled every microsecond
            // filled memory within one chunk of events (issue 13). Counted, not silent; and the
            // flows the sampler held can be freed.
            self.stopped_at.get_or_insert(t);
            tcp.stop_sampling(fabric);
            return;
        }
        tcp.sample(t, interval, &mut self.flow_samples, fabric);
        media.sample(t, &mut self.media_samples);
        for &l in &self.monitored_links {
            let link = &fabric.net.links[l.0 as usize];
            self.queue_samples.push(QueueSample {
                t_ns: t.as_nanos(),
                link: l.0,
                pkts: link.queue_len_pkts() as u32,
                bytes: link.queue_len_bytes(),
            });
        }
        for &g in measured {
            if let Some(m) = coupling.measured(g) {
                m.sample(g as u32, t, &mut self.detector_samples);
            }
        }
        sched.schedule(t + interval, Event::Sample);
    }
}

/// Packets as the fabric moves them: the optional per-packet trace and pcap captures.
#[derive(Debug, Default)]
pub(crate) struct PacketTaps {
    pub trace: Option<Vec<PacketEvent>>,
    /// pcap captures of chosen links: packets as they start serialization on the link.
    captures: Vec<Capture>,
}

struct Capture {
    link: LinkId,
    writer: PcapWriter<Box<dyn Write + Send>>,
    /// The first write error; reported by `flush_captures`, so a full disk cannot change the run.
    error: Option<String>,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture")
            .field("link", &self.link)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl PacketTaps {
    /// Whether anything is recorded at transmission (the fabric skips the work otherwise).
    pub fn active(&self) -> bool {
        self.trace.is_some() || !self.captures.is_empty()
    }

    pub fn add_capture(&mut self, link: LinkId, writer: PcapWriter<Box<dyn Write + Send>>) {
        self.captures.push(Capture {
            link,
            writer,
            error: None,
        });
    }

    pub fn trace(&mut self, now: Instant, kind: PacketEventKind, link: u32, p: &Packet) {
        if let Some(t) = &mut self.trace {
            t.push(PacketEvent {
                t_ns: now.as_nanos(),
                kind,
                link,
                flow: p.flow,
                packet: p.kind,
                seq: p.seq,
                ack: p.ack,
                size_bytes: p.size_bytes,
            });
        }
    }

    /// A packet starts serialization on `link`.
    pub fn transmit(&mut self, now: Instant, link: u32, p: &Packet) {
        self.trace(now, PacketEventKind::Transmit, link, p);
        let t = now.as_nanos();
        for c in self
            .captures
            .iter_mut()
            .filter(|c| c.link.0 == link && c.error.is_none())
        {
            if let Err(e) = c.writer.write(t, p) {
                c.error = Some(e.to_string());
            }
        }
    }

    pub fn flush_captures(&mut self) -> Result<(), SimError> {
        for c in &mut self.captures {
            let name = format!("capture[link {}]", c.link.0);
            if let Some(e) = &c.error {
                return Err(SimError::invalid(name, e, "a writable file"));
            }
            c.writer
                .flush()
                .map_err(|e| SimError::invalid(name, e, "a writable file"))?;
        }
        Ok(())
    }
}
