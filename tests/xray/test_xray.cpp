// XRay functions as scopes (include/tracetree/xray/xray.hpp): patched only while a session wants them,
// named as TRACETREE_FUNCTION() names them, nested with annotated scopes in one tree, and kept right
// across exceptions, longjmp, tail calls and patching while they run. The traced code is
// traced_code.cpp (no tracetree in it); this file is built with -fxray-instrument too, as the header
// requires, so its annotated functions also have sleds (and must never be patched).
#include "traced_code.hpp"
#include "xray_support.hpp"

#include "../golden.hpp"

#include <doctest/doctest.h>

#include <csetjmp>
#include <functional>
#include <sstream>
#include <stdexcept>

using namespace xray_test;
using namespace std::chrono_literals;

namespace annotated {
[[gnu::noinline]] void inner() {
    TRACETREE_FUNCTION();
    xtest::leaf();
}
[[gnu::noinline]] void outer() {
    TRACETREE_FUNCTION();
    xtest::call(&inner);
}
[[gnu::noinline]] void service() {
    TRACETREE_FUNCTION();
    xtest::parent(2);
    outer();
}
[[gnu::noinline]] void catches_thrower() {
    TRACETREE_FUNCTION();
    try {
        xtest::thrower(2);
    } catch (const std::runtime_error&) {
    }
}
}  // namespace annotated

TEST_CASE("XRay functions are named as TRACETREE_FUNCTION() names them") {
    tracetree::xray::install();
    const auto names = [] {
        std::vector<std::string> all;
        for (const auto& f : tracetree::xray::functions())
            if (f.patchable) all.push_back(f.name);
        return all;
    }();
    const auto has = [&](const std::string& name) { return std::find(names.begin(), names.end(), name) != names.end(); };
    CHECK(has("xtest::leaf()"));
    CHECK(has("xtest::Cart::checkout()"));     // parameters and const dropped
    CHECK(has("xtest::Cart::count()"));        // static member
    CHECK(has("xtest::Pricer::operator()()"));
    CHECK(has("xtest::twice()"));              // template arguments and return type dropped
    CHECK(has("xtest::(anonymous namespace)::hidden()"));
    CHECK(has("xtest::label()"));              // without its ABI tag, as __PRETTY_FUNCTION__ has it
    // What an annotated function of the same shape is called, for comparison.
    {
        Recording recording;
        annotated::inner();
        CHECK(count_of("annotated::inner()") == 1);
    }
    // Functions with TRACETREE_FUNCTION() (their own scope shows them), the standard library and
    // tracetree itself are never patched.
    for (const auto& f : tracetree::xray::functions()) {
        CAPTURE(f.name);
        if (f.name.rfind("annotated::", 0) == 0 || f.name.rfind("std::", 0) == 0 || f.name.rfind("tracetree::", 0) == 0)
            CHECK_FALSE(f.patchable);
    }
    const tracetree::xray::Status status = tracetree::xray::status();
    CHECK(status.installed);
    CHECK(status.error.empty());
    CHECK(status.functions == tracetree::xray::functions().size());
    CHECK(status.patched == 0);
}

TEST_CASE("a function is patched only while a session wants it, whatever the kind of session") {
    // Each kind of session, started on the leaf; `wait` ends a session that stops by itself.
    const std::vector<std::pair<std::string, std::function<std::shared_ptr<void>()>>> kinds = {
        {"trace", [] { return std::make_shared<tracetree::TraceSession>(tracetree::TraceRequest("xtest::leaf").limit(1000)); }},
        {"stack", [] { return std::make_shared<tracetree::StackSession>(tracetree::StackRequest("xtest::leaf").limit(1000)); }},
        {"watch", [] { return std::make_shared<tracetree::WatchSession>(tracetree::WatchRequest("xtest::leaf").limit(1000)); }},
        {"monitor", [] { return std::make_shared<tracetree::Monitor>(tracetree::MonitorRequest("xtest::leaf")); }},
        {"recorder", [] { return std::make_shared<tracetree::FlightRecorder>(tracetree::RecorderRequest("xtest::leaf")); }},
    };
    for (const auto& kind : kinds) {
        CAPTURE(kind.first);
        const auto& start = kind.second;
        Recording recording;
        CHECK_FALSE(sled_patched("xtest::leaf()"));
        for (int i = 0; i < 5; ++i) xtest::leaf();
        CHECK(count_of("xtest::leaf()") == 0);  // before
        {
            const std::shared_ptr<void> session = start();
            CHECK(sled_patched("xtest::leaf()"));
            // Exactly the matching ones; a trace or recorder also what runs inside its captures.
            const bool captures = kind.first == "trace" || kind.first == "recorder";
            CHECK(sled_patched("xtest::parent()") == captures);
            CHECK((tracetree::xray::status().patched == 1) != captures);
            for (int i = 0; i < 7; ++i) xtest::leaf();
            CHECK(count_of("xtest::leaf()") == 7);  // during
        }
        CHECK_FALSE(sled_patched("xtest::leaf()"));
        CHECK(tracetree::xray::status().patched == 0);
        for (int i = 0; i < 5; ++i) xtest::leaf();
        CHECK(count_of("xtest::leaf()") == 7);  // after
    }
}

