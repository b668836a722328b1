// What XRay costs (include/tracetree/xray/xray.hpp, docs/xray.md): a function with XRay sleds left
// unpatched against the same function built without them; a patched one against an annotated scope
// and against the two time-stamp-counter reads a scope makes; and how long patching and unpatching
// take through a session, for 1, 100 and 10,000 functions. Built with clang++ -fxray-instrument
// (bench/meson.build); run by hand: build/bench/tracetree-xray-bench [--rounds N] [--calls N].
//
// Timings: every kernel runs once per round, the rounds interleave them in a rotating order, each
// figure is the median over the rounds; a ratio is the median of the per-round ratios, so both of
// its sides were measured a few milliseconds apart. Counts are checked through tracetree::profile()
// afterwards (exit status 1 when one is wrong): a patched function that recorded nothing would look
// cheap and measure nothing.
#include <tracetree/all.hpp>
#include <tracetree/xray/xray.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;
volatile std::uint64_t g_sink = 0;

// ---- one body, four builds of it: the kernels differ only in what surrounds the body ------------

// The same instructions every time: a load and a store the compiler must keep.
#define BENCH_BODY(x) (g_sink = g_sink + static_cast<std::uint64_t>(x))

[[gnu::noinline, clang::xray_never_instrument]] void plain_function(int x) { BENCH_BODY(x); }  // no sleds
[[gnu::noinline, clang::xray_always_instrument]] void idle_function(int x) { BENCH_BODY(x); }  // sleds, never patched
[[gnu::noinline, clang::xray_always_instrument]] void patched_function(int x) { BENCH_BODY(x); }  // patched for the run
// Never called: a trace of it patches its direct callee, patched_function, for the whole run.
[[gnu::noinline, clang::xray_always_instrument]] void never_runs() { patched_function(0); }
[[gnu::noinline, clang::xray_never_instrument]] void annotated_function(int x) {
    TRACETREE_FUNCTION();
    BENCH_BODY(x);
}

// The loops: never instrumented themselves.
template <void (*Function)(int)>
[[gnu::noinline, clang::xray_never_instrument]] std::uint64_t run_calls(std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) Function(static_cast<int>(i));
    return n;
}
[[gnu::noinline, clang::xray_never_instrument]] std::uint64_t run_tsc_pair(std::uint64_t n) {
    std::uint64_t sum = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t start = __builtin_ia32_rdtsc();
        __asm__ __volatile__("" ::: "memory");
        sum += __builtin_ia32_rdtsc() - start;
    }
    g_sink = g_sink + sum;
    return n;
}

// ---- 10,101 generated functions, in three groups a pattern can pick ------------------------------
// A template's instantiations share one name once the arguments are dropped ("bench::many::f"), so a
// group is a namespace: 1, 100 and 10,000 functions.

#define BENCH_GROUP(space)                                                             \
    namespace space {                                                                  \
    template <int N>                                                                   \
    [[gnu::noinline, clang::xray_always_instrument]] int f(int x) { return x * 3 + N; } \
    template <std::size_t... I>                                                        \
    constexpr std::array<int (*)(int), sizeof...(I)> table(std::index_sequence<I...>) { \
        return {&f<static_cast<int>(I)>...};                                           \
    }                                                                                  \
    }
BENCH_GROUP(one)
BENCH_GROUP(hundred)
BENCH_GROUP(many)
#undef BENCH_GROUP

// Kept (used) whole, so that every instantiation is emitted, not only those a constant index reaches.
[[gnu::used]] static const auto g_one = one::table(std::make_index_sequence<1>());
[[gnu::used]] static const auto g_hundred = hundred::table(std::make_index_sequence<100>());
[[gnu::used]] static const auto g_many = many::table(std::make_index_sequence<10000>());

// ---- statistics ----------------------------------------------------------------------------------

struct Stats {
    double median = 0, p25 = 0, p75 = 0;
};
Stats stats(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const auto at = [&](double q) { return values[static_cast<std::size_t>(q * static_cast<double>(values.size() - 1))]; };
    return {at(0.5), at(0.25), at(0.75)};
}

