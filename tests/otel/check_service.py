#!/usr/bin/env python3
"""Checks examples/tracecontext-service the way the W3C Trace Context harness does.

Usage: check_service.py PATH-TO-tracecontext-service

Starts the service on an ephemeral loopback port and a callback server beside it, then for each case
of the specification's test list (header name casing, illegal characters, wrong lengths, version ff,
future versions, duplicate headers, tracestate limits and grammar, several callbacks) POSTs a request
with the case's headers and checks the traceparent and tracestate of the calls the service made
back. The service makes its calls before it answers, so no case waits for anything but the answer.
Standard library only.
"""
import http.client
import http.server
import json
import re
import subprocess
import sys
import threading

TRACE_ID = "12345678901234567890123456789012"
VALID = "00-12345678901234567890123456789012-1234567890123456-01"
VALID_00 = "00-12345678901234567890123456789012-1234567890123456-00"
TRACEPARENT_RE = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


class Callbacks(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), CallbackHandler)
        self.lock = threading.Lock()
        self.received = {}  # path -> (headers as a list of pairs, body)


class CallbackHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with self.server.lock:
            self.server.received[self.path] = (list(self.headers.items()), body)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class Harness:
    def __init__(self, service_port, callbacks):
        self.service_port = service_port
        self.callbacks = callbacks
        self.counter = 0

    def call(self, headers, count=1, body=None):
        """POSTs to the service; returns the service's status and, per callback, (headers, body)."""
        paths = []
        elements = []
        for _ in range(count):
            self.counter += 1
            path = "/callback/%d" % self.counter
            paths.append(path)
            elements.append({"url": "http://127.0.0.1:%d%s" % (self.callbacks.server_port, path),
                             "arguments": [{"case": self.counter, "nested": {"a": [1, 2.5e3, True, None, "x\"y"]}}]})
        payload = body if body is not None else json.dumps(elements).encode()
        connection = http.client.HTTPConnection("127.0.0.1", self.service_port, timeout=20)
        connection.putrequest("POST", "/test", skip_accept_encoding=True)
        for name, value in headers:
            connection.putheader(name, value)
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(len(payload)))
        connection.endheaders(payload)
        response = connection.getresponse()
        response.read()
        connection.close()
        with self.callbacks.lock:
            got = [self.callbacks.received.pop(path, None) for path in paths]
        return response.status, got, elements


def headers_named(headers, name):
    return [value for key, value in headers if key.lower() == name]


def parse_tracestate(headers):
    members = {}
    for value in headers_named(headers, "tracestate"):
        for member in value.split(","):
            member = member.strip(" \t")
            if member:
                key, _, val = member.partition("=")
                members[key] = val
    return members


failures = []
passed = 0


def check(condition, what):
    global passed
    if condition:
        passed += 1
    else:
        failures.append(what)
        print("FAILED: " + what, flush=True)


def context_of(harness, headers, what):
    status, got, _ = harness.call(headers)
    check(status == 200, "%s: the service answered %s" % (what, status))
    if got[0] is None:
        check(False, "%s: the service made no callback" % what)
        return None, {}
    received = got[0][0]
    parents = headers_named(received, "traceparent")
    check(len(parents) == 1, "%s: one traceparent, got %r" % (what, parents))
    match = TRACEPARENT_RE.match(parents[0]) if parents else None
    check(match is not None, "%s: a valid traceparent, got %r" % (what, parents))
    if not match:
        return None, {}
    check(match.group(1) == "00", "%s: version 00 sent" % what)
    check(match.group(2) != "0" * 32 and match.group(3) != "0" * 16, "%s: no all-zero id" % what)
    check(int(match.group(4), 16) & 0xFE == 0, "%s: unknown flags cleared" % what)
    return match, parse_tracestate(received)


