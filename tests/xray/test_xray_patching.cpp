// The order in which a function becomes patched: XRay writes its sleds, then the handler records it.
// This file's mprotect(), linked before the C library's, replaces it for the whole test program: XRay
// makes a function's code writable with it just before it writes the function's sleds.
#include "traced_code.hpp"
#include "xray_support.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

using namespace xray_test;

namespace {
std::atomic<std::uintptr_t> g_written_address{0};  // the function watched, 0: none
std::atomic<std::int32_t> g_written_id{0};
std::atomic<int> g_state_when_written{-1};
}  // namespace

extern "C" [[clang::xray_never_instrument]] int mprotect(void* address, std::size_t length, int protection) noexcept {
    const std::uintptr_t watched = g_written_address.load();
    const auto start = reinterpret_cast<std::uintptr_t>(address);
    if (watched != 0 && (protection & PROT_WRITE) != 0 && start <= watched && watched - start < length && g_state_when_written.load() < 0)
        g_state_when_written = tracetree::detail::g_xray_table.states[g_written_id.load()].load();
    return static_cast<int>(syscall(SYS_mprotect, address, length, protection));
}

TEST_CASE("a function's events are recorded only once XRay has written all its sleds") {
    // XRay writes a function's entry sled before its exits: an entry recorded in between would open a
    // frame that no exit closes, and the annotated scope around it would end off its node, its call lost.
    Recording recording;
    tracetree::xray::install();
    for (const auto& function : tracetree::xray::functions())
        if (function.name == "xtest::leaf()") g_written_address = function.address, g_written_id = function.id;
    REQUIRE(g_written_address.load() != 0);
    const auto patched_by = [](const char* pattern) {
        g_state_when_written = -1;
        tracetree::Monitor monitor{tracetree::MonitorRequest(pattern)};
        xtest::leaf();
        return g_state_when_written.load();
    };
    SUBCASE("patched one by one") {
        const int state = patched_by("xtest::leaf");
        REQUIRE(state != -1);  // XRay made the leaf's code writable through mprotect()
        CHECK(state == tracetree::detail::kXRayIdle);
    }
    SUBCASE("patched all at once") {
        const int state = patched_by("*");
        REQUIRE(state != -1);
        CHECK(state == tracetree::detail::kXRayIdle);
    }
    g_written_address = 0;
    CHECK(count_of("xtest::leaf()") == 1);
}
