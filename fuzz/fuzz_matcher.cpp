// libFuzzer target: the trace-session pattern parser and matcher (detail::Matcher, glob and
// ECMAScript regex), as TraceSession uses it: an invalid pattern must be refused with
// std::invalid_argument, a valid one must match any name without crashing.
//
// Input: byte 0 picks glob or regex; the rest is "pattern\nname". Names are cut at
// TRACETREE_MAX_NAME_LENGTH as the recorder cuts run-time names; patterns over 4096 bytes are refused
// by the Matcher itself.
//
// Regex mode only when built with -DTRACETREE_FUZZ_REGEX=1 (scripts/fuzz --regex): std::regex
// backtracks exponentially on patterns such as "(a*)*b", so it hits libFuzzer's timeout until the
// matcher is bounded. Without it every input is a glob.
#include <tracetree/tracetree.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#ifndef TRACETREE_FUZZ_REGEX
#define TRACETREE_FUZZ_REGEX 0
#endif

namespace {

// A glob without '*' or '?' matches a name exactly when the name or a "::"-suffix of it equals it:
// an oracle independent of the matcher's own loop.
bool literal_matches(std::string_view pattern, std::string_view name) {
    for (std::size_t from = 0;;) {
        if (name.substr(from) == pattern) return true;
        const std::size_t next = name.find("::", from);
        if (next == std::string_view::npos) return false;
        from = next + 2;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const bool regex = TRACETREE_FUZZ_REGEX != 0 && (data[0] & 1) != 0;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::size_t split = rest.find('\n');
    const std::string pattern(rest.substr(0, split));
    std::string_view name = split == std::string_view::npos ? std::string_view() : rest.substr(split + 1);
    if (name.size() > TRACETREE_MAX_NAME_LENGTH) name = name.substr(0, TRACETREE_MAX_NAME_LENGTH);
    try {
        const tracetree::detail::Matcher matcher(pattern, regex);
        const bool matched = matcher.matches(name);
        if (!regex && pattern.find_first_of("*?") == std::string::npos && matched != literal_matches(pattern, name))
            std::abort();  // a plain glob disagrees with the literal oracle
        if (!regex && pattern == "*" && !matched) std::abort();  // "*" matches every name
    } catch (const std::invalid_argument&) {
        // A refused pattern: what TraceSession reports to its caller.
    }
    return 0;
}
