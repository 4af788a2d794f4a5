// LAN mode (`voice-edge --lan`): the demo and the API over HTTPS on every interface, so a phone or another
// machine gets a secure context (getUserMedia) at the machine's LAN address. Chromium and Firefox open the
// printed https://<LAN address>:<port>/#key=… URL (the self-signed certificate accepted, as a user does
// once) and complete a call whose media goes to the advertised LAN address. The key in the fragment pairs
// the device: a device that opens the URL without it gets the page but every API door answers 401.
//
//   VOICE_EDGE_BIN=target/x86_64-unknown-linux-gnu/release/voice-edge node --test tests/e2e/lan.test.mjs
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { after, before, describe, test } from 'node:test';
import { chromium } from 'playwright-core';
import { CHROMIUM, capturePageLog, chromiumArgs, diagnostics, freeTcpPort, rtcStats, startCallAndWaitForAudio, startServer, timingsLine } from './harness.mjs';
import { firefoxDemoTurn, inboundAudioStats, launchFirefox, openFirefoxPage } from './firefox.mjs';
import WebSocket from 'ws';

/** A WebSocket to the LAN listener (self-signed): 'open', or the HTTP status it was refused with. */
function socketOutcome(url, protocols) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, protocols, { rejectUnauthorized: false });
    ws.on('open', () => {
      ws.close();
      resolve('open');
    });
    ws.on('unexpected-response', (_req, res) => resolve(res.statusCode));
    ws.on('error', (e) => resolve(`error: ${e.message}`));
  });
}

