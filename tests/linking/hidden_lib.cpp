// Case hidden-hook: a shared library that carries the runtime (a probe) and keeps its symbols to itself
// (a version script's `local: *`, or the control code from a static archive under
// -Wl,--exclude-libs,ALL). Its scope sees two kinds of throws: its own code's, which may bind to the
// library's own __cxa_throw whatever the link exports, and the C++ runtime's (std::stoi), which go
// through the process's first __cxa_throw like every other module's.
#include "probe.hpp"

#include <tracetree/tracetree.hpp>

#include <stdexcept>
#include <string>

#define HID_API extern "C" __attribute__((visibility("default")))

// `n` throws of each kind, each caught, under the scope "hid throw".
HID_API void hid_run(int n) {
    for (int i = 0; i < n; ++i) {
        TRACETREE_SCOPE("hid throw");
        try {
            throw std::runtime_error("thrown by the library's own code");
        } catch (const std::runtime_error&) {
        }
        try {
            (void)std::stoi("not a number");  // std::invalid_argument, thrown inside libstdc++ (libc++)
        } catch (const std::invalid_argument&) {
        }
    }
}

HID_API long long hid_throws() { return probe_throws("hid throw"); }
HID_API int hid_throw_hook() { return probe_throw_hook(); }
HID_API int hid_exported() { return probe_exported(); }
HID_API void hid_throw_hook_note(char* note, unsigned long size) { probe_throw_hook_note(note, size); }
HID_API void hid_dump() { probe_dump(); }
