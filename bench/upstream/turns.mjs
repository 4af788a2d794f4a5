#!/usr/bin/env node
// Turn latency and connect time through the upstream bridge, side by side in one run (interleaved
// round-robin, the order rotating every round). It never starts servers: bench/upstream/run.sh does.
//
//   node bench/upstream/turns.mjs --upstream http://127.0.0.1:P --key K \
//        --edge e20=http://127.0.0.1:Q --edge e40=… [--stub http://…] [--rounds 8]
//
// Per round:
// - direct: a Node WebSocket client on the upstream's own door (?model=echo) streams fixtures/turn.wav
//   (16 → 24 kHz) in real time, 20 ms appends. Turn = first response.output_audio.delta received − the send
//   time of the append holding the speech's end (the upstream's speech_stopped audio_end_ms less its VAD's
//   silence_duration_ms, which audio_end_ms includes).
// - each edge: headless Chromium's plain WebRTC flow with the same file as its microphone, ?model=gpt-realtime
//   (bridged to the upstream's echo). Turn = the edge's own turn_ms (/admin/calls): arrival of the frame
//   holding the speech's end → the reply's first RTP frame out. Both measure from speech end entering the
//   system to the reply's first audio leaving it toward the caller, on loopback; the difference is what the
//   bridge adds (decode, resample, appends, the second WebSocket hop, encode, pacing).
// - stub: the same Chromium flow against the edge's own echo stub (no upstream), for reference.
// Connect (per edge call): answer received → session.created on the data channel, bridged vs stub.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = path.dirname(fileURLToPath(import.meta.url));
const E2E = path.resolve(here, '..', '..', 'tests', 'e2e');
const ROOT = path.resolve(here, '..', '..');
const { launchBrowser, openPage } = await import(path.join(E2E, 'harness.mjs'));
const { startStaticServer, sleep } = await import(path.join(E2E, 'realtime-util.mjs'));
const { PLAIN_PAGE_HTML } = await import(path.join(E2E, 'plain-page.mjs'));
const { default: WebSocket } = await import(path.join(E2E, 'node_modules', 'ws', 'index.js'));

const { values } = parseArgs({
  options: {
    upstream: { type: 'string' },
    key: { type: 'string', default: '' },
    edge: { type: 'string', multiple: true, default: [] },
    stub: { type: 'string' },
    rounds: { type: 'string', default: '8' },
  },
});
const ROUNDS = Number(values.rounds);
const TURN_WAV = path.join(ROOT, 'fixtures', 'turn.wav');
const targets = values.edge.map((e) => {
  const [name, url] = e.split('=');
  return { name, url, kind: 'edge' };
});
if (values.stub) targets.push({ name: 'edge stub (echo)', url: values.stub, kind: 'stub' });
targets.push({ name: 'direct (upstream WebSocket)', url: values.upstream, kind: 'direct' });

/** fixtures/turn.wav as 24 kHz PCM16 (16 kHz mono, linear interpolation). */
function turnPcm24() {
  const buf = fs.readFileSync(TURN_WAV);
  const data = buf.indexOf('data');
  const pcm16 = new Int16Array(buf.buffer.slice(buf.byteOffset + data + 8, buf.byteOffset + data + 8 + buf.readUInt32LE(data + 4)));
  const out = new Int16Array(Math.floor((pcm16.length * 3) / 2));
  for (let j = 0; j < out.length; j++) {
    const pos = (j * 2) / 3;
    const i = Math.floor(pos);
    const f = pos - i;
    out[j] = Math.round(pcm16[i] * (1 - f) + (pcm16[Math.min(i + 1, pcm16.length - 1)] ?? 0) * f);
  }
  return out;
}
const PCM = turnPcm24();

async function directTurn(base) {
  const url = new URL('/v1/realtime?model=echo', base).href.replace(/^http/, 'ws');
  const ws = new WebSocket(url, ['realtime'], { headers: values.key ? { Authorization: `Bearer ${values.key}` } : {} });
  await new Promise((r, j) => (ws.on('open', r), ws.on('error', j)));
  const sentAt = []; // [ms of input at the chunk's start, performance.now()]
  let endMs = null;
  let firstDelta = null;
  let silenceMs = 0;
  ws.on('message', (m) => {
    const e = JSON.parse(String(m));
    // The VAD's audio_end_ms includes its silence_duration_ms; the speech ended that much before.
    if (e.type === 'session.updated') silenceMs = e.session.audio?.input?.turn_detection?.silence_duration_ms ?? 0;
    if (e.type === 'input_audio_buffer.speech_stopped') endMs = e.audio_end_ms - silenceMs;
    if (e.type === 'response.output_audio.delta' && firstDelta == null) firstDelta = performance.now();
  });
  ws.send(JSON.stringify({ type: 'session.update', session: { type: 'realtime', audio: { input: { format: { type: 'audio/pcm', rate: 24000 }, turn_detection: { type: 'server_vad' } } } } }));
  const t0 = performance.now();
  for (let i = 0, n = 0; i < PCM.length && firstDelta == null; i += 480, n++) {
    const due = t0 + n * 20;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    sentAt.push([n * 20, performance.now()]);
    const chunk = Buffer.from(PCM.buffer, PCM.byteOffset + i * 2, Math.min(480, PCM.length - i) * 2);
    ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: chunk.toString('base64') }));
  }
  const deadline = performance.now() + 5000;
  while (firstDelta == null && performance.now() < deadline) await sleep(5);
  ws.close();
  if (firstDelta == null || endMs == null) return { failed: 'no reply' };
  const holding = sentAt.filter(([ms]) => ms <= endMs).pop();
  return { turnMs: firstDelta - holding[1] };
}

