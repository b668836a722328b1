// tracetree benchmarks, run by `meson test --benchmark` (scripts/bench builds them in release mode).
//
// Timing mode (no arguments): first the snapshots (profile() and render() of an 11,111- and a
// 111,111-node tree while its thread keeps recording); then every other benchmark runs once per
// round, the rounds interleave all of them in a rotating order, and each result is the median over
// the rounds. Ratios are the median of the per-round ratios to the bare clock reads (or to another
// benchmark) measured in the same round, so a noisy neighbour slows both sides of a ratio alike.
// Every kernel counts what it ran, and the checks compare that with what the recorder's public API
// reports (profile(), and each session's own results): a recorder that drops events would look fast
// and measure nothing. The exit status is 1 when a check fails, never for a missed target.
//
// Kernel mode (`--kernel NAME N`): runs one kernel for about N operations, checks it, prints the
// number of operations done; scripts/bench runs it under callgrind for two N and divides the
// difference in instructions by the difference in operations, which cancels start-up and warm-up.
//
// The kernels are in scopes.cpp, siblings.cpp, sessions.cpp and snapshots.cpp (kernels.hpp).
#include "kernels.hpp"

#include <tracetree/control.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace bench {

// ---- shared helpers (kernels.hpp) ---------------------------------------------------------------

namespace {
bool g_checks_passed = true;
}

bool check(bool ok, const std::string& what) {
    if (!ok) std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
    g_checks_passed = g_checks_passed && ok;
    return ok;
}
bool all_checks_passed() { return g_checks_passed; }

std::uint64_t now_ticks() noexcept { return tracetree::detail::ticks(); }

double ticks_per_us() {
    static const double measured = [] {  // over 20 ms of the steady clock, once
        using Clock = std::chrono::steady_clock;
        const Clock::time_point start = Clock::now();
        const std::uint64_t first = now_ticks();
        while (Clock::now() - start < std::chrono::milliseconds(20)) clobber();
        const std::uint64_t last = now_ticks();
        const double us = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()) / 1000.0;
        return static_cast<double>(last - first) / us;
    }();
    return measured;
}

const tracetree::Node* find_root(const tracetree::Profile& p, const std::string& thread, const std::string& name) {
    for (const tracetree::ThreadProfile& t : p.threads) {
        if (t.thread_name != thread) continue;
        for (const tracetree::Node& n : t.roots)
            if (n.name == name) return &n;
    }
    return nullptr;
}

