// tracetree benchmarks, run by `meson test --benchmark` (scripts/bench builds them in release mode).
//
// Timing mode (no arguments): every benchmark runs once per round, the rounds interleave all of them
// in a rotating order, and each result is the median over the rounds; ratios are the median of the
// per-round ratios to the bare clock reads measured in the same round, so a noisy neighbour slows
// both sides of a ratio alike. Every benchmark then checks, through tracetree::profile(), that each
// scope it ran was recorded (or, when disabled, that none was): a recorder that drops events would
// look fast and measure nothing. The exit status is 1 when a check fails.
//
// Kernel mode (`--kernel NAME N`): runs one kernel N times, checks it, prints the number of
// operations done; scripts/bench runs it under callgrind twice and divides the difference in
// instructions by the difference in operations, which cancels start-up and warm-up.
#include "kernels.hpp"

#include <tracetree/all.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define BENCH_TSC 1  // the recorder's clock on this machine: the time-stamp counter
#else
#define BENCH_TSC 0
#endif
using tracetree::detail::Scope;
using tracetree::detail::Site;

volatile std::uint64_t g_sink = 0;  // results land here so that no kernel is dead code

// ---- kernels: n iterations each; the scope loops mirror what the macros expand to -------------

#if BENCH_TSC
[[gnu::noinline]] std::uint64_t run_tsc_pair(std::uint64_t n) {  // what an enabled scope must read
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t start = __builtin_ia32_rdtsc();
        clobber();
        sum += __builtin_ia32_rdtsc() - start;
    }
    return sum;
}
#endif

[[gnu::noinline]] std::uint64_t run_steady_pair(std::uint64_t n) {
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        const Clock::time_point start = Clock::now();
        clobber();
        sum += static_cast<std::uint64_t>((Clock::now() - start).count());
    }
    return sum;
}

[[gnu::noinline]] std::uint64_t run_enabled(std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_SCOPE("bench.enabled");
        clobber();
    }
    return n;
}

[[gnu::noinline]] std::uint64_t run_disabled(std::uint64_t n) {  // called with set_enabled(false)
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_SCOPE("bench.disabled");
        clobber();
    }
    return n;
}

// A tree of kTreeNodes scopes, each a call site the thread has not seen under that parent: a root
// of its own, then fan-out 10 over 4 levels, so a new node has at most 9 siblings to look past.
constexpr int kFanOut = 10;
constexpr int kLevels = 4;
constexpr int kMaxTrees = 5;                  // 5 * 11111 nodes fit the default 65536-node limit
constexpr std::uint64_t kTreeNodes = 11111;  // 1 + 10 + 100 + 1000 + 10000

struct Sites {
    std::deque<std::string> names;  // a deque: the sites point into it and it never moves them
    std::deque<Site> roots;         // one per tree, so that every tree is new
    std::deque<Site> levels;        // kLevels * kFanOut, shared by all parents on a level
    Sites() {
        for (int t = 0; t < kMaxTrees; ++t) add(roots, "tree." + std::to_string(t));
        for (int l = 0; l < kLevels; ++l)
            for (int i = 0; i < kFanOut; ++i) add(levels, "L" + std::to_string(l) + "." + std::to_string(i));
    }
    void add(std::deque<Site>& into, std::string name) {
        names.push_back(std::move(name));
        into.emplace_back(names.back().c_str(), __FILE__, static_cast<int>(into.size()) + 1,
                          tracetree::detail::SiteKind::scope);
    }
};
Sites& sites() {
    static Sites s;
    return s;
}

void build_level(int level) {
    for (int i = 0; i < kFanOut; ++i) {
        const Scope scope(sites().levels[static_cast<std::size_t>(level * kFanOut + i)]);
        if (level + 1 < kLevels) build_level(level + 1);
    }
}
[[gnu::noinline]] void build_trees(int trees) {  // noinline: scripts/bench counts its instructions alone
    for (int t = 0; t < trees; ++t) {
        const Scope root(sites().roots[static_cast<std::size_t>(t)]);
        build_level(0);
    }
}

