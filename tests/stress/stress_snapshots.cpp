// What a snapshot shows. Under concurrent recording, sessions and reset(), every node of every
// snapshot (and of the merged profile) must have min <= max <= total, though its counters are read
// while other threads write them. (A parent's total may be below its children's: a call still running
// has count 0 and adds nothing to the total while its finished children do; Node::self() allows it.)
// And a run-time name keeps its exact bytes, NUL included, through snapshots, sessions and a JSON
// round trip.
#include "attack.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const char* const kDynamicNames[] = {"dyn-0", "dyn-1", "dyn-2", "dyn-3", "dyn-4", "dyn-5", "dyn-6", "dyn-7"};

// A random nested walk over static, function and run-time-named scopes (seeded: every run the same).
void walk(stress::Rng& rng, int depth);

void step(stress::Rng& rng, int depth) {
    TRACETREE_FUNCTION();
    walk(rng, depth + 1);
}

void walk(stress::Rng& rng, int depth) {
    if (depth >= 6) return;
    const std::uint32_t children = stress::pick(rng, 4);
    for (std::uint32_t i = 0; i < children; ++i) {
        switch (stress::pick(rng, 4)) {
        case 0: {
            TRACETREE_SCOPE("alpha");
            walk(rng, depth + 1);
            break;
        }
        case 1: {
            TRACETREE_SCOPE("beta");
            walk(rng, depth + 1);
            break;
        }
        case 2: {
            TRACETREE_SCOPE_DYNAMIC(kDynamicNames[stress::pick(rng, 8)]);
            walk(rng, depth + 1);
            break;
        }
        default: step(rng, depth); break;
        }
    }
}

void worker_loop(const std::function<void()>& body) {
    TRACETREE_SCOPE("worker loop");
    body();
}

// Inconsistencies found in snapshots, by kind, with the first example of each.
struct Findings {
    std::mutex mutex;
    std::uint64_t min_above_max = 0;
    std::uint64_t max_above_total = 0;
    std::uint64_t nodes = 0;
    std::vector<std::string> examples;

    void note(std::uint64_t& kind, const std::string& example) {
        ++kind;
        if (kind == 1) examples.push_back(example);
    }
};

std::string describe(const std::string& path, const tracetree::Node& node) {
    std::ostringstream out;
    out << path << ": count " << node.count << ", total " << node.total.count() << " ns, min " << node.min.count()
        << ", max " << node.max.count();
    return out.str();
}

void check_node(const tracetree::Node& node, const std::string& path, Findings& findings) {
    ++findings.nodes;
    for (const tracetree::Node& child : node.children) check_node(child, path + " > " + child.name, findings);
    if (node.count != 0 && node.min > node.max) findings.note(findings.min_above_max, describe(path, node));
    if (node.max > node.total) findings.note(findings.max_above_total, describe(path, node));
}

void check_profile(const tracetree::Profile& profile, Findings& findings) {
    std::lock_guard<std::mutex> lock(findings.mutex);
    for (const auto& thread : profile.threads)
        for (const auto& root : thread.roots) check_node(root, thread.thread_name + ": " + root.name, findings);
    for (const auto& root : profile.merged().roots) check_node(root, "merged: " + root.name, findings);
}

// Waits until `counter` has reached `target`; false after a minute (reported by the caller).
bool reached(const std::atomic<std::uint64_t>& counter, std::uint64_t target) {
    const Clock::time_point deadline = Clock::now() + 60s;
    while (counter.load() < target)
        if (Clock::now() > deadline) return false;
        else std::this_thread::yield();
    return true;
}

}  // namespace

