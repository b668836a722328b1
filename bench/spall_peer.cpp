// spall (../shared/peers/spall/spall.h, outside the project) as a peer in the same run: the kernels of
// the rows issue 26 compares (nested pair, fib(20), 20 and 200 sibling sites, 50 run-time names, two
// threads), each scope a begin and an end event written into the thread's buffer the way spall's
// own instrumentation does, stamped by the same counter tracetree reads. Built only when the header is
// there (bench/meson.build); included from its own path, never copied.
//
// The buffers' bytes go to a callback that counts and discards them: what a scope costs spall, not
// the disk. The check compares those bytes with the events the kernels wrote.
#include "kernels.hpp"

#include <spall.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

namespace bench {
namespace {

// Bytes written: the file header, then one buffer header per flush and the events.
std::atomic<std::uint64_t> g_written{0}, g_writes{0}, g_expected{0};
bool count_bytes(SpallProfile*, const void*, std::size_t length) {
    g_written += length;
    ++g_writes;
    return true;
}
bool no_flush(SpallProfile*) { return true; }

SpallProfile& profile() {
    static SpallProfile ctx = [] {
        SpallProfile p;
        spall_init_callbacks(1.0, count_bytes, no_flush, nullptr, nullptr, &p);
        return p;
    }();
    return ctx;
}

// Trivially initialised: no guard on the scopes' path; start_thread() gives it memory, off the timer.
thread_local SpallBuffer t_buffer = {};
constexpr std::size_t kBufferBytes = 1 << 20;
void start_thread() {
    if (t_buffer.data != nullptr) return;
    t_buffer.length = kBufferBytes;
    t_buffer.data = std::malloc(kBufferBytes);
    spall_buffer_init(&profile(), &t_buffer);
}
void flush_thread() {  // what a thread has written so far reaches the count
    if (t_buffer.data != nullptr) spall_buffer_flush(&profile(), &t_buffer);
}

constexpr std::uint64_t event_bytes(std::size_t name_size) {
    return sizeof(SpallBeginEvent) + name_size + sizeof(SpallEndEvent);
}

struct SpallScope {
    SpallScope(const char* name, std::int32_t size) noexcept {
        spall_buffer_begin(&profile(), &t_buffer, name, size, tracetree::detail::ticks());
    }
    ~SpallScope() { spall_buffer_end(&profile(), &t_buffer, tracetree::detail::ticks()); }
    SpallScope(const SpallScope&) = delete;
    SpallScope& operator=(const SpallScope&) = delete;
};
#define BENCH_SPALL_SCOPE(literal) const SpallScope BENCH_SPALL_NAME(spall_scope_, __LINE__)(literal, sizeof(literal) - 1)
#define BENCH_SPALL_NAME(a, b) BENCH_SPALL_JOIN(a, b)
#define BENCH_SPALL_JOIN(a, b) a##b
// The names, for the bytes their events take.
constexpr char kOuter[] = "bench.nested.outer", kInner[] = "bench.nested.inner", kFib[] = "bench.fib",
               kParent[] = "siblings", kSibling[] = "sibling", kTwoThreads[] = "bench.two-threads";

// ---- the kernels, as their tracetree twins in scopes.cpp and siblings.cpp --------------------------

std::uint64_t nested(std::uint64_t n, Timer& timer) {
    start_thread();
    const std::uint64_t invocations = std::max<std::uint64_t>(1, n / kNestedPerInvocation);
    timer.start();
    for (std::uint64_t i = 0; i < invocations; ++i) {
        BENCH_SPALL_SCOPE(kOuter);
        for (std::uint64_t j = 0; j < kNestedPerInvocation; ++j) {
            BENCH_SPALL_SCOPE(kInner);
            clobber();
        }
    }
    timer.stop();
    g_expected += invocations * (event_bytes(sizeof kOuter - 1) + kNestedPerInvocation * event_bytes(sizeof kInner - 1));
    return invocations * kNestedPerInvocation;
}

constexpr std::uint64_t kFibCalls = 21891, kFib20 = 6765;
[[gnu::noinline]] std::uint64_t fib(int n) {
    BENCH_SPALL_SCOPE(kFib);
    return n < 2 ? static_cast<std::uint64_t>(n) : fib(n - 1) + fib(n - 2);
}
std::uint64_t fib_20(std::uint64_t n, Timer& timer) {
    start_thread();
    const std::uint64_t runs = std::max<std::uint64_t>(1, n / kFibCalls);
    std::uint64_t sum = 0;
    timer.start();
    for (std::uint64_t i = 0; i < runs; ++i) sum += fib(20);
    timer.stop();
    check(sum == runs * kFib20, "spall: fib(20) computed right under its scopes");
    g_sink = g_sink + sum;
    g_expected += runs * kFibCalls * event_bytes(sizeof kFib - 1);
    return runs * kFibCalls;
}

template <int I>
[[gnu::noinline]] void site() {
    BENCH_SPALL_SCOPE(kSibling);
    clobber();
}
template <std::size_t First, std::size_t... I>
void call_sites(std::index_sequence<I...>) {
    (site<static_cast<int>(First + I)>(), ...);
}
template <std::size_t K>
[[gnu::noinline]] void call_all() {  // in chunks of 100 calls, as siblings.cpp (clang++'s fold limit)
    if constexpr (K > 100) {
        call_all<K - 100>();
        call_sites<K - 100>(std::make_index_sequence<100>{});
    } else {
        call_sites<0>(std::make_index_sequence<K>{});
    }
}
template <std::size_t K>
std::uint64_t siblings(std::uint64_t n, Timer& timer) {
    start_thread();
    BENCH_SPALL_SCOPE(kParent);
    const std::uint64_t reps = std::max<std::uint64_t>(1, n / K);
    timer.start();
    for (std::uint64_t i = 0; i < reps; ++i) call_all<K>();
    timer.stop();
    g_expected += event_bytes(sizeof kParent - 1) + reps * K * event_bytes(sizeof kSibling - 1);
    return reps * K;
}

[[gnu::noinline]] void dynamic_calls(const NamePicks& picks) {
    for (const std::uint32_t pick : picks.order) {
        const std::string& name = picks.names[pick];
        const SpallScope scope(name.data(), static_cast<std::int32_t>(name.size()));
        clobber();
    }
}
std::uint64_t dynamic_50(std::uint64_t n, Timer& timer) {
    start_thread();
    const NamePicks picks = name_picks_50();
    const std::uint64_t passes = std::max<std::uint64_t>(1, n / picks.order.size());
    timer.start();
    for (std::uint64_t i = 0; i < passes; ++i) dynamic_calls(picks);
    timer.stop();
    std::uint64_t bytes = 0;
    for (const std::uint32_t pick : picks.order) bytes += event_bytes(picks.names[pick].size());
    g_expected += passes * bytes;
    return passes * picks.order.size();
}

[[gnu::noinline]] void two_thread_scopes(std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) {
        BENCH_SPALL_SCOPE(kTwoThreads);
        clobber();
    }
}
std::uint64_t two_threads(std::uint64_t n, Timer& timer) {
    start_thread();
    std::atomic<bool> ready{false}, go{false};
    std::thread other([&] {
        start_thread();
        ready.store(true, std::memory_order_release);
        while (!go.load(std::memory_order_acquire)) {
        }
        two_thread_scopes(n);
        flush_thread();
        std::free(t_buffer.data);
    });
    while (!ready.load(std::memory_order_acquire)) {  // both loops start together
    }
    go.store(true, std::memory_order_release);
    timer.start();
    two_thread_scopes(n);
    timer.stop();
    other.join();
    g_expected += 2 * n * event_bytes(sizeof kTwoThreads - 1);
    return n;
}

}  // namespace

const Named kSpallKernels[] = {
    {"spall-nested", nested},     {"spall-fib", fib_20},          {"spall-siblings-20", siblings<20>},
    {"spall-siblings-200", siblings<200>}, {"spall-dynamic-50", dynamic_50}, {"spall-two-threads", two_threads},
};
const std::size_t kSpallKernelCount = sizeof kSpallKernels / sizeof kSpallKernels[0];

bool check_spall() {
    flush_thread();
    // No spall kernel ran (`--kernel` of a tracetree one): the profile was never opened, nothing written.
    if (g_writes.load() == 0) return check(g_expected.load() == 0, "spall: no events without a profile");
    const std::uint64_t headers = sizeof(SpallHeader) + (g_writes.load() - 1) * sizeof(SpallBufferHeader);
    return check(g_written.load() == headers + g_expected.load(),
                 "spall: every event the kernels wrote reached the profile's bytes");
}

}  // namespace bench
