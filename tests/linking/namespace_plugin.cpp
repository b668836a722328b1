// Case dlmopen-fork: a plugin with control code (a probe), loaded by namespace_host.cpp through
// dlmopen(LM_ID_NEWLM): a link-map namespace of its own, with its own C library, whose fork handlers
// the program's fork() never runs. Its threads record scopes with run-time names (the site table's
// lock) until the host says stop.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#define NS_API extern "C" __attribute__((visibility("default")))

namespace {
std::atomic<bool> stopping{false};
std::vector<std::thread> threads;
}  // namespace

NS_API void ns_start(int count) {
    for (int t = 0; t < count; ++t)
        threads.emplace_back([t] {
            for (unsigned i = 0; !stopping.load(std::memory_order_relaxed); ++i) {
                TRACETREE_SCOPE_DYNAMIC(std::string("ns ") + std::to_string(t) + " " + std::to_string(i));
            }
        });
}

NS_API void ns_stop() {
    stopping = true;
    for (std::thread& thread : threads) thread.join();
    threads.clear();
}

// What a forked child does in the plugin: one scope.
NS_API void ns_scope() { TRACETREE_SCOPE("ns child"); }

NS_API long long ns_count(const char* name) { return probe_count(name); }
NS_API void ns_refused(char* out, unsigned long size) { probe_refused(out, size); }
