// The official Python `openai` package (pinned in tests/python/requirements.txt) against voice-edge's Realtime
// WebSocket transport (`GET /v1/realtime?model=…`): starts the server, runs tests/python/realtime_ws.py with
// the venv's python (its checks: a spoken echo turn in audio/pcm, a text turn, a spoken turn in audio/pcmu,
// an ?intent=transcription session), asserts on the JSON it prints and prints the turn latency per case.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/python-openai.test.mjs
//
// The python is $VOICE_EDGE_PYTHON, else tests/python/.venv/bin/python; scripts/test.sh makes that venv
// (`python3 -m venv tests/python/.venv && tests/python/.venv/bin/pip install -r tests/python/requirements.txt`).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, serverDiagnostics, startServer } from './harness.mjs';

const FILE_TIMEOUT_MS = 120_000;
const SCRIPT = path.join(REPO_ROOT, 'tests', 'python', 'realtime_ws.py');
const PYTHON = path.resolve(REPO_ROOT, process.env.VOICE_EDGE_PYTHON || 'tests/python/.venv/bin/python');
const SCRIPT_DEADLINE_S = 60; // the script's own bound on all its checks
const KILL_AFTER_MS = (SCRIPT_DEADLINE_S + 30) * 1000;

/** Run the script; resolves {code, signal, stdout, stderr, ms}. Killed if it outlives KILL_AFTER_MS. */
function runScript(args) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(PYTHON, [SCRIPT, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_MS);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - t0 });
    });
  });
}

const fmtMs = (v) => (typeof v === 'number' ? v.toFixed(1) : '—');
const withMs = (v) => (typeof v === 'number' ? `${v.toFixed(1)} ms` : '—');

