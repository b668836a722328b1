// One recorder per process, whatever the linking: this executable (control code, not linked with
// -rdynamic), a shared library linked at build time with default visibility, one built with
// -fvisibility=hidden, and plugins loaded with dlopen(RTLD_LOCAL): annotate-only ones and ones with
// control code of their own. Every copy records into the recorder this executable started; calls that
// cross library boundaries nest in one tree; unloading a plugin loses none of what it recorded.
#include "api.hpp"
#include "loader.hpp"

#include <tracetree/all.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <dlfcn.h>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

extern "C" const plugins::Api* tt_library_default();
extern "C" const plugins::Api* tt_library_hidden();

namespace {

using namespace std::chrono_literals;
using plugins::Plugin;
using plugins::render;
using plugins::thread_named;

// ---- calls that cross every library boundary ----------------------------------------------------

const plugins::Api* g_annotate = nullptr;
const plugins::Api* g_control = nullptr;

}  // namespace

namespace host {

void back_to_exe_4() {
    TRACETREE_FUNCTION();
    g_annotate->work(2);
}
void back_to_exe_3() {
    TRACETREE_FUNCTION();
    g_control->call(back_to_exe_4);
}
void back_to_exe_2() {
    TRACETREE_FUNCTION();
    g_annotate->call(back_to_exe_3);
}
void back_to_exe_1() {
    TRACETREE_FUNCTION();
    tt_library_hidden()->call(back_to_exe_2);
}
void outer() {
    TRACETREE_FUNCTION();
    tt_library_default()->call(back_to_exe_1);
}

void use_plugin(const plugins::Api& plugin, int times) {
    TRACETREE_FUNCTION();
    for (int i = 0; i < times; ++i) plugin.work(5);
}

void worker_step(int i) {
    TRACETREE_FUNCTION();
    TRACETREE_SCOPE_DYNAMIC("worker name " + std::to_string(i % 4));
}

}  // namespace host

namespace {

const std::vector<std::string> kChain = {
    "host::outer()",           "lib_default::call()",     "host::back_to_exe_1()", "lib_hidden::call()",
    "host::back_to_exe_2()",   "plugin_annotate::call()", "host::back_to_exe_3()", "plugin_control_a::call()",
    "host::back_to_exe_4()",   "plugin_annotate::work()", "plugin_annotate step"};

// Threads that keep calling into the executable until stopped; started() once each has recorded.
class Workers {
public:
    explicit Workers(int count) {
        for (int t = 0; t < count; ++t)
            threads_.emplace_back([this] {
                tracetree::set_thread_name("plugin-worker");
                for (int i = 0; !stop_.load(); ++i) {
                    host::worker_step(i);
                    if (i == 0) steps_.fetch_add(1);
                }
            });
        while (steps_.load() < count) std::this_thread::yield();  // every worker has recorded once
    }
    ~Workers() { stop(); }
    void stop() {
        stop_ = true;
        for (auto& thread : threads_)
            if (thread.joinable()) thread.join();
    }

private:
    std::atomic<bool> stop_{false};
    std::atomic<int> steps_{0};
    std::vector<std::thread> threads_;
};

}  // namespace

