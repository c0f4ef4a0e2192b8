#!/usr/bin/env node
// Runs N browser-control panes in headless Chromium for the broker's tests.
//
//   node web/tests/panes.mjs --url http://127.0.0.1:PORT --token T
//        [--panes N] [--delay-ms N] [--capable 1|0] [--src /fixtures/NAME] [--timeout-ms N]
//
// --src: every pane's view starts on that page of the server (the token is added).
// Prints one line {"ready":true,"panes":N} once every pane saw its first heartbeat
// (and, with --src, once every view has loaded that page),
// then answers one JSON command per stdin line with one JSON reply per stdout line:
//   {"op":"log","pane":i}                     -> {"ok":true,"log":[...]}
//   {"op":"frame","pane":i,"expr":E}          -> {"ok":true,"value":...}
//        E in count | submitted | url | scrollY (fixed readings, no eval from stdin)
//   {"op":"addresses","pane":i,"urls":[U...]} -> {"ok":true,"read":["invalid"|"refused"|"allowed",...]}
//        how the pane reads each URL: not a URL at all, refused, or allowed (data, not code)
//   {"op":"close","pane":i}                   -> {"ok":true}
//   {"op":"quit"}                             -> closes the browser, exit 0
// EOF on stdin also exits 0. Errors -> {"ok":false,"error":"..."}. If the panes cannot
// start, one line {"ready":false,"error":"..."} and exit 1. Diagnostics go to stderr
// (kept short; set MOSAIC_PANES_VERBOSE=1 to forward the pages' console).

import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const VERBOSE = process.env.MOSAIC_PANES_VERBOSE === '1';

function parseArgs(argv) {
  const opts = { url: null, token: null, panes: 1, delayMs: 0, capable: true, timeoutMs: 30000, src: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) throw new Error(`missing value for ${a}`);
      return argv[++i];
    };
    const int = (v, name) => {
      if (!/^\d+$/.test(v)) throw new Error(`${name} must be a non-negative integer`);
      return Number(v);
    };
    switch (a) {
      case '--url': opts.url = next().replace(/\/+$/, ''); break;
      case '--token': opts.token = next(); break;
      case '--panes': opts.panes = int(next(), '--panes'); break;
      case '--delay-ms': opts.delayMs = int(next(), '--delay-ms'); break;
      case '--capable': {
        const v = next();
        if (v !== '1' && v !== '0') throw new Error('--capable must be 1 or 0');
        opts.capable = v === '1';
        break;
      }
      case '--timeout-ms': opts.timeoutMs = int(next(), '--timeout-ms'); break;
      case '--src': {
        const v = next();
        if (!v.startsWith('/') || v.startsWith('//')) throw new Error('--src must be a path on the server, like /fixtures/clicks.html');
        opts.src = v;
        break;
      }
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  if (!opts.url) throw new Error('--url is required');
  if (opts.token === null) throw new Error('--token is required');
  if (opts.panes < 1 || opts.panes > 32) throw new Error('--panes must be 1..32');
  return opts;
}

let stdoutBroken = false;
process.stdout.on('error', () => { stdoutBroken = true; });
function reply(obj) {
  if (stdoutBroken) return;
  process.stdout.write(JSON.stringify(obj) + '\n');
}
function diag(msg) {
  process.stderr.write(`panes: ${msg}\n`);
}

