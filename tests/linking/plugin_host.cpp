// Cases sanitised-env and export-flag: a host with control code loads an RTLD_LOCAL plugin after
// main started, and must see the plugin's scopes in its own profile (one recorder).
//   plugin_host MODE PLUGIN EXPORTED SCOPES
//   MODE      what the host does to its environment first, as a daemon sanitising it would:
//             none | clearenv | replace (environ = a new array) | unsetenv (every TRACETREE_ variable)
//   EXPORTED  1 / 0: what recorder_info().exported must say (the executable is linked with or
//             without -Wl,--export-dynamic-symbol=tracetree_anchor_*); - : not checked
//   SCOPES    1: the plugin's 3 calls must be in the host's profile; 0: not checked (without the
//             export flag an RTLD_LOCAL plugin cannot find the executable's recorder: documented)
//   plugin_host MODE PLUGIN EXPORTED SCOPES throw
//             (case plugin-throws) the host and the plugin throw once each: each throw is counted
//             once, under the scope that threw (the host's and the plugin's copies each have a hook)
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

int main(int argc, char** argv) {
    if (argc != 5 && !(argc == 6 && std::strcmp(argv[5], "throw") == 0)) {
        std::printf("FAIL: usage: plugin_host MODE PLUGIN EXPORTED SCOPES\n");
        return 2;
    }
    const std::string mode = argv[1];
    { TRACETREE_SCOPE("host work"); }
    if (mode == "clearenv") {
        clearenv();
    } else if (mode == "replace") {
        static char path[] = "PATH=/usr/bin:/bin";
        static char* fresh[] = {path, nullptr};
        environ = fresh;
    } else if (mode == "unsetenv") {
        std::vector<std::string> names;
        for (char** entry = environ; *entry != nullptr; ++entry)
            if (std::strncmp(*entry, "TRACETREE_", 10) == 0) names.emplace_back(*entry, std::strcspn(*entry, "="));
        for (const std::string& name : names) unsetenv(name.c_str());
    } else if (mode != "none") {
        std::printf("FAIL: unknown mode %s\n", mode.c_str());
        return 2;
    }
    void* plugin = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
        std::printf("FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    auto work = reinterpret_cast<void (*)(int)>(dlsym(plugin, "plugin_work"));
    if (work == nullptr) {
        std::printf("FAIL: no plugin_work\n");
        return 1;
    }
    work(3);
    if (std::strcmp(argv[3], "-") != 0) {
        const int exported = probe_exported();
        if (exported == -1) {
            std::printf("FAIL: RecorderInfo has no field `exported`\n");
            return 1;
        }
        if (exported != std::atoi(argv[3])) {
            std::printf("FAIL: recorder_info().exported is %d, wanted %s\n", exported, argv[3]);
            return 1;
        }
    }
    if (std::strcmp(argv[4], "1") == 0) {
        const long long calls = probe_count("plugin work");
        if (calls != 3) {
            std::printf("FAIL: the host's profile has %lld calls of the plugin's scope, wanted 3\n", calls);
            probe_dump();
            return 1;
        }
        if (probe_count("host work") != 1) {
            std::printf("FAIL: the host's profile lost its own scope\n");
            probe_dump();
            return 1;
        }
    }
    if (argc == 6) {
        auto plugin_throw = reinterpret_cast<void (*)()>(dlsym(plugin, "plugin_throw"));
        plugin_throw();
        try {
            TRACETREE_SCOPE("host throw");
            throw std::runtime_error("thrown once by the host");
        } catch (const std::runtime_error&) {
        }
        const long long host = probe_throws("host throw"), in_plugin = probe_throws("plugin throw"), all = probe_throws(nullptr);
        if (host != 1 || in_plugin != 1 || all != 2) {
            std::printf("FAIL: throws counted: %lld under the host's scope, %lld under the plugin's, %lld in all; wanted 1, 1, 2\n",
                        host, in_plugin, all);
            probe_dump();
            return 1;
        }
    }
    std::printf("ok\n");
    return 0;
}