TEST_CASE("the executable, two linked libraries and two plugins record into one recorder, in one tree") {
    tracetree::set_thread_name("plugin-host");
    Plugin annotate("PLUGIN_ANNOTATE");
    Plugin control("PLUGIN_CONTROL_A");
    g_annotate = &annotate.api();
    g_control = &control.api();
    tracetree::reset();

    // Only one recorder: the one this executable started before main; the plugin with control
    // code found it instead of starting its own.
    CHECK(plugins::anchored_recorders().size() == 1);
    CHECK(control.api().recorder() == &tracetree::detail::runtime());
    const tracetree::RecorderInfo info = tracetree::recorder_info();
    CHECK(control.api().module() == info.module);
    CHECK(plugins::real_path(info.module) == plugins::real_path("/proc/self/exe"));
    CHECK(info.others.empty());
    CHECK(control.api().other_recorders() == 0);

    tracetree::TraceSession session(tracetree::TraceRequest("host::outer"));
    host::outer();
    const std::vector<tracetree::Trace> traces = session.collect(0s);
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* mine = thread_named(profile, "plugin-host");
    REQUIRE(mine != nullptr);
    INFO(render(profile));
    // One root: every library's scopes are nested in the executable's, across every boundary.
    CHECK(mine->roots.size() == 1);
    const tracetree::Node* leaf = plugins::find_path(mine->roots, kChain);
    REQUIRE(leaf != nullptr);
    CHECK(leaf->count == 2);
    CHECK(plugins::calls_at(mine->roots, {"host::outer()", "lib_default::call()"}) == 1);

    // The session made here saw the same tree, as one trace.
    REQUIRE(traces.size() == 1);
    CHECK(plugins::find_path({traces[0].root}, kChain) != nullptr);

    // A session made by the plugin sees the executable's scopes, and the plugin's profile is this one.
    const std::vector<tracetree::Trace> from_plugin = control.api().trace("host::outer", host::outer);
    REQUIRE(from_plugin.size() == 1);
    CHECK(plugins::find_path({from_plugin[0].root}, kChain) != nullptr);
    const tracetree::Profile plugin_profile = control.api().profile();
    const tracetree::ThreadProfile* seen = thread_named(plugin_profile, "plugin-host");
    REQUIRE(seen != nullptr);
    CHECK(plugins::calls_at(seen->roots, kChain) == 4);

    // Each library's own scopes, from another thread, land in that thread's one tree.
    std::thread([&] {
        tracetree::set_thread_name("plugin-each");
        tt_library_default()->work(1);
        tt_library_hidden()->work(2);
        annotate.api().work(3);
        control.api().work(4);
    }).join();
    const tracetree::Profile after = tracetree::profile();
    const tracetree::ThreadProfile* each = nullptr;
    for (const auto& thread : after.threads)
        if (thread.thread_name == "plugin-each") each = &thread;
    REQUIRE(each != nullptr);
    int step = 1;
    for (const char* name : {"lib_default", "lib_hidden", "plugin_annotate", "plugin_control_a"}) {
        const std::string ns = name;
        const tracetree::Node* steps = plugins::find_path(each->roots, {ns + "::work()", ns + " step"});
        REQUIRE_MESSAGE(steps != nullptr, ns);
        CHECK(steps->count == static_cast<std::uint64_t>(step++));
        CHECK(plugins::find_path(each->roots, {ns + "::work()", ns + " dynamic"}) != nullptr);
    }
    g_annotate = g_control = nullptr;
}

