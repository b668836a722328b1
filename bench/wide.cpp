// Wide trees (issue 42): threads of tens of thousands of distinct sibling scopes, as a pool with
// per-request TRACETREE_SCOPE_DYNAMIC names makes them.
//   1. A thread's exit folding N distinct names into the entry an earlier thread of the same name
//      left: the process's CPU time from the thread's end to its join (nothing else runs), then, in
//      a third exit, the longest a new thread's first scope waited (threads started one after
//      another while that exit runs).
//   2. `profile()` and `profile().merged()` of T live threads of 65,535 nodes each (the same names
//      on every thread), as /debug/tracetree/profile builds them: the calling thread's CPU time, the
//      wall time, and the peak resident memory above the start (VmHWM, reset through
//      /proc/self/clear_refs). CPU times, since on a shared machine wall times measure the neighbours.
// Medians of the rounds (at most 5; scripts/bench's --rounds only caps them).
//   build/bench/tracetree-wide-bench [--rounds N] [--names 8192,32768,65535] [--threads 2,4,16]
// Every figure's counts are checked: a merged name must count one call per thread.
#include <tracetree/control.hpp>
#include <tracetree/tracetree.hpp>
#include <tracetree/values.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <time.h>  // clock_gettime: CPU times

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kNodes = 65535;  // Limits::max_nodes' default, less the root

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
double cpu_ms(clockid_t clock) {
    timespec spec{};
    clock_gettime(clock, &spec);
    return static_cast<double>(spec.tv_sec) * 1e3 + static_cast<double>(spec.tv_nsec) / 1e6;
}
double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}
bool g_failed = false;
void check(bool ok, const std::string& what) {
    if (!ok) {
        std::fprintf(stderr, "wide bench: wrong: %s\n", what.c_str());
        g_failed = true;
    }
}

long status_kib(const char* field) {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.compare(0, std::strlen(field), field) == 0) return std::atol(line.c_str() + std::strlen(field));
    return -1;
}

std::vector<std::string> names_for(const std::string& prefix, std::uint32_t n) {
    std::vector<std::string> names;
    for (std::uint32_t k = 0; k < n; ++k) names.push_back(prefix + std::to_string(k));
    return names;
}

void record(const std::vector<std::string>& names) {
    for (const std::string& name : names) {
        TRACETREE_SCOPE_DYNAMIC(name);
    }
}

// A thread that records, then waits until released: its exit is timed alone.
class Recorder {
public:
    Recorder(const std::string& thread_name, const std::vector<std::string>& names)
        : thread_([this, thread_name, &names] {
              tracetree::set_thread_name(thread_name);
              record(names);
              std::unique_lock<std::mutex> lock(mutex_);
              recorded_ = true;
              changed_.notify_all();
              changed_.wait(lock, [&] { return released_; });
          }) {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [&] { return recorded_; });
    }
    void release() {
        std::lock_guard<std::mutex> lock(mutex_);
        released_ = true;
        changed_.notify_all();
    }
    void join() { thread_.join(); }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool recorded_ = false, released_ = false;
    std::thread thread_;
};

struct Exit {
    double exit_cpu_ms = 0, exit_ms = 0, first_scope_ms = 0;
    int probes = 0;
};

// The second exit of `n` names: its time, and the longest first scope of threads started meanwhile.
Exit second_exit(std::uint32_t n) {
    const std::vector<std::string> names = names_for("exit-" + std::to_string(n) + "-", n);
    const std::string thread_name = "wide-exit-" + std::to_string(n);
    tracetree::reset();
    Exit result;
    {
        Recorder first(thread_name, names);
        first.release();
        first.join();
    }
    {
        Recorder second(thread_name, names);
        const double cpu = cpu_ms(CLOCK_PROCESS_CPUTIME_ID);
        const Clock::time_point start = Clock::now();
        second.release();
        second.join();
        result.exit_ms = ms(Clock::now() - start);
        result.exit_cpu_ms = cpu_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    }
    Recorder third(thread_name, names);
    std::atomic<bool> exited{false};
    std::atomic<bool> probing{false};
    std::thread prober([&] {
        probing = true;
        while (!exited.load()) {
            double waited = 0;
            std::thread([&] {
                const Clock::time_point start = Clock::now();
                { TRACETREE_SCOPE("wide.probe"); }  // the thread's first scope: it joins the recorder
                waited = ms(Clock::now() - start);
            }).join();
            result.first_scope_ms = std::max(result.first_scope_ms, waited);
            ++result.probes;
        }
    });
    while (!probing.load()) std::this_thread::yield();
    third.release();
    third.join();
    exited = true;
    prober.join();

    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* entry = nullptr;
    for (const tracetree::ThreadProfile& t : profile.threads)
        if (t.thread_name == thread_name) entry = &t;
    bool exact = entry != nullptr && entry->exited_threads == 3 && entry->roots.size() == n;
    for (std::uint32_t k = 0; exact && k < n; ++k) exact = entry->roots[k].name == names[k] && entry->roots[k].count == 3;
    check(exact, "the exited entry of " + std::to_string(n) + " names counts 3 calls each, in order");
    return result;
}

