// Memory budgets, process-wide (tracetree::Limits): run-time names past max_name_bytes, exited
// threads past max_exited_threads, and what exited threads keep. Each test states its budget as
// "what the limits allow + a stated slack", measures heap bytes (exact: alloc_counter.cpp) and the
// resident set (VmHWM, reset per test), prints both against the budget, and asserts on heap bytes.
#include "attack.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using attack::kKiB;
using attack::kMiB;
using attack::kNameSize;
using attack::mib;

struct LimitsGuard {  // restores the limits a test changed
    tracetree::Limits saved = tracetree::limits();
    ~LimitsGuard() { tracetree::set_limits(saved); }
};

// A fresh window of `bytes` for run-time names: interned names are never freed, so each test gets
// its own budget on top of what earlier tests interned.
void name_window(std::uint64_t bytes) {
    tracetree::Limits limits = tracetree::limits();
    limits.max_name_bytes = tracetree::recorder_info().name_bytes + bytes;
    tracetree::set_limits(limits);
}

// A distinct name of exactly `size` bytes for each `id`.
std::string name_for(std::uint64_t id, std::size_t size) {
    std::string name(size, '.');
    const std::string digits = "name-" + std::to_string(id) + "-";
    name.replace(0, digits.size(), digits);
    return name;
}

double ms_since(Clock::time_point start) { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }

// Waits until `count` threads have arrived, then lets them all go.
class Gate {
public:
    explicit Gate(int count) : waiting_(count) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        if (--waiting_ == 0) changed_.notify_all();
        changed_.wait(lock, [&] { return waiting_ <= 0 && open_; });
    }
    void wait_for_all() {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return waiting_ <= 0; });
    }
    void open() {
        std::lock_guard<std::mutex> lock(mutex_);
        open_ = true;
        changed_.notify_all();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    int waiting_;
    bool open_ = false;
};

constexpr std::uint64_t kNameBudget = std::uint64_t{16} << 20;  // Limits::max_name_bytes' default
constexpr int kNames = 70000;
constexpr std::int64_t kNodeBytes = 64;                         // sizeof(NodeRecord), a cache line
// What a name or a node costs besides its bytes: the thread's table of names seen (16 bytes a slot,
// at most half full), the tree's child index (4 bytes a slot, at most half full), and a thread's state.
constexpr std::int64_t kSlack = 4 * kMiB;

struct NameRun {
    std::uint64_t accepted = 0, dropped = 0, nodes = 0, held = 0;
    std::int64_t heap_peak = 0, rss_peak_kib = 0;
    double seconds = 0;
};

// `threads` threads named `thread_name` record kNames names of kNameSize bytes never seen before (ids
// from `first_id`) between them,
// each under one "names" scope; measured while they are alive (their trees are the node budget).
NameRun record_names(int threads, const std::string& thread_name, std::uint64_t first_id) {
    const tracetree::RecorderInfo before = tracetree::recorder_info();
    const std::int64_t rss_before = attack::status_kib("VmRSS:");
    attack::reset_peak_rss();
    attack::Heap heap;
    const Clock::time_point start = Clock::now();
    Gate recorded(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            // Each thread its own name: exited threads of one name are merged one by one, which is
            // quadratic in their names (the last test below), and not what this test measures.
            tracetree::set_thread_name(threads == 1 ? thread_name : thread_name + "-" + std::to_string(t));
            {
                TRACETREE_SCOPE("names");
                for (int i = t; i < kNames; i += threads) {
                    TRACETREE_SCOPE_DYNAMIC(name_for(first_id + static_cast<std::uint64_t>(i), kNameSize));
                }
            }
            recorded.arrive_and_wait();  // alive until measured
        });
    recorded.wait_for_all();
    NameRun run;
    run.seconds = ms_since(start) / 1000;
    const tracetree::RecorderInfo after = tracetree::recorder_info();
    run.dropped = after.dropped_names - before.dropped_names;
    run.accepted = static_cast<std::uint64_t>(kNames) - run.dropped;
    run.held = after.name_bytes - before.name_bytes;
    run.nodes = after.nodes - before.nodes;
    run.heap_peak = heap.peak_growth();
    run.rss_peak_kib = attack::status_kib("VmHWM:") - rss_before;
    recorded.open();
    for (auto& thread : pool) thread.join();
    return run;
}

