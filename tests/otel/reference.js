// tracetree's OTLP/JSON against the official OpenTelemetry JavaScript SDK (@opentelemetry/sdk-trace-base
// spans, serialized by @opentelemetry/otlp-transformer's JsonTraceSerializer, what
// @opentelemetry/exporter-trace-otlp-http sends). For each span otel-dump prints, the SDK makes an
// equivalent one (name, kind, parent, times, attributes, events, status), and the two serializations
// must agree on field names and their order, id and timestamp encodings and enum values.
//
//   node reference.js PATH-TO-otel-dump
// client.js and demo.js compare live captures the same way (live.js: require('./reference.js').compare(body, label)).
'use strict';
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const api = require('@opentelemetry/api');
const { TraceState } = require('@opentelemetry/core');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { JsonTraceSerializer } = require('@opentelemetry/otlp-transformer');

let checks = 0;
let label = '';  // the body being compared, in failure messages
function transformerVersion() {
  const file = require('node:path').join(__dirname, 'node_modules/@opentelemetry/otlp-transformer/package.json');
  return JSON.parse(require('node:fs').readFileSync(file, 'utf8')).version;
}
function check(what, fn) {
  try {
    fn();
    checks++;
  } catch (error) {
    console.error(`FAILED: ${label}${what}\n${error.message}`);
    process.exitCode = 1;
  }
}

function hrTime(nanos) {
  const n = BigInt(nanos);
  return [Number(n / 1000000000n), Number(n % 1000000000n)];
}
function plain(attributes) {
  const out = {};
  for (const { key, value } of attributes) {
    if ('stringValue' in value) out[key] = value.stringValue;
    else if ('intValue' in value) out[key] = Number(value.intValue);
    else if ('boolValue' in value) out[key] = value.boolValue;
    else if ('doubleValue' in value) out[key] = value.doubleValue;
  }
  return out;
}

