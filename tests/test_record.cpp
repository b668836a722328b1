// Recording: folding, call-site identity, exceptions, bounds, recursion, the runtime switch.
#include "support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

using namespace test;
using tracetree::Nanos;

namespace demo {
struct Widget {
    void draw() const {
        TRACETREE_FUNCTION();
        advance(2ms);
    }
};
template <class T>
T twice(T value) {
    TRACETREE_FUNCTION();
    return value * 2;
}
namespace {
void hidden() { TRACETREE_FUNCTION(); }
}  // namespace
}  // namespace demo

static void work(std::chrono::nanoseconds cost) {
    TRACETREE_SCOPE("work");
    advance(cost);
}

static void recurse(int levels) {
    TRACETREE_SCOPE("recurse");
    if (levels > 1) recurse(levels - 1);
}

static void maybe_throw(bool fail) {
    TRACETREE_SCOPE("maybe throw");
    advance(1ms);
    if (fail) throw std::runtime_error("fail");
}

TEST_CASE("repeated calls at one call site fold into count, min, max, total") {
    FakeClock clock;
    {
        TRACETREE_SCOPE("outer");
        work(1ms);
        work(5ms);
        work(3ms);
    }
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 1);
    const auto& outer = thread.roots[0];
    CHECK(outer.name == "outer");
    CHECK(outer.count == 1);
    CHECK(outer.total == 9ms);
    REQUIRE(outer.children.size() == 1);
    const auto& folded = outer.children[0];
    CHECK(folded.name == "work");
    CHECK(folded.count == 3);
    CHECK(folded.min == 1ms);
    CHECK(folded.max == 5ms);
    CHECK(folded.total == 9ms);
    CHECK(folded.self() == 9ms);
    CHECK(outer.self() == 0ms);
}

TEST_CASE("a node is one call site under one parent") {
    FakeClock clock;
    {
        TRACETREE_SCOPE("parent");
        { TRACETREE_SCOPE("same name"); advance(1ms); }
        { TRACETREE_SCOPE("same name"); advance(2ms); }  // another line: another node, as in Arthas
        work(1ms);
    }
    work(4ms);  // the same site under another parent
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 2);
    const auto& parent = thread.roots[0];
    REQUIRE(parent.children.size() == 3);
    CHECK(parent.children[0].name == "same name");
    CHECK(parent.children[1].name == "same name");
    CHECK(parent.children[0].line + 1 == parent.children[1].line);
    CHECK(parent.children[0].total == 1ms);
    CHECK(parent.children[1].total == 2ms);
    CHECK(parent.children[2].total == 1ms);
    CHECK(thread.roots[1].name == "work");
    CHECK(thread.roots[1].total == 4ms);
    CHECK(parent.self() == 0ms);
}

TEST_CASE("TRACETREE_FUNCTION names the scope Class::method()") {
    FakeClock clock;
    demo::Widget{}.draw();
    demo::twice(21);
    demo::twice(2.5);  // another instantiation is another call site with the same name
    demo::hidden();
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 4);
    CHECK(thread.roots[0].name == "demo::Widget::draw()");
    CHECK(thread.roots[0].total == 2ms);
    CHECK(thread.roots[1].name == "demo::twice()");
    CHECK(thread.roots[2].name == "demo::twice()");
    CHECK(thread.roots[3].name == "demo::(anonymous namespace)::hidden()");
}

TEST_CASE("function names drop return types, parameters, qualifiers and template arguments") {
    using tracetree::detail::function_name;
    CHECK(function_name("void ns::Class::method(const std::string&) const") == "ns::Class::method");
    CHECK(function_name("std::vector<int, std::allocator<int> > ns::C<T>::get(int) [with T = int]") == "ns::C::get");
    CHECK(function_name("int main()") == "main");
    CHECK(function_name("auto Outer::Inner::operator()(int) const") == "Outer::Inner::operator()");
    CHECK(function_name("bool ns::Point::operator<(const ns::Point&) const") == "ns::Point::operator<");
    CHECK(function_name("void (anonymous namespace)::helper()") == "(anonymous namespace)::helper");
    CHECK(function_name("static void Registry::add(Item*)") == "Registry::add");
    CHECK(function_name("") == "");
}

