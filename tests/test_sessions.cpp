// Traces on demand: patterns, thresholds, limits, several sessions, nesting, waiting.
#include "support.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace test;
using tracetree::TraceRequest;
using tracetree::TraceSession;

namespace shop {
struct Mapper {
    static void lookup(std::chrono::nanoseconds cost) {
        TRACETREE_FUNCTION();
        advance(cost);
    }
    static void map(int lookups, std::chrono::nanoseconds each) {
        TRACETREE_FUNCTION();
        for (int i = 0; i < lookups; ++i) lookup(each);
    }
};
static void service(int lookups) {
    TRACETREE_FUNCTION();
    advance(1ms);
    Mapper::map(lookups, 2ms);
}
}  // namespace shop

// The session flag as this thread's recorder sees it.
static int sessions_flag() {
    return tracetree::detail::runtime().this_thread()->arena.flags.load() & tracetree::detail::kSessions;
}

static TraceRequest request(std::string pattern, std::chrono::nanoseconds min_cost = 0ms, std::uint64_t limit = 1) {
    TraceRequest r(std::move(pattern));
    r.min_cost(min_cost);
    r.limit(limit);
    return r;
}

TEST_CASE("a session captures each invocation on its own, not the running totals") {
    FakeClock clock;
    TraceSession session(request("Mapper::map", 0ms, 2));
    shop::Mapper::map(3, 1ms);
    shop::Mapper::map(5, 2ms);
    shop::Mapper::map(7, 1ms);  // past the limit
    const auto traces = session.collect(1s);
    REQUIRE(traces.size() == 2);
    CHECK(traces[0].root.name == "shop::Mapper::map()");
    CHECK(traces[0].root.count == 1);
    CHECK(traces[0].root.total == 3ms);
    CHECK(traces[0].root.children.at(0).count == 3);
    CHECK(traces[1].root.total == 10ms);
    CHECK(traces[1].root.children.at(0).count == 5);
    CHECK(traces[1].root.children.at(0).max == 2ms);
    CHECK(traces[0].thread_name == "test-main");
    CHECK(session.done());
    CHECK(session.captured() == 2);
    // What was captured still counts in the cumulative profile.
    const auto thread = mine();
    const auto* map = find_root(thread, "shop::Mapper::map()");
    REQUIRE(map != nullptr);
    CHECK(map->count == 3);
    CHECK(map->children.at(0).count == 15);
}

TEST_CASE("a minimum cost skips cheap invocations") {
    FakeClock clock;
    TraceSession session(request("shop::Mapper::map", 5ms, 1));
    shop::Mapper::map(1, 1ms);  // 1 ms: skipped
    shop::Mapper::map(4, 2ms);  // 8 ms: captured
    const auto trace = session.next(1s);
    REQUIRE(trace.has_value());
    CHECK(trace->root.total == 8ms);
    CHECK(session.done());
}

TEST_CASE("a watched scope nested in a watched scope is reported once, inside the outer one") {
    FakeClock clock;
    TraceSession session(request("*::*", 0ms, 3));  // matches service, map and lookup
    shop::service(2);
    shop::service(1);
    shop::service(1);
    const auto traces = session.collect(1s);
    REQUIRE(traces.size() == 3);
    for (const auto& trace : traces) CHECK(trace.root.name == "shop::service()");
    const auto& map = traces[0].root.children.at(0);
    CHECK(map.name == "shop::Mapper::map()");
    CHECK(map.children.at(0).name == "shop::Mapper::lookup()");
    CHECK(map.children.at(0).count == 2);
}

TEST_CASE("several sessions run at once, also on nested scopes") {
    FakeClock clock;
    TraceSession outer(request("service", 0ms, 1));
    TraceSession inner(request("Mapper::lookup", 0ms, 2));
    TraceSession unrelated(request("no such scope", 0ms, 1));
    shop::service(2);
    const auto outer_traces = outer.collect(1s);
    REQUIRE(outer_traces.size() == 1);
    CHECK(outer_traces[0].root.total == 5ms);
    const auto inner_traces = inner.collect(1s);
    REQUIRE(inner_traces.size() == 2);
    CHECK(inner_traces[0].root.name == "shop::Mapper::lookup()");
    CHECK(inner_traces[0].root.total == 2ms);
    CHECK_FALSE(unrelated.next(1ms).has_value());
    CHECK_FALSE(unrelated.done());
}

TEST_CASE("patterns: globs, the :: suffix rule, regexes") {
    tracetree::Pattern glob("Mapper::*", tracetree::PatternSyntax::glob);
    CHECK(glob.matches("shop::Mapper::map"));
    CHECK(glob.matches("Mapper::lookup"));
    CHECK_FALSE(glob.matches("shop::Mapperx::map"));
    tracetree::Pattern suffix("map", tracetree::PatternSyntax::glob);
    CHECK(suffix.matches("shop::Mapper::map"));
    CHECK_FALSE(suffix.matches("shop::Mapper::mapper"));
    tracetree::Pattern partial("apper::map", tracetree::PatternSyntax::glob);
    CHECK_FALSE(partial.matches("shop::Mapper::map"));
    tracetree::Pattern question("m?p", tracetree::PatternSyntax::glob);
    CHECK(question.matches("map"));
    CHECK_FALSE(question.matches("mp"));
    tracetree::Pattern regex("Mapper::(map|lookup)", tracetree::PatternSyntax::regex);
    CHECK(regex.matches("shop::Mapper::lookup"));
    CHECK_FALSE(regex.matches("shop::Mapper::lookups"));
    tracetree::Pattern stars("**a**", tracetree::PatternSyntax::glob);
    CHECK(stars.matches("a"));
    CHECK_FALSE(stars.matches("b"));
}