// Compares one ExportTraceServiceRequest of ours (one resource, one scope) with the SDK's for the same spans.
function compare(ours, name) {
  label = name ? `${name}: ` : '';
  const ourSpans = ours.resourceSpans[0].scopeSpans[0].spans;
  // ---- the same spans, made by the SDK ----
  const resource = {};
  for (const { key, value } of ours.resourceSpans[0].resource.attributes) resource[key] = value.stringValue;
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes(resource),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const scope = ours.resourceSpans[0].scopeSpans[0].scope;
  const tracer = provider.getTracer(scope.name, scope.version);
  const sdkSpanOf = new Map();  // our span id -> the SDK's span
  for (const span of ourSpans) {
    let parent;
    if (sdkSpanOf.has(span.parentSpanId)) {
      parent = api.trace.setSpan(api.ROOT_CONTEXT, sdkSpanOf.get(span.parentSpanId));
    } else {
      assert.ok(span.parentSpanId, 'only the invocation has a remote parent');
      parent = api.trace.setSpanContext(api.ROOT_CONTEXT, {
        traceId: span.traceId, spanId: span.parentSpanId, traceFlags: span.flags & 0xff, isRemote: true,
        traceState: new TraceState(span.traceState),
      });
    }
    const sdkSpan = tracer.startSpan(span.name, {
      kind: [api.SpanKind.INTERNAL, api.SpanKind.INTERNAL, api.SpanKind.SERVER, api.SpanKind.CLIENT][span.kind],
      startTime: hrTime(span.startTimeUnixNano),
      attributes: plain(span.attributes),
    }, parent);
    for (const event of span.events) sdkSpan.addEvent(event.name, plain(event.attributes), hrTime(event.timeUnixNano));
    if (span.status.code !== 0) sdkSpan.setStatus({ code: span.status.code, message: span.status.message });
    sdkSpanOf.set(span.spanId, sdkSpan);
  }
  for (const span of [...ourSpans].reverse()) sdkSpanOf.get(span.spanId).end(hrTime(span.endTimeUnixNano));
  const theirs = JSON.parse(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(exporter.getFinishedSpans())));
  const theirSpans = theirs.resourceSpans[0].scopeSpans[0].spans;
  // Each of our spans and the SDK's made from it, by id: names repeat in live captures.
  const theirById = new Map(theirSpans.map((span) => [span.spanId, span]));
  const theirOf = (span) => theirById.get(sdkSpanOf.get(span.spanId).spanContext().spanId);

  // ---- the comparison ----
  const keys = (object) => Object.keys(object);
  check('envelope: the same field names, in order', () => {
    assert.deepEqual(keys(ours), keys(theirs));
    assert.deepEqual(keys(ours.resourceSpans[0]), keys(theirs.resourceSpans[0]));
    assert.deepEqual(keys(ours.resourceSpans[0].resource), keys(theirs.resourceSpans[0].resource));
    assert.deepEqual(keys(ours.resourceSpans[0].scopeSpans[0]), keys(theirs.resourceSpans[0].scopeSpans[0]));
    assert.deepEqual(ours.resourceSpans[0].scopeSpans[0].scope, theirs.resourceSpans[0].scopeSpans[0].scope);
  });
  check('resource: the same attributes', () => {
    assert.deepEqual(ours.resourceSpans[0].resource, theirs.resourceSpans[0].resource);
  });
  check('the same number of spans', () => assert.equal(ourSpans.length, theirSpans.length));

  const ourIdOf = new Map();  // the SDK's span id -> ours
  for (const span of ourSpans) ourIdOf.set(sdkSpanOf.get(span.spanId).spanContext().spanId, span.spanId);
  for (const our of ourSpans) {
    const their = theirOf(our);
    const what = `span '${our.name}'`;
    check(`${what}: made by the SDK`, () => assert.ok(their));
    if (!their) continue;
    check(`${what}: the same field names, in order`, () => assert.deepEqual(keys(our), keys(their)));
    check(`${what}: ids as lowercase hex`, () => {
      assert.match(our.traceId, /^[0-9a-f]{32}$/);
      assert.match(our.spanId, /^[0-9a-f]{16}$/);
      assert.match(their.spanId, /^[0-9a-f]{16}$/);
      assert.equal(our.traceId, their.traceId);
    });
    check(`${what}: the same parent`, () => {
      assert.equal(ourIdOf.get(their.parentSpanId) ?? their.parentSpanId, our.parentSpanId);
    });
    check(`${what}: timestamps as decimal strings, the same values`, () => {
      for (const field of ['startTimeUnixNano', 'endTimeUnixNano']) {
        assert.equal(typeof our[field], 'string');
        assert.equal(our[field], their[field]);
      }
    });
    check(`${what}: enums as integers, the same values`, () => {
      assert.equal(our.kind, their.kind);
      assert.deepEqual(our.status, their.status);
      assert.equal(our.flags, their.flags);
      assert.equal(our.traceState, their.traceState);
    });
    check(`${what}: attributes`, () => {
      assert.equal(our.attributes.length, their.attributes.length);
      our.attributes.forEach((attribute, i) => {
        const other = their.attributes[i];
        assert.equal(attribute.key, other.key);
        assert.deepEqual(keys(attribute), keys(other));
        assert.deepEqual(keys(attribute.value), keys(other.value));
        if ('intValue' in attribute.value) {
          // The proto3 JSON mapping writes 64-bit integers as strings (the SDK writes numbers; the
          // spec has receivers take both): the same value either way.
          assert.match(attribute.value.intValue, /^[0-9]+$/);
          assert.equal(String(other.value.intValue), attribute.value.intValue);
        } else {
          assert.deepEqual(attribute.value, other.value);
        }
      });
    });
    check(`${what}: events`, () => {
      assert.equal(our.events.length, their.events.length);
      our.events.forEach((event, i) => {
        const other = their.events[i];
        assert.deepEqual(keys(event), keys(other));
        assert.equal(event.name, other.name);
        assert.equal(event.timeUnixNano, other.timeUnixNano);
        assert.deepEqual(plain(event.attributes), plain(other.attributes));
      });
    });
  }
}

function summary() {
  return `${checks} checks against @opentelemetry/otlp-transformer ${transformerVersion()}` +
         (process.exitCode ? ', with failures' : ', all agree');
}
module.exports = { compare, summary };

if (require.main === module) {
  compare(JSON.parse(execFileSync(process.argv[2]).toString()), '');
  console.log(`reference.js: ${summary()}`);
}