TEST_CASE("a scope left by an exception is timed and counts the throw") {
    FakeClock clock;
    {
        TRACETREE_SCOPE("caller");
        for (int i = 0; i < 3; ++i) {
            try {
                maybe_throw(i != 1);
            } catch (const std::runtime_error&) {
            }
        }
    }
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 1);
    const auto& node = thread.roots[0].children.at(0);
    CHECK(node.name == "maybe throw");
    CHECK(node.count == 3);
    CHECK(node.throws == 2);
    CHECK(node.total == 3ms);
    CHECK(thread.roots[0].throws == 0);
}

namespace {
struct TracedDestructor {
    ~TracedDestructor() {
        TRACETREE_SCOPE("cleanup during unwinding");  // opened and closed while an exception flies
        advance(1ms);
    }
};
}  // namespace

TEST_CASE("a scope that runs inside unwinding but does not throw is not counted as thrown") {
    FakeClock clock;
    try {
        TRACETREE_SCOPE("thrower");
        TracedDestructor cleanup;
        throw std::runtime_error("x");
    } catch (const std::runtime_error&) {
    }
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 1);
    CHECK(thread.roots[0].throws == 1);
    const auto* cleanup = find_child(thread.roots[0], "cleanup during unwinding");
    REQUIRE(cleanup != nullptr);
    CHECK(cleanup->throws == 0);
    CHECK(cleanup->count == 1);
}

TEST_CASE("recursion past the depth limit is bounded, counted and shown") {
    FakeClock clock;
    const auto saved = tracetree::limits();
    tracetree::set_limits({8, saved.max_nodes});
    recurse(100);
    tracetree::set_limits(saved);
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 1);
    const tracetree::Node* node = &thread.roots[0];
    int depth = 1;
    while (!node->children.empty()) {
        node = &node->children[0];
        ++depth;
    }
    CHECK(depth == 8);
    CHECK(node->dropped == 92);
    CHECK(thread.dropped_depth == 92);
    CHECK(tracetree::to_string(tracetree::profile()).find("`---[not recorded: 92 calls past the depth or node limit]") !=
          std::string::npos);
}

TEST_CASE("deep recursion under the default limits keeps memory per call site, not per call") {
    FakeClock clock;
    // Far past the limit (256), within the stack of a sanitizer build at -O0: 5.5 KB a level there.
    constexpr int kLevels = 1000;
    recurse(kLevels);
    const std::uint32_t nodes_after_first = tracetree::detail::runtime().this_thread()->main->nodes();
    for (int i = 0; i < 100; ++i) recurse(kLevels);
    CHECK(tracetree::detail::runtime().this_thread()->main->nodes() == nodes_after_first);
    CHECK(nodes_after_first <= tracetree::Limits{}.max_depth + 400);  // earlier tests' sites share the tree
    const auto thread = mine();
    CHECK(thread.dropped_depth == 101u * (kLevels - tracetree::Limits{}.max_depth));
}

TEST_CASE("call sites past the node limit are counted, not kept") {
    const auto saved = tracetree::limits();
    tracetree::set_limits({saved.max_depth, 16});  // applies to threads that start recording now
    std::uint64_t dropped = 0;
    std::size_t kept = 0;
    std::thread([&] {
        tracetree::set_thread_name("node-limit");
        for (int i = 0; i < 100; ++i) {
            TRACETREE_SCOPE_DYNAMIC("site " + std::to_string(i));
        }
        const auto profile = tracetree::profile();
        const auto* thread = find_thread(profile, "node-limit");
        REQUIRE(thread != nullptr);
        dropped = thread->dropped_nodes;
        kept = thread->roots.size();
    }).join();
    tracetree::set_limits(saved);
    CHECK(kept == 15 + 1);  // 15 nodes besides the root, plus the marker of top-level drops
    CHECK(dropped == 85);
}

TEST_CASE("limits reject absurd values") {
    CHECK_THROWS_WITH_AS(tracetree::set_limits({0, 1000}), "tracetree: max_depth must be between 1 and 4096, got 0",
                         std::invalid_argument);
    CHECK_THROWS_AS(tracetree::set_limits({10, 1u << 30}), std::invalid_argument);
    CHECK_THROWS_AS(tracetree::set_limits({10, 3}), std::invalid_argument);
    CHECK(tracetree::limits().max_depth == tracetree::Limits{}.max_depth);
}

TEST_CASE("the runtime switch stops and resumes recording") {
    FakeClock clock;
    tracetree::set_enabled(false);
    CHECK_FALSE(tracetree::enabled());
    work(1ms);
    tracetree::set_enabled(true);
    CHECK(mine().roots.empty());
    work(1ms);
    CHECK(mine().roots.size() == 1);
}

