//! The socket loop around one [`Endpoint`]: it owns the shared UDP socket, the clock and the command
//! queue, and decides nothing the endpoint could. Everything about calls lives in the endpoint.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use async_io::{Async, Timer};
use futures_lite::future;
use rtc::peer_connection::certificate::RTCCertificate;

use super::endpoint::{Endpoint, Synthesis, Transmit};
use super::{Command, TransceiverConfig};
use crate::routing::link::LINK_HEADER_LEN;

const MAX_DATAGRAM: usize = 2048;

/// What a worker is started with.
pub(super) struct WorkerParts {
    pub cfg: TransceiverConfig,
    pub index: u8,
    /// The candidate put in answers: the relay, or this worker's own socket.
    pub advertise: SocketAddr,
    pub certificate: RTCCertificate,
    pub live: Arc<AtomicUsize>,
    pub stop: Arc<AtomicBool>,
    /// This worker's own command queue, where TTS threads hand speech back.
    pub commands: async_channel::Sender<Command>,
}

pub(super) struct Worker {
    endpoint: Endpoint,
    id: u16,
    index: u8,
    live: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    commands: async_channel::Sender<Command>,
    send_buf: Vec<u8>,
}

/// What woke the loop.
enum Wake {
    Datagram(usize, SocketAddr),
    Command(Command),
    CommandsClosed,
    Timer,
}

impl Worker {
    pub(super) fn new(p: WorkerParts) -> Self {
        Worker {
            id: p.cfg.id,
            index: p.index,
            endpoint: Endpoint::new(Instant::now(), p.cfg, p.index, p.advertise, p.certificate),
            live: p.live,
            stop: p.stop,
            commands: p.commands,
            send_buf: Vec::with_capacity(MAX_DATAGRAM + LINK_HEADER_LEN),
        }
    }

    pub(super) fn run(mut self, socket: UdpSocket, commands: async_channel::Receiver<Command>) {
        let socket = match Async::new(socket) {
            Ok(s) => s,
            Err(e) => {
                log::error!(
                    "transceiver {}.{}: cannot register socket: {e}",
                    self.id,
                    self.index
                );
                return;
            }
        };
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut commands_open = true;
        smol::block_on(async {
            while !self.stop.load(Ordering::Relaxed) {
                self.endpoint.handle_timeout(Instant::now());
                self.output(socket.get_ref());
                let deadline = self.endpoint.poll_timeout();
                let recv = async {
                    match socket.recv_from(&mut buf).await {
                        Ok((n, from)) => Wake::Datagram(n, from),
                        Err(e) => {
                            log::debug!("recv: {e}");
                            Wake::Timer
                        }
                    }
                };
                let cmd = async {
                    if !commands_open {
                        return future::pending().await;
                    }
                    match commands.recv().await {
                        Ok(c) => Wake::Command(c),
                        Err(_) => Wake::CommandsClosed,
                    }
                };
                let timer = async {
                    Timer::at(deadline).await;
                    Wake::Timer
                };
                match future::or(recv, future::or(cmd, timer)).await {
                    Wake::Datagram(n, from) => {
                        self.endpoint
                            .handle_datagram(Instant::now(), from, &buf[..n])
                    }
                    Wake::Command(c) => self.on_command(c),
                    Wake::CommandsClosed => commands_open = false,
                    Wake::Timer => {}
                }
                self.output(socket.get_ref());
            }
            // Tell every client we are going, so they need not wait for consent to expire.
            self.endpoint.close_all(Instant::now());
            self.output(socket.get_ref());
        });
    }

    fn on_command(&mut self, cmd: Command) {
        let now = Instant::now();
        match cmd {
            Command::Create {
                offer_sdp,
                model,
                reply,
            } => {
                let r = self.endpoint.create_call(now, offer_sdp, model);
                // Counted before the reply: placement reads the count as soon as it has the
                // answer, and a call it cannot see yet would draw the next one here too.
                self.live.store(self.endpoint.len(), Ordering::Relaxed);
                let _ = reply.send(r);
            }
            Command::Hangup { call_id, reply } => {
                let r = self.endpoint.hangup(now, &call_id);
                self.live.store(self.endpoint.len(), Ordering::Relaxed);
                let _ = reply.send(r);
            }
            Command::Renegotiate {
                call_id,
                offer_sdp,
                reply,
            } => {
                let _ = reply.send(self.endpoint.renegotiate(now, &call_id, offer_sdp));
            }
            Command::TtsReady {
                call_id,
                response_id,
                speech,
            } => self.endpoint.tts_ready(now, &call_id, &response_id, speech),
            Command::Stats { reply } => {
                let _ = reply.send(self.endpoint.stats());
            }
            Command::List { reply } => {
                let _ = reply.send(self.endpoint.list(now));
            }
        }
    }

    /// Sends what the endpoint queued, starts what it wants synthesized, publishes the call count.
    fn output(&mut self, socket: &UdpSocket) {
        while let Some(t) = self.endpoint.poll_transmit() {
            send(socket, &t, &mut self.send_buf);
        }
        while let Some(s) = self.endpoint.poll_synthesis() {
            spawn_tts(s, self.commands.clone());
        }
        self.live.store(self.endpoint.len(), Ordering::Relaxed);
    }
}

/// Send errors are dropped like any UDP loss.
fn send(socket: &UdpSocket, t: &Transmit, buf: &mut Vec<u8>) {
    let r = match &t.link {
        Some(h) => {
            buf.clear();
            buf.resize(LINK_HEADER_LEN, 0);
            h.write(&mut buf[..LINK_HEADER_LEN]);
            buf.extend_from_slice(&t.payload);
            socket.send_to(buf, t.to)
        }
        None => socket.send_to(&t.payload, t.to),
    };
    if let Err(e) = r {
        log::debug!("send to {}: {e}", t.to);
    }
}

/// Runs the synthesizer (espeak-ng is a subprocess) on its own short-lived thread so the socket
/// loop never waits for it; the speech comes back as a command.
fn spawn_tts(s: Synthesis, commands: async_channel::Sender<Command>) {
    let Synthesis { call_id, request } = s;
    let spawned = std::thread::Builder::new()
        .name("tts".into())
        .spawn(move || {
            let speech = crate::audio::tts::synthesize(&request.text, &request.voice);
            let _ = commands.send_blocking(Command::TtsReady {
                call_id,
                response_id: request.response_id,
                speech,
            });
        });
    if let Err(e) = spawned {
        log::warn!("could not start a TTS thread: {e}");
    }
}
