// Pathological trace patterns: a session's pattern is matched on the application's own threads (once
// per call site and session epoch), so the slowest patterns we know, against 1 KiB names built to keep
// them busy, must leave every scope entry bounded while threads record. Figures are printed; only a
// hang bound is asserted. Patterns past the matcher's limits must be refused by every session kind,
// saying why, without using up a session slot.
#include "attack.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <time.h>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using attack::kNameSize;
using tracetree::PatternSyntax;

std::string repeat(const std::string& text, int times) {
    std::string out;
    for (int i = 0; i < times; ++i) out += text;
    return out;
}

struct Hostile {
    std::string label;
    std::string pattern;
    PatternSyntax syntax;
};

// The slowest patterns found (docs/testing.md, "Trace patterns"): all 256 states live on every byte,
// or the classic backtracking traps.
std::vector<Hostile> hostile_patterns() {
    return {
        {"glob ?* x128 (256 bytes)", repeat("?*", 128), PatternSyntax::glob},
        {"regex (.*){100}(.*){100}(.*){56}", "(.*){100}(.*){100}(.*){56}", PatternSyntax::regex},
        {"regex ((.|.)*){100}((.|.)*){28}", "((.|.)*){100}((.|.)*){28}", PatternSyntax::regex},
        {"glob *:* x85", repeat("*:*", 85), PatternSyntax::glob},
        {"regex (.|.)*X", "(.|.)*X", PatternSyntax::regex},
        {"regex ((a|b)*(a|b|.)*)*X x8", repeat("((a|b)*(a|b|.)*)*X", 8), PatternSyntax::regex},
        {"regex (a|aa)*c", "(a|aa)*c", PatternSyntax::regex},
        {"regex (a?){100}a{100}", "(a?){100}a{100}", PatternSyntax::regex},
        {"glob *a*a*a*a*a*b", "*a*a*a*a*a*b", PatternSyntax::glob},
        {"regex [^x]* x32 [a-z]* x16", repeat("[^x]*", 32) + repeat("[a-z]*", 16), PatternSyntax::regex},
    };
}

// 1 KiB names that keep the patterns above busy: runs of 'a', "ab::" (a new start after every "::"),
// and ':' runs; `id` makes each distinct (so each is a new call site, decided afresh).
std::string hostile_name(std::uint64_t id) {
    static const char* const fills[] = {"a", "ab::", "a:"};
    std::string name = "n" + std::to_string(id) + "::";
    const std::string fill = fills[id % 3];
    while (name.size() < kNameSize) name += fill;
    name.resize(kNameSize);
    return name;
}

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

double thread_cpu_us() {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

}  // namespace

TEST_CASE("the slowest patterns against 1 KiB names: each match bounded") {
    const std::vector<std::string> names = {hostile_name(0), hostile_name(1), hostile_name(2)};
    constexpr int kRounds = attack::kShort ? 3 : 20;
    double worst_all = 0;
    for (const Hostile& hostile : hostile_patterns()) {
        const Clock::time_point compile_start = Clock::now();
        const tracetree::Pattern pattern(hostile.pattern, hostile.syntax);
        const double compile_us = us(Clock::now() - compile_start);
        std::vector<double> times;
        int matched = 0;  // used, so that the calls are made
        for (int round = 0; round < kRounds; ++round)
            for (const std::string& name : names) {
                const Clock::time_point start = Clock::now();
                matched += pattern.matches(name) ? 1 : 0;
                times.push_back(us(Clock::now() - start));
            }
        std::sort(times.begin(), times.end());
        worst_all = std::max(worst_all, times.back());
        // The median is the matcher's cost; the worst adds whatever preempted the thread meanwhile.
        MESSAGE(hostile.label << ": compile " << compile_us << " us; a 1 KiB name: median " << times[times.size() / 2]
                              << " us, worst " << times.back() << " us (" << matched << " of " << times.size() << " matched)");
    }
    CHECK(worst_all < 1e6);  // a hang bound, not a speed requirement: 1 s for one 1 KiB name
}