TEST_CASE("two sessions on one function: it stays patched until the last one ends") {
    Recording recording;
    auto first = std::make_unique<tracetree::Monitor>(tracetree::MonitorRequest("xtest::*"));
    auto second = std::make_unique<tracetree::StackSession>(tracetree::StackRequest("leaf").limit(100));
    CHECK(sled_patched("xtest::leaf()"));
    first.reset();
    CHECK(sled_patched("xtest::leaf()"));
    CHECK_FALSE(sled_patched("xtest::parent()"));
    second.reset();
    CHECK_FALSE(sled_patched("xtest::leaf()"));
}

TEST_CASE("a trace patches the functions that may run inside what it captures") {
    Recording recording;
    tracetree::TraceSession trace(tracetree::TraceRequest("annotated::service").limit(2));
    CHECK(sled_patched("xtest::leaf()"));  // a callee: set_callees("xtest::*") in main
    CHECK(sled_patched("xtest::call()"));
    CHECK_FALSE(sled_patched("annotated::service()"));  // annotated: its scope records it
    annotated::service();
    const auto traces = trace.collect(1s);
    REQUIRE(traces.size() == 1);
    CHECK(trace_text(traces[0]) ==
          "annotated::service() 7000\n"
          "  annotated::outer() 3000\n"
          "    xtest::call() 3000\n"
          "      annotated::inner() 1000\n"
          "        xtest::leaf() 1000\n"
          "  xtest::parent() 4000\n"
          "    xtest::leaf() count=2 2000\n");
    SUBCASE("set_callees narrows it") {
        tracetree::xray::set_callees("xtest::parent");
        CHECK_FALSE(sled_patched("xtest::leaf()"));
        CHECK(sled_patched("xtest::parent()"));
        annotated::service();
        const auto narrowed = trace.collect(1s);
        REQUIRE(narrowed.size() == 1);
        CHECK(trace_text(narrowed[0]) ==
              "annotated::service() 7000\n"
              "  annotated::outer() 3000\n"
              "    annotated::inner() 1000\n"
              "  xtest::parent() 4000\n");
        tracetree::xray::set_callees("xtest::*");
    }
}

TEST_CASE("annotated scopes and XRay functions nest in one tree, rendered as Arthas renders scopes") {
    Recording recording;
    tracetree::TraceSession trace(tracetree::TraceRequest("annotated::service"));
    annotated::service();
    const auto traces = trace.collect(1s);
    REQUIRE(traces.size() == 1);
    const tracetree::Trace& shown = traces[0];
    std::ostringstream text;
    tracetree::render(text, shown, tracetree::RenderOptions().colour(tracetree::Colour::never));
    const std::string rendered = text.str();
    golden::compare("nested.txt", rendered.substr(rendered.find('\n') + 1));  // without the date line
}

TEST_CASE("recursion nests as an annotated recursion does") {
    Recording recording;
    tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::recurse"));
    xtest::recurse(3);
    const tracetree::Node* level = root_of("xtest::recurse()");
    for (int depth = 0; depth < 4; ++depth) {
        REQUIRE(level != nullptr);
        CHECK(level->count == 1);
        level = child_of(*level, "xtest::recurse()");
    }
    CHECK(level == nullptr);
}

