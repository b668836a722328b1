// One copy of tracetree's control code (control.hpp and sessions.hpp) and an annotated scope, with
// the questions of probe.hpp. Compiled once per compiler and flag set (normal, -D_GLIBCXX_DEBUG,
// -D_GLIBCXX_USE_CXX11_ABI=0, -fno-rtti, TSan) and linked into every executable, library and plugin
// of the matrix that needs control code: the recorder's implementation is most of the compile time.
#include "probe.hpp"

#include <tracetree/control.hpp>
#include <tracetree/sessions.hpp>

#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

namespace {

// RecorderInfo's fields of the new design, read where they exist: this file must compile against
// today's headers too, so that the cases that do not need them can fail for their own reasons.
template <class T, class = void>
struct has_throw_hook : std::false_type {};
template <class T>
struct has_throw_hook<T, decltype(void(std::declval<T&>().throw_hook), void(std::declval<T&>().throw_hook_note))> : std::true_type {};
template <class T, class = void>
struct has_exported : std::false_type {};
template <class T>
struct has_exported<T, decltype(void(std::declval<T&>().exported))> : std::true_type {};

template <class T, class = void>
struct has_refused : std::false_type {};
template <class T>
struct has_refused<T, decltype(void(std::declval<T&>().refused))> : std::true_type {};

template <class T>
int throw_hook_of(const T& info) {
    if constexpr (has_throw_hook<T>::value) return info.throw_hook ? 1 : 0;
    else return -1;
}
template <class T>
std::string throw_hook_note_of(const T& info) {
    if constexpr (has_throw_hook<T>::value) return info.throw_hook_note;
    else return "";
}
template <class T>
std::string refused_of(const T& info) {
    if constexpr (has_refused<T>::value) return info.refused;
    else return "-";
}
template <class T>
int exported_of(const T& info) {
    if constexpr (has_exported<T>::value) return info.exported ? 1 : 0;
    else return -1;
}

long long count_calls(const std::vector<tracetree::Node>& nodes, const char* name) {
    long long sum = 0;
    for (const auto& node : nodes) {
        if (node.kind == tracetree::NodeKind::call && node.name == name) sum += static_cast<long long>(node.count);
        sum += count_calls(node.children, name);
    }
    return sum;
}

// Throw nodes below a scope named `scope` (any scope when null), or named like `type`.
long long count_throws(const std::vector<tracetree::Node>& nodes, const char* scope, const char* type, bool inside) {
    long long sum = 0;
    for (const auto& node : nodes) {
        if (node.kind == tracetree::NodeKind::thrown) {
            if (type != nullptr ? node.name.find(type) != std::string::npos : inside) sum += static_cast<long long>(node.count);
        } else {
            sum += count_throws(node.children, scope, type, scope == nullptr || node.name == scope);
        }
    }
    return sum;
}

std::vector<tracetree::Node> merged_roots() { return tracetree::profile().merged().roots; }

void print(const std::vector<tracetree::Node>& nodes, int depth) {
    for (const auto& node : nodes) {
        std::fprintf(stderr, "%*s%s%s count=%llu\n", 2 * depth + 2, "",
                     node.kind == tracetree::NodeKind::thrown ? "throw:" : "", node.name.c_str(),
                     static_cast<unsigned long long>(node.count));
        print(node.children, depth + 1);
    }
}

}  // namespace

PROBE_API void PROBE_FN(work)(int n) {
    for (int i = 0; i < n; ++i) {
        TRACETREE_SCOPE(PROBE_STR(PROBE) " work");
    }
}

PROBE_API long long PROBE_FN(count)(const char* name) {
    try {
        return count_calls(merged_roots(), name);
    } catch (...) {
        return -1;
    }
}

PROBE_API long long PROBE_FN(throws)(const char* scope) {
    try {
        return count_throws(merged_roots(), scope, nullptr, scope == nullptr);
    } catch (...) {
        return -1;
    }
}

PROBE_API long long PROBE_FN(throws_of)(const char* type) {
    try {
        return count_throws(merged_roots(), nullptr, type, true);
    } catch (...) {
        return -1;
    }
}

PROBE_API int PROBE_FN(throw_hook)() { return throw_hook_of(tracetree::recorder_info()); }
PROBE_API int PROBE_FN(exported)() { return exported_of(tracetree::recorder_info()); }

PROBE_API void PROBE_FN(throw_hook_note)(char* note, unsigned long size) {
    const std::string text = throw_hook_note_of(tracetree::recorder_info());
    std::snprintf(note, size, "%s", text.c_str());
}

PROBE_API void PROBE_FN(refused)(char* out, unsigned long size) {
    std::string text;
    try {
        text = refused_of(tracetree::recorder_info());
    } catch (const std::exception& e) {
        text = std::string("recorder_info() threw: ") + e.what();
    }
    std::snprintf(out, size, "%s", text.c_str());
}

PROBE_API void PROBE_FN(others)(char* out, unsigned long size) {
    std::string joined;
    for (const auto& other : tracetree::recorder_info().others) joined += (joined.empty() ? "" : " ") + other;
    std::snprintf(out, size, "%s", joined.c_str());
}

PROBE_API void PROBE_FN(dump)() {
    std::fflush(stdout);  // the caller's FAIL line first, should the dump crash (case abi, before the redesign)
    std::fprintf(stderr, "profile of copy %s (recorder in %s):\n", PROBE_STR(PROBE), tracetree::recorder_info().module.c_str());
    print(merged_roots(), 0);
}

PROBE_API long long PROBE_FN(on_trace_throw)() {
    int callbacks = 0;
    {
        // tracetree catches what a callback throws (runtime.hpp: "a throwing callback must not unwind
        // through the traced program"): that throw is tracetree's business, not the program's, and
        // must not appear as a throw node under `outer`, which never threw.
        tracetree::TraceSession session(tracetree::TraceRequest("inner").on_trace([&](const tracetree::Trace&) {
            ++callbacks;
            throw std::runtime_error("thrown by the callback");
        }));
        TRACETREE_SCOPE("outer");
        { TRACETREE_SCOPE("inner"); }
    }
    if (callbacks != 1) return -1;
    return PROBE_FN(throws)(nullptr);
}