describe('openai (Python) realtime.connect() over WebSocket', { timeout: FILE_TIMEOUT_MS }, () => {
  let server = null;
  let run = null; // runScript's result
  let out = null; // the JSON the script printed
  let dumped = false;

  before(async () => {
    if (!fs.existsSync(PYTHON)) {
      throw new Error(
        `no python at ${PYTHON}: run scripts/test.sh, or python3 -m venv tests/python/.venv && ` +
          'tests/python/.venv/bin/pip install -r tests/python/requirements.txt (or set VOICE_EDGE_PYTHON)',
      );
    }
    server = await startServer({ readyMs: 30_000, relay: 'loopback' });
    run = await runScript(['--base-url', `http://${server.httpAddr}/v1`, '--deadline', String(SCRIPT_DEADLINE_S)]);
    const line = run.stdout.trim().split('\n').pop() || '';
    try {
      out = JSON.parse(line);
    } catch {
      out = null;
    }
  });

  after(async () => {
    if (server) await server.stop().catch(() => {});
  });

  async function dump(why) {
    if (dumped) return;
    dumped = true;
    const parts = [`python: ${PYTHON} ${SCRIPT} → exit ${run?.code} ${run?.signal ?? ''} after ${fmtMs(run?.ms)} ms`];
    parts.push(`stdout:\n${out ? JSON.stringify(out, null, 2) : run?.stdout}`);
    if (run?.stderr) parts.push(`stderr:\n${run.stderr.slice(-4000)}`);
    if (server) parts.push(await serverDiagnostics(server, { logLines: 120 }).catch((e) => `(server diagnostics failed: ${e})`));
    console.error(`\n===== python openai failure diagnostics (${why}) =====\n${parts.join('\n\n')}\n===== end diagnostics =====\n`);
  }

  /** The named check's result, asserting it passed (its failures are the message). */
  async function passed(name) {
    try {
      assert.ok(out, `the script printed no JSON (exit ${run?.code})`);
      const c = out.checks[name];
      assert.ok(c, `no result for ${name}`);
      assert.deepEqual(c.failures, [], `${name}: ${c.failures.join(' | ')}`);
      assert.equal(c.ok, true);
      return c;
    } catch (e) {
      await dump(`${name}: ${e.message.split('\n')[0]}`);
      throw e;
    }
  }

  const has = (c, type) => c.events.some((e) => e === type || e.startsWith(`${type} ×`));

  test('the script ran the pinned client and exited 0', async () => {
    try {
      assert.ok(out, `no JSON on stdout (exit ${run.code}, signal ${run.signal})`);
      assert.equal(out.openai_version, fs.readFileSync(path.join(REPO_ROOT, 'tests/python/requirements.txt'), 'utf8').match(/^openai(?:\[[^\]]*\])?==(\S+)/m)[1]);
      assert.ok(out.elapsed_ms < SCRIPT_DEADLINE_S * 1000, `script took ${out.elapsed_ms} ms`);
      assert.equal(run.code, out.ok ? 0 : 1, 'exit code follows ok');
      assert.equal(run.code, 0, `exit ${run.code}`);
    } catch (e) {
      await dump(e.message.split('\n')[0]);
      throw e;
    }
  });

  test('spoken turn (audio/pcm 24 kHz): VAD events, echo replays the speech', async () => {
    const c = await passed('spoken');
    for (const t of ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'response.created', 'response.output_audio.delta', 'response.done']) {
      assert.ok(has(c, t), `${t} in ${c.events.join(', ')}`);
    }
    assert.equal(c.status, 'completed');
    assert.equal(c.bytes_per_second, 48_000);
    assert.ok(c.audio_deltas >= 1 && c.audio_bytes % 2 === 0, `${c.audio_deltas} deltas, ${c.audio_bytes} bytes`);
    assert.ok(c.reply_ms >= 0.9 * c.speech_ms, `reply ${c.reply_ms} ms for ${c.speech_ms} ms of speech`);
    assert.ok(c.envelope_similarity >= 0.7, `envelope similarity ${c.envelope_similarity}`);
    assert.ok(c.latency_ms > 0 && c.latency_ms < 5000, `latency ${c.latency_ms} ms`);
  });

  test('an ek_ minted with a session (client_secrets.create): a client holding only the key gets it from session.created, and its tool fires', async () => {
    const c = await passed('key_session');
    assert.equal(c.tool, 'get_weather');
    assert.ok(!has(c, 'session.updated'), 'no session.update was sent');
  });

  test('text turn: speech saying the text, transcript deltas and done', async () => {
    const c = await passed('text');
    for (const t of ['response.created', 'response.output_audio.delta', 'response.output_audio_transcript.delta', 'response.output_audio_transcript.done', 'response.done']) {
      assert.ok(has(c, t), `${t} in ${c.events.join(', ')}`);
    }
    assert.equal(c.status, 'completed');
    assert.ok(c.reply_speech_ms >= 300, `speech in the reply: ${c.reply_speech_ms} ms`);
    assert.match(c.transcript_done, /hello there/i);
  });

  test('audio/pcmu both ways: session.updated says so, the reply is 8000 mu-law bytes a second', async () => {
    const c = await passed('pcmu');
    assert.deepEqual(
      [c.session_updated_formats.input.type, c.session_updated_formats.output.type],
      ['audio/pcmu', 'audio/pcmu'],
    );
    assert.equal(c.bytes_per_second, 8000);
    assert.equal(c.status, 'completed');
    // The echo replays the turn (audio_start_ms..audio_end_ms): its length in mu-law bytes is 8 per ms.
    assert.ok(Math.abs(c.audio_bytes / 8 - c.turn_ms) <= Math.max(150, 0.08 * c.turn_ms), `${c.audio_bytes} bytes for a ${c.turn_ms} ms turn`);
    assert.ok(c.envelope_similarity >= 0.7, `envelope similarity ${c.envelope_similarity}`);
  });

  test('?intent=transcription: transcription session, transcripts, no responses', async () => {
    const c = await passed('transcription');
    assert.equal(c.session_created?.type, 'transcription');
    for (const t of ['input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped', 'input_audio_buffer.committed', 'conversation.item.input_audio_transcription.delta', 'conversation.item.input_audio_transcription.completed']) {
      assert.ok(has(c, t), `${t} in ${c.events.join(', ')}`);
    }
    assert.ok(!c.events.some((e) => e.startsWith('response.')), `responses: ${c.events.join(', ')}`);
    assert.ok(c.transcript.trim().length > 0);
  });

  test("every server event validates against the package's pydantic model", async () => {
    try {
      assert.ok(out, 'no JSON');
      assert.deepEqual(out.schema_errors, []);
    } catch (e) {
      await dump(`schema: ${e.message.split('\n')[0]}`);
      throw e;
    }
  });

  test('latency table', () => {
    if (!out) return;
    const rows = [
      ['case', 'turn latency', 'speech_stopped→audio', 'reply audio', 'connect'],
      ...Object.entries(out.checks).map(([name, c]) => [
        name + (c.ok ? '' : ' (FAILED)'),
        withMs(c.latency_ms),
        withMs(c.stopped_to_audio_ms ?? c.stopped_to_delta_ms),
        c.reply_ms != null ? `${c.reply_ms} ms / ${c.audio_bytes} B` : '—',
        withMs(c.connect_ms),
      ]),
    ];
    const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
    const line = (r) => '| ' + r.map((v, i) => v.padEnd(widths[i])).join(' | ') + ' |';
    console.log(
      [
        `python openai ${out.openai_version} (websockets ${out.websockets_version}) over WebSocket; turn latency: spoken/pcmu: ` +
          'send of the last chunk with speech → first response.output_audio.delta (includes the VAD silence wait); ' +
          'text: response.create → first delta; transcription: last speech chunk → first transcription delta',
        line(rows[0]),
        line(widths.map((w) => '-'.repeat(w))),
        ...rows.slice(1).map(line),
      ].join('\n'),
    );
  });
});
