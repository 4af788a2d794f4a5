// Helpers shared by the Realtime client tests (realtime-sdk.test.mjs, plain-flow.test.mjs): a static page
// server on its own loopback origin, the esbuild bundle of a browser entry, ephemeral keys, /admin/calls,
// getStats of the page's RTCPeerConnection, and the event-cycle checks of docs/realtime-protocol.md §4.
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Bundle a browser entry (ESM) with esbuild, in memory. Returns the JS text. esbuild's platform binary
 * comes from its npm optional dependency (@esbuild/<platform>), installed by `npm ci` in tests/e2e.
 */
export async function bundleBrowserEntry(entry) {
  const esbuild = await import('esbuild');
  const res = await esbuild.build({
    entryPoints: [path.resolve(here, entry)],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'chrome110',
    write: false,
    logLevel: 'silent',
    legalComments: 'none',
  });
  return res.outputFiles[0].text;
}

/**
 * A tiny HTTP server on 127.0.0.1:<free port> serving fixed in-memory files: another origin than the
 * voice-edge server, so the page's requests to voice-edge are real cross-origin requests (CORS preflight).
 * `files` maps a path to {type, body}. Returns {origin, requests, close()}.
 */
export async function startStaticServer(files) {
  const requests = [];
  const srv = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    requests.push(`${req.method} ${url.pathname}`);
    const f = files[url.pathname];
    if (!f || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    res.writeHead(200, { 'content-type': f.type, 'cache-control': 'no-store' }).end(f.body);
  });
  await new Promise((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', resolve);
  });
  const { port } = srv.address();
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise((resolve) => {
        srv.closeAllConnections?.();
        srv.close(() => resolve());
      }),
  };
}

/**
 * Mint an ephemeral key the way an app backend would: POST /v1/realtime/client_secrets. If the server
 * has no such endpoint yet, fall back to 'ek_test' (calls accept any Bearer key by default) and say so.
 * Returns {key, minted, note}.
 */
export async function mintClientSecret(server, session = { type: 'realtime' }) {
  const url = new URL('/v1/realtime/client_secrets', server.baseUrl);
  let status = null;
  let text = '';
  try {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-test' },
      body: JSON.stringify({ expires_after: { anchor: 'created_at', seconds: 600 }, session }),
      signal: AbortSignal.timeout(5000),
    });
    status = res.status;
    text = await res.text();
    if (res.ok) {
      const body = JSON.parse(text);
      if (typeof body.value !== 'string' || !body.value.startsWith('ek_')) {
        throw new Error(`POST /v1/realtime/client_secrets → ${status} without an ek_ value: ${text}`);
      }
      if (typeof body.expires_at !== 'number') throw new Error(`client secret without numeric expires_at: ${text}`);
      return { key: body.value, minted: true, note: `minted ${body.value.slice(0, 10)}… (expires_at ${body.expires_at})` };
    }
  } catch (e) {
    if (status !== null && status >= 200 && status < 300) throw e;
    text = text || String(e);
  }
  return { key: 'ek_test', minted: false, note: `POST /v1/realtime/client_secrets → ${status}: ${text.slice(0, 200)}; using ek_test` };
}

/** GET /admin/calls → the parsed body (or {error}). */
export async function adminCalls(server) {
  try {
    const res = await fetch(new URL('/admin/calls', server.baseUrl), { signal: AbortSignal.timeout(2000) });
    const text = await res.text();
    if (!res.ok) return { error: `GET /admin/calls → ${res.status}: ${text}` };
    return JSON.parse(text);
  } catch (e) {
    return { error: `GET /admin/calls failed: ${e.message}` };
  }
}

/** Find this call's entry in /admin/calls (matched by call id, else the only call). */
export function findCall(calls, callId) {
  const list = (calls && calls.calls) || [];
  const hit = list.find((c) => callId && JSON.stringify(c).includes(callId));
  return hit || (list.length === 1 ? list[0] : null);
}

/**
 * Remote audio stats of the page's peer connection (`window.rt.pc`): the inbound-rtp audio entry
 * ({packetsReceived, totalAudioEnergy, …}) or null.
 */
export function inboundAudio(page) {
  return page.evaluate(async () => {
    const pc = window.rt && window.rt.pc;
    if (!pc) return null;
    const report = await pc.getStats();
    let out = null;
    report.forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'audio') {
        out = {
          packetsReceived: s.packetsReceived ?? 0,
          bytesReceived: s.bytesReceived ?? 0,
          totalAudioEnergy: s.totalAudioEnergy ?? 0,
          totalSamplesReceived: s.totalSamplesReceived ?? 0,
          audioLevel: s.audioLevel ?? 0,
        };
      }
    });
    return out;
  });
}

/**
 * Wait until the page has received a server event matching `match` ({type, ...fields compared with ===,
 * with dotted paths allowed, e.g. 'response.status'}) at index >= `from`. Returns {index, event}.
 * Polls with page.evaluate, which Playwright (chromium) and puppeteer (firefox) pages share; their
 * waitForFunction signatures differ.
 */
export async function waitForEvent(page, match, { from = 0, timeoutMs = 15_000, what } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await page.evaluate(
      ({ match, from }) => {
        const get = (o, p) => p.split('.').reduce((v, k) => (v == null ? v : v[k]), o);
        const evs = (window.rt && window.rt.events) || [];
        for (let i = from; i < evs.length; i++) {
          if (Object.entries(match).every(([k, v]) => get(evs[i], k) === v)) return { index: i, event: evs[i] };
        }
        return null;
      },
      { match, from },
    );
    if (found) return found;
    if (Date.now() >= deadline) break;
    await sleep(25);
  }
  const types = await page.evaluate(() => (window.rt?.events || []).map((e) => e.type)).catch(() => []);
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what || JSON.stringify(match)} (from event #${from}); ` +
      `events so far: ${JSON.stringify(types.slice(from))}`,
  );
}

