// Per-scope kernels: the baselines, a scope in every shape the issue names (repeated, recursive,
// run-time names, with an unwatched TRACETREE_WATCH, nested in an invocation), and the checks that
// every scope they ran was recorded exactly once.
#include "kernels.hpp"

#include <tracetree/control.hpp>
#include <tracetree/handoff.hpp>
#include <tracetree/coroutine.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace bench {

volatile std::uint64_t g_sink = 0;

namespace {

// What the kernels ran, for the checks.
std::uint64_t g_two_threads = 0;  // scopes of kernel_two_threads, on both threads
std::uint64_t g_enabled = 0, g_disabled = 0, g_fib_runs = 0, g_with_watch = 0, g_nested = 0, g_invocations = 0,
              g_two_watches = 0, g_handoffs = 0, g_handoff_functions = 0, g_continued = 0,
              g_resumptions = 0, g_resumed = 0, g_co_scopes = 0;

}  // namespace

// ---- baselines ----------------------------------------------------------------------------------

std::uint64_t kernel_tsc_pair(std::uint64_t n, Timer& timer) {  // what an enabled scope must read
    std::uint64_t sum = 0;
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        const std::uint64_t start = tracetree::detail::ticks();
        clobber();
        sum += tracetree::detail::ticks() - start;
    }
    timer.stop();
    g_sink = g_sink + sum;
    return n;
}

std::uint64_t kernel_steady_pair(std::uint64_t n, Timer& timer) {
    using Clock = std::chrono::steady_clock;
    std::uint64_t sum = 0;
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        const Clock::time_point start = Clock::now();
        clobber();
        sum += static_cast<std::uint64_t>((Clock::now() - start).count());
    }
    timer.stop();
    g_sink = g_sink + sum;
    return n;
}

// ---- one scope, repeated ------------------------------------------------------------------------

std::uint64_t kernel_enabled(std::uint64_t n, Timer& timer) {
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_SCOPE("bench.enabled");  // kEnabledName
        clobber();
    }
    timer.stop();
    g_enabled += n;
    return n;
}

std::uint64_t kernel_disabled(std::uint64_t n, Timer& timer) {
    tracetree::set_enabled(false);
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_SCOPE("bench.disabled");
        clobber();
    }
    timer.stop();
    tracetree::set_enabled(true);
    g_disabled += n;
    return n;
}

std::uint64_t kernel_compiled_out(std::uint64_t n, Timer& timer) {
    timer.start();
    g_sink = g_sink + run_compiled_out(n);
    timer.stop();
    return n;
}

// ---- recursion: a chain of nodes, each entered from the one above -------------------------------

namespace {
constexpr int kFibArgument = 20;
constexpr std::uint64_t kFibCalls = 21891;  // calls of fib(20), the first included
constexpr std::uint64_t kFib20 = 6765;

[[gnu::noinline]] std::uint64_t fib(int n) {
    TRACETREE_SCOPE("bench.fib");
    return n < 2 ? static_cast<std::uint64_t>(n) : fib(n - 1) + fib(n - 2);
}
}  // namespace

std::uint64_t kernel_fib(std::uint64_t n, Timer& timer) {
    const std::uint64_t runs = std::max<std::uint64_t>(1, n / kFibCalls);
    std::uint64_t sum = 0;
    timer.start();
    for (std::uint64_t i = 0; i < runs; ++i) sum += fib(kFibArgument);
    timer.stop();
    check(sum == runs * kFib20, "fib(20) computed right under its scopes");
    g_sink = g_sink + sum;
    g_fib_runs += runs;
    return runs * kFibCalls;
}

// ---- run-time names -----------------------------------------------------------------------------

namespace {
constexpr std::size_t kPicks = 16384;  // a pass: this many scopes, names picked in a fixed order

// The names as a program would hold them (std::string, longer than the small-string buffer), the
// order in which they are picked, and how often a pass picks each.
struct Names {
    std::vector<std::string> names;
    std::vector<std::uint32_t> order;
    std::vector<std::uint64_t> per_pass;
    std::uint64_t passes = 0;
    bool primed = false;

