// Cases plain-*: a host with control code linked by a plain command (no link flag: its anchor is not in
// its dynamic symbol table) loads RTLD_LOCAL plugins built each way a library keeps its symbols to
// itself, all at once, one per thread. Every plugin's scopes land in the host's profile (one
// recorder), also after a plugin is unloaded and loaded again, and in a forked child. Built with
// LINKED=1, it is also linked with two annotated libraries that keep their symbols to themselves (a
// version script's `local: *`, a static archive under --exclude-libs,ALL), whose scopes count too.
//   plain_host PLUGIN...
// Each PLUGIN is plugin.cpp built some way (its `plugin_work` exported); the driver says which.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <atomic>
#include <cstdio>
#include <dlfcn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using Work = void (*)(int);

#if LINKED  // plugin.cpp linked as libraries, its plugin_work renamed
extern "C" void linked_local_work(int n);
extern "C" void linked_archived_work(int n);
#endif

namespace {

Work load(const char* path, void*& handle) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        std::printf("FAIL: dlopen: %s\n", dlerror());
        return nullptr;
    }
    auto work = reinterpret_cast<Work>(dlsym(handle, "plugin_work"));
    if (work == nullptr) std::printf("FAIL: %s exports no plugin_work\n", path);
    return work;
}

bool counts(long long wanted, const char* when) {
    const long long calls = probe_count("plugin work");
    if (calls == wanted && probe_count("host work") == 1) return true;
    std::printf("FAIL: %s: the host's profile has %lld calls of the plugins' scope (wanted %lld) and %lld of its own (wanted 1)\n",
                when, calls, wanted, probe_count("host work"));
    probe_dump();
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::printf("FAIL: usage: plain_host PLUGIN...\n");
        return 2;
    }
    { TRACETREE_SCOPE("host work"); }
    long long calls = 0;  // of "plugin work", wanted in the host's profile
#if LINKED
    linked_local_work(3);
    linked_archived_work(3);
    if (!counts(calls += 6, "libraries linked with `local: *` and --exclude-libs,ALL")) return 1;
#endif
    const int plugins = argc - 1;
    std::vector<void*> handles(static_cast<std::size_t>(plugins));
    std::vector<Work> works(static_cast<std::size_t>(plugins));
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < plugins; ++i)
        threads.emplace_back([&, i] {
            ready.fetch_add(1);
            while (ready.load() < plugins) std::this_thread::yield();  // all load at once
            const auto at = static_cast<std::size_t>(i);
            works[at] = load(argv[i + 1], handles[at]);
            if (works[at] != nullptr) works[at](3);
        });
    for (std::thread& thread : threads) thread.join();
    for (Work work : works)
        if (work == nullptr) return 1;
    if (probe_exported() != 1) {
        std::printf("FAIL: recorder_info().exported is %d, wanted 1\n", probe_exported());
        return 1;
    }
    if (!counts(calls += 3LL * plugins, "plugins loaded by threads at once")) return 1;

    dlclose(handles[0]);  // unmapped (it holds no recorder), then loaded afresh
    works[0] = load(argv[1], handles[0]);
    if (works[0] == nullptr) return 1;
    works[0](1);
    if (!counts(calls += 1, "a plugin unloaded and loaded again")) return 1;

    std::fflush(stdout);
    const pid_t child = fork();
    if (child == 0) {
        works[plugins - 1](1);
        std::fflush(stdout);
        _exit(counts(calls + 1, "in a forked child") ? 0 : 1);
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::printf("FAIL: the forked child's scopes are not in its profile\n");
        return 1;
    }
    std::printf("ok (%d plugins)\n", plugins);
    return 0;
}
