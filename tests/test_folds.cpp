// Every fold the recorder does keeps min, max, total and count exact: a capture folded back into the
// profile, Profile::merged(), exited threads folded by name, a reset between two passes, and a
// session's limit at its boundary. Under the fake clock every figure is known in advance.
#include "support.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

using namespace test;

namespace folds {

using namespace std::chrono_literals;

// `fold.call` costing `self` in itself and `leaf` in a child `fold.leaf`.
void call(std::chrono::nanoseconds self, std::chrono::nanoseconds leaf) {
    TRACETREE_SCOPE("fold.call");
    advance(self);
    TRACETREE_SCOPE("fold.leaf");
    advance(leaf);
}

struct Figures {
    std::uint64_t count;
    std::chrono::nanoseconds min, max, total;
};

void check(const tracetree::Node* node, const Figures& expected) {
    REQUIRE(node != nullptr);
    INFO(node->name);
    CHECK(node->count == expected.count);
    CHECK(node->min == expected.min);
    CHECK(node->max == expected.max);
    CHECK(node->total == expected.total);
}

// The figures of `fold.call` among `thread`'s roots and of its child `fold.leaf`.
void check_call(const tracetree::ThreadProfile& thread, const Figures& call_figures, const Figures& leaf_figures) {
    const tracetree::Node* node = find_root(thread, "fold.call");
    check(node, call_figures);
    REQUIRE(node != nullptr);
    check(find_child(*node, "fold.leaf"), leaf_figures);
}


void fold_around_a_capture(bool deferred) {
    {
        call(2ms, 1ms);  // 3 ms, before any session: the minimum, which the capture's fold must keep
        tracetree::TraceSession session(tracetree::TraceRequest("fold.call").min_cost(deferred ? 10ms : 0ms).limit(1));
        call(15ms, 5ms);  // 20 ms: the one captured, the maximum
        call(3ms, 1ms);   // 4 ms: past the limit (or below the min cost)
        const auto traces = session.collect(0s);
        REQUIRE(traces.size() == 1);
        CHECK(traces[0].root.total == 20ms);
    }
    call(4ms, 3ms);  // 7 ms, after the session
    check_call(mine(), {4, 3ms, 20ms, 34ms}, {4, 1ms, 5ms, 10ms});
}

void capture_up_to(std::uint64_t limit) {
    tracetree::TraceSession session(tracetree::TraceRequest("fold.call").limit(limit));
    for (std::uint64_t i = 0; i < limit - 1; ++i) folds::call(1ms, 1ms);
    CHECK_FALSE(session.done());  // one short of the limit
    folds::call(2ms, 1ms);        // the last one it takes
    CHECK(session.done());
    folds::call(5ms, 5ms);  // past the limit: not captured
    const auto traces = session.collect(0s);
    REQUIRE(traces.size() == limit);
    CHECK(traces.back().root.total == 3ms);
    CHECK(session.captured() == limit);
}

}  // namespace folds

TEST_CASE("a capture folded back into the profile keeps min, max, total and count exact") {
    // Captured or not, and whether the capture starts at once or late (a min cost defers it), every
    // call lands in the profile once with its own cost: calls before, during and after a capture.
    for (const bool deferred : {false, true}) {
        CAPTURE(deferred);
        FakeClock clock;
        folds::fold_around_a_capture(deferred);
    }
}

TEST_CASE("Profile::merged() folds threads by path: min of the mins, max of the maxes, sums") {
    FakeClock clock;
    folds::call(3ms, 2ms);
    std::thread other([] {
        tracetree::set_thread_name("fold-other");
        folds::call(1ms, 6ms);
        folds::call(5ms, 1ms);
    });
    other.join();
    const tracetree::ThreadProfile all = tracetree::profile().merged();
    folds::check_call(all, {3, 5ms, 7ms, 18ms}, {3, 1ms, 6ms, 9ms});
}