    explicit Names(std::uint32_t count) : per_pass(count, 0) {
        for (std::uint32_t i = 0; i < count; ++i) names.push_back("GET /api/items/" + std::to_string(i));
        std::uint64_t state = 0x9E3779B97F4A7C15u + count;
        for (std::size_t i = 0; i < kPicks; ++i) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            const auto pick = static_cast<std::uint32_t>((state >> 33) % count);
            order.push_back(pick);
            ++per_pass[pick];
        }
    }
};
Names& names_50() {
    static Names names(50);
    return names;
}
Names& names_5000() {
    static Names names(5000);
    return names;
}

// One macro site for every name: a run-time name's node belongs to the name and the site together.
[[gnu::noinline]] void dynamic_calls(const std::vector<std::string>& names, const std::vector<std::uint32_t>& order) {
    for (const std::uint32_t pick : order) {
        TRACETREE_SCOPE_DYNAMIC(names[pick]);
        clobber();
    }
}
void prime(Names& set) {  // every name seen once (made, interned), in order, before anything is timed
    if (set.primed) return;
    std::vector<std::uint32_t> in_order(set.names.size());
    for (std::size_t i = 0; i < in_order.size(); ++i) in_order[i] = static_cast<std::uint32_t>(i);
    dynamic_calls(set.names, in_order);
    set.primed = true;
}
// What a run-time-name scope cannot avoid: the caller's name (its object and its bytes, here the
// first and the last) and two clock reads; the baseline of the run-time name rows' last column.
[[gnu::noinline]] std::uint64_t name_reads(const std::vector<std::string>& names, const std::vector<std::uint32_t>& order) {
    std::uint64_t sum = 0;
    for (const std::uint32_t pick : order) {
        const std::string& name = names[pick];
        const std::uint64_t start = tracetree::detail::ticks();
        sum += static_cast<unsigned char>(name.front()) + static_cast<unsigned char>(name.back());
        clobber();
        sum += tracetree::detail::ticks() - start;
    }
    return sum;
}
std::uint64_t run_name_reads(Names& set, std::uint64_t n, Timer& timer) {
    const std::uint64_t passes = std::max<std::uint64_t>(1, n / kPicks);
    std::uint64_t sum = 0;
    timer.start();
    for (std::uint64_t i = 0; i < passes; ++i) sum += name_reads(set.names, set.order);
    timer.stop();
    g_sink = g_sink + sum;
    return passes * kPicks;
}
std::uint64_t run_dynamic(Names& set, std::uint64_t n, Timer& timer) {
    prime(set);
    const std::uint64_t passes = std::max<std::uint64_t>(1, n / kPicks);
    timer.start();
    for (std::uint64_t i = 0; i < passes; ++i) dynamic_calls(set.names, set.order);
    timer.stop();
    set.passes += passes;
    return passes * kPicks;
}
}  // namespace

std::uint64_t kernel_dynamic_50(std::uint64_t n, Timer& timer) {
    TRACETREE_SCOPE("bench.dynamic.50");
    return run_dynamic(names_50(), n, timer);
}
std::uint64_t kernel_dynamic_5000(std::uint64_t n, Timer& timer) {
    TRACETREE_SCOPE("bench.dynamic.5000");
    return run_dynamic(names_5000(), n, timer);
}
NamePicks name_picks_50() { return {names_50().names, names_50().order}; }
std::uint64_t kernel_name_reads_50(std::uint64_t n, Timer& timer) { return run_name_reads(names_50(), n, timer); }
std::uint64_t kernel_name_reads_5000(std::uint64_t n, Timer& timer) { return run_name_reads(names_5000(), n, timer); }

namespace {
[[gnu::noinline]] void two_thread_scopes(std::uint64_t n) {
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_SCOPE("bench.two-threads");
        clobber();
    }
}
}  // namespace

// The same scope on two threads at once, each into its own tree: the main thread is timed while a
// second one (started for the round, so a new tree each time) runs the same loop.
std::uint64_t kernel_two_threads(std::uint64_t n, Timer& timer) {
    std::atomic<bool> ready{false}, go{false};
    std::thread other([&] {
        ready.store(true, std::memory_order_release);
        while (!go.load(std::memory_order_acquire)) {
        }
        two_thread_scopes(n);
    });
    while (!ready.load(std::memory_order_acquire)) {  // both loops start together
    }
    go.store(true, std::memory_order_release);
    timer.start();
    two_thread_scopes(n);
    timer.stop();
    other.join();
    g_two_threads += 2 * n;
    return n;
}

// ---- TRACETREE_WATCH in a scope nobody watches ----------------------------------------------------

