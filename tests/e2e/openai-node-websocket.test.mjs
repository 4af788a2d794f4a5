// The official Node `openai` client's Realtime WebSocket (OpenAIRealtimeWS, `openai/realtime/ws`, on the
// `ws` package) against voice-edge, changing nothing but the client's baseURL. The client builds the URL
// from baseURL and always uses wss:, so the server runs in LAN mode (`--lan`: the API over HTTPS with a
// self-signed certificate, which the client trusts through the `ws` option `ca`) and with
// `--require-keys` and a server key (`--api-key`), which the client sends as `Authorization: Bearer`.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/openai-node-websocket.test.mjs
//
// Prints the spoken turn's latency: the last 20 ms chunk of speech sent → the first
// response.output_audio.delta (fixtures/speech.wav ends with about a second of its own silence).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { REPO_ROOT, SPEECH_WAV, freeTcpPort, serverDiagnostics, startServer } from './harness.mjs';
import { sleep } from './realtime-util.mjs';

const SERVER_KEY = 'sk-voice-edge-e2e-websocket';
const FILE_TIMEOUT_MS = 90_000;
const BYTES_PER_20MS = 960; // 24 kHz PCM16 mono
const TRAILING_SILENCE_MS = 1000; // fixtures/speech.wav's own silence after the speech

/** fixtures/speech.wav (48 kHz PCM16 mono) as 24 kHz PCM16 little-endian bytes. */
function speech24k() {
  const wav = fs.readFileSync(SPEECH_WAV);
  assert.equal(wav.toString('ascii', 0, 4), 'RIFF');
  let off = 12;
  let fmt = null;
  while (off + 8 <= wav.length) {
    const id = wav.toString('ascii', off, off + 4);
    const size = wav.readUInt32LE(off + 4);
    const body = off + 8;
    if (id === 'fmt ') {
      fmt = { format: wav.readUInt16LE(body), channels: wav.readUInt16LE(body + 2), rate: wav.readUInt32LE(body + 4), bits: wav.readUInt16LE(body + 14) };
    } else if (id === 'data') {
      assert.deepEqual(fmt, { format: 1, channels: 1, rate: 48_000, bits: 16 }, 'fixtures/speech.wav is 48 kHz PCM16 mono');
      const n = Math.floor(Math.min(size, wav.length - body) / 2);
      const src = new Int16Array(n);
      for (let i = 0; i < n; i++) src[i] = wav.readInt16LE(body + 2 * i);
      // 48 kHz → 24 kHz: a short symmetric low-pass ([1 2 1]/4 around each even sample), then every other one.
      const out = Buffer.alloc(Math.floor(n / 2) * 2);
      for (let j = 0; j < out.length / 2; j++) {
        const i = 2 * j;
        const v = (src[Math.max(i - 1, 0)] + 2 * src[i] + src[Math.min(i + 1, n - 1)]) / 4;
        out.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round(v))), 2 * j);
      }
      return out;
    }
    off = body + size + (size & 1);
  }
  throw new Error(`${SPEECH_WAV}: no data chunk`);
}

/** Index of the last 20 ms chunk of `pcm` (24 kHz PCM16) whose RMS is above `threshold`. */
function lastSpeechChunk(pcm, threshold = 500) {
  let last = -1;
  for (let c = 0; c * BYTES_PER_20MS < pcm.length; c++) {
    const end = Math.min((c + 1) * BYTES_PER_20MS, pcm.length);
    let sum = 0;
    let k = 0;
    for (let o = c * BYTES_PER_20MS; o + 1 < end; o += 2, k++) sum += pcm.readInt16LE(o) ** 2;
    if (k && Math.sqrt(sum / k) > threshold) last = c;
  }
  return last;
}

/**
 * One OpenAIRealtimeWS connection with everything it reports recorded: server events (with arrival time),
 * SDK errors, whether and how the socket opened or closed.
 */