struct Merge {
    double profile_cpu_ms = 0, merged_cpu_ms = 0, wall_ms = 0, peak_mib = 0;
};

// profile() and merged() of `threads` live threads of kNodes names each.
Merge merge(std::uint32_t threads) {
    static const std::vector<std::string> names = names_for("merged-", kNodes);
    tracetree::reset();
    std::vector<std::unique_ptr<Recorder>> live;
    for (std::uint32_t t = 0; t < threads; ++t) live.push_back(std::make_unique<Recorder>("wide-live", names));
    Merge result;
    std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM := VmRSS
    const long before = status_kib("VmRSS:");
    const Clock::time_point start = Clock::now();
    double cpu = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
    tracetree::Profile profile = tracetree::profile();
    result.profile_cpu_ms = cpu_ms(CLOCK_THREAD_CPUTIME_ID) - cpu;
    cpu = cpu_ms(CLOCK_THREAD_CPUTIME_ID);
    const tracetree::ThreadProfile all = profile.merged();
    result.merged_cpu_ms = cpu_ms(CLOCK_THREAD_CPUTIME_ID) - cpu;
    result.wall_ms = ms(Clock::now() - start);
    result.peak_mib = static_cast<double>(status_kib("VmHWM:") - before) / 1024;

    std::uint32_t exact = 0;
    for (const tracetree::Node& root : all.roots)
        if (root.name.compare(0, 7, "merged-") == 0 && root.count == threads) ++exact;
    check(exact == kNodes, "merged() of " + std::to_string(threads) + " threads counts each name once per thread");
    for (auto& recorder : live) recorder->release();
    for (auto& recorder : live) recorder->join();
    return result;
}

std::vector<std::uint32_t> list(const char* text) {
    std::vector<std::uint32_t> out;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) out.push_back(static_cast<std::uint32_t>(std::atol(item.c_str())));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 3;
    std::vector<std::uint32_t> exits = {8192, 32768, 65535}, merges = {2, 4, 16};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::min(5, std::atoi(argv[i + 1])));
        else if (std::strcmp(argv[i], "--names") == 0) exits = list(argv[i + 1]);
        else if (std::strcmp(argv[i], "--threads") == 0) merges = list(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--rounds N] [--names N,N,...] [--threads T,T,...]\n", argv[0]);
            return 2;
        }
    }
    tracetree::Limits limits = tracetree::limits();
    limits.max_name_bytes = std::uint64_t{1} << 30;  // the names of every row, interned once
    tracetree::set_limits(limits);

    std::printf("| wide trees (issue 42), median of %d | CPU time | wall time | beside it |\n| --- | ---: | ---: | --- |\n",
                rounds);
    for (const std::uint32_t n : exits) {
        std::vector<double> cpu, wall, first;
        int probes = 0;
        for (int r = 0; r < rounds; ++r) {
            const Exit e = second_exit(n);
            cpu.push_back(e.exit_cpu_ms);
            wall.push_back(e.exit_ms);
            first.push_back(e.first_scope_ms);
            probes += e.probes;
        }
        std::printf("| a thread's exit folding %u distinct names into its name's entry | %.1f ms | %.1f ms | a new "
                    "thread's first scope during such an exit: at most %.2f ms (%d threads) |\n",
                    n, median(cpu), median(wall), median(first), probes);
        std::fflush(stdout);
    }
    for (const std::uint32_t t : merges) {
        std::vector<double> profile_cpu, merged_cpu, wall, peak;
        for (int r = 0; r < rounds; ++r) {
            const Merge m = merge(t);
            profile_cpu.push_back(m.profile_cpu_ms);
            merged_cpu.push_back(m.merged_cpu_ms);
            wall.push_back(m.wall_ms);
            peak.push_back(m.peak_mib);
        }
        std::printf("| `profile().merged()` of %u live threads x %u nodes (the same names) | %.1f ms | %.1f ms | "
                    "`merged()` %.1f ms of the CPU time; resident peak +%.0f MiB (%.0f bytes a node) |\n",
                    t, kNodes, median(profile_cpu) + median(merged_cpu), median(wall), median(merged_cpu), median(peak),
                    median(peak) * 1024 * 1024 / (static_cast<double>(t) * kNodes));
        std::fflush(stdout);
    }
    std::printf("\n");
    return g_failed ? 1 : 0;
}
