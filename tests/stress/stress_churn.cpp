// Thread churn: thousands of short-lived threads, each recording a little and exiting while a
// snapshot thread reads the registry. Nothing they recorded may be lost (exited threads are folded by
// thread name), and heap memory must return to a bound that does not grow with the number of threads.
#include "stress.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <pthread.h>
#include <thread>

namespace stress {

constexpr int kWaves = 10;
constexpr int kThreadsPerWave = 240;
constexpr int kConcurrent = 8;  // threads alive at once, four per core
constexpr int kThreadNames = 4;       // distinct thread names: the folded profile holds this many entries
constexpr int kCallsPerThread = 2;
constexpr int kStepsPerCall = 3;

void churn_work() {
    TRACETREE_FUNCTION();
    for (int i = 0; i < kStepsPerCall; ++i) {
        TRACETREE_SCOPE("churn-step");
    }
}

void one_thread(int index) {
    const std::string name = "churn-" + std::to_string(index % kThreadNames);
    if (index % 2 == 0) {
        tracetree::set_thread_name(name);
    } else {
        // The other half is named by the OS only: tracetree reads the OS name when the thread exits.
        pthread_setname_np(pthread_self(), name.c_str());
    }
    for (int i = 0; i < kCallsPerThread; ++i) churn_work();
}

// Runs one wave of short-lived threads, kConcurrent at a time, with a snapshot thread reading
// throughout; everything it started has been joined when it returns.
void wave(int number) {
    std::atomic<bool> done{false};
    std::uint64_t unnamed = 0;
    std::thread reader([&] {
        while (!done.load()) {
            const tracetree::Profile profile = tracetree::profile();
            // Every thread in a snapshot has its name, also one that is just registering.
            for (const auto& thread : profile.threads) unnamed += thread.thread_name.empty();
        }
    });
    for (int first = 0; first < kThreadsPerWave; first += kConcurrent) {
        std::vector<std::thread> batch;
        for (int i = first; i < first + kConcurrent && i < kThreadsPerWave; ++i)
            batch.emplace_back(one_thread, number * kThreadsPerWave + i);
        for (auto& t : batch) t.join();
    }
    done = true;
    reader.join();
    CHECK_MESSAGE(unnamed == 0, "wave " << number << ": " << unnamed << " threads without a name in snapshots");
}

TEST_CASE("thousands of short-lived threads: nothing lost, memory returns to a bound") {
    tracetree::reset();
    wave(0);  // the first wave creates everything that is kept: folded profiles, name caches
    const std::int64_t baseline = heap_live_bytes();
    const std::uint64_t spare_before = tracetree::recorder_info().spare_nodes;
    heap_reset_peak();
    for (int w = 1; w < kWaves; ++w) wave(w);
    const std::int64_t after = heap_live_bytes();
    const std::int64_t peak = heap_peak_bytes();
    const std::uint64_t spare_after = tracetree::recorder_info().spare_nodes;
    MESSAGE((kWaves * kThreadsPerWave) << " threads; heap after the first wave " << baseline << " B, after all "
                                     << after << " B, peak " << peak << " B; nodes kept for reuse " << spare_before
                                     << ", then " << spare_after);
    // Exited threads' node chunks are kept for new threads, as many as were in use at once at most:
    // here the threads alive together (and the reader's), and as many exited ones whose trees the
    // reader's snapshot in progress still holds; never one per thread.
    CHECK(spare_after <= (2 * kConcurrent + 2) * 256);
    const auto spare_growth = static_cast<std::int64_t>((spare_after - std::min(spare_before, spare_after)) *
                                                        sizeof(tracetree::detail::NodeRecord));
    // A thread's state costs over 16 KiB (its first node chunk): keeping even one in ten of the
    // 2160 later threads would add over 3 MiB. The slack covers allocator-independent noise only.
    CHECK(after - baseline <= 16 * 1024 + spare_growth);
    // While churning, at most kConcurrent threads plus the reader are alive at once.
    if (peak >= 0) CHECK(peak - baseline <= 2 * 1024 * 1024);

    const tracetree::Profile profile = tracetree::profile();
    const std::uint64_t threads_per_name = kWaves * kThreadsPerWave / kThreadNames;
    int found = 0;
    for (const auto& thread : profile.threads) {
        if (thread.thread_name.rfind("churn-", 0) != 0) continue;
        ++found;
        CAPTURE(thread.thread_name);
        CHECK(thread.exited);
        const Counts counts = flatten(thread.roots);
        CHECK(counts.size() == 2);
        CHECK(counts.at("stress::churn_work()") == threads_per_name * kCallsPerThread);
        CHECK(counts.at("stress::churn_work() > churn-step") == threads_per_name * kCallsPerThread * kStepsPerCall);
    }
    CHECK(found == kThreadNames);  // one folded entry per name, however many threads carried it
}

}  // namespace stress
