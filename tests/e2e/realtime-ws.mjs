// Helpers for the Realtime WebSocket tests (agents-websocket.test.mjs, sideband.test.mjs): a raw client on
// the `ws` package (Node 20 has no global WebSocket) that records every server event with its arrival time,
// the speech fixture as 24 kHz PCM16, and a sender that streams PCM16 as base64 `input_audio_buffer.append`
// in real-time-paced chunks, as a microphone would.
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';

export const now = () => performance.now();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** ws://HOST:PORT/v1/realtime?… for the server started by harness.mjs's startServer(). */
export function realtimeUrl(server, query) {
  return `ws://${server.httpAddr}/v1/realtime?${new URLSearchParams(query)}`;
}

// --- audio -------------------------------------------------------------------------------------------------

/** A PCM16 WAV file: {rate, channels, samples: Int16Array (interleaved)}. */
export function readWav(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('ascii', 0, 4) !== 'RIFF' || buf.toString('ascii', 8, 12) !== 'WAVE') throw new Error(`${file}: not a WAV file`);
  let fmt = null;
  for (let off = 12; off + 8 <= buf.length; ) {
    const id = buf.toString('ascii', off, off + 4);
    const size = buf.readUInt32LE(off + 4);
    const body = off + 8;
    if (id === 'fmt ') {
      fmt = { format: buf.readUInt16LE(body), channels: buf.readUInt16LE(body + 2), rate: buf.readUInt32LE(body + 4), bits: buf.readUInt16LE(body + 14) };
    } else if (id === 'data') {
      if (!fmt || fmt.format !== 1 || fmt.bits !== 16) throw new Error(`${file}: not PCM16 (${JSON.stringify(fmt)})`);
      const n = Math.floor(Math.min(size, buf.length - body) / 2);
      const samples = new Int16Array(n);
      for (let i = 0; i < n; i++) samples[i] = buf.readInt16LE(body + 2 * i);
      return { rate: fmt.rate, channels: fmt.channels, samples };
    }
    off = body + size + (size & 1);
  }
  throw new Error(`${file}: no data chunk`);
}

/** Halve the sample rate (48 kHz → 24 kHz): a [1 2 1]/4 low-pass, then every other sample. */
export function halveRate(samples) {
  const out = new Int16Array(Math.floor(samples.length / 2));
  for (let i = 0; i < out.length; i++) {
    const c = samples[2 * i];
    const l = samples[2 * i - 1] ?? c;
    const r = samples[2 * i + 1] ?? c;
    out[i] = Math.round((l + 2 * c + r) / 4);
  }
  return out;
}

/** The first and last sample louder than `threshold` (of 32767), as ms at `rate`. */
export function speechSpan(samples, rate, threshold = 800) {
  let first = -1;
  let last = -1;
  for (let i = 0; i < samples.length; i++) {
    if (Math.abs(samples[i]) > threshold) {
      if (first < 0) first = i;
      last = i;
    }
  }
  return { startMs: (first * 1000) / rate, endMs: ((last + 1) * 1000) / rate };
}

/** An Int16Array's bytes as an ArrayBuffer of its own (what sendAudio takes). */
export function pcmBytes(int16) {
  return int16.buffer.slice(int16.byteOffset, int16.byteOffset + int16.byteLength);
}

/** RMS of a PCM16 buffer (0..32767). */
export function rms(buf) {
  const n = Math.floor(buf.byteLength / 2);
  if (!n) return 0;
  const v = new DataView(buf.buffer ?? buf, buf.byteOffset ?? 0, n * 2);
  let s = 0;
  for (let i = 0; i < n; i++) {
    const x = v.getInt16(2 * i, true);
    s += x * x;
  }
  return Math.sqrt(s / n);
}

/**
 * Stream 24 kHz PCM16 `samples` through `send(ArrayBuffer)` in `chunkMs` chunks, chunk k sent at
 * t0 + k·chunkMs (drift-free pacing), then silence in the same rhythm until `until()` is true or
 * `maxSilenceMs` passed. Returns {t0, sentAt(ms of audio) → performance.now() time it was sent, chunks}.
 */
export async function streamRealtime(send, samples, { rate = 24000, chunkMs = 20, maxSilenceMs = 6000, until = () => false } = {}) {
  const per = Math.round((rate * chunkMs) / 1000);
  const silence = new Int16Array(per);
  const t0 = now();
  let k = 0;
  const total = Math.ceil(samples.length / per) + Math.ceil(maxSilenceMs / chunkMs);
  for (; k < total; k++) {
    const due = t0 + k * chunkMs;
    const wait = due - now();
    if (wait > 1) await sleep(wait);
    const start = k * per;
    if (start < samples.length) {
      const chunk = new Int16Array(per);
      chunk.set(samples.subarray(start, Math.min(start + per, samples.length)));
      send(pcmBytes(chunk));
    } else {
      if (until()) break;
      send(pcmBytes(silence));
    }
  }
  return { t0, chunks: k, chunkMs, sentAt: (ms) => t0 + Math.floor(ms / chunkMs) * chunkMs };
}

