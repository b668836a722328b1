// Case static-dlopen: a statically linked executable with control code loads a plugin with control code.
// The plugin's loader lists neither the executable nor its modules, and the executable's fork() never
// runs the fork handlers of the plugin's C library: the plugin's copy must refuse (once on stderr, and
// in recorder_info().refused), and the executable's recorder must go on. The plugin's scopes are not
// run: a thread_local of a library loaded into a static executable faults (glibc), tracetree's too.
//   static_dlopen_host PLUGIN
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <cstdio>
#include <cstring>
#include <dlfcn.h>

int main(int argc, char** argv) {
    if (argc != 2) {
        std::printf("FAIL: usage: static_dlopen_host PLUGIN\n");
        return 2;
    }
    { TRACETREE_SCOPE("host work"); }
    void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
        std::printf("FAIL: dlopen: %s\n", dlerror());
        return 1;
    }
    auto refused = reinterpret_cast<void (*)(char*, unsigned long)>(dlsym(plugin, "plugin_refused"));
    if (refused == nullptr) {
        std::printf("FAIL: the plugin exports no plugin_refused\n");
        return 1;
    }
    char why[1024];
    refused(why, sizeof why);
    if (std::strstr(why, "statically linked") == nullptr) {
        std::printf("FAIL: the plugin's recorder_info().refused is \"%s\", wanted the reason (statically linked)\n", why);
        return 1;
    }
    char mine[1024];
    probe_refused(mine, sizeof mine);
    if (mine[0] != '\0' || probe_count("host work") != 1) {
        std::printf("FAIL: the executable's recorder: refused \"%s\", %lld calls of its scope (wanted 1)\n", mine,
                    probe_count("host work"));
        return 1;
    }
    std::printf("ok\n");
    return 0;
}
