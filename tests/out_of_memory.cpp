// Out of memory on the recording thread: one allocation fails, each in turn, on a fresh thread, and
// everything recorded before and after it is still counted exactly, with no crash and no deadlock.
//   - A new run-time name, after 1 to kNames names: the name is only looked up each time; every
//     growth of every array of the thread's name table meets a failure at each of its steps (under
//     ASan a table read through a pointer the failed growth left stale is a use after free).
//   - An invocation captured by a trace (with and without values) with nested scopes, a throw, a
//     watched value and a run-time name: that invocation's trace may be lost, no other.
//   - A watched scope that Scope defers itself, after another site's capture could not be readied
//     (its list of sessions could not grow): the next invocation of the first site that reaches its
//     min_cost is still delivered.
//
// Its own program: it replaces operator new (on the current thread, the k-th allocation from now fails).
#include <tracetree/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define OOM_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OOM_TSAN 1
#endif
#endif

namespace {
thread_local int t_fail_in = 0;  // 0: off; else the allocation that throws, counting this one as 1

constexpr int kNames = 140;    // past two growths of the entries (64, 128) and three of the index
constexpr int kFailures = 16;  // the allocations of a new name that fail in turn (it makes about 10)

int g_failed = 0;
void fail(const std::string& what) {
    std::fprintf(stderr, "out-of-memory: FAIL: %s\n", what.c_str());
    ++g_failed;
}

void named(const std::string& name) { TRACETREE_SCOPE_DYNAMIC(name); }

const tracetree::Node* root_of(const tracetree::Profile& profile, const std::string& thread, const char* name) {
    for (const auto& t : profile.threads)
        if (t.thread_name == thread)
            for (const auto& root : t.roots)
                if (root.name == name) return &root;
    return nullptr;
}

// `before` names twice, then a new one while the k-th allocation fails, then the `before` ones once more.
void run(const std::vector<std::string>& names, int before, int k) {
    const std::string thread = "oom-" + names[0] + "-" + std::to_string(before) + "-" + std::to_string(k);
    tracetree::set_thread_name(thread);
    {
        TRACETREE_SCOPE("top");
        for (int round = 0; round < 2; ++round)
            for (int i = 0; i < before; ++i) named(names[static_cast<std::size_t>(i)]);
        t_fail_in = k;
        named(names[static_cast<std::size_t>(before)]);
        t_fail_in = 0;
        for (int i = 0; i < before; ++i) named(names[static_cast<std::size_t>(i)]);
    }
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::Node* top = root_of(profile, thread, "top");
    if (top == nullptr) return fail(thread + ": no top node");
    std::vector<std::uint64_t> counts(static_cast<std::size_t>(before), 0);
    for (const tracetree::Node& child : top->children)
        for (int i = 0; i < before; ++i)
            if (child.name == names[static_cast<std::size_t>(i)]) counts[static_cast<std::size_t>(i)] += child.count;
    for (int i = 0; i < before; ++i)
        if (counts[static_cast<std::size_t>(i)] != 3)
            fail(thread + ": " + names[static_cast<std::size_t>(i)] + " counted " +
                 std::to_string(counts[static_cast<std::size_t>(i)]) + " times, not 3");
}

std::atomic<int> g_traces{0};
const std::string kTracedName = "GET /traced";

void invocation() {
    TRACETREE_SCOPE("oom.traced");
    for (int i = 0; i < 3; ++i) {
        TRACETREE_SCOPE("oom.child");
    }
    try {
        TRACETREE_SCOPE("oom.thrower");
        throw std::runtime_error("thrown under a traced scope");
    } catch (const std::exception&) {  // or the bad_alloc of making it
    }
    TRACETREE_WATCH("value", 42);
    named(kTracedName);
}

// Two invocations, one while the k-th allocation fails, two more: every scope counted five times,
// and every invocation but the failing one traced.
void traced(int k, bool values) {
    const std::string thread = std::string("oom-traced-") + (values ? "values-" : "") + std::to_string(k);
    tracetree::set_thread_name(thread);
    const int before = g_traces.load();
    invocation();
    invocation();
    t_fail_in = k;
    try {
        invocation();
    } catch (const std::bad_alloc&) {  // the allocation that failed was the test's own (or a value's)
    }
    t_fail_in = 0;
    invocation();
    invocation();
    if (g_traces.load() - before < 4) fail(thread + ": " + std::to_string(g_traces.load() - before) + " traces, not 4 or 5");
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::Node* root = root_of(profile, thread, "oom.traced");
    if (root == nullptr) return fail(thread + ": no oom.traced node");
    const auto count = [&](const char* name) {
        for (const tracetree::Node& child : root->children)
            if (child.name == name) return child.count;
        return std::uint64_t{0};
    };
    if (root->count != 5 || count("oom.child") != 15 || count("oom.thrower") != 5)
        fail(thread + ": counted " + std::to_string(root->count) + " invocations, " + std::to_string(count("oom.child")) +
             " children and " + std::to_string(count("oom.thrower")) + " throwers, not 5, 15 and 5");
}

// x's scopes deferred by Scope itself (the runtime deferred one before), then y's capture, for two
// sessions, fails to get ready in the same slot: x's next invocation, which reaches its session's
// min_cost, must still be delivered to that session (the slot is decided again).
std::atomic<int> g_deferred_traces{0};
void deferred_x(bool past_min_cost) {
    TRACETREE_SCOPE("oom.deferred.x");
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(past_min_cost ? 8 : 0);
    while (std::chrono::steady_clock::now() < until) {
    }
}
void deferred_y() { TRACETREE_SCOPE("oom.deferred.y"); }
void deferred_after_failure() {
    tracetree::set_thread_name("oom-deferred");
    deferred_x(false);  // below the min_cost: Scope defers the next ones itself
    t_fail_in = 1;
    deferred_y();  // the slot's list of sessions cannot grow to two
    t_fail_in = 0;
    deferred_x(true);
}
}  // namespace