/** A Realtime WebSocket: `target` is a model name, or `{ callID }` for a sideband on that call. */
async function connect(baseURL, apiKey, ca, target = 'echo') {
  const client = new OpenAI({ apiKey, baseURL, maxRetries: 0, timeout: 10_000 });
  const which = typeof target === 'string' ? { model: target } : target;
  const rt = await OpenAIRealtimeWS.create(client, { ...which, options: { ca, handshakeTimeout: 5_000 } });
  const conn = { rt, client, events: [], errors: [], opened: false, closed: null };
  rt.on('event', (e) => conn.events.push({ t: performance.now(), e }));
  rt.on('error', (err) => conn.errors.push(err));
  rt.socket.on('open', () => (conn.opened = true));
  rt.socket.on('close', (code, reason) => (conn.closed = { code, reason: reason.toString() }));
  return conn;
}

/** Wait (bounded) until `conn` has a server event of `type` (and `pred`) at index >= `from`. */
async function waitFor(conn, type, { from = 0, timeoutMs = 10_000, pred = () => true } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const i = conn.events.findIndex((x, k) => k >= from && x.e.type === type && pred(x.e));
    if (i >= 0) return { index: i, ...conn.events[i] };
    if (conn.closed || Date.now() >= deadline) {
      throw new Error(
        `no ${type} within ${timeoutMs} ms (from event #${from}); socket ${conn.closed ? `closed ${JSON.stringify(conn.closed)}` : 'open'}; ` +
          `errors: ${JSON.stringify(conn.errors.map((e) => e.message))}; events: ${JSON.stringify(conn.events.slice(from).map((x) => x.e.type))}`,
      );
    }
    await sleep(10);
  }
}