TEST_CASE("exited threads of one name fold into one entry, figures exact") {
    FakeClock clock;
    const auto run = [](std::chrono::nanoseconds self, std::chrono::nanoseconds leaf) {
        std::thread worker([=] {
            tracetree::set_thread_name("fold-exited");
            folds::call(self, leaf);
        });
        worker.join();
    };
    run(2ms, 2ms);
    run(9ms, 1ms);
    run(1ms, 3ms);
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* exited = find_thread(profile, "fold-exited");
    REQUIRE(exited != nullptr);
    CHECK(exited->exited);
    CHECK(exited->exited_threads == 3);
    folds::check_call(*exited, {3, 4ms, 10ms, 18ms}, {3, 1ms, 3ms, 6ms});
}

TEST_CASE("a reset between two passes: the profile holds the second pass alone") {
    FakeClock clock;
    folds::call(50ms, 50ms);  // the first pass: its max and total must not survive
    folds::call(1ms, 1ms);    // nor its min
    tracetree::reset();
    folds::call(3ms, 2ms);
    folds::call(4ms, 4ms);
    folds::check_call(mine(), {2, 5ms, 8ms, 13ms}, {2, 2ms, 4ms, 6ms});
}

TEST_CASE("a session's limit at its boundary: exactly `limit` invocations, then done") {
    FakeClock clock;
    for (std::uint64_t limit = 1; limit <= 3; ++limit) {
        CAPTURE(limit);
        folds::capture_up_to(limit);
    }
}

TEST_CASE("past the node limit: the calls not recorded are counted, and the parent's figures stay exact") {
    FakeClock clock;
    const tracetree::Limits defaults = tracetree::limits();
    tracetree::Limits small = defaults;
    small.max_nodes = 16;  // trees started from now on
    tracetree::set_limits(small);
    std::thread worker([] {
        tracetree::set_thread_name("fold-full");
        TRACETREE_SCOPE("fold.root");
        for (int i = 0; i < 20; ++i) {
            TRACETREE_SCOPE_DYNAMIC("site " + std::to_string(i));
            advance(1ms);
            TRACETREE_SCOPE("fold.inner");
            advance(1ms);
        }
    });
    worker.join();
    tracetree::set_limits(defaults);
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(profile, "fold-full");
    REQUIRE(thread != nullptr);
    const tracetree::Node* root = find_root(*thread, "fold.root");
    folds::check(root, {1, 40ms, 40ms, 40ms});  // the time of the calls it could not keep is still its own
    REQUIRE(root != nullptr);
    CHECK(root->children.size() < 20);  // the limit was reached
    std::uint64_t recorded = 0, dropped = root->dropped;
    for (const tracetree::Node& site : root->children) {
        folds::check(&site, {1, 2ms, 2ms, 2ms});
        recorded += site.count;
        dropped += site.dropped;
        for (const tracetree::Node& inner : site.children) recorded += inner.count;
    }
    CHECK(recorded + dropped == 40);  // every call either has its node or is counted as dropped
    CHECK(thread->dropped_nodes == dropped);
}

TEST_CASE("a session's limit holds for invocations that overlap: the second to end is not delivered") {
    FakeClock clock;
    // Threads A and B both enter a watched scope; A leaves first and its callback takes the only place
    // and waits; then B leaves, while the session (not stopped yet) still sees it, and must turn it away.
    std::mutex mutex;
    std::condition_variable changed;
    int inside = 0;
    bool a_in_callback = false, b_done = false;
    int delivered = 0;
    tracetree::TraceRequest request("fold.overlap");
    request.limit(1).on_trace([&](const tracetree::Trace&) {
        std::unique_lock<std::mutex> lock(mutex);
        if (++delivered > 1) return;
        a_in_callback = true;
        changed.notify_all();
        changed.wait(lock, [&] { return b_done; });
    });
    tracetree::TraceSession session(std::move(request));
    const auto overlap = [&](bool first) {
        TRACETREE_SCOPE("fold.overlap");
        std::unique_lock<std::mutex> lock(mutex);
        ++inside;
        changed.notify_all();
        changed.wait(lock, [&] { return inside == 2 && (first || a_in_callback); });
    };
    std::thread a([&] { overlap(true); });
    std::thread b([&] {
        overlap(false);
        std::lock_guard<std::mutex> lock(mutex);
        b_done = true;
        changed.notify_all();
    });
    a.join();
    b.join();
    CHECK(delivered == 1);
    CHECK(session.done());
}