describe('LAN mode: HTTPS on the LAN address', { timeout: 120_000 }, () => {
  let server = null;
  let cacheDir = null;

  before(async () => {
    cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'voice-edge-lan-'));
    const httpsPort = await freeTcpPort();
    server = await startServer({ extraArgs: ['--lan', '--https', `0.0.0.0:${httpsPort}`, '--cache-dir', cacheDir] });
  });

  after(async () => {
    if (server) await server.stop().catch(() => {});
    if (cacheDir) fs.rmSync(cacheDir, { recursive: true, force: true });
  });

  test('the banner names an https URL on the LAN address, and admin stays off it', async () => {
    assert.ok(server.lanUrl, `no https URL in the banner:\n${server.log()}`);
    const url = new URL(server.lanUrl);
    assert.equal(url.protocol, 'https:');
    assert.ok(!/^127\.|^\[::1\]$|^localhost$/.test(url.hostname), `LAN URL on loopback: ${server.lanUrl}`);
    assert.equal(url.hostname, server.relayAddr.replace(/:\d+$/, ''), 'the page and the media share the LAN address');
    assert.ok(fs.existsSync(path.join(cacheDir, 'lan-cert.pem')), 'self-signed certificate kept in the cache dir');
    // The certificate names the LAN address (so the browser's warning is about trust only, not a wrong name).
    const san = await new Promise((resolve, reject) => {
      const sock = tls.connect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false, servername: undefined }, () => {
        resolve(sock.getPeerCertificate().subjectaltname || '');
        sock.end();
      });
      sock.on('error', reject);
    });
    assert.ok(san.includes(`IP Address:${url.hostname}`), `certificate SANs ${san} miss ${url.hostname}`);
  });

  test('chromium: the demo over https://<LAN>, a spoken turn echoed', { timeout: 60_000 }, async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: chromiumArgs(), timeout: 30_000 });
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const consoleLines = capturePageLog(page);
    try {
      await page.goto(server.lanUrl, { waitUntil: 'load', timeout: 15_000 });
      assert.equal(await page.evaluate(() => window.isSecureContext), true, 'https on the LAN address is a secure context');
      const admin = await page.evaluate(async () => (await fetch('/admin/stats')).status);
      assert.equal(admin, 404, '/admin/* is not served on the LAN listener');
      const st = await startCallAndWaitForAudio(page, { timeoutMs: 20_000 });
      const stats = await rtcStats(page);
      assert.ok(stats.inbound.packetsReceived > 0 && stats.inbound.totalAudioEnergy > 0, `audio back: ${JSON.stringify(stats.inbound)}`);
      assert.equal(st.path.media, server.relayAddr, 'media goes to the advertised LAN address');
      console.log(`lan chromium: ${server.lanUrl.replace(/#.*/, '#key=…')} ${timingsLine(st.timings)}`);

      // A device that opened the URL without its fragment: the page loads, every door of the API is shut,
      // the paired device's call included.
      const callId = st.path.callId;
      const key = new URL(server.lanUrl).hash.replace('#key=', '');
      assert.match(key, /^pair_[0-9a-f]{32}$/);
      const stranger = await context.newPage();
      await stranger.goto(server.lanUrl.replace(/#.*/, ''), { waitUntil: 'load', timeout: 15_000 });
      const doors = await stranger.evaluate(async (id) => {
        const status = async (method, path, body) => {
          const res = await fetch(path, { method, body, headers: body ? { 'Content-Type': 'application/sdp' } : {} });
          return [`${method} ${path}`, res.status, (await res.json().catch(() => ({})))?.error?.code];
        };
        return [
          await status('POST', '/v1/realtime/calls', 'v=0'),
          await status('POST', '/v1/realtime/client_secrets'),
          await status('GET', `/v1/realtime/calls/${id}/events`),
          await status('POST', `/v1/realtime/calls/${id}/faults`),
          await status('POST', `/v1/realtime/calls/${id}/hangup`),
          await status('POST', '/v1/live/sessions'),
        ];
      }, callId);
      for (const [door, code, err] of doors) {
        assert.deepEqual([door, code, err], [door, 401, 'pairing_required'], `${door} without the key`);
      }
      const wsUrl = `${server.lanUrl.replace(/^https/, 'wss').replace(/\/#.*/, '')}/v1/realtime?call_id=${callId}`;
      assert.equal(await socketOutcome(wsUrl, ['realtime']), 401, 'a sideband without the key');
      assert.equal(await socketOutcome(wsUrl, ['realtime', `openai-insecure-api-key.${key}`]), 'open', 'the paired key opens it');
      // The page opened without the key cannot place a call, and says why.
      await stranger.click('#start');
      await stranger.waitForFunction(() => window.voiceEdge.state === 'failed', null, { timeout: 10_000 });
      assert.match(await stranger.evaluate(() => window.voiceEdge.error), /pairing/);
      // The paired page itself still reads its call's log.
      const log = await page.evaluate(async (id) => {
        const key = new URLSearchParams(location.hash.slice(1)).get('key');
        return (await fetch(`/v1/realtime/calls/${id}/events`, { headers: { Authorization: `Bearer ${key}` } })).status;
      }, callId);
      assert.equal(log, 200);
    } catch (err) {
      console.error(await diagnostics({ page, consoleLines, server }).catch((e) => `(diagnostics failed: ${e})`));
      throw err;
    } finally {
      await browser.close().catch(() => {});
    }
  });

  test('firefox: the demo over https://<LAN>, a turn with audio back', { timeout: 60_000 }, async () => {
    const browser = await launchFirefox({ acceptInsecureCerts: true });
    let ctx = null;
    try {
      ctx = await openFirefoxPage(browser, server.lanUrl);
      assert.equal(await ctx.page.evaluate(() => window.isSecureContext), true);
      const st = await firefoxDemoTurn(ctx.page);
      const audio = await inboundAudioStats(ctx.page);
      assert.ok(audio.packetsReceived > 25 && audio.totalAudioEnergy > 0, `audio back: ${JSON.stringify(audio)}`);
      assert.equal(st.path.media, server.relayAddr);
      console.log(`lan firefox: ${server.lanUrl.replace(/#.*/, '#key=…')} ${timingsLine(st.timings)}`);
    } catch (err) {
      console.error(await diagnostics({ page: ctx?.page, consoleLines: ctx?.consoleLines, server }).catch((e) => `(diagnostics failed: ${e})`));
      throw err;
    } finally {
      await browser.close().catch(() => {});
    }
  });
});