TEST_CASE("run-time names fold by name and are cut when huge") {
    FakeClock clock;
    for (const char* url : {"/send", "/health", "/send"}) {
        TRACETREE_SCOPE_DYNAMIC(std::string("GET ") + url);
        advance(1ms);
    }
    { TRACETREE_SCOPE_DYNAMIC(std::string(5 << 20, 'x')); }
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 3);
    CHECK(thread.roots[0].name == "GET /send");
    CHECK(thread.roots[0].count == 2);
    CHECK(thread.roots[1].name == "GET /health");
    CHECK(thread.roots[2].name.size() == tracetree::Limits{}.max_name_length);
}

TEST_CASE("reset clears what was recorded") {
    FakeClock clock;
    work(1ms);
    tracetree::reset();
    CHECK(mine().roots.empty());  // pending until this thread's next outermost scope, shown as empty
    work(2ms);
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 1);
    CHECK(thread.roots[0].count == 1);
    CHECK(thread.roots[0].total == 2ms);
}

TEST_CASE("a second translation unit records into the same tree") {
    FakeClock clock;
    CHECK(second_tu_work(4) == 6);
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 1);
    CHECK(thread.roots[0].name == "second_tu_work()");
    REQUIRE(thread.roots[0].children.size() == 1);
    CHECK(thread.roots[0].children[0].count == 4);
}

TEST_CASE("a scope still running shows what finished below it") {
    FakeClock clock;
    TRACETREE_SCOPE("still running");
    work(1ms);
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 1);
    CHECK(thread.roots[0].count == 0);
    CHECK(thread.roots[0].children.at(0).count == 1);
}

static void dynamic_a() { TRACETREE_SCOPE_DYNAMIC(std::string("same")); }
static void dynamic_b() { TRACETREE_SCOPE_DYNAMIC(std::string("same")); }

TEST_CASE("two run-time-named call sites with one name are two nodes, each with its line") {
    FakeClock clock;
    {
        TRACETREE_SCOPE("parent");
        dynamic_a();
        dynamic_b();
        dynamic_a();
    }
    const auto thread = mine();
    REQUIRE(thread.roots.size() == 1);
    const auto& children = thread.roots[0].children;
    REQUIRE(children.size() == 2);
    CHECK(children[0].count == 2);
    CHECK(children[1].count == 1);
    CHECK(children[0].line != 0);
    CHECK(children[0].line + 1 == children[1].line);
}

TEST_CASE("a run-time name is not computed while recording is off") {
    int computed = 0;
    auto name = [&] {
        ++computed;
        return std::string("computed");
    };
    tracetree::set_enabled(false);
    { TRACETREE_SCOPE_DYNAMIC(name()); }
    tracetree::set_enabled(true);
    CHECK(computed == 0);
    { TRACETREE_SCOPE_DYNAMIC(name()); }
    CHECK(computed == 1);
}

static void filler(int i) { TRACETREE_SCOPE_DYNAMIC("filler " + std::to_string(i)); }

TEST_CASE("calls inside a scope cut by the node limit are dropped with it, not moved to its parent") {
    const auto saved = tracetree::limits();
    tracetree::set_limits({saved.max_depth, 16});
    tracetree::ThreadProfile thread;
    std::thread([&] {
        tracetree::set_thread_name("node-overflow");
        TRACETREE_SCOPE("parent");
        for (int i = 0; i < 14; ++i) filler(i);  // with the root and "parent", the tree is full
        {
            TRACETREE_SCOPE("one too many");
            for (int i = 0; i < 3; ++i) filler(0);  // exists under parent, but these calls are not under it
        }
        filler(1);  // after the cut scope: recorded normally again
        const auto profile = tracetree::profile();
        if (const auto* found = find_thread(profile, "node-overflow")) thread = *found;  // no REQUIRE off the test's thread
    }).join();
    tracetree::set_limits(saved);
    REQUIRE(thread.roots.size() == 1);
    const auto& parent = thread.roots[0];
    CHECK(parent.children.size() == 14);
    CHECK(parent.children[0].count == 1);  // the three nested calls did not land here
    CHECK(parent.children[1].count == 2);
    CHECK(parent.dropped == 1 + 3);
    CHECK(thread.dropped_nodes == 4);
}

