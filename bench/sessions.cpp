// Watched scopes: the kernels of scopes.cpp run again, unchanged, while a session watches them. Each
// kernel starts its session, runs one warm-up call (the site is matched once per session), times the
// kernel, then checks through the session's own API that it saw every invocation it should have.
#include "kernels.hpp"

#include <tracetree/control.hpp>   // before sessions.hpp: included first, sessions.hpp does not compile today
#include <tracetree/sessions.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace bench {
namespace {

constexpr std::chrono::hours kNeverReached{1};  // a min_cost no invocation here reaches
constexpr std::size_t kKept = 16;                // what the flight recorders keep

// A trace of one 20-node invocation, each node called once.
bool twenty_nodes(const tracetree::Trace& trace) {
    const tracetree::Node& root = trace.root;
    return root.name == kInvocationName && root.count == 1 && root.children.size() == kInvocationNodes - 1 &&
           std::all_of(root.children.begin(), root.children.end(),
                       [](const tracetree::Node& child) { return child.name == kSiblingName && child.count == 1; });
}

std::uint64_t recorded(std::uint64_t n, std::uint64_t (*invocations)(std::uint64_t, Timer&), Timer& timer) {
    tracetree::FlightRecorder recorder(tracetree::RecorderRequest(kInvocationName).min_cost(tracetree::Nanos(0)).keep(kKept));
    Timer unused;
    invocations(1, unused);
    const std::uint64_t ops = invocations(n, timer);
    const std::vector<tracetree::Trace> kept = recorder.recent();
    check(recorder.recorded() == ops + 1 && recorder.evicted() == ops + 1 - kept.size() &&
              kept.size() == std::min<std::uint64_t>(kKept, ops + 1) && std::all_of(kept.begin(), kept.end(), twenty_nodes),
          "the flight recorder captured every invocation, each with its 20 nodes, and kept the newest 16");
    return ops;
}

}  // namespace

std::uint64_t kernel_watched(std::uint64_t n, Timer& timer) {
    tracetree::TraceSession trace(tracetree::TraceRequest(kEnabledName).min_cost(kNeverReached));
    Timer unused;
    kernel_enabled(1, unused);
    const std::uint64_t ops = kernel_enabled(n, timer);
    check(trace.captured() == 0, "a trace session delivers no invocation below its min_cost");
    return ops;
}

std::uint64_t kernel_nested_watched(std::uint64_t n, Timer& timer) {
    tracetree::TraceSession trace(tracetree::TraceRequest(kNestedOuterName).min_cost(kNeverReached));
    Timer unused;
    kernel_nested(kNestedPerInvocation, unused);
    const std::uint64_t ops = kernel_nested(n, timer);
    check(trace.captured() == 0, "a trace session delivers no invocation below its min_cost");
    return ops;
}

Allocations watched_allocations(std::uint64_t invocations) {
    tracetree::TraceSession trace(tracetree::TraceRequest(kEnabledName).min_cost(kNeverReached));
    Timer unused;
    kernel_enabled(16, unused);  // the first captures make their trees and buffers
    return count_allocations([&] { kernel_enabled(invocations, unused); });
}

std::uint64_t kernel_monitored(std::uint64_t n, Timer& timer) {
    tracetree::Monitor monitor(tracetree::MonitorRequest(kEnabledName).interval(std::chrono::milliseconds(1)));
    Timer unused;
    kernel_enabled(1, unused);
    const std::uint64_t ops = kernel_enabled(n, timer);
    const std::optional<tracetree::MonitorInterval> interval = monitor.next();  // counts since the monitor started
    check(interval && interval->rows.size() == 1 && interval->rows[0].name == kEnabledName &&
              interval->rows[0].calls == ops + 1,
          "the monitor counted every call");
    return ops;
}

std::uint64_t kernel_recorded(std::uint64_t n, Timer& timer) { return recorded(n, kernel_invocation, timer); }
std::uint64_t kernel_recorded_10us(std::uint64_t n, Timer& timer) { return recorded(n, kernel_invocation_10us, timer); }
std::uint64_t kernel_recorded_1ms(std::uint64_t n, Timer& timer) { return recorded(n, kernel_invocation_1ms, timer); }

std::uint64_t kernel_watch_session(std::uint64_t n, Timer& timer) {
    tracetree::WatchSession watch(tracetree::WatchRequest(kWatchSessionName).limit(n + 1));
    Timer unused;
    kernel_two_watches(1, unused);
    const std::uint64_t ops = kernel_two_watches(n, timer);
    const std::vector<tracetree::WatchEvent> events = watch.collect(std::chrono::seconds(0));
    bool exact = events.size() == ops + 1;
    for (std::size_t i = 0; exact && i < events.size(); ++i) {
        const std::string a = std::to_string(i == 0 ? 0 : i - 1);  // the warm-up call, then 0 .. ops-1
        exact = events[i].scope == kWatchSessionName && events[i].values.size() == 2 &&
                events[i].values[0] == std::make_pair(std::string("a"), a) &&
                events[i].values[1] == std::make_pair(std::string("b"), std::string("\"alice\""));
    }
    check(exact, "the watch session delivered every invocation with both values");
    return ops;
}

}  // namespace bench