namespace {

// ---- the benchmarks -------------------------------------------------------------------------------

struct Case {
    Case(const char* label_, const char* kernel_, Kernel run_, std::uint64_t n_, int every_ = 1,
         const char* versus_ = nullptr, Kernel without_ = nullptr)
        : label(label_), kernel(kernel_), run(run_), n(n_), every(every_), versus(versus_), without(without_) {}
    const char* label;
    const char* kernel;  // its --kernel name
    Kernel run;
    std::uint64_t n;  // operations per round
    int every;        // runs every round, or every tenth (a slow one)
    const char* versus;  // another case's kernel, for the last ratio column
    Kernel without;      // per invocation: the same code without the session, run just before
    std::vector<double> ns, without_ns;  // per operation, one per run
    std::vector<std::size_t> rounds;     // the round of each run
};

template <int Count, bool Shuffled>
std::uint64_t siblings(std::uint64_t n, Timer& timer) {
    return run_siblings(Count, Shuffled, n, timer);
}

constexpr std::uint64_t kScopes = 16384;  // per round, of each per-scope benchmark

// Per-scope benchmarks: nanoseconds per scope, and ratios.
std::vector<Case> scope_cases() {
    return {
        {"two clock reads (`__builtin_ia32_rdtsc()` on x86-64; baseline)", "tsc-pair", kernel_tsc_pair, kScopes},
        {"two `steady_clock::now()`", "steady-pair", kernel_steady_pair, kScopes},
        {"enabled scope, node exists (one site, repeated)", "enabled", kernel_enabled, kScopes},
        {"runtime-disabled scope (`set_enabled(false)`)", "disabled", kernel_disabled, kScopes},
        {"compiled-out scope (`-DTRACETREE_DISABLE`)", "compiled-out", kernel_compiled_out, kScopes},
        {"scope that creates its node (a new 11,111-node tree)", "new-node", kernel_new_nodes, 1, 10},
        {"enabled scope, two threads recording at once (one timed)", "two-threads", kernel_two_threads, kScopes, 1, "enabled"},
        {"recursive fib(20), a scope on every call (21,891)", "fib", kernel_fib, kScopes},
        {"a parent calling 1 call site", "siblings-1-in-order", siblings<1, false>, kScopes},
        {"a parent calling 2 call sites, in order", "siblings-2-in-order", siblings<2, false>, kScopes},
        {"20 call sites, in order", "siblings-20-in-order", siblings<20, false>, kScopes},
        {"200 call sites, in order", "siblings-200-in-order", siblings<200, false>, kScopes},
        {"1,000 call sites, in order", "siblings-1000-in-order", siblings<1000, false>, kScopes},
        {"2 call sites, shuffled", "siblings-2-shuffled", siblings<2, true>, kScopes},
        {"20 call sites, shuffled", "siblings-20-shuffled", siblings<20, true>, kScopes},
        {"200 call sites, shuffled", "siblings-200-shuffled", siblings<200, true>, kScopes},
        {"1,000 call sites, shuffled", "siblings-1000-shuffled", siblings<1000, true>, kScopes},
        {"50 names read and two clock reads, no scope (baseline of the next row)", "name-reads-50", kernel_name_reads_50, kScopes},
        {"run-time names, 50 distinct (`TRACETREE_SCOPE_DYNAMIC`)", "dynamic-50", kernel_dynamic_50, kScopes, 1, "name-reads-50"},
        {"5,000 names read and two clock reads, no scope", "name-reads-5000", kernel_name_reads_5000, kScopes},
        {"run-time names, 5,000 distinct", "dynamic-5000", kernel_dynamic_5000, kScopes, 1, "name-reads-5000"},
        {"unwatched scope with a `TRACETREE_WATCH(\"v\", i)`", "with-watch", kernel_with_watch, kScopes, 1, "enabled"},
        {"watched scope: `TraceSession`, min_cost never reached", "watched", kernel_watched, kScopes, 1, "enabled"},
        {"monitored scope: `Monitor`", "monitored", kernel_monitored, kScopes, 1, "enabled"},
        {"scope nested in an unwatched invocation (1,024 per invocation)", "nested", kernel_nested, kScopes},
        {"scope nested in a watched invocation (min_cost never reached)", "nested-watched", kernel_nested_watched, kScopes,
         1, "nested"},
        {"hand-off: `here()`, `Continue` and its end (one thread, no queue)", "handoff", kernel_handoff, kScopes},
        {"hand-off through `std::function`: `wrap(here(), task)`, moved once, run (one thread)", "handoff-function",
         kernel_handoff_function, kScopes},
        {"scope on a continued path (inside a `Continue`)", "continued", kernel_continued, kScopes, 1, "enabled"},
        {"coroutine resumed and suspended (`Resumed`), a co-scope open", "resumption", kernel_resumption, kScopes},
        {"`TRACETREE_CO_SCOPE` (inside a `Resumed`)", "co-scope", kernel_co_scope, kScopes, 1, "enabled"},
    };
}

// Per-invocation benchmarks: microseconds per invocation, with the session and without it.
std::vector<Case> invocation_cases() {
    return {
        {"20-node invocation, `FlightRecorder` (min_cost 0, keep 16)", "recorded", kernel_recorded, 256, 1, nullptr,
         kernel_invocation},
        {"~10 µs root of 20 nodes, `FlightRecorder`", "recorded-10us", kernel_recorded_10us, 32, 1, nullptr,
         kernel_invocation_10us},
        {"~1 ms root of 20 nodes, `FlightRecorder`", "recorded-1ms", kernel_recorded_1ms, 5, 10, nullptr,
         kernel_invocation_1ms},
        {"`WatchSession` taking two values", "watch-session", kernel_watch_session, 256, 1, nullptr, kernel_two_watches},
    };
}

// spall's twins of the rows issue 26 compares (bench/spall_peer.cpp), each beside its tracetree row.
struct Twin {
    const char* label;
    const char* tracetree;  // the tracetree row's kernel
    const char* spall;
};
const Twin kTwins[] = {
    {"nested pair (1,024 per invocation)", "nested", "spall-nested"},
    {"fib(20)", "fib", "spall-fib"},
    {"20 sibling sites, in order", "siblings-20-in-order", "spall-siblings-20"},
    {"200 sibling sites, in order", "siblings-200-in-order", "spall-siblings-200"},
    {"run-time names, 50 distinct", "dynamic-50", "spall-dynamic-50"},
    {"two threads (one timed)", "two-threads", "spall-two-threads"},
};
std::vector<Case> peer_cases() {
    std::vector<Case> cases;
#ifdef TRACETREE_BENCH_SPALL
    for (std::size_t i = 0; i < kSpallKernelCount; ++i)
        cases.emplace_back(kSpallKernels[i].name, kSpallKernels[i].name, kSpallKernels[i].run, kScopes);
#endif
    return cases;
}

// Kernels that are no row of their own (the "without" side of an invocation row).
const Named kOtherKernels[] = {
    {"invocation", kernel_invocation},
    {"two-watches", kernel_two_watches},
};

// ---- statistics and cells -------------------------------------------------------------------------

struct Stats {
    double median = 0, p25 = 0, p75 = 0;
};
Stats stats(std::vector<double> v) {
    if (v.empty()) return {};
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
    return {at(0.5), at(0.25), at(0.75)};
}

std::vector<double> ratios(const Case& c, const Case& base) {  // per round
    std::vector<double> r;
    for (std::size_t i = 0; i < c.ns.size(); ++i) r.push_back(c.ns[i] / base.ns[c.rounds[i]]);
    return r;
}
double ratio(const Case& c, const Case& base) { return stats(ratios(c, base)).median; }

std::vector<double> differences(const Case& c) {
    std::vector<double> d;
    for (std::size_t i = 0; i < c.ns.size(); ++i) d.push_back(c.ns[i] - c.without_ns[i]);
    return d;
}

std::string format(const char* pattern, double value) {
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, pattern, value);
    return buffer;
}
std::string ns_cell(double ns) {
    return format(ns < 10 ? "%.2f ns" : ns < 10000 ? "%.1f ns" : "%.0f ns", ns);
}
std::string us_cell(double ns) { return format(ns < 10000 ? "%.2f µs" : "%.1f µs", ns / 1000.0); }
std::string ratio_cell(double r) { return format("%.2fx", r); }
std::string count_cell(std::uint64_t count) {  // 111111 -> 111,111
    std::string digits = std::to_string(count);
    for (int at = static_cast<int>(digits.size()) - 3; at > 0; at -= 3) digits.insert(static_cast<std::size_t>(at), ",");
    return digits;
}