async function edgeTurn(page, base, model) {
  await page.reload();
  const started = await page.evaluate((o) => window.startPlain(o), { baseUrl: base.replace(/\/$/, ''), key: 'unused', query: `?model=${model}` });
  if (started.calls.status !== 201) return { failed: `HTTP ${started.calls.status}` };
  const callId = started.calls.location.split('/').pop();
  const deadline = Date.now() + 15_000;
  let connectMs = null;
  while (Date.now() < deadline) {
    const r = await page.evaluate(() => {
      const created = window.rt.events.find((e) => e.type === 'session.created');
      const playing = window.rt.events.some((e) => e.type === 'output_audio_buffer.started');
      return { created: created ? created.t - window.rt.answerAt : null, playing, error: window.rt.events.find((e) => e.type === 'error') };
    });
    connectMs ??= r.created;
    if (r.error) return { failed: JSON.stringify(r.error.error) };
    if (r.playing) break;
    await sleep(50);
  }
  await sleep(200);
  const calls = await (await fetch(new URL('/admin/calls', base))).json();
  const call = calls.calls.find((c) => c.call_id === callId);
  await fetch(new URL(`${started.calls.location}/hangup`, base), { method: 'POST' }).catch(() => {});
  await page.evaluate(() => window.rt.pc.close());
  const turnMs = call?.voice?.turn_ms;
  return turnMs == null ? { failed: 'no turn_ms', connectMs } : { turnMs, connectMs };
}

const pct = (v, p) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] : NaN;
};
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : '–');

const pages = await startStaticServer({ '/': { type: 'text/html; charset=utf-8', body: PLAIN_PAGE_HTML } });
const browser = await launchBrowser({ audioFile: TURN_WAV });
const ctx = await openPage(browser, `${pages.origin}/`);
const results = Object.fromEntries(targets.map((t) => [t.name, { turns: [], connects: [], offered: 0, failed: [] }]));
try {
  for (let r = 0; r < ROUNDS; r++) {
    const order = targets.map((_, i) => targets[(i + r) % targets.length]);
    for (const t of order) {
      const res = results[t.name];
      res.offered++;
      const out = t.kind === 'direct' ? await directTurn(t.url) : await edgeTurn(ctx.page, t.url, t.kind === 'stub' ? 'echo' : 'gpt-realtime');
      if (out.connectMs != null) res.connects.push(out.connectMs);
      if (out.failed) res.failed.push(out.failed);
      else res.turns.push(out.turnMs);
      process.stderr.write(`round ${r + 1}/${ROUNDS} ${t.name}: ${out.failed ?? `${f1(out.turnMs)} ms`}\n`);
    }
  }
} finally {
  await browser.close().catch(() => {});
  await pages.close().catch(() => {});
}

const direct = pct(results['direct (upstream WebSocket)'].turns, 50);
console.log(`\n### Turn latency: speech end → first reply audio out (${ROUNDS} rounds, interleaved)\n`);
console.log('| path | offered | served | failed | p50 ms | p90 ms | max ms | p50 − direct |');
console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
for (const t of targets) {
  const r = results[t.name];
  const p50 = pct(r.turns, 50);
  console.log(`| ${t.name} | ${r.offered} | ${r.turns.length} | ${r.failed.length} | ${f1(p50)} | ${f1(pct(r.turns, 90))} | ${f1(Math.max(...r.turns))} | ${t.kind === 'direct' ? '' : f1(p50 - direct)} |`);
}
console.log('\n### Connect: answer → session.created on the data channel\n');
console.log('| path | calls | p50 ms | p90 ms | max ms |');
console.log('|---|---:|---:|---:|---:|');
for (const t of targets.filter((t) => t.kind !== 'direct')) {
  const c = results[t.name].connects;
  console.log(`| ${t.name} | ${c.length} | ${f1(pct(c, 50))} | ${f1(pct(c, 90))} | ${f1(Math.max(...c))} |`);
}
const failures = Object.entries(results).flatMap(([n, r]) => r.failed.map((f) => `${n}: ${f}`));
if (failures.length) console.log(`\nfailures:\n${failures.join('\n')}`);
