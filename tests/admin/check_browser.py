#!/usr/bin/env python3
"""The admin index page in headless Chromium, driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: standard library only, no port opened). Starts `admin-hosts serve` (the handler
on an ephemeral loopback port, with a worker calling shop::handle_request every 10 ms), then checks:
the page renders with nothing loaded from elsewhere and no console error (CSP violations included);
the inline flame graph is drawn; every link answers 200 (JSON ones parse); the trace form starts a
trace that comes back as a page; the recorder and reset forms work by POST from the browser (whose
Origin header must pass the check). Exit 77 (a skip for meson) when Chromium is not installed.
ADMIN_SCREENSHOT=path.png keeps a screenshot of the index page.

Usage: check_browser.py PROGRAM [ARGUMENT...]  (admin-hosts serve)"""
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

TIMEOUT = 60  # seconds for any one step


class Browser:
    def __init__(self, chromium, profile, log):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # Chromium reads commands on fd 3 and writes answers on fd 4.
        script = 'exec "$0" "$@" 3<&%d 4>&%d %d<&- %d>&-' % (to_browser_r, from_browser_w, to_browser_r, from_browser_w)
        self.process = subprocess.Popen(
            ["/bin/sh", "-c", script, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--disable-default-apps", "--hide-scrollbars", "--window-size=1300,1000",
             "--user-data-dir=" + profile, "--remote-debugging-pipe", "about:blank"],
            pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []
        self.session = None

    def close(self):
        try:
            self.send("Browser.close")
            self.process.wait(timeout=20)
        except Exception:
            self.process.kill()
            self.process.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.next_id

    def read(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise TimeoutError("no message from chromium in time")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise EOFError("chromium closed its pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, params=None, page=True):
        number = self.send(method, params, self.session if page else None)
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self.read(deadline)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError("%s: %s" % (method, message["error"]))
                return message["result"]
            self.events.append(message)

    def wait_event(self, method):
        deadline = time.monotonic() + TIMEOUT
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self.read(deadline))

    def open_page(self):
        target = self.call("Target.createTarget", {"url": "about:blank"}, page=False)["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True}, page=False)["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.call(domain + ".enable")

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError("%s: %s" % (expression, result["exceptionDetails"]))
        return result["result"].get("value")

    def loaded(self):
        """Waits for the page load; returns (document status, URLs requested, console errors) since the last call."""
        self.wait_event("Page.loadEventFired")
        self.call("Runtime.evaluate", {"expression": "1"})  # flushes the events sent before it
        status, urls, errors, rest = None, [], [], []
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.responseReceived" and params.get("type") == "Document":
                status = params["response"]["status"]
            elif method == "Network.requestWillBeSent":
                urls.append(params["request"]["url"])
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                errors.append(params["entry"]["text"])
            elif method == "Runtime.exceptionThrown":
                errors.append(str(params))
            else:
                continue
        self.events = rest
        return status, urls, errors

    def navigate(self, url):
        self.events = []
        result = self.call("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise RuntimeError("navigating to %s: %s" % (url, result["errorText"]))
        return self.loaded()


def main():
    serve = sys.argv[1:]
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not os.access(chromium, os.X_OK):
        print("chromium is not installed (%s): skipped; apt-get install -y chromium" % chromium)
        return 77
    problems = []

    def check(condition, what):
        print(("ok:   " if condition else "FAIL: ") + what)
        if not condition:
            problems.append(what)

    server = subprocess.Popen(serve, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    work = tempfile.mkdtemp(prefix="tracetree-admin-browser-")
    log = open(os.path.join(work, "chromium.log"), "w")
    browser = None
    try:
        port = int(server.stdout.readline().split()[1])
        base = "http://127.0.0.1:%d" % port
        index = base + "/debug/tracetree/"
        browser = Browser(chromium, os.path.join(work, "profile"), log)
        browser.open_page()

        # ---- the page renders, from this server alone, without errors
        status, urls, errors = browser.navigate(index)
        check(status == 200, "index answers 200 (got %s)" % status)
        foreign = [u for u in urls if not u.startswith(base + "/")]
        check(not foreign, "nothing is loaded from elsewhere %s" % foreign)
        check(not errors, "no console errors %s" % errors)
        check(browser.evaluate("document.title") == "tracetree", "the title")
        width = browser.evaluate("(() => { const s = document.querySelector('#flamegraph svg');"
                                 " return s ? s.getBoundingClientRect().width : 0; })()")
        check(width > 300, "the inline flame graph is drawn (%s px wide)" % width)
        frames = browser.evaluate("[...document.querySelectorAll('#flamegraph svg title')].map(t => t.textContent).join('\\n')")
        check("shop::handle_request()" in frames, "the flame graph has shop::handle_request()")
        shot = base64.b64decode(browser.call("Page.captureScreenshot", {"format": "png"})["data"])
        check(len(shot) > 20000, "a screenshot with something on it (%d bytes)" % len(shot))
        if os.environ.get("ADMIN_SCREENSHOT"):
            with open(os.environ["ADMIN_SCREENSHOT"], "wb") as f:
                f.write(shot)

        # ---- every link answers 200; the JSON ones parse
        links = browser.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")
        check(len(links) >= 10, "the index has its links (%d)" % len(links))
        for link in links:
            status, _, _ = browser.navigate(link)
            length = browser.evaluate("document.documentElement.outerHTML.length")
            check(status == 200 and length > 100, "link %s: %s, %s bytes shown" % (link[len(base):], status, length))
            if "json" in link or link.endswith("/timeline"):
                with urllib.request.urlopen(link, timeout=TIMEOUT) as response:
                    try:
                        json.loads(response.read())
                        check(True, "link %s is JSON" % link[len(base):])
                    except ValueError as e:
                        check(False, "link %s is JSON: %s" % (link[len(base):], e))

        # ---- the trace form starts a trace, and the trace comes back
        browser.navigate(index)
        browser.events = []
        browser.evaluate("(() => { const f = document.querySelector('#trace-form');"
                         " f.pattern.value = 'shop::handle_request'; f.timeout.value = '20';"
                         " f.querySelector('button').click(); })()")
        status, _, _ = browser.loaded()
        text = browser.evaluate("document.body.innerText")
        href = browser.evaluate("location.href")
        check(status == 200, "the trace form's answer is 200 (%s)" % status)
        check("/debug/tracetree/trace?pattern=shop%3A%3Ahandle_request" in href, "the form went to trace (%s)" % href)
        check("`---ts=" in text and "shop::handle_request()" in text and "shop::find_order()" in text,
              "the trace came back as a tree:\n" + text[:600])
        check("Command execution times exceed limit: 1" in text, "the trace says it is complete")

        # ---- POST forms from the browser: its Origin header passes the check
        browser.navigate(index)
        browser.events = []
        browser.evaluate("(() => { const f = document.querySelector('#recorder-form');"
                         " f.pattern.value = 'shop::*'; f.cost.value = '0'; f.keep.value = '3';"
                         " f.querySelector('button').click(); })()")
        status, _, _ = browser.loaded()
        check(status == 200 and "flight recorder started" in browser.evaluate("document.body.innerText"),
              "the recorder form starts a flight recorder (%s)" % status)
        status, _, _ = browser.navigate(base + "/debug/tracetree/recorder?format=html")
        text = browser.evaluate("document.body.innerText")
        check(status == 200 and "`---ts=" in text and " kept" in text, "the recorder shows kept traces")
        browser.navigate(index)
        browser.events = []
        browser.evaluate("document.querySelector('#reset-form button').click()")
        status, _, _ = browser.loaded()
        check(status == 200 and "profile reset" in browser.evaluate("document.body.innerText"),
              "the reset form resets (%s)" % status)
    except Exception as e:  # a hang or a protocol error: say what it was
        problems.append("%s: %s" % (type(e).__name__, e))
        print("FAIL:", problems[-1])
    finally:
        if browser:
            browser.close()
        server.stdin.close()
        server.wait(timeout=TIMEOUT)
        log.close()
        if problems:
            with open(os.path.join(work, "chromium.log")) as f:
                sys.stdout.write(f.read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    if problems:
        print("%d problem(s)" % len(problems))
        return 1
    print("the admin page works in chromium")
    return 0


if __name__ == "__main__":
    sys.exit(main())
