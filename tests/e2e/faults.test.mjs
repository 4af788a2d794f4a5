// Faults on demand, seen by Chromium's own WebRTC stack: loss injected on the way to the browser shows in
// its getStats() inbound-rtp packetsLost, and a blackout takes its ICE to 'disconnected' and back to
// 'connected' once it ends. The page is the plain flow (plain-page.mjs) with the loopback model, so the
// browser's microphone frames come straight back; the relay is on loopback.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/faults.test.mjs
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { REPO_ROOT, launchBrowser, openPage, serverDiagnostics, startServer } from './harness.mjs';
import { mintClientSecret, sleep, startStaticServer } from './realtime-util.mjs';
import { PLAIN_PAGE_HTML as HTML } from './plain-page.mjs';

const TURN_WAV = path.join(REPO_ROOT, 'fixtures', 'turn.wav');

async function fault(server, location, body, method = 'POST') {
  const res = await fetch(new URL(location + '/faults', server.baseUrl), {
    method,
    headers: { 'content-type': 'application/json' },
    body: method === 'POST' ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `${method} faults ${JSON.stringify(body)} → ${res.status} ${text}`);
  return JSON.parse(text);
}

const audioStats = (page) =>
  page.evaluate(async () => {
    let out = null;
    (await window.rt.pc.getStats()).forEach((s) => {
      if (s.type === 'inbound-rtp' && s.kind === 'audio') out = { received: s.packetsReceived ?? 0, lost: s.packetsLost ?? 0 };
    });
    return out;
  });

describe('faults on demand in headless chromium', { timeout: 90_000 }, () => {
  let server = null;
  let pages = null;
  let browser = null;
  let ctx = null;

  before(async () => {
    server = await startServer({ readyMs: 30_000, relay: 'loopback' });
    pages = await startStaticServer({ '/': { type: 'text/html; charset=utf-8', body: HTML } });
    browser = await launchBrowser({ audioFile: TURN_WAV });
  });

  after(async () => {
    if (ctx) await ctx.context.close().catch(() => {});
    if (browser) await browser.close().catch(() => {});
    if (pages) await pages.close().catch(() => {});
    if (server) await server.stop().catch(() => {});
  });

  test('loss shows in packetsLost; a blackout goes disconnected, then connected again', { timeout: 60_000 }, async () => {
    try {
      const key = await mintClientSecret(server);
      ctx = await openPage(browser, `${pages.origin}/`);
      const { page } = ctx;
      const baseUrl = server.baseUrl.replace(/\/$/, '');
      const started = await page.evaluate((o) => window.startPlain(o), { baseUrl, key: key.key, query: '?model=loopback' });
      assert.equal(started.calls.status, 201);
      const location = started.calls.location;
      await page.evaluate(() => {
        window.rt.iceStates = [window.rt.pc.iceConnectionState];
        window.rt.pc.addEventListener('iceconnectionstatechange', () => window.rt.iceStates.push(window.rt.pc.iceConnectionState));
      });
      await sleep(1000);
      const s0 = await audioStats(page);
      assert.ok(s0?.received > 0, `audio before any fault: ${JSON.stringify(s0)}`);

      // 30 % loss towards the browser for 3 s.
      await fault(server, location, { type: 'network', loss: 0.3, direction: 'to_client' });
      await sleep(3000);
      const cleared = await fault(server, location, null, 'DELETE');
      assert.equal(cleared.network, null);
      const s1 = await audioStats(page);
      const lost = s1.lost - s0.lost;
      const got = s1.received - s0.received;
      const fraction = lost / (lost + got);
      console.log(`faults: loss 0.3 to the browser for 3 s → packetsLost +${lost}, packetsReceived +${got} (${(100 * fraction).toFixed(1)} % lost)`);
      assert.ok(fraction > 0.15 && fraction < 0.45, `lost fraction ${fraction}`);

      // A blackout longer than Chromium's ICE disconnect timeout.
      const t0 = Date.now();
      await fault(server, location, { type: 'blackout', duration_ms: 7000 });
      let states = [];
      let reconnectedAt = null;
      while (Date.now() - t0 < 20_000) {
        states = await page.evaluate(() => window.rt.iceStates);
        const d = states.indexOf('disconnected');
        if (d >= 0 && states.slice(d + 1).some((s) => s === 'connected' || s === 'completed')) {
          reconnectedAt = Date.now() - t0;
          break;
        }
        await sleep(100);
      }
      console.log(`faults: blackout 7 s → ICE states ${states.join(' → ')}; connected again after ${reconnectedAt} ms`);
      assert.ok(states.includes('disconnected'), `ICE never went disconnected: ${states}`);
      assert.ok(reconnectedAt !== null, `ICE did not come back: ${states}`);
      assert.ok(reconnectedAt >= 6000, `reconnected during the blackout (${reconnectedAt} ms)`);
      const s2 = await audioStats(page);
      await sleep(1000);
      const s3 = await audioStats(page);
      assert.ok(s3.received > s2.received + 20, `audio did not resume: ${JSON.stringify([s2, s3])}`);
    } catch (err) {
      if (server) console.error(await serverDiagnostics(server, { adminPaths: ['/admin/calls'] }));
      throw err;
    }
  });
});
