// The invocation both the golden file and the OpenTelemetry SDK comparison (reference.js) map: the
// demo's slow call, with a folded node, a throw node, a call left by an exception and a client span.
#ifndef TRACETREE_TESTS_OTEL_SAMPLES_HPP
#define TRACETREE_TESTS_OTEL_SAMPLES_HPP

#include <tracetree/values.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace samples {

using namespace std::chrono_literals;
using Nanos = tracetree::Nanos;

inline tracetree::Node node(std::string name, std::uint64_t count, Nanos total, std::vector<tracetree::Node> children = {}) {
    tracetree::Node n;
    n.name = std::move(name);
    n.file = "app.cpp";
    n.line = 42;
    n.count = count;
    n.total = total;
    n.min = count != 0 ? total / static_cast<std::int64_t>(count) : Nanos(0);
    n.max = n.min;
    n.children = std::move(children);
    return n;
}

inline const std::chrono::system_clock::time_point kStart{std::chrono::seconds(1700000000)};

inline tracetree::Trace slow_call() {
    tracetree::Node folded = node("TomcatJarInputStream::createZipEntry()", 31, 100ms);
    folded.min = 1ms;
    folded.max = 10ms;
    tracetree::Node thrown = node("std::runtime_error", 2, 0ms);
    thrown.kind = tracetree::NodeKind::thrown;
    thrown.message = "bad \"entry\"";
    tracetree::Node channel = node("ChannelClient::send()", 1, 120ms);
    channel.throws = 1;
    tracetree::Trace trace;
    trace.start = kStart;
    trace.thread_name = "http-nio-7744-exec-1";
    trace.thread_id = 7;
    trace.fields = {{"uri", "/send"},
                    {"trace_id", "0af7651916cd43dd8448eb211c80319c"},
                    {"span_id", "00f067aa0ba902b7"},
                    {"parent_span_id", "b7ad6b7169203331"},
                    {"trace_flags", "01"},
                    {"tracestate", "congo=t61rcWkgMzE"},
                    {"client_spans", "1111111111111111 1700000000130000000 110000000 0 POST /pay"}};
    trace.root = node("Http11Processor::service()", 1, 250ms,
                      {node("CoyoteAdapter::service()", 1, 240ms, {folded, thrown, channel}),
                       node("Http11OutputBuffer::commit", 1, 5ms)});
    return trace;
}

}  // namespace samples

#endif  // TRACETREE_TESTS_OTEL_SAMPLES_HPP