/** The events the page has collected (server events in `events`, client events in `sent`). */
export function pageEvents(page) {
  return page.evaluate(() => ({ events: window.rt?.events || [], sent: window.rt?.sent || [] }));
}

// --- docs/realtime-protocol.md §4: one spoken turn, and a response ------------------------------------------

export const RESPONSE_CYCLE = [
  'response.created',
  'rate_limits.updated',
  'response.output_item.added',
  'conversation.item.added',
  'response.content_part.added',
  'output_audio_buffer.started',
  'response.output_audio_transcript.delta',
  'response.output_audio.done',
  'response.output_audio_transcript.done',
  'response.content_part.done',
  'response.output_item.done',
  'conversation.item.done',
  'response.done',
  'output_audio_buffer.stopped',
];

export const TURN_CYCLE = [
  'input_audio_buffer.speech_started',
  'input_audio_buffer.speech_stopped',
  'input_audio_buffer.committed',
  'conversation.item.added',
  'conversation.item.done',
  ...RESPONSE_CYCLE,
];

/**
 * The types of `events` restricted to those in `cycle`, consecutive transcript deltas collapsed to one,
 * from the first event of `cycle[0]` through the first `cycle[cycle.length-1]` after it.
 */
export function cycleTypes(events, cycle) {
  const set = new Set(cycle);
  const start = events.findIndex((e) => e.type === cycle[0]);
  if (start < 0) return [];
  const out = [];
  for (let i = start; i < events.length; i++) {
    const t = events[i].type;
    if (!set.has(t)) continue;
    if (t === 'response.output_audio_transcript.delta' && out[out.length - 1] === t) continue;
    out.push(t);
    if (t === cycle[cycle.length - 1]) break;
  }
  return out;
}

/**
 * Check the response `responseId` in `events`: the RESPONSE_CYCLE order, one response id throughout, one
 * assistant item, transcript deltas that add up to the final transcript, response.done `completed` with
 * that transcript in its output. Returns {transcript, itemId, events} (the events of this response).
 */
export function checkResponse(assert, events, responseId) {
  const mine = events.filter((e) => e.response?.id === responseId || e.response_id === responseId);
  const first = events.findIndex((e) => e.type === 'response.created' && e.response?.id === responseId);
  const last = events.findIndex((e, i) => i > first && e.type === 'output_audio_buffer.stopped' && e.response_id === responseId);
  assert.ok(first >= 0, `response.created for ${responseId} missing`);
  assert.ok(last > first, `output_audio_buffer.stopped for ${responseId} missing`);
  const span = events.slice(first, last + 1);
  const added = mine.find((e) => e.type === 'response.output_item.added');
  assert.ok(added, `response.output_item.added for ${responseId} missing`);
  const itemId = added.item.id;
  // Every event of the cycle inside the span belongs to this response / its item.
  const inCycle = span.filter((e) => RESPONSE_CYCLE.includes(e.type) && e.type !== 'rate_limits.updated');
  for (const e of inCycle) {
    const rid = e.response?.id ?? e.response_id;
    const iid = e.item?.id ?? e.item_id;
    if (e.type === 'conversation.item.added' || e.type === 'conversation.item.done') {
      assert.equal(iid, itemId, `${e.type} inside response ${responseId} is for item ${iid}, not ${itemId}`);
    } else {
      assert.equal(rid, responseId, `${e.type} inside response ${responseId} carries response id ${rid}`);
    }
  }
  const types = cycleTypes(span, RESPONSE_CYCLE);
  assert.deepEqual(types, RESPONSE_CYCLE, `event order of response ${responseId}`);

  const deltas = span.filter((e) => e.type === 'response.output_audio_transcript.delta').map((e) => e.delta).join('');
  const tdone = span.find((e) => e.type === 'response.output_audio_transcript.done');
  assert.equal(deltas, tdone.transcript, 'transcript deltas add up to output_audio_transcript.done');
  const part = span.find((e) => e.type === 'response.content_part.added');
  assert.equal(part.part?.type, 'audio', `content_part.added part.type: ${JSON.stringify(part.part)}`);
  const asst = span.find((e) => e.type === 'conversation.item.added' && e.item?.id === itemId);
  assert.equal(asst.item.role, 'assistant');
  const done = span.find((e) => e.type === 'response.done');
  assert.equal(done.response.status, 'completed', `response.done status: ${JSON.stringify(done.response.status_details)}`);
  const out = (done.response.output || []).find((i) => i.id === itemId);
  assert.ok(out, `response.done.output lacks item ${itemId}`);
  const outAudio = (out.content || []).find((c) => c.type === 'output_audio');
  assert.ok(outAudio, `response.done output item has no output_audio content: ${JSON.stringify(out.content)}`);
  assert.equal(outAudio.transcript, tdone.transcript, 'response.done output transcript');
  return { transcript: tdone.transcript, itemId, events: span };
}

/** Compact one-line-per-event dump for diagnostics. */
export function eventDump(events, { max = 400 } = {}) {
  return events
    .slice(-max)
    .map((e) => {
      const { t, type, generic, schemaIssues, ...rest } = e;
      let body = JSON.stringify(rest);
      if (body.length > 300) body = body.slice(0, 300) + '…';
      return `${typeof t === 'number' ? t.toFixed(0).padStart(6) : '     ?'} ms ${type}${generic ? ' [GENERIC: ' + JSON.stringify(schemaIssues) + ']' : ''} ${body}`;
    })
    .join('\n');
}
