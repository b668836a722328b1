// A plugin loaded with dlopen(RTLD_LOCAL): "plugin work" scopes, and with PLUGIN_CONTROL=1 a probe
// linked in (control code of its own, which must join the host's recorder, not start a second one)
// whose count is exported as plugin_count.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <stdexcept>

extern "C" __attribute__((visibility("default"))) void plugin_work(int n) {
    for (int i = 0; i < n; ++i) {
        TRACETREE_SCOPE("plugin work");
    }
}

// One throw, caught, inside "plugin throw".
extern "C" __attribute__((visibility("default"))) void plugin_throw() {
    try {
        TRACETREE_SCOPE("plugin throw");
        throw std::runtime_error("thrown once by the plugin");
    } catch (const std::runtime_error&) {
    }
}

#if PLUGIN_CONTROL
extern "C" __attribute__((visibility("default"))) long long plugin_count(const char* name) { return probe_count(name); }
extern "C" __attribute__((visibility("default"))) void plugin_dump() { probe_dump(); }
extern "C" __attribute__((visibility("default"))) void plugin_refused(char* out, unsigned long size) { probe_refused(out, size); }
#endif