TEST_CASE("a regex session") {
    FakeClock clock;
    auto r = request("shop::Mapper::(map|nothing)", 0ms, 1);
    r.regex(true);
    TraceSession session(std::move(r));
    shop::service(1);
    const auto trace = session.next(1s);
    REQUIRE(trace.has_value());
    CHECK(trace->root.name == "shop::Mapper::map()");
}

TEST_CASE("bad requests get clear errors") {
    CHECK_THROWS_WITH_AS(TraceSession(request("")), "tracetree: bad pattern '': empty pattern at offset 0",
                         tracetree::PatternError);
    auto bad_regex = request("(unclosed");
    bad_regex.regex(true);
    CHECK_THROWS_AS(TraceSession(std::move(bad_regex)), std::invalid_argument);
    CHECK_THROWS_WITH_AS(TraceSession(request("x", 0ms, 2000000)),
                         "tracetree: limit must be between 1 and 1000000 (0: until stopped), got 2000000",
                         std::invalid_argument);
    CHECK_THROWS_AS(TraceSession(request("x", -1ms, 1)), std::invalid_argument);
    CHECK_THROWS_AS(TraceSession(request(std::string(5000, '*'))), std::invalid_argument);
    auto huge_repeat = request("a{3111111111111111111}");
    huge_repeat.regex(true);
    CHECK_THROWS_AS(TraceSession(std::move(huge_repeat)), tracetree::PatternError);
    auto fine_repeat = request("a{2,100}\\{9999\\}");
    fine_repeat.regex(true);
    CHECK_NOTHROW(TraceSession(std::move(fine_repeat)));
    std::vector<TraceSession> many;
    for (int i = 0; i < tracetree::detail::kMaxSessions; ++i) many.emplace_back(request("x"));
    CHECK_THROWS_WITH_AS(TraceSession(request("x")), "tracetree: too many sessions (at most 32 at once)",
                         std::invalid_argument);
}

TEST_CASE("sessions end cleanly: the slow path is off once none is left") {
    {
        TraceSession session(request("x"));
        CHECK((sessions_flag()) != 0);
    }
    CHECK((sessions_flag()) == 0);
    TraceSession finished(request("shop::service", 0ms, 1));
    shop::service(0);
    CHECK(finished.done());  // reaching the limit also unregisters the session
    CHECK((sessions_flag()) == 0);
}

TEST_CASE("another thread waits for a capture, with a timeout") {
    FakeClock clock;
    TraceSession session(request("Mapper::map", 0ms, 1));
    CHECK_FALSE(session.next(1ms).has_value());  // nothing ran yet: the wait times out
    std::optional<tracetree::Trace> received;
    std::thread waiter([&] { received = session.next(60s); });
    shop::Mapper::map(2, 1ms);
    waiter.join();
    REQUIRE(received.has_value());
    CHECK(received->root.total == 2ms);
}

TEST_CASE("a callback runs on the thread that finished the invocation") {
    FakeClock clock;
    std::thread::id seen;
    std::uint64_t calls = 0;
    auto r = request("service", 0ms, 1);
    r.on_trace([&](const tracetree::Trace& trace) {
        seen = std::this_thread::get_id();
        calls += trace.root.count;
    });
    TraceSession session(std::move(r));
    tracetree::annotate("ignored", "no capture is open");  // outside a capture: no effect, no crash
    std::thread worker([] { shop::service(1); });
    const auto worker_id = worker.get_id();
    worker.join();
    CHECK(seen == worker_id);
    CHECK(calls == 1);
    CHECK(session.done());
    CHECK(session.collect(1ms).empty());  // delivered to the callback, not queued
}

TEST_CASE("what a callback throws is the callback's, not the traced program's: no throw node") {
    FakeClock clock;
    std::uint64_t calls = 0;
    TraceSession session(request("handle", 0ms, 2).on_trace([&](const tracetree::Trace&) {
        ++calls;
        throw std::runtime_error("from the callback");  // tracetree catches it
    }));
    {
        TRACETREE_SCOPE("outer");
        for (int i = 0; i < 2; ++i) {
            TRACETREE_SCOPE("handle");
        }
        if (throws_seen()) {  // a throw of the program's own still counts, under the scope that threw
            try {
                throw std::logic_error("the program's");
            } catch (const std::logic_error&) {
            }
        }
    }
    CHECK(calls == 2);
    const auto thread = mine();
    const tracetree::Node* outer = find_root(thread, "outer");
    REQUIRE(outer != nullptr);
    CHECK(find_child(*outer, "std::runtime_error") == nullptr);
    CHECK((find_child(*outer, "std::logic_error") != nullptr) == throws_seen());
}