std::uint64_t kernel_with_watch(std::uint64_t n, Timer& timer) {
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_SCOPE("bench.with-watch");
        TRACETREE_WATCH("v", i);
        clobber();
    }
    timer.stop();
    g_with_watch += n;
    return n;
}

std::uint64_t kernel_two_watches(std::uint64_t n, Timer& timer) {
    // A pointer, not the literal: a literal trips g++'s -Wnonnull-compare in record_value (see docs/benchmarks.md).
    const char* const user = "alice";
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        timer.lap([&] {
            TRACETREE_SCOPE("bench.watch-session");  // kWatchSessionName
            TRACETREE_WATCH("a", i);
            TRACETREE_WATCH("b", user);
            clobber();
        });
    }
    timer.stop();
    g_two_watches += n;
    return n;
}

// ---- invocations: an outer scope and what it calls ------------------------------------------------

// ---- hand-offs (handoff.hpp) -----------------------------------------------------------------------

// here(), then Continue and its end, on one thread: the hand-off's own cost, without a queue.
std::uint64_t kernel_handoff(std::uint64_t n, Timer& timer) {
    TRACETREE_SCOPE("bench.handoff");
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        const tracetree::Here here = tracetree::here();
        tracetree::Continue on(here);
        clobber();
    }
    timer.stop();
    g_handoffs += n;
    return n;
}

// The same as an executor sees it: the task wrapped with a Here and one pointer, in a std::function
// (which holds it in its own buffer: no allocation), moved once as a queue would, then run.
std::uint64_t kernel_handoff_function(std::uint64_t n, Timer& timer) {
    TRACETREE_SCOPE("bench.handoff-function");
    std::uint64_t ran = 0;
    std::uint64_t* counter = &ran;
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        std::function<void()> task = tracetree::wrap(tracetree::here(), [counter] { ++*counter; });
        std::function<void()> queued = std::move(task);
        queued();
        clobber();
    }
    timer.stop();
    g_handoff_functions += ran;
    return n;
}

// A scope on a continued path: the hot path, under a hand-off's nodes.
std::uint64_t kernel_continued(std::uint64_t n, Timer& timer) {
    tracetree::Here here;
    {
        TRACETREE_SCOPE("bench.continued.origin");
        here = tracetree::here();
    }
    tracetree::Continue on(here);
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_SCOPE("bench.continued");
        clobber();
    }
    timer.stop();
    g_continued += n;
    return n;
}

// ---- coroutines (coroutine.hpp) ---------------------------------------------------------------------

// A coroutine's resumption and suspension with one co-scope open: its node entered, `[suspended]`
// counted, the thread put back.
std::uint64_t kernel_resumption(std::uint64_t n, Timer& timer) {
    static tracetree::detail::Site site{"bench.resumed", __FILE__, __LINE__, tracetree::detail::SiteKind::scope};
    tracetree::Coroutine place;
    std::optional<tracetree::detail::CoScope> open;  // as a coroutine's frame holds it across co_await
    {
        tracetree::Resumed first(place);
        open.emplace(site);
    }
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        tracetree::Resumed on(place);
        clobber();
    }
    timer.stop();
    {
        tracetree::Resumed last(place);
        open.reset();
    }
    g_resumptions += n + 1;
    ++g_resumed;
    return n;
}

// TRACETREE_CO_SCOPE inside a resumption: both ends in the runtime.
std::uint64_t kernel_co_scope(std::uint64_t n, Timer& timer) {
    tracetree::Coroutine place;
    tracetree::Resumed on(place);
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        TRACETREE_CO_SCOPE("bench.co-scope");
        clobber();
    }
    timer.stop();
    g_co_scopes += n;
    return n;
}

std::uint64_t kernel_nested(std::uint64_t n, Timer& timer) {  // n: inner scopes, 1,024 to an invocation
    const std::uint64_t invocations = std::max<std::uint64_t>(1, n / kNestedPerInvocation);
    timer.start();
    for (std::uint64_t i = 0; i < invocations; ++i) {
        TRACETREE_SCOPE("bench.nested.outer");  // kNestedOuterName
        for (std::uint64_t j = 0; j < kNestedPerInvocation; ++j) {
            TRACETREE_SCOPE("bench.nested.inner");
            clobber();
        }
    }
    timer.stop();
    g_nested += invocations;
    return invocations * kNestedPerInvocation;
}