// Builds `trees` new trees on a fresh thread (a fresh arena); returns nanoseconds per scope.
double run_new_nodes(int trees) {
    double ns = 0;
    std::thread worker([&] {
        tracetree::set_thread_name("bench-new-node");  // creates the thread's arena before the clock starts
        const Clock::time_point start = Clock::now();
        build_trees(trees);
        ns = static_cast<double>((Clock::now() - start).count()) /
             static_cast<double>(kTreeNodes * static_cast<std::uint64_t>(trees));
    });
    worker.join();
    return ns;
}

// Keeps one tree alive on a thread of its own while `body` takes snapshots of it.
template <class Body>
void with_snapshot_tree(Body body) {
    std::promise<void> built, finished;
    std::shared_future<void> finished_future = finished.get_future().share();
    std::thread worker([&] {
        tracetree::set_thread_name("bench-snapshot");
        build_trees(1);
        built.set_value();
        finished_future.wait();
    });
    built.get_future().wait();
    body();
    finished.set_value();
    worker.join();
}

// ---- checks through the public API ---------------------------------------------------------

const tracetree::ThreadProfile* find_thread(const tracetree::Profile& p, const std::string& name) {
    for (const tracetree::ThreadProfile& t : p.threads)
        if (t.thread_name == name) return &t;
    return nullptr;
}

const tracetree::Node* find_root(const tracetree::ThreadProfile* t, const std::string& name) {
    if (t == nullptr) return nullptr;
    for (const tracetree::Node& n : t->roots)
        if (n.name == name) return &n;
    return nullptr;
}

std::uint64_t recorded(const std::string& thread, const std::string& root) {
    const tracetree::Profile p = tracetree::profile();
    const tracetree::Node* n = find_root(find_thread(p, thread), root);
    return n != nullptr ? n->count : 0;
}

// Nodes below and including `node`, and whether every one of them counted exactly `count` calls.
std::uint64_t nodes_with_count(const tracetree::Node& node, std::uint64_t count, bool& all) {
    all = all && node.count == count && node.dropped == 0;
    std::uint64_t nodes = 1;
    for (const tracetree::Node& child : node.children) nodes += nodes_with_count(child, count, all);
    return nodes;
}
std::uint64_t nodes_with_count(const tracetree::ThreadProfile& t, std::uint64_t count, bool& all) {
    std::uint64_t nodes = 0;
    for (const tracetree::Node& root : t.roots) nodes += nodes_with_count(root, count, all);
    all = all && t.dropped_depth == 0 && t.dropped_nodes == 0;
    return nodes;
}

bool check(bool ok, const char* what) {
    if (!ok) std::fprintf(stderr, "CHECK FAILED: %s\n", what);
    return ok;
}

bool check_trees(const char* thread, int trees, std::uint64_t count) {
    const tracetree::Profile p = tracetree::profile();
    const tracetree::ThreadProfile* t = find_thread(p, thread);
    bool all = t != nullptr;
    const std::uint64_t nodes = t != nullptr ? nodes_with_count(*t, count, all) : 0;
    return check(all && nodes == kTreeNodes * static_cast<std::uint64_t>(trees),
                 "every scope of the trees recorded, each node once per build");
}

// ---- memory: nodes grow with call sites, never with calls ---------------------------------

struct Memory {
    std::uint32_t sites = 3;
    std::uint32_t nodes_after_one = 0, nodes_after_all = 0;
    std::uint64_t calls = 1000000, bytes_during_calls = 0, recorded = 0;
};

[[gnu::noinline]] void three_sites() {
    TRACETREE_SCOPE("mem.outer");
    { TRACETREE_SCOPE("mem.a"); clobber(); }
    { TRACETREE_SCOPE("mem.b"); clobber(); }
}

