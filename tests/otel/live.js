// What client.js (tracecontext-service) and demo.js (demo-server) share: an OTLP receiver on the
// loopback, the tracetree program under test started and stopped, HTTP requests, named checks, and
// the comparison of every body the program exported with the SDK's serialization (reference.js).
'use strict';
const assert = require('node:assert/strict');
const http = require('node:http');
const { spawn } = require('node:child_process');
const readline = require('node:readline');
const reference = require('./reference.js');

// Under clang's AddressSanitizer tracetree records no throws (README, Limitations): meson says so.
const throwsSeen = !process.env.TRACETREE_NO_THROW_NODES;
if (!throwsSeen) console.log('TRACETREE_NO_THROW_NODES: this build records no throws; they are not checked');

let program = null;  // killed on every way out: a program left running would hold meson's pipe open
function giveUp(message) {
  console.error(`FAILED: ${message}`);
  if (program) program.kill('SIGKILL');
  process.exit(1);
}
const deadline = setTimeout(() => giveUp('timed out'), 60000);

function listen(handler) {
  return new Promise((resolve) => {
    const server = http.createServer(handler);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}
function readBody(request) {
  return new Promise((resolve) => {
    const chunks = [];
    request.on('data', (chunk) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString()));
  });
}

// An OTLP/HTTP JSON receiver: every request's body as sent, with its service.name, and every span.
async function receiver() {
  const bodies = [];  // { service, body }
  let waiting = [];
  const server = await listen(async (request, response) => {
    const text = await readBody(request);
    try {
      assert.equal(request.url, '/v1/traces');
      assert.match(request.headers['content-type'], /^application\/json/);
      const body = JSON.parse(text);
      const service = body.resourceSpans[0].resource.attributes.find((a) => a.key === 'service.name').value.stringValue;
      bodies.push({ service, body });
    } catch (error) {
      giveUp(`the receiver got a request it cannot read: ${error.message}\n${text.slice(0, 500)}`);
    }
    response.writeHead(200, { 'Content-Type': 'application/json' });
    response.end('{}');
    const woken = waiting;
    waiting = [];
    woken.forEach((wake) => wake());
  });
  return {
    url: `http://127.0.0.1:${server.address().port}/v1/traces`,
    bodies,
    spans: () => bodies.flatMap(({ service, body }) => body.resourceSpans.flatMap((r) =>
      r.scopeSpans.flatMap((s) => s.spans.map((span) => ({ service, ...span }))))),
    // Resolves when `ready()` holds, tested again at each request received (no polling).
    async until(ready) {
      while (!ready()) await new Promise((resolve) => waiting.push(resolve));
    },
    close: () => server.close(),
  };
}

// Starts the program; resolves with the first line it prints (its addresses).
function start(path, args) {
  program = spawn(path, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    program.on('exit', (code) => reject(new Error(`${path} exited with ${code}`)));
    readline.createInterface({ input: program.stdout }).once('line', resolve);
  });
}
// SIGTERM; resolves with the exit code.
function stop() {
  const code = new Promise((resolve) => program.on('exit', resolve));
  program.kill('SIGTERM');
  return code;
}

function request(url, { method = 'GET', headers = {}, body = '' } = {}) {
  return new Promise((resolve, reject) => {
    const outgoing = http.request(url, { method, headers }, (response) => {
      const chunks = [];
      response.on('data', (chunk) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode, body: Buffer.concat(chunks).toString() }));
    });
    outgoing.on('error', reject);
    outgoing.end(body);
  });
}

let checks = 0;
function check(what, fn) {
  try {
    fn();
    checks++;
  } catch (error) {
    console.error(`FAILED: ${what}\n${error.message}`);
    process.exitCode = 1;
  }
}

// Every body the program exported (the receiver's, of the given services), compared with the SDK's.
function compareWithSdk(bodies, services) {
  bodies.filter(({ service }) => services.includes(service))
    .forEach(({ service, body }, i) => reference.compare(body, `live capture ${i + 1} (${service})`));
  return reference.summary();
}

function finish(name) {
  clearTimeout(deadline);
  console.log(`${name}: ${checks} checks` + (process.exitCode ? ', with failures' : ', all pass'));
}

module.exports = { throwsSeen, giveUp, listen, readBody, receiver, start, stop, request, check, compareWithSdk, finish };