TEST_CASE("an exception through patched functions closes them, with their cost, counted as throws") {
    Recording recording;
    tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::*"));
    SUBCASE("caught by a patched function") {
        xtest::catches(2);
        xtest::leaf();  // after it: at the root, not inside what threw
        CHECK(tree_text() ==
              "xtest::catches() 5000\n"
              "  xtest::leaf() 1000\n"
              "  xtest::thrower() throws=1 3000\n"
              "    xtest::thrower() throws=1 2000\n"
              "      xtest::thrower() throws=1 1000\n"
              "        throw:std::runtime_error 0\n"
              "xtest::leaf() 1000\n");
    }
    SUBCASE("caught by an annotated function, while a trace captures the thrower") {
        tracetree::TraceSession trace(tracetree::TraceRequest("xtest::thrower"));
        annotated::catches_thrower();  // the capture's root ends before the annotated scope around it
        annotated::inner();
        CHECK(tree_text() ==
              "annotated::catches_thrower() 3000\n"
              "  xtest::thrower() throws=1 3000\n"
              "    xtest::thrower() throws=1 2000\n"
              "      xtest::thrower() throws=1 1000\n"
              "        throw:std::runtime_error 0\n"
              "annotated::inner() 1000\n"
              "  xtest::leaf() 1000\n");
        const auto traces = trace.collect(1s);
        REQUIRE(traces.size() == 1);
        CHECK(traces[0].root.throws == 1);
        CHECK(trace_text(traces[0]) ==
              "xtest::thrower() throws=1 3000\n"
              "  xtest::thrower() throws=1 2000\n"
              "    xtest::thrower() throws=1 1000\n"
              "      throw:std::runtime_error 0\n");
    }
    SUBCASE("caught by an unpatched caller") {
        try {
            xtest::thrower(1);
        } catch (const std::runtime_error&) {
        }
        xtest::leaf();
        CHECK(tree_text() ==
              "xtest::leaf() 1000\n"
              "xtest::thrower() throws=1 2000\n"
              "  xtest::thrower() throws=1 1000\n"
              "    throw:std::runtime_error 0\n");
    }
}

TEST_CASE("a longjmp over patched functions: they are closed at the next event, not as throws") {
    Recording recording;
    tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::*"));
    std::jmp_buf back;
    if (setjmp(back) == 0) xtest::jumps_back(back);
    xtest::parent(0);  // the next event: finds the frames the longjmp left
    const tracetree::Node* jumped = root_of("xtest::jumps_back()");
    REQUIRE(jumped != nullptr);
    CHECK(jumped->count == 1);
    CHECK(jumped->throws == 0);
    CHECK(root_of("xtest::parent()") != nullptr);  // at the root again
}

TEST_CASE("a tail call ends the caller's scope; the callee runs as its sibling") {
    Recording recording;
    tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::tail_*"));
    CHECK(xtest::tail_caller(1) >= 2);
    xtest::leaf();
    CHECK(tree_text() ==
          "xtest::tail_caller() 1000\n"
          "xtest::tail_target() 1000\n");
}

namespace annotated {
// Called from inside patched functions: starts and stops sessions while they run.
std::unique_ptr<tracetree::Monitor> g_monitor;
void start_watching_call() {
    TRACETREE_FUNCTION();
    g_monitor = std::make_unique<tracetree::Monitor>(tracetree::MonitorRequest("xtest::call"));
}
void stop_watching_call() {
    TRACETREE_FUNCTION();
    g_monitor.reset();
    const tracetree::xray::Status status = tracetree::xray::status();
    CHECK(status.draining == 1);  // this thread is inside it: patched until it returns
    CHECK(status.patched == 1);
}
}  // namespace annotated

TEST_CASE("patched while it runs: an exit without its entry is ignored, an entry's exit is awaited") {
    Recording recording;
    xtest::call(&annotated::start_watching_call);  // patched inside: its exit comes alone
    CHECK(tree_text() == "annotated::start_watching_call() 0\n");
    xtest::call(&annotated::stop_watching_call);   // unwanted inside: drains
    const tracetree::xray::Status status = tracetree::xray::status();
    CHECK(status.draining == 0);
    CHECK(status.patched == 0);
    CHECK_FALSE(sled_patched("xtest::call()"));
    CHECK(tree_text() ==
          "annotated::start_watching_call() 0\n"
          "xtest::call() 2000\n"
          "  annotated::stop_watching_call() 0\n");
}

TEST_CASE("bad input gets a clear error") {
    CHECK_THROWS_AS(tracetree::xray::set_callees(""), tracetree::PatternError);
    CHECK_THROWS_WITH_AS(tracetree::xray::set_callees("a(b", tracetree::PatternSyntax::regex),
                         doctest::Contains("bad pattern"), tracetree::PatternError);
    CHECK(tracetree::xray::status().error.empty());
    tracetree::xray::install();  // again: nothing changes
    CHECK(tracetree::xray::status().patched == 0);
}