TEST_CASE("snapshots under concurrent recording, sessions and reset(): min <= max <= total in every node") {
    tracetree::reset();
    constexpr int kRecorders = 6;
    constexpr int kRounds = attack::kShort ? 5 : 20;
    constexpr int kWalksPerRound = 20;
    Findings findings;
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> snapshots{0}, resets{0}, sessions{0};
    std::atomic<int> stuck{0};

    std::thread snapshotter([&] {
        while (!done.load()) {
            check_profile(tracetree::profile(), findings);
            snapshots.fetch_add(1);
        }
    });
    // A reset after every second snapshot: often enough to land inside every round, rarely enough
    // that most snapshots see trees (a snapshot while a reset is pending is empty).
    std::thread resetter([&] {
        for (std::uint64_t seen = 0; !done.load();) {
            if (snapshots.load() < seen + 2) {
                std::this_thread::yield();
                continue;
            }
            seen = snapshots.load();
            tracetree::reset();
            resets.fetch_add(1);
        }
    });
    // Captures are folded back into the thread's tree when they end: that too while resets run.
    std::thread tracer([&] {
        while (!done.load()) {
            tracetree::TraceSession session(tracetree::TraceRequest("beta").limit(3));
            session.next(1ms);
            sessions.fetch_add(1);
        }
    });
    std::vector<std::thread> recorders;
    for (int t = 0; t < kRecorders; ++t)
        recorders.emplace_back([&, t] {
            tracetree::set_thread_name("recorder-" + std::to_string(t));
            stress::Rng rng(static_cast<std::uint32_t>(1000 + t));
            const auto one_round = [&](int round) {
                TRACETREE_SCOPE("round");
                for (int i = 0; i < kWalksPerRound; ++i) walk(rng, 0);
                // Every round overlaps a snapshot, a reset and a session of its own.
                const std::uint64_t target = static_cast<std::uint64_t>(round) + 1;
                if (!reached(snapshots, target) || !reached(resets, target) || !reached(sessions, target)) stuck.fetch_add(1);
            };
            // Half the threads stay in "worker loop" until they end (a parent with count 0 while they
            // run); the others finish one per round, so the merged "worker loop" has both.
            if (t % 2 == 0) {
                worker_loop([&] {
                    for (int round = 0; round < kRounds; ++round) one_round(round);
                });
            } else {
                for (int round = 0; round < kRounds; ++round) worker_loop([&] { one_round(round); });
            }
        });
    for (auto& recorder : recorders) recorder.join();
    done = true;
    snapshotter.join();
    resetter.join();
    tracer.join();
    check_profile(tracetree::profile(), findings);  // with the recorders exited and folded

    MESSAGE(snapshots.load() << " snapshots (" << findings.nodes << " nodes checked), " << resets.load() << " resets, "
                             << sessions.load() << " sessions while " << kRecorders << " threads recorded");
    for (const std::string& example : findings.examples) MESSAGE("first of its kind: " << example);
    CHECK(stuck.load() == 0);
    CHECK(findings.min_above_max == 0);
    CHECK(findings.max_above_total == 0);
}

TEST_CASE("names with NUL bytes keep their bytes: two nodes, sessions that tell them apart, JSON round trip") {
    tracetree::reset();
    tracetree::set_thread_name("nul-names");
    const std::string alice("user\0alice", 10);
    const std::string mallory("user\0mallory", 12);
    tracetree::TraceSession alice_only(tracetree::TraceRequest("user\\x00alice").regex().limit(10));
    tracetree::TraceSession mallory_only(tracetree::TraceRequest("user?mallory").limit(10));
    {
        TRACETREE_SCOPE("login");
        for (int i = 0; i < 2; ++i) {
            TRACETREE_SCOPE_DYNAMIC(alice);
        }
        { TRACETREE_SCOPE_DYNAMIC(mallory); }
        { TRACETREE_SCOPE_DYNAMIC("user"); }  // the C string: what a NUL would cut the others to
    }
    const auto check_names = [&](const std::vector<tracetree::Node>& roots) {
        REQUIRE(roots.size() == 1);
        const std::vector<tracetree::Node>& children = roots[0].children;
        REQUIRE(children.size() == 3);
        CHECK(children[0].name == alice);
        CHECK(children[0].name.size() == 10);
        CHECK(children[0].count == 2);
        CHECK(children[1].name == mallory);
        CHECK(children[1].name.size() == 12);
        CHECK(children[1].count == 1);
        CHECK(children[2].name == "user");
    };
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = stress::find_thread(profile, "nul-names");
    REQUIRE(thread != nullptr);
    check_names(thread->roots);

    std::ostringstream json;
    tracetree::write_json(json, profile);
    CHECK(json.str().find("user\\u0000alice") != std::string::npos);
    const tracetree::Profile loaded = tracetree::read_profile_json(json.str());
    const tracetree::ThreadProfile* loaded_thread = stress::find_thread(loaded, "nul-names");
    REQUIRE(loaded_thread != nullptr);
    check_names(loaded_thread->roots);

    const std::vector<tracetree::Trace> alices = alice_only.collect(0s);
    const std::vector<tracetree::Trace> mallorys = mallory_only.collect(0s);
    REQUIRE(alices.size() == 2);
    REQUIRE(mallorys.size() == 1);
    CHECK(alices[0].root.name == alice);
    CHECK(mallorys[0].root.name == mallory);
    std::ostringstream trace_json;
    tracetree::write_json(trace_json, alices[0]);
    CHECK(tracetree::read_trace_json(trace_json.str()).root.name == alice);
    CHECK(!tracetree::to_string(profile).empty());  // rendering such names as text works too
}
