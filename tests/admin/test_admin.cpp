// tracetree::AdminHandler (include/tracetree/admin/handler.hpp): every endpoint, the refusals (400 naming the
// parameter, 401, 403, 404, 405, 409, 415, 503), cancellation, bounded waits, and one real socket
// whose client hangs up. Calls that wait run on a thread; the test knows they wait through
// wait_for_waiting(), never by sleeping.
#include "loopback_server.hpp"

#include "../golden.hpp"

#include <doctest/doctest.h>
#include <tracetree/admin/handler.hpp>
#include <tracetree/tracetree.hpp>
#include <tracetree/views.hpp>  // read_trace_json: answers read back as the views read them
#include <tracetree/runtime/symbols.hpp>  // g_xray_rows: a program whose XRay could not install

#include <chrono>
#include <cstdlib>  // std::getenv: TRACETREE_UPDATE_GOLDEN
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <sys/syscall.h>  // SYS_gettid: the OS thread id the answers show
#include <unistd.h>

bool admin_second_tu_handles(const char* target);  // second_tu.cpp

namespace admin_work {
void leaf(int i) {
    TRACETREE_FUNCTION();
    TRACETREE_WATCH("i", i);
    TRACETREE_WATCH("label", std::string("<b>&'\""));
}
void work(int i) {
    TRACETREE_FUNCTION();
    leaf(i);
}
void deep(int depth) {  // a node per level: a profile whose every format exceeds 1 KiB
    TRACETREE_FUNCTION();
    if (depth > 0) deep(depth - 1);
}
}  // namespace admin_work