const Case& find_case(const std::vector<Case>& cases, const char* kernel) {
    for (const Case& c : cases)
        if (std::strcmp(c.kernel, kernel) == 0) return c;
    std::fprintf(stderr, "bench: no case %s\n", kernel);
    std::abort();
}

// ---- targets --------------------------------------------------------------------------------------

struct Targets {
    int met = 0, missed = 0;
    std::string breakdown;  // kernels behind missed targets, for scripts/bench
    void row(const std::string& target, const std::string& measured, bool ok, const char* kernel = nullptr,
             const std::string& missed_by = "") {
        std::printf("| %s | %s | %s |\n", target.c_str(), measured.c_str(), ok ? "yes" : ("no" + missed_by).c_str());
        ++(ok ? met : missed);
        if (!ok && kernel != nullptr) breakdown += std::string(breakdown.empty() ? "" : " ") + kernel;
    }
    // `measured` against an upper bound, in the unit of `cell`.
    void at_most(const std::string& target, double measured, double bound, std::string (*cell)(double),
                 const char* kernel) {
        row(target, cell(measured), measured <= bound, kernel, ": " + format("%.0f%% over", (measured / bound - 1) * 100));
    }
};

// ---- timing mode ------------------------------------------------------------------------------------

struct Snapshots {
    std::uint64_t nodes = 0;
    Stats profile_per_node, render_per_node;  // wall time
    double profile_cpu_per_node = 0, render_cpu_per_node = 0, profile_ns = 0, render_ns = 0;
};
Snapshots snapshots(std::uint64_t tree, std::uint64_t count, bool recording) {
    const SnapshotRun run = run_snapshots(tree, count, 1, recording);
    const auto per_node = [&](std::vector<double> ns) {
        for (double& x : ns) x /= static_cast<double>(run.nodes);
        return stats(ns);
    };
    Snapshots s;
    s.nodes = run.nodes;
    s.profile_per_node = per_node(run.profile_ns);
    s.render_per_node = per_node(run.render_ns);
    s.profile_cpu_per_node = per_node(run.profile_cpu_ns).median;
    s.render_cpu_per_node = per_node(run.render_cpu_ns).median;
    s.profile_ns = stats(run.profile_ns).median;
    s.render_ns = stats(run.render_ns).median;
    return s;
}

