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
#include <csignal>
#include <functional>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

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
            // Exactly the matching one; a trace or recorder also what it calls, and the leaf calls nothing.
            CHECK_FALSE(sled_patched("xtest::parent()"));
            CHECK(tracetree::xray::status().patched == 1);
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

// The calls a monitor counted in its first interval, by name.
std::map<std::string, std::uint64_t> monitored_calls(tracetree::Monitor& monitor) {
    std::map<std::string, std::uint64_t> calls;
    const auto interval = monitor.next();
    if (interval)
        for (const auto& row : interval->rows) calls[row.name] = row.calls;
    return calls;
}

// A signal's handler for the test's length; the one before is put back.
class HandlerFor {
public:
    HandlerFor(int number, void (*handler)(int)) : number_(number) {
        struct sigaction action {};
        action.sa_handler = handler;
        sigemptyset(&action.sa_mask);
        set = sigaction(number, &action, &before_) == 0;
    }
    ~HandlerFor() {
        if (set) sigaction(number_, &before_, nullptr);
    }
    HandlerFor(const HandlerFor&) = delete;
    HandlerFor& operator=(const HandlerFor&) = delete;
    bool set = false;

private:
    int number_;
    struct sigaction before_ {};
};

[[gnu::noinline]] void far_below(int levels, void (*then)()) {  // about 1 KB of stack a level
    volatile char room[1024];
    room[0] = static_cast<char>(levels);
    if (levels > 0) far_below(levels - 1, then);
    else then();
    room[1] = room[0];
}

// A signal handler patched by a session, on a thread whose first XRay event it is: recording there
// would join the thread (allocations) inside the handler, and a signal that interrupted malloc would
// hang the process (ccache's SIGTERM handler did). The function is recorded only when called as one.
TEST_CASE("a patched function run as a signal handler is not recorded, so its thread does not join there") {
    Recording recording;
    HandlerFor handler(SIGUSR1, &xtest::on_signal);
    REQUIRE(handler.set);
    tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::on_signal").interval(1ms));  // reads the trampoline
    REQUIRE(sled_patched("xtest::on_signal()"));
    REQUIRE_FALSE(sled_patched("xtest::leaf()"));
    const int handled = xtest::signals_handled.load();
    bool joined_in_handler = true, joined_after = false;
    std::thread([&] {
        raise(SIGUSR1);  // delivered to this thread before raise() returns
        joined_in_handler = tracetree::detail::xray_thread() != nullptr;
        xtest::on_signal(0);  // a plain call
        joined_after = tracetree::detail::xray_thread() != nullptr;
    }).join();
    CHECK(xtest::signals_handled.load() == handled + 2);
    CHECK_FALSE(joined_in_handler);
    CHECK(joined_after);
    CHECK(monitored_calls(monitor)["xtest::on_signal()"] == 1);
}

// Nothing is kept about a handler, so nothing can stop the thread's recording once it is left, here
// by siglongjmp, with the next calls far below where the handler ran.
TEST_CASE("a patched signal handler left by siglongjmp: the thread's later calls are recorded, however deep") {
    Recording recording;
    HandlerFor handler(SIGUSR2, &xtest::on_signal_jumps);
    REQUIRE(handler.set);
    tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::*").interval(1ms));
    REQUIRE(sled_patched("xtest::on_signal_jumps()"));
    const int handled = xtest::signals_handled.load();
    std::thread([&] {
        xtest::leaf();
        sigjmp_buf back;
        xtest::handler_exit = &back;
        if (sigsetjmp(back, 1) == 0) raise(SIGUSR2);
        far_below(16, [] { xtest::parent(2); });
    }).join();
    CHECK(xtest::signals_handled.load() == handled + 1);
    auto calls = monitored_calls(monitor);
    CHECK(calls["xtest::on_signal_jumps()"] == 0);
    CHECK(calls["xtest::parent()"] == 1);
    CHECK(calls["xtest::leaf()"] == 1 + 1 + 2);  // before, the handler's call (what a handler calls is recorded), parent's
}