/** Wait (bounded) for `cond()`; throws `what` on timeout. */
async function until(cond, what, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

const audioBytes = (conn, from = 0) =>
  conn.events
    .slice(from)
    .filter((x) => x.e.type === 'response.output_audio.delta')
    .reduce((n, x) => n + Buffer.from(x.e.delta, 'base64').length, 0);

/**
 * Append `pcm` in real-time 20 ms chunks (input_audio_buffer.append, base64), paced against the clock.
 * Returns the send time of every chunk.
 */
async function streamAudio(conn, pcm) {
  const sentAt = [];
  const t0 = performance.now();
  for (let c = 0; c * BYTES_PER_20MS < pcm.length; c++) {
    const wait = t0 + c * 20 - performance.now();
    if (wait > 0) await sleep(wait);
    assert.equal(conn.closed, null, `socket closed while streaming audio: ${JSON.stringify(conn.closed)}`);
    const chunk = pcm.subarray(c * BYTES_PER_20MS, (c + 1) * BYTES_PER_20MS);
    conn.rt.send({ type: 'input_audio_buffer.append', audio: chunk.toString('base64') });
    sentAt.push(performance.now());
  }
  return sentAt;
}

describe('official openai Node client (OpenAIRealtimeWS) over wss:// against voice-edge --lan --require-keys', { timeout: FILE_TIMEOUT_MS }, () => {
  let server = null;
  let cacheDir = null;
  let baseURL = null;
  let ca = null;
  const conns = [];

  before(async () => {
    cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'voice-edge-wss-'));
    const httpsPort = await freeTcpPort();
    server = await startServer({
      extraArgs: ['--lan', '--https', `127.0.0.1:${httpsPort}`, '--cache-dir', cacheDir, '--require-keys', '--api-key', SERVER_KEY],
    });
    // The self-signed certificate names 127.0.0.1 (and localhost, ::1, the LAN addresses): trusting it as a CA
    // is all the client needs.
    ca = fs.readFileSync(path.join(cacheDir, 'lan-cert.pem'));
    baseURL = `https://127.0.0.1:${httpsPort}/v1`;
    console.log(`openai-node websocket: openai@${JSON.parse(fs.readFileSync(new URL('./node_modules/openai/package.json', import.meta.url))).version}, baseURL ${baseURL}`);
  });

  after(async () => {
    for (const c of conns) {
      try {
        c.rt.close();
      } catch {
        /* already closed */
      }
    }
    if (server) await server.stop().catch(() => {});
    if (cacheDir) fs.rmSync(cacheDir, { recursive: true, force: true });
  });

  async function dump(conn, err) {
    const lines = [`failure: ${err.stack || err}`];
    if (conn) {
      lines.push(`url ${conn.rt.url}; opened ${conn.opened}; closed ${JSON.stringify(conn.closed)}`);
      lines.push(`errors: ${conn.errors.map((e) => `${e.message} (${e.cause?.message ?? ''})`).join('; ')}`);
      lines.push(
        `events (${conn.events.length}):\n` +
          conn.events
            .map((x) => {
              const { delta, ...rest } = x.e;
              let s = JSON.stringify(delta === undefined ? rest : { ...rest, delta: `<${delta.length} chars>` });
              if (s.length > 300) s = s.slice(0, 300) + '…';
              return `  ${x.t.toFixed(0)} ${s}`;
            })
            .join('\n'),
      );
    }
    if (server) lines.push(await serverDiagnostics(server, { adminPaths: ['/admin/stats'], logLines: 80 }));
    console.error(lines.join('\n'));
  }

  test('session.created, a text turn and a spoken turn come back as audio', { timeout: 40_000 }, async () => {
    let conn = null;
    try {
      conn = await connect(baseURL, SERVER_KEY, ca);
      conns.push(conn);
      assert.equal(conn.rt.url.protocol, 'wss:');
      assert.equal(conn.rt.url.searchParams.get('model'), 'echo');
      const created = await waitFor(conn, 'session.created', { timeoutMs: 5_000 });
      assert.equal(conn.events[0].e.type, 'session.created', 'session.created is the first event');
      assert.equal(created.e.session.type, 'realtime');
      assert.equal(conn.rt.socket.protocol, '', 'no sub-protocol asked, none chosen');
      assert.equal(conn.errors.length, 0, `errors: ${conn.errors.map((e) => e.message)}`);

      // A text turn: the echo model speaks the text.
      const textFrom = conn.events.length;
      conn.rt.send({
        type: 'conversation.item.create',
        item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello there from the node client' }] },
      });
      conn.rt.send({ type: 'response.create' });
      const textDone = await waitFor(conn, 'response.done', { from: textFrom, timeoutMs: 15_000 });
      assert.equal(textDone.e.response.status, 'completed', `text turn: ${JSON.stringify(textDone.e.response.status_details)}`);
      const textBytes = audioBytes(conn, textFrom);
      const textDeltas = conn.events.slice(textFrom).filter((x) => x.e.type === 'response.output_audio.delta').length;
      assert.ok(textBytes > 48 * 300, `the text was spoken: ${textBytes} bytes of audio in ${textDeltas} deltas`);
      console.log(`openai-node websocket: text turn → ${textDeltas} audio deltas, ${(textBytes / 48).toFixed(0)} ms of audio, response.done completed`);

      // A spoken turn: fixtures/speech.wav at 24 kHz in real-time 20 ms chunks, then 1.5 s of silence.
      const pcm = speech24k();
      const lastSpeech = lastSpeechChunk(pcm);
      assert.ok(lastSpeech > 0, 'speech found in fixtures/speech.wav');
      const spokenFrom = conn.events.length;
      const sentAt = await streamAudio(conn, pcm);
      const sentAll = sentAt[sentAt.length - 1];
      await streamAudio(conn, Buffer.alloc(48 * 1500));
      const spokenDone = await waitFor(conn, 'response.done', { from: spokenFrom, timeoutMs: 10_000 });
      assert.equal(spokenDone.e.response.status, 'completed', `spoken turn: ${JSON.stringify(spokenDone.e.response.status_details)}`);
      const types = conn.events.slice(spokenFrom).map((x) => x.e.type);
      for (const want of ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'response.created', 'response.output_audio.done']) {
        assert.ok(types.includes(want), `spoken turn: no ${want}: ${JSON.stringify(types)}`);
      }
      assert.deepEqual(conn.events.filter((x) => x.e.type.startsWith('output_audio_buffer.')).map((x) => x.e.type), [], 'WebRTC-only events on a WebSocket');
      const echoedMs = audioBytes(conn, spokenFrom) / 48;
      const spokenMs = pcm.length / 48 - TRAILING_SILENCE_MS;
      assert.ok(echoedMs > spokenMs * 0.6 && echoedMs < spokenMs + 2000, `echo of ${echoedMs.toFixed(0)} ms for about ${spokenMs.toFixed(0)} ms of speech`);
      const firstDelta = conn.events.find((x, k) => k >= spokenFrom && x.e.type === 'response.output_audio.delta');
      const vad = created.e.session.audio?.input?.turn_detection;
      const latencyMs = firstDelta.t - sentAt[lastSpeech];
      const latencyFixedMs = firstDelta.t - (sentAll - TRAILING_SILENCE_MS);
      assert.ok(latencyMs > 0, `first audio delta ${latencyMs.toFixed(0)} ms after the last speech chunk`);
      assert.equal(conn.errors.length, 0, `errors: ${conn.errors.map((e) => e.message)}`);
      console.log(
        `openai-node websocket: spoken turn ${spokenMs.toFixed(0)} ms of speech → ${echoedMs.toFixed(0)} ms echoed; ` +
          `turn latency (last speech chunk sent → first response.output_audio.delta) ${latencyMs.toFixed(0)} ms ` +
          `(speech end taken as 1 s before the last fixture chunk: ${latencyFixedMs.toFixed(0)} ms); ` +
          `server VAD ${vad?.type} silence_duration_ms ${vad?.silence_duration_ms}`,
      );
      conn.rt.close();
      await until(() => conn.closed, 'the socket to close', 5_000);
      assert.equal(conn.closed.code, 1000);
    } catch (err) {
      await dump(conn, err);
      throw err;
    }
  });

  test('an ephemeral ek_ key minted with the server key opens a session too', { timeout: 15_000 }, async () => {
    let conn = null;
    try {
      const res = await fetch(new URL('/v1/realtime/client_secrets', server.baseUrl), {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${SERVER_KEY}` },
        body: JSON.stringify({ session: { type: 'realtime', model: 'echo' } }),
        signal: AbortSignal.timeout(5_000),
      });
      const body = await res.json();
      assert.equal(res.status, 200, `POST /v1/realtime/client_secrets: ${JSON.stringify(body)}`);
      assert.match(body.value, /^ek_/);
      conn = await connect(baseURL, body.value, ca);
      conns.push(conn);
      const created = await waitFor(conn, 'session.created', { timeoutMs: 5_000 });
      assert.equal(created.e.session.type, 'realtime');
      conn.rt.close();
      await until(() => conn.closed, 'the socket to close', 5_000);
    } catch (err) {
      await dump(conn, err);
      throw err;
    }
  });

  test('connect-time session: an ek_ key\'s session and calls.create\'s session part are in force from session.created; a bad one is a 400', { timeout: 30_000 }, async () => {
    let conn = null;
    const GET_WEATHER = {
      type: 'function',
      name: 'get_weather',
      description: 'Get the current weather for a city.',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    };
    // The app's backend, over plain HTTP with the server key, as OpenAI's guides have it.
    const backend = new OpenAI({ apiKey: SERVER_KEY, baseURL: new URL('/v1', server.baseUrl).href, maxRetries: 0, timeout: 10_000 });
    try {
      const secret = await backend.realtime.clientSecrets.create({
        session: { type: 'realtime', instructions: 'Answer like a weather bot.', tools: [GET_WEATHER], tool_choice: 'required', audio: { input: { turn_detection: null } } },
      });
      assert.match(secret.value, /^ek_/);
      assert.equal(secret.session.instructions, 'Answer like a weather bot.', 'the mint answers with the effective session');
      assert.equal(secret.session.audio.output.voice, 'alloy', 'defaults filled in');

      // The browser's side: only the key, never a session.update.
      conn = await connect(baseURL, secret.value, ca);
      conns.push(conn);
      const created = await waitFor(conn, 'session.created', { timeoutMs: 5_000 });
      assert.equal(created.e.session.instructions, 'Answer like a weather bot.');
      assert.deepEqual(created.e.session.tools.map((t) => t.name), ['get_weather']);
      assert.equal(created.e.session.tool_choice, 'required');
      assert.equal(created.e.session.audio.input.turn_detection, null);
      conn.rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Weather in Paris?' }] } });
      conn.rt.send({ type: 'response.create' });
      const args = await waitFor(conn, 'response.function_call_arguments.done', { timeoutMs: 5_000 });
      assert.equal(args.e.name, 'get_weather', 'the key\'s tool fires from the first turn');
      assert.equal(typeof JSON.parse(args.e.arguments).city, 'string', `arguments ${args.e.arguments}`);
      assert.ok(!conn.events.some((x) => x.e.type === 'session.updated'), 'no session.update was needed');

      // A typo is refused when the key is minted, naming the field, as OpenAI does.
      await assert.rejects(
        backend.realtime.clientSecrets.create({ session: { type: 'realtime', instructons: 'typo' } }),
        (e) => e.status === 400 && e.code === 'unknown_parameter' && e.param === 'session.instructons',
      );

      // A transcription key starts a transcription session over the WebSocket too.
      const tkey = await backend.realtime.clientSecrets.create({
        session: { type: 'transcription', audio: { input: { transcription: { model: 'gpt-4o-transcribe', language: 'fr' } } } },
      });
      assert.equal(tkey.session.type, 'transcription');
      const tconn = await connect(baseURL, tkey.value, ca);
      conns.push(tconn);
      const tcreated = await waitFor(tconn, 'session.created', { timeoutMs: 5_000 });
      assert.equal(tcreated.e.session.type, 'transcription');
      assert.equal(tcreated.e.session.audio.input.transcription.language, 'fr');
      tconn.rt.close();

      // The unified interface: calls.create with a session part (multipart), read back on a sideband.
      const sdp = fs.readFileSync(path.join(REPO_ROOT, 'fixtures', 'sdp', 'chromium-offer.sdp'), 'utf8');
      const answer = await backend.realtime.calls.create({ sdp, session: { type: 'realtime', instructions: 'From the call.', tools: [GET_WEATHER] } });
      assert.equal(answer.status, 201);
      const callID = answer.headers.get('location').split('/').pop();
      const sideband = await connect(baseURL, SERVER_KEY, ca, { callID });
      conns.push(sideband);
      const welcome = await waitFor(sideband, 'session.created', { timeoutMs: 5_000 });
      assert.equal(welcome.e.session.instructions, 'From the call.');
      assert.deepEqual(welcome.e.session.tools.map((t) => t.name), ['get_weather']);
      await assert.rejects(
        backend.realtime.calls.create({ sdp, session: { type: 'realtime', tools: [{ type: 'function' }] } }),
        (e) => e.status === 400 && typeof e.param === 'string' && e.param.startsWith('session.tools[0]'),
      );
      await backend.post(`/realtime/calls/${callID}/hangup`).catch(() => {});
    } catch (err) {
      await dump(conn, err);
      throw err;
    }
  });

  /** A tts session over the server key with turn detection off: only text turns make responses. */
  async function ttsWithoutTurns() {
    const conn = await connect(baseURL, SERVER_KEY, ca, 'tts');
    conns.push(conn);
    await waitFor(conn, 'session.created', { timeoutMs: 5_000 });
    conn.rt.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: null } } } });
    await waitFor(conn, 'session.updated', { timeoutMs: 5_000 });
    return conn;
  }

  test('max_output_tokens cuts a spoken reply: the transcript stops, the audio with it, response.done incomplete', { timeout: 20_000 }, async () => {
    let conn = null;
    try {
      conn = await ttsWithoutTurns();
      const text = 'one two three four five six seven eight nine ten eleven twelve';
      conn.rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
      const from = conn.events.length;
      conn.rt.send({ type: 'response.create', response: { max_output_tokens: 20 } });
      const done = await waitFor(conn, 'response.done', { from, timeoutMs: 10_000 });
      const r = done.e.response;
      assert.equal(r.status, 'incomplete', JSON.stringify(r.status_details));
      assert.deepEqual(r.status_details, { type: 'incomplete', reason: 'max_output_tokens' });
      assert.equal(r.max_output_tokens, 20);
      const transcript = r.output[0].content[0].transcript;
      assert.ok(transcript.length > 0 && text.startsWith(transcript) && transcript.length < text.length, `transcript ${JSON.stringify(transcript)}`);
      assert.ok(audioBytes(conn, from) > 0, 'the words that fit are spoken');
      console.log(`max_output_tokens 20: "${transcript}" of "${text}", ${audioBytes(conn, from)} audio bytes, usage ${JSON.stringify(r.usage.output_token_details)}`);
    } catch (err) {
      await dump(conn, err);
      throw err;
    }
  });

  test('an out-of-band text response runs beside a spoken one: tagged by metadata, out of the conversation', { timeout: 20_000 }, async () => {
    let conn = null;
    try {
      conn = await ttsWithoutTurns();
      conn.rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'please tell me a rather long story about the sea and the wind' }] } });
      const from = conn.events.length;
      conn.rt.send({ type: 'response.create' });
      const spoken = await waitFor(conn, 'response.created', { from, timeoutMs: 5_000 });
      await waitFor(conn, 'response.output_audio.delta', { from, timeoutMs: 5_000 });
      conn.rt.send({
        type: 'response.create',
        response: {
          conversation: 'none',
          output_modalities: ['text'],
          metadata: { purpose: 'classify' },
          input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'is this a question' }] }],
        },
      });
      const oob = await waitFor(conn, 'response.done', { from, timeoutMs: 5_000, pred: (e) => e.response.metadata?.purpose === 'classify' });
      assert.equal(oob.e.response.status, 'completed');
      assert.equal(oob.e.response.conversation_id, null, 'out of the conversation');
      assert.notEqual(oob.e.response.id, spoken.e.response.id);
      const spokenDone = await waitFor(conn, 'response.done', { from, timeoutMs: 10_000, pred: (e) => e.response.id === spoken.e.response.id });
      assert.equal(spokenDone.e.response.status, 'completed', 'the spoken reply played on to its end');
      assert.ok(oob.index < spokenDone.index, 'the out-of-band answer arrived while the spoken one was still playing');
      assert.ok(!conn.events.some((x) => x.e.type === 'error'), `no error: ${JSON.stringify(conn.events.filter((x) => x.e.type === 'error').map((x) => x.e))}`);
    } catch (err) {
      await dump(conn, err);
      throw err;
    }
  });

  for (const [label, key] of [
    ['a wrong server key', 'sk-not-the-server-key'],
    ['a bogus ephemeral key', 'ek_00000000000000000000000000000000'],
  ]) {
    test(`${label} is refused: the client reports an error and the socket never opens`, { timeout: 15_000 }, async () => {
      let conn = null;
      try {
        conn = await connect(baseURL, key, ca);
        conns.push(conn);
        await until(() => conn.closed && conn.errors.length > 0, 'an error and the socket closing', 8_000);
        assert.equal(conn.opened, false, 'the socket never opened');
        assert.deepEqual(conn.events, [], 'no server events');
        const msg = conn.errors[0].message;
        assert.match(msg, /Unexpected server response: 401/, `client error: ${msg}`);
        console.log(`openai-node websocket: ${label} → client error "${msg}", socket closed ${conn.closed.code}`);
      } catch (err) {
        await dump(conn, err);
        throw err;
      }
    });
  }
});
