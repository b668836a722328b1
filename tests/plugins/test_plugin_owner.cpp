// The plugin that owns the recorder: this executable only annotates (it includes tracetree.hpp, never
// control.hpp), so no recorder exists until a plugin with control code is loaded. That plugin starts
// it; the executable's scopes and a second plugin with control code join it; and the plugin stays
// loaded after dlclose (pinned: every copy's slow path and every thread's exit run its code).
#include "api.hpp"

#include <tracetree/render.hpp>
#include <tracetree/tracetree.hpp>

#include <doctest/doctest.h>

#include <dlfcn.h>
#include <pthread.h>
#include <sstream>
#include <string>
#include <thread>

namespace {

struct Loaded {
    void* handle = nullptr;
    const plugins::Api* api = nullptr;
};

Loaded load(const std::string& path, int flags = RTLD_NOW | RTLD_LOCAL) {
    Loaded loaded;
    loaded.handle = dlopen(path.c_str(), flags);
    REQUIRE_MESSAGE(loaded.handle != nullptr, path << ": " << dlerror());
    auto entry = reinterpret_cast<plugins::Entry>(dlsym(loaded.handle, "tracetree_test_plugin"));
    REQUIRE_MESSAGE(static_cast<bool>(entry != nullptr), "no tracetree_test_plugin in " << path);
    loaded.api = entry();
    return loaded;
}

const tracetree::ThreadProfile* thread_named(const tracetree::Profile& profile, const std::string& name, bool exited) {
    for (const auto& thread : profile.threads)
        if (thread.thread_name == name && thread.exited == exited) return &thread;
    return nullptr;
}

std::string render(const tracetree::Profile& profile) {
    std::ostringstream out;
    for (const auto& thread : profile.threads) tracetree::render(out, thread);
    return out.str();
}

const plugins::Api* g_plugin = nullptr;

}  // namespace

namespace owner_host {

void poll() { TRACETREE_FUNCTION(); }

void back() {
    TRACETREE_FUNCTION();
    g_plugin->work(3);
}

void outer() {
    TRACETREE_FUNCTION();
    g_plugin->call(back);
}

void on_thread(const char* name) {
    std::thread([name] {
        pthread_setname_np(pthread_self(), name);  // no set_thread_name here: it is control code
        outer();
    }).join();
}

}  // namespace owner_host

namespace {

const std::vector<std::string> kChain = {"owner_host::outer()", "plugin_control_a::call()", "owner_host::back()",
                                         "plugin_control_a::work()", "plugin_control_a step"};

}  // namespace

TEST_CASE("without control code in the process there is no recorder, and scopes record nothing") {
    CHECK(plugins::anchored_recorders().empty());
    owner_host::poll();  // reads the anchor, finds none: records nothing
    CHECK(tracetree::detail::tls_arena() == nullptr);
    CHECK(tracetree::detail::find_recorder() == nullptr);
}

TEST_CASE("a plugin with control code starts the recorder, everything joins it, and it stays pinned") {
    pthread_setname_np(pthread_self(), "owner-main");
    const std::string path_a = plugins::env_or_empty("PLUGIN_CONTROL_A");
    const std::string path_b = plugins::env_or_empty("PLUGIN_CONTROL_B");
    REQUIRE(!path_a.empty());
    REQUIRE(!path_b.empty());

    Loaded a = load(path_a);
    g_plugin = a.api;
    CHECK(plugins::anchored_recorders().size() == 1);
    CHECK(plugins::real_path(a.api->module()) == plugins::real_path(path_a));
    CHECK(a.api->other_recorders() == 0);
    CHECK(tracetree::detail::find_recorder() == a.api->recorder());

    // The main thread looked before the recorder existed: the plugin's start filled this executable's
    // anchor too, so its next scope joins.
    owner_host::poll();
    const tracetree::Profile polled = a.api->profile();
    const tracetree::ThreadProfile* main_thread = thread_named(polled, "owner-main", false);
    REQUIRE(main_thread != nullptr);
    const tracetree::Node* polls = plugins::find_path(main_thread->roots, {"owner_host::poll()"});
    REQUIRE(polls != nullptr);
    CHECK(polls->count >= 1);

    // A new thread joins at its first scope; the executable's and the plugin's scopes form one tree.
    owner_host::on_thread("owner-first");
    const tracetree::Profile first = a.api->profile();
    const tracetree::ThreadProfile* exited = thread_named(first, "owner-first", true);
    REQUIRE(exited != nullptr);
    const tracetree::Node* steps = plugins::find_path(exited->roots, kChain);
    REQUIRE(steps != nullptr);
    CHECK(steps->count == 3);

    // A second plugin with control code joins the first one's recorder.
    Loaded b = load(path_b);
    CHECK(b.api->recorder() == a.api->recorder());
    CHECK(plugins::real_path(b.api->module()) == plugins::real_path(path_a));
    CHECK(plugins::anchored_recorders().size() == 1);
    const std::vector<tracetree::Trace> traces = b.api->trace("owner_host::outer", owner_host::outer);
    REQUIRE(traces.size() == 1);
    CHECK(plugins::find_path({traces[0].root}, kChain) != nullptr);

    // Unloaded, the owner stays: the dynamic linker keeps it (RTLD_NODELETE), and so does everything.
    REQUIRE(dlclose(a.handle) == 0);
    CHECK(plugins::mapped(path_a));
    void* still = dlopen(path_a.c_str(), RTLD_NOW | RTLD_NOLOAD);
    CHECK(still != nullptr);
    if (still != nullptr) dlclose(still);
    owner_host::on_thread("owner-late");  // a thread's exit runs the owner's code
    owner_host::outer();
    const std::vector<tracetree::Trace> after = b.api->trace("owner_host::outer", owner_host::outer);
    REQUIRE(after.size() == 1);
    CHECK(plugins::find_path({after[0].root}, kChain) != nullptr);
    const tracetree::Profile profile = b.api->profile();
    INFO(render(profile));
    const tracetree::ThreadProfile* late = thread_named(profile, "owner-late", true);
    REQUIRE(late != nullptr);
    CHECK(plugins::calls_at(late->roots, kChain) == 3);
    const tracetree::ThreadProfile* main_after = thread_named(profile, "owner-main", false);
    REQUIRE(main_after != nullptr);
    CHECK(plugins::calls_at(main_after->roots, kChain) == 9);

    // The second plugin goes too; the owner, reached again by name, still answers.
    g_plugin = nullptr;
    REQUIRE(dlclose(b.handle) == 0);
    MESSAGE("the joining plugin " << std::string(plugins::mapped(path_b) ? "stays mapped" : "is unmapped") << " after dlclose");
    const Loaded owner = load(path_a, RTLD_NOW | RTLD_NOLOAD);
    const std::string text = render(owner.api->profile());
    CHECK(text.find("plugin_control_a step") != std::string::npos);
    CHECK(text.find("owner_host::outer()") != std::string::npos);
    CHECK(plugins::anchored_recorders().size() == 1);
    dlclose(owner.handle);
}
