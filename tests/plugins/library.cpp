// One copy of tracetree inside a shared library or a plugin, built several times (meson.build):
//   TT_NS       the namespace of its scopes, also its name ("lib_default", "plugin_annotate", ...)
//   TT_ENTRY    the exported C function that returns its plugins::Api
//   TT_CONTROL  1: it also includes the control headers (it may start the process's recorder), 0: it
//               only annotates, like most libraries, and must then be unloadable.
#include "api.hpp"

#include <tracetree/tracetree.hpp>
#if TT_CONTROL
#include <tracetree/control.hpp>
#include <tracetree/sessions.hpp>
#endif

#include <chrono>
#include <string>

#define TT_NAME TRACETREE_DETAIL_STRING(TT_NS)

namespace TT_NS {

int work(int steps) {
    TRACETREE_FUNCTION();
    int sum = 0;
    for (int i = 0; i < steps; ++i) {
        TRACETREE_SCOPE(TT_NAME " step");
        sum += i;
    }
    TRACETREE_SCOPE_DYNAMIC(std::string(TT_NAME) + " dynamic");
    return sum;
}

void call(void (*back)()) {
    TRACETREE_FUNCTION();
    back();
}

#if TT_CONTROL
const void* recorder() { return &tracetree::detail::runtime(); }
std::string module() { return tracetree::recorder_info().module; }
std::size_t other_recorders() { return tracetree::recorder_info().others.size(); }
tracetree::Profile profile() { return tracetree::profile(); }
std::vector<tracetree::Trace> trace(const char* pattern, void (*run)()) {
    tracetree::TraceSession session(tracetree::TraceRequest(pattern).limit(1000));
    run();
    return session.collect(std::chrono::seconds(0));
}
const plugins::Api api{TT_NAME, work, call, recorder, module, other_recorders, profile, trace};
#else
const plugins::Api api{TT_NAME, work, call, nullptr, nullptr, nullptr, nullptr, nullptr};
#endif

}  // namespace TT_NS

extern "C" __attribute__((visibility("default"))) const plugins::Api* TT_ENTRY() { return &TT_NS::api; }
