#!/usr/bin/env python3
"""TRACETREE_ADMIN end to end (docs/admin.md): the recorder reads it once when it starts, and any
program with a control file listens as it says, with no code of its own.

    check_environment.py PROGRAM [--fork]

PROGRAM records "env_work", prints "ready" and waits for its standard input to close: env_server.cpp
(includes admin_server.hpp), env_control.cpp (control.hpp only; header-only, and with the runtime
compiled once). With --fork, PROGRAM also takes the argument `fork` (env_control.cpp), and:
6. A child forked while the listener runs exits through exit() with status 0 (it neither joins the
   parent's threads nor waits for its calls), and the parent answers GET profile after it.

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
import subprocess
import sys
import urllib.error
import urllib.request

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        failures.append(what)


def start(value, args=()):
    env = dict(os.environ)
    env.pop("TRACETREE_ADMIN", None)
    if value is not None:
        env["TRACETREE_ADMIN"] = value
    program = subprocess.Popen([sys.argv[1]] + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, text=True)
    ready = next_line(program.stdout)  # printed after start-up: the listener's line is out by then
    return program, ready


def next_line(stream):
    """The next line of `stream`, or "" when none comes within 30 s (the program hangs or said nothing)."""
    ready, _, _ = select.select([stream], [], [], 30)
    return stream.readline().strip() if ready else ""


def finish(program):
    program.stdin.close()
    program.wait(timeout=60)
    return program.returncode, program.stderr.read()


def first_line(program):
    """The first line on stderr, or "" when none comes within 30 s (the program said nothing)."""
    return next_line(program.stderr)


def get(url, token=None):
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


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
    program, child = start("127.0.0.1:0", ["fork"])
    line = first_line(program)
    match = re.search(r"admin listening on (http://127\.0\.0\.1:(\d+)/debug/tracetree)/", line)
    ready = program.stdout.readline().strip() if child else ""  # both lines came in one write: no select
    check(child == "child exited 0" and ready == "ready", "a forked child exits 0 through exit(): %r, %r" % (child, ready))
    if match:
        status, body = get(match.group(1) + "/profile")
        check(status == 200 and "env_work" in body, "the parent answers after its child is gone (%d)" % status)
    if ready == "ready":
        check(finish(program)[0] == 0, "exits 0")
    else:
        program.kill()

print("check_environment: %d failed" % len(failures))
sys.exit(1 if failures else 0)
