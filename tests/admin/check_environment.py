#!/usr/bin/env python3
"""TRACETREE_ADMIN end to end (docs/admin.md): the recorder reads it once when it starts, and any
program with a control file listens as it says, with no code of its own.

    check_environment.py PROGRAM [CASE] [--fork | --no-listener]

PROGRAM (with CASE as its argument) records "env_work", prints "ready" and waits for its standard
input to close: `admin-hosts env-server` (env_server.cpp, which includes admin/server.hpp),
env_control.cpp (control.hpp only, linked with tracetree-runtime, which
holds the listener). With --no-listener, PROGRAM is env_control.cpp header-only, a copy with no
listener compiled in: TRACETREE_ADMIN=127.0.0.1:0 gets one line on stderr that says so and names the
fix, and the program runs on and exits 0; nothing else is checked. With --fork, PROGRAM forks when it reads the line `fork` (env_control.cpp), and:
6. A child forked while four admin calls wait exits through exit() with status 0 (it neither joins the
   parent's threads nor waits for the parent's calls), and the parent answers GET profile after it.

1. TRACETREE_ADMIN=127.0.0.1:0: stderr names the port; GET .../profile there answers 200 with the
   program's scope; a request with a token the listener was not given still works (no token set).
2. TRACETREE_ADMIN=127.0.0.1:0;token=s3cret: 401 without the token, 200 with it; the token is not
   printed.
3. TRACETREE_ADMIN=0.0.0.0:0 (no token, no allow-list): refused with the reason, nothing listens, the
   program runs on.
4. A value with an unknown option: refused, the program runs on.
5. Unset: nothing printed about it.
"""
import os
import re
import select
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


class Lines:
    """A pipe read a line at a time, each within 30 s, without losing what one read brought beyond it."""

    def __init__(self, stream):
        self.fd, self.buffer = stream.fileno(), b""

    def next(self):
        """The next line, or "" when none comes within 30 s (the program hangs or said nothing)."""
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([self.fd], [], [], 30)
            chunk = os.read(self.fd, 65536) if ready else b""
            if not chunk:
                return ""
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode(errors="replace").strip()

    def rest(self):
        while True:
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return self.buffer.decode(errors="replace")
            self.buffer += chunk


def start(value):
    env = dict(os.environ)
    env.pop("TRACETREE_ADMIN", None)
    if value is not None:
        env["TRACETREE_ADMIN"] = value
    command = [sys.argv[1]] + [a for a in sys.argv[2:] if not a.startswith("--")]  # the program and its CASE
    program = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=env)
    program.out, program.err = Lines(program.stdout), Lines(program.stderr)
    ready = program.out.next()  # printed after start-up: the listener's line is out by then
    return program, ready


def finish(program):
    program.stdin.close()
    program.wait(timeout=60)
    return program.returncode, program.err.rest()


def first_line(program):
    """The first line on stderr, or "" when none comes within 30 s (the program said nothing)."""
    return program.err.next()


def get(url, token=None):
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


if "--no-listener" in sys.argv[2:]:
    program, ready = start("127.0.0.1:0")
    line = first_line(program)
    check(ready == "ready" and "TRACETREE_ADMIN is set, but this program has no admin listener" in line
          and "tracetree::runtime" in line and "admin/server.hpp" in line, "no listener compiled in: says so and how: " + line)
    code, rest = finish(program)
    check(code == 0 and "tracetree" not in rest, "said once, exits 0 (%d: %r)" % (code, rest[:200]))
    sys.exit(1 if failures else 0)

# 1.
program, ready = start("127.0.0.1:0")
line = first_line(program)
match = re.search(r"admin listening on (http://127\.0\.0\.1:(\d+)/debug/tracetree)/", line)
check(ready == "ready" and match is not None, "TRACETREE_ADMIN=127.0.0.1:0 says where it listens: " + line)
if match:
    status, body = get(match.group(1) + "/profile")
    check(status == 200 and "env_work" in body, "GET profile answers 200 with the program's scope (%d)" % status)
code, rest = finish(program)
check(code == 0 and "tracetree" not in rest, "exits 0, nothing more said (%d: %r)" % (code, rest[:200]))

# 2.
program, ready = start("127.0.0.1:0;token=s3cret")
line = first_line(program)
match = re.search(r"admin listening on (http://127\.0\.0\.1:(\d+)/debug/tracetree)/", line)
check(match is not None and "s3cret" not in line, "with a token: listens, the token not printed: " + line)
if match:
    check(get(match.group(1) + "/profile")[0] == 401, "no token: 401")
    check(get(match.group(1) + "/profile", "s3cret")[0] == 200, "the token: 200")
check(finish(program)[0] == 0, "exits 0")

# 3. and 4.
for value, reason in (("0.0.0.0:0", "loopback"), ("127.0.0.1:0;colour=red", "not an option")):
    program, ready = start(value)
    line = first_line(program)
    check(reason in line and "no admin listener started" in line and ready == "ready",
          "TRACETREE_ADMIN=%s refused with the reason, the program runs on: %s" % (value, line))
    check(finish(program)[0] == 0, "exits 0")

# 5.
program, ready = start(None)
code, rest = finish(program)
check(code == 0 and ready == "ready" and "TRACETREE_ADMIN" not in rest, "unset: nothing said (%r)" % rest[:200])

# 6.
if "--fork" in sys.argv[2:]:
    program, ready = start("127.0.0.1:0")
    match = re.search(r"admin listening on (http://127\.0\.0\.1:(\d+)/debug/tracetree)/", first_line(program))
    check(match is not None, "listening before the fork")
    if match:
        base = match.group(1)
        # Four calls that wait (max_waiting's default), so that the child is forked while the handler
        # counts them; they are known to wait once a fifth call is refused (503). A probe that is not
        # refused times out at once (while it waits, a call may be refused and asks again).
        def wait_call():  # again when a probe held the place it asked for
            try:
                while get(base + "/trace?pattern=never_called&timeout=120")[0] == 503:
                    pass
            except OSError:  # the listener stopped at the program's exit, the call unanswered
                pass

        waiting = [threading.Thread(target=wait_call) for _ in range(4)]
        for thread in waiting:
            thread.start()
        refused = any(get(base + "/trace?pattern=never_called&timeout=0.001")[0] == 503 for _ in range(5000))
        check(refused, "four calls wait when the program forks")
        program.stdin.write(b"fork\n")
        program.stdin.flush()
        forked = program.out.next()
        child = program.out.next()
        check(forked.startswith("forked ") and child == "child exited 0",
              "a child forked while calls wait exits 0 through exit(): %r, %r" % (forked, child))
        if child == "" and forked.startswith("forked "):  # it hangs: neither it nor its parent is left behind
            os.kill(int(forked.split()[1]), signal.SIGKILL)
            program.out.next()
        status, body = get(base + "/profile")
        check(status == 200 and "env_work" in body, "the parent answers after its child is gone (%d)" % status)
        code, rest = finish(program)  # the waiting calls are cancelled when the listener stops at exit
        check(code == 0, "exits 0 (%d)" % code)
        for thread in waiting:
            thread.join()

print("check_environment: %d failed" % len(failures))
sys.exit(1 if failures else 0)
