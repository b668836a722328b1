// Faults: exceptions through every kind of scope (including next to throwing destructors and inside
// destructors run by unwinding), throwing trace callbacks, callbacks racing stop(), and fork().
#include "stress.hpp"
#include "../fork_child.hpp"
#include "../sanitizers.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <csignal>
#include <unistd.h>

namespace stress {

using fork_child::exit_status;
constexpr bool kForkWithThreadsUnsafe = fork_child::kWithThreadsUnsafe;
// Forks of a process with threads, fewer under ThreadSanitizer, where each takes about a second (it
// stops the world); the g++ and ASan+UBSan builds run every one.
constexpr int forks(int count) { return sanitizers::kThread ? count / 5 : count; }

// ---- fork, first: this must run before any thread of the process has recorded ----------------

// Runs `child` in a forked child and returns its exit status (exit_status()).
template <class F>
int in_child(F child) {
    const pid_t pid = fork();
    if (pid == 0) _exit(child());
    return exit_status(pid);
}

TEST_CASE("fork while a thread that never recorded takes snapshots: the child never deadlocks" *
          doctest::skip(kForkWithThreadsUnsafe)) {
    // profile() takes the thread registry's mutex. Fork handlers installed only when a thread first
    // records would not exist yet here, and a child forked while the snapshot thread holds that mutex
    // would wait for it for ever. Doctest runs test cases in file order: this one comes first.
    std::atomic<bool> stop{false};
    std::thread snapshots([&] {
        while (!stop.load()) tracetree::profile();
    });
    int deadlocks = 0, failures = 0;
    for (int i = 0; i < 200 && deadlocks == 0; ++i) {
        const int status = in_child([] { return tracetree::profile().threads.size() < 1000 ? 0 : 1; });
        if (status == 128 + SIGALRM) ++deadlocks;
        else if (status != 0) ++failures;
    }
    stop = true;
    snapshots.join();
    CHECK(failures == 0);
    CHECK(deadlocks == 0);
}

struct Boom : std::runtime_error {
    Boom() : std::runtime_error("boom") {}
};

// Each test case records on a thread of its own name and reads that thread back after it exits.
template <class F>
tracetree::ThreadProfile run_as(const std::string& name, F body) {
    std::thread([&] {
        tracetree::set_thread_name(name);
        body();
    }).join();
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = find_thread(profile, name);
    REQUIRE(thread != nullptr);
    return *thread;
}

const tracetree::Node* child(const tracetree::Node& node, const std::string& name) {
    for (const auto& c : node.children)
        if (c.name == name) return &c;
    return nullptr;
}

void throwing_function(int depth) {
    TRACETREE_FUNCTION();
    if (depth == 0) throw Boom();
    {
        TRACETREE_SCOPE("static");
        {
            TRACETREE_SCOPE_DYNAMIC(std::string("dynamic"));
            throwing_function(depth - 1);
        }
    }
}

void check_thrown_chain(const tracetree::Node& top, std::uint64_t calls) {
    // top: throwing_function(2) > static > dynamic > throwing_function(1) > static > dynamic > (0)
    const tracetree::Node* node = &top;
    for (int level = 0; level < 3; ++level) {
        CAPTURE(level);
        REQUIRE(node->name == "stress::throwing_function()");
        CHECK(node->count == calls);
        CHECK(node->throws == calls);
        if (level == 2) break;
        node = child(*node, "static");
        REQUIRE(node != nullptr);
        CHECK(node->throws == calls);
        node = child(*node, "dynamic");
        REQUIRE(node != nullptr);
        CHECK(node->throws == calls);
        REQUIRE(node->children.size() == 1);
        node = &node->children.front();
    }
}

TEST_CASE("exceptions through function, static and dynamic scopes are counted, and the tree stays in step") {
    tracetree::reset();
    const tracetree::ThreadProfile thread = run_as("throws", [] {
        for (int i = 0; i < 5; ++i) {
            try {
                throwing_function(2);
            } catch (const Boom&) {
            }
        }
        TRACETREE_SCOPE("after");  // must be a root again: every scope left by the throws was closed
    });
    REQUIRE(thread.roots.size() == 2);
    check_thrown_chain(thread.roots[0], 5);
    CHECK(thread.roots[1].name == "after");
    CHECK(thread.roots[1].throws == 0);
}

TEST_CASE("exceptions through captured scopes: traces delivered, counts merged, nested captures closed") {
    tracetree::reset();
    tracetree::TraceRequest outer("throwing_function");
    outer.limit(3);
    tracetree::TraceRequest inner("dynamic");  // watched inside the outer capture by a second session
    inner.limit(3);
    tracetree::TraceSession outer_session(outer), inner_session(inner);
    const tracetree::ThreadProfile thread = run_as("throws-captured", [] {
        for (int i = 0; i < 3; ++i) {
            try {
                throwing_function(2);
            } catch (const Boom&) {
            }
        }
        TRACETREE_SCOPE("after");
    });
    REQUIRE(thread.roots.size() == 2);
    check_thrown_chain(thread.roots[0], 3);  // captures fold back into the profile exactly
    CHECK(thread.roots[1].name == "after");
    const auto traces = outer_session.collect(std::chrono::seconds(0));
    REQUIRE(traces.size() == 3);
    for (const auto& trace : traces) check_thrown_chain(trace.root, 1);
    // The second session's scope lies inside the first one's capture: a capture nested in another.
    const auto inner_traces = inner_session.collect(std::chrono::seconds(0));
    REQUIRE(inner_traces.size() == 3);
    for (const auto& trace : inner_traces) {
        CHECK(trace.root.name == "dynamic");
        CHECK(trace.root.count == 1);
        CHECK(trace.root.throws == 1);
    }
}

struct ThrowingDestructor {
    ~ThrowingDestructor() noexcept(false) { throw Boom(); }
};

struct ScopeInDestructor {  // runs a scope while an exception unwinds through its owner
    ~ScopeInDestructor() {
        TRACETREE_SCOPE("cleanup");
        try {
            throw std::logic_error("handled inside the destructor");
        } catch (const std::logic_error&) {
        }
    }
};

TEST_CASE("a throwing destructor between scopes, and scopes inside destructors run by unwinding") {
    tracetree::reset();
    const tracetree::ThreadProfile thread = run_as("destructors", [] {
        try {
            TRACETREE_SCOPE("outer");
            ThrowingDestructor thrower;  // destroyed after `inner` closes normally, then throws
            TRACETREE_SCOPE("inner");
        } catch (const Boom&) {
        }
        try {
            TRACETREE_SCOPE("unwound");
            ScopeInDestructor cleanup;
            throw Boom();
        } catch (const Boom&) {
        }
    });
    REQUIRE(thread.roots.size() == 2);
    const tracetree::Node& outer = thread.roots[0];
    CHECK(outer.name == "outer");
    CHECK(outer.count == 1);
    CHECK(outer.throws == 1);  // left by the destructor's exception
    const tracetree::Node* inner = child(outer, "inner");
    REQUIRE(inner != nullptr);
    CHECK(inner->count == 1);
    CHECK(inner->throws == 0);  // closed before anything was thrown

    const tracetree::Node& unwound = thread.roots[1];
    CHECK(unwound.name == "unwound");
    CHECK(unwound.throws == 1);
    const tracetree::Node* cleanup = child(unwound, "cleanup");
    REQUIRE(cleanup != nullptr);
    CHECK(cleanup->count == 1);
    CHECK(cleanup->throws == 0);  // ran during unwinding but no exception left it
}

TEST_CASE("a throwing trace callback does not reach the traced program") {
    tracetree::reset();
    tracetree::TraceRequest request("guarded");
    request.limit(2);
    request.on_trace([](const tracetree::Trace&) { throw Boom(); });
    tracetree::TraceSession session(request);
    const tracetree::ThreadProfile thread = run_as("callback-throws", [] {
        for (int i = 0; i < 4; ++i) {
            TRACETREE_SCOPE("guarded");
        }
    });
    CHECK(session.captured() == 2);
    REQUIRE(thread.roots.size() == 1);
    CHECK(thread.roots[0].count == 4);
    CHECK(thread.roots[0].throws == 0);
}

TEST_CASE("no trace callback runs after stop() has returned") {
    // A callback usually borrows the caller's state (a vector, a socket). Once stop() or the
    // session's destructor has returned, that state may be gone: a callback still running then is a
    // use after free in the user's program. The callback below waits for stop() to return; with
    // stop() waiting for running callbacks it never sees that, and its bounded wait expires instead.
    std::mutex mutex;
    std::condition_variable changed;
    bool in_callback = false, stop_returned = false, saw_stop_returned = false;

    tracetree::TraceRequest request("slow-callback");
    request.on_trace([&](const tracetree::Trace&) {
        std::unique_lock<std::mutex> lock(mutex);
        in_callback = true;
        changed.notify_all();
        changed.wait_for(lock, std::chrono::seconds(2), [&] { return stop_returned; });
        saw_stop_returned = stop_returned;
    });
    auto session = std::make_unique<tracetree::TraceSession>(request);
    std::thread recorder([] { TRACETREE_SCOPE("slow-callback"); });
    {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return in_callback; });
    }
    session->stop();
    {
        std::lock_guard<std::mutex> lock(mutex);
        stop_returned = true;
    }
    changed.notify_all();
    recorder.join();
    session.reset();
    CHECK_FALSE(saw_stop_returned);
}

