// An annotate-only plugin (it includes tracetree.hpp only) must be unloadable: dlclose unmaps it, and
// what it recorded stays in the profile. This host has control code and links no library, so nothing
// it exports can stand in for the plugin's own symbols (plugin-host links a library with default
// visibility, which makes its executable export tracetree's inline symbols to every plugin).
#include "api.hpp"
#include "loader.hpp"

#include <tracetree/control.hpp>
#include <tracetree/render.hpp>

#include <doctest/doctest.h>

#include <string>

namespace unload_host {

void use_plugin(const plugins::Api& plugin, int times) {
    TRACETREE_FUNCTION();
    for (int i = 0; i < times; ++i) plugin.work(5);
}

}  // namespace unload_host

namespace {

// Loads the plugin named by `variable`, records through it, unloads it: it must be unmapped, and what
// it recorded must stay in the profile.
void unload_and_read(const char* variable) {
    plugins::Plugin plugin(variable);
    const std::string name = plugin.api().name;
    unload_host::use_plugin(plugin.api(), 2);
    CHECK(plugins::mapped(plugin.path()));
    plugin.unload();
    // Nothing in an annotated file may keep its library loaded: no thread_local with a destructor,
    // no symbol the dynamic linker must keep. (g++ makes inline variables and the static locals of
    // inline functions STB_GNU_UNIQUE when they have default visibility, and glibc never unloads a
    // library that brought one into the process.)
    CHECK_MESSAGE(!plugins::mapped(plugin.path()), plugin.path() << " is still mapped after dlclose");
    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile* mine = plugins::thread_named(profile, "unload-host");
    REQUIRE(mine != nullptr);
    CHECK(plugins::calls_at(mine->roots, {"unload_host::use_plugin()", name + "::work()", name + " step"}) == 10);
    CHECK(plugins::render(profile).find(name + " dynamic") != std::string::npos);
}

}  // namespace

TEST_CASE("an annotate-only plugin built with -fvisibility=hidden is unmapped by dlclose, and what it recorded stays readable") {
    tracetree::set_thread_name("unload-host");
    unload_and_read("PLUGIN_ANNOTATE_HIDDEN");
}

// g++ makes inline variables and function statics of default visibility STB_GNU_UNIQUE, which glibc
// never unmaps: the recorder's per-copy state is hidden so that this plugin can go.
TEST_CASE("an annotate-only plugin with default visibility is unmapped by dlclose, and what it recorded stays readable") {
    tracetree::set_thread_name("unload-host");
    unload_and_read("PLUGIN_ANNOTATE");
}