void check_budget(const NameRun& run, int threads) {
    const std::int64_t budget = static_cast<std::int64_t>(kNameBudget) + static_cast<std::int64_t>(run.nodes) * kNodeBytes + kSlack;
    MESSAGE(kNames << " names of " << kNameSize << " B on " << threads << " thread(s) in " << run.seconds << " s: "
                   << run.accepted << " interned, " << run.dropped << " dropped; heap peak +" << mib(run.heap_peak)
                   << ", resident peak +" << mib(run.rss_peak_kib * kKiB) << ", budget " << mib(budget) << " ("
                   << mib(static_cast<std::int64_t>(kNameBudget)) << " of names + " << run.nodes << " nodes + "
                   << mib(kSlack) << " slack)");
    CHECK(run.held <= kNameBudget);
    CHECK(run.held + 4 * kNameSize > kNameBudget);  // filled: every name kept until the next would not fit
    CHECK(run.accepted >= kNameBudget / (4 * kNameSize));  // a name holds its bytes about three times
    // Sanitizers count their own allocation sizes (TSan rounds up): the peak is checked in plain builds.
    if (!attack::kSanitized)
        CHECK_MESSAGE(run.heap_peak <= budget, "heap peak " << mib(run.heap_peak) << " over the budget " << mib(budget) << ": "
                                          << run.heap_peak / static_cast<std::int64_t>(run.accepted)
                                          << " B held per interned name of " << kNameSize << " B");
    // Sanitizers' shadow memory and an emulator's translated code are resident too.
    if (!attack::kSanitized && !attack::kEmulated) CHECK(run.rss_peak_kib * kKiB <= budget);
}

// The calls not recorded under the "names" scope of the exited threads whose names start with
// `thread_name`, and whether the text shows them.
std::uint64_t dropped_shown(const std::string& thread_name) {
    const tracetree::Profile profile = tracetree::profile();
    std::uint64_t dropped = 0;
    for (const auto& thread : profile.threads) {
        if (thread.thread_name.compare(0, thread_name.size(), thread_name) != 0 || !thread.exited) continue;
        for (const auto& root : thread.roots)
            if (root.name == "names" && root.dropped != 0) {  // a pool thread may finish before the budget is used up
                dropped += root.dropped;
                const std::string text = tracetree::to_string(thread);
                CHECK(text.find("[not recorded: " + std::to_string(root.dropped) + " calls") != std::string::npos);
            }
    }
    return dropped;
}

}  // namespace

TEST_CASE("70,000 distinct 1 KiB run-time names on one thread: memory within the name budget, the rest dropped and shown") {
    LimitsGuard guard;
    tracetree::reset();
    name_window(kNameBudget);
    const NameRun run = record_names(1, "names-one", 0);
    check_budget(run, 1);
    CHECK(dropped_shown("names-one") == run.dropped);
}

TEST_CASE("70,000 distinct 1 KiB run-time names on a pool of 50 threads: the same budget, process-wide") {
    LimitsGuard guard;
    tracetree::reset();
    name_window(kNameBudget);
    const NameRun run = record_names(50, "names-pool", 1000000);
    check_budget(run, 50);
    CHECK(dropped_shown("names-pool") == run.dropped);
}