let browser = null;
let exiting = false;
async function shutdown(code) {
  if (exiting) return;
  exiting = true;
  try { if (browser) await browser.close(); } catch (e) { diag(`browser close: ${e.message}`); }
  process.exit(code);
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(sig, () => { shutdown(0); });

// Readings of the framed fixture document: a fixed set, never an expression from stdin.
const READINGS = {
  count: () => {
    const el = document.querySelector('#count');
    if (!el) return null;
    const n = Number(el.textContent.trim());
    return Number.isFinite(n) ? n : null;
  },
  submitted: () => {
    const el = document.querySelector('#submitted');
    return el ? el.textContent : null;
  },
  url: () => location.href,
  scrollY: () => window.scrollY,
};

async function main() {
  let opts;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    reply({ ready: false, error: e.message });
    process.exit(2);
  }
  const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
  if (!existsSync(executablePath)) {
    reply({ ready: false, error: `chromium not found at ${executablePath} (set CHROMIUM)` });
    process.exit(1);
  }

  const panes = [];
  try {
    browser = await chromium.launch({
      executablePath,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      timeout: opts.timeoutMs,
    });
    browser.on('disconnected', () => { if (!exiting) { diag('browser disconnected'); shutdown(1); } });

    for (let i = 0; i < opts.panes; i++) {
      // One context per pane: separate connection pools (an SSE stream holds one of the
      // six HTTP/1.1 connections a profile may open to a host) and separate storage.
      const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
      const page = await context.newPage();
      const q = new URLSearchParams({ token: opts.token, clientId: `pane-${i}`, delayMs: String(opts.delayMs) });
      if (!opts.capable) q.set('browser', '0');
      if (opts.src) q.set('src', opts.src);
      page.on('pageerror', (e) => diag(`pane ${i} page error: ${e.message}`));
      page.on('console', (m) => {
        if (VERBOSE || m.type() === 'error') diag(`pane ${i} console.${m.type()}: ${m.text().slice(0, 500)}`);
      });
      const pane = { index: i, context, page, closed: false };
      panes.push(pane);
      const res = await page.goto(`${opts.url}/pane?${q}`, { waitUntil: 'load', timeout: opts.timeoutMs });
      if (!res || res.status() !== 200) throw new Error(`pane ${i}: GET /pane answered ${res ? res.status() : 'nothing'}`);
    }
    await Promise.all(panes.map((p) => p.page.waitForFunction(
      () => !!(window.mosaicPane && window.mosaicPane.connected), null, { timeout: opts.timeoutMs, polling: 50 })
      .catch((e) => { throw new Error(`pane ${p.index} did not connect: ${e.message.split('\n')[0]}`); })));
    if (opts.src) {
      const path = new URL(opts.src, opts.url).pathname;
      await Promise.all(panes.map((p) => p.page.waitForFunction((want) => {
        try {
          const w = document.getElementById('view').contentWindow;
          return w.location.pathname === want && w.document.readyState === 'complete';
        } catch (_) { return false; }
      }, path, { timeout: opts.timeoutMs, polling: 50 })
        .catch((e) => { throw new Error(`pane ${p.index} did not load ${opts.src}: ${e.message.split('\n')[0]}`); })));
    }
  } catch (e) {
    reply({ ready: false, error: e.message.split('\n')[0] });
    await shutdown(1);
    return;
  }

  reply({ ready: true, panes: opts.panes });

  function paneAt(cmd) {
    const i = cmd.pane;
    if (!Number.isInteger(i) || i < 0 || i >= panes.length) throw new Error(`no pane ${JSON.stringify(i)}`);
    const p = panes[i];
    if (p.closed) throw new Error(`pane ${i} is closed`);
    return p;
  }
  async function viewFrame(page) {
    const handle = await page.$('#view');
    const frame = handle && await handle.contentFrame();
    if (!frame) throw new Error('the pane has no view frame');
    return frame;
  }

  async function handle(cmd) {
    if (!cmd || typeof cmd !== 'object') throw new Error('command must be a JSON object');
    switch (cmd.op) {
      case 'log': {
        const p = paneAt(cmd);
        const log = await p.page.evaluate(() => (window.mosaicPane ? window.mosaicPane.log : []));
        return { ok: true, log };
      }
      case 'frame': {
        const p = paneAt(cmd);
        if (!Object.prototype.hasOwnProperty.call(READINGS, cmd.expr)) {
          throw new Error(`unknown expr ${JSON.stringify(cmd.expr)} (count, submitted, url, scrollY)`);
        }
        const frame = await viewFrame(p.page);
        const value = await frame.evaluate(READINGS[cmd.expr]);
        return { ok: true, value: value === undefined ? null : value };
      }
      case 'addresses': {
        const p = paneAt(cmd);
        if (!Array.isArray(cmd.urls) || !cmd.urls.every((u) => typeof u === 'string')) {
          throw new Error('urls must be an array of strings');
        }
        const read = await p.page.evaluate((urls) => urls.map((u) => {
          try { new URL(u); } catch (_) { return 'invalid'; }
          return window.mosaicPane.addressRefused(u) ? 'refused' : 'allowed';
        }), cmd.urls);
        return { ok: true, read };
      }
      case 'close': {
        const p = paneAt(cmd);
        p.closed = true;
        await p.page.close();
        await p.context.close();
        return { ok: true };
      }
      case 'quit':
        return null;
      default:
        throw new Error(`unknown op ${JSON.stringify(cmd.op)}`);
    }
  }

  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  // Commands are answered strictly in order.
  for await (const line of rl) {
    if (!line.trim()) continue;
    let cmd;
    try {
      cmd = JSON.parse(line);
    } catch (e) {
      reply({ ok: false, error: 'bad-json' });
      continue;
    }
    if (cmd && cmd.op === 'quit') {
      await shutdown(0);
      return;
    }
    try {
      reply(await handle(cmd));
    } catch (e) {
      reply({ ok: false, error: String(e && e.message || e).split('\n')[0] });
    }
  }
  await shutdown(0); // EOF
}

main().catch((e) => {
  diag(`fatal: ${e && e.stack || e}`);
  shutdown(1);
});