Memory measure_memory() {
    Memory m;
    std::thread worker([&] {
        tracetree::set_thread_name("bench-memory");
        const tracetree::detail::Tree& tree = *tracetree::detail::runtime().this_thread()->main;
        three_sites();
        m.nodes_after_one = tree.nodes() - 1;  // node 0 is the root every arena has
        g_allocated.store(0);
        g_counting.store(true);
        for (std::uint64_t i = 1; i < m.calls; ++i) three_sites();
        g_counting.store(false);
        m.bytes_during_calls = g_allocated.load();
        m.nodes_after_all = tree.nodes() - 1;
    });
    worker.join();
    m.recorded = recorded("bench-memory", "mem.outer");
    return m;
}

// ---- timing mode ------------------------------------------------------------------------------

struct Stats {
    double median = 0, p25 = 0, p75 = 0;
};
Stats stats(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
    return {at(0.5), at(0.25), at(0.75)};
}

struct Bench {
    const char* name;
    double (*run)(std::uint64_t n);  // nanoseconds per operation
    int every;                       // runs in every round, or every tenth (a new-node round is slow)
    std::vector<double> ns;
    std::vector<std::size_t> rounds;  // the round of each result, to pair it with that round's baseline
};

template <std::uint64_t (*Kernel)(std::uint64_t)>
double timed(std::uint64_t n) {
    const Clock::time_point start = Clock::now();
    g_sink = g_sink + Kernel(n);
    return static_cast<double>((Clock::now() - start).count()) / static_cast<double>(n);
}

double timed_disabled(std::uint64_t n) {
    tracetree::set_enabled(false);
    const double ns = timed<run_disabled>(n);
    tracetree::set_enabled(true);
    return ns;
}

double timed_new_nodes(std::uint64_t) { return run_new_nodes(1); }

std::string cell(double ns) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, ns < 10 ? "%.2f ns" : ns < 10000 ? "%.1f ns" : "%.0f ns", ns);
    return buffer;
}
double ratio(const Bench& b, const Bench* base) {  // the median of the per-round ratios
    std::vector<double> ratios;
    for (std::size_t i = 0; i < b.ns.size(); ++i) ratios.push_back(b.ns[i] / base->ns[b.rounds[i]]);
    return stats(ratios).median;
}
std::string ratio_cell(const Bench& b, const Bench* base) {
    if (base == nullptr) return "n/a";
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.2fx", ratio(b, base));
    return buffer;
}