TEST_CASE("a session with limit 0 runs until stopped") {
    FakeClock clock;
    std::uint64_t calls = 0;
    TraceSession session(request("handle", 0ms, 0).on_trace([&](const tracetree::Trace&) { ++calls; }));
    for (int i = 0; i < 1500; ++i) {
        TRACETREE_SCOPE("handle");
    }
    CHECK(calls == 1500);
    CHECK_FALSE(session.done());
    session.stop();
    CHECK(session.done());
}

TEST_CASE("annotations are this thread's context: set before or during a capture, kept until replaced") {
    FakeClock clock;
    TraceSession session(request("handle", 0ms, 3));
    tracetree::annotate("uri", "/send");  // at accept time, before the traced scope opens
    {
        TRACETREE_SCOPE("handle");
        tracetree::annotate("request_id", "42");
    }
    tracetree::annotate("request_id", "43");  // replaced
    tracetree::annotate("uri", "");            // removed
    { TRACETREE_SCOPE("handle"); }
    tracetree::clear_annotations();
    { TRACETREE_SCOPE("handle"); }
    const auto traces = session.collect(1s);
    REQUIRE(traces.size() == 3);
    using Fields = std::vector<std::pair<std::string, std::string>>;
    CHECK(traces[0].fields == Fields{{"uri", "/send"}, {"request_id", "42"}});
    CHECK(traces[1].fields == Fields{{"request_id", "43"}});
    CHECK(traces[2].fields.empty());
}

TEST_CASE("move-assigning a session stops the one it replaces") {
    for (int i = 0; i < 3 * tracetree::detail::kMaxSessions; ++i) {
        TraceSession session(request("a"));
        session = TraceSession(request("b"));
    }
    CHECK((sessions_flag()) == 0);
}

TEST_CASE("an invocation costing exactly the minimum is captured") {
    FakeClock clock;
    TraceSession session(request("Mapper::map", 4ms, 1));
    shop::Mapper::map(2, 2ms);
    CHECK(session.next(1s).has_value());
}

TEST_CASE("stop() waits for a callback that is still running") {
    FakeClock clock;
    std::atomic<bool> entered{false}, release{false}, finished{false};
    auto r = request("service", 0ms, 1);
    r.on_trace([&](const tracetree::Trace&) {
        entered = true;
        while (!release.load()) {
        }
        finished = true;
    });
    TraceSession session(std::move(r));
    std::thread worker([] { shop::service(1); });
    while (!entered.load()) {
    }
    bool finished_when_stopped = false;
    std::thread stopper([&] {
        session.stop();
        finished_when_stopped = finished.load();
    });
    release = true;
    stopper.join();
    worker.join();
    CHECK(finished_when_stopped);
}

TEST_CASE("stop() from inside its own callback does not wait for itself") {
    FakeClock clock;
    TraceSession* self = nullptr;
    auto r = request("service", 0ms, 2);
    r.on_trace([&](const tracetree::Trace&) { self->stop(); });
    TraceSession session(std::move(r));
    self = &session;
    shop::service(1);
    CHECK(session.done());
}

TEST_CASE("stop() wakes a thread waiting for a capture") {
    TraceSession session(request("never runs"));
    std::optional<tracetree::Trace> received;
    std::thread waiter([&] { received = session.next(std::chrono::hours(1)); });
    session.stop();
    waiter.join();
    CHECK_FALSE(received.has_value());
}

// ---- a capture that waits for the first thing recorded under its root -----------------------------
// A trace session starts recording an invocation into its own tree only when something is recorded
// under the watched scope (RuntimeImpl::begin); these tests use the real clock, so that nested scopes
// take the recorder's inline path, which reaches the runtime only through the guard node.

namespace deferred {
enum class Shape { leaf, child, name, thrown, too_deep };

void root(Shape shape) {
    TRACETREE_SCOPE("deferred.root");
    switch (shape) {
    case Shape::leaf: break;
    case Shape::child:
        for (int i = 0; i < 2; ++i) {
            TRACETREE_SCOPE("deferred.child");
        }
        break;
    case Shape::name: {
        const std::string name = "deferred name";
        TRACETREE_SCOPE_DYNAMIC(name);
        break;
    }
    case Shape::thrown: TRACETREE_THROW(std::runtime_error("deferred throw"));
    case Shape::too_deep: {
        TRACETREE_SCOPE("deferred.too deep");  // the depth limit is 1 while this shape runs
        break;
    }
    }
}

// Runs every shape `rounds` times on a new thread, the depth limit 1 for too_deep only; that
// thread's profile.
tracetree::ThreadProfile run_shapes(const std::string& thread_name, int rounds) {
    tracetree::ThreadProfile recorded;
    std::thread([&] {
        tracetree::set_thread_name(thread_name);
        for (int round = 0; round < rounds; ++round) {
            for (const Shape shape : {Shape::leaf, Shape::child, Shape::name, Shape::thrown, Shape::too_deep}) {
                const tracetree::Limits saved = tracetree::limits();
                tracetree::Limits shallow = saved;
                shallow.max_depth = 1;
                if (shape == Shape::too_deep) tracetree::set_limits(shallow);
                try {
                    root(shape);
                } catch (const std::runtime_error&) {
                }
                tracetree::set_limits(saved);
            }
        }
        const tracetree::Profile profile = tracetree::profile();
        if (const tracetree::ThreadProfile* thread = find_thread(profile, thread_name)) recorded = *thread;
    }).join();
    return recorded;
}

// What `rounds` rounds of the shapes leave in a profile, whether or not any was captured.
void check_profile(const tracetree::ThreadProfile& thread, std::uint64_t rounds) {
    const tracetree::Node* root = find_root(thread, "deferred.root");
    REQUIRE(root != nullptr);
    CHECK(root->count == 5 * rounds);
    CHECK(root->throws == rounds);
    CHECK(root->dropped == rounds);
    const tracetree::Node* child = find_child(*root, "deferred.child");
    REQUIRE(child != nullptr);
    CHECK(child->count == 2 * rounds);
    const tracetree::Node* name = find_child(*root, "deferred name");
    REQUIRE(name != nullptr);
    CHECK(name->count == rounds);
    CHECK(find_child(*root, "deferred.too deep") == nullptr);
    if (throws_seen()) {
        const tracetree::Node* thrown = find_child(*root, "std::runtime_error");
        REQUIRE(thrown != nullptr);
        CHECK(thrown->count == rounds);
        CHECK(root->children.size() == 3);
    }
}
}  // namespace deferred

