// Shared by the plugin hosts with control code: loading a plugin, finding a thread, rendering.
#ifndef TRACETREE_TESTS_PLUGINS_LOADER_HPP
#define TRACETREE_TESTS_PLUGINS_LOADER_HPP

#include "api.hpp"

#include <tracetree/render.hpp>
#include <tracetree/values.hpp>

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <sstream>
#include <string>

namespace plugins {

// A plugin loaded RTLD_LOCAL from the path meson gives in the environment variable `variable`.
class Plugin {
public:
    explicit Plugin(const char* variable) : path_(plugins::env_or_empty(variable)) {
        REQUIRE_MESSAGE(!path_.empty(), std::string(variable) << " is not set (meson test sets it)");
        load();
    }
    ~Plugin() { unload(); }
    Plugin(const Plugin&) = delete;
    Plugin& operator=(const Plugin&) = delete;

    void load() {
        handle_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
        REQUIRE_MESSAGE(handle_ != nullptr, dlerror());
        auto entry = reinterpret_cast<plugins::Entry>(dlsym(handle_, "tracetree_test_plugin"));
        REQUIRE_MESSAGE(static_cast<bool>(entry != nullptr), "no tracetree_test_plugin in the plugin");
        api_ = entry();
    }
    void unload() {
        if (handle_ != nullptr) REQUIRE(dlclose(handle_) == 0);
        handle_ = nullptr;
        api_ = nullptr;
    }
    const plugins::Api& api() const { return *api_; }
    const std::string& path() const { return path_; }
    const void* base() const {  // where it is loaded: a library loaded at the same place finds its old sites
        Dl_info where{};
        return dladdr(api_, &where) != 0 ? where.dli_fbase : nullptr;
    }

private:
    std::string path_;
    void* handle_ = nullptr;
    const plugins::Api* api_ = nullptr;
};

inline const tracetree::ThreadProfile* thread_named(const tracetree::Profile& profile, const std::string& name) {
    for (const auto& thread : profile.threads)
        if (thread.thread_name == name && !thread.exited) return &thread;
    return nullptr;
}

inline std::string render(const tracetree::Profile& profile) {
    std::ostringstream out;
    for (const auto& thread : profile.threads) tracetree::render(out, thread);
    return out.str();
}

}  // namespace plugins

#endif