// TSan's runtime (clang's, linked statically) defines operator new itself: there the test is skipped.
#ifndef OOM_TSAN
namespace {
void* allocate(std::size_t size, std::size_t alignment = 0) noexcept {  // null: this one fails
    if (t_fail_in > 0 && --t_fail_in == 0) return nullptr;
    if (alignment == 0) return std::malloc(size != 0 ? size : 1);
    return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);  // a multiple of it
}
void* allocate_or_throw(std::size_t size, std::size_t alignment = 0) {
    if (void* pointer = allocate(size, alignment)) return pointer;
    throw std::bad_alloc();
}
// Out of line: g++ would otherwise see free() given what operator new returned (-Wmismatched-new-delete).
[[gnu::noinline]] void release(void* pointer) noexcept { std::free(pointer); }
std::size_t bytes(std::align_val_t alignment) { return static_cast<std::size_t>(alignment); }
}  // namespace

#include "replace_new.hpp"
// The over-aligned ones: the table's entries are cache lines.
void* operator new(std::size_t size, std::align_val_t alignment) { return allocate_or_throw(size, bytes(alignment)); }
void* operator new[](std::size_t size, std::align_val_t alignment) { return allocate_or_throw(size, bytes(alignment)); }
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
    return allocate(size, bytes(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
    return allocate(size, bytes(alignment));
}
void operator delete(void* pointer, std::align_val_t) noexcept { release(pointer); }
void operator delete[](void* pointer, std::align_val_t) noexcept { release(pointer); }
void operator delete(void* pointer, std::size_t, std::align_val_t) noexcept { release(pointer); }
void operator delete[](void* pointer, std::size_t, std::align_val_t) noexcept { release(pointer); }
void operator delete(void* pointer, std::align_val_t, const std::nothrow_t&) noexcept { release(pointer); }
void operator delete[](void* pointer, std::align_val_t, const std::nothrow_t&) noexcept { release(pointer); }

#endif

int main() {
#ifdef OOM_TSAN
    std::printf("out-of-memory: skipped under TSan, whose runtime owns operator new\n");
    return 77;
#endif
    // New names: the failures hit the name's interning first, then, once it is interned (by the
    // thread whose failure came after it), the table's growth.
    std::vector<std::string> fresh, interned;
    for (int i = 0; i <= kNames; ++i) {
        fresh.push_back("GET /names/fresh/" + std::to_string(i));
        interned.push_back("GET /names/interned/" + std::to_string(i));
    }
    // Names another thread has already interned: only the table grows, so every one of its steps fails.
    std::thread([&] {
        for (const std::string& name : interned) named(name);
    }).join();
    tracetree::reset();
    for (const std::vector<std::string>* names : {&fresh, &interned})
        for (int before = 1; before < kNames; ++before)
            for (int k = 1; k <= kFailures; ++k) {
                std::thread thread(run, std::cref(*names), before, k);
                thread.join();
                tracetree::reset();  // forgets the exited thread: every profile() above stays small
            }
    for (const bool values : {false, true}) {
        tracetree::TraceSession session(tracetree::TraceRequest("oom.traced").limit(0).with_values(values).on_trace(
            [](const tracetree::Trace&) { g_traces.fetch_add(1); }));
        for (int k = 1; k <= 2 * kFailures; ++k) {  // an invocation makes about 20
            std::thread(traced, k, values).join();
            tracetree::reset();
        }
    }
    {
        tracetree::TraceSession x(tracetree::TraceRequest("oom.deferred.x").min_cost(std::chrono::milliseconds(5)).limit(0).on_trace(
            [](const tracetree::Trace&) { g_deferred_traces.fetch_add(1); }));
        tracetree::TraceSession y1(tracetree::TraceRequest("oom.deferred.y").min_cost(std::chrono::hours(1)));
        tracetree::TraceSession y2(tracetree::TraceRequest("oom.deferred.y").min_cost(std::chrono::hours(1)));
        std::thread([] {  // the sites interned and decided for these sessions: no allocation for them later
            deferred_x(false);
            deferred_y();
        }).join();
        g_deferred_traces.store(0);
        std::thread(deferred_after_failure).join();
        if (g_deferred_traces.load() == 0) fail("oom-deferred: x's invocation past its min_cost was not delivered");
    }
    if (g_failed != 0) return 1;
    std::printf("out-of-memory: %d threads, each failing one allocation of a new run-time name, and %d failing one of a "
                "traced invocation: every call counted exactly\n",
                2 * (kNames - 1) * kFailures, 2 * 2 * kFailures);
    return 0;
}