TEST_CASE("reset reaches a thread that never leaves its outermost scope") {
    FakeClock clock;
    std::atomic<int> phase{0};
    std::atomic<std::uint64_t> rounds{0};
    tracetree::ThreadProfile seen;
    std::thread worker([&] {
        tracetree::set_thread_name("long-lived");
        TRACETREE_SCOPE("run loop");  // open for the thread's whole life
        while (phase.load() < 2) {
            { TRACETREE_SCOPE("tick"); }
            rounds.fetch_add(1);
        }
    });
    while (rounds.load() < 100) {
    }
    tracetree::reset();
    const std::uint64_t at_reset = rounds.load();
    while (rounds.load() < at_reset + 100) {
    }
    phase = 1;
    const auto profile = tracetree::profile();
    const auto* thread = find_thread(profile, "long-lived");
    REQUIRE(thread != nullptr);
    REQUIRE(thread->roots.size() == 1);
    const auto* tick = find_child(thread->roots[0], "tick");
    REQUIRE(tick != nullptr);
    CHECK(tick->count > 0);
    CHECK(tick->count < rounds.load());  // the ticks before the reset are gone
    phase = 2;
    worker.join();
}

namespace thrower {
struct NotStd {};
void fails(int how) {
    TRACETREE_FUNCTION();
    if (how == 0) TRACETREE_THROW(std::invalid_argument("need >= 2"));
    if (how == 1) throw std::runtime_error("no line");
    if (how == 2) throw NotStd{};
}
void calls(int how) {
    TRACETREE_FUNCTION();
    try {
        fails(how);
    } catch (...) {  // caught here: the throw shows under fails(), where it was thrown
    }
}
}  // namespace thrower

TEST_CASE("the throw hook says whether it sees this process's throws, and why not") {
    const tracetree::RecorderInfo info = tracetree::recorder_info();
    CHECK(info.throw_hook == info.throw_hook_note.empty());
    if (!TRACETREE_TEST_ASAN) CHECK(info.throw_hook);
    if (!info.throw_hook) CHECK(info.throw_hook_note.find("sanitizer") != std::string::npos);
}

TEST_CASE("a throw is a node under the innermost open scope: type, line, what(), folded by site") {
    FakeClock clock;
    if (!throws_seen()) return;  // clang's ASan: the test above checks that the hook says so
    for (int i = 0; i < 3; ++i) thrower::calls(0);
    thrower::calls(1);
    thrower::calls(2);
    const auto thread = mine();
    const tracetree::Node* calls = find_root(thread, "thrower::calls()");
    REQUIRE(calls != nullptr);
    const tracetree::Node* fails = find_child(*calls, "thrower::fails()");
    REQUIRE(fails != nullptr);
    CHECK(fails->count == 5);
    CHECK(fails->throws == 5);
    CHECK(calls->throws == 0);  // caught inside: calls() returned normally
    REQUIRE(fails->children.size() == 3);
    const tracetree::Node& helper = fails->children[0];
    CHECK(helper.kind == tracetree::NodeKind::thrown);
    CHECK(helper.name == "std::invalid_argument");
    CHECK(helper.count == 3);
    CHECK(helper.line == fails->line + 1);  // the TRACETREE_THROW line, right below the function's scope
    CHECK(helper.message == std::optional<std::string>("need >= 2"));
    CHECK(fails->children[1].name == "std::runtime_error");
    CHECK(fails->children[1].line == 0);  // a plain throw: the line is not known
    CHECK(fails->children[1].message == std::optional<std::string>("no line"));
    CHECK(fails->children[2].name == "thrower::NotStd");
    CHECK_FALSE(fails->children[2].message.has_value());  // no what(): no message part
    const std::string text = tracetree::to_string(tracetree::profile());
    CHECK(text.find("`---[count=3] throw:std::invalid_argument #" + std::to_string(helper.line) + " [need >= 2]") ==
          std::string::npos);  // not the last child: +---
    CHECK(text.find("+---[count=3] throw:std::invalid_argument #" + std::to_string(helper.line) + " [need >= 2]") !=
          std::string::npos);
    CHECK(text.find("`---throw:thrower::NotStd\n") != std::string::npos);
}

TEST_CASE("a throw outside any scope, or with recording off, leaves no node") {
    FakeClock clock;
    try {
        throw std::runtime_error("nowhere");
    } catch (const std::exception&) {
    }
    tracetree::set_enabled(false);
    thrower::calls(1);
    tracetree::set_enabled(true);
    CHECK(find_root(mine(), "thrower::calls()") == nullptr);
}
