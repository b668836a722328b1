// The demo's live exports against the official OpenTelemetry JavaScript SDK. demo-server (examples/demo),
// exporting with --otlp to a receiver here, serves two real requests, each with a remote parent (a
// traceparent) and a tracestate: on a fresh buggy server, a POST /send with a payment the channel cannot
// read (the jar rescan, one folded node; ChannelServer::checkPayment throws, the channel answers 400,
// so the demo's POST /pay is a failed outgoing call), then a GET /send that succeeds. Every body the
// demo exported, from both its services, is compared with the SDK's serialization as client.js compares
// tracecontext-service's (live.js, reference.js).
//
//   node demo.js PATH-TO-demo-server
'use strict';
const assert = require('node:assert/strict');
const live = require('./live.js');
const { check } = live;

const tracestate = 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7';
const refused = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', parent: '00f067aa0ba902b7' };
const paid = { traceId: '0af7651916cd43dd8448eb211c80319c', parent: 'b7ad6b7169203331' };

async function main() {
  const receiver = await live.receiver();
  const line = await live.start(process.argv[2], ['--mode=buggy', '--port=0', '--channel-port=0', '--admin-port=0',
                                                  '--jar-scale=0.05', '--max-connections=64', `--otlp=${receiver.url}`]);
  const found = / app=(http:\/\/127\.0\.0\.1:\d+)/.exec(line);
  if (!found) live.giveUp(`unexpected first line: ${line}`);
  const send = (caller, options) => live.request(`${found[1]}/send`, {
    ...options, headers: { traceparent: `00-${caller.traceId}-${caller.parent}-01`, tracestate, ...options.headers },
  });
  const refusal = await send(refused, { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                        body: '{"amount":"lots","currency":"CNY"}' });
  const payment = await send(paid, { method: 'GET' });

  // Both requests' spans, from the demo (channel-system) and from its channel (third-party-channel).
  const of = (caller, service, kind) => receiver.spans().filter((s) => s.traceId === caller.traceId &&
                                                                       s.service === service && s.kind === kind);
  await receiver.until(() => [refused, paid].every((caller) => of(caller, 'channel-system', 2).length === 1 &&
                                                               of(caller, 'third-party-channel', 2).length === 1));
  const spans = receiver.spans();

  check('the unreadable payment: 502 from the demo', () => assert.equal(refusal.status, 502, refusal.body));
  check('the payment: 200', () => assert.equal(payment.status, 200, payment.body));
  for (const caller of [refused, paid]) {
    const [server] = of(caller, 'channel-system', 2);
    const [call] = of(caller, 'channel-system', 3);
    const [channel] = of(caller, 'third-party-channel', 2);
    check(`${caller.traceId}: the demo's span has the caller's span as its remote parent, with its tracestate`, () => {
      assert.equal(server.parentSpanId, caller.parent);
      assert.equal(server.flags, 0x301);  // sampled, parent remote
      assert.equal(server.traceState, tracestate);
    });
    check(`${caller.traceId}: POST /pay, a client span of the demo's, the channel's parent`, () => {
      assert.equal(call.name, 'POST /pay');
      assert.equal(call.parentSpanId, server.spanId);
      assert.equal(channel.parentSpanId, call.spanId);
      assert.equal(channel.traceState, tracestate);
    });
  }
  const inRefused = spans.filter((s) => s.traceId === refused.traceId);
  check('the refused payment: POST /pay is a failed outgoing call (status ERROR)', () =>
    assert.equal(of(refused, 'channel-system', 3)[0].status.code, 2));
  check('the paid one: POST /pay succeeded', () => assert.equal(of(paid, 'channel-system', 3)[0].status.code, 0));
  check('the fresh server rescanned the jar: createZipEntry is one folded span (tracetree.count > 1)', () => {
    const folded = inRefused.filter((s) => s.name.includes('createZipEntry'));
    assert.equal(folded.length, 1);
    assert.ok(Number(folded[0].attributes.find((a) => a.key === 'tracetree.count').value.intValue) > 1);
  });
  if (live.throwsSeen) {
    check('the channel threw: an exception event, and checkPayment left by it (status ERROR)', () => {
      const checked = inRefused.find((s) => s.name === 'ChannelServer::checkPayment');
      assert.equal(checked.status.code, 2);
      const thrown = checked.events.find((e) => e.name === 'exception');
      assert.ok(thrown);
      assert.equal(thrown.attributes.find((a) => a.key === 'exception.type').value.stringValue, 'std::invalid_argument');
    });
  }
  console.log(`demo.js: live captures: ${live.compareWithSdk(receiver.bodies, ['channel-system', 'third-party-channel'])}`);

  const code = await live.stop();
  check('demo-server stopped cleanly', () => assert.equal(code, 0));
  receiver.close();
  live.finish('demo.js');
}

main().catch((error) => live.giveUp(error.stack));