int timing_mode(int rounds, std::uint64_t n) {
    bool ok = true;
    tracetree::set_thread_name("bench-main");

    // Snapshot and render, on a tree held by a live thread (exited threads are kept as values).
    const int snapshots = std::max(1, rounds / 10);
    std::vector<double> snapshot_us, render_us;
    std::size_t rendered = 0;
    with_snapshot_tree([&] {
        const double per_10k = 10000.0 / static_cast<double>(kTreeNodes);
        for (int r = 0; r < snapshots; ++r) {
            const Clock::time_point start = Clock::now();
            const tracetree::Profile p = tracetree::profile();
            const Clock::time_point taken = Clock::now();
            std::ostringstream out;
            tracetree::render(out, p, tracetree::RenderOptions().colour(tracetree::Colour::never));
            const Clock::time_point done = Clock::now();
            rendered = out.str().size();
            snapshot_us.push_back(static_cast<double>((taken - start).count()) * per_10k / 1000.0);
            render_us.push_back(static_cast<double>((done - taken).count()) * per_10k / 1000.0);
        }
        ok &= check_trees("bench-snapshot", 1, 1);
        ok &= check(rendered > kTreeNodes * 20, "the render wrote a line per node");
    });

    std::vector<Bench> benches = {
#if BENCH_TSC
        {"two `__builtin_ia32_rdtsc()` reads (baseline)", timed<run_tsc_pair>, 1, {}, {}},
#endif
        {"two `steady_clock::now()` (baseline)", timed<run_steady_pair>, 1, {}, {}},
        {"enabled scope, node exists", timed<run_enabled>, 1, {}, {}},
        {"runtime-disabled scope (`set_enabled(false)`)", timed_disabled, 1, {}, {}},
        {"compiled-out scope (`-DTRACETREE_DISABLE`)", timed<bench::run_compiled_out>, 1, {}, {}},
        {"scope that creates its node", timed_new_nodes, 10, {}, {}},
    };
    for (Bench& b : benches) b.run(n);  // warm-up: the thread's arena and the nodes exist afterwards
    // Short rounds keep a baseline and the benchmarks it divides close in time: on a shared machine
    // even the counter's own cost jumps between levels (19, 34, 49 ns here) from one millisecond to
    // the next, and a ratio across such a jump would measure the neighbours.
    std::uint64_t new_node_runs = 1;
    for (int r = 0; r < rounds; ++r)
        for (std::size_t k = 0; k < benches.size(); ++k) {
            Bench& b = benches[(static_cast<std::size_t>(r) + k) % benches.size()];
            if (r % b.every != 0) continue;
            b.ns.push_back(b.run(n));
            b.rounds.push_back(static_cast<std::size_t>(r));
            if (b.run == timed_new_nodes) ++new_node_runs;
        }

    const std::uint64_t runs = static_cast<std::uint64_t>(rounds) + 1;
    ok &= check(recorded("bench-main", "bench.enabled") == runs * n, "every enabled scope recorded");
    ok &= check(recorded("bench-main", "bench.disabled") == 0, "no runtime-disabled scope recorded");
    const tracetree::Profile p = tracetree::profile();
    bool compiled_out_seen = false;
    for (const tracetree::ThreadProfile& t : p.threads) compiled_out_seen |= find_root(&t, "bench.compiled_out") != nullptr;
    ok &= check(!compiled_out_seen, "no compiled-out scope recorded");
    ok &= check_trees("bench-new-node", 1, new_node_runs);
    const Memory m = measure_memory();
    ok &= check(m.recorded == m.calls, "every call of the memory check recorded");

#if BENCH_TSC
    const Bench* tsc = &benches[0];
    const Bench* steady = &benches[1];
#else
    const Bench* tsc = nullptr;
    const Bench* steady = &benches[0];
#endif
    std::printf("| benchmark | median | p25 .. p75 | vs two TSC reads | vs two steady_clock reads |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: |\n");
    for (const Bench& b : benches) {
        const Stats s = stats(b.ns);
        std::printf("| %s | %s | %s .. %s | %s | %s |\n", b.name, cell(s.median).c_str(), cell(s.p25).c_str(),
                    cell(s.p75).c_str(), ratio_cell(b, tsc).c_str(), ratio_cell(b, steady).c_str());
    }
    const Stats snap = stats(snapshot_us), rend = stats(render_us);
    std::printf("| `profile()` snapshot, per 10k nodes | %.0f µs | %.0f .. %.0f µs | | |\n", snap.median, snap.p25,
                snap.p75);
    std::printf("| `render()`, per 10k nodes | %.0f µs | %.0f .. %.0f µs | | |\n", rend.median, rend.p25, rend.p75);

    const double enabled_ratio = tsc != nullptr ? ratio(benches[2], tsc) : 0.0;
    const double disabled_ns = stats(benches[tsc != nullptr ? 3 : 2].ns).median;
    const std::size_t node_bytes = sizeof(tracetree::detail::NodeRecord);
    std::printf("\n%d rounds of %llu scopes; a new %llu-node tree every tenth round; %d snapshots and renders of "
                "such a tree.\n\n",
                rounds, static_cast<unsigned long long>(n), static_cast<unsigned long long>(kTreeNodes), snapshots);
    std::printf("| target | measured | met |\n| --- | ---: | --- |\n");
    if (tsc != nullptr)
        std::printf("| enabled scope <= 1.10x two TSC reads (aim 1.05x) | %.2fx | %s |\n", enabled_ratio,
                    enabled_ratio <= 1.10 ? "yes" : "no");
    std::printf("| runtime-disabled scope < 1 ns | %.2f ns | %s |\n", disabled_ns, disabled_ns < 1.0 ? "yes" : "no");
    std::printf("| bytes per node <= 64 | %zu | %s |\n", node_bytes, node_bytes <= 64 ? "yes" : "no");
    std::printf("| nodes per call site | %u nodes for %u sites | %s |\n", m.nodes_after_one, m.sites,
                m.nodes_after_one == m.sites ? "yes" : "no");
    std::printf("| growth over %llu more calls of existing sites | %u nodes, %llu bytes allocated | %s |\n",
                static_cast<unsigned long long>(m.calls - 1), m.nodes_after_all - m.nodes_after_one,
                static_cast<unsigned long long>(m.bytes_during_calls),
                m.nodes_after_all == m.nodes_after_one && m.bytes_during_calls == 0 ? "yes" : "no");
    ok &= check(m.nodes_after_one == m.sites && m.nodes_after_all == m.nodes_after_one && m.bytes_during_calls == 0,
                "one node per call site, none added and no byte allocated by further calls");
    std::printf("\nrecorded counts: %s\n", ok ? "all match" : "MISMATCH");
    return ok ? 0 : 1;
}

