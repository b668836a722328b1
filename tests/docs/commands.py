#!/usr/bin/env python3
"""Runs every curl command that README.md and docs/*.md address to the demo server, as written.

Usage: commands.py DEMO-SERVER [ROOT]

A doc's ports 7744/7745/7746 (and 17744/17745/17746, the ports docs/admin.md's session used) become
the ports of a demo-server started here on ephemeral ports; nothing else in a command changes. The
commands of one file run in the order they are written (a recorder started by one is read by the
next), against a server of their own, while a client sends /send every 20 ms so that waiting
endpoints see calls (cache TTL 1 ms and gc every 20 ms: every /send walks the jar, as after a quiet
spell). A command passes when curl exits 0 and the server answers the status the doc shows after
it (`HTTP/1.1 405 ...` or a body starting `400 Bad Request`), or 200 when the doc shows none.
Commands for other servers (XRay's demo, the OTLP receiver) are listed as not run, with the reason.
"""
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

DOC_PORTS = {"7744": "app", "7745": "channel", "7746": "admin",
             "17744": "app", "17745": "channel", "17746": "admin"}
FENCE = re.compile(r"^\s*(```+|~~~+)")
CURL = re.compile(r"^\s*(?:\$\s+)?(curl\s.*)$")
STATUS_LINE = re.compile(r"^HTTP/1\.1 (\d{3}) ")
STATUS_BODY = re.compile(r"^(\d{3}) [A-Z][a-zA-Z ]+: ")
MARK = "tracetree-docs-status="


def commands(path):
    """(line number, command, expected status or None) for each curl line in a fenced block."""
    found = []
    lines = open(path, encoding="utf-8").read().split("\n")
    fence = None
    for i, line in enumerate(lines):
        match = FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker
            elif marker.startswith(fence[0]) and len(marker) >= len(fence) and line.strip() == marker:
                fence = None
            continue
        if fence is None:
            continue
        curl = CURL.match(line)
        if not curl or "127.0.0.1" not in line:
            continue
        expected = None
        for output in lines[i + 1:]:  # the output the doc shows, up to the next command or fence
            if output.lstrip().startswith("$ ") or FENCE.match(output):
                break
            status = STATUS_LINE.match(output) or STATUS_BODY.match(output)
            if status:
                expected = int(status.group(1))
                break
        found.append((i + 1, curl.group(1).strip(), expected))
    return found


def start_server(server, workdir):
    log = open(os.path.join(workdir, "server.log"), "w+")
    process = subprocess.Popen([server, "--port=0", "--channel-port=0", "--admin-port=0",
                                "--cache-ttl=1ms", "--gc-period=20ms"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        log.seek(0)
        text = log.read()
        ports = {name: re.search(name + r"=http://127\.0\.0\.1:(\d+)", text) for name in ("app", "channel", "admin")}
        if all(ports.values()):
            return process, {name: match.group(1) for name, match in ports.items()}
        if process.poll() is not None:
            break
        time.sleep(0.05)  # the server's start-up line, not an event of the test
    process.kill()
    log.seek(0)
    raise SystemExit("demo-server did not start:\n" + log.read())


def traffic(port, stop):
    while not stop.is_set():
        try:
            urllib.request.urlopen("http://127.0.0.1:%s/send" % port, timeout=10).read()
        except OSError:
            pass
        stop.wait(0.02)


def run(command, ports, workdir):
    """The command with the doc's ports replaced, and curl asked to print the status on stderr."""
    def port(match):
        return "127.0.0.1:" + ports[DOC_PORTS[match.group(1)]]
    text = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: port(m) if m.group(1) in DOC_PORTS else m.group(0), command)
    shown = text
    text = text.replace("curl ", "curl -w '%%{stderr}%s%%{http_code}\\n' " % MARK, 1)  # a body may go to a file
    result = subprocess.run(["bash", "-c", text], cwd=workdir, capture_output=True, text=True, timeout=120)
    status = None
    for line in result.stderr.splitlines():
        if line.startswith(MARK):
            status = int(line[len(MARK):])
    return shown, result, status


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    server = os.path.abspath(sys.argv[1])
    root = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    docs = [os.path.join(root, "README.md")] + sorted(
        os.path.join(root, "docs", name) for name in os.listdir(os.path.join(root, "docs")) if name.endswith(".md"))
    failures = ran = 0
    for doc in docs:
        found = commands(doc)
        name = os.path.relpath(doc, root)
        ours = [c for c in found if all(p in DOC_PORTS for p in re.findall(r"127\.0\.0\.1:(\d+)", c[1]))]
        for line, command, _ in found:
            if (line, command, _) not in ours:
                print("%s:%d: not run (another server than demo-server's): %s" % (name, line, command))
        if not ours:
            continue
        with tempfile.TemporaryDirectory() as workdir:
            process, ports = start_server(server, workdir)
            stop = threading.Event()
            client = threading.Thread(target=traffic, args=(ports["app"], stop))
            client.start()
            try:
                for line, command, expected in ours:
                    needed = [f for f in re.findall(r"'@([^']+)'", command) if not os.path.exists(os.path.join(workdir, f))]
                    if needed:
                        print("%s:%d: not run (needs %s, which the doc's script writes): %s" % (name, line, needed[0], command))
                        continue
                    ran += 1
                    shown, result, status = run(command, ports, workdir)
                    want = expected if expected is not None else 200
                    own_format = re.search(r"(^|\s)(-w|--write-out)\s", command) is not None  # it replaces ours
                    ok = result.returncode == 0 and (status == want or (own_format and status is None))
                    print("%s:%d: %s: %s (status %s, want %d)" % (name, line, "ok" if ok else "FAILED", shown, status, want))
                    if not ok:
                        failures += 1
                        print(result.stdout[-2000:] + result.stderr[-2000:])
            finally:
                stop.set()
                client.join()
                process.terminate()
                process.wait(timeout=30)
    print("docs commands: %d run, %d failed" % (ran, failures))
    if ran == 0:
        print("no command found: the extraction is broken")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