TEST_CASE("a function entered by a tail call shows under the caller that jumped to it, marked") {
    Recording recording;
    SUBCASE("a monitor of both") {
        tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::tail_*"));
        CHECK(xtest::tail_caller(1) >= 2);
        xtest::leaf();
        CHECK(tree_text() ==
              "xtest::tail_caller() 2000\n"
              "  xtest::tail_target() [tail call] 1000\n");
    }
    SUBCASE("a trace of the caller's caller: the tree keeps its shape, and the calls after it stay under it") {
        tracetree::TraceSession trace(tracetree::TraceRequest("xtest::tail_outer"));
        xtest::tail_outer(1);
        const auto traces = trace.collect(1s);
        REQUIRE(traces.size() == 1);
        CHECK(trace_text(traces[0]) ==
              "xtest::tail_outer() 5000\n"
              "  xtest::leaf() 1000\n"
              "  xtest::tail_relay() 3000\n"
              "    xtest::tail_worker() [tail call] 2000\n"
              "      xtest::leaf() 1000\n");
    }
    SUBCASE("a trace of the function that jumps ends when its target returns") {
        tracetree::TraceSession trace(tracetree::TraceRequest("xtest::tail_relay").depth(0));
        CHECK(sled_patched("xtest::tail_worker()"));  // a tail call does not count towards the depth
        CHECK_FALSE(sled_patched("xtest::leaf()"));
        xtest::tail_outer(1);
        const auto traces = trace.collect(1s);
        REQUIRE(traces.size() == 1);
        CHECK(trace_text(traces[0]) ==
              "xtest::tail_relay() 3000\n"
              "  xtest::tail_worker() [tail call] 2000\n");
    }
}

TEST_CASE("a tail call's target whose session ends between the jump and its entry: the caller's frame ends") {
    // The handler's events as the jump makes them, called directly so that the session can end in
    // between: the target's entry is then taken back, and with no frame of its own nothing keeps it
    // patched until its exit, which would have closed the caller's frame.
    Recording recording;
    tracetree::xray::install();
    std::int32_t caller = 0, target = 0;
    for (const auto& function : tracetree::xray::functions()) {
        if (function.name == "xtest::tail_caller()") caller = function.id;
        if (function.name == "xtest::tail_target()") target = function.id;
    }
    REQUIRE(caller != 0);
    REQUIRE(target != 0);
    tracetree::detail::XRayThread* thread = tracetree::detail::xray_thread();
    if (thread == nullptr) thread = tracetree::detail::xray_join();
    REQUIRE(thread != nullptr);
    const tracetree::detail::XRayTable& table = tracetree::detail::g_xray_table;
    const auto sp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0)) - 4096;  // below this test's frame
    auto monitor = std::make_unique<tracetree::Monitor>(tracetree::MonitorRequest("xtest::tail_*"));
    tracetree::detail::xray_enter(*thread, table, caller, sp);
    tracetree::detail::xray_tail(*thread, table, caller, sp);
    REQUIRE(thread->depth.load() == 1);  // the caller's frame stays open for its target
    monitor.reset();
    CHECK(sled_patched("xtest::tail_target()"));  // kept for the entry to come
    tracetree::detail::xray_enter(*thread, table, target, sp);
    CHECK(thread->depth.load() == 0);
    CHECK(tree_text() == "xtest::tail_caller() 0\n");
    tracetree::detail::xray_exit(*thread, table, target, sp);  // closes what is left open, whatever happened
    CHECK(tracetree::xray::status().patched == 0);
}

// The names of the XRay functions patched now, sorted.
static std::vector<std::string> patched_names() {
    std::vector<std::string> names;
    for (const auto& function : tracetree::xray::functions())
        if (function.patched) names.push_back(function.name);
    std::sort(names.begin(), names.end());
    return names;
}

