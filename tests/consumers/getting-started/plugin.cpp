// The plugin of scripts/consumer-test's program (app.cpp), built the same way as the program. It has
// control code of its own (recorder_info()), so its copy of the runtime must find the program's
// recorder rather than start a second one.
#include <tracetree/control.hpp>

#include <string>

extern "C" const char* plugin_work(int n) {
    for (int i = 0; i < n; ++i) {
        TRACETREE_SCOPE("plugin work");
    }
    static const std::string recorder = tracetree::recorder_info().module;
    return recorder.c_str();
}
