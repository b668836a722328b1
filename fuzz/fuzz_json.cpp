// libFuzzer target: the JSON trace/profile loader (tracetree/views.hpp, read_json). Any input either
// loads or throws JsonError (nesting is bounded, so no stack exhaustion). What loads must survive a
// round trip: writing it and loading that again gives the same JSON.
#include <tracetree/views.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>

namespace {

std::string to_json(const std::variant<tracetree::Trace, tracetree::Profile>& value) {
    std::ostringstream out;
    std::visit([&](const auto& v) { tracetree::write_json(out, v); }, value);
    return out.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    std::variant<tracetree::Trace, tracetree::Profile> loaded;
    try {
        loaded = tracetree::read_json(input);
    } catch (const tracetree::JsonError& e) {
        if (e.offset() > input.size()) __builtin_trap();  // the error points into the input
        return 0;
    }
    const std::string written = to_json(loaded);
    std::variant<tracetree::Trace, tracetree::Profile> reloaded;
    try {
        reloaded = tracetree::read_json(written);
    } catch (const tracetree::JsonError&) {
        __builtin_trap();  // the loader refuses what the writer wrote
    }
    if (to_json(reloaded) != written) __builtin_trap();  // the round trip changed something
    return 0;
}