TEST_CASE("dlclose while a session runs and other threads record: profiles, sessions, rendering go on") {
    tracetree::set_thread_name("plugin-host");
    tracetree::reset();
    const std::vector<const void*> published = plugins::anchored_recorders();
    const std::string module = tracetree::recorder_info().module;

    Plugin plugin("PLUGIN_ANNOTATE");
    const void* first_base = plugin.base();
    tracetree::TraceSession plugin_session(tracetree::TraceRequest("plugin_annotate::work").limit(1000));
    tracetree::TraceSession worker_session(tracetree::TraceRequest("host::worker_step").limit(50));
    Workers workers(3);
    host::use_plugin(plugin.api(), 3);
    plugin.unload();  // while both sessions run and the workers record
    CHECK_MESSAGE(!plugins::mapped(plugin.path()), "still mapped: the checks below would not read after an unload");

    // Everything the plugin recorded, by name, with its counts.
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* mine = thread_named(profile, "plugin-host");
    REQUIRE(mine != nullptr);
    const tracetree::Node* work = plugins::find_path(mine->roots, {"host::use_plugin()", "plugin_annotate::work()"});
    REQUIRE(work != nullptr);
    CHECK(work->count == 3);
    CHECK(work->file.find("library.cpp") != std::string::npos);
    CHECK(plugins::calls_at(work->children, {"plugin_annotate step"}) == 15);
    CHECK(plugins::calls_at(work->children, {"plugin_annotate dynamic"}) == 3);
    const std::string text = render(profile);
    CHECK(text.find("plugin_annotate::work()") != std::string::npos);
    CHECK(text.find("plugin_annotate dynamic") != std::string::npos);
    std::ostringstream json;
    tracetree::write_json(json, profile);
    CHECK(json.str().find("plugin_annotate step") != std::string::npos);

    // The sessions that ran across the unload deliver, and render names of the unloaded plugin.
    const std::vector<tracetree::Trace> plugin_traces = plugin_session.collect(0s);
    REQUIRE(plugin_traces.size() == 3);
    CHECK(tracetree::to_string(plugin_traces[2]).find("plugin_annotate step") != std::string::npos);
    const std::vector<tracetree::Trace> worker_traces = worker_session.collect(60s);
    CHECK(worker_traces.size() == 50);
    // A session started after the unload matches the unloaded plugin's sites by name without reading
    // its memory (the names are the recorder's own copies).
    tracetree::TraceSession late(tracetree::TraceRequest("plugin_annotate::*").limit(1));
    tracetree::StackSession stack(tracetree::StackRequest("plugin_annotate step"));
    CHECK(late.collect(0s).empty());

    // Loaded again: its scopes record into the same recorder; at the same address, on the same nodes.
    plugin.load();
    host::use_plugin(plugin.api(), 1);
    CHECK(late.collect(5s).size() == 1);
    CHECK(stack.collect(5s).size() == 1);
    const tracetree::Profile reloaded = tracetree::profile();
    const tracetree::ThreadProfile* again = thread_named(reloaded, "plugin-host");
    REQUIRE(again != nullptr);
    const tracetree::Node* use = plugins::find_path(again->roots, {"host::use_plugin()"});
    REQUIRE(use != nullptr);
    std::uint64_t calls = 0;
    for (const auto& child : use->children)
        if (child.name == "plugin_annotate::work()") calls += child.count;
    CHECK(calls == 4);
    const std::size_t nodes = plugins::count_named(use->children, "plugin_annotate::work()");
    MESSAGE("reloaded at " << std::string(plugin.base() == first_base ? "the same" : "another") << " address: "
                           << nodes << " node(s) for plugin_annotate::work()");
    if (plugin.base() == first_base) CHECK(nodes == 1);
    plugin.unload();

    workers.stop();
    CHECK(plugins::anchored_recorders() == published);
    CHECK(tracetree::recorder_info().module == module);
    const tracetree::Profile last = tracetree::profile();
    CHECK(render(last).find("plugin_annotate step") != std::string::npos);
}

TEST_CASE("a plugin with control code joins, and unloading it leaves the recorder working") {
    tracetree::set_thread_name("plugin-host");
    tracetree::reset();
    Plugin control("PLUGIN_CONTROL_B");
    CHECK(control.api().recorder() == &tracetree::detail::runtime());
    CHECK(control.api().module() == tracetree::recorder_info().module);
    host::use_plugin(control.api(), 2);
    g_control = &control.api();  // a session made by the plugin, around calls into the plugin
    CHECK(control.api().trace("plugin_control_b::work", [] { host::use_plugin(*g_control, 1); }).size() == 1);
    g_control = nullptr;
    control.unload();
    MESSAGE("plugin with control code " << std::string(plugins::mapped(control.path()) ? "stays mapped" : "is unmapped")
                                        << " after dlclose (only the recorder's owner is pinned)");

    tracetree::TraceSession session(tracetree::TraceRequest("host::worker_step"));
    std::thread([] { host::worker_step(1); }).join();
    CHECK(session.collect(5s).size() == 1);
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* mine = thread_named(profile, "plugin-host");
    REQUIRE(mine != nullptr);
    const tracetree::Node* steps =
        plugins::find_path(mine->roots, {"host::use_plugin()", "plugin_control_b::work()", "plugin_control_b step"});
    REQUIRE(steps != nullptr);
    CHECK(steps->count == 15);
    CHECK(plugins::anchored_recorders().size() == 1);
}
