// A plugin loaded with dlopen(RTLD_LOCAL): "plugin work" scopes, and with PLUGIN_CONTROL=1 a probe
// linked in (control code of its own, which must join the host's recorder, not start a second one)
// whose count is exported as plugin_count.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

extern "C" __attribute__((visibility("default"))) void plugin_work(int n) {
    for (int i = 0; i < n; ++i) {
        TRACETREE_SCOPE("plugin work");
    }
}

#if PLUGIN_CONTROL
extern "C" __attribute__((visibility("default"))) long long plugin_count(const char* name) { return probe_count(name); }
extern "C" __attribute__((visibility("default"))) void plugin_dump() { probe_dump(); }
#endif
