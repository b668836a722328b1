// A hand-off allocates nothing beyond its task (issue 40): a Here is one pointer, so a task wrapped with
// a Here and a pointer fits std::function's own buffer, and here() takes its record from a pool. Every
// allocation of the process is counted while hand-offs run through std::function to a worker thread:
// recording, not recording, and from inside a trace (there only the task's std::function: a trace's
// capture and its continued work make trees of their own).
//
// Its own program: it replaces operator new. A sanitizer's runtime owns operator new; there the count
// comes from its allocation hook instead.
#include <tracetree/all.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HANDOFF_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HANDOFF_SANITIZER 1
#endif
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
void count() noexcept {
    if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#ifdef HANDOFF_SANITIZER
#include <sanitizer/allocator_interface.h>
namespace {
void on_malloc(const volatile void*, std::size_t) { count(); }
void on_free(const volatile void*) {}
const int g_hooked = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}  // namespace
#else
namespace {
void* allocate(std::size_t size) noexcept {
    count();
    return std::malloc(size != 0 ? size : 1);
}
void* allocate_or_throw(std::size_t size) {
    if (void* pointer = allocate(size)) return pointer;
    throw std::bad_alloc();
}
// Out of line: g++ would otherwise see free() given what operator new returned (-Wmismatched-new-delete).
[[gnu::noinline]] void release(void* pointer) noexcept { std::free(pointer); }
}  // namespace
#include "replace_new.hpp"
#endif

namespace {

int g_failures = 0;
void check(bool ok, const char* what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    if (!ok) ++g_failures;
}

// One task at a time, in a std::function as an executor keeps it; nothing here allocates once running.
class Worker {
public:
    Worker() : thread_([this] { run(); }) {}
    ~Worker() {
        post({});
        thread_.join();
    }
    void post(std::function<void()> task) {  // returns once the task has run and been dropped
        std::unique_lock<std::mutex> lock(mutex_);
        slot_ = std::move(task);
        full_ = true;
        changed_.notify_all();
        changed_.wait(lock, [&] { return !full_; });
    }

private:
    void run() {
        for (;;) {
            std::function<void()> task;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                changed_.wait(lock, [&] { return full_; });
                task = std::move(slot_);
            }
            const bool last = !task;
            if (task) task();
            task = nullptr;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                full_ = false;
                changed_.notify_all();
            }
            if (last) return;
        }
    }
    std::mutex mutex_;
    std::condition_variable changed_;
    std::function<void()> slot_;
    bool full_ = false;
    std::thread thread_;
};

void work(long* done) {
    TRACETREE_SCOPE("handoff-allocations.work");
    ++*done;
}

// Hand-offs from inside a request's scope, a pointer the task's only capture; the allocations they make.
long hand_off(Worker& worker, long* done, int times) {
    for (int i = 0; i < 2 * times; ++i) {  // the first half not counted: the pool's chunk, the nodes, the names
        if (i == times) {
            g_allocations.store(0);
            g_counting.store(true);
        }
        TRACETREE_SCOPE("handoff-allocations.request");
        worker.post(tracetree::wrap(tracetree::here(), [done] { work(done); }));
    }
    g_counting.store(false);
    return g_allocations.load();
}

}  // namespace

int main() {
    g_counting.store(true);
    ::operator delete(::operator new(sizeof(long)));  // a call, not a new-expression: never elided
    g_counting.store(false);
    check(g_allocations.load() == 1, "the count sees an allocation");
    check(sizeof(tracetree::Here) == sizeof(void*), "a Here is one pointer");
    long done = 0;
    {
        Worker worker;
        check(hand_off(worker, &done, 100) == 0, "a hand-off while recording allocates nothing");
        tracetree::set_enabled(false);
        check(hand_off(worker, &done, 100) == 0, "a hand-off while not recording allocates nothing");
        tracetree::set_enabled(true);

        tracetree::TraceSession trace(tracetree::TraceRequest("handoff-allocations.traced"));
        tracetree::Here traced;
        {
            TRACETREE_SCOPE("handoff-allocations.traced");
            traced = tracetree::here();
        }
        g_allocations.store(0);
        g_counting.store(true);
        std::function<void()> task = tracetree::wrap(traced, [&done] { work(&done); });
        std::function<void()> moved = std::move(task);
        std::function<void()> copy = moved;
        g_counting.store(false);
        check(g_allocations.load() == 0, "a traced Here's task in std::function: made, moved and copied without allocating");
        traced = {};
        copy = nullptr;
        worker.post(std::move(moved));
        const auto traces = trace.collect(std::chrono::seconds(5));
        bool has_work = false;
        for (const tracetree::Trace& t : traces)
            for (const tracetree::Node& child : t.root.children) has_work |= child.name == "handoff-allocations.work";
        check(traces.size() == 1 && has_work, "the trace is delivered with the work its task did");
    }
    check(done == 401, "every task ran once");
    // Every hand-off recorded: the work under the request's path, on the worker.
    long recorded = 0;
    const tracetree::Profile profile = tracetree::profile();
    for (const tracetree::ThreadProfile& thread : profile.threads)
        for (const tracetree::Node& root : thread.roots)
            if (root.name == "handoff-allocations.request")
                for (const tracetree::Node& child : root.children)
                    if (child.name == "handoff-allocations.work") recorded += static_cast<long>(child.count);
    check(recorded == 200, "every hand-off while recording is in the profile under its request");
    return g_failures == 0 ? 0 : 1;
}