// Per scope: the mean over the round's run. Per invocation: the median of the run's invocations,
// with and without the session, in an order that alternates with the rounds (the second of two runs
// is the likelier to be preempted on a loaded machine).
void run_case(Case& c, std::size_t round) {
    if (c.without == nullptr) {
        Timer timer;
        const std::uint64_t ops = c.run(c.n, timer);
        c.ns.push_back(timer.ns() / static_cast<double>(ops));
    } else {
        const auto median_lap = [&](Kernel kernel) {
            std::vector<double> laps;
            laps.reserve(c.n);
            Timer timer;
            timer.laps = &laps;
            kernel(c.n, timer);
            return stats(laps).median;
        };
        const bool without_first = round % 2 == 0;
        const double first = median_lap(without_first ? c.without : c.run);
        const double second = median_lap(without_first ? c.run : c.without);
        c.ns.push_back(without_first ? second : first);
        c.without_ns.push_back(without_first ? first : second);
    }
    c.rounds.push_back(round);
}

int timing_mode(int rounds) {
    tracetree::Limits limits = tracetree::limits();
    limits.max_nodes = static_cast<std::uint32_t>(snapshot_limit());  // for trees started from here on
    tracetree::set_limits(limits);
    tracetree::set_thread_name(kMainThread);
    ticks_per_us();

    // Snapshots first, while nothing else is recorded: the profile holds the tree and little more.
    // Enough snapshots that the first, which pays for fresh memory (a page fault per 4 KiB of values),
    // stays in the spread and out of the median.
    const int small_count = std::max(5, rounds / 10), large_count = std::max(5, rounds / 25);
    const Snapshots small = snapshots(kSmallTree, static_cast<std::uint64_t>(small_count), true);
    const Snapshots large = snapshots(kLargeTree, static_cast<std::uint64_t>(large_count), true);
    // For comparison: the same small tree while its thread waits, so nothing writes what the snapshot reads.
    const Snapshots parked = snapshots(kSmallTree, static_cast<std::uint64_t>(small_count), false);

    std::vector<Case> scopes = scope_cases(), invocations = invocation_cases(), peers = peer_cases();
    std::vector<Case*> all;
    for (Case& c : scopes) all.push_back(&c);
    for (Case& c : peers) all.push_back(&c);
    for (Case& c : invocations) all.push_back(&c);
    for (Case* c : all) {  // warm-up: nodes, names, sessions' buffers exist afterwards
        Timer unused;
        if (c->without != nullptr) c->without(c->n, unused);
        c->run(c->n, unused);
    }
    // Short rounds keep a baseline and the benchmarks it divides close in time: on a shared machine
    // even the counter's own cost jumps between levels from one millisecond to the next, and a ratio
    // across such a jump would measure the neighbours.
    for (int r = 0; r < rounds; ++r)
        for (std::size_t k = 0; k < all.size(); ++k) {
            Case& c = *all[(static_cast<std::size_t>(r) + k) % all.size()];
            if (r % c.every == 0) run_case(c, static_cast<std::size_t>(r));
        }

    const Memory m = measure_memory();
    const Allocations watched = watched_allocations(100000);
    const tracetree::Profile p = tracetree::profile();
    check_scopes(p);
    check_snapshots(p);
#ifdef TRACETREE_BENCH_SPALL
    check_spall();
#endif

    // ---- per scope ----
    const Case& tsc = find_case(scopes, "tsc-pair");
    std::printf("| per scope | median | p25 .. p75 | vs two clock reads | vs |\n");
    std::printf("| --- | ---: | ---: | ---: | --- |\n");
    for (const Case& c : scopes) {
        const Stats s = stats(c.ns);
        std::string versus;
        if (c.versus != nullptr) versus = ratio_cell(ratio(c, find_case(scopes, c.versus))) + " " + c.versus;
        std::printf("| %s | %s | %s .. %s | %s | %s |\n", c.label, ns_cell(s.median).c_str(), ns_cell(s.p25).c_str(),
                    ns_cell(s.p75).c_str(), ratio_cell(ratio(c, tsc)).c_str(), versus.c_str());
    }
    if (!peers.empty()) {
        std::printf("\n| against spall, same rounds (per scope, vs two clock reads) | tracetree | spall | difference |\n");
        std::printf("| --- | ---: | ---: | ---: |\n");
        for (const Twin& twin : kTwins) {
            const double ours = ratio(find_case(scopes, twin.tracetree), tsc), theirs = ratio(find_case(peers, twin.spall), tsc);
            std::printf("| %s | %s | %s | %+.2f |\n", twin.label, ratio_cell(ours).c_str(), ratio_cell(theirs).c_str(),
                        ours - theirs);
        }
    } else {
        std::printf("\n(spall: ../shared/peers/spall/spall.h was not found when this was built: no peer in this run.)\n");
    }
    std::printf("\n| per invocation (medians) | with the session | p25 .. p75 | without | the session's cost (per-round differences) |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: |\n");
    for (const Case& c : invocations) {
        const Stats s = stats(c.ns);
        std::printf("| %s | %s | %s .. %s | %s | %s |\n", c.label, us_cell(s.median).c_str(), us_cell(s.p25).c_str(),
                    us_cell(s.p75).c_str(), us_cell(stats(c.without_ns).median).c_str(),
                    us_cell(stats(differences(c)).median).c_str());
    }
    std::printf("\n| snapshot of a live tree (its thread keeps recording) | nodes | per node | p25 .. p75 | per node, "
                "thread CPU time | per snapshot |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (const Snapshots* s : {&small, &large, &parked}) {
        std::printf("| `profile()`%s | %s | %s | %s .. %s | %s | %s |\n",
                    s == &parked ? ", for comparison: the thread waits" : "", count_cell(s->nodes).c_str(),
                    ns_cell(s->profile_per_node.median).c_str(), ns_cell(s->profile_per_node.p25).c_str(),
                    ns_cell(s->profile_per_node.p75).c_str(), ns_cell(s->profile_cpu_per_node).c_str(),
                    us_cell(s->profile_ns).c_str());
        std::printf("| `render()` of that profile | %s | %s | %s .. %s | %s | %s |\n", count_cell(s->nodes).c_str(),
                    ns_cell(s->render_per_node.median).c_str(), ns_cell(s->render_per_node.p25).c_str(),
                    ns_cell(s->render_per_node.p75).c_str(), ns_cell(s->render_cpu_per_node).c_str(),
                    us_cell(s->render_ns).c_str());
    }
    std::printf("\n%d rounds of %llu scopes per benchmark (per invocation: %llu, %llu, %llu and %llu invocations); "
                "new-node and ~1 ms rows every tenth round; %d and %d snapshots.\n\n",
                rounds, static_cast<unsigned long long>(kScopes), static_cast<unsigned long long>(invocations[0].n),
                static_cast<unsigned long long>(invocations[1].n), static_cast<unsigned long long>(invocations[2].n),
                static_cast<unsigned long long>(invocations[3].n), small_count, large_count);

    // ---- targets ----
    Targets t;
    std::printf("| target | measured | met |\n| --- | ---: | --- |\n");
    const auto vs_tsc = [&](const char* kernel) { return ratio(find_case(scopes, kernel), tsc); };
    const auto vs = [&](const char* kernel) {
        const Case& c = find_case(scopes, kernel);
        return ratio(c, find_case(scopes, c.versus));
    };
    t.at_most("enabled scope <= 1.10x two clock reads (aim 1.05x)", vs_tsc("enabled"), 1.10, ratio_cell, "enabled");
    t.at_most("runtime-disabled scope < 1 ns", stats(find_case(scopes, "disabled").ns).median, 1.0, ns_cell, "disabled");
    t.at_most("20 call sites in order <= 1.10x", vs_tsc("siblings-20-in-order"), 1.10, ratio_cell, "siblings-20-in-order");
    t.at_most("200 call sites in order <= 1.20x", vs_tsc("siblings-200-in-order"), 1.20, ratio_cell, "siblings-200-in-order");
    t.at_most("20 call sites shuffled <= 1.10x", vs_tsc("siblings-20-shuffled"), 1.10, ratio_cell, "siblings-20-shuffled");
    t.at_most("200 call sites shuffled <= 1.20x", vs_tsc("siblings-200-shuffled"), 1.20, ratio_cell, "siblings-200-shuffled");
    t.at_most("run-time names, 50 distinct <= 1.5x", vs_tsc("dynamic-50"), 1.5, ratio_cell, "dynamic-50");
    t.at_most("run-time names, 5,000 distinct <= 2.5x", vs_tsc("dynamic-5000"), 2.5, ratio_cell, "dynamic-5000");
    t.row("no allocation per run-time-named scope once its name is seen",
          count_cell(m.during_dynamic.calls) + " allocations in " + count_cell(m.dynamic_calls) + " scopes",
          m.during_dynamic.calls == 0, "dynamic-5000");
    t.at_most("watched scope (min_cost never reached) <= 2.0x an unwatched one (aim 1.3x)", vs("watched"), 2.0,
              ratio_cell, "watched");
    t.at_most("scope nested in a watched invocation <= 1.3x nested in an unwatched one", vs("nested-watched"), 1.3,
              ratio_cell, "nested-watched");
    t.at_most("hand-off (`here()`, `Continue`, its end) <= 100 ns", stats(find_case(scopes, "handoff").ns).median, 100,
              ns_cell, "handoff");
    t.at_most("scope on a continued path <= 1.10x one that is not", vs("continued"), 1.10, ratio_cell, "continued");
    t.at_most("hand-off through `std::function` <= 50 ns (issue 40)", stats(find_case(scopes, "handoff-function").ns).median,
              50, ns_cell, "handoff-function");
    t.at_most("resumption with a co-scope open <= 50 ns (issue 40)", stats(find_case(scopes, "resumption").ns).median, 50,
              ns_cell, "resumption");
    t.at_most("co-scope <= 2x a plain scope (issue 40)", vs("co-scope"), 2.0, ratio_cell, "co-scope");
    t.row("no allocation per watched invocation below min_cost (steady state)",
          count_cell(watched.calls) + " allocations in 100,000 invocations", watched.calls == 0, "watched");
    {  // within noise: no farther from 1.00x than half the spread of its own per-round ratios, or 2%
        const Case& c = find_case(scopes, "with-watch");
        const Stats s = stats(ratios(c, find_case(scopes, "enabled")));
        const double noise = std::max(0.02, (s.p75 - s.p25) / 2);
        t.row("unwatched `TRACETREE_WATCH` within noise of the scope without it (within max(2%, half its own "
              "p25 .. p75) of 1.00x)",
              ratio_cell(s.median) + " (noise " + format("%.3f", noise) + ")", std::fabs(s.median - 1) <= noise, "with-watch");
    }
    // Judged on the snapshotting thread's CPU time: on a loaded machine its wall time is mostly waiting for a core.
    t.at_most("`profile()` <= 100 ns per node (thread CPU time), 11,111 nodes", small.profile_cpu_per_node, 100,
              ns_cell, "snapshot-10k");
    t.at_most("`profile()` <= 100 ns per node (thread CPU time), 111,111 nodes", large.profile_cpu_per_node, 100,
              ns_cell, "snapshot-100k");
    t.at_most("`render()` <= 250 ns per node (thread CPU time), 11,111 nodes", small.render_cpu_per_node, 250, ns_cell,
              "render-10k");
    t.at_most("`render()` <= 250 ns per node (thread CPU time), 111,111 nodes", large.render_cpu_per_node, 250,
              ns_cell, "render-100k");
    // Issue 26: as close to the floor as the lowest-overhead peer, measured in the same rounds.
    for (const Twin& twin : kTwins) {
        if (peers.empty()) break;
        const double ours = vs_tsc(twin.tracetree), theirs = ratio(find_case(peers, twin.spall), tsc);
        if (twin.spall == std::string("spall-nested") || twin.spall == std::string("spall-fib") ||
            twin.spall == std::string("spall-two-threads"))
            t.row(std::string(twin.label) + " within 0.05 of spall's ratio",
                  ratio_cell(ours) + " vs " + ratio_cell(theirs), ours <= theirs + 0.05, twin.tracetree);
    }
    const std::size_t node_bytes = sizeof(tracetree::detail::NodeRecord);
    t.row("bytes per node <= 64", std::to_string(node_bytes), node_bytes <= 64);
    t.row("one node per call site", std::to_string(m.nodes_after_one) + " nodes for " + std::to_string(m.sites) + " sites",
          m.nodes_after_one == m.sites);
    t.row("no growth over " + count_cell(m.calls - 1) + " more calls of existing sites",
          std::to_string(m.nodes_after_all - m.nodes_after_one) + " nodes, " + count_cell(m.during_calls.bytes) + " bytes",
          m.nodes_after_all == m.nodes_after_one && m.during_calls.calls == 0);

    std::printf("\nTargets met: %d of %d. Recorded counts: %s.\n", t.met, t.met + t.missed,
                all_checks_passed() ? "all match" : "MISMATCH");
    if (!t.breakdown.empty()) std::printf("<!-- breakdown: %s -->\n", t.breakdown.c_str());
    return all_checks_passed() ? 0 : 1;
}