def run_cases(harness):
    def same_trace(what, headers):
        match, _ = context_of(harness, headers, what)
        check(match is not None and match.group(2) == TRACE_ID, what + ": the caller's trace id")
        check(match is not None and match.group(3) != "1234567890123456", what + ": a new parent id")
        return match

    def new_trace(what, headers, old=TRACE_ID):
        match, state = context_of(harness, headers, what)
        check(match is not None and match.group(2) != old, what + ": a new trace id")
        return match, state

    # traceparent
    new_trace("no headers", [])
    same_trace("traceparent, no tracestate", [("traceparent", VALID)])
    match = same_trace("sampled flag kept", [("traceparent", VALID)])
    check(match is not None and match.group(4) == "01", "sampled flag kept: 01")
    match = same_trace("unsampled flag kept", [("traceparent", VALID_00)])
    check(match is not None and match.group(4) == "00", "unsampled flag kept: 00")
    new_trace("duplicated traceparent", [("traceparent", VALID.replace("012-", "011-")), ("traceparent", VALID)])
    for name in ("trace-parent", "trace.parent"):
        new_trace("header name " + name, [(name, VALID)])
    for name in ("TraceParent", "TrAcEpArEnT", "TRACEPARENT"):
        same_trace("header name casing " + name, [(name, VALID)])
    for value in (VALID + ".", VALID + "-what-the-future-will-be-like"):
        new_trace("version 00 with extra text %r" % value[50:], [("traceparent", value)])
    for value in ("cc" + VALID[2:], "cc" + VALID[2:] + "-what-the-future-will-be-like"):
        match = same_trace("future version %r" % value[50:], [("traceparent", value)])
    new_trace("future version without a dash", [("traceparent", "cc" + VALID[2:] + ".what-the-future-will-be-like")])
    invalid = {
        "version ff": "ff" + VALID[2:],
        "version .0": ".0" + VALID[2:],
        "version 0.": "0." + VALID[2:],
        "version too long 000": "0" + VALID,
        "version too long 0000": "00" + VALID,
        "version too short": VALID[1:],
        "trace id all zero": "00-" + "0" * 32 + "-1234567890123456-01",
        "trace id illegal first": "00-." + TRACE_ID[1:] + "-1234567890123456-01",
        "trace id illegal last": "00-" + TRACE_ID[:-1] + ".-1234567890123456-01",
        "trace id uppercase": "00-" + "ABCDEF" + TRACE_ID[6:] + "-1234567890123456-01",
        "trace id too long": "00-" + TRACE_ID + "3-1234567890123456-01",
        "trace id too short": "00-" + TRACE_ID[:-1] + "-1234567890123456-01",
        "parent id all zero": "00-" + TRACE_ID + "-0000000000000000-01",
        "parent id illegal first": "00-" + TRACE_ID + "-.234567890123456-01",
        "parent id illegal last": "00-" + TRACE_ID + "-123456789012345.-01",
        "parent id too long": "00-" + TRACE_ID + "-12345678901234567-01",
        "parent id too short": "00-" + TRACE_ID + "-123456789012345-01",
        "flags illegal first": "00-" + TRACE_ID + "-1234567890123456-.0",
        "flags illegal last": "00-" + TRACE_ID + "-1234567890123456-0.",
        "flags too long": "00-" + TRACE_ID + "-1234567890123456-001",
        "flags too short": "00-" + TRACE_ID + "-1234567890123456-1",
    }
    for what, value in invalid.items():
        new_trace(what, [("traceparent", value)])
    for value in (" " + VALID, "\t" + VALID, VALID + " ", VALID + "\t", "\t " + VALID + " \t"):
        same_trace("OWS around traceparent %r" % value.replace(VALID, "..."), [("traceparent", value)])

    # tracestate
    _, state1 = new_trace("tracestate without traceparent", [("tracestate", "foo=1")])
    _, state2 = new_trace("tracestate without traceparent (2)", [("tracestate", "foo=1,bar=2")])
    check(state1 == {} and state2 == {}, "tracestate without traceparent: discarded")

    def tracestate_of(what, values):
        match, state = context_of(harness, [("traceparent", VALID_00)] + [("tracestate", v) for v in values], what)
        check(match is not None and match.group(2) == TRACE_ID, what + ": the caller's trace id")
        return state

    state = tracestate_of("tracestate inherited", ["foo=1,bar=2"])
    check(state == {"foo": "1", "bar": "2"}, "tracestate inherited: %r" % state)
    for name in ("trace-state", "trace.state"):
        _, state = context_of(harness, [("traceparent", VALID_00), (name, "foo=1")], "header name " + name)
        check("foo" not in state, "header name %s: discarded" % name)
    for name in ("TraceState", "TrAcEsTaTe", "TRACESTATE"):
        _, state = context_of(harness, [("traceparent", VALID_00), (name, "foo=1")], "header name casing " + name)
        check(state.get("foo") == "1", "header name casing %s: inherited" % name)
    _, got, _ = harness.call([("traceparent", VALID_00), ("tracestate", "")])
    check(got[0] is not None and all(v != "" for v in headers_named(got[0][0], "tracestate")),
          "empty tracestate: not sent empty")
    check(tracestate_of("empty then foo", ["", "foo=1"]) == {"foo": "1"}, "empty then foo: foo=1")
    check(tracestate_of("foo then empty", ["foo=1", ""]) == {"foo": "1"}, "foo then empty: foo=1")
    _, got, _ = harness.call([("traceparent", VALID_00), ("tracestate", "foo=1,bar=2"), ("tracestate", "rojo=1,congo=2"),
                              ("tracestate", "baz=3")])
    joined = ",".join(headers_named(got[0][0], "tracestate")) if got[0] else ""
    check(joined == "foo=1,bar=2,rojo=1,congo=2,baz=3", "several tracestate headers, in order: %r" % joined)
    # A repeated key may be passed on or dropped (the harness: either), never the whole list.
    for values in (["foo=1,foo=1"], ["foo=1,foo=2"], ["foo=1", "foo=1"], ["foo=1", "foo=2"], ["foo=1,bar=2,foo=3"]):
        state = tracestate_of("duplicated keys %r" % values, values)
        check(state.get("foo") in ("1", "2", "3") and state.get("bar", "2") == "2",
              "duplicated keys %r: passed on (%r)" % (values, state))
    key = "abcdefghijklmnopqrstuvwxyz0123456789_-*/"
    value = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in ",=")
    for k in (key, key + "@a-z0-9_-*/"):
        state = tracestate_of("all allowed characters", [k + "=" + value])
        check(state.get(k) == value, "all allowed characters in %r: inherited" % k[-12:])
    for values in (["foo=1 \t , \t bar=2, \t baz=3"], ["foo=1\t \t,\t \tbar=2,\t \tbaz=3"]):
        check(tracestate_of("OWS in tracestate", values) == {"foo": "1", "bar": "2", "baz": "3"}, "OWS in %r" % values)
    for v in (" foo=1", "\tfoo=1", "foo=1 ", "foo=1\t", "\t foo=1 \t"):
        check(tracestate_of("OWS around tracestate", [v]) == {"foo": "1"}, "OWS around tracestate %r" % v)
    for bad in ("foo =1", "FOO=1", "foo.bar=1"):
        check(tracestate_of("illegal key " + bad, [bad]) == {}, "illegal key %r: discarded" % bad)
    # key = (lcalpha / DIGIT) 0*255(keychar), '@' a keychar anywhere but first.
    for good, key in (("foo@=1,bar=2", "foo@"), ("foo@@bar=1,bar=2", "foo@@bar"), ("foo@bar@baz=1,bar=2", "foo@bar@baz"),
                      ("0foo@0vendor=1,bar=2", "0foo@0vendor")):
        state = tracestate_of("vendor format " + good, [good])
        check(state.get(key) == "1" and state.get("bar") == "2", "vendor format %r: inherited (%r)" % (good, state))
    check("bar" not in tracestate_of("key starting with @", ["@foo=1,bar=2"]), "key starting with @: discarded")
    members = ["bar%02d=%02d" % (i, i) for i in range(1, 34)]
    lists = [",".join(members[0:10]), ",".join(members[10:20]), ",".join(members[20:30])]
    state = tracestate_of("32 members", lists + [",".join(members[30:32])])
    check(len(state) == 32 and state.get("bar01") == "01", "32 members: inherited (%d)" % len(state))
    check(tracestate_of("33 members", lists + [",".join(members[30:33])]) == {}, "33 members: discarded")
    # 256 characters in all, wherever the '@' is (Level 1's 241 + 14 split is gone).
    limits = [("z" * 256 + "=1", True), ("z" * 257 + "=1", False), ("t" * 241 + "@" + "v" * 14 + "=1", True),
              ("t" * 242 + "@v=1", True), ("t@" + "v" * 15 + "=1", True), ("t" * 250 + "@" + "v" * 6 + "=1", False)]
    for member, kept in limits:
        state = tracestate_of("key length", ["foo=1", member])
        check(("foo" in state) == kept, "key length %d (%s): %s" % (len(member) - 2, member[:3], "kept" if kept else "discarded"))
    for bad in ("foo=bar=baz", "foo=,bar=3"):
        state = tracestate_of("illegal value " + bad, [bad])
        check("foo" not in state and "bar" not in state, "illegal value %r: discarded" % bad)

    # several callbacks
    for what, headers, expect_trace in (("valid traceparent", [("traceparent", VALID)], True),
                                        ("no traceparent", [], False),
                                        ("illegal traceparent", [("traceparent", "00-" + "0" * 32 + "-1234567890123456-01")], False)):
        status, got, elements = harness.call(headers, count=3)
        check(status == 200 and all(g is not None for g in got), "three callbacks (%s): all made" % what)
        if not all(g is not None for g in got):
            continue
        ids = [TRACEPARENT_RE.match(headers_named(g[0], "traceparent")[0]) for g in got]
        trace_ids = {m.group(2) for m in ids}
        check(len(trace_ids) == 1, "three callbacks (%s): one trace id" % what)
        check((TRACE_ID in trace_ids) == expect_trace and "0" * 32 not in trace_ids, "three callbacks (%s): trace id" % what)
        check(len({m.group(3) for m in ids}) == 3, "three callbacks (%s): three parent ids" % what)
        check(all(json.loads(g[1]) == e["arguments"] for g, e in zip(got, elements)),
              "three callbacks (%s): arguments posted as the body" % what)

    # what the harness never sends, answered without a crash
    for what, body, status in (("not JSON", b"{oops", 400), ("not an array", b"{}", 400),
                               ("an element without url", b'[{"arguments":[]}]', 400),
                               ("deep nesting", b'[{"url":"http://127.0.0.1:1/","arguments":' + b"[" * 100 + b"]" * 100 + b"}]", 400),
                               ("a url that is not http", b'[{"url":"https://127.0.0.1/x","arguments":[]}]', 200),
                               ("an empty array", b"[]", 200)):
        got_status, _, _ = harness.call([("traceparent", VALID)], count=0, body=body)
        check(got_status == status, "%s: answered %d, expected %d" % (what, got_status, status))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    service = subprocess.Popen([sys.argv[1], "--port=0"], stdout=subprocess.PIPE, text=True)
    try:
        line = service.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not found:
            print("the service did not start: %r" % line)
            return 1
        callbacks = Callbacks()
        threading.Thread(target=callbacks.serve_forever, daemon=True).start()
        run_cases(Harness(int(found.group(1)), callbacks))
        callbacks.shutdown()
    finally:
        service.terminate()
        service.wait(timeout=30)
    check(service.returncode == 0, "the service stopped cleanly on SIGTERM (exit %s)" % service.returncode)
    print("%d passed, %d failed" % (passed, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
