// Case setenv-race: an annotated-only program (no control code anywhere, so no recorder) whose
// scopes must call nothing outside tracetree. Today every 256th scope on each thread calls getenv to
// look for a recorder, which crashes while another thread calls setenv/unsetenv (the issue: 3 of 3
// runs). One thread changes the environment a bounded number of times; two threads run scopes
// until it is done. Expected: exit 0, and no getenv call from the scoping threads.
// The crash depends on the machine's scheduling (with this pattern of changes it came in most runs
// here, less often on a loaded machine); the getenv count does not: this program's own getenv,
// which the dynamic linker binds every call to, counts the calls made on the scoping threads.
#include <tracetree/tracetree.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <thread>

namespace {
thread_local bool scoping = false;
std::atomic<unsigned long> scoping_getenv{0};
}  // namespace

extern "C" char* getenv(const char* name) noexcept {
    if (scoping) scoping_getenv.fetch_add(1);
    static const auto real = reinterpret_cast<char* (*)(const char*)>(dlsym(RTLD_NEXT, "getenv"));
    return real(name);
}

int main() {
    std::atomic<bool> done{false};
    std::atomic<int> started{0};
    auto scoped = [&] {
        scoping = true;
        unsigned long n = 0;
        ++started;
        // At least 100,000 scopes each, so that the threads overlap the changes however they are scheduled.
        while (!done.load(std::memory_order_relaxed) || n < 100000) {
            TRACETREE_SCOPE("setenv race scope");
            ++n;
        }
        scoping = false;
    };
    std::thread a(scoped), b(scoped);
    while (started.load() < 2) {  // both threads scoping before the first change
    }
    char name[32];
    for (int i = 0; i < 400000; ++i) {
        // Eight names set, then the eight unset: the environment array is reallocated and shifted.
        std::snprintf(name, sizeof name, "LINKING_RACE_%d", i % 8);
        if ((i / 8) % 2 == 0) setenv(name, "a value long enough to need its own allocation", 1);
        else unsetenv(name);
    }
    done = true;
    a.join();
    b.join();
    if (scoping_getenv.load() != 0) {
        std::printf("FAIL: the scopes called getenv %lu times\n", scoping_getenv.load());
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