struct Kernel {
    const char* name;
    std::uint64_t (*run)(std::uint64_t);
    std::vector<double> ns;  // per call, one per round
};

double ratio(const Kernel& a, const Kernel& b) {
    std::vector<double> ratios;
    for (std::size_t i = 0; i < a.ns.size(); ++i) ratios.push_back(a.ns[i] / b.ns[i]);
    return stats(ratios).median;
}

std::uint64_t count_of(const tracetree::Node& node, const std::string& name) {
    std::uint64_t count = node.name == name ? node.count : 0;
    for (const auto& child : node.children) count += count_of(child, name);
    return count;
}
std::uint64_t count_of(const std::string& name) {
    std::uint64_t count = 0;
    for (const auto& thread : tracetree::profile().threads)
        for (const auto& root : thread.roots) count += count_of(root, name);
    return count;
}

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---- patching latency ------------------------------------------------------------------------------

// A session whose pattern matches `count` functions patches them when made and unpatches them when
// destroyed; nothing runs them meanwhile, so nothing drains.
void patch_latency(const char* pattern, std::size_t count, int rounds) {
    std::vector<double> patch, unpatch;
    for (int r = 0; r < rounds; ++r) {
        auto start = Clock::now();
        auto monitor = std::make_unique<tracetree::Monitor>(tracetree::MonitorRequest(pattern));
        patch.push_back(ms_since(start));
        const std::size_t patched = tracetree::xray::status().patched;
        start = Clock::now();
        monitor.reset();
        unpatch.push_back(ms_since(start));
        if (patched != count || tracetree::xray::status().patched != 0) {
            std::printf("check failed: %s patched %zu functions, wanted %zu\n", pattern, patched, count);
            std::exit(1);
        }
    }
    // XRay's own work, without tracetree's: the same ids patched and unpatched one by one.
    std::vector<std::int32_t> ids;
    for (const auto& function : tracetree::xray::functions())
        if (tracetree::Pattern(pattern, tracetree::PatternSyntax::glob).matches(function.name.substr(0, function.name.size() - 2)))
            ids.push_back(function.id);
    std::vector<double> one_by_one, all;
    for (int r = 0; r < rounds; ++r) {
        auto start = Clock::now();
        for (const std::int32_t id : ids) __xray_patch_function(id);
        for (const std::int32_t id : ids) __xray_unpatch_function(id);
        one_by_one.push_back(ms_since(start));
        start = Clock::now();
        __xray_patch();
        __xray_unpatch();
        all.push_back(ms_since(start));
    }
    const Stats p = stats(patch), u = stats(unpatch);
    std::printf("| %6zu | %10.3f | %10.3f | %12.2f | %19.3f | %19.3f |\n", count, p.median, u.median,
                1e3 * (p.median + u.median) / static_cast<double>(count), stats(one_by_one).median, stats(all).median);
}

