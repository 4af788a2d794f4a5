// MCP tools against a real MCP server this project did not write: the reference
// `@modelcontextprotocol/server-everything` (pinned in package.json) over MCP's Streamable HTTP transport,
// started here on a free port. A Realtime WebSocket session (raw `ws` client, text output) adds it as a
// `{"type": "mcp"}` tool; voice-edge lists its tools, the echo stub calls the one the user names, and the
// server's answer is said in the same response. Approval, a refused approval's absence of a call, and a
// server that is down are covered too; every server event is checked against the `openai` package's types.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/mcp.test.mjs
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freeTcpPort, serverDiagnostics, startServer } from './harness.mjs';
import { assertServerEventShapes } from './openai-types.mjs';
import { openEventSocket, realtimeUrl, wsEventDump } from './realtime-ws.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const EVERYTHING = path.join(here, 'node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js');

/** server-everything on a free port; resolves once it listens. */
async function startEverything() {
  const port = await freeTcpPort();
  const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines = [];
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`server-everything did not start: ${lines.join('')}`)), 20_000);
    const onData = (d) => {
      lines.push(String(d));
      if (/listening on port/.test(lines.join(''))) {
        clearTimeout(t);
        resolve();
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code) => reject(new Error(`server-everything exited ${code}: ${lines.join('')}`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, child, lines };
}

describe('MCP tools on a real MCP server (server-everything, Streamable HTTP)', { timeout: 90_000 }, () => {
  let server;
  let everything;
  const sockets = [];

  before(async () => {
    [server, everything] = await Promise.all([startServer(), startEverything()]);
  });

  after(async () => {
    for (const s of sockets) s.ws.close();
    everything?.child.kill();
    await server?.stop();
  });

  /** A text session with the server as its only tool, listed; returns the socket and the list item. */
  async function listedSession(requireApproval, serverUrl = everything.url) {
    const es = await openEventSocket(realtimeUrl(server, { model: 'echo' }));
    sockets.push(es);
    await es.waitFor({ type: 'session.created' });
    es.send({
      type: 'session.update',
      session: {
        type: 'realtime',
        output_modalities: ['text'],
        tools: [{ type: 'mcp', server_label: 'everything', server_url: serverUrl, require_approval: requireApproval }],
      },
    });
    const progress = await es.waitFor({ type: 'mcp_list_tools.in_progress' });
    const itemId = progress.event.item_id;
    const end = await Promise.race([
      es.waitFor({ type: 'mcp_list_tools.completed', item_id: itemId }, { timeoutMs: 15_000 }),
      es.waitFor({ type: 'mcp_list_tools.failed', item_id: itemId }, { timeoutMs: 15_000 }),
    ]);
    const done = await es.waitFor({ type: 'conversation.item.done', 'item.id': itemId }, { from: end.index });
    return { es, status: end.event.type, item: done.event.item, at: done.index };
  }

  function say(es, text) {
    es.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
    es.send({ type: 'response.create' });
  }

  async function check(es, label, fn) {
    try {
      await fn();
      assertServerEventShapes(assert, es.events, label);
    } catch (err) {
      console.error(`\n===== ${label} events =====\n${wsEventDump(es.events, es.t0)}\n`);
      console.error(await serverDiagnostics(server).catch((e) => `(diagnostics failed: ${e})`));
      throw err;
    }
  }

  test('the session lists the server\'s tools, calls the named one with arguments and says its answer', async () => {
    const { es, status, item, at } = await listedSession('never');
    await check(es, 'mcp call', async () => {
      assert.equal(status, 'mcp_list_tools.completed');
      assert.equal(item.type, 'mcp_list_tools');
      assert.equal(item.server_label, 'everything');
      const names = item.tools.map((t) => t.name);
      for (const want of ['echo', 'get-sum']) assert.ok(names.includes(want), `listed: ${names.join(', ')}`);
      const sum = item.tools.find((t) => t.name === 'get-sum');
      assert.deepEqual(Object.keys(sum.input_schema.properties).sort(), ['a', 'b'], 'the server\'s own schema');

      say(es, 'What does the get sum tool say?');
      const progress = await es.waitFor({ type: 'response.mcp_call.in_progress' }, { from: at });
      const args = await es.waitFor({ type: 'response.mcp_call_arguments.done' }, { from: at });
      assert.deepEqual(JSON.parse(args.event.arguments), { a: 0, b: 0 }, 'arguments made from the listed schema');
      const completed = await es.waitFor({ type: 'response.mcp_call.completed', item_id: progress.event.item_id }, { from: at, timeoutMs: 15_000 });
      const callDone = await es.waitFor({ type: 'response.output_item.done', 'item.id': progress.event.item_id }, { from: completed.index });
      assert.equal(callDone.event.item.type, 'mcp_call');
      assert.equal(callDone.event.item.name, 'get-sum');
      assert.match(callDone.event.item.output, /sum of 0 and 0 is 0/i, 'the server\'s own output');
      const done = await es.waitFor({ type: 'response.done' }, { from: completed.index });
      const r = done.event.response;
      assert.equal(r.status, 'completed');
      assert.deepEqual(r.output.map((o) => o.type), ['mcp_call', 'message'], 'one response: the call, then what it said');
      assert.match(r.output[1].content[0].text, /sum of 0 and 0 is 0/i);
      console.log(`mcp: listed ${names.length} tools; get-sum → ${JSON.stringify(callDone.event.item.output)}; said: ${JSON.stringify(r.output[1].content[0].text)}`);
    });
  });

  test('approval: an approval request first, the approval item alone runs the call; a refusal runs nothing', async () => {
    const { es, at } = await listedSession('always');
    await check(es, 'mcp approval', async () => {
      say(es, 'Please use the echo tool.');
      const first = await es.waitFor({ type: 'response.done' }, { from: at });
      const request = first.event.response.output[0];
      assert.equal(request.type, 'mcp_approval_request');
      assert.equal(request.name, 'echo');
      assert.ok(!es.events.some((e) => e.type === 'response.mcp_call.in_progress'), 'nothing ran before approval');

      // As the Agents SDK answers: the item only, no response.create.
      es.send({ type: 'conversation.item.create', item: { type: 'mcp_approval_response', approval_request_id: request.id, approve: true } });
      const completed = await es.waitFor({ type: 'response.mcp_call.completed' }, { from: first.index, timeoutMs: 15_000 });
      const done = await es.waitFor({ type: 'response.done' }, { from: completed.index });
      const [call, message] = done.event.response.output;
      assert.equal(call.approval_request_id, request.id);
      assert.match(call.output, /^Echo: /);
      assert.match(message.content[0].text, /echo tool returned/i);

      // A refusal: recorded, nothing runs.
      say(es, 'Please use the echo tool again.');
      const second = await es.waitFor({ type: 'response.done' }, { from: done.index + 1 });
      const again = second.event.response.output[0];
      assert.equal(again.type, 'mcp_approval_request');
      es.send({ type: 'conversation.item.create', item: { type: 'mcp_approval_response', approval_request_id: again.id, approve: false } });
      await es.waitFor({ type: 'conversation.item.done', 'item.type': 'mcp_approval_response' }, { from: second.index });
      await new Promise((r) => setTimeout(r, 500));
      const later = es.events.slice(second.index + 1).map((e) => e.type);
      assert.ok(!later.includes('response.created'), `nothing ran after a refusal: ${later.join(', ')}`);

      // An answer to no request is refused, naming the parameter.
      es.send({ type: 'conversation.item.create', event_id: 'bad_approval', item: { type: 'mcp_approval_response', approval_request_id: 'mcpr_nope', approve: true } });
      const err = await es.waitFor({ type: 'error', 'error.event_id': 'bad_approval' });
      assert.equal(err.event.error.code, 'invalid_approval_request_id');
    });
  });

  test('a server that is down: the listing fails with the reason and the session goes on', async () => {
    const closed = `http://127.0.0.1:${await freeTcpPort()}/mcp`;
    const { es, status, item, at } = await listedSession('never', closed);
    await check(es, 'mcp down', async () => {
      assert.equal(status, 'mcp_list_tools.failed');
      assert.deepEqual(item.tools, []);
      const err = es.events.find((e) => e.type === 'error' && e.error.code === 'mcp_list_tools_failed');
      assert.ok(err, 'an error says why');
      assert.match(err.error.message, /everything/);
      say(es, 'Please use the echo tool.');
      const done = await es.waitFor({ type: 'response.done' }, { from: at });
      assert.deepEqual(done.event.response.output.map((o) => o.type), ['message'], 'no tool to call: the model answers');
      console.log(`mcp down: ${err.error.message}`);
    });
  });
});
