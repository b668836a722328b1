// libFuzzer target: trace-session patterns, tracetree::Pattern (include/tracetree/matcher.hpp), glob
// and regex. A refused pattern must throw PatternError (nothing else); an accepted one must match any
// name without crashing, and agree with the references below where they are cheap enough to run.
//
// Input format (the one the seeds in fuzz/corpus/matcher/ and fuzz/regressions/matcher/ use):
//   byte 0        bit 0 picks the syntax: 0 glob, 1 regex (the other bits are ignored)
//   bytes 1..     "<pattern>\n<name>": the pattern is everything up to the first '\n' (so a pattern
//                 never holds one), the name is everything after it, any bytes ('\n' and NUL too).
//                 Without a '\n' the name is empty.
// Names are cut at 4 KiB (the runtime cuts run-time names at 1 KiB, TRACETREE_MAX_NAME_LENGTH): under
// the fuzzer's instrumentation a 64 KiB name with all 256 states live takes seconds, and would hit
// -timeout=2 although it is linear (bench/matcher_bench.cpp measures it uninstrumented).
//
// Oracles:
// - glob, pattern <= 10 bytes and name <= 12: a recursive matcher, obviously right and exponential;
// - regex, pattern <= 8 bytes and name <= 8, no byte outside printable ASCII in either, no number of
//   two digits: std::regex (ECMAScript), on the patterns it accepts too (it is exponential, hence the
//   sizes and the counts; its '.' does not match '\n' or '\r', this subset's does: such names are
//   outside the printable range anyway);
// - any pattern: a name that matches still matches after a "x::" in front (what follows "::").
#include <tracetree/matcher.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <regex>
#include <string>
#include <string_view>

namespace {

constexpr std::size_t max_name_bytes = 4096;

template <typename Whole>
bool name_or_suffix(std::string_view name, Whole&& whole) {
    if (whole(name)) return true;
    for (std::size_t i = 2; i <= name.size(); ++i)
        if (name[i - 2] == ':' && name[i - 1] == ':' && whole(name.substr(i))) return true;
    return false;
}

bool glob_reference(std::string_view pattern, std::string_view text) {
    if (pattern.empty()) return text.empty();
    if (pattern[0] == '*')
        return glob_reference(pattern.substr(1), text) || (!text.empty() && glob_reference(pattern, text.substr(1)));
    return !text.empty() && (pattern[0] == '?' || pattern[0] == text[0]) &&
           glob_reference(pattern.substr(1), text.substr(1));
}

// std::regex tries every way to match: `(|){30}~` alone takes 2^30 steps (a timeout found by this
// target, fuzz/regressions/matcher/std-regex-oracle-exponential). Counts of one digit only.
bool one_digit_numbers(std::string_view pattern) {
    for (std::size_t i = 1; i < pattern.size(); ++i)
        if (pattern[i - 1] >= '0' && pattern[i - 1] <= '9' && pattern[i] >= '0' && pattern[i] <= '9') return false;
    return true;
}

bool printable(std::string_view s) {
    for (const char c : s)
        if (c < 0x20 || c > 0x7e) return false;
    return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const auto syntax = (data[0] & 1) != 0 ? tracetree::PatternSyntax::regex : tracetree::PatternSyntax::glob;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::size_t split = rest.find('\n');
    const std::string_view pattern = rest.substr(0, split);
    const std::string_view name =
        split == std::string_view::npos ? std::string_view() : rest.substr(split + 1, max_name_bytes);

    bool matched = false;
    try {
        const tracetree::Pattern compiled(pattern, syntax);
        matched = compiled.matches(name);
        if (matched && !compiled.matches("x::" + std::string(name))) std::abort();
    } catch (const tracetree::PatternError& e) {
        // Refused: what a session reports to its caller. The offset points into the pattern.
        if (e.offset() > pattern.size()) std::abort();
        return 0;
    }

    if (syntax == tracetree::PatternSyntax::glob && pattern.size() <= 10 && name.size() <= 12) {
        const bool expected = name_or_suffix(name, [&](std::string_view s) { return glob_reference(pattern, s); });
        if (matched != expected) std::abort();
    }
    if (syntax == tracetree::PatternSyntax::regex && pattern.size() <= 8 && name.size() <= 8 && printable(pattern) &&
        printable(name) && one_digit_numbers(pattern)) {
        std::regex reference;
        try {
            reference.assign(pattern.begin(), pattern.end(), std::regex::ECMAScript);
        } catch (const std::regex_error&) {
            return 0;  // accepted here, refused there: nothing to compare
        }
        const bool expected = name_or_suffix(name, [&](std::string_view s) {
            return std::regex_match(s.begin(), s.end(), reference);
        });
        if (matched != expected) std::abort();
    }
    return 0;
}