int run(int rounds, std::uint64_t calls) {
    const auto install_start = Clock::now();
    tracetree::xray::install();
    const double install_ms = ms_since(install_start);
    const tracetree::xray::Status status = tracetree::xray::status();
    std::printf("XRay functions: %zu (%zu patchable); install (names read, handler calibrated): %.1f ms\n\n",
                status.functions, status.patchable, install_ms);

    // patched_function is patched for the whole run, as the callee of a trace whose root never runs:
    // its scope records into the thread's tree as an annotated scope does while sessions run.
    auto never = std::make_unique<tracetree::TraceSession>(tracetree::TraceRequest("bench::never_runs"));
    tracetree::reset();

    std::vector<Kernel> kernels = {
        {"two __rdtsc() reads", &run_tsc_pair, {}},
        {"function without XRay sleds", &run_calls<plain_function>, {}},
        {"same, XRay sleds not patched", &run_calls<idle_function>, {}},
        {"same, annotated TRACETREE_FUNCTION()", &run_calls<annotated_function>, {}},
        {"same, XRay patched: a scope", &run_calls<patched_function>, {}},
    };
    for (Kernel& k : kernels) k.run(calls);  // warm-up: nodes made, caches filled
    std::uint64_t timed = 0;
    for (int r = 0; r < rounds; ++r) {
        for (std::size_t i = 0; i < kernels.size(); ++i) {
            Kernel& k = kernels[(static_cast<std::size_t>(r) + i) % kernels.size()];
            const auto start = Clock::now();
            const std::uint64_t n = k.run(calls);
            k.ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(n));
        }
        timed += calls;
    }

    std::printf("Per call, median of %d rounds of %llu calls:\n\n", rounds,
                static_cast<unsigned long long>(calls));
    std::printf("| %-38s | %23s | %13s | %13s | %15s |\n", "", "ns per call (p25-p75)", "- no XRay, ns", "/ two rdtsc",
                "/ annotated");
    std::printf("|%s|%s|%s|%s|%s|\n", std::string(40, '-').c_str(), std::string(25, '-').c_str(),
                std::string(15, '-').c_str(), std::string(15, '-').c_str(), std::string(17, '-').c_str());
    const Kernel& tsc = kernels[0];
    const Kernel& plain = kernels[1];
    const Kernel& annotated = kernels[3];
    for (const Kernel& k : kernels) {
        const Stats s = stats(k.ns);
        std::vector<double> extra;
        for (std::size_t i = 0; i < k.ns.size(); ++i) extra.push_back(k.ns[i] - plain.ns[i]);
        std::printf("| %-38s | %6.2f (%6.2f-%6.2f) | %13.2f | %13.2f | %15.2f |\n", k.name, s.median, s.p25, s.p75,
                    stats(extra).median, ratio(k, tsc), ratio(k, annotated));
    }

    // Every patched and annotated call recorded; none of the unpatched ones.
    const std::uint64_t expected = timed + calls;  // the warm-up too
    const std::uint64_t patched_calls = count_of("bench::patched_function()");
    const std::uint64_t annotated_calls = count_of("bench::annotated_function()");
    const std::uint64_t idle_calls = count_of("bench::idle_function()");
    const bool counts_ok = patched_calls == expected && annotated_calls == expected && idle_calls == 0;
    std::printf("\ncounts: patched %llu, annotated %llu (wanted %llu each), unpatched %llu (wanted 0): %s\n",
                static_cast<unsigned long long>(patched_calls), static_cast<unsigned long long>(annotated_calls),
                static_cast<unsigned long long>(expected), static_cast<unsigned long long>(idle_calls),
                counts_ok ? "ok" : "WRONG");

    never.reset();

    std::printf("\nPatching through a session (a Monitor made, then destroyed; nothing runs the functions), median of "
                "%d; then XRay alone, patch and unpatch: its per-function calls for the same ids, and all %zu functions "
                "at once:\n\n", std::max(3, rounds / 100), status.functions);
    std::printf("| %6s | %10s | %10s | %12s | %19s | %19s |\n", "funcs", "patch ms", "unpatch ms", "us per func",
                "XRay one by one, ms", "XRay all at once, ms");
    std::printf("|--------|------------|------------|--------------|---------------------|---------------------|\n");
    const int patch_rounds = std::max(3, rounds / 100);
    patch_latency("bench::one::f", g_one.size(), patch_rounds);
    patch_latency("bench::hundred::f", g_hundred.size(), patch_rounds);
    patch_latency("bench::many::f", g_many.size(), patch_rounds);
    g_sink = g_sink + static_cast<std::uint64_t>(g_one[0](1) + g_hundred[99](1) + g_many[9999](1));
    return counts_ok ? 0 : 1;
}

}  // namespace bench

int main(int argc, char** argv) {
    int rounds = 301;
    std::uint64_t calls = 16384;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(3, std::atoi(argv[i + 1]));
        else if (std::strcmp(argv[i], "--calls") == 0) calls = std::max<std::uint64_t>(1, std::strtoull(argv[i + 1], nullptr, 10));
    }
    return bench::run(rounds, calls);
}