TEST_CASE("20,000 threads (1,000 under sanitizers or an emulator) with unique names: exited threads folded past max_exited_threads, memory and profile() bounded") {
    LimitsGuard guard;
    tracetree::reset();
    tracetree::Limits limits = tracetree::limits();
    limits.max_exited_threads = 64;
    tracetree::set_limits(limits);
    const std::uint32_t kept = limits.max_exited_threads;
    // A thread costs ~2 ms to start under ASan and TSan on a loaded machine whatever tracetree does:
    // 1,000 there (15 times max_exited_threads), 20,000 in plain builds.
    constexpr int kThreads = attack::kShort ? 1000 : 20000;
    constexpr int kConcurrent = 8;
    constexpr int kWarmUp = 128;  // past max_exited_threads: every later thread goes into the folded entry
    std::int64_t heap_after_warm_up = 0;
    double profile_ms_after_warm_up = 0;
    attack::Heap heap;
    attack::reset_peak_rss();
    const std::int64_t rss_before = attack::status_kib("VmRSS:");
    const Clock::time_point start = Clock::now();
    for (int first = 0; first < kThreads; first += kConcurrent) {
        std::deque<attack::SmallThread> batch;
        for (int i = first; i < first + kConcurrent; ++i)
            batch.emplace_back([i] {
                tracetree::set_thread_name("unique-" + std::to_string(i));
                TRACETREE_SCOPE("exiting");
                { TRACETREE_SCOPE("step"); }
                { TRACETREE_SCOPE_DYNAMIC(i % 2 == 0 ? "even" : "odd"); }
            });
        for (auto& thread : batch) REQUIRE(thread.started());
        batch.clear();
        if (first + kConcurrent == kWarmUp) {
            heap_after_warm_up = heap.growth();
            const Clock::time_point taken = Clock::now();
            tracetree::profile();
            profile_ms_after_warm_up = ms_since(taken);
        }
    }
    const double seconds = ms_since(start) / 1000;
    const std::int64_t growth = heap.growth();
    const Clock::time_point taken = Clock::now();
    const tracetree::Profile profile = tracetree::profile();
    const double profile_ms = ms_since(taken);
    MESSAGE(kThreads << " threads in " << seconds << " s; heap +" << mib(heap_after_warm_up) << " after " << kWarmUp
                     << ", +" << mib(growth) << " after all; resident peak +"
                     << mib((attack::status_kib("VmHWM:") - rss_before) * kKiB) << "; profile() " << profile_ms_after_warm_up
                     << " ms after " << kWarmUp << ", " << profile_ms << " ms after all");

    std::size_t exited = 0;
    const tracetree::ThreadProfile* others = nullptr;
    for (const auto& thread : profile.threads) {
        if (!thread.exited) continue;
        ++exited;
        if (thread.thread_name == "(other exited threads)") others = &thread;
    }
    CHECK(exited == kept + 1);
    REQUIRE(others != nullptr);
    CHECK(others->exited_threads == kThreads - kept);
    REQUIRE(others->roots.size() == 1);
    CHECK(others->roots.front().name == "exiting");
    CHECK(others->roots.front().count == kThreads - kept);
    // What the threads after the warm-up left behind: a few counters in the folded entry, nothing per thread.
    CHECK(growth - heap_after_warm_up <= 64 * kKiB);
}

TEST_CASE("exited threads keep their trees within the node budget") {
    // A thread that exits leaves its tree as values (a Node with its name, file and children per
    // node), kept apart for up to max_exited_threads names. Those values must count against the
    // process-wide node budget like the live trees they came from.
    LimitsGuard guard;
    tracetree::reset();
    tracetree::Limits limits = tracetree::limits();
    limits.max_total_nodes = 4096;  // 256 KiB of live nodes
    tracetree::set_limits(limits);
    name_window(kNameBudget);
    constexpr int kThreads = 16, kNamesEach = 512;
    const auto run = [&] {
        for (int t = 0; t < kThreads; ++t)
            std::thread([t] {
                tracetree::set_thread_name("kept-" + std::to_string(t));
                TRACETREE_SCOPE("names");
                for (int i = 0; i < kNamesEach; ++i) {  // the same names on every thread: interned once
                    TRACETREE_SCOPE_DYNAMIC(name_for(static_cast<std::uint64_t>(i), kNameSize));
                }
            }).join();
    };
    // A first run interns the names and fills the recorder's list of the last 16 retired thread
    // states; after a reset() the second run's growth is what exited trees keep.
    run();
    tracetree::reset();
    attack::Heap heap;
    run();
    const std::int64_t growth = heap.growth();  // before the snapshot below, which copies what is kept
    const tracetree::Profile profile = tracetree::profile();
    std::uint64_t nodes = 0;
    const auto count = [&](const tracetree::Node& node, const auto& self) -> void {
        ++nodes;
        for (const auto& child : node.children) self(child, self);
    };
    for (const auto& thread : profile.threads)
        if (thread.exited)
            for (const auto& root : thread.roots) count(root, count);
    // An exited thread's node is a Node value holding a copy of its name.
    const std::int64_t per_node = static_cast<std::int64_t>(sizeof(tracetree::Node) + kNameSize);
    const std::int64_t budget = static_cast<std::int64_t>(limits.max_total_nodes) * per_node + kSlack;
    MESSAGE(kThreads << " exited threads of " << kNamesEach << " names of " << kNameSize << " B: " << nodes
                     << " nodes kept (max_total_nodes " << limits.max_total_nodes << "), heap +" << mib(growth)
                     << ", budget " << mib(budget));
    CHECK(nodes <= limits.max_total_nodes);
    CHECK(growth <= budget);
}