// ---- kernel mode (for callgrind) ------------------------------------------------------------------

int kernel_mode(const std::string& name, std::uint64_t n) {
    tracetree::Limits limits = tracetree::limits();
    limits.max_nodes = static_cast<std::uint32_t>(snapshot_limit());
    tracetree::set_limits(limits);
    tracetree::set_thread_name(kMainThread);
    double ops = 0;
    const bool profile = name == "snapshot-10k" || name == "snapshot-100k";
    if (profile || name == "render-10k" || name == "render-100k") {  // per node: n snapshots, or n renders of one
        const std::uint64_t tree = name.find("100k") != std::string::npos ? kLargeTree : kSmallTree;
        const SnapshotRun run = run_snapshots(tree, profile ? n : 1, profile ? 0 : n, false);
        ops = static_cast<double>(n * run.nodes);
    } else {
        Kernel kernel = nullptr;
        for (std::vector<Case> cases : {scope_cases(), invocation_cases()})
            for (const Case& c : cases)
                if (name == c.kernel) kernel = c.run;
        for (const Named& other : kOtherKernels)
            if (name == other.name) kernel = other.run;
#ifdef TRACETREE_BENCH_SPALL
        for (std::size_t i = 0; i < kSpallKernelCount; ++i)
            if (name == kSpallKernels[i].name) kernel = kSpallKernels[i].run;
#endif
        if (kernel == nullptr) {
            std::fprintf(stderr, "bench: no kernel %s\n", name.c_str());
            return 2;
        }
        Timer unused;
        ops = static_cast<double>(kernel(n, unused));
    }
    const tracetree::Profile p = tracetree::profile();
    check_scopes(p);
    check_snapshots(p);
#ifdef TRACETREE_BENCH_SPALL
    check_spall();
#endif
    std::printf("ops %.6f\n", ops);
    return all_checks_passed() ? 0 : 1;
}

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
    if (argc == 4 && std::strcmp(argv[1], "--kernel") == 0)
        return bench::kernel_mode(argv[2], std::strtoull(argv[3], nullptr, 10));
    int rounds = 501;
    for (int i = 1; i + 1 < argc; i += 2)
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
    return bench::timing_mode(rounds);
}
