// Built with TRACETREE_DISABLE: the macros leave nothing behind and evaluate nothing.
#include <tracetree/tracetree.hpp>
#include <tracetree/control.hpp>
#include <tracetree/handoff.hpp>
#include <tracetree/coroutine.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>

static int evaluated = 0;
[[maybe_unused]] static std::string name_with_side_effect() {
    ++evaluated;
    return "never";
}

static int traced(int x) {
    TRACETREE_FUNCTION();
    TRACETREE_SCOPE("a scope");
    TRACETREE_SCOPE_DYNAMIC(name_with_side_effect());
    TRACETREE_WATCH("value", name_with_side_effect());
    return x + 1;
}

TEST_CASE("disabled macros compile to nothing and do not evaluate their arguments") {
#ifndef TRACETREE_DISABLE
    FAIL("this file must be built with TRACETREE_DISABLE");
#endif
    CHECK(traced(1) == 2);
    CHECK(evaluated == 0);
    const auto profile = tracetree::profile();
    CHECK(profile.threads.empty());  // nothing in this program ever recorded
    if (true) TRACETREE_SCOPE("a valid statement");  // expands to a single statement
    CHECK_THROWS_WITH_AS(TRACETREE_THROW(std::runtime_error("still thrown")), "still thrown", std::runtime_error);
}

TEST_CASE("disabled hand-offs do nothing, and a wrapped task is the task itself") {
    const tracetree::Here here = tracetree::here();
    static_assert(std::is_empty<tracetree::Here>::value, "nothing captured");
    int ran = 0;
    auto task = tracetree::wrap(here, [&ran] { ++ran; });
    std::thread([&] {
        tracetree::Continue on(here);
        task();
        traced(2);
    }).join();
    CHECK(ran == 1);
    CHECK(tracetree::profile().threads.empty());
}

TEST_CASE("disabled coroutine scopes vanish and evaluate nothing") {
    static_assert(std::is_empty<tracetree::Coroutine>::value && std::is_empty<tracetree::Resumed>::value, "nothing kept");
    tracetree::Coroutine place;
    tracetree::Coroutine started_at(tracetree::here());
    {
        tracetree::Resumed on(place);
        TRACETREE_CO_SCOPE("not recorded");
        TRACETREE_CO_FUNCTION();
        traced(1);
    }
    CHECK(tracetree::profile().threads.empty());
}
