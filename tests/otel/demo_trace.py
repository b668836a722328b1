#!/usr/bin/env python3
"""The demo's distributed trace: a client, the demo server, its channel, and an OTLP receiver.

Usage: demo_trace.py --server PATH-TO-demo-server [--mode buggy|fixed] [--jar-scale 0.1] [--min-cost MS]

Starts an OTLP/HTTP (JSON) receiver on the loopback, starts demo-server exporting to it (--otlp), then
acts as the client: it starts a trace, sends GET /send with a W3C traceparent, and records its own
client span. When the server's spans for that trace have arrived (the invocation and the channel
call beneath it), it prints the joined trace and checks it: one trace id, the client's span, the
demo's slow invocation with its folded Tomcat subtree, the channel's span beneath it. Exit 0 when
the trace is whole. Standard library only (tests/otel runs it; so does scripts/demo --otlp).
"""
import argparse
import http.client
import http.server
import json
import os
import re
import secrets
import subprocess
import sys
import threading
import time


class Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), ReceiverHandler)
        self.changed = threading.Condition()
        self.spans = []
        self.requests = 0


class ReceiverHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            request = json.loads(body)
            spans = []
            for resource_spans in request["resourceSpans"]:
                attributes = {a["key"]: a["value"] for a in resource_spans["resource"]["attributes"]}
                service = attributes.get("service.name", {}).get("stringValue", "?")
                for scope_spans in resource_spans["scopeSpans"]:
                    for span in scope_spans["spans"]:
                        spans.append(dict(span, service=service))
            status, answer = 200, b"{}"
        except (ValueError, KeyError, TypeError) as error:
            spans, status, answer = [], 400, json.dumps({"message": str(error)}).encode()
        with self.server.changed:
            self.server.spans.extend(spans)
            self.server.requests += 1
            self.server.changed.notify_all()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def attribute(span, key):
    for a in span.get("attributes", []):
        if a["key"] == key:
            value = a["value"]
            return value.get("stringValue", value.get("intValue"))
    return None


