// A Node client instrumented with the official OpenTelemetry SDK (W3C propagator, OTLP/HTTP exporter)
// calls a tracetree server (examples/tracecontext-service, exporting with --otlp); both export to one
// receiver here. The server's spans must carry the client's trace id and have the client's span as
// parent; the call the server makes downstream must carry a traceparent the SDK's propagator reads,
// with the server's client span as its parent. Then what the server exported for live requests (a
// remote parent with tracestate, failed outgoing calls, a folded scope, a throw) is compared with the
// SDK's serialization of the same spans, as reference.js compares otel-dump's.
//
//   node client.js PATH-TO-tracecontext-service
'use strict';
const assert = require('node:assert/strict');
const api = require('@opentelemetry/api');
const { TraceState, W3CTraceContextPropagator } = require('@opentelemetry/core');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { BasicTracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http');
const live = require('./live.js');
const { check } = live;

async function main() {
  // The OTLP receiver: every span, from whichever process sent it.
  const receiver = await live.receiver();
  const otlp = receiver.url;

  // Where the tracetree server calls next.
  let downstreamHeaders = null;
  const downstream = await live.listen(async (request, response) => {
    await live.readBody(request);
    if (request.url === '/fail') {  // a failed outgoing call
      response.writeHead(500, { 'Content-Length': '0' });
      response.end();
      return;
    }
    downstreamHeaders = request.headers;
    response.writeHead(200, { 'Content-Length': '0' });
    response.end();
  });

  const line = await live.start(process.argv[2], ['--port=0', `--otlp=${otlp}`, '--otlp-interval=20',
                                                  '--service-name=tracetree-server']);
  const found = /(http:\/\/127\.0\.0\.1:\d+\/\S*)/.exec(line);
  if (!found) live.giveUp(`unexpected first line: ${line}`);
  const serviceUrl = found[1];

  // The client, instrumented as the OpenTelemetry docs show, with the W3C propagator.
  api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'node-client' }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: otlp }))],
  });
  const tracer = provider.getTracer('tracetree-tests');
  // A caller upstream of the client left a tracestate: it must reach the downstream call unchanged.
  const upstream = api.trace.setSpanContext(api.ROOT_CONTEXT, {
    traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    spanId: '00f067aa0ba902b7', traceFlags: api.TraceFlags.SAMPLED, isRemote: true,
    traceState: new TraceState('congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'),
  });
  const clientSpan = tracer.startSpan('POST /test', { kind: api.SpanKind.CLIENT }, upstream);
  const headers = { 'Content-Type': 'application/json' };
  api.propagation.inject(api.trace.setSpan(api.ROOT_CONTEXT, clientSpan), headers);
  const payload = JSON.stringify([{ url: `http://127.0.0.1:${downstream.address().port}/next`, arguments: [] }]);
  const post = (body) => live.request(serviceUrl, { method: 'POST', headers, body });
  const { status } = await post(payload);
  clientSpan.end();
  await provider.forceFlush();

  const client = clientSpan.spanContext();
  // Wait (event-driven) until the server's span and the client's have both arrived.
  await receiver.until(() => receiver.spans().some((s) => s.service === 'node-client') &&
                             receiver.spans().some((s) => s.service === 'tracetree-server' && s.kind === 2));
  const spans = receiver.spans();
  const server = spans.find((s) => s.service === 'tracetree-server' && s.kind === 2);
  const serverCall = spans.find((s) => s.service === 'tracetree-server' && s.kind === 3);
  check('the service answered 200', () => assert.equal(status, 200));
  check('the server span continues the client trace', () => assert.equal(server.traceId, client.traceId));
  check('the server span parent is the client span', () => assert.equal(server.parentSpanId, client.spanId));
  check('the server span: sampled, parent remote (flags 0x301)', () => assert.equal(server.flags, 0x301));
  check('the server span carries the tracestate', () => assert.equal(server.traceState, 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'));
  check('the client span arrived through our receiver', () =>
    assert.ok(spans.some((s) => s.service === 'node-client' && s.spanId === client.spanId)));
  check('the server exported its outgoing call as a client span under its server span', () => {
    assert.ok(serverCall);
    assert.equal(serverCall.traceId, client.traceId);
    assert.equal(serverCall.parentSpanId, server.spanId);
  });
  check('the nested scope is a child span', () =>
    assert.ok(spans.some((s) => s.service === 'tracetree-server' && s.kind === 1 && s.parentSpanId === server.spanId)));
  check('the downstream call carries a traceparent the SDK propagator reads', () => {
    const extracted = api.trace.getSpanContext(new W3CTraceContextPropagator().extract(
      api.ROOT_CONTEXT, downstreamHeaders, api.defaultTextMapGetter));
    assert.ok(extracted);
    assert.equal(extracted.traceId, client.traceId);
    assert.equal(extracted.spanId, serverCall.spanId);
    assert.equal(extracted.traceFlags, api.TraceFlags.SAMPLED);
    assert.equal(extracted.traceState.serialize(), 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7');
  });

  // Live captures for the SDK comparison: three calls, two of them failing (a folded scope, client
  // spans with an error status), then a body the service cannot parse (a throw). Both with a remote
  // parent and a tracestate, which the SDK needs to rebuild the same trace.
  const fail = `http://127.0.0.1:${downstream.address().port}/fail`;
  await post(JSON.stringify([{ url: fail, arguments: [] }, { url: fail, arguments: [] },
                             { url: `http://127.0.0.1:${downstream.address().port}/next`, arguments: [] }]));
  await post('[{"url": ');
  const later = () => receiver.spans().slice(spans.length).filter((s) => s.service === 'tracetree-server');
  const captured = () => later().some((s) => s.kind === 3 && s.status.code === 2) &&
                         (!live.throwsSeen || later().some((s) => s.events.some((e) => e.name === 'exception'))) &&
                         later().some((s) => s.attributes.some((a) => a.key === 'tracetree.count'));
  await receiver.until(captured);
  check('live captures: a failed outgoing call, a throw and a folded scope', () => assert.ok(captured()));
  console.log(`client.js: live captures: ${live.compareWithSdk(receiver.bodies, ['tracetree-server'])}`);

  const code = await live.stop();
  check('the service stopped cleanly', () => assert.equal(code, 0));
  await provider.shutdown();
  receiver.close();
  downstream.close();
  live.finish(`client.js (trace ${client.traceId})`);
}

main().catch((error) => live.giveUp(error.stack));