// ---- fork -------------------------------------------------------------------------------------

int child_records_and_reads() {
    // The child keeps working: it records, snapshots and traces. What it inherits: the parent's counts
    // up to the fork; what it drops: nothing of its own.
    tracetree::set_thread_name("child");
    for (int i = 0; i < 3; ++i) {
        TRACETREE_SCOPE("in-child");
    }
    tracetree::TraceRequest request("child-traced");
    tracetree::TraceSession session(request);
    {
        TRACETREE_SCOPE("child-traced");
    }
    if (session.collect(std::chrono::seconds(0)).size() != 1) return 2;
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* me = find_thread(profile, "child");
    if (me == nullptr) return 3;
    std::uint64_t in_child = 0;  // below whatever scope the forking thread was in
    for (const auto& [path, count] : flatten(me->roots))
        if (path == "in-child" || (path.size() > 11 && path.compare(path.size() - 11, 11, " > in-child") == 0)) in_child += count;
    if (in_child != 3) return 4;
    if (tracetree::to_string(profile).find("in-child") == std::string::npos) return 5;
    return 0;
}

TEST_CASE("fork in a single-threaded traced program: the child keeps working") {
    tracetree::reset();
    tracetree::set_thread_name("parent");
    {
        TRACETREE_SCOPE("before-fork");
        CHECK(in_child(child_records_and_reads) == 0);
    }
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* parent = find_thread(profile, "parent");
    REQUIRE(parent != nullptr);
    CHECK(flatten(parent->roots).count("in-child") == 0);  // the child's records stay in the child
}

