// The Live WebSocket transport with the official Node client: `LiveWS` from the `openai` package
// (resources/live/ws) against voice-edge over ws://. The first message is session.start; the caller's
// audio goes up as session.input_audio.append (24 kHz PCM16 from fixtures/speech.wav, in real-time 20 ms
// chunks), and the model's turn comes back as session.output_audio.delta with transcript deltas, unasked.
// Then session.close: session.closed and the socket closes. Every server event is checked against the
// ServerEvent union of the package's live.d.ts. Prints the turn latency (last speech chunk sent → first
// output audio delta).
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/live-websocket.test.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { LiveWS } from 'openai/resources/live/ws';
import { SPEECH_WAV, serverDiagnostics, startServer } from './harness.mjs';
import { LIVE_DTS, assertServerEventShapes } from './openai-types.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** fixtures/speech.wav (48 kHz mono PCM16) as 24 kHz PCM16 bytes, without its trailing second of silence. */
function speech24k() {
  const wav = fs.readFileSync(SPEECH_WAV);
  let off = 12;
  while (wav.toString('ascii', off, off + 4) !== 'data') off += 8 + wav.readUInt32LE(off + 4);
  const len = wav.readUInt32LE(off + 4);
  const pcm = new Int16Array(wav.buffer.slice(wav.byteOffset + off + 8, wav.byteOffset + off + 8 + len));
  const n = Math.floor((pcm.length - 48_000) / 2);
  const out = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) out.writeInt16LE(Math.round((pcm[2 * i] + pcm[2 * i + 1]) / 2), 2 * i);
  return out;
}

async function until(what, fn, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

describe('Live WebSocket with the openai package (LiveWS)', { timeout: 90_000 }, () => {
  let server = null;

  before(async () => {
    server = await startServer({ readyMs: 30_000 });
  });

  after(async () => {
    if (server) await server.stop().catch(() => {});
  });

  test('session.start, a spoken turn answered as audio deltas, session.close', { timeout: 60_000 }, async () => {
    const client = new OpenAI({ apiKey: 'sk-local', baseURL: `${server.baseUrl.replace(/\/$/, '')}/v1` });
    const ws = new LiveWS(client);
    const events = [];
    const errors = [];
    let closed = null;
    ws.on('event', (ev) => events.push({ t: performance.now(), ev }));
    ws.on('error', (e) => errors.push(e.error ?? e.message));
    ws.on('close', (code, reason) => (closed = { code, reason }));
    const seen = (type) => events.find((e) => e.ev.type === type);
    try {
      assert.match(ws.url.toString(), /^ws:\/\/.*\/v1\/live\/sessions$/);
      // Anything before session.start is refused without closing the socket.
      ws.send({ type: 'session.input_audio.mute', event_id: 'early' });
      await until('the refusal', () => errors.length, 5_000);
      ws.send({ type: 'session.start', event_id: 'start', session: { model: 'echo', instructions: 'Echo.', store: true } });
      const started = (await until('session.started', () => seen('session.started'), 10_000)).ev;
      assert.equal(started.client_event_id, 'start');
      assert.match(started.session.id, /^live_/);
      assert.deepEqual(started.session.audio.format, { type: 'audio/pcm', rate: 24000 });

      const speech = speech24k();
      const chunk = 960; // 20 ms of 24 kHz PCM16
      const silence = Buffer.alloc(chunk * 60);
      let speechEnd = 0;
      const t0 = performance.now();
      const all = Buffer.concat([speech, silence]);
      for (let i = 0, n = 0; i < all.length; i += chunk, n++) {
        ws.send({ type: 'session.input_audio.append', audio: all.subarray(i, i + chunk).toString('base64') });
        if (i + chunk >= speech.length && !speechEnd) speechEnd = performance.now();
        const due = t0 + (n + 1) * 20;
        await sleep(Math.max(0, due - performance.now()));
      }
      const first = await until('output audio', () => seen('session.output_audio.delta'), 10_000);
      await until('the end of the turn', () => seen('session.usage.updated'), 20_000);
      const audioBytes = events
        .filter((e) => e.ev.type === 'session.output_audio.delta')
        .reduce((n, e) => n + Buffer.from(e.ev.delta, 'base64').length, 0);
      const text = (type) => events.filter((e) => e.ev.type === type).map((e) => e.ev.delta).join('');
      console.log(
        `LiveWS: turn latency (last speech chunk sent → first audio delta) ${(first.t - speechEnd).toFixed(0)} ms; ` +
          `${(audioBytes / 48).toFixed(0)} ms of audio back; input "${text('session.input_transcript.delta')}", output "${text('session.output_transcript.delta')}"`,
      );
      assert.ok(audioBytes / 48 > 3000, `the echo is the turn (${audioBytes} bytes)`);
      assert.match(text('session.input_transcript.delta'), /^\[speech, 3\.\d s\]/);
      assert.match(text('session.output_transcript.delta'), /^Echoing your 3\.\d second turn\.$/);

      ws.send({ type: 'session.close', event_id: 'bye' });
      const done = (await until('session.closed', () => seen('session.closed'), 5_000)).ev;
      assert.equal(done.reason, 'close_requested');
      assert.equal(done.client_event_id, 'bye');
      await until('the socket to close', () => closed, 5_000);
      assert.equal(closed.code, 1000);
      assert.equal(errors.length, 1, `only the early event was refused: ${JSON.stringify(errors)}`);
      assert.equal(errors[0]?.error?.code, 'session_not_started');

      // store: true: the session's recording, by its id, once it has ended: both sides heard.
      const res = await until(
        'the recording',
        async () => {
          const r = await fetch(`${server.baseUrl.replace(/\/$/, '')}/v1/live/sessions/${started.session.id}/content`);
          return r.status === 200 ? r : null;
        },
        5_000,
      );
      assert.equal(res.headers.get('content-type'), 'audio/wav');
      const wav = Buffer.from(await res.arrayBuffer());
      assert.equal(wav.readUInt16LE(22), 2, 'stereo');
      assert.equal(wav.readUInt32LE(24), 24000);
      const energy = [0, 0];
      const frames = (wav.length - 44) / 4;
      for (let i = 0; i < frames; i++) for (const ch of [0, 1]) energy[ch] += Math.abs(wav.readInt16LE(44 + 4 * i + 2 * ch));
      assert.ok(energy[0] / frames > 100 && energy[1] / frames > 100, `caller and model both recorded: ${energy.map((e) => (e / frames).toFixed(0))}`);
      console.log(`LiveWS recording: ${(frames / 24000).toFixed(1)} s stereo, mean |sample| caller ${(energy[0] / frames).toFixed(0)}, model ${(energy[1] / frames).toFixed(0)}`);
      assertServerEventShapes(assert, events.map((e) => e.ev), 'LiveWS', LIVE_DTS);
    } catch (e) {
      console.log(await serverDiagnostics(server));
      console.log(events.map((e) => e.ev.type).join(' '));
      throw e;
    } finally {
      ws.close({ code: 1000, reason: 'test over' });
    }
  });
});
