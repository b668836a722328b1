// Cases separate-runtime(-missing): files built with TRACETREE_SEPARATE_RUNTIME compile declarations
// only (control.hpp); separate_runtime.cpp, with TRACETREE_RUNTIME_IMPLEMENTATION, holds the runtime.
// With it, the recorder runs from before main, sessions deliver and the profile counts every call;
// without it, the link fails naming the file to add.
#include <tracetree/all.hpp>

#include <chrono>
#include <cstdio>

void separate_work(int n);  // separate_work.cpp: n calls of "separate work"

int main() {
    const tracetree::RecorderInfo info = tracetree::recorder_info();
    tracetree::TraceSession trace(tracetree::TraceRequest("separate work"));
    separate_work(3);
    const auto captured = trace.next(std::chrono::seconds(30));
    std::uint64_t calls = 0;
    for (const auto& root : tracetree::profile().merged().roots)
        if (root.name == "separate work") calls += root.count;
    if (info.version.empty() || !captured || captured->root.name != "separate work" || calls != 3) {
        std::printf("FAIL: version '%s', trace %s, %llu calls counted (3 wanted)\n", info.version.c_str(),
                    captured ? captured->root.name.c_str() : "none", static_cast<unsigned long long>(calls));
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
