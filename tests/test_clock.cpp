// The real clock (detail::ticks(): the time-stamp counter on x86-64, the virtual counter on aarch64,
// clock_gettime elsewhere): never backwards on one thread, and converted at a sane rate. No bound here
// depends on how fast or loaded the machine is: steady_clock readings taken around the clock's
// readings bracket what it must show, whatever preempts the test in between.
#include "support.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

std::int64_t steady_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

TEST_CASE("the clock never goes backwards on a thread") {
    constexpr int kThreads = 4, kReads = 200000;
    std::vector<int> backwards(kThreads, 0);
    std::vector<std::uint64_t> spans(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([t, &backwards, &spans] {
            const std::uint64_t first = tracetree::detail::ticks();
            std::uint64_t last = first;
            for (int i = 0; i < kReads; ++i) {
                const std::uint64_t now = tracetree::detail::ticks();
                if (now < last) ++backwards[static_cast<std::size_t>(t)];
                last = now;
            }
            spans[static_cast<std::size_t>(t)] = last - first;
        });
    for (auto& thread : threads) thread.join();
    for (int t = 0; t < kThreads; ++t) {
        CHECK(backwards[static_cast<std::size_t>(t)] == 0);
        CHECK(spans[static_cast<std::size_t>(t)] > 0);  // a clock that is stuck would pass the check above
    }
}

TEST_CASE("a recorded scope's time is within a factor of two of steady_clock's around it") {
    tracetree::set_clock(nullptr);
    tracetree::reset();
    constexpr std::int64_t kSpin = 200000000;  // 0.2 s of steady time inside the scope
    std::int64_t inside = 0, outside = 0;
    std::thread([&] {
        tracetree::set_thread_name("clock-rate");
        const std::int64_t before = steady_now_ns();
        {
            TRACETREE_SCOPE("spin");
            const std::int64_t start = steady_now_ns();
            std::int64_t now = start;
            while (now - start < kSpin) now = steady_now_ns();
            inside = now - start;
        }
        outside = steady_now_ns() - before;
    }).join();
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* thread = test::find_thread(profile, "clock-rate");
    REQUIRE(thread != nullptr);
    const tracetree::Node* spin = test::find_root(*thread, "spin");
    REQUIRE(spin != nullptr);
    const std::int64_t recorded = std::chrono::duration_cast<std::chrono::nanoseconds>(spin->total).count();
    MESSAGE("steady_clock: " << inside << " ns inside the scope, " << outside << " ns around it; recorded "
                             << recorded << " ns");
    CHECK(recorded * 2 >= inside);
    CHECK(recorded <= outside * 2);
#if defined(TRACETREE_DETAIL_COUNTER) && defined(__aarch64__)
    // What the conversion rests on: architecturally 1-50 MHz before Armv8.6, 1 GHz from it on.
    const std::uint64_t hz = tracetree::detail::counter_frequency();
    MESSAGE("cntfrq_el0: " << hz << " Hz");
    CHECK(hz >= 1000000);
    CHECK(hz <= 10000000000u);
#endif
}

TEST_CASE("the clock's anchor is a tick read between two clock reads close together") {
    using tracetree::detail::TickAndNanos;
    // The first attempt is preempted for 5 ms between the tick and the second clock read.
    const std::int64_t clock_reads[] = {1000, 5001000, 5002000, 5002040};
    const std::uint64_t tick_reads[] = {100, 200};
    int clock_at = 0, tick_at = 0;
    const TickAndNanos pair = tracetree::detail::read_together([&] { return tick_reads[tick_at++]; },
                                                               [&] { return clock_reads[clock_at++]; });
    CHECK(pair.tick == 200);
    CHECK(pair.ns == 5002020);
    CHECK(pair.error == 20);
    CHECK(clock_at == 4);  // close enough: no third attempt

    // Reads never close together (a slow clock, a busy machine): the closest pair of eight.
    const std::int64_t gaps[] = {4000, 3000, 600, 5000, 4000, 4000, 4000, 4000};
    std::vector<std::int64_t> slow_reads;
    for (std::int64_t gap : gaps) {
        const std::int64_t before = slow_reads.empty() ? 0 : slow_reads.back() + 100;
        slow_reads.push_back(before);
        slow_reads.push_back(before + gap);
    }
    std::uint64_t attempts = 0;
    std::size_t slow_at = 0;
    const TickAndNanos best = tracetree::detail::read_together([&] { return ++attempts; },
                                                               [&] { return slow_reads.at(slow_at++); });
    CHECK(attempts == 8);
    CHECK(best.tick == 3);
    CHECK(best.ns == slow_reads[4] + 300);
    CHECK(best.error == 300);
}

TEST_CASE("the ratio of ticks to nanoseconds waits for a window that makes the readings' errors small") {
    using tracetree::detail::TickAndNanos;
    using tracetree::detail::sharp_enough;
    const TickAndNanos anchor{1000, 0, 20};
    CHECK(sharp_enough(anchor, {4000000, 1000000, 20}));         // 1 ms against 40 ns of error
    CHECK_FALSE(sharp_enough(anchor, {3990000, 999999, 20}));    // under 1 ms
    CHECK_FALSE(sharp_enough(anchor, {1000, 2000000, 20}));      // no tick went by
    CHECK_FALSE(sharp_enough(anchor, {8000000, 2000000, 5000}));  // 2 ms against 5 us
    CHECK(sharp_enough(anchor, {20000000, 5020000, 5000}));       // 5 ms against 5 us
    CHECK(sharp_enough(anchor, {40000000, 10000000, 1000000}));   // 10 ms: taken whatever the errors
}

TEST_CASE("a clock made just now converts a sleep to no less than the sleep") {
    // What a program's first traces read: the clock's first ratio is measured over its first
    // milliseconds. A tick read beside one clock read made it 7% to 5 times short (a new user's program).
    for (int i = 0; i < 20; ++i) {
        const tracetree::detail::Clock clock;
        const std::uint64_t start = tracetree::detail::ticks();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const std::uint64_t end = tracetree::detail::ticks();
        const double ns = static_cast<double>(end - start) * clock.ns_per_tick();
        CHECK(ns >= 2e6 * 0.99);
    }
}
