// The memory one client can make a server hold, probed from outside: the two probes of issue 30
// that admission did not count. Each runs against a fresh server and reports its RSS before and
// after; run it on two binaries to compare (bench/probes/memory.sh does).
//
//   node bench/probes/memory.mjs --bin PATH [--sessions 40] [--seconds 300] [--floods 4] [--messages 64]
//
// - recordings: SESSIONS Live WebSocket sessions from one address, each `store: true`, each sent
//   SECONDS of 24 kHz audio as fast as the socket takes it (a recording is 96 KB/s of timeline);
//   counts the sessions started, refused, and told their recording stopped.
// - flood: FLOODS Realtime WebSocket sessions from one address, each sent MESSAGES appends of
//   15 MiB (the service's largest) without reading anything back.
// Every loop is bounded in count and time.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';

const require = createRequire(new URL('../../tests/e2e/package.json', import.meta.url));
const WebSocket = require('ws');

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const BIN = args.bin;
const SESSIONS = Number(args.sessions ?? 40);
const SECONDS = Number(args.seconds ?? 300);
const FLOODS = Number(args.floods ?? 4);
const MESSAGES = Number(args.messages ?? 64);
const LIMIT_MS = 120_000;
if (!BIN) throw new Error('--bin PATH');

function rssMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
}

async function startServer(port) {
  const child = spawn(BIN, ['--http', `127.0.0.1:${port}`, '--relay', '127.0.0.1:0'], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, RUST_LOG: 'warn' },
  });
  child.stderr.on('data', () => {});
  for (let i = 0; i < 300; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/health`);
      if (r.ok) return child;
    } catch {}
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error('server did not start');
}

function open(url) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['realtime'], { maxPayload: 64 << 20 });
    ws.events = [];
    ws.on('message', (m) => ws.events.push(JSON.parse(m.toString())));
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

const waitFor = async (ws, pred, ms) => {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    const e = ws.events.find(pred);
    if (e) return e;
    await sleep(20);
  }
  return null;
};

/// Resolves once the socket's send buffer is below `bytes` (or it closed).
async function drained(ws, bytes) {
  while (ws.readyState === WebSocket.OPEN && ws.bufferedAmount > bytes) await sleep(5);
}

async function recordings(port, pid) {
  const before = rssMb(pid);
  const deadline = Date.now() + LIMIT_MS;
  const tone = Buffer.alloc(1500);
  for (let i = 0; i < 750; i++) tone.writeInt16LE(Math.round(Math.sin(i * 0.05) * 6000), i * 2);
  const append = JSON.stringify({ type: 'session.input_audio.append', audio: tone.toString('base64') });
  const appends = Math.ceil((SECONDS * 48_000) / 1500);
  let started = 0, refused = 0, stopped = 0, failed = 0;
  const sockets = [];
  for (let s = 0; s < SESSIONS && Date.now() < deadline; s++) {
    let ws;
    try {
      ws = await open(`ws://127.0.0.1:${port}/v1/live/sessions`);
    } catch {
      failed++;
      continue;
    }
    sockets.push(ws);
    ws.send(JSON.stringify({ type: 'session.start', session: { model: 'echo', store: true } }));
    const first = await waitFor(ws, (e) => e.type === 'session.started' || e.type === 'error', 5000);
    if (first?.type !== 'session.started') {
      if (first?.error?.code === 'recording_budget_exceeded') refused++;
      else failed++;
      continue;
    }
    started++;
    ws.started = true;
    for (let i = 0; i < appends && Date.now() < deadline; i++) {
      ws.send(append);
      if (i % 64 === 63) await drained(ws, 1 << 20);
    }
    await drained(ws, 0);
  }
  await sleep(1500);
  stopped = sockets.filter(
    (ws) => ws.started && ws.events.some((e) => e.error?.code === 'recording_budget_exceeded'),
  ).length;
  const after = rssMb(pid);
  for (const ws of sockets) ws.terminate();
  return { before, after, started, refused, stopped, failed };
}

async function flood(port, pid) {
  const before = rssMb(pid);
  const deadline = Date.now() + LIMIT_MS;
  const audio = 'A'.repeat(15 * 1024 * 1024 - 64);
  const message = `{"type":"input_audio_buffer.append","audio":"${audio}"}`;
  const sockets = [];
  let peak = before;
  for (let s = 0; s < FLOODS; s++) {
    const ws = await open(`ws://127.0.0.1:${port}/v1/realtime?model=echo`);
    ws.pause(); // never read: the server's replies back up too
    sockets.push(ws);
  }
  let sent = 0;
  // Offer MESSAGES per socket, keeping at most 4 in each client buffer: what the server does
  // not read stays with the client, not in the server's memory.
  for (let i = 0; i < MESSAGES && Date.now() < deadline; i++) {
    for (const ws of sockets) {
      if (ws.readyState !== WebSocket.OPEN) continue;
      ws.send(message);
      sent++;
    }
    while (Date.now() < deadline && sockets.some((ws) => ws.readyState === WebSocket.OPEN && ws.bufferedAmount > 4 * message.length)) {
      peak = Math.max(peak, rssMb(pid));
      await sleep(50);
    }
    peak = Math.max(peak, rssMb(pid));
  }
  for (let i = 0; i < 20; i++) {
    peak = Math.max(peak, rssMb(pid));
    await sleep(100);
  }
  const offered = MESSAGES * FLOODS;
  const unsent = sockets.reduce((n, ws) => n + Math.floor(ws.bufferedAmount / message.length), 0);
  for (const ws of sockets) ws.terminate();
  await sleep(3000);
  const settled = rssMb(pid);
  return { before, peak, settled, offered, sent, unsent };
}

// A fresh server for each probe, so one's memory is not the other's baseline.
async function probe(run) {
  const port = 18000 + Math.floor(Math.random() * 2000);
  const server = await startServer(port);
  try {
    return await run(port, server.pid);
  } finally {
    server.kill('SIGKILL');
    await sleep(300);
  }
}
if (SESSIONS > 0) {
  const r = await probe(recordings);
  console.log(JSON.stringify({ probe: 'recordings', sessions: SESSIONS, seconds: SECONDS, ...r }));
}
if (FLOODS > 0) {
  const f = await probe(flood);
  console.log(JSON.stringify({ probe: 'flood', sockets: FLOODS, messages: MESSAGES, ...f }));
}