TEST_CASE("a capture that starts late still holds the whole invocation, and the profile counts every call once") {
    tracetree::reset();
    TraceSession session(request("deferred.root", 0ms, 0));
    const tracetree::ThreadProfile thread = deferred::run_shapes("deferred-wanted", 3);
    deferred::check_profile(thread, 3);
    for (int round = 0; round < 3; ++round) {
        std::vector<tracetree::Trace> traces;
        for (int shape = 0; shape < 5; ++shape) {
            std::optional<tracetree::Trace> trace = session.next(10s);  // already delivered: returns at once
            REQUIRE(trace.has_value());
            traces.push_back(std::move(*trace));
        }
        for (const tracetree::Trace& trace : traces) {
            CHECK(trace.root.name == "deferred.root");
            CHECK(trace.root.count == 1);
        }
        CHECK(traces[0].root.children.empty());  // a leaf
        REQUIRE(traces[1].root.children.size() == 1);
        CHECK(traces[1].root.children[0].name == "deferred.child");
        CHECK(traces[1].root.children[0].count == 2);
        REQUIRE(traces[2].root.children.size() == 1);
        CHECK(traces[2].root.children[0].name == "deferred name");
        CHECK(traces[3].root.throws == 1);
        if (throws_seen()) {
            REQUIRE(traces[3].root.children.size() == 1);
            CHECK(traces[3].root.children[0].name == "std::runtime_error");
            CHECK(traces[3].root.children[0].message == std::optional<std::string>("deferred throw"));
        }
        CHECK(traces[4].root.children.empty());
        CHECK(traces[4].root.dropped == 1);
    }
    CHECK_FALSE(session.next(0ms).has_value());
}

TEST_CASE("a capture that never starts leaves the same profile, and no trace") {
    tracetree::reset();
    TraceSession session(request("deferred.root", 1h, 0));
    deferred::check_profile(deferred::run_shapes("deferred-unwanted", 4), 4);
    CHECK(session.captured() == 0);
}

namespace deferred {
// Scope sites made at run time, one per name (deques keep both in place).
struct NamedSites {
    std::deque<std::string> names;
    std::deque<tracetree::detail::Site> sites;
    NamedSites(std::deque<std::string> first, const std::string& more, int count) : names(std::move(first)) {
        for (int i = 1; i <= count; ++i) names.push_back(more + std::to_string(i));
        for (const std::string& name : names) sites.emplace_back(name.c_str(), __FILE__, 1, tracetree::detail::SiteKind::scope);
    }
    tracetree::detail::Site& operator[](std::size_t i) { return sites[i]; }
    std::size_t size() const { return sites.size(); }
};

// What `body` records on a new thread whose trees hold 16 nodes (the root and 15): the thread's
// profile, and the traces delivered to the session `body` starts and returns.
struct SmallTrees {
    tracetree::ThreadProfile thread;
    std::vector<tracetree::Trace> traces;
};
template <class Body>
SmallTrees with_small_trees(const std::string& thread_name, Body body) {
    const tracetree::Limits saved = tracetree::limits();
    tracetree::Limits small = saved;
    small.max_nodes = 16;  // for trees made from now on: the new thread's
    tracetree::set_limits(small);
    SmallTrees result;
    std::thread([&] {
        tracetree::set_thread_name(thread_name);
        TraceSession session = body();
        while (std::optional<tracetree::Trace> trace = session.next(0ms)) result.traces.push_back(std::move(*trace));
        const tracetree::Profile profile = tracetree::profile();
        if (const tracetree::ThreadProfile* found = find_thread(profile, thread_name)) result.thread = *found;
    }).join();
    tracetree::set_limits(saved);
    return result;
}
}  // namespace deferred