TEST_CASE("a trace patches what its pattern matches and what that calls directly, to its depth") {
    using Names = std::vector<std::string>;
    const auto patched_by = [](int depth) {
        tracetree::TraceSession trace(tracetree::TraceRequest("xtest::chain_top").depth(depth));
        return patched_names();
    };
    CHECK(patched_by(0) == Names{"xtest::chain_top()"});
    CHECK(patched_by(1) == Names{"xtest::chain_mid()", "xtest::chain_top()", "xtest::leaf()"});
    const Names two = {"xtest::chain_low()", "xtest::chain_mid()", "xtest::chain_top()", "xtest::leaf()"};
    CHECK(patched_by(2) == two);
    {
        tracetree::TraceSession trace(tracetree::TraceRequest("xtest::chain_top"));  // the default depth
        CHECK(patched_names() == two);
    }
    const Names all = {"xtest::chain_low()", "xtest::chain_mid()", "xtest::chain_top()", "xtest::leaf()", "xtest::parent()"};
    CHECK(patched_by(3) == all);
    CHECK(patched_by(64) == all);
    {
        tracetree::FlightRecorder recorder(tracetree::RecorderRequest("xtest::chain_mid").depth(1));
        CHECK(patched_names() == Names{"xtest::chain_low()", "xtest::chain_mid()"});
    }
    CHECK(patched_names().empty());
    CHECK_THROWS_AS(tracetree::TraceSession(tracetree::TraceRequest("xtest::chain_top").depth(-1)), std::invalid_argument);
    CHECK_THROWS_AS(tracetree::TraceSession(tracetree::TraceRequest("xtest::chain_top").depth(65)), std::invalid_argument);

    // What the trace then shows: the calls down to the depth, not parent() below it; a function
    // patched for one path (leaf(), one call down) records on every path, here under chain_low().
    Recording recording;
    tracetree::TraceSession trace(tracetree::TraceRequest("xtest::chain_top").depth(2));
    xtest::chain_top();
    const auto traces = trace.collect(1s);
    REQUIRE(traces.size() == 1);
    CHECK(trace_text(traces[0]) ==
          "xtest::chain_top() 7000\n"
          "  xtest::chain_mid() 5000\n"
          "    xtest::chain_low() 4000\n"
          "      xtest::leaf() 1000\n"
          "  xtest::leaf() 1000\n");
}

