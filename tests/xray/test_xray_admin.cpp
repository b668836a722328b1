// The admin handler in a program with XRay (include/tracetree/admin/handler.hpp): a pattern that
// matches no function of the program and no scope run so far is answered at once, naming the closest
// names, and patches nothing; `depth=` sets what a trace patches below what it matches.
#include "traced_code.hpp"
#include "xray_support.hpp"

#include <tracetree/admin/handler.hpp>

#include <doctest/doctest.h>

#include <future>
#include <string>

using namespace xray_test;
using namespace std::chrono_literals;

namespace {

tracetree::AdminRequest get(const std::string& target) {
    tracetree::AdminRequest request;
    request.method = "GET";
    request.target = "/debug/tracetree" + target;
    request.host = "127.0.0.1:7746";
    request.peer = "127.0.0.1:53122";
    return request;
}
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("admin: a misspelt pattern is answered at once with the closest names, and patches nothing") {
    tracetree::AdminHandler handler;
    // The timeouts are long: a wait for them would fail the test's own timeout.
    const tracetree::AdminResponse misspelt = handler.handle(get("/trace?pattern=xtest::chian_top&timeout=300"));
    CHECK(misspelt.status == 404);
    CHECK(contains(misspelt.body, "pattern 'xtest::chian_top' matches no function of the program and no scope run so far"));
    CHECK(contains(misspelt.body, "closest: xtest::chain_top"));
    const tracetree::AdminResponse short_name = handler.handle(get("/stack?pattern=chian_low&timeout=300"));
    CHECK(short_name.status == 404);
    CHECK(contains(short_name.body, "closest: xtest::chain_low"));  // "chain_low" after its namespace
    CHECK(handler.handle(get("/monitor?pattern=nothing::*&interval=100&n=3")).status == 404);
    tracetree::AdminRequest recorder = get("/recorder/start?pattern=xtest::chain_tpo");
    recorder.method = "POST";
    CHECK(handler.handle(recorder).status == 404);
    CHECK(tracetree::xray::status().patched == 0);
    // Parameters are checked first: a bad one is a 400, whatever the pattern.
    const tracetree::AdminResponse deep = handler.handle(get("/trace?pattern=xtest::chain_top&depth=65"));
    CHECK(deep.status == 400);
    CHECK(contains(deep.body, "depth"));
    CHECK(handler.handle(get("/stack?pattern=xtest::leaf&depth=1")).status == 400);  // a stack has no depth
}

TEST_CASE("admin: stack answers with the machine's callers, in text and JSON") {
    tracetree::AdminHandler handler;
    Recording recording;
    auto answer = std::async(std::launch::async, [&] { return handler.handle(get("/stack?pattern=xtest::leaf&n=2&timeout=60")); });
    REQUIRE(handler.wait_for_waiting(1, 20s));
    xtest::chain_top();  // leaf from parent, then from chain_top itself
    const tracetree::AdminResponse text = answer.get();
    CHECK(contains(text.body, "    @xtest::leaf()\n        at xtest::parent()\n        at xtest::chain_low()\n        at xtest::chain_mid()\n"));
    CHECK(contains(text.body, "    @xtest::leaf()\n        at xtest::chain_top()\n"));
    auto json = std::async(std::launch::async, [&] { return handler.handle(get("/stack?pattern=xtest::leaf&format=json&timeout=60")); });
    REQUIRE(handler.wait_for_waiting(1, 20s));
    xtest::parent(1);
    const tracetree::AdminResponse body = json.get();
    CHECK(contains(body.body, "\"frames\":[{\"name\":\"xtest::leaf()\",\"file\":\"\",\"line\":0}],\"callers\":[{\"name\":\"xtest::parent()\""));
}

TEST_CASE("admin: depth= sets what a trace patches below the functions it matches") {
    tracetree::AdminHandler handler;
    Recording recording;
    auto answer = std::async(std::launch::async, [&] { return handler.handle(get("/trace?pattern=xtest::chain_top&depth=1&timeout=60")); });
    REQUIRE(handler.wait_for_waiting(1, 20s));
    const std::vector<std::string> patched = [] {
        std::vector<std::string> names;
        for (const auto& function : tracetree::xray::functions())
            if (function.patched) names.push_back(function.name);
        std::sort(names.begin(), names.end());
        return names;
    }();
    CHECK(patched == std::vector<std::string>{"xtest::chain_mid()", "xtest::chain_top()", "xtest::leaf()"});
    xtest::chain_top();
    const tracetree::AdminResponse traced = answer.get();
    CHECK(traced.status == 200);
    CHECK(contains(traced.body, "] xtest::chain_top()\n"));
    CHECK(contains(traced.body, "] xtest::chain_mid()"));  // with the hot marker
    CHECK_FALSE(contains(traced.body, "chain_low"));
    CHECK(tracetree::xray::status().patched == 0);
}

TEST_CASE("admin: the XRay view lists what is patched now, by which session, and searches all names") {
    tracetree::AdminHandler handler;
    const tracetree::AdminResponse idle = handler.handle(get("/xray"));
    CHECK(idle.status == 200);
    CHECK(contains(idle.body, " patchable, 0 patched now; 0 shown"));
    tracetree::TraceSession trace(tracetree::TraceRequest("xtest::chain_mid").depth(1));
    tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::leaf"));
    const tracetree::AdminResponse patched = handler.handle(get("/xray"));
    CHECK(contains(patched.body, " patchable, 3 patched now; 3 shown"));
    CHECK(contains(patched.body, "patched    xtest::chain_mid()  by trace 'xtest::chain_mid' (depth 1)\n"));
    CHECK(contains(patched.body, "patched    xtest::chain_low()  by trace 'xtest::chain_mid' (depth 1)\n"));
    CHECK(contains(patched.body, "patched    xtest::leaf()  by monitor 'xtest::leaf'\n"));
    const tracetree::AdminResponse search = handler.handle(get("/xray?search=xtest::chain_*&all=1&format=json"));
    CHECK(search.content_type == "application/json");
    CHECK(contains(search.body, "{\"name\":\"xtest::chain_top()\",\"patchable\":true,\"patched\":false,\"wanted_by\":\"\"}"));
    CHECK(contains(search.body, "{\"name\":\"xtest::chain_mid()\",\"patchable\":true,\"patched\":true,\"wanted_by\":\"trace 'xtest::chain_mid' (depth 1)\"}"));
    CHECK(contains(handler.handle(get("/")).body, "/xray?format=html"));
    CHECK(handler.handle(get("/xray?search=(&regex=1")).status == 400);
}