TEST_CASE("a capture whose tree has no room for its root is given up, and its invocation recorded as usual") {
    using tracetree::detail::Scope;
    deferred::NamedSites sites({"deferred.full a", "deferred.full b", "b's child"}, "a's child ", 14);
    const deferred::SmallTrees run = deferred::with_small_trees("deferred-full", [&] {
        {  // b's node in the thread's tree, before any capture
            const Scope b(sites[1]);
        }
        TraceSession session(request("deferred.full*", 0ms, 0));
        {  // a's capture tree: the root, a and its 14 children, full; the thread's tree (root, b, a and
            const Scope a(sites[0]);  // 13 children) has no room for the 14th: a drop under a
            for (std::size_t i = 3; i < sites.size(); ++i) {
                const Scope child(sites[i]);
            }
        }
        {  // b's capture takes a's tree, the only one kept, which has no room for b: given up
            const Scope b(sites[1]);
            const Scope child(sites[2]);  // no room in the thread's tree either: a drop under b
        }
        {
            const Scope b(sites[1]);  // a leaf, wanted at its end: still no room
        }
        return session;
    });
    REQUIRE(run.traces.size() == 1);
    CHECK(run.traces[0].root.name == "deferred.full a");
    CHECK(run.traces[0].root.children.size() == 14);
    const tracetree::Node* a = find_root(run.thread, "deferred.full a");
    const tracetree::Node* b = find_root(run.thread, "deferred.full b");
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(a->count == 1);
    CHECK(a->children.size() == 13);
    CHECK(a->dropped == 1);
    CHECK(b->count == 3);
    CHECK(b->children.empty());
    CHECK(b->dropped == 1);
}

TEST_CASE("a run-time name under a capture that was given up leads the next capture nowhere else") {
    using tracetree::detail::Scope;
    deferred::NamedSites sites({"given-up a", "given-up b", "given-up c"}, "a's child ", 14);
    const auto named = [] { TRACETREE_SCOPE_DYNAMIC(std::string("n")); };
    const auto under = [&](std::size_t root) {
        const Scope scope(sites[root]);
        named();
    };
    const deferred::SmallTrees run = deferred::with_small_trees("deferred-name", [&] {
        under(1);  // the thread's tree: root, b, n under b, c, n under c
        under(2);
        TraceSession session(request("given-up *", 0ms, 0));
        named();  // n decided unwatched for the new sessions: from here it takes the inline path
        {  // a's capture fills the only capture tree: root, a and 14 children
            const Scope a(sites[0]);
            for (std::size_t i = 3; i < sites.size(); ++i) {
                const Scope child(sites[i]);
            }
        }
        under(1);  // b's capture has no room and is given up when n is entered under b
        under(2);  // likewise c's: n is entered under c, not where it was last
        return session;
    });
    REQUIRE(run.traces.size() == 1);
    CHECK(run.traces[0].root.name == "given-up a");
    for (const char* name : {"given-up b", "given-up c"}) {
        INFO(name);
        const tracetree::Node* root = find_root(run.thread, name);
        REQUIRE(root != nullptr);
        CHECK(root->count == 2);
        REQUIRE(root->children.size() == 1);
        CHECK(root->children[0].name == "n");
        CHECK(root->children[0].count == 2);
    }
}

// ---- a watched scope that Scope defers itself -------------------------------------------------------
// Once the runtime has deferred a site's capture, Scope defers the site's next scopes itself in the
// same state (Arena::defer_site), and leaves them without the runtime when nothing came under them
// below every session's min_cost. On the real clock: a test clock sends every scope to the runtime.

namespace header_deferral {
using tracetree::detail::Scope;

// Whether the next scope of `site` on this thread is deferred by Scope (the runtime decided so).
bool armed_for(tracetree::detail::Site& site) {
    return tracetree::detail::runtime().this_thread()->arena.defer_site == site.info.load();
}

// Spins on the clock for `duration` inside the current scope.
void spin(std::chrono::nanoseconds duration) {
    const auto until = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < until) {
    }
}
}  // namespace header_deferral

