// Shared by the benchmark's translation units (bench.cpp reads first; then scopes.cpp, sessions.cpp,
// snapshots.cpp, siblings.cpp).
//
// A kernel runs about `n` operations of one kind between timer.start() and timer.stop() and returns
// how many it ran; whatever it must set up (a session, a tree, names) happens outside the timer.
// bench.cpp times kernels in interleaved rounds; `--kernel NAME N` runs one for callgrind. Every kernel
// keeps count of what it ran, and a check compares that with what the recorder's public API reports.
#ifndef TRACETREE_BENCH_KERNELS_HPP
#define TRACETREE_BENCH_KERNELS_HPP

#include <tracetree/tracetree.hpp>
#include <tracetree/values.hpp>  // Profile and Node, for the checks

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bench {

// Stands for the traced code: the compiler must assume it reads and writes any memory, so it can
// neither delete a loop of scopes nor merge their counter updates across iterations.
inline void clobber() noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __asm__ __volatile__("" ::: "memory");
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

extern volatile std::uint64_t g_sink;  // results land here so that no kernel is dead code

struct Timer {
    std::chrono::steady_clock::time_point begin, end;
    // Per-invocation kernels also time each invocation here when asked: a median over them is not
    // moved by the one the scheduler preempted.
    std::vector<double>* laps = nullptr;
    void start() { begin = std::chrono::steady_clock::now(); }
    void stop() { end = std::chrono::steady_clock::now(); }
    double ns() const { return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(end - begin).count()); }
    template <class Body>
    void lap(Body body) {
        if (laps == nullptr) return body();
        const std::chrono::steady_clock::time_point lap_start = std::chrono::steady_clock::now();
        body();
        laps->push_back(static_cast<double>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - lap_start).count()));
    }
};
std::uint64_t thread_cpu_ns();  // CPU time of the calling thread: what a snapshot costs its caller, whatever the load
using Kernel = std::uint64_t (*)(std::uint64_t n, Timer& timer);
struct Named {
    const char* name;
    Kernel run;
};

// Prints what failed and remembers it: the benchmark's exit status is 1 after any failed check.
bool check(bool ok, const std::string& what);
bool all_checks_passed();

// The recorder's clock where it is the time-stamp counter, else steady nanoseconds; and how many of
// its ticks make a microsecond (measured once).
std::uint64_t now_ticks() noexcept;
double ticks_per_us();

// Allocations from the global operator new while g_counting is set (alloc_counter.cpp).
extern std::atomic<bool> g_counting;
extern std::atomic<std::uint64_t> g_allocated, g_allocations;
struct Allocations {
    std::uint64_t calls = 0, bytes = 0;
};
template <class Body>
Allocations count_allocations(Body body) {
    g_allocated.store(0);
    g_allocations.store(0);
    g_counting.store(true);
    body();
    g_counting.store(false);
    return {g_allocations.load(), g_allocated.load()};
}

// ---- siblings.cpp: one parent calling K distinct call sites -----------------------------------

// K = 2, 20, 200 or 1000 sites, each a template instantiation of its own. In order: the order in
// which their nodes were made. Shuffled: a fixed permutation, after one call of each in order (the
// nodes are made in order, then called out of it). Runs at least n scopes under the parent scope
// "siblings.K.in-order" or "siblings.K.shuffled"; returns the scopes run (the order run included).
std::uint64_t run_siblings(int count, bool shuffled, std::uint64_t n, Timer& timer);
// The K site scopes, once each in order, under whatever scope is open: a 20-node invocation's body.
void call_19_siblings();
// The parent's name, and the sibling calls each node under it must have counted so far.
std::string siblings_parent(int count, bool shuffled);
std::uint64_t sibling_calls(int count, bool shuffled);
inline constexpr const char* kSiblingName = "sibling";

// ---- compiled_out.cpp ------------------------------------------------------------------------

// n iterations of an empty scope from a translation unit built with -DTRACETREE_DISABLE.
std::uint64_t run_compiled_out(std::uint64_t n);

// ---- scopes.cpp: per-scope costs ---------------------------------------------------------------

