// Threads: one tree each, snapshots while others record, exited threads kept, the timeline.
#include "fork_child.hpp"
#include "support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>

using namespace test;

static void unit_of_work() {
    TRACETREE_SCOPE("unit");
    advance(1us);
}

TEST_CASE("each thread records its own tree; exited threads are kept, folded by name") {
    FakeClock clock;
    // One at a time: the fake clock is the process's, so a scope open while another thread advances it
    // would count that thread's microsecond too (the total below is exact).
    for (int t = 0; t < 4; ++t) {
        std::thread([t] {
            tracetree::set_thread_name("worker-" + std::to_string(t));
            for (int i = 0; i <= t; ++i) unit_of_work();
        }).join();
    }
    for (int t = 0; t < 3; ++t) {
        std::thread([] {
            tracetree::set_thread_name("short-lived");
            unit_of_work();
        }).join();
    }
    const auto profile = tracetree::profile();
    for (int t = 0; t < 4; ++t) {
        const auto* thread = find_thread(profile, "worker-" + std::to_string(t));
        REQUIRE(thread != nullptr);
        CHECK(thread->exited);
        REQUIRE(thread->roots.size() == 1);
        CHECK(thread->roots[0].count == static_cast<std::uint64_t>(t + 1));
    }
    const auto* folded = find_thread(profile, "short-lived");
    REQUIRE(folded != nullptr);
    CHECK(folded->roots.at(0).count == 3);
    const auto merged = profile.merged();
    const auto* unit = find_root(merged, "unit");
    REQUIRE(unit != nullptr);
    CHECK(unit->count == 1 + 2 + 3 + 4 + 3);
    CHECK(unit->total == 13us);
}

TEST_CASE("snapshots are taken while another thread keeps recording") {
    FakeClock clock;
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> done{0};
    std::thread recorder([&] {
        tracetree::set_thread_name("recorder");
        while (!stop.load()) {
            TRACETREE_SCOPE("outer");
            for (int i = 0; i < 10; ++i) {
                TRACETREE_SCOPE_DYNAMIC("inner " + std::to_string(i % 3));
            }
            done.fetch_add(1);
        }
    });
    std::uint64_t last = 0;
    int snapshots = 0;
    while (snapshots < 50 || done.load() < 10) {  // progress, not time: both sides must have moved
        const auto profile = tracetree::profile();
        if (const auto* thread = find_thread(profile, "recorder"); thread != nullptr && !thread->roots.empty()) {
            const std::uint64_t count = thread->roots[0].count;
            CHECK(count >= last);  // counters only grow
            last = count;
        }
        ++snapshots;
    }
    stop = true;
    recorder.join();
    const auto profile = tracetree::profile();
    const auto* thread = find_thread(profile, "recorder");
    REQUIRE(thread != nullptr);
    CHECK(thread->exited);
    REQUIRE(thread->roots.size() == 1);
    CHECK(thread->roots[0].count == done.load());
    std::uint64_t inner = 0;
    for (const auto& child : thread->roots[0].children) inner += child.count;
    CHECK(inner == 10 * done.load());
}

TEST_CASE("reset forgets exited threads at once") {
    FakeClock clock;
    std::thread([] {
        tracetree::set_thread_name("gone");
        unit_of_work();
    }).join();
    REQUIRE(find_thread(tracetree::profile(), "gone") != nullptr);
    tracetree::reset();
    CHECK(find_thread(tracetree::profile(), "gone") == nullptr);
}

TEST_CASE("the timeline keeps the first spans of each thread and counts the rest") {
    FakeClock clock;
    tracetree::start_timeline(3);
    {
        TRACETREE_SCOPE("a");
        advance(1ms);
        {
            TRACETREE_SCOPE("b");
            advance(2ms);
        }
    }
    unit_of_work();
    unit_of_work();  // the fourth span: dropped
    tracetree::stop_timeline();
    unit_of_work();  // not recorded at all
    const auto timeline = tracetree::timeline();
    const tracetree::ThreadTimeline* mine = nullptr;
    for (const auto& thread : timeline.threads)
        if (thread.thread_name == "test-main") mine = &thread;
    REQUIRE(mine != nullptr);
    REQUIRE(mine->spans.size() == 3);
    CHECK(mine->dropped == 1);
    CHECK(mine->spans[0].name == "b");
    CHECK(mine->spans[0].depth == 1);
    CHECK(mine->spans[0].duration == 2ms);
    CHECK(mine->spans[1].name == "a");
    CHECK(mine->spans[1].depth == 0);
    CHECK(mine->spans[1].duration == 3ms);
    CHECK(mine->spans[0].start - mine->spans[1].start == 1ms);
    CHECK_THROWS_AS(tracetree::start_timeline(0), std::invalid_argument);
}

#if defined(__unix__)
#include <sys/wait.h>
#include <unistd.h>

TEST_CASE("fork() while another thread holds the registry: the child keeps recording" * doctest::skip(TRACETREE_TEST_ASAN)) {  // support.hpp
    FakeClock clock;
    std::atomic<bool> stop{false};
    std::thread busy([&] {  // takes the registry lock over and over
        tracetree::set_thread_name("busy");
        while (!stop.load()) {
            TRACETREE_SCOPE("spin");
            (void)tracetree::profile();
        }
    });
    for (int i = 0; i < 5; ++i) {
        unit_of_work();
        const pid_t child = fork();
        if (child == 0) {  // only async-signal-safe exits from here
            alarm(10);       // a deadlock in the child fails the test instead of hanging it
            unit_of_work();
            const auto profile = tracetree::profile();
            const auto* self = find_thread(profile, "test-main");
            const bool ok = profile.threads.size() == 1 && self != nullptr &&
                            self->roots.at(0).count == static_cast<std::uint64_t>(i + 2);
            _exit(ok ? 0 : 3);
        }
        int status = 0;
        REQUIRE(waitpid(child, &status, 0) == child);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    stop = true;
    busy.join();
}

// The recorder's start (runtime/process.hpp, StartLock): a plugin loaded on one thread starts it while
// another thread forks. A std::mutex held by the starting thread would never be let go in the child.
TEST_CASE("the start lock: a child forked while another thread starts takes it over; a thread of the same process waits") {
    using tracetree::detail::StartLock;
    std::atomic<pid_t> word{0};
    Latch held(1), let_go(1);
    std::thread starter([&] {
        const StartLock lock(word);
        held.count_down();
        let_go.wait();
    });
    held.wait();
    REQUIRE(word.load() == getpid());
    // The other thread waits on a condition variable: no allocator lock is held (fork_child.hpp), so
    // this runs under ASan too.
    const pid_t child = fork();
    if (child == 0) {
        bool mine = false;
        {
            const StartLock lock(word);
            mine = word.load() == getpid();
        }
        _exit(mine && word.load() == 0 ? 0 : 3);
    }
    CHECK(fork_child::exit_status(child) == 0);
    std::atomic<bool> released{false}, after_release{false};
    std::thread second([&] {
        const StartLock lock(word);
        after_release = released.load();
    });
    released = true;
    let_go.count_down();
    starter.join();
    second.join();
    CHECK(after_release.load());
    CHECK(word.load() == 0);
}
#endif