// --- a raw Realtime WebSocket client ------------------------------------------------------------------------

/**
 * Open a WebSocket to `url` (ws package). Resolves with an EventSocket once open; rejects with an error
 * carrying `.status` (the HTTP status) and `.body` when the server refuses the upgrade.
 */
export function openEventSocket(url, { protocols = [], headers = {}, timeoutMs = 5000 } = {}) {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const ws = new WebSocket(url, protocols, { headers, handshakeTimeout: timeoutMs });
    const es = new EventSocket(ws, t0);
    ws.once('open', () => {
      es.openMs = now() - t0;
      resolve(es);
    });
    ws.once('unexpected-response', (req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => {
        const err = new Error(`upgrade refused: HTTP ${res.statusCode}: ${body.slice(0, 300)}`);
        err.status = res.statusCode;
        err.body = body;
        err.headers = res.headers;
        reject(err);
        req.destroy();
      });
    });
    ws.once('error', (e) => reject(e));
  });
}

export class EventSocket {
  constructor(ws, t0 = now()) {
    this.ws = ws;
    this.t0 = t0;
    this.events = []; // server events, each {t, ...event, binaryFrame?}
    this.sent = []; // client events
    this.closed = null; // {t, code, reason}
    this.closedP = new Promise((resolve) => {
      ws.on('close', (code, reason) => {
        this.closed = { t: now(), code, reason: String(reason) };
        resolve(this.closed);
      });
    });
    ws.on('message', (data, isBinary) => {
      let ev;
      try {
        ev = JSON.parse(String(data));
      } catch {
        ev = { type: '(unparsable)', data: String(data).slice(0, 200) };
      }
      this.events.push({ t: now(), ...ev, ...(isBinary ? { binaryFrame: true } : {}) });
    });
    ws.on('error', (e) => (this.lastError = e));
  }

  get protocol() {
    return this.ws.protocol;
  }

  send(ev) {
    this.ws.send(JSON.stringify(ev));
    this.sent.push({ t: now(), ...ev });
  }

  /** Wait for a server event matching `match` (fields compared with ===, dotted paths allowed) at index >= from. */
  async waitFor(match, { from = 0, timeoutMs = 10_000, what } = {}) {
    const get = (o, p) => p.split('.').reduce((v, k) => (v == null ? v : v[k]), o);
    const deadline = now() + timeoutMs;
    for (;;) {
      for (let i = from; i < this.events.length; i++) {
        const e = this.events[i];
        if (Object.entries(match).every(([k, v]) => get(e, k) === v)) return { index: i, event: e };
      }
      if (now() >= deadline) break;
      if (this.closed) {
        throw new Error(`socket closed (${this.closed.code} ${this.closed.reason}) while waiting for ${what || JSON.stringify(match)}; events: ${JSON.stringify(this.events.slice(from).map((e) => e.type))}`);
      }
      await sleep(5);
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what || JSON.stringify(match)} (from #${from}); events: ${JSON.stringify(this.events.slice(from).map((e) => e.type))}`);
  }

  /** Resolves with {t, code, reason} once closed, or null after timeoutMs. */
  waitClosed(timeoutMs = 5000) {
    return Promise.race([this.closedP, sleep(timeoutMs).then(() => null)]);
  }

  close() {
    try {
      this.ws.close();
    } catch {
      /* already closed */
    }
  }
}

/** Total bytes of base64 `delta`s of response.output_audio.delta events for `responseId`. */
export function audioDeltaBytes(events, responseId) {
  return events
    .filter((e) => e.type === 'response.output_audio.delta' && (!responseId || e.response_id === responseId))
    .reduce((n, e) => n + Buffer.from(e.delta, 'base64').length, 0);
}

/** One line per event (audio deltas shortened), for failure dumps. */
export function wsEventDump(events, t0 = 0, { max = 300 } = {}) {
  return events
    .slice(-max)
    .map((e) => {
      const { t, type, ...rest } = e;
      if (typeof rest.delta === 'string' && rest.delta.length > 60) rest.delta = `<${rest.delta.length} base64 chars>`;
      if (typeof rest.audio === 'string' && rest.audio.length > 60) rest.audio = `<${rest.audio.length} base64 chars>`;
      let body = JSON.stringify(rest);
      if (body.length > 300) body = body.slice(0, 300) + '…';
      return `${typeof t === 'number' ? (t - t0).toFixed(0).padStart(6) : '     ?'} ms ${type} ${body}`;
    })
    .join('\n');
}