std::uint64_t kernel_tsc_pair(std::uint64_t n, Timer& timer);      // the baseline: two counter reads
std::uint64_t kernel_steady_pair(std::uint64_t n, Timer& timer);   // two steady_clock::now()
std::uint64_t kernel_enabled(std::uint64_t n, Timer& timer);       // a scope whose node exists
std::uint64_t kernel_disabled(std::uint64_t n, Timer& timer);      // after set_enabled(false)
std::uint64_t kernel_compiled_out(std::uint64_t n, Timer& timer);  // -DTRACETREE_DISABLE
std::uint64_t kernel_fib(std::uint64_t n, Timer& timer);           // fib(20), a scope on every call
std::uint64_t kernel_two_threads(std::uint64_t n, Timer& timer);   // the enabled scope on two threads at once
std::uint64_t kernel_dynamic_50(std::uint64_t n, Timer& timer);    // run-time names, 50 distinct
std::uint64_t kernel_dynamic_5000(std::uint64_t n, Timer& timer);  // 5,000 distinct
std::uint64_t kernel_name_reads_50(std::uint64_t n, Timer& timer);    // the same names read, two clock reads, no scope
std::uint64_t kernel_name_reads_5000(std::uint64_t n, Timer& timer);
std::uint64_t kernel_with_watch(std::uint64_t n, Timer& timer);    // a scope with TRACETREE_WATCH, unwatched
// The 50 run-time names and the order in which a pass picks them (for spall_peer.cpp's twin).
struct NamePicks {
    const std::vector<std::string>& names;
    const std::vector<std::uint32_t>& order;
};
NamePicks name_picks_50();
std::uint64_t kernel_nested(std::uint64_t n, Timer& timer);        // scopes nested 1,024 to an invocation
std::uint64_t kernel_handoff(std::uint64_t n, Timer& timer);       // here(), Continue and its end, one thread
std::uint64_t kernel_handoff_function(std::uint64_t n, Timer& timer);  // the same through wrap() and std::function
std::uint64_t kernel_continued(std::uint64_t n, Timer& timer);     // a scope on a continued path
std::uint64_t kernel_resumption(std::uint64_t n, Timer& timer);    // a coroutine resumed and suspended, a co-scope open
std::uint64_t kernel_co_scope(std::uint64_t n, Timer& timer);      // TRACETREE_CO_SCOPE inside a resumption
std::uint64_t kernel_invocation(std::uint64_t n, Timer& timer);    // 20-node invocations, unwatched
std::uint64_t kernel_invocation_10us(std::uint64_t n, Timer& timer);
std::uint64_t kernel_invocation_1ms(std::uint64_t n, Timer& timer);
// For sessions.cpp, which runs the same code watched: the names of the scopes.
inline constexpr const char* kEnabledName = "bench.enabled";
inline constexpr const char* kNestedOuterName = "bench.nested.outer";
inline constexpr const char* kInvocationName = "bench.invocation";
inline constexpr const char* kWatchSessionName = "bench.watch-session";
inline constexpr std::uint64_t kNestedPerInvocation = 1024;
inline constexpr std::uint64_t kInvocationNodes = 20;
std::uint64_t run_invocations(std::uint64_t n, std::uint64_t wait_ticks, Timer& timer);
std::uint64_t kernel_two_watches(std::uint64_t n, Timer& timer);  // the watch session's scope, two values

// Memory: nodes grow with call sites, never with calls; no allocation per call once names are known.
struct Memory {
    std::uint32_t sites = 3;
    std::uint32_t nodes_after_one = 0, nodes_after_all = 0;
    std::uint64_t calls = 1000000;
    Allocations during_calls;
    std::uint64_t dynamic_calls = 0;
    Allocations during_dynamic;  // 5,000 run-time names already seen
};
Memory measure_memory();

bool check_scopes(const tracetree::Profile& profile);

// ---- sessions.cpp: watched scopes --------------------------------------------------------------

std::uint64_t kernel_watched(std::uint64_t n, Timer& timer);         // a trace session, min_cost never reached
std::uint64_t kernel_nested_watched(std::uint64_t n, Timer& timer);  // scopes inside a watched invocation
std::uint64_t kernel_monitored(std::uint64_t n, Timer& timer);       // a Monitor on the scope
std::uint64_t kernel_recorded(std::uint64_t n, Timer& timer);        // a FlightRecorder on 20-node invocations
std::uint64_t kernel_recorded_10us(std::uint64_t n, Timer& timer);
std::uint64_t kernel_recorded_1ms(std::uint64_t n, Timer& timer);
std::uint64_t kernel_watch_session(std::uint64_t n, Timer& timer);   // a WatchSession taking two values
Allocations watched_allocations(std::uint64_t invocations);         // in steady state, below min_cost

// ---- snapshots.cpp: new nodes, profile() and render() ------------------------------------------

// The trees: a root, then fan-out 10 over 4 (11,111 nodes) or 5 levels (111,111 nodes).
inline constexpr std::uint64_t kSmallTree = 11111;
inline constexpr std::uint64_t kLargeTree = 111111;
inline constexpr int kMaxNewTrees = 5;
std::uint64_t kernel_new_nodes(std::uint64_t trees, Timer& timer);  // nodes made, on a fresh thread
// `profiles` snapshots (tracetree::profile()) of a thread's tree of `nodes` nodes (kSmallTree or
// kLargeTree), each rendered `renders` times, while that thread keeps recording into the tree (or,
// recording = false, waits). Wall and thread CPU times per snapshot and per render; the nodes in the
// first snapshot.
struct SnapshotRun {
    std::vector<double> profile_ns, render_ns, profile_cpu_ns, render_cpu_ns;
    std::uint64_t nodes = 0;
};
SnapshotRun run_snapshots(std::uint64_t nodes, std::uint64_t profiles, std::uint64_t renders, bool recording);
std::uint64_t snapshot_limit();  // the max_nodes a thread needs for the large tree

bool check_snapshots(const tracetree::Profile& profile);

// ---- spall_peer.cpp, built when ../shared/peers/spall/spall.h is present (TRACETREE_BENCH_SPALL) ----

// The twins of the rows issue 26 compares, as spall records them: "spall-nested", "spall-fib",
// "spall-siblings-20", "spall-siblings-200", "spall-dynamic-50", "spall-two-threads".
extern const Named kSpallKernels[];
extern const std::size_t kSpallKernelCount;
bool check_spall();

// ---- a profile lookup shared by the checks ------------------------------------------------------

const tracetree::Node* find_root(const tracetree::Profile& profile, const std::string& thread, const std::string& name);
inline constexpr const char* kMainThread = "bench-main";

}  // namespace bench

#endif