TEST_CASE("fork while other threads record, snapshot and trace: the child never deadlocks" *
          doctest::skip(kForkWithThreadsUnsafe)) {
    // Other threads hold tracetree's mutexes at unpredictable moments (registry, sessions, the
    // function-name cache); a fork at such a moment hands the child a mutex nobody will unlock.
    tracetree::reset();
    std::atomic<bool> stop{false};
    std::vector<std::thread> busy;
    busy.emplace_back([&] {  // snapshots: the registry and the name cache
        while (!stop.load()) tracetree::profile();
    });
    busy.emplace_back([&] {  // sessions: the session registry
        tracetree::TraceRequest request("busy-*");
        while (!stop.load()) {
            tracetree::TraceSession session(request);
            session.collect(std::chrono::microseconds(100));
        }
    });
    busy.emplace_back([&] {  // short-lived recording threads: registration and retirement
        while (!stop.load()) std::thread([] { TRACETREE_FUNCTION(); }).join();
    });
    int failures = 0, deadlocks = 0;
    constexpr int kForks = forks(60);
    for (int i = 0; i < kForks; ++i) {
        const int status = in_child(child_records_and_reads);
        if (status == 128 + SIGALRM) ++deadlocks;
        else if (status != 0) ++failures;
        if (deadlocks != 0) break;  // each one costs the alarm's 20 s
    }
    stop = true;
    for (auto& t : busy) t.join();
    CHECK(failures == 0);
    CHECK(deadlocks == 0);
}

