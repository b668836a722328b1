// Shared by the plugin tests: what every test library and plugin exports, and what the hosts check
// about the process (mapped files, the recorders anchors hold). Libraries and plugins are built from
// library.cpp, one copy of tracetree each; see meson.build for which is which.
#ifndef TRACETREE_TESTS_PLUGINS_API_HPP
#define TRACETREE_TESTS_PLUGINS_API_HPP

#include <tracetree/tracetree.hpp>
#include <tracetree/values.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

namespace plugins {

// One library's entry points, reached through one exported C function: `tt_library_default()`,
// `tt_library_hidden()` (linked at build time) or `tracetree_test_plugin()` (a plugin, by dlsym).
// C++ types cross freely: every copy is built by the same compiler with the same standard library.
struct Api {
    const char* name;  // "lib_default", "plugin_annotate", ...: also the namespace of its scopes
    // `<name>::work()`, with `steps` scopes "<name> step" and one run-time-named "<name> dynamic" inside.
    int (*work)(int steps);
    // `<name>::call()` around a call of `back`: the caller's scopes nest inside the library's.
    void (*call)(void (*back)());
    // Null in copies without control code (they include tracetree.hpp only):
    const void* (*recorder)();  // the recorder this copy records into
    std::string (*module)();    // recorder_info().module
    std::size_t (*other_recorders)();  // recorder_info().others.size()
    tracetree::Profile (*profile)();
    // A TraceSession on `pattern` made by this copy, `run()` called, its traces collected.
    std::vector<tracetree::Trace> (*trace)(const char* pattern, void (*run)());
};

using Entry = const Api* (*)();

inline std::string real_path(const std::string& path) {
    char resolved[PATH_MAX];
    return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

// Whether a file is mapped into this process (an unloaded library is not).
inline bool mapped(const std::string& path) {
    const std::string wanted = real_path(path);
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);)
        if (line.size() >= wanted.size() && line.compare(line.size() - wanted.size(), wanted.size(), wanted) == 0)
            return true;
    return false;
}

// The distinct recorders that this ABI's anchors hold, in every loaded module and this copy: every
// copy must find the same one, so there is at most one.
inline std::vector<const void*> anchored_recorders() {
    std::vector<const void*> found;
    const auto add = [&found](const void* recorder) {
        if (recorder != nullptr && std::find(found.begin(), found.end(), recorder) == found.end()) found.push_back(recorder);
    };
    add(tracetree::detail::own_anchor().load());
    tracetree::detail::walk_modules([&](const tracetree::detail::ModuleSymbols& module) {
        if (const std::atomic<void*>* anchor = module.anchor()) add(anchor->load());
        return false;
    });
    return found;
}

// A path of names from a root down, as "a > b > c", if the tree has it; the node at its end.
inline const tracetree::Node* find_path(const std::vector<tracetree::Node>& roots, const std::vector<std::string>& path) {
    const std::vector<tracetree::Node>* level = &roots;
    const tracetree::Node* found = nullptr;
    for (const std::string& name : path) {
        found = nullptr;
        for (const tracetree::Node& node : *level)
            if (node.name == name) found = &node;
        if (found == nullptr) return nullptr;
        level = &found->children;
    }
    return found;
}

// The calls recorded at the end of a path, or -1 when there is no such path.
inline long long calls_at(const std::vector<tracetree::Node>& roots, const std::vector<std::string>& path) {
    const tracetree::Node* node = find_path(roots, path);
    return node != nullptr ? static_cast<long long>(node->count) : -1;
}

inline std::size_t count_named(const std::vector<tracetree::Node>& nodes, const std::string& name) {
    std::size_t count = 0;
    for (const tracetree::Node& node : nodes) count += (node.name == name) + count_named(node.children, name);
    return count;
}

inline std::string env_or_empty(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "";
}

}  // namespace plugins

#endif