TEST_CASE("a scope deferred by Scope starts its capture at whatever comes under it, and the profile counts every call once") {
    using header_deferral::Scope;
    deferred::NamedSites sites({"hd.root", "hd.child"}, "hd.unused ", 0);
    tracetree::detail::Site& root = sites[0];
    tracetree::detail::Site& child = sites[1];
    TraceSession session(request("hd.root", 1h, 0));
    std::vector<bool> armed;
    const auto leaf = [&] {  // left by Scope: the next one is deferred by Scope too
        const Scope scope(root);
    };
    const tracetree::ThreadProfile thread = ::test::recorded_by("hd-shapes", [&] {
        leaf();  // the runtime defers this one, and lets Scope defer the next ones
        leaf();
        tracetree::reset();  // applied by the next scope, which Scope still defers
        for (int round = 0; round < 2; ++round) {
            armed.push_back(header_deferral::armed_for(root));
            leaf();
            armed.push_back(header_deferral::armed_for(root));
            {
                const Scope scope(root);
                for (int i = 0; i < 2; ++i) {
                    const Scope nested(child);
                }
            }
            leaf();
            armed.push_back(header_deferral::armed_for(root));
            {
                const Scope scope(root);
                const Scope again(root);  // recursion: inside the capture its outer scope starts
                const Scope nested(child);
            }
            leaf();
            armed.push_back(header_deferral::armed_for(root));
            try {
                const Scope scope(root);
                TRACETREE_THROW(std::runtime_error("under a deferred scope"));
            } catch (const std::runtime_error&) {
            }
            leaf();
            armed.push_back(header_deferral::armed_for(root));
            {
                const Scope scope(root);
                TRACETREE_SCOPE_DYNAMIC(std::string("hd name"));
            }
            leaf();
            armed.push_back(header_deferral::armed_for(root));
            {
                const tracetree::Limits saved = tracetree::limits();
                tracetree::Limits shallow = saved;
                shallow.max_depth = 1;
                tracetree::set_limits(shallow);
                {
                    const Scope scope(root);
                    const Scope nested(child);  // too deep: dropped
                }
                tracetree::set_limits(saved);
            }
            leaf();
            armed.push_back(header_deferral::armed_for(root));
            {
                const Scope scope(root);
                const tracetree::Here here = tracetree::here();  // the capture starts: here() may gather into it
                static_cast<void>(here);
            }
            leaf();
        }
    });
    CHECK(std::count(armed.begin(), armed.end(), true) == static_cast<std::ptrdiff_t>(armed.size()));
    CHECK(session.captured() == 0);
    const tracetree::Node* node = find_root(thread, "hd.root");  // the two leaves before reset() are gone
    REQUIRE(node != nullptr);
    CHECK(node->count == 2 * 13);
    CHECK(node->throws == 2);
    CHECK(node->dropped == 2);
    const tracetree::Node* nested = find_child(*node, "hd.child");
    REQUIRE(nested != nullptr);
    CHECK(nested->count == 2 * 2);
    const tracetree::Node* again = find_child(*node, "hd.root");
    REQUIRE(again != nullptr);
    CHECK(again->count == 2);
    const tracetree::Node* again_child = find_child(*again, "hd.child");
    REQUIRE(again_child != nullptr);
    CHECK(again_child->count == 2);
    const tracetree::Node* name = find_child(*node, "hd name");
    REQUIRE(name != nullptr);
    CHECK(name->count == 2);
    if (throws_seen()) {
        const tracetree::Node* thrown = find_child(*node, "std::runtime_error");
        REQUIRE(thrown != nullptr);
        CHECK(thrown->count == 2);
    }
}

TEST_CASE("scopes deferred by Scope, then by the runtime: every call counted once, in its place") {
    using header_deferral::Scope;
    deferred::NamedSites sites({"hd.counted", "hd.counted child"}, "hd.unused ", 0);
    tracetree::detail::Site& root = sites[0];
    tracetree::detail::Site& child = sites[1];
    TraceSession session(request("hd.counted", 1h, 0));
    bool armed = false;
    const tracetree::ThreadProfile thread = ::test::recorded_by("hd-counted", [&] {
        for (int i = 0; i < 3; ++i) {
            const Scope scope(root);
        }
        armed = header_deferral::armed_for(root);
        for (int i = 0; i < 2; ++i) {
            const Scope scope(root);
            {
                const Scope again(root);
                const Scope nested(child);
            }
            try {
                TRACETREE_THROW(std::runtime_error("counted"));
            } catch (const std::runtime_error&) {
            }
            const Scope nested(child);
        }
        for (int i = 0; i < 3; ++i) {
            const Scope scope(root);
        }
        const tracetree::Limits saved = tracetree::limits();
        tracetree::Limits shallow = saved;
        shallow.max_depth = 1;
        tracetree::set_limits(shallow);
        {
            const Scope scope(root);
            const Scope nested(child);  // too deep: dropped under the root
        }
        tracetree::set_limits(saved);
    });
    CHECK(armed);
    CHECK(session.captured() == 0);
    const tracetree::Node* node = find_root(thread, "hd.counted");
    REQUIRE(node != nullptr);
    CHECK(node->count == 9);
    CHECK(node->dropped == 1);
    CHECK(node->throws == 0);
    const tracetree::Node* again = find_child(*node, "hd.counted");
    REQUIRE(again != nullptr);
    CHECK(again->count == 2);
    const tracetree::Node* again_child = find_child(*again, "hd.counted child");
    REQUIRE(again_child != nullptr);
    CHECK(again_child->count == 2);
    const tracetree::Node* nested = find_child(*node, "hd.counted child");
    REQUIRE(nested != nullptr);
    CHECK(nested->count == 2);
    if (throws_seen()) {
        const tracetree::Node* thrown = find_child(*node, "std::runtime_error");
        REQUIRE(thrown != nullptr);
        CHECK(thrown->count == 2);
    }
}