TEST_CASE("fork while another thread starts sessions that a listener is told of: the child never deadlocks" *
          doctest::skip(kForkWithThreadsUnsafe)) {
    // Listeners (XRay's patching) are told of each change of the sessions under a lock of their own.
    // A fork while another thread held it gave the child a lock that its first session waited for
    // for ever (seen once in the test above, under TSan). The listener here holds that lock for a
    // while, so that most forks happen while it is held.
    tracetree::reset();
    static std::atomic<int> told{0};
    const auto slow_listener = [](void*) {
        told.fetch_add(1);
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        while (std::chrono::steady_clock::now() < until) {
        }
    };
    tracetree::detail::runtime().listen(slow_listener, nullptr);
    std::atomic<bool> stop{false};
    std::thread sessions([&] {
        while (!stop.load()) {
            tracetree::TraceSession session(tracetree::TraceRequest("busy-*"));
            // A fork's handlers wait for the lock too: without a pause this loop takes it back each
            // time first, and each fork waited half a second.
            std::this_thread::yield();
        }
    });
    while (told.load() < 2) {  // the sessions thread is telling the listener
    }
    int failures = 0, deadlocks = 0;
    for (int i = 0; i < forks(20) && deadlocks == 0; ++i) {
        const int status = in_child(child_records_and_reads);
        if (status == 128 + SIGALRM) ++deadlocks;
        else if (status != 0) ++failures;
    }
    stop = true;
    sessions.join();
    tracetree::detail::runtime().unlisten(slow_listener, nullptr);
    CHECK(failures == 0);
    CHECK(deadlocks == 0);
}

// Issue 42: a fork while other threads delivered to sessions, handed work off or resumed a coroutine
// gave the child a lock that nobody would release (a session's, a Gather's, a coroutine place's), and
// a session's stop() in the child waited for a callback that was running in the parent.
namespace fork_sessions {

void spin(std::chrono::microseconds length) {  // a callback that is often running when the fork comes
    const auto until = std::chrono::steady_clock::now() + length;
    while (std::chrono::steady_clock::now() < until) {
    }
}

struct Sessions {
    std::atomic<std::uint64_t> called{0};
    tracetree::TraceSession traced{tracetree::TraceRequest("busy-traced").limit(0).on_trace([this](const tracetree::Trace&) {
        called.fetch_add(1);
        spin(std::chrono::microseconds(20));
    })};
    tracetree::TraceSession handed{tracetree::TraceRequest("busy-handoff").limit(0)};
    tracetree::StackSession stacks{tracetree::StackRequest("busy-leaf").limit(0)};
    tracetree::WatchSession watches{tracetree::WatchRequest("busy-leaf").limit(0)};
    tracetree::Monitor monitor{tracetree::MonitorRequest("busy-*").interval(std::chrono::milliseconds(1))};
    tracetree::FlightRecorder recorder{tracetree::RecorderRequest("busy-traced").keep(4)};
};

// In the child: what the parent's threads held is free, and each session kind works on.
int child_after_fork(Sessions& sessions, tracetree::Coroutine& place) {
    {
        tracetree::Resumed on(place);  // a place another thread of the parent resumes all the time
        TRACETREE_CO_SCOPE("child-co");
    }
    {
        TRACETREE_SCOPE("busy-traced");
        TRACETREE_SCOPE("busy-leaf");
        TRACETREE_WATCH("in", 1);
    }
    if (sessions.recorder.recent().empty()) return 10;  // the child's own capture, at least
    sessions.stacks.collect(std::chrono::seconds(0));
    sessions.watches.collect(std::chrono::seconds(0));
    sessions.traced.stop();  // waits for callbacks that run in this process only
    sessions.monitor.stop();
    return child_records_and_reads();
}

}  // namespace fork_sessions