// 20 nodes: the root and 19 sites, each called once; with `wait_ticks`, the root then spins on the
// clock until it has lasted that long.
std::uint64_t run_invocations(std::uint64_t n, std::uint64_t wait_ticks, Timer& timer) {
    timer.start();
    for (std::uint64_t i = 0; i < n; ++i) {
        timer.lap([&] {
            const std::uint64_t until = now_ticks() + wait_ticks;
            TRACETREE_SCOPE("bench.invocation");  // kInvocationName
            call_19_siblings();
            while (now_ticks() < until) clobber();
        });
    }
    timer.stop();
    g_invocations += n;
    return n;
}
std::uint64_t kernel_invocation(std::uint64_t n, Timer& timer) { return run_invocations(n, 0, timer); }
std::uint64_t kernel_invocation_10us(std::uint64_t n, Timer& timer) {
    return run_invocations(n, static_cast<std::uint64_t>(10 * ticks_per_us()), timer);
}
std::uint64_t kernel_invocation_1ms(std::uint64_t n, Timer& timer) {
    return run_invocations(n, static_cast<std::uint64_t>(1000 * ticks_per_us()), timer);
}

// ---- memory -------------------------------------------------------------------------------------

namespace {
[[gnu::noinline]] void three_sites() {
    TRACETREE_SCOPE("mem.outer");
    {
        TRACETREE_SCOPE("mem.a");
        clobber();
    }
    {
        TRACETREE_SCOPE("mem.b");
        clobber();
    }
}
}  // namespace

Memory measure_memory() {
    Memory m;
    std::thread worker([&] {
        tracetree::set_thread_name("bench-memory");
        const tracetree::detail::Tree& tree = *tracetree::detail::runtime().this_thread()->main;
        three_sites();
        m.nodes_after_one = tree.nodes() - 1;  // node 0 is the root every tree has
        m.during_calls = count_allocations([&] {
            for (std::uint64_t i = 1; i < m.calls; ++i) three_sites();
        });
        m.nodes_after_all = tree.nodes() - 1;
    });
    worker.join();
    const tracetree::Profile p = tracetree::profile();
    const tracetree::Node* outer = find_root(p, "bench-memory", "mem.outer");
    check(outer != nullptr && outer->count == m.calls, "every call of the memory check recorded");

    Timer unused;
    kernel_dynamic_5000(kPicks, unused);  // primes the names if no round did
    m.during_dynamic = count_allocations([&] { m.dynamic_calls = kernel_dynamic_5000(4 * kPicks, unused); });
    return m;
}

// ---- checks -------------------------------------------------------------------------------------

namespace {

std::uint64_t count_of(const tracetree::Node* node) { return node != nullptr ? node->count : 0; }

// Sum of the counts of a chain of `name` nodes, each the only child of the one above.
std::uint64_t chain_count(const tracetree::Node* node, const std::string& name, bool& only_child) {
    std::uint64_t sum = 0;
    for (; node != nullptr; node = node->children.empty() ? nullptr : &node->children.front()) {
        only_child = only_child && node->name == name && node->children.size() <= 1;
        sum += node->count;
    }
    return sum;
}

// Every child of `parent` is named `name`, has counted `count` calls and dropped none; `children` of them.
bool children_exact(const tracetree::Node* parent, std::size_t children, const std::string& name, std::uint64_t count) {
    if (parent == nullptr) return children == 0;
    if (parent->children.size() != children) return false;
    return std::all_of(parent->children.begin(), parent->children.end(), [&](const tracetree::Node& child) {
        return child.name == name && child.count == count && child.dropped == 0;
    });
}

bool dynamic_exact(const tracetree::Node* parent, const Names& set) {
    if (!set.primed) return parent == nullptr;
    if (parent == nullptr || parent->children.size() != set.names.size()) return false;
    for (std::size_t i = 0; i < set.names.size(); ++i) {
        const tracetree::Node& child = parent->children[i];  // in order of first call: the priming order
        if (child.name != set.names[i] || child.count != 1 + set.passes * set.per_pass[i]) return false;
    }
    return true;
}

}  // namespace

