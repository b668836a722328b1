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