TEST_CASE("fork while every kind of session runs and threads hand work off: no child hangs, each records and renders" *
          doctest::skip(kForkWithThreadsUnsafe)) {
    using namespace fork_sessions;
    tracetree::reset();
    Sessions sessions;
    tracetree::Coroutine place;
    std::atomic<bool> stop{false};
    std::mutex tasks_mutex;
    std::condition_variable tasks_ready;
    std::vector<tracetree::Here> tasks;
    std::vector<std::thread> busy;
    for (int i = 0; i < 2; ++i)
        busy.emplace_back([&] {  // captures delivered to a callback, a queue and the flight recorder
            while (!stop.load()) {
                TRACETREE_SCOPE("busy-traced");
                TRACETREE_SCOPE("busy-leaf");
                TRACETREE_WATCH("at", 1);
            }
        });
    busy.emplace_back([&] {  // a traced request that hands work off: the capture's Gather
        while (!stop.load()) {
            TRACETREE_SCOPE("busy-handoff");
            std::lock_guard<std::mutex> lock(tasks_mutex);
            if (tasks.size() < 64) tasks.push_back(tracetree::here());
            tasks_ready.notify_one();
        }
    });
    busy.emplace_back([&] {  // the worker: each Continue's end takes its Gather's lock
        std::unique_lock<std::mutex> lock(tasks_mutex);
        while (!stop.load()) {
            tasks_ready.wait_for(lock, std::chrono::milliseconds(1), [&] { return !tasks.empty(); });
            std::vector<tracetree::Here> taken = std::move(tasks);
            tasks.clear();
            lock.unlock();
            for (const tracetree::Here& here : taken) {
                tracetree::Continue on(here);
                TRACETREE_SCOPE("busy-task");
            }
            lock.lock();
        }
    });
    busy.emplace_back([&] {  // the coroutine place's lock, at each resumption and co-scope
        while (!stop.load()) {
            tracetree::Resumed on(place);
            TRACETREE_CO_SCOPE("busy-co");
        }
    });
    busy.emplace_back([&] {  // what the sessions queue, taken as a reader would
        while (!stop.load()) {
            sessions.handed.collect(std::chrono::seconds(0));
            sessions.stacks.collect(std::chrono::seconds(0));
            sessions.watches.collect(std::chrono::seconds(0));
            sessions.monitor.next();
        }
    });
    while (sessions.called.load() < 10 || sessions.recorder.recorded() < 10) {  // every thread is at work
    }
    int failures = 0, deadlocks = 0;
    constexpr int kForks = forks(200);
    for (int i = 0; i < kForks && deadlocks == 0; ++i) {
        pid_t pid = -1;
        {
            // The fork comes inside a captured scope that handed work off: in the child, its end
            // delivers to the sessions and takes the Gather's lock that the worker takes in the parent.
            TRACETREE_SCOPE("busy-traced");
            TRACETREE_SCOPE("busy-handoff");
            {
                std::lock_guard<std::mutex> lock(tasks_mutex);
                if (tasks.size() < 64) tasks.push_back(tracetree::here());
            }
            tasks_ready.notify_one();
            pid = fork();
        }
        if (pid == 0) _exit(child_after_fork(sessions, place));
        const int code = exit_status(pid);
        if (code == 128 + SIGALRM) ++deadlocks;
        else if (code != 0) {
            ++failures;
            MESSAGE("child " << i << " exited with " << code);
        }
    }
    stop = true;
    for (auto& t : busy) t.join();
    CHECK(failures == 0);
    CHECK(deadlocks == 0);
}

}  // namespace stress
