// Worst cases of tracetree::Pattern (include/tracetree/matcher.hpp): the time of one matches() call
// for patterns chosen to keep as many automaton states live as possible, against names of 1,024
// bytes and 64 KiB; and the time to compile each pattern. Prints a Markdown table.
//
//   build/bench/tracetree-matcher-bench [--rounds N]
//
// Built with -Dbenchmarks=true, not run by `meson test`: a timing on a shared machine is a figure to
// read (docs/testing.md), not a pass/fail check.
#include <tracetree/matcher.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point start) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

// The median over `rounds` of the mean time of one call in a batch of `batch` calls.
template <typename F>
double median_ns(int rounds, int batch, F&& call) {
    std::vector<double> times;
    for (int r = 0; r < rounds; ++r) {
        const auto start = Clock::now();
        for (int i = 0; i < batch; ++i) call();
        times.push_back(ns_since(start) / batch);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

std::string repeat(const std::string& s, std::size_t times) {
    std::string out;
    for (std::size_t i = 0; i < times; ++i) out += s;
    return out;
}

struct Case {
    const char* label;
    std::string pattern;
    tracetree::PatternSyntax syntax;
    std::string unit;  // the name is this, repeated to the length
};

}  // namespace

int main(int argc, char** argv) {
    int rounds = 21;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) rounds = std::atoi(argv[++i]);
    }
    using tracetree::PatternSyntax;
    // Labels escape '|' for Markdown tables.
    const std::vector<Case> cases = {
        {"glob `?*` x 128 (256 states, all live)", repeat("?*", 128), PatternSyntax::glob, "a"},
        {"glob `?*` x 128 on `::` names (a start on every byte too)", repeat("?*", 128), PatternSyntax::glob, "::"},
        {"regex `(.*){100}(.*){100}(.*){56}` (256 states, all live)", "(.*){100}(.*){100}(.*){56}", PatternSyntax::regex, "a"},
        {"regex `((.\\|.)*){100}((.\\|.)*){28}` (256 states, all live)", "((.|.)*){100}((.|.)*){28}", PatternSyntax::regex, "a"},
        {"glob `*:*` x 85 on `::` names (171 states)", repeat("*:*", 85), PatternSyntax::glob, "::"},
        {"regex `[^x]*` x 32 then `[a-z]*` x 16 (48 states)", repeat("[^x]*", 32) + repeat("[a-z]*", 16), PatternSyntax::regex, "ab"},
        {"regex `((a\\|b)*(a\\|b\\|.)*)*X` x 8 on `ab::` names", repeat("((a|b)*(a|b|.)*)*X", 8), PatternSyntax::regex, "ab::"},
        {"regex `(.\\|.)*X` on a...", "(.|.)*X", PatternSyntax::regex, "a"},
        {"regex `(a\\|aa)*c` on a...", "(a|aa)*c", PatternSyntax::regex, "a"},
        {"regex `(a?){100}a{100}` on a... (dies after 200 bytes)", "(a?){100}a{100}", PatternSyntax::regex, "a"},
        {"glob `*a*a*a*a*a*b` on a...", "*a*a*a*a*a*b", PatternSyntax::glob, "a"},
        {"glob `service` on `a::b::` names (skips to each `::`)", "service", PatternSyntax::glob, "a::b::"},
    };
    std::printf("| pattern | pattern bytes | compile | 1,024-byte name | 64 KiB name | per byte (64 KiB) |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    // Every result is stored, so that no call can be optimised away.
    volatile bool sink = false;
    for (const Case& c : cases) {
        const double compile = median_ns(rounds, 20, [&] { sink = tracetree::Pattern(c.pattern, c.syntax).matches("x"); });
        const tracetree::Pattern pattern(c.pattern, c.syntax);
        const std::string small = repeat(c.unit, 1024 / c.unit.size() + 1).substr(0, 1024);
        const std::string large = repeat(c.unit, 65536 / c.unit.size() + 1).substr(0, 65536);
        const double t_small = median_ns(rounds, 20, [&] { sink = pattern.matches(small); });
        const double t_large = median_ns(rounds, 1, [&] { sink = pattern.matches(large); });
        std::printf("| %s | %zu B | %.1f us | %.2f us | %.1f us | %.2f ns |\n", c.label, c.pattern.size(),
                    compile / 1000, t_small / 1000, t_large / 1000, t_large / 65536);
    }
    return 0;
}
