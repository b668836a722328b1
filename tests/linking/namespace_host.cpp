// Case dlmopen-fork: a host with control code loads namespace_plugin.cpp through dlmopen(LM_ID_NEWLM),
// records on a thread of its own while one of the plugin's records, and forks 200 times; each child
// runs a scope of the host and one of the plugin, then exits. A child that has not exited after 20 s
// is killed and counted as hung (a bounded wait on its pidfd: no sleep), and the forks stop there.
//   namespace_host PLUGIN
// Passes when no child hangs or fails, the host records, and the plugin's copy refuses: its
// recorder_info().refused says why, and it records nothing. The driver (tests/linking/run) checks the
// output: the refusal said once on stderr, and one admin listener (TRACETREE_ADMIN is set).
#include "probe.hpp"

#include <tracetree/admin/server.hpp>  // TRACETREE_ADMIN's listener: header-only, compiled where this is included
#include <tracetree/tracetree.hpp>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <string>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

template <class Function>
Function plugin_function(void* plugin, const char* name) {
    auto function = reinterpret_cast<Function>(dlsym(plugin, name));
    if (function == nullptr) {
        std::printf("FAIL: no %s in the plugin\n", name);
        std::exit(1);
    }
    return function;
}

// Waits up to 20 s for `child`; kills it when it has not exited. Its exit status, or -1 when hung.
int wait_bounded(pid_t child) {
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
    if (pidfd >= 0) {
        pollfd exited{pidfd, POLLIN, 0};
        const int ready = poll(&exited, 1, 20000);
        close(pidfd);
        if (ready == 0) kill(child, SIGKILL);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child) return -2;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::printf("FAIL: usage: namespace_host PLUGIN\n");
        return 2;
    }
    { TRACETREE_SCOPE("host work"); }
    void* plugin = dlmopen(LM_ID_NEWLM, argv[1], RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
        std::printf("FAIL: dlmopen: %s\n", dlerror());
        return 1;
    }
    const auto start = plugin_function<void (*)(int)>(plugin, "ns_start");
    const auto stop = plugin_function<void (*)()>(plugin, "ns_stop");
    const auto child_scope = plugin_function<void (*)()>(plugin, "ns_scope");
    const auto count = plugin_function<long long (*)(const char*)>(plugin, "ns_count");
    const auto refused = plugin_function<void (*)(char*, unsigned long)>(plugin, "ns_refused");

    std::atomic<bool> stopping{false};
    std::vector<std::thread> host_threads;
    for (int t = 0; t < 1; ++t)
        host_threads.emplace_back([&stopping, t] {
            for (unsigned i = 0; !stopping.load(std::memory_order_relaxed); ++i) {
                TRACETREE_SCOPE_DYNAMIC(std::string("host ") + std::to_string(t) + " " + std::to_string(i % 4096));
            }
        });
    start(1);
    int hung = 0, failed = 0;
    for (int i = 0; i < 200; ++i) {
        const pid_t child = fork();
        if (child < 0) {
            std::printf("FAIL: fork: %s\n", std::strerror(errno));
            return 1;
        }
        if (child == 0) {
            { TRACETREE_SCOPE("host child"); }
            child_scope();
            _exit(0);
        }
        const int status = wait_bounded(child);
        if (status == -1) ++hung;
        else if (status != 0) ++failed;
        if (hung + failed != 0) break;  // one is enough: no need to wait out more
    }
    stop();
    stopping = true;
    for (std::thread& thread : host_threads) thread.join();

    char why[512];
    refused(why, sizeof why);
    const long long host_calls = probe_count("host work");
    const long long plugin_calls = count("ns child");
    std::printf("children: %d hung, %d failed; the plugin's refused: \"%s\"\n", hung, failed, why);
    if (hung != 0 || failed != 0) {
        std::printf("FAIL: a child %s\n", hung != 0 ? "hung (killed after 20 s)" : "failed");
        return 1;
    }
    if (host_calls != 1) {
        std::printf("FAIL: the host's profile has %lld calls of \"host work\", wanted 1\n", host_calls);
        return 1;
    }
    if (std::strstr(why, "dlmopen") == nullptr) {
        std::printf("FAIL: the plugin's recorder_info().refused does not say dlmopen: \"%s\"\n", why);
        return 1;
    }
    if (plugin_calls > 0) {
        std::printf("FAIL: the plugin's copy recorded %lld calls of \"ns child\"\n", plugin_calls);
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