TEST_CASE("threads past max_exited_threads with distinct run-time names: the folded entry stays within the node budget") {
    // Past max_exited_threads, every exiting thread's tree is merged into "(other exited threads)"
    // while the recorder's lock is held. A thread-per-request server naming scopes after requests
    // makes that entry grow by every thread's names: it must stay bounded, and so must the merge.
    LimitsGuard guard;
    tracetree::reset();
    tracetree::Limits limits = tracetree::limits();
    limits.max_exited_threads = 1;
    limits.max_total_nodes = 4096;
    tracetree::set_limits(limits);
    name_window(kNameBudget);
    constexpr int kThreads = 32, kNamesEach = 300;
    double first_exits = 0, last_exits = 0;
    for (int t = 0; t < kThreads; ++t) {
        Clock::time_point leaving;
        std::thread([t, &leaving] {
            tracetree::set_thread_name("folded-" + std::to_string(t));
            {
                TRACETREE_SCOPE("names");
                for (int i = 0; i < kNamesEach; ++i) {
                    TRACETREE_SCOPE_DYNAMIC("request-" + std::to_string(t * kNamesEach + i));
                }
            }
            leaving = Clock::now();
        }).join();
        const double exit_ms = ms_since(leaving);
        if (t < kThreads / 4) first_exits += exit_ms;
        if (t >= kThreads - kThreads / 4) last_exits += exit_ms;
    }
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* others = stress::find_thread(profile, "(other exited threads)");
    REQUIRE(others != nullptr);
    REQUIRE(!others->roots.empty());
    const std::size_t folded = others->roots.front().children.size();
    MESSAGE(kThreads << " threads of " << kNamesEach << " distinct names: the folded entry holds " << folded
                     << " nodes (max_total_nodes " << limits.max_total_nodes << "); thread exit took "
                     << first_exits / (kThreads / 4) << " ms on average for the first quarter, "
                     << last_exits / (kThreads / 4) << " ms for the last");
    CHECK(folded <= limits.max_total_nodes);
}

TEST_CASE("dozens of threads exiting at the same moment: every exit counted, no state freed while in use") {
    // The recorder keeps the last 16 exited threads' states. Each exit folds the thread's tree into
    // the exited ones (under the recorder's lock, slow enough here for the others to queue), then
    // takes the lock once more to free the tree: meanwhile 16 others may have pushed its state out.
    LimitsGuard guard;
    tracetree::reset();
    name_window(kNameBudget);  // the run-time names below must be interned whatever ran before
    constexpr int kWaves = 8, kThreads = 48, kNodes = 200;
    for (int wave = 0; wave < kWaves; ++wave) {
        Gate leave(kThreads);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&] {
                tracetree::set_thread_name("burst");
                {
                    TRACETREE_SCOPE("burst work");
                    for (int i = 0; i < kNodes; ++i) {
                        TRACETREE_SCOPE_DYNAMIC("burst item " + std::to_string(i));
                    }
                }
                leave.arrive_and_wait();
            });
        leave.wait_for_all();
        leave.open();  // all of them exit now
        for (auto& thread : threads) thread.join();
    }
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* burst = stress::find_thread(profile, "burst");
    REQUIRE(burst != nullptr);
    CHECK(burst->exited_threads == kWaves * kThreads);
    REQUIRE(burst->roots.size() == 1);
    CHECK(burst->roots.front().count == kWaves * kThreads);
    CHECK(burst->roots.front().children.size() == kNodes);
}