TEST_CASE("sessions with the slowest patterns while threads record 1 KiB names: every scope entry bounded") {
    tracetree::reset();
    const std::vector<Hostile> hostile = hostile_patterns();
    // Every kind of session, none delivering (min_cost of an hour): only matching and capturing cost.
    std::vector<tracetree::TraceSession> traces;
    std::vector<tracetree::StackSession> stacks;
    std::vector<tracetree::WatchSession> watches;
    std::vector<tracetree::Monitor> monitors;
    std::vector<tracetree::FlightRecorder> recorders;
    for (std::size_t i = 0; i < hostile.size(); ++i) {
        const Hostile& h = hostile[i];
        const bool regex = h.syntax == PatternSyntax::regex;
        switch (i % 5) {
        case 0: monitors.emplace_back(tracetree::MonitorRequest(h.pattern).regex(regex).interval(1h)); break;
        case 1: stacks.emplace_back(tracetree::StackRequest(h.pattern).regex(regex).min_cost(1h)); break;
        case 2: watches.emplace_back(tracetree::WatchRequest(h.pattern).regex(regex).min_cost(1h)); break;
        case 3: traces.emplace_back(tracetree::TraceRequest(h.pattern).regex(regex).min_cost(1h).limit(1000000)); break;
        default: recorders.emplace_back(tracetree::RecorderRequest(h.pattern).regex(regex).min_cost(1h)); break;
        }
    }

    constexpr std::size_t kThreads = 4;
    constexpr std::size_t kNamesPerThread = attack::kShort ? 20 : 400;
    constexpr std::size_t kVisits = 3;  // the first decides the site; the next ones are decided unless the epoch changed
    std::atomic<std::size_t> recording{kThreads};
    std::atomic<std::uint64_t> epochs{0};
    // Starting and stopping a session changes the epoch: every site is decided again at its next entry.
    std::thread churn([&] {
        while (recording.load() > 0) {
            tracetree::TraceSession again(tracetree::TraceRequest("(a|aa)*c").regex().min_cost(1h));
            epochs.fetch_add(1);
        }
    });
    std::vector<double> worst_first(kThreads, 0), worst_again(kThreads, 0);
    std::vector<std::vector<double>> all(kThreads), cpu(kThreads);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            tracetree::set_thread_name("hostile-" + std::to_string(t));
            std::vector<std::string> names;
            for (std::size_t i = 0; i < kNamesPerThread; ++i) names.push_back(hostile_name(t * kNamesPerThread + i));
            for (std::size_t visit = 0; visit < kVisits; ++visit)
                for (const std::string& name : names) {
                    const double cpu_start = thread_cpu_us();
                    const Clock::time_point start = Clock::now();
                    { TRACETREE_SCOPE_DYNAMIC(name); }
                    const double took = us(Clock::now() - start);
                    cpu[t].push_back(thread_cpu_us() - cpu_start);
                    all[t].push_back(took);
                    double& worst = visit == 0 ? worst_first[t] : worst_again[t];
                    worst = std::max(worst, took);
                }
            recording.fetch_sub(1);
        });
    for (auto& thread : threads) thread.join();
    churn.join();

    const auto sorted = [](const std::vector<std::vector<double>>& per_thread) {
        std::vector<double> merged;
        for (const auto& times : per_thread) merged.insert(merged.end(), times.begin(), times.end());
        std::sort(merged.begin(), merged.end());
        return merged;
    };
    const std::vector<double> wall = sorted(all), on_cpu = sorted(cpu);
    const double first = *std::max_element(worst_first.begin(), worst_first.end());
    const double again = *std::max_element(worst_again.begin(), worst_again.end());
    // Thread CPU time is the work of one entry (matching every session, interning); wall time adds
    // waiting for the recorder's lock and being preempted on a shared machine.
    MESSAGE(hostile.size() << " sessions, " << wall.size() << " scope entries of 1 KiB names on " << kThreads
                           << " threads, " << epochs.load() << " session epochs meanwhile. CPU per entry: median "
                           << on_cpu[on_cpu.size() / 2] << " us, worst " << on_cpu.back() << " us. Wall: median "
                           << wall[wall.size() / 2] << " us, 99th percentile " << wall[wall.size() * 99 / 100]
                           << " us, worst first entry (intern + decide) " << first << " us, worst later entry " << again << " us");
    CHECK(std::max(first, again) < 5e6);  // a hang bound: 5 s for one scope entry

    // The sessions saw the names: the monitor with `?*` x128 matched every site.
    const tracetree::Profile profile = tracetree::profile();
    std::uint64_t entries = 0;
    for (const auto& thread : profile.threads)
        for (const auto& root : thread.roots) entries += root.count;
    CHECK(entries == kThreads * kNamesPerThread * kVisits);
}

TEST_CASE("patterns past the matcher's limits are refused by every session kind, saying why, using no slot") {
    struct Refused {
        std::string pattern;
        PatternSyntax syntax;
        std::string reason;
    };
    const std::vector<Refused> refused = {
        {std::string(257, '*'), PatternSyntax::glob, "longer than 256 bytes"},
        {std::string(257, 'a'), PatternSyntax::regex, "longer than 256 bytes"},
        {"a{100}a{100}a{57}", PatternSyntax::regex, "more than 256 automaton states"},
        {"(.*){100}(.*){100}(.*){57}", PatternSyntax::regex, "more than 256 automaton states"},
        {repeat("(", 33) + "a" + repeat(")", 33), PatternSyntax::regex, "groups nested more than 32 deep"},
        {"a{101}", PatternSyntax::regex, "count above 100"},
        {"(a)\\1", PatternSyntax::regex, "back-reference"},
        {"(?=a)", PatternSyntax::regex, "lookahead"},
        {"", PatternSyntax::glob, "empty pattern"},
    };
    const auto attempt = [](int kind, const Refused& r) {
        const bool regex = r.syntax == PatternSyntax::regex;
        switch (kind) {
        case 0: tracetree::TraceSession(tracetree::TraceRequest(r.pattern).regex(regex)); break;
        case 1: tracetree::StackSession(tracetree::StackRequest(r.pattern).regex(regex)); break;
        case 2: tracetree::WatchSession(tracetree::WatchRequest(r.pattern).regex(regex)); break;
        case 3: tracetree::Monitor(tracetree::MonitorRequest(r.pattern).regex(regex)); break;
        default: tracetree::FlightRecorder(tracetree::RecorderRequest(r.pattern).regex(regex)); break;
        }
    };
    for (const Refused& r : refused)
        for (int kind = 0; kind < 5; ++kind) {
            CAPTURE(kind);
            CAPTURE(r.reason);
            std::string message;
            try {
                attempt(kind, r);
            } catch (const tracetree::PatternError& error) {
                message = error.what();
            }
            CHECK(message.find("bad pattern") != std::string::npos);
            CHECK(message.find(r.reason) != std::string::npos);
        }
    // None of the 45 refusals kept a slot: 32 sessions still start, and the 33rd is refused.
    std::vector<tracetree::TraceSession> sessions;
    for (int i = 0; i < 32; ++i) sessions.emplace_back(tracetree::TraceRequest("slot-" + std::to_string(i)));
    CHECK_THROWS_WITH_AS(tracetree::TraceSession(tracetree::TraceRequest("one-too-many")),
                         doctest::Contains("too many sessions"), std::invalid_argument);
}