// ---- kernel mode (for callgrind) ------------------------------------------------------------

int kernel_mode(const std::string& name, std::uint64_t n) {
    tracetree::set_thread_name("bench-main");
    double ops = static_cast<double>(n);
    bool ok = true;
    if (name == "tsc-pair") {
#if BENCH_TSC
        g_sink = run_tsc_pair(n);
#else
        return 2;
#endif
    } else if (name == "steady-pair") {
        g_sink = run_steady_pair(n);
    } else if (name == "enabled") {
        run_enabled(1);  // creates the node: what follows is the steady state
        run_enabled(n);
        ok = check(recorded("bench-main", "bench.enabled") == n + 1, "every enabled scope recorded");
    } else if (name == "disabled") {
        tracetree::set_enabled(false);
        run_disabled(n);
        tracetree::set_enabled(true);
        ok = check(recorded("bench-main", "bench.disabled") == 0, "no runtime-disabled scope recorded");
    } else if (name == "compiled-out") {
        g_sink = run_compiled_out(n);
    } else if (name == "new-node") {  // n trees on one thread
        if (n < 1 || n > kMaxTrees) return 2;
        run_new_nodes(static_cast<int>(n));
        ok = check_trees("bench-new-node", static_cast<int>(n), 1);
        ops = static_cast<double>(n * kTreeNodes);
    } else if (name == "snapshot" || name == "render") {  // per 10k nodes
        with_snapshot_tree([&] {
            if (name == "snapshot") {
                for (std::uint64_t i = 0; i < n; ++i) g_sink = g_sink + tracetree::profile().threads.size();
            } else {
                const tracetree::Profile p = tracetree::profile();
                for (std::uint64_t i = 0; i < n; ++i) {
                    std::ostringstream out;
                    tracetree::render(out, p, tracetree::RenderOptions().colour(tracetree::Colour::never));
                    g_sink = g_sink + out.str().size();
                }
            }
            ok = check_trees("bench-snapshot", 1, 1);
        });
        ops = static_cast<double>(n * kTreeNodes) / 10000.0;
    } else {
        return 2;
    }
    std::printf("ops %.6f\n", ops);
    return ok ? 0 : 1;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
    if (argc == 4 && std::strcmp(argv[1], "--kernel") == 0)
        return bench::kernel_mode(argv[2], std::strtoull(argv[3], nullptr, 10));
    int rounds = 1001;
    std::uint64_t n = 1 << 14;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
        if (std::strcmp(argv[i], "--scopes") == 0) n = std::max<std::uint64_t>(1, std::strtoull(argv[i + 1], nullptr, 10));
    }
    return bench::timing_mode(rounds, n);
}
