// Many recording threads (more than cores) build random nested call trees while other threads take
// snapshots, render them, start and stop trace sessions and, in a separate phase, reset. Counts are
// compared exactly with the counts the recording threads kept themselves.
//
// Phases, because reset() discards counts on purpose:
//   exact:  recorders + snapshots + sessions. Every count in the final profile equals the test's own;
//           snapshots never go backwards and never exceed the final counts; captured traces respect
//           their session's pattern and limit.
//   reset:  the same plus a thread calling reset() in a loop: no crash, no race (TSan), snapshots
//           never exceed what was recorded; after a final reset a fresh workload is counted exactly.
#include "stress.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

namespace stress {

constexpr int kRecorders = 8;        // four per core on the 2-core CI machine
constexpr int kTopLevelCalls = 2000; // per recorder and phase
constexpr int kMaxNesting = 4;

// Records the shape it walks twice: through tracetree's scopes, and in its own path -> count map.
struct Recorder {
    Rng rng;
    Counts counts;
    std::vector<std::string> path;

    explicit Recorder(std::uint32_t seed) : rng(seed) {}

    void enter(const std::string& name) {
        path.push_back(name);
        std::string key;
        for (const auto& part : path) key += key.empty() ? part : " > " + part;
        ++counts[key];
    }
    void leave() { path.pop_back(); }
    void children(int depth);
};

// Function scopes: display names are "stress::function_a()" and "stress::function_b()".
void function_a(Recorder& r, int depth) {
    TRACETREE_FUNCTION();
    r.enter("stress::function_a()");
    r.children(depth);
    r.leave();
}
void function_b(Recorder& r, int depth) {
    TRACETREE_FUNCTION();
    r.enter("stress::function_b()");
    r.children(depth);
    r.leave();
}

const char* const kDynamicNames[] = {"dyn/0", "dyn/1", "dyn/2"};

void Recorder::children(int depth) {
    if (depth >= kMaxNesting) return;
    const std::uint32_t n = pick(rng, depth == 0 ? 4 : 3);
    for (std::uint32_t i = 0; i < n; ++i) {
        switch (pick(rng, 5)) {
            case 0: function_a(*this, depth + 1); break;
            case 1: function_b(*this, depth + 1); break;
            case 2: {
                TRACETREE_SCOPE("alpha");
                enter("alpha");
                children(depth + 1);
                leave();
                break;
            }
            case 3: {
                TRACETREE_SCOPE("beta");
                enter("beta");
                children(depth + 1);
                leave();
                break;
            }
            default: {
                const std::string name = kDynamicNames[pick(rng, 3)];
                TRACETREE_SCOPE_DYNAMIC(name);
                enter(name);
                children(depth + 1);
                leave();
                break;
            }
        }
    }
}

void top_level(Recorder& r) {
    TRACETREE_SCOPE("top");
    r.enter("top");
    r.children(0);
    r.leave();
}

bool known_name(const std::string& name) {
    return name == "top" || name == "alpha" || name == "beta" || name == "stress::function_a()" ||
           name == "stress::function_b()" || name == "dyn/0" || name == "dyn/1" || name == "dyn/2";
}

bool all_names_known(const tracetree::Node& node) {
    if (!known_name(node.name)) return false;
    for (const auto& child : node.children)
        if (!all_names_known(child)) return false;
    return true;
}

// What every concurrent reader found wrong; checked on the main thread (doctest is not thread-safe).
struct Problems {
    std::mutex mutex;
    std::vector<std::string> list;
    void add(const std::string& problem) {
        std::lock_guard<std::mutex> lock(mutex);
        if (list.size() < 20) list.push_back(problem);
    }
};

// Work done by the helper threads. Recorders wait at checkpoints until every helper has made
// progress since their last one, so that snapshots, sessions and resets interleave with recording
// however the threads are scheduled (without this, fast recorders may finish before a helper has run).
struct Progress {
    std::atomic<std::uint64_t> snapshots{0}, sessions{0}, resets{0};
};
Progress g_progress;
constexpr int kCheckpointEvery = 100;  // top-level calls

void checkpoint(bool with_resets, std::uint64_t (&seen)[3]) {
    for (;;) {
        const std::uint64_t now[3] = {g_progress.snapshots.load(), g_progress.sessions.load(), g_progress.resets.load()};
        if (now[0] > seen[0] && now[1] > seen[1] && (!with_resets || now[2] > seen[2])) {
            std::copy(now, now + 3, seen);
            return;
        }
        std::this_thread::yield();
    }
}

// Takes and renders snapshots until `stop`. With `monotonic`, counts must never go backwards.
// Returns the last snapshot of each recorder's counts.
std::map<std::string, Counts> snapshots(const std::string& prefix, bool monotonic, const std::atomic<bool>& stop,
                                        Problems& problems, std::uint64_t& taken) {
    std::map<std::string, Counts> last;
    while (!stop.load()) {
        const tracetree::Profile profile = tracetree::profile();
        ++taken;
        g_progress.snapshots.fetch_add(1);
        for (const auto& thread : profile.threads) {
            if (thread.thread_name.rfind(prefix, 0) != 0) continue;
            for (const auto& root : thread.roots)
                if (!all_names_known(root)) problems.add("snapshot: unknown name in " + thread.thread_name);
            Counts now = flatten(thread.roots);
            if (monotonic) {
                for (const auto& [path, count] : last[thread.thread_name]) {
                    const auto it = now.find(path);
                    if (it == now.end() || it->second < count)
                        problems.add("snapshot: " + thread.thread_name + " count went back on " + path);
                }
            }
            last[thread.thread_name] = std::move(now);
        }
        // Renderers run on live data too.
        std::ostringstream out;
        tracetree::render(out, profile);
        tracetree::render_human(out, profile);
        tracetree::render(out, profile.merged(), profile.taken);
    }
    return last;
}

struct PatternCase {
    const char* pattern;
    bool regex;
    std::function<bool(const std::string&)> root_ok;  // what a captured root may be called
};

const std::vector<PatternCase>& pattern_cases() {
    static const std::vector<PatternCase> cases = {
        {"alpha", false, [](const std::string& n) { return n == "alpha"; }},
        {"function_?", false, [](const std::string& n) { return n == "stress::function_a()" || n == "stress::function_b()"; }},
        {"stress::*", false, [](const std::string& n) { return n.rfind("stress::", 0) == 0; }},
        {"dyn/*", false, [](const std::string& n) { return n.rfind("dyn/", 0) == 0; }},
        // The outermost scope entered after the session started: any of them.
        {"*", false, [](const std::string& n) { return known_name(n); }},
        {"be.a", true, [](const std::string& n) { return n == "beta"; }},
        {"function_(a|b)", true, [](const std::string& n) { return n == "stress::function_a()" || n == "stress::function_b()"; }},
        {"dyn/[02]", true, [](const std::string& n) { return n == "dyn/0" || n == "dyn/2"; }},
    };
    return cases;
}

// Starts and stops sessions until `stop`: queued and callback sessions, several at once.
void sessions(std::uint32_t seed, const std::atomic<bool>& stop, Problems& problems, std::uint64_t& traces_seen) {
    Rng rng(seed);
    while (!stop.load()) {
        const PatternCase& c = pattern_cases()[pick(rng, static_cast<std::uint32_t>(pattern_cases().size()))];
        tracetree::TraceRequest request(c.pattern);
        request.regex(c.regex);
        request.limit(1 + pick(rng, 5));
        // The callback's state is shared with it, not borrowed: callbacks may still be running
        // when stop() returns (see the faults test), and this test is about counts, not that.
        auto called = std::make_shared<std::atomic<std::uint64_t>>(0);
        const bool callback = pick(rng, 3) == 0;
        if (callback) request.on_trace([called](const tracetree::Trace&) { ++*called; });
        std::vector<tracetree::Trace> traces;
        {
            tracetree::TraceSession session(request);
            g_progress.sessions.fetch_add(1);
            // A bounded wait, not a sleep: returns as soon as the limit is reached.
            for (auto& t : session.collect(std::chrono::microseconds(200 + pick(rng, 2000)))) traces.push_back(std::move(t));
            if (pick(rng, 2) == 0) session.stop();
            if (session.captured() > request.limit()) problems.add(std::string("session over its limit: ") + c.pattern);
        }
        if (traces.size() > request.limit()) problems.add(std::string("more traces than the limit: ") + c.pattern);
        if (callback && !traces.empty()) problems.add("a callback session queued traces");
        for (const auto& trace : traces) {
            ++traces_seen;
            if (!c.root_ok(trace.root.name)) problems.add(std::string(c.pattern) + " captured " + trace.root.name);
            if (trace.root.count != 1) problems.add("a trace root with count " + std::to_string(trace.root.count));
            if (!all_names_known(trace.root)) problems.add("a trace with an unknown name");
            if (trace.thread_name.rfind("rec", 0) != 0) problems.add("a trace from thread " + trace.thread_name);
        }
    }
}

struct PhaseResult {
    std::vector<Counts> expected;                    // per recorder, kept by the recorder
    std::map<std::string, Counts> last_snapshot[2];  // per snapshot thread
    std::uint64_t snapshots = 0, traces = 0;
};

PhaseResult run_phase(const std::string& prefix, bool with_resets, Problems& problems) {
    PhaseResult result;
    result.expected.resize(kRecorders);
    std::atomic<bool> recorders_done{false};
    std::atomic<int> recorders_left{kRecorders};
    std::uint64_t snapshot_counts[2] = {0, 0}, trace_counts[2] = {0, 0};

    std::vector<std::thread> helpers;
    for (int i = 0; i < 2; ++i)
        helpers.emplace_back([&, i] {
            result.last_snapshot[i] = snapshots(prefix, !with_resets, recorders_done, problems, snapshot_counts[i]);
        });
    for (int i = 0; i < 2; ++i)
        helpers.emplace_back([&, i] { sessions(static_cast<std::uint32_t>(1000 + i), recorders_done, problems, trace_counts[i]); });
    std::uint64_t resets = 0;
    if (with_resets)
        helpers.emplace_back([&] {
            while (!recorders_done.load()) {
                tracetree::reset();
                ++resets;
                g_progress.resets.fetch_add(1);
                std::this_thread::yield();
            }
        });

    std::vector<std::thread> recorders;
    for (int i = 0; i < kRecorders; ++i)
        recorders.emplace_back([&, i] {
            tracetree::set_thread_name(prefix + std::to_string(i));
            Recorder recorder(static_cast<std::uint32_t>(7 + i));
            std::uint64_t seen[3] = {g_progress.snapshots.load(), g_progress.sessions.load(), g_progress.resets.load()};
            for (int call = 0; call < kTopLevelCalls; ++call) {
                if (call % kCheckpointEvery == 0) checkpoint(with_resets, seen);
                top_level(recorder);
            }
            result.expected[static_cast<std::size_t>(i)] = std::move(recorder.counts);
            if (--recorders_left == 0) recorders_done = true;
        });
    for (auto& t : recorders) t.join();
    for (auto& t : helpers) t.join();
    result.snapshots = snapshot_counts[0] + snapshot_counts[1];
    result.traces = trace_counts[0] + trace_counts[1];
    MESSAGE(prefix << ": " << result.snapshots << " snapshots, " << result.traces << " traces captured, " << resets
                   << " resets");
    return result;
}

void check_problems(Problems& problems) {
    for (const auto& problem : problems.list) FAIL_CHECK(problem);
    CHECK(problems.list.empty());
}

TEST_CASE("concurrent recording, snapshots and sessions: every count exact") {
    tracetree::reset();
    Problems problems;
    const PhaseResult result = run_phase("rec-", false, problems);
    check_problems(problems);

    const tracetree::Profile profile = tracetree::profile();
    for (int i = 0; i < kRecorders; ++i) {
        const std::string name = "rec-" + std::to_string(i);
        CAPTURE(name);
        const tracetree::ThreadProfile* thread = find_thread(profile, name);
        REQUIRE(thread != nullptr);
        CHECK(thread->exited);
        CHECK(thread->dropped_depth == 0);
        CHECK(thread->dropped_nodes == 0);
        const Counts actual = flatten(thread->roots);
        const Counts& expected = result.expected[static_cast<std::size_t>(i)];
        CHECK(actual.size() == expected.size());
        for (const auto& [path, count] : expected) {
            const auto it = actual.find(path);
            if (it == actual.end() || it->second != count)
                FAIL_CHECK(path << ": expected " << count << ", profile has " << (it == actual.end() ? 0 : it->second));
        }
        CHECK(actual.at("top") == static_cast<std::uint64_t>(kTopLevelCalls));
        for (const auto& last : result.last_snapshot) {  // a snapshot can only have seen less
            const auto seen = last.find(name);
            if (seen == last.end()) continue;
            for (const auto& [path, count] : seen->second)
                if (expected.count(path) == 0 || count > expected.at(path))
                    FAIL_CHECK("a snapshot saw " << count << " calls of " << path);
        }
    }
}

TEST_CASE("resets during concurrent recording, snapshots and sessions are safe") {
    Problems problems;
    const PhaseResult result = run_phase("rec-reset-", true, problems);
    check_problems(problems);
    for (int i = 0; i < kRecorders; ++i) {  // resets only ever take counts away
        const std::string name = "rec-reset-" + std::to_string(i);
        const Counts& expected = result.expected[static_cast<std::size_t>(i)];
        for (const auto& last : result.last_snapshot) {
            const auto seen = last.find(name);
            if (seen == last.end()) continue;
            for (const auto& [path, count] : seen->second)
                if (expected.count(path) == 0 || count > expected.at(path))
                    FAIL_CHECK("a snapshot saw " << count << " calls of " << path);
        }
    }

    // After the storm, reset still works and counting is exact again.
    tracetree::reset();
    const tracetree::Profile cleared = tracetree::profile();
    for (const auto& thread : cleared.threads) CHECK_MESSAGE(!thread.exited, thread.thread_name << " survived reset()");
    Counts expected;
    std::thread([&] {
        tracetree::set_thread_name("after-reset");
        Recorder recorder(99);
        for (int call = 0; call < 50; ++call) top_level(recorder);
        expected = recorder.counts;
    }).join();
    const tracetree::Profile after = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(after, "after-reset");
    REQUIRE(thread != nullptr);
    CHECK(flatten(thread->roots) == expected);
}

}  // namespace stress