bool check_scopes(const tracetree::Profile& p) {
    bool ok = true;
    ok &= check(count_of(find_root(p, kMainThread, kEnabledName)) == g_enabled, "every enabled scope recorded");
    ok &= check(find_root(p, kMainThread, "bench.disabled") == nullptr, "no runtime-disabled scope recorded");
    std::uint64_t two_threads = 0;
    for (const tracetree::ThreadProfile& t : p.threads)
        for (const tracetree::Node& root : t.roots)
            if (root.name == "bench.two-threads") two_threads += root.count;
    ok &= check(two_threads == g_two_threads, "every scope on both threads recorded");
    bool compiled_out_seen = false;
    for (const tracetree::ThreadProfile& t : p.threads)
        for (const tracetree::Node& root : t.roots) compiled_out_seen |= root.name == "bench.compiled_out";
    ok &= check(!compiled_out_seen, "no compiled-out scope recorded");

    bool only_child = true;
    const std::uint64_t fib_scopes = chain_count(find_root(p, kMainThread, "bench.fib"), "bench.fib", only_child);
    ok &= check(fib_scopes == g_fib_runs * kFibCalls && only_child, "every call of fib recorded, in one chain of nodes");

    for (const int count : {2, 20, 200, 1000})
        for (const bool shuffled : {false, true}) {
            const std::uint64_t calls = sibling_calls(count, shuffled);
            const tracetree::Node* parent = find_root(p, kMainThread, siblings_parent(count, shuffled));
            ok &= check(children_exact(parent, calls != 0 ? static_cast<std::size_t>(count) : 0, kSiblingName, calls),
                        siblings_parent(count, shuffled) + ": one node per call site, every call counted");
        }

    ok &= check(dynamic_exact(find_root(p, kMainThread, "bench.dynamic.50"), names_50()),
                "50 run-time names: one node each, every call counted");
    ok &= check(dynamic_exact(find_root(p, kMainThread, "bench.dynamic.5000"), names_5000()),
                "5,000 run-time names: one node each, every call counted");

    ok &= check(count_of(find_root(p, kMainThread, "bench.with-watch")) == g_with_watch,
                "every scope with an unwatched TRACETREE_WATCH recorded");
    ok &= check(count_of(find_root(p, kMainThread, kWatchSessionName)) == g_two_watches,
                "every scope with two TRACETREE_WATCH recorded");
    const tracetree::Node* outer = find_root(p, kMainThread, kNestedOuterName);
    ok &= check(count_of(outer) == g_nested &&
                    children_exact(outer, g_nested != 0 ? 1 : 0, "bench.nested.inner", g_nested * kNestedPerInvocation),
                "every nested scope recorded, watched or not");
    const tracetree::Node* invocation = find_root(p, kMainThread, kInvocationName);
    ok &= check(count_of(invocation) == g_invocations &&
                    children_exact(invocation, g_invocations != 0 ? kInvocationNodes - 1 : 0, kSiblingName, g_invocations),
                "every scope of the 20-node invocations recorded, captured or not");
    const auto continued_root = [&](const char* name) -> const tracetree::Node* {
        for (const tracetree::ThreadProfile& t : p.threads)
            if (t.thread_name == kMainThread)
                for (const tracetree::Node& root : t.roots)
                    if (root.name == name && root.continued) return &root;
        return nullptr;
    };
    const tracetree::Node* handoff = continued_root("bench.handoff");
    ok &= check(g_handoffs == 0 || (handoff != nullptr && children_exact(handoff, 1, "[queued]", g_handoffs)),
                "every hand-off counted once, on one [queued] node");
    const tracetree::Node* function = continued_root("bench.handoff-function");
    ok &= check(g_handoff_functions == 0 || (function != nullptr && children_exact(function, 1, "[queued]", g_handoff_functions)),
                "every hand-off through std::function run and counted once");
    const tracetree::Node* continued = continued_root("bench.continued.origin");
    ok &= check(g_continued == 0 || (continued != nullptr && continued->children.size() == 2 &&
                                     count_of(&continued->children[1]) == g_continued),
                "every scope on a continued path recorded under it");
    const tracetree::Node* resumed = find_root(p, kMainThread, "bench.resumed");
    ok &= check(g_resumed == 0 || (count_of(resumed) == g_resumed && children_exact(resumed, 1, "[suspended]", g_resumptions)),
                "every resumption counted once, on one [suspended] node under the open co-scope");
    ok &= check(count_of(find_root(p, kMainThread, "bench.co-scope")) == g_co_scopes, "every co-scope recorded");
    return ok;
}

}  // namespace bench