TEST_CASE("Scope defers only the site the runtime decided for, in the epoch it decided in, with the recording flags it had") {
    using header_deferral::Scope;
    deferred::NamedSites sites({"hd.a", "hd.b", "hd.c", "hd.e"}, "hd.unused ", 0);
    std::uint64_t b_captured = 0, c_captured = 0, started_captured = 0, stopped_captured = 0, slow_captured = 0;
    std::vector<bool> armed;
    const tracetree::ThreadProfile thread = ::test::recorded_by("hd-which", [&] {
        {  // another site, watched by a session that wants every call: not left by Scope as a's are
            TraceSession a(request("hd.a", 1h, 0));
            TraceSession b(request("hd.b", 0ms, 0));
            TraceSession c(request("hd.c", 0ms, 3));  // a limit: exactly 3, then the session stops
            for (int i = 0; i < 5; ++i) {
                {
                    const Scope scope(sites[0]);
                }
                armed.push_back(header_deferral::armed_for(sites[0]));
                {
                    const Scope scope(sites[1]);
                }
                {
                    const Scope scope(sites[0]);
                }
                {
                    const Scope scope(sites[2]);
                }
            }
            b_captured = b.captured();
            c_captured = c.captured();
        }
        TraceSession never(request("hd.e", 1h, 0));
        {
            const Scope scope(sites[3]);
        }
        armed.push_back(header_deferral::armed_for(sites[3]));
        {  // a session started since: a new epoch, decided again by the runtime
            TraceSession started(request("hd.e", 0ms, 0));
            const Scope scope(sites[3]);
            started.stop();  // before the scope ends: its end finds the session stopped
            stopped_captured = started.captured();
        }
        {
            const Scope scope(sites[3]);  // the runtime's again, in this epoch
        }
        armed.push_back(header_deferral::armed_for(sites[3]));
        {
            TraceSession started(request("hd.e", 0ms, 0));
            {
                const Scope scope(sites[3]);
            }
            started_captured = started.captured();
        }
        {
            const Scope scope(sites[3]);
        }
        armed.push_back(header_deferral::armed_for(sites[3]));
        // A test clock: every scope to the runtime, timed on that clock.
        tracetree::set_clock(fake_clock);
        {
            const Scope scope(sites[3]);
            advance(24h);  // the session's min_cost in ticks was taken on the real clock (nearer 1 ns than 0.1)
        }
        tracetree::set_clock(nullptr);
        slow_captured = never.captured();
        tracetree::set_enabled(false);
        {
            const Scope scope(sites[3]);  // not recorded
        }
        tracetree::set_enabled(true);
    });
    CHECK(std::count(armed.begin(), armed.end(), true) == static_cast<std::ptrdiff_t>(armed.size()));
    CHECK(b_captured == 5);
    CHECK(c_captured == 3);
    CHECK(stopped_captured == 0);
    CHECK(started_captured == 1);
    CHECK(slow_captured == 1);
    for (const auto& expected : {std::make_pair("hd.a", 10), std::make_pair("hd.b", 5), std::make_pair("hd.c", 5),
                                 std::make_pair("hd.e", 6)}) {
        INFO(expected.first);  // not a structured binding: clang++ 14 cannot capture one (INFO's lambda)
        const tracetree::Node* node = find_root(thread, expected.first);
        REQUIRE(node != nullptr);
        CHECK(node->count == static_cast<std::uint64_t>(expected.second));
    }
}

TEST_CASE("a scope Scope would defer, past the node limit, is recorded as the runtime records it: a drop") {
    using header_deferral::Scope;
    deferred::NamedSites sites({"hd.limited", "hd.p1", "hd.p2", "hd.under"}, "hd.filler ", 12);
    const deferred::SmallTrees run = deferred::with_small_trees("hd-node-limit", [&] {
        TraceSession session(request("hd.limited", 1h, 0));
        {
            const Scope p1(sites[1]);
            const Scope watched(sites[0]);  // deferred by the runtime: Scope may defer the next ones
        }
        {
            const Scope p2(sites[2]);
        }
        for (std::size_t i = 4; i < sites.size(); ++i) {  // the tree full: root, p1, watched, p2 and 12
            const Scope filler(sites[i]);
        }
        {
            const Scope p1(sites[1]);
            const Scope watched(sites[0]);  // its node exists: deferred by Scope
        }
        {  // no room for the watched site's node under p2: dropped, with what it calls
            const Scope p2(sites[2]);
            const Scope watched(sites[0]);
            const Scope under(sites[3]);
        }
        {
            const Scope p2(sites[2]);
        }
        return session;
    });
    CHECK(run.traces.empty());
    const tracetree::Node* p1 = find_root(run.thread, "hd.p1");
    const tracetree::Node* p2 = find_root(run.thread, "hd.p2");
    REQUIRE(p1 != nullptr);
    REQUIRE(p2 != nullptr);
    CHECK(p1->count == 2);
    CHECK(p2->count == 3);
    CHECK(p2->children.empty());
    CHECK(p2->dropped == 2);  // the watched scope, and what it called
    const tracetree::Node* watched = find_child(*p1, "hd.limited");
    REQUIRE(watched != nullptr);
    CHECK(watched->count == 2);
}