TEST_CASE("a pattern that matches no function patches none, whatever the session") {
    {
        tracetree::TraceSession trace(tracetree::TraceRequest("xtest::no_such_function"));
        tracetree::FlightRecorder recorder(tracetree::RecorderRequest("nothing::*"));
        tracetree::Monitor monitor(tracetree::MonitorRequest("xtest::chain_tpo"));
        CHECK(tracetree::xray::status().patched == 0);
        CHECK(patched_names().empty());
    }
    CHECK(tracetree::xray::status().patched == 0);
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

// The names of a stack's callers, innermost first.
static std::vector<std::string> caller_names(const tracetree::StackTrace& stack) {
    std::vector<std::string> names;
    for (const auto& frame : stack.callers) names.push_back(frame.name);
    return names;
}

TEST_CASE("stack shows the machine's callers of an XRay function, patched or not, down to main") {
    Recording recording;
    tracetree::StackSession stack(tracetree::StackRequest("xtest::leaf"));
    CHECK(patched_names() == std::vector<std::string>{"xtest::leaf()"});  // its callers are not patched
    xtest::chain_top();  // chain_top -> chain_mid -> chain_low -> parent -> leaf
    const auto stacks = stack.collect(1s);
    REQUIRE(stacks.size() == 1);
    CHECK(stacks[0].frames.size() == 1);  // no open scope around it
    const std::vector<std::string> names = caller_names(stacks[0]);
    REQUIRE(names.size() >= 6);
    CHECK(std::vector<std::string>(names.begin(), names.begin() + 4) ==
          std::vector<std::string>{"xtest::parent()", "xtest::chain_low()", "xtest::chain_mid()", "xtest::chain_top()"});
    CHECK(names.back() == "main()");
    std::ostringstream text;
    tracetree::render(text, stacks[0]);
    CHECK(text.str().find("    @xtest::leaf()\n        at xtest::parent()\n        at xtest::chain_low()\n") != std::string::npos);
}

TEST_CASE("stack shows the machine's callers of an annotated scope, with the lines of the annotated ones") {
    Recording recording;
    tracetree::StackSession stack(tracetree::StackRequest("annotated::inner"));
    CHECK(tracetree::xray::status().patched == 0);  // annotated: nothing to patch
    annotated::service();  // service -> outer -> xtest::call (no scope) -> inner
    const auto stacks = stack.collect(1s);
    REQUIRE(stacks.size() == 1);
    const std::vector<std::string> names = caller_names(stacks[0]);
    REQUIRE(names.size() >= 4);
    CHECK(std::vector<std::string>(names.begin(), names.begin() + 3) ==
          std::vector<std::string>{"xtest::call()", "annotated::outer()", "annotated::service()"});
    CHECK(stacks[0].callers[0].line == 0);  // no scope: no line
    CHECK(stacks[0].callers[1].file.find("test_xray.cpp") != std::string::npos);
    CHECK(stacks[0].callers[1].line != 0);
    CHECK(names.back() == "main()");
    // The open scopes alone, as before: inner, outer, service.
    REQUIRE(stacks[0].frames.size() == 3);
    CHECK(stacks[0].frames[1].name == "annotated::outer()");
}

TEST_CASE("stack of a recursive XRay function: every level is a caller") {
    Recording recording;
    tracetree::StackSession stack(tracetree::StackRequest("xtest::recurse").limit(3));
    xtest::recurse(2);  // recurse(2) -> recurse(1) -> recurse(0)
    const auto stacks = stack.collect(1s);
    REQUIRE(stacks.size() == 3);
    // The innermost ends first: its callers are the two outer levels, then this test.
    const std::vector<std::string> names = caller_names(stacks[0]);
    REQUIRE(names.size() >= 3);
    CHECK(names[0] == "xtest::recurse()");
    CHECK(names[1] == "xtest::recurse()");
    CHECK(names[2] != "xtest::recurse()");
    CHECK(caller_names(stacks[2])[0] != "xtest::recurse()");  // the outermost
}

TEST_CASE("the library's own functions get no sleds, whatever the build's XRay flags") {
    // This file is built with -fxray-instruction-threshold=1, so every function it compiles could get
    // sleds; the headers keep theirs out (core/abi.hpp), except the handler's two probes.
    tracetree::xray::install();
    std::vector<std::string> ours;
    for (const auto& function : tracetree::xray::functions())
        if (function.name.rfind("tracetree::", 0) == 0)  // without the ABI's inline namespace (tracetree::v0_2::)
            ours.push_back("tracetree::" + function.name.substr(function.name.find("::", 11) + 2));
    const auto has = [&](const std::string& name) { return std::find(ours.begin(), ours.end(), name) != ours.end(); };
    CHECK(has("tracetree::detail::xray_probe()"));
    CHECK(has("tracetree::detail::xray_probe_target()"));
    for (const char* written : {"tracetree::detail::function_name()", "tracetree::render()", "tracetree::profile()",
                                "tracetree::detail::RuntimeImpl::begin()", "tracetree::detail::xray_mark_wanted()",
                                "tracetree::detail::name_stack()", "tracetree::detail::direct_calls()"}) {
        CAPTURE(written);
        CHECK_FALSE(has(written));
    }
    // What is left is made by the compiler: implicit destructors and copies, lambdas' invokers.
    MESSAGE(ours.size() << " functions of tracetree's with sleds in this binary");
}
