// Built by g++ (mixed_gcc.sh): a g++ program whose traced code (traced_code.cpp) and one file
// including tracetree/xray/xray.hpp (mixed_hook.cpp) are built by clang++ with XRay. Exit status 0 when
// the trace, the exceptions and the unpatching are right; prints what it saw.
#include "traced_code.hpp"

#include <tracetree/control.hpp>
#include <tracetree/render.hpp>
#include <tracetree/sessions.hpp>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

namespace {
std::uint64_t clock_of_traced_code() noexcept { return xtest::now_ns.load(); }

void service() {
    TRACETREE_FUNCTION();
    xtest::parent(2);
    try {
        xtest::thrower(1);  // caught here, in a frame g++ built
    } catch (const std::runtime_error&) {
    }
}

std::uint64_t count(const tracetree::Node& node, const std::string& name) {
    std::uint64_t total = node.name == name ? node.count : 0;
    for (const auto& child : node.children) total += count(child, name);
    return total;
}
std::uint64_t throws(const tracetree::Node& node, const std::string& name) {
    std::uint64_t total = node.name == name ? node.throws : 0;
    for (const auto& child : node.children) total += throws(child, name);
    return total;
}
}  // namespace

int main() {
    tracetree::set_clock(clock_of_traced_code);
    std::optional<tracetree::Trace> trace;
    {
        tracetree::TraceSession session(tracetree::TraceRequest("service"));
        service();
        trace = session.next(std::chrono::seconds(5));
    }
    if (!trace) {
        std::cout << "no trace\n";
        return 1;
    }
    tracetree::render(std::cout, *trace, tracetree::RenderOptions().colour(tracetree::Colour::never));
    const bool ok = count(trace->root, "xtest::parent()") == 1 && count(trace->root, "xtest::leaf()") == 2 &&
                    count(trace->root, "xtest::thrower()") == 2 && throws(trace->root, "xtest::thrower()") == 2;
    service();  // unpatched now: nothing new below the annotated scope
    std::uint64_t services = 0, parents = 0;
    for (const tracetree::Node& root : tracetree::profile().merged().roots) {
        services += count(root, "(anonymous namespace)::service()");
        parents += count(root, "xtest::parent()");
    }
    const bool unpatched = services == 2 && parents == 1;
    std::cout << (ok ? "trace: ok" : "trace: WRONG") << "; " << (unpatched ? "after: ok" : "after: WRONG") << '\n';
    return ok && unpatched ? 0 : 1;
}