namespace {

using namespace std::chrono_literals;
using tracetree::AdminHandler;
using tracetree::AdminRequest;
using tracetree::AdminResponse;

const std::string kPrefix = "/debug/tracetree";

AdminRequest get(const std::string& target) {
    AdminRequest request;
    request.method = "GET";
    request.target = kPrefix + target;
    request.host = "127.0.0.1:7746";
    request.peer = "127.0.0.1:53122";
    return request;
}

AdminRequest post(const std::string& target, const std::string& body = "") {
    AdminRequest request = get(target);
    request.method = "POST";
    request.body = body;
    if (!body.empty()) request.content_type = "application/x-www-form-urlencoded";
    return request;
}

std::string header(const AdminResponse& response, const std::string& name) {
    for (const auto& h : response.headers)
        if (h.first == name) return h.second;
    return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string own_tid() { return std::to_string(syscall(SYS_gettid)); }

// A call that waits, on its own thread.
struct Call {
    AdminResponse response;
    std::thread thread;
    Call(AdminHandler& handler, AdminRequest request)
        : thread([this, &handler, request = std::move(request)] { response = handler.handle(request); }) {}
    ~Call() {
        if (thread.joinable()) thread.join();
    }
    const AdminResponse& result() {
        thread.join();
        return response;
    }
};

// Starts `target` on a thread, waits until its session is in place, runs `act`, returns the answer.
AdminResponse while_waiting(AdminHandler& handler, const AdminRequest& request, const std::function<void()>& act) {
    Call call(handler, request);
    REQUIRE(handler.wait_for_waiting(1, 20s));
    act();
    return call.result();
}

}  // namespace

TEST_CASE("every response is no-store with a content type; every answer is bounded") {
    AdminHandler handler;
    const AdminResponse index = handler.handle(get("/"));
    CHECK(index.status == 200);
    CHECK(index.content_type == "text/html; charset=utf-8");
    CHECK(header(index, "Cache-Control") == "no-store");
    CHECK(contains(header(index, "Content-Security-Policy"), "default-src 'none'"));
    // Where the traces' time off CPU comes from (issue 41).
    CHECK(contains(index.body, "<p id=\"cpu-time\" class=\"note\">Time off CPU in traces: " +
                                   tracetree::recorder_info().cpu_time_source));
    CHECK(handler.handle(get("")).status == 200);  // the prefix itself
    const AdminResponse missing = handler.handle(get("/nope"));
    CHECK(missing.status == 404);
    CHECK(header(missing, "Cache-Control") == "no-store");
    CHECK(missing.content_type == "text/plain; charset=utf-8");
    AdminRequest outside = get("/");
    outside.target = "/debug/tracetreex";
    CHECK(handler.handle(outside).status == 404);
    CHECK_FALSE(handler.handles("/debug/tracetreex"));
    CHECK(handler.handles("/debug/tracetree?x=1"));
    CHECK(admin_second_tu_handles("/debug/tracetree/trace"));
}

TEST_CASE("trace: Arthas text, JSON and a page, n invocations or the timeout") {
    AdminHandler handler;
    const AdminResponse traced =
        while_waiting(handler, get("/trace?pattern=admin_work::work&n=2&timeout=60"), [] {
            admin_work::work(1);
            admin_work::work(2);
        });
    CHECK(traced.status == 200);
    CHECK(traced.content_type == "text/plain; charset=utf-8");
    CHECK(contains(traced.body, "`---ts="));
    CHECK(contains(traced.body, "] admin_work::work() [on CPU "));  // and how much of it off CPU (issue 41)
    CHECK(contains(traced.body, "admin_work::leaf() #"));
    // Arthas's header in the text; the page names the OS thread too (issue 39): `id=` stays the recorder's number.
    CHECK_FALSE(contains(traced.body, ";tid="));
    const AdminResponse traced_page =
        while_waiting(handler, get("/trace?pattern=admin_work::work&format=html&timeout=60"), [] { admin_work::work(1); });
    CHECK(contains(traced_page.body, ";tid=" + own_tid()));
    CHECK(contains(traced.body, "Command execution times exceed limit: 2, so command will exit. You can set it with the n= parameter.\n"));

    const AdminResponse json = while_waiting(handler, get("/trace?pattern=work&regex=1&format=json&timeout=60"),
                                             [] { admin_work::work(3); });
    CHECK(json.content_type == "application/json");
    CHECK(json.body.rfind("{\"format\":\"tracetree-admin\",\"kind\":\"traces\",\"pattern\":\"work\",\"limit\":1,"
                          "\"outcome\":\"complete\",\"traces\":[\n{\"format\":\"tracetree\",\"version\":1,\"kind\":\"trace\"",
                          0) == 0);
    // The trace inside loads back as views.hpp reads it.
    const std::string one = json.body.substr(json.body.find("{\"format\":\"tracetree\""),
                                             json.body.rfind("\n]}") - json.body.find("{\"format\":\"tracetree\""));
    CHECK(tracetree::read_trace_json(one).root.name == "admin_work::work()");
    CHECK(std::to_string(tracetree::read_trace_json(one).os_thread_id) == own_tid());
    CHECK(contains(json.body, ",\"tid\":" + own_tid() + ","));

    const AdminResponse timed_out = handler.handle(get("/trace?pattern=no_such_function&timeout=0.05&cost=2.5"));
    CHECK(timed_out.status == 200);
    CHECK(contains(timed_out.body, "Timed out after 0.05 s: 0 of 1 invocation(s) of 'no_such_function' costing at least 2.5 ms."));
    // A misspelt name waited for nothing: the answer says so, with the names it was likely meant as. A
    // name that ran, though not slowly enough, gets no such line.
    CHECK(contains(timed_out.body, "\nNo scope run so far matches 'no_such_function'; closest: "));
    const AdminResponse misspelt = handler.handle(get("/trace?pattern=admin_work::wrok&timeout=0.05"));
    CHECK(contains(misspelt.body, "\nNo scope run so far matches 'admin_work::wrok'; closest: admin_work::work"));
    CHECK_FALSE(contains(handler.handle(get("/trace?pattern=admin_work::work&timeout=0.05&cost=60000")).body, "No scope run"));
    CHECK(contains(handler.handle(get("/monitor?pattern=admin_work::wrok&interval=0.5&n=1")).body,
                   "No scope run so far matches 'admin_work::wrok'; closest: "));
    CHECK_FALSE(contains(handler.handle(get("/stack?pattern=leaf&timeout=0.05&cost=60000")).body, "No scope run"));
    // A program with XRay that could not install it (helper-36: redis's -flto objects beside a control.o
    // built without LTO): a call that got nothing says why, rather than only that it timed out.
    tracetree::detail::g_xray_rows.store([](std::vector<tracetree::detail::XRayRow>&) {
        throw std::runtime_error("tracetree: XRay: the probe functions of tracetree/xray/xray.hpp have no sleds");
    });
    const std::string uninstalled = handler.handle(get("/trace?pattern=admin_work::work&timeout=0.05&cost=60000")).body;
    tracetree::detail::g_xray_rows.store(nullptr);
    CHECK(contains(uninstalled, "\nNo function of the program was patched: tracetree: XRay: the probe functions of "
                                "tracetree/xray/xray.hpp have no sleds (docs/xray.md).\n"));
    const AdminResponse page = handler.handle(get("/trace?pattern=%3Cscript%3E&timeout=0.01&format=html"));
    CHECK(page.content_type == "text/html; charset=utf-8");
    CHECK(contains(page.body, "&lt;script&gt;"));
    CHECK_FALSE(contains(page.body, "<script>"));
}

TEST_CASE("stack and watch, as Arthas prints them, or JSON") {
    AdminHandler handler;
    const AdminResponse stack =
        while_waiting(handler, get("/stack?pattern=leaf&timeout=60"), [] { admin_work::work(4); });
    CHECK(stack.status == 200);
    CHECK(contains(stack.body, "    @admin_work::leaf()\n        at admin_work::work(test_admin.cpp:"));
    CHECK_FALSE(contains(stack.body, ";tid="));
    const AdminResponse stack_page =
        while_waiting(handler, get("/stack?pattern=leaf&format=html&timeout=60"), [] { admin_work::work(4); });
    CHECK(contains(stack_page.body, ";tid=" + own_tid()));

    const AdminResponse watch =
        while_waiting(handler, get("/watch?pattern=leaf&values=i&n=2&timeout=60"), [] {
            admin_work::work(5);
            admin_work::work(6);
        });
    CHECK(contains(watch.body, "method=admin_work::leaf location=AtExit"));
    CHECK(contains(watch.body, "    i=5,\n"));
    CHECK(contains(watch.body, "    i=6,\n"));
    CHECK_FALSE(contains(watch.body, "label="));  // only the values asked for

    const AdminResponse json =
        while_waiting(handler, get("/watch?pattern=leaf&format=json&timeout=60"), [] { admin_work::work(7); });
    CHECK(contains(json.body, "\"kind\":\"watches\""));
    INFO(json.body);
    CHECK(contains(json.body, "\"values\":[[\"i\",\"7\"],[\"label\",\"\\\"<b>&'\\\\\\\"\\\"\"]]"));
    const AdminResponse stack_json =
        while_waiting(handler, get("/stack?pattern=leaf&format=json&timeout=60"), [] { admin_work::work(8); });
    CHECK(contains(stack_json.body, "\"frames\":[{\"name\":\"admin_work::leaf()\""));
    CHECK(contains(stack_json.body, ",\"tid\":" + own_tid() + ",\"fields\":"));
    CHECK(contains(json.body, ",\"tid\":" + own_tid() + ",\"fields\":"));  // the watch's
}

TEST_CASE("monitor: one Arthas table per interval, or JSON") {
    AdminHandler handler;
    const AdminResponse monitor =
        while_waiting(handler, get("/monitor?pattern=admin_work::*&interval=1&n=2"), [] {
            for (int i = 0; i < 3; ++i) admin_work::work(i);
        });
    CHECK(monitor.status == 200);
    std::size_t tables = 0;
    for (std::size_t at = monitor.body.find(" timestamp "); at != std::string::npos; at = monitor.body.find(" timestamp ", at + 1))
        ++tables;
    CHECK(tables == 2);
    CHECK(contains(monitor.body, " admin_work "));
    CHECK(contains(monitor.body, " work "));
    const AdminResponse json = while_waiting(handler, get("/monitor?pattern=leaf&interval=0.5&n=1&format=json"),
                                             [] { admin_work::work(1); });
    CHECK(contains(json.body, "\"kind\":\"intervals\""));
    CHECK(contains(json.body, "\"outcome\":\"complete\""));
    CHECK(handler.handle(get("/monitor?pattern=x&interval=10&n=31")).status == 400);  // 310 s > max_timeout
}

TEST_CASE("profile in every format, merged or per thread; reset by POST only") {
    AdminHandler handler;
    admin_work::work(1);
    struct Format {
        const char* query;
        const char* type;
        const char* part;
    };
    const Format formats[] = {{"", "text/plain; charset=utf-8", "] admin_work::work()"},
                              {"?threads=1", "text/plain; charset=utf-8", "] admin_work::work()"},
                              {"?format=human", "text/plain; charset=utf-8", "call tree"},
                              {"?format=folded", "text/plain; charset=utf-8", "admin_work::work();admin_work::leaf()"},
                              {"?format=svg", "image/svg+xml", "<svg"},
                              {"?format=svg&threads=1", "image/svg+xml", "tid="},
                              {"?format=json", "application/json", "\"kind\":\"profile\""},
                              {"?format=html", "text/html; charset=utf-8", "admin_work::work()"}};
    for (const Format& format : formats) {
        CAPTURE(format.query);
        const AdminResponse response = handler.handle(get(std::string("/profile") + format.query));
        CHECK(response.status == 200);
        CHECK(response.content_type == format.type);
        CHECK(contains(response.body, format.part));
    }
    // Per thread, each thread's header, page and flame-graph frame name its OS thread id (issue 39); the
    // merged tree is no one thread's.
    CHECK_FALSE(contains(handler.handle(get("/profile?threads=1")).body, ";tid="));
    CHECK(contains(handler.handle(get("/profile?threads=1&format=html")).body, ";tid=" + own_tid()));
    CHECK(contains(handler.handle(get("/profile?threads=1&format=svg")).body, " tid=" + own_tid() + "]"));
    CHECK_FALSE(contains(handler.handle(get("/profile")).body, "tid="));
    const AdminResponse by_get = handler.handle(get("/reset"));
    CHECK(by_get.status == 405);
    CHECK(header(by_get, "Allow") == "POST");
    CHECK(contains(handler.handle(get("/profile")).body, "admin_work::work()"));  // the GET changed nothing
    CHECK(handler.handle(post("/reset")).status == 200);
    CHECK_FALSE(contains(handler.handle(get("/profile")).body, "admin_work::work()"));
}

TEST_CASE("timeline: started and stopped by POST, read as Chrome trace JSON") {
    AdminHandler handler;
    CHECK(handler.handle(get("/timeline/start")).status == 405);
    CHECK(handler.handle(post("/timeline/start?max_spans=0")).status == 400);
    CHECK(handler.handle(post("/timeline/start", "max_spans=1000")).status == 200);
    admin_work::work(1);
    const AdminResponse timeline = handler.handle(get("/timeline"));
    CHECK(timeline.content_type == "application/json");
    CHECK(contains(timeline.body, "\"name\":\"admin_work::leaf()\""));
    CHECK(handler.handle(post("/timeline/stop")).status == 200);
    CHECK(handler.handle(post("/timeline")).status == 405);
}

TEST_CASE("flight recorder: the slow calls that already happened") {
    AdminHandler handler;
    CHECK(contains(handler.handle(get("/recorder")).body, "No flight recorder has been started"));
    CHECK(handler.handle(get("/recorder/start?pattern=work")).status == 405);
    const AdminResponse started = handler.handle(post("/recorder/start?pattern=admin_work::work&cost=0&keep=2"));
    CHECK(started.status == 200);
    CHECK(handler.handle(post("/recorder/start?pattern=work")).status == 409);
    for (int i = 0; i < 3; ++i) admin_work::work(i);
    const AdminResponse kept = handler.handle(get("/recorder"));
    CHECK(contains(kept.body, "Flight recorder for 'admin_work::work' costing at least 0 ms (running): 3 recorded, 2 kept, 1 evicted"));
    std::size_t trees = 0;
    for (std::size_t at = kept.body.find("`---ts="); at != std::string::npos; at = kept.body.find("`---ts=", at + 1)) ++trees;
    CHECK(trees == 2);
    const AdminResponse json = handler.handle(get("/recorder?format=json"));
    CHECK(contains(json.body, "\"running\":true,\"pattern\":\"admin_work::work\",\"min_cost_ns\":0,\"recorded\":3,\"evicted\":1"));
    CHECK(handler.handle(post("/recorder/stop")).status == 200);
    CHECK(handler.handle(post("/recorder/stop")).status == 409);
    admin_work::work(9);
    CHECK(contains(handler.handle(get("/recorder")).body, "(stopped): 3 recorded, 2 kept"));
    const AdminResponse bad = handler.handle(post("/recorder/start?pattern=(&regex=1"));
    CHECK(bad.status == 400);
    CHECK(contains(bad.body, "parameter 'pattern': tracetree: bad pattern '('"));
    // From the page's form: parameters in the body.
    CHECK(handler.handle(post("/recorder/start", "pattern=admin_work%3A%3Awork&cost=1.5&keep=3&format=html")).status == 200);
    CHECK(contains(handler.handle(get("/")).body, "Running for <code>admin_work::work</code>"));
}

TEST_CASE("a bad parameter gets a 400 naming it") {
    AdminHandler handler;
    struct Bad {
        const char* target;
        const char* named;
    };
    const Bad cases[] = {{"/trace", "pattern"},
                         {"/trace?pattern=", "pattern"},
                         {"/trace?pattern=x&n=0", "n"},
                         {"/trace?pattern=x&n=101", "n"},
                         {"/trace?pattern=x&n=1.5", "n"},
                         {"/trace?pattern=x&n=-1", "n"},
                         {"/trace?pattern=x&n=99999999999", "n"},
                         {"/trace?pattern=x&cost=-1", "cost"},
                         {"/trace?pattern=x&cost=1e3", "cost"},
                         {"/trace?pattern=x&cost=", "cost"},
                         {"/trace?pattern=x&cost=1..2", "cost"},
                         {"/trace?pattern=x&timeout=0", "timeout"},
                         {"/trace?pattern=x&timeout=301", "timeout"},
                         {"/trace?pattern=x&timeout=nan", "timeout"},
                         {"/trace?pattern=x&regex=yes", "regex"},
                         {"/trace?pattern=(&regex=1", "pattern"},
                         {"/trace?pattern=x&bogus=1", "bogus"},
                         {"/trace?pattern=x&interval=1", "interval"},
                         {"/trace?pattern=a&pattern=b", "pattern"},
                         {"/trace?pattern=%zz", "pattern"},
                         {"/trace?pattern=x&format=xml", "format"},
                         {"/stack?pattern=x&values=a", "values"},
                         {"/watch?pattern=x&values=a,,b", "values"},
                         {"/monitor?pattern=x&interval=0", "interval"},
                         {"/monitor?pattern=x&cost=1", "cost"},
                         {"/monitor?pattern=x&timeout=1", "timeout"},
                         {"/profile?format=png", "format"},
                         {"/profile?threads=2", "threads"},
                         {"/timeline?x=1", "x"},
                         {"/recorder?format=svg", "format"},
                         {"/?x=1", "x"}};
    for (const Bad& bad : cases) {
        CAPTURE(bad.target);
        const AdminResponse response = handler.handle(get(bad.target));
        CHECK(response.status == 400);
        CHECK(contains(response.body, std::string("400 Bad Request: parameter '") + bad.named + "'"));
    }
    CHECK(handler.handle(post("/recorder/start?pattern=x&keep=0")).status == 400);
    AdminRequest json_body = post("/reset", "{}");
    json_body.content_type = "application/json";
    CHECK(handler.handle(json_body).status == 415);
    // The form type, then parameters only.
    for (const char* type : {"application/x-www-form-urlencoded", "Application/X-WWW-Form-URLEncoded",
                             "application/x-www-form-urlencoded; charset=utf-8", "application/x-www-form-urlencoded ;charset=UTF-8 ",
                             "application/x-www-form-urlencoded;", "application/x-www-form-urlencoded; a=1;b=\"2\""}) {
        AdminRequest form = post("/reset", "format=text");
        form.content_type = type;
        CHECK_MESSAGE(handler.handle(form).status == 200, type);
    }
    for (const char* type : {"application/x-www-form-urlencodedx", "application/x-www-form-urlencoded/json",
                             "application/x-www-form-urlencoded, application/json", "application/x-www-form-urlencoded; charset",
                             "application/x-www-form-urlencoded; =utf-8", "application/x-www-form-urlencoded; charset=",
                             "application/x-www-form-urlencoded; ch@rset=utf-8", "application/x-www-form-urlencoded junk", ""}) {
        AdminRequest form = post("/reset", "format=text");
        form.content_type = type;
        const AdminResponse refused = handler.handle(form);
        CHECK_MESSAGE(refused.status == 415, type);
        CHECK(contains(refused.body, "415 Unsupported Media Type"));
    }
    // A body of 64 KiB is read (here its unknown parameter is the 400); one byte more is refused unread.
    const std::string filler = "format=text&x=";
    CHECK(handler.handle(post("/reset", filler + std::string(65536 - filler.size(), 'y'))).status == 400);
    const AdminResponse too_big = handler.handle(post("/reset", filler + std::string(65537 - filler.size(), 'y')));
    CHECK(too_big.status == 413);
    CHECK(handler.waiting() == 0);
}

TEST_CASE("the wrong method is a 405 with Allow; GET never changes state") {
    AdminHandler handler;
    for (const char* target : {"/reset", "/recorder/start?pattern=x", "/recorder/stop", "/timeline/start", "/timeline/stop"}) {
        CAPTURE(target);
        const AdminResponse response = handler.handle(get(target));
        CHECK(response.status == 405);
        CHECK(header(response, "Allow") == "POST");
    }
    for (const char* target : {"/", "/trace?pattern=x", "/stack", "/watch", "/monitor", "/profile", "/timeline", "/recorder"}) {
        CAPTURE(target);
        const AdminResponse response = handler.handle(post(target));
        CHECK(response.status == 405);
        CHECK(header(response, "Allow") == "GET");
    }
    AdminRequest head = get("/");
    head.method = "DELETE";
    CHECK(handler.handle(head).status == 405);
    CHECK(contains(handler.handle(get("/recorder")).body, "No flight recorder"));
}

TEST_CASE("Host and Origin: loopback names or the allow-list, else 403") {
    tracetree::AdminOptions options;
    options.allowed_hosts = {"admin.internal", "[fd00::1]"};
    AdminHandler handler(options);
    const auto with = [&](const std::string& host, const std::string& origin = "") {
        AdminRequest request = get("/profile");
        request.host = host;
        request.origin = origin;
        return handler.handle(request).status;
    };
    for (const char* host : {"127.0.0.1", "127.0.0.1:7746", "localhost", "LOCALHOST:80", "[::1]", "[::1]:7746",
                             "admin.internal:8080", "[fd00::1]:1"})
        CHECK_MESSAGE(with(host) == 200, host);
    for (const char* host : {"", "evil.example", "evil.example:7746", "127.0.0.1.evil.example", "localhost.", "127.0.0.2",
                             "::1", "[::1", "[::1]x", "0.0.0.0", "admin.internal.evil"})
        CHECK_MESSAGE(with(host) == 403, host);
    // A port out of range is a malformed request, not a stranger.
    for (const char* host : {"localhost:", "localhost:0", "localhost:65536", "localhost:123456", "localhost:8o",
                             "[::1]:0", "127.0.0.1:-1", "evil.example:99999"})
        CHECK_MESSAGE(with(host) == 400, host);
    CHECK(with("localhost:65535") == 200);
    CHECK(with("localhost", "http://localhost:0") == 403);
    CHECK(with("localhost", "http://localhost:7746") == 200);
    CHECK(with("localhost", "https://127.0.0.1") == 200);
    CHECK(with("localhost", "http://admin.internal") == 200);
    for (const char* origin : {"http://evil.example", "null", "http://localhost.evil.example", "file://", "http://",
                               "ftp://localhost", "http://localhost/path", "localhost"})
        CHECK_MESSAGE(with("localhost", origin) == 403, origin);
    // A cross-site POST is refused before it changes anything.
    AdminRequest cross_site = post("/reset");
    cross_site.origin = "http://evil.example";
    const AdminResponse refused = handler.handle(cross_site);
    CHECK(refused.status == 403);
    CHECK(contains(refused.body, "cross-site requests are refused"));
    CHECK_THROWS_AS(AdminHandler([] {
                        tracetree::AdminOptions bad;
                        bad.allowed_hosts = {"Admin:80"};
                        return bad;
                    }()),
                    std::invalid_argument);
}

TEST_CASE("the peer: loopback, allowed_peers, or any peer with the token; else 403") {
    tracetree::AdminOptions options;
    options.allowed_peers = {"10.1.0.0/16", "192.0.2.7", "fd00::/8", "2001:db8::1/128", "fe80::/10"};
    AdminHandler handler(options);
    const auto from = [&](const std::string& peer) {
        AdminRequest request = get("/profile");
        request.peer = peer;
        return handler.handle(request);
    };
    for (const char* peer : {"127.0.0.1:53122", "127.9.8.7:1", "[::1]:53122", "::1", "127.0.0.1", "[::ffff:127.0.0.1]:9",
                             "10.1.255.3:80", "[::ffff:10.1.2.3]:3", "192.0.2.7:5", "[fd12:3456::1]:80", "[2001:db8::1]:1",
                             "[fe80::1%eth0]:2"})
        CHECK_MESSAGE(from(peer).status == 200, peer);
    for (const char* peer : {"10.2.0.1:80", "192.0.2.8:5", "192.168.1.20:53122", "[fe00::1]:80", "[2001:db8::2]:1",
                             "[::ffff:10.2.0.1]:3", "0.0.0.0:1", "[::]:1", "localhost:80", "127.0.0.1.evil:1", "[::1", "junk"})
        CHECK_MESSAGE(from(peer).status == 403, peer);
    const AdminResponse stranger = from("192.168.1.20:53122");
    CHECK(contains(stranger.body, "peer 192.168.1.20:53122 is not loopback nor in the allow-list (AdminOptions::allowed_peers)"));
    // Unset: the host server did not say who connected, so nobody is assumed local.
    const AdminResponse unknown = from("");
    CHECK(unknown.status == 403);
    CHECK(contains(unknown.body, "no peer address (AdminRequest::peer)"));
    // The peer is checked before the Host: a stranger with a loopback Host header is still refused.
    AdminRequest spoofed = get("/profile");
    spoofed.peer = "198.51.100.4:4000";
    spoofed.host = "localhost";
    CHECK(handler.handle(spoofed).status == 403);

    // With a token, any peer that gives it is admitted, and none that does not.
    tracetree::AdminOptions with_token;
    with_token.token = "t0ken";
    AdminHandler guarded(with_token);
    AdminRequest remote = get("/profile");
    remote.peer = "198.51.100.4:4000";
    CHECK(guarded.handle(remote).status == 401);
    remote.authorization = "Bearer t0ken";
    CHECK(guarded.handle(remote).status == 200);
    remote.peer = "";
    CHECK(guarded.handle(remote).status == 200);

    for (const char* cidr : {"10.0.0.0/33", "fd00::/129", "10.0.0/8", "10.0.0.0/", "10.0.0.0/8x", "host.example", "", "::1/-1",
                             "10.0.0.0/08/1"}) {
        tracetree::AdminOptions bad;
        bad.allowed_peers = {"127.0.0.0/8", cidr};
        try {
            AdminHandler refused(bad);
            FAIL_CHECK("accepted '" << std::string(cidr) << "'");
        } catch (const std::invalid_argument& e) {
            CHECK_MESSAGE(contains(e.what(), "AdminOptions::allowed_peers"), cidr);
            CHECK_MESSAGE(contains(e.what(), "got '" + std::string(cidr) + "'"), cidr);
        }
    }
}


TEST_CASE("allowed_peers: networks whose prefix is not a whole number of bytes") {
    // The last partial byte's mask: a /23 holds 192.168.0.0 to 192.168.1.255 and nothing of .2, a /20
    // 16 third bytes, a /57 of IPv6 half of its eighth byte's values.
    tracetree::AdminOptions options;
    options.allowed_peers = {"192.168.0.0/23", "172.16.16.0/20", "2001:db8:0:80::/57"};
    AdminHandler handler(options);
    const auto from = [&](const std::string& peer) {
        AdminRequest request = get("/profile");
        request.peer = peer;
        return handler.handle(request).status;
    };
    for (const char* peer : {"192.168.0.1:1", "192.168.1.200:1", "172.16.16.1:1", "172.16.31.255:1", "[2001:db8:0:80::1]:1",
                             "[2001:db8:0:ff::9]:1"})
        CHECK_MESSAGE(from(peer) == 200, peer);
    for (const char* peer : {"192.168.2.9:1", "192.168.3.1:1", "192.167.255.255:1", "172.16.15.255:1", "172.16.32.0:1",
                             "[2001:db8:0:7f::1]:1", "[2001:db8:0:100::1]:1"})
        CHECK_MESSAGE(from(peer) == 403, peer);
}
TEST_CASE("a bearer token: 401 with WWW-Authenticate when missing or wrong") {
    tracetree::AdminOptions options;
    options.token = "s3cret-token";
    AdminHandler handler(options);
    AdminRequest request = get("/profile");
    const AdminResponse missing = handler.handle(request);
    CHECK(missing.status == 401);
    CHECK(header(missing, "WWW-Authenticate") == "Bearer realm=\"tracetree\"");
    for (const char* wrong : {"Bearer s3cret-toke", "Bearer s3cret-token2", "Basic s3cret-token", "s3cret-token", "Bearer "}) {
        request.authorization = wrong;
        const AdminResponse response = handler.handle(request);
        CHECK_MESSAGE(response.status == 401, wrong);
        CHECK(contains(header(response, "WWW-Authenticate"), "error=\"invalid_token\""));
    }
    request.authorization = "Bearer s3cret-token";
    CHECK(handler.handle(request).status == 200);
    request.authorization = "bearer  s3cret-token";
    CHECK(handler.handle(request).status == 200);
    request.host = "evil.example";  // the Host check comes first
    CHECK(handler.handle(request).status == 403);
}

TEST_CASE("a limit on waiting calls (503), cancellation, shutdown, and bounded options") {
    tracetree::AdminOptions options;
    options.max_waiting = 1;
    options.max_timeout = std::chrono::seconds(300);
    AdminHandler handler(options);

    AdminRequest first = get("/trace?pattern=no_such_function&timeout=300");
    first.cancel = std::make_shared<tracetree::CancelToken>();
    Call waiting(handler, first);
    REQUIRE(handler.wait_for_waiting(1, 20s));
    const AdminResponse busy = handler.handle(get("/stack?pattern=x&timeout=1"));
    CHECK(busy.status == 503);
    CHECK(header(busy, "Retry-After") == "1");
    CHECK(contains(busy.body, "1 calls are waiting already"));
    CHECK(handler.handle(get("/profile")).status == 200);  // what does not wait still answers

    first.cancel->cancel();  // the client went away: the call ends now, not in 300 s
    const AdminResponse& cancelled = waiting.result();
    CHECK(cancelled.status == 200);
    CHECK(contains(cancelled.body, "Cancelled after "));
    CHECK(contains(cancelled.body, "s: 0 of 1 invocation(s) of 'no_such_function'."));
    CHECK(handler.waiting() == 0);

    AdminRequest already = get("/monitor?pattern=x&interval=100&n=3");  // cancelled before it starts
    already.cancel = std::make_shared<tracetree::CancelToken>();
    already.cancel->cancel();
    CHECK(contains(handler.handle(already).body, "Cancelled after"));

    AdminRequest counting = get("/monitor?pattern=admin_work::leaf&interval=100&n=3");
    counting.cancel = std::make_shared<tracetree::CancelToken>();
    Call cancelled_monitor(handler, counting);
    REQUIRE(handler.wait_for_waiting(1, 20s));
    for (int i = 0; i < 3; ++i) admin_work::work(i);
    counting.cancel->cancel();  // the calls of the interval under way are answered, not lost
    const std::string& cut_short = cancelled_monitor.result().body;
    CHECK(contains(cut_short, " admin_work  leaf    3 "));
    CHECK(contains(cut_short, "s: 1 of 3 interval(s) of 'admin_work::leaf', the last one cut short."));

    Call monitor(handler, get("/monitor?pattern=x&interval=100&n=3"));
    REQUIRE(handler.wait_for_waiting(1, 20s));
    handler.shutdown();  // the server stops: waiting calls end, later ones are refused
    const std::string& stopped = monitor.result().body;
    CHECK(contains(stopped, "Cancelled after"));
    CHECK(contains(stopped, "s: 0 of 3 interval(s) of 'x'."));
    CHECK(handler.handle(get("/trace?pattern=x")).status == 503);

    const auto invalid = [](auto change) {
        tracetree::AdminOptions bad;
        change(bad);
        CHECK_THROWS_AS(AdminHandler{bad}, std::invalid_argument);
    };
    invalid([](tracetree::AdminOptions& o) { o.prefix = "debug"; });
    invalid([](tracetree::AdminOptions& o) { o.prefix = "/debug/"; });
    invalid([](tracetree::AdminOptions& o) { o.prefix = "/a\"b"; });
    invalid([](tracetree::AdminOptions& o) { o.max_waiting = 0; });
    invalid([](tracetree::AdminOptions& o) { o.max_timeout = std::chrono::hours(2); });
    invalid([](tracetree::AdminOptions& o) { o.max_n = 0; });
}

TEST_CASE("max_body: a call answers with the values that fit and says where it was cut") {
    tracetree::AdminOptions options;
    options.max_body = 2048;
    AdminHandler handler(options);
    for (const char* format : {"text", "json"}) {
        CAPTURE(format);
        Call call(handler, get(std::string("/trace?pattern=admin_work::work&n=100&timeout=20&format=") + format));
        REQUIRE(handler.wait_for_waiting(1, 20s));
        for (int i = 0; i < 100000 && handler.waiting() != 0; ++i) admin_work::work(i);  // until it has what fits
        const AdminResponse& response = call.result();
        CHECK(response.status == 200);
        CHECK(response.body.size() <= 2048 + 256);  // the values, then the closing line or the JSON's frame
        if (std::string(format) == "text") {
            CHECK(contains(response.body, "`---ts="));  // at least one trace fits
            CHECK(contains(response.body, "Cut at 2048 bytes (AdminOptions::max_body): "));
            CHECK(contains(response.body, " of 100 invocation(s) of 'admin_work::work'; the next did not fit."));
        } else {
            CHECK(contains(response.body, "\"outcome\":\"cut\",\"max_body\":2048,\"traces\":[\n{"));
            CHECK(contains(response.body, "\n]}\n"));
        }
    }
    CHECK_THROWS_AS(AdminHandler([] {
                        tracetree::AdminOptions bad;
                        bad.max_body = 1000;
                        return bad;
                    }()),
                    std::invalid_argument);
}

TEST_CASE("max_body: the profile, the flight recorder and the page answer with what fits") {
    tracetree::AdminOptions options;
    options.max_body = 1024;
    AdminHandler handler(options);
    CHECK(handler.handle(post("/reset")).status == 200);
    admin_work::deep(60);
    // Not folded: its lines leave out frames whose self time rounds to 0 µs, so its size depends on speed.
    for (const std::string query : {"", "?format=human", "?format=html"}) {
        CAPTURE(query);
        const AdminResponse response = handler.handle(get("/profile" + query));
        CHECK(response.status == 200);
        CHECK(response.body.size() <= 1024 + 1024);  // what fits, then the line that says so (escaped in a page)
        CHECK(contains(response.body, "Cut at 1024 bytes (AdminOptions::max_body): the "));
        CHECK(contains(response.body, " bytes; the lines after these did not fit.\n"));
    }
    CHECK(contains(handler.handle(get("/profile")).body, "admin_work::deep()"));  // the lines that fit
    for (const std::string query : {"?format=json", "?format=svg"}) {  // no use cut: refused, with the size
        CAPTURE(query);
        const AdminResponse response = handler.handle(get("/profile" + query));
        CHECK(response.status == 507);
        CHECK(contains(response.body, " bytes, above 1024 (AdminOptions::max_body); format=text or folded answers with what fits"));
    }
    const AdminResponse page = handler.handle(get("/"));
    CHECK(page.status == 200);
    CHECK(contains(page.body, "(AdminOptions::max_body): not shown"));
    CHECK_FALSE(contains(page.body, "<svg"));

    CHECK(handler.handle(post("/recorder/start?pattern=admin_work::work&keep=10")).status == 200);
    for (int i = 0; i < 10; ++i) admin_work::work(i);
    const AdminResponse kept = handler.handle(get("/recorder"));
    CHECK(contains(kept.body, "10 recorded, 10 kept"));
    CHECK(contains(kept.body, "`---ts="));  // at least one fits, not all ten
    CHECK(contains(kept.body, " of 10 kept trace(s) shown; the next did not fit.\n"));
    CHECK(contains(kept.body, "Cut at 1024 bytes (AdminOptions::max_body): "));
    const AdminResponse json = handler.handle(get("/recorder?format=json"));
    CHECK(contains(json.body, ",\"cut\":true,\"max_body\":1024,\"traces\":[\n{"));
    CHECK(json.body.size() <= 1024 + 256);
    CHECK(handler.handle(post("/recorder/stop")).status == 200);
    CHECK(handler.handle(post("/reset")).status == 200);
}

TEST_CASE("the index page escapes what it prints and mounts anywhere") {
    tracetree::AdminOptions options;
    options.prefix = "";
    AdminHandler handler(options);
    AdminRequest start;
    start.method = "POST";
    start.target = "/recorder/start?pattern=%3Cimg%20src%3Dx%3E%22%27";
    start.host = "localhost";
    start.peer = "[::1]:40000";
    CHECK(handler.handle(start).status == 200);
    AdminRequest index;
    index.method = "GET";
    index.target = "/";
    index.host = "localhost";
    index.peer = "127.0.0.1:40000";
    const AdminResponse page = handler.handle(index);
    CHECK(page.status == 200);
    CHECK(contains(page.body, "&lt;img src=x&gt;&quot;&#39;"));
    CHECK_FALSE(contains(page.body, "<img"));
    CHECK(contains(page.body, "action=\"/trace\""));
    CHECK(contains(page.body, "href=\"/profile?format=svg\""));
}

TEST_CASE("JSON of stack, watch and monitor values (golden)") {
    tracetree::StackTrace stack;
    stack.start = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
    stack.thread_name = "exec-\"1\"";
    stack.thread_id = 7;
    stack.os_thread_id = 4242;  // the watch event's is unknown: no "tid"
    stack.fields = {{"uri", "/send"}};
    stack.cost = 1500000ns;
    stack.frames = {{"a::leaf()", "a.cpp", 12}, {"a::root()", "a.cpp", 30}};
    tracetree::WatchEvent event;
    event.start = stack.start;
    event.thread_name = "main";
    event.scope = "a::leaf()";
    event.file = "a.cpp";
    event.line = 12;
    event.cost = 250ns;
    event.threw = true;
    event.values = {{"name", "x\ny"}, {"bytes", "\xff"}};
    tracetree::MonitorInterval interval;
    interval.start = stack.start;
    interval.end = stack.start + 1s;
    interval.rows.push_back({"a::leaf()", "a.cpp", 12, 3, 1, 3000ns, 500ns, 2000ns});
    std::ostringstream out;
    tracetree::detail::admin::write_json(out, stack);
    out << '\n';
    tracetree::detail::admin::write_json(out, event);
    out << '\n';
    tracetree::detail::admin::write_json(out, interval);
    out << '\n';
    golden::compare("values.json", out.str());
}

TEST_CASE("a real socket: a client that hangs up cancels its waiting call") {
    AdminHandler handler;
    admin_test::LoopbackServer server(handler);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    const std::string request = "GET " + kPrefix + "/trace?pattern=no_such_function&timeout=300 HTTP/1.1\r\nHost: 127.0.0.1:" +
                                std::to_string(server.port()) + "\r\n\r\n";
    REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
    REQUIRE(handler.wait_for_waiting(1, 20s));
    ::close(fd);
    CHECK(handler.wait_for_waiting(0, 20s));  // without the cancel: 300 s
}

// docs/admin.md's endpoint list is the handler's table (detail::admin::Table) written as Markdown:
// what the docs promise is what the handler checks. TRACETREE_UPDATE_GOLDEN=1 rewrites the list.
TEST_CASE("docs/admin.md lists the endpoints as the handler's table has them") {
    using tracetree::detail::admin::Param;
    const auto escaped = [](std::string text) {  // '|' inside a Markdown table cell
        for (std::size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) text.insert(at, "\\");
        return text;
    };
    std::string table = "| endpoint | method | parameters (default) | answers |\n| --- | --- | --- | --- |\n";
    for (const auto& endpoint : tracetree::detail::admin::Table::endpoints()) {
        std::string params;
        for (const Param& param : endpoint.params) {
            params += (params.empty() ? "`" : ", `") + std::string(param.name) + "`";
            const std::string what = param.what, high = param.limit == Param::max_n         ? "`max_n`"
                                                        : param.limit == Param::max_timeout ? "`max_timeout`"
                                                                                            : tracetree::detail::admin::number(param.high);
            if (param.kind == Param::required) params += " (required)";
            else if (param.kind == Param::free_text) params += " (" + what + ")";
            else if (param.kind == Param::flag) params += " 0\\|1 (0)";
            else if (param.kind == Param::choice) params += " " + escaped(what) + " (" + what.substr(0, what.find('|')) + ")";
            else
                params += " " + tracetree::detail::admin::number(param.low) + ".." + high + (what.empty() ? "" : " " + what) + " (" +
                          tracetree::detail::admin::number(param.fallback) +
                          (param.limit == Param::max_timeout && param.fallback > 1 ? ", or `max_timeout` if less)" : ")");
        }
        table += "| `" + (*endpoint.name == '\0' ? std::string("/") : std::string(endpoint.name)) + "` | " + endpoint.method + " | " +
                 (params.empty() ? "none" : params) + " | " + endpoint.answers + " |\n";
    }

    const std::string path = std::string(TRACETREE_GOLDEN_DIR) + "/../../../docs/admin.md";
    std::string docs;
    {
        std::ifstream in(path, std::ios::binary);
        std::ostringstream text;
        text << in.rdbuf();
        docs = text.str();
    }
    const std::size_t start = docs.find("| endpoint | method |");
    REQUIRE(start != std::string::npos);
    const std::size_t end = docs.find("\n\n", start) + 1;
    if (std::getenv("TRACETREE_UPDATE_GOLDEN") != nullptr) {
        std::ofstream(path, std::ios::binary) << docs.replace(start, end - start, table);
        return;
    }
    INFO(path << "'s endpoint list should read (TRACETREE_UPDATE_GOLDEN=1 rewrites it):\n" << table);
    CHECK(docs.substr(start, end - start) == table);
}

TEST_CASE("the closest names to a misspelt pattern: three, nearest first, a name once at its nearest") {
    using tracetree::detail::admin::closest_names;
    const std::vector<std::string> names = {"shop::servlet", "ns::shop::service", "x", "a::much::longer::name::of::no::use"};
    // ns::shop::service is 5 edits whole, but 1 after its "::": it comes first; the long name's last
    // part, "use", is nearer than "x".
    CHECK(closest_names("shop::servce", {&names}) == "; closest: ns::shop::service, shop::servlet, a::much::longer::name::of::no::use");
    const std::vector<std::string> none;
    CHECK(closest_names("shop::servce", {&none}).empty());
    const std::vector<std::string> more = {"shop::servce2"};
    CHECK(closest_names("shop::servce", {&names, &more}) == "; closest: ns::shop::service, shop::servce2, shop::servlet");
    const std::vector<std::string> ties = {"shop::servcx", "shop::servcy", "shop::servcz", "shop::servca"};  // 1 edit each
    CHECK(closest_names("shop::servce", {&ties}) == "; closest: shop::servca, shop::servcx, shop::servcy");
}