TEST_CASE("a scope deferred by Scope that reaches its min_cost is delivered, within the session's limit") {
    using header_deferral::Scope;
    deferred::NamedSites sites({"hd.slow", "hd.slow child"}, "hd.unused ", 0);
    std::vector<tracetree::Trace> traces;
    std::uint64_t limited = 0;
    bool armed = false;
    ::test::recorded_by("hd-slow", [&] {
        TraceSession session(request("hd.slow", 5ms, 0));
        {
            const Scope scope(sites[0]);  // a leaf: delivered only if it took 5 ms (never mind)
        }
        armed = header_deferral::armed_for(sites[0]) || session.captured() != 0;
        const auto leaf = [&] {  // so that Scope defers the next one (unless it took 5 ms: never mind)
            const Scope scope(sites[0]);
        };
        for (int i = 0; i < 2; ++i) {
            leaf();
            const Scope scope(sites[0]);  // nothing under it, and it reaches the session's min_cost
            header_deferral::spin(8ms);
        }
        {
            leaf();
            const Scope scope(sites[0]);
            const Scope nested(sites[1]);
            header_deferral::spin(8ms);
        }
        while (std::optional<tracetree::Trace> trace = session.next(0ms)) traces.push_back(std::move(*trace));
        TraceSession two(request("hd.slow", 5ms, 2));
        for (int i = 0; i < 3; ++i) {
            leaf();
            const Scope scope(sites[0]);
            header_deferral::spin(8ms);
        }
        limited = two.captured();
    });
    CHECK(armed);
    CHECK(limited == 2);
    REQUIRE(traces.size() >= 3);  // a leaf above may have taken 5 ms too
    std::size_t leaves = 0, with_child = 0;
    for (const tracetree::Trace& trace : traces) {
        CHECK(trace.root.name == "hd.slow");
        CHECK(trace.root.count == 1);
        CHECK(trace.root.total >= 5ms);
        if (trace.root.children.empty()) ++leaves;
        else if (trace.root.children.size() == 1 && trace.root.children[0].name == "hd.slow child") ++with_child;
    }
    CHECK(leaves + 1 == traces.size());
    CHECK(with_child == 1);
}

TEST_CASE("a site deferred inside another site's capture is decided again outside it") {
    using header_deferral::Scope;
    deferred::NamedSites sites({"hd.outer", "hd.inner", "hd.inner child"}, "hd.unused ", 0);
    std::vector<tracetree::Trace> traces;
    std::uint64_t inner_captured = 0;
    const tracetree::ThreadProfile thread = ::test::recorded_by("hd-depth", [&] {
        TraceSession outer(request("hd.outer", 0ms, 0));
        TraceSession inner(request("hd.inner", 1h, 0));
        for (int i = 0; i < 3; ++i) {
            {
                const Scope o(sites[0]);
                const Scope x(sites[1]);  // deferred inside the outer capture, in its own slot
            }
            const Scope x(sites[1]);  // outside: its capture is not the outer one's
            const Scope child(sites[2]);
        }
        while (std::optional<tracetree::Trace> trace = outer.next(0ms)) traces.push_back(std::move(*trace));
        inner_captured = inner.captured();
    });
    CHECK(inner_captured == 0);
    REQUIRE(traces.size() == 3);
    for (const tracetree::Trace& trace : traces) {
        CHECK(trace.root.name == "hd.outer");
        REQUIRE(trace.root.children.size() == 1);
        CHECK(trace.root.children[0].name == "hd.inner");
        CHECK(trace.root.children[0].children.empty());
    }
    const tracetree::Node* x = find_root(thread, "hd.inner");
    REQUIRE(x != nullptr);
    CHECK(x->count == 3);
    const tracetree::Node* child = find_child(*x, "hd.inner child");
    REQUIRE(child != nullptr);
    CHECK(child->count == 3);
}

TEST_CASE("a scope Scope defers is counted under the scope it was called from, wherever that is") {
    // A trace of a scope that is never slow enough: after the first call the header defers its capture
    // itself and ends it without the runtime. Each call must land under its own caller.
    std::uint64_t captured = 0;
    const tracetree::ThreadProfile thread = ::test::recorded_by("deferred-callers", [&] {
        TraceSession never(request("deferred.leaf", 1h, 0));
        const auto leaf = [] { TRACETREE_SCOPE("deferred.leaf"); };
        for (int i = 0; i < 3; ++i) leaf();
        for (int i = 0; i < 4; ++i) {
            TRACETREE_SCOPE("deferred.caller a");
            leaf();
            TRACETREE_SCOPE("deferred.after a");  // a sibling after it: the arena is back at the caller
        }
        {
            TRACETREE_SCOPE("deferred.caller b");
            for (int i = 0; i < 5; ++i) leaf();
            {
                TRACETREE_SCOPE("deferred.caller c");
                leaf();
            }
        }
        captured = never.captured();
    });
    CHECK(captured == 0);
    const auto count_at = [&](std::initializer_list<const char*> path) -> std::uint64_t {
        const tracetree::Node* node = on_path(thread, path);
        return node != nullptr ? node->count : 0;
    };
    CHECK(count_at({"deferred.leaf"}) == 3);
    CHECK(count_at({"deferred.caller a"}) == 4);
    CHECK(count_at({"deferred.caller a", "deferred.leaf"}) == 4);
    CHECK(count_at({"deferred.caller a", "deferred.after a"}) == 4);
    CHECK(count_at({"deferred.caller b", "deferred.leaf"}) == 5);
    CHECK(count_at({"deferred.caller b", "deferred.caller c", "deferred.leaf"}) == 1);
    CHECK(thread.roots.size() == 3);  // the leaf, caller a, caller b: nothing else at the root
    const tracetree::Node* a = on_path(thread, {"deferred.caller a"});
    REQUIRE(a != nullptr);
    CHECK(a->children.size() == 2);
}