def millis(span):
    return (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e6


def print_tree(spans, out):
    by_id = {s["spanId"]: s for s in spans}
    children = {}
    for s in spans:
        children.setdefault(s.get("parentSpanId"), []).append(s)
    for kids in children.values():
        kids.sort(key=lambda s: (int(s["startTimeUnixNano"]), s["name"]))
    kinds = {1: "internal", 2: "server", 3: "client"}

    def show(span, prefix, last, depth):
        line = "%s%s[%s] %s  %.3f ms  (%s" % (prefix, ("`---" if last else "+---") if depth else "", span["service"],
                                          span["name"], millis(span), kinds.get(span["kind"], span["kind"]))
        count = attribute(span, "tracetree.count")
        if count is not None:
            line += ", %s calls folded: min %.3f ms, max %.3f ms" % (
                count, int(attribute(span, "tracetree.min_ns")) / 1e6, int(attribute(span, "tracetree.max_ns")) / 1e6)
        if span.get("status", {}).get("code") == 2:
            line += ", error: " + span["status"].get("message", "")
        out.write(line + ")\n")
        kids = children.get(span["spanId"], [])
        for i, kid in enumerate(kids):
            show(kid, prefix + (("    " if last else "|   ") if depth else ""), i == len(kids) - 1, depth + 1)

    roots = [s for s in spans if s.get("parentSpanId") not in by_id]
    for root in sorted(roots, key=lambda s: int(s["startTimeUnixNano"])):
        show(root, "", True, 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--mode", default="buggy", choices=["buggy", "fixed"])
    parser.add_argument("--jar-scale", default="0.1")
    parser.add_argument("--min-cost", default="0", help="--otlp-min-cost for the server, in ms")
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()

    receiver = Receiver()
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    otlp = "http://127.0.0.1:%d/v1/traces" % receiver.server_port
    server = subprocess.Popen([args.server, "--mode=" + args.mode, "--port=0", "--channel-port=0", "--admin-port=0",
                               "--jar-scale=" + args.jar_scale, "--otlp=" + otlp, "--otlp-min-cost=" + args.min_cost],
                              stdout=subprocess.PIPE, text=True)
    failures = []
    try:
        line = server.stdout.readline()
        found = re.search(r" app=http://127\.0\.0\.1:(\d+)", line)
        if not found:
            print("demo-server did not start: %r" % line)
            return 1
        print(line.rstrip())
        print("OTLP receiver: " + otlp)

        # The client: a trace of its own, its span around the call, the traceparent on the request.
        trace_id, client_span = secrets.token_hex(16), secrets.token_hex(8)
        traceparent = "00-%s-%s-01" % (trace_id, client_span)
        print("\n$ curl -H 'traceparent: %s' http://127.0.0.1:%s/send" % (traceparent, found.group(1)))
        start = time.time_ns()
        connection = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=30)
        connection.request("GET", "/send", headers={"traceparent": traceparent, "tracestate": "client=demo"})
        response = connection.getresponse()
        response.read()
        end = time.time_ns()
        connection.close()
        print("HTTP %d in %.1f ms (the client's measure)" % (response.status, (end - start) / 1e6))
        with receiver.changed:
            receiver.spans.append({"traceId": trace_id, "spanId": client_span, "name": "GET /send", "kind": 3,
                                   "startTimeUnixNano": str(start), "endTimeUnixNano": str(end), "service": "client",
                                   "status": {"code": 0}, "attributes": []})

        def whole():
            mine = [s for s in receiver.spans if s["traceId"] == trace_id]
            return (any(s["service"] == "channel-system" and s["kind"] == 2 for s in mine) and
                    any(s["service"] == "third-party-channel" for s in mine))

        with receiver.changed:
            arrived = receiver.changed.wait_for(whole, timeout=args.timeout)
            spans = [s for s in receiver.spans if s["traceId"] == trace_id]
            others = len({s["traceId"] for s in receiver.spans}) - 1
        print("\nThe joined trace %s (%d spans; the receiver also holds %d other trace(s)):\n" % (trace_id, len(spans), others))
        print_tree(spans, sys.stdout)

        def check(condition, what):
            if not condition:
                failures.append(what)
                print("FAILED: " + what)

        check(arrived, "the server's spans arrived within %g s" % args.timeout)
        check(response.status == 200, "GET /send answered 200")
        app = [s for s in spans if s["service"] == "channel-system" and s["kind"] == 2]
        check(len(app) == 1 and app[0]["parentSpanId"] == client_span, "the demo's invocation is a child of the client span")
        check(len(app) == 1 and app[0]["name"].startswith("demo::Http11Processor::service")
              or len(app) == 1 and "Http11Processor::service" in app[0]["name"], "the invocation is Http11Processor::service")
        app_id = app[0]["spanId"] if app else None
        calls = [s for s in spans if s["service"] == "channel-system" and s["kind"] == 3]
        check(len(calls) == 1 and calls[0]["parentSpanId"] == app_id, "the channel call is a client span of the invocation")
        channel = [s for s in spans if s["service"] == "third-party-channel" and s["kind"] == 2]
        check(len(channel) == 1 and calls and channel[0]["parentSpanId"] == calls[0]["spanId"],
              "the channel's span is beneath the demo's call to it")
        check(all(s.get("traceState") == "client=demo" for s in spans if s["service"] != "client"),
              "every server span carries the client's tracestate")
        if args.mode == "buggy":
            folded = [s for s in spans if "createZipEntry" in s["name"]]
            check(len(folded) == 1 and int(attribute(folded[0], "tracetree.count") or 0) > 1,
                  "the Tomcat jar rescan is one folded span (createZipEntry, count > 1)")
        check(len({s["traceId"] for s in spans}) == 1, "one trace id")
    finally:
        server.terminate()
        server.wait(timeout=60)
        receiver.shutdown()
    print("\n%s" % ("the trace is whole" if not failures else "%d check(s) failed" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
