// Case tsan-dlopen (clang++ -fsanitize=thread): a host records on 8 threads while its main thread
// loads and unloads RTLD_LOCAL plugins (the first with control code, the second annotated only) a few
// times, each recording through the process's one recorder. Finding and joining the recorder must be
// race-free: TSAN_OPTIONS=halt_on_error=1:exitcode=66 turns any report into exit 66.
//   HOST_CONTROL=1  the host links a probe: its recorder runs from the start
//   HOST_CONTROL=0  the host is annotated only: the first plugin's control code starts the recorder
//                   while the 8 threads record (today: ~30 reports, the environment gives no
//                   happens-before edge between the recorder's start and the threads that find it)
//   tsan_host CONTROL-PLUGIN ANNOTATED-PLUGIN
// While a plugin is loaded the 8 threads call into it too (each thread's first scope through the
// plugin's copy joins the recorder there); the main thread waits for every thread to have moved on
// (counters, not time) before it unloads the plugin.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <atomic>
#include <cstdio>
#include <sched.h>
#include <dlfcn.h>
#include <thread>
#include <vector>

using Work = void (*)(int);
constexpr int kThreads = 8;

struct Shared {
    std::atomic<bool> done{false};
    std::atomic<Work> current{nullptr};      // the loaded plugin's plugin_work, or null
    std::atomic<unsigned> generation{0};     // bumped after each change of `current`
    std::atomic<unsigned> seen[kThreads];    // the generation each thread's last full iteration began in
    std::atomic<unsigned long> loops[kThreads];
    std::atomic<long long> plugin_calls{0};  // calls of plugin_work made by the threads
};

// Waits until every thread has begun an iteration in `generation` and run `more` iterations since.
void wait_for_threads(Shared& shared, unsigned generation, unsigned long more) {
    unsigned long start[kThreads];
    for (int t = 0; t < kThreads; ++t) start[t] = shared.loops[t].load();
    for (int t = 0; t < kThreads; ++t)
        while (shared.seen[t].load() < generation || shared.loops[t].load() < start[t] + more) sched_yield();
}

int main(int argc, char** argv) {
    if (argc != 3) {
        std::printf("FAIL: usage: tsan_host CONTROL-PLUGIN ANNOTATED-PLUGIN\n");
        return 2;
    }
    static Shared shared;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([t] {
            // Bounded by the main thread's work (a fixed number of loads), not by time.
            while (!shared.done.load()) {
                const unsigned generation = shared.generation.load();
                const Work work = shared.current.load();
                {
                    TRACETREE_SCOPE("tsan worker");
                    { TRACETREE_SCOPE("tsan inner"); }
                }
                if (work != nullptr) {
                    work(1);
                    ++shared.plugin_calls;
                }
                shared.seen[t].store(generation);
                ++shared.loops[t];
            }
        });
    const int rounds = 3;
    long long main_calls = 0;
    for (int round = 0; round < rounds; ++round)
        for (int p = 1; p < argc; ++p) {
            void* plugin = dlopen(argv[p], RTLD_NOW | RTLD_LOCAL);
            if (plugin == nullptr) {
                std::printf("FAIL: dlopen: %s\n", dlerror());
                return 1;
            }
            const Work work = reinterpret_cast<Work>(dlsym(plugin, "plugin_work"));
            work(5);
            main_calls += 5;
            shared.current.store(work);
            wait_for_threads(shared, ++shared.generation, 300);  // more than 256: past any every-256th check
            shared.current.store(nullptr);
            wait_for_threads(shared, ++shared.generation, 1);  // no thread is still in the plugin
            dlclose(plugin);
        }
    shared.done = true;
    for (auto& thread : threads) thread.join();
    const long long wanted = main_calls + shared.plugin_calls.load();
#if HOST_CONTROL
    const long long calls = probe_count("plugin work"), workers = probe_count("tsan worker");
#else  // asked through the control plugin, loaded once more
    void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    const auto count = reinterpret_cast<long long (*)(const char*)>(dlsym(plugin, "plugin_count"));
    const long long calls = count("plugin work"), workers = count("tsan worker");
#endif
    if (calls != wanted || workers <= 0) {
        std::printf("FAIL: the profile has %lld calls of the plugins' scope (wanted %lld) and %lld of the threads' own\n",
                    calls, wanted, workers);
#if HOST_CONTROL
        probe_dump();
#else
        reinterpret_cast<void (*)()>(dlsym(plugin, "plugin_dump"))();
#endif
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
