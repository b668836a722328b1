// What trace context and OTLP export cost (docs/otel.md): adopting a request's context, an outgoing
// call's headers, and exporting a captured invocation of 21 nodes, against the cost of running and
// capturing that invocation. Prints a Markdown table of medians.
//
//   build/bench/tracetree-otel-bench [--rounds N]
//
// Built with -Dbenchmarks=true and run by `meson test --benchmark`: a timing on a shared machine is a
// figure to read, not a pass/fail check.
#include <tracetree/control.hpp>
#include <tracetree/otel/otlp.hpp>
#include <tracetree/sessions.hpp>
#include <tracetree/otel/tracecontext.hpp>
#include <tracetree/tracetree.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// The median over `rounds` of the mean time of one call in a batch of `batch` calls; `between` runs
// before each round, untimed.
template <typename F, typename G = void (*)()>
double median_ns(int rounds, int batch, F&& call, G&& between = [] {}) {
    std::vector<double> times;
    for (int r = 0; r < rounds; ++r) {
        between();
        const auto start = Clock::now();
        for (int i = 0; i < batch; ++i) call();
        times.push_back(static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()) /
                        batch);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

volatile int sink = 0;

// An invocation of 21 call-tree nodes: 4 children with 4 children each, the leaves called 3 times
// (folded), 69 scopes in all.
template <int N>
void leaf() {
    TRACETREE_FUNCTION();
    sink = sink + N;
}
template <int N>
void branch() {
    TRACETREE_FUNCTION();
    for (int i = 0; i < 3; ++i) {
        leaf<N * 10 + 1>();
        leaf<N * 10 + 2>();
        leaf<N * 10 + 3>();
        leaf<N * 10 + 4>();
    }
}
void invocation() {
    TRACETREE_FUNCTION();
    branch<1>();
    branch<2>();
    branch<3>();
    branch<4>();
}

void row(const char* what, double ns) { std::printf("| %-62s | %10.0f |\n", what, ns); }

}  // namespace

int main(int argc, char** argv) {
    int rounds = 15;
    if (argc == 3 && std::strcmp(argv[1], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[2]));
    const std::vector<std::pair<std::string, std::string>> headers{
        {"Host", "127.0.0.1:7744"},
        {"User-Agent", "curl/7.88.1"},
        {"Accept", "*/*"},
        {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
        {"tracestate", "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
    };
    invocation();  // sites interned, the thread's tree made

    std::printf("| %-62s | %10s |\n|%s|%s|\n", "per request or invocation", "ns (median)",
                std::string(64, '-').c_str(), std::string(12, '-').c_str());
    row("parse_traceparent", median_ns(rounds, 100000, [&] {
            sink = sink + tracetree::parse_traceparent(headers[3].second)->flags;
        }));
    row("context_from_headers (5 headers, traceparent + tracestate)", median_ns(rounds, 100000, [&] {
            sink = sink + tracetree::context_from_headers(headers).flags;
        }));
    row("context_from_headers + adopt (the per-request cost)", median_ns(rounds, 100000, [&] {
            tracetree::adopt(tracetree::context_from_headers(headers));
        }));
    row("... + one OutgoingCall (its headers, its client span recorded)", median_ns(rounds, 100000, [&] {
            tracetree::adopt(tracetree::context_from_headers(headers));  // keeps the client spans bounded
            tracetree::OutgoingCall call("POST /pay");
            sink = sink + static_cast<int>(call.traceparent().size());
        }));

    // Batches of 200 here and below, so that the rows with and without export compare.
    const double plain = median_ns(rounds, 200, [] { invocation(); });
    row("the invocation (69 scopes, 21 nodes), no session", plain);
    std::vector<tracetree::Trace> captured;
    double capturing = 0;
    {
        tracetree::TraceSession session(tracetree::TraceRequest("invocation").limit(1000000).on_trace(
            [&](const tracetree::Trace& trace) {
                if (captured.empty()) captured.push_back(trace);
            }));
        capturing = median_ns(rounds, 200, [] { invocation(); });
    }
    row("the invocation captured by a TraceSession (on_trace: no-op)", capturing);
    const tracetree::Trace& trace = captured.at(0);

    row("a copy of the captured Trace, made and freed", median_ns(rounds, 2000, [&] {
            const tracetree::Trace copy = trace;
            sink = sink + static_cast<int>(copy.root.children.size());
        }));

    tracetree::OtlpOptions options;
    options.endpoint = "http://127.0.0.1:9/v1/traces";  // tried once, when the exporter goes
    options.flush_interval = std::chrono::hours(1);
    options.timeout = std::chrono::milliseconds(1000);
    options.max_attempts = 1;
    options.max_queued_traces = 1u << 20;
    options.max_batch_traces = 1u << 20;
    {
        tracetree::OtlpExporter exporter(options);
        const auto callback = exporter.on_trace();
        // Each round's captures are sent (to a closed port: given up at once) before the next round,
        // so that the queue's memory is reused as it is when the sender keeps up, not touched anew.
        const auto drain = [&] { exporter.flush(std::chrono::seconds(60)); };
        row("on_trace of an OtlpExporter: the capture queued (hot path)",
            median_ns(rounds, 200, [&] { callback(trace); }, drain));
        double with_export = 0;
        {
            tracetree::TraceSession session(tracetree::TraceRequest("invocation").limit(1000000).on_trace(callback));
            with_export = median_ns(rounds, 200, [] { invocation(); }, drain);
        }
        row("the invocation captured and queued for export", with_export);
    }  // the exporter's one attempt to send to port 9 fails at once: counted, nothing waits
    row("to_otlp_json of the captured invocation (background thread)", median_ns(rounds, 2000, [&] {
            sink = sink + static_cast<int>(tracetree::to_otlp_json({trace}).size());
        }));
    const std::string json = tracetree::to_otlp_json({trace});
    std::printf("\none invocation: %zu nodes, %zu bytes of OTLP/JSON\n", static_cast<std::size_t>(21), json.size());
    return 0;
}
