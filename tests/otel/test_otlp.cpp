// OTLP export (include/tracetree/otel/otlp.hpp): the span mapping against a golden file, and the exporter
// against a scripted receiver on the loopback (retries, Retry-After, timeouts, bounds). Golden files:
// tests/otel/golden/, rewritten with TRACETREE_UPDATE_GOLDEN=1 (review `git diff tests/otel/golden`).
#include <tracetree/control.hpp>
#include <tracetree/otel/otlp.hpp>
#include <tracetree/sessions.hpp>
#include <tracetree/tracetree.hpp>
#include <tracetree/views.hpp>

#include "loopback.hpp"
#include "samples.hpp"
#include "../fork_child.hpp"

#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifndef TRACETREE_OTEL_GOLDEN_DIR
#error "the build passes the golden directory"
#endif

namespace {

using namespace std::chrono_literals;
using Nanos = tracetree::Nanos;
using samples::kStart;
using samples::node;
using samples::slow_call;

// ---- golden files ----

std::string golden_path(const std::string& name) { return std::string(TRACETREE_OTEL_GOLDEN_DIR) + "/" + name; }

void compare_golden(const std::string& name, const std::string& actual) {
    if (std::getenv("TRACETREE_UPDATE_GOLDEN") != nullptr) {
        std::ofstream(golden_path(name), std::ios::binary) << actual;
        return;
    }
    std::ifstream in(golden_path(name), std::ios::binary);
    std::ostringstream expected;
    expected << in.rdbuf();
    INFO("golden file " << golden_path(name) << " (TRACETREE_UPDATE_GOLDEN=1 rewrites it)");
    CHECK(expected.str() == actual);
}

// Random ids become labels in order of first appearance, one span per line.
std::string normalize(const std::string& json) {
    std::map<std::string, std::string> labels;
    std::string out;
    const std::regex id("\"([0-9a-f]{32}|[0-9a-f]{16})\"");
    std::sregex_iterator it(json.begin(), json.end(), id), end;
    std::size_t last = 0;
    for (; it != end; ++it) {
        const std::string hex = (*it)[1];
        auto found = labels.find(hex);
        if (found == labels.end())
            found = labels.emplace(hex, (hex.size() == 32 ? "trace-" : "span-") + std::to_string(labels.size() + 1)).first;
        out += json.substr(last, static_cast<std::size_t>(it->position()) - last);
        out += "\"" + found->second + "\"";
        last = static_cast<std::size_t>(it->position() + it->length());
    }
    out += json.substr(last);
    return std::regex_replace(out, std::regex("\\},\\{\"traceId\""), "},\n{\"traceId\"") + "\n";
}

void check_json(const std::string& text) {
    tracetree::detail::views::JsonReader reader(text);
    CHECK_NOTHROW((reader.skip_value(), reader.finish()));
}

tracetree::OtlpOptions demo_options() {
    tracetree::OtlpOptions options;
    options.resource = {{"service.name", "demo"}};
    return options;
}

// ---- a scripted OTLP receiver on the loopback ----

struct Reply {
    int status = 200;
    std::string headers;  // extra header lines, each ending in \r\n
    std::string body = "{}";
    enum class Kind { answer, silent, close, garbage } kind = Kind::answer;
};

class Receiver {
public:
    Receiver() {
        fd_ = loopback::listen_on_any_port(port_);
        thread_ = std::thread([this] { run(); });
    }
    ~Receiver() {
        stop_ = true;
        thread_.join();
        for (const int fd : held_) ::close(fd);
        ::close(fd_);
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/traces"; }
    void script(std::vector<Reply> replies) {
        std::lock_guard<std::mutex> lock(mutex_);
        script_.assign(replies.begin(), replies.end());
    }
    bool wait_for(std::size_t requests, std::chrono::milliseconds timeout) {
        std::unique_lock<std::mutex> lock(mutex_);
        return changed_.wait_for(lock, timeout, [&] { return bodies_.size() >= requests; });
    }
    std::vector<std::string> bodies() {
        std::lock_guard<std::mutex> lock(mutex_);
        return bodies_;
    }
    std::string last_head() {
        std::lock_guard<std::mutex> lock(mutex_);
        return last_head_;
    }

private:
    void run() {
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 20) <= 0) continue;
            const int client = ::accept(fd_, nullptr, nullptr);
            if (client >= 0) serve(client);
        }
    }
    void serve(int client) {
        const std::string buffer = loopback::read_request(client, -1, 5000);
        const std::size_t head_end = buffer.find("\r\n\r\n");
        Reply reply;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!script_.empty()) {
                reply = script_.front();
                script_.pop_front();
            }
            if (head_end != std::string::npos) {
                last_head_ = buffer.substr(0, head_end);
                bodies_.push_back(buffer.substr(head_end + 4));
            }
        }
        changed_.notify_all();
        if (reply.kind == Reply::Kind::silent) {
            held_.push_back(client);  // answered never; closed when the receiver goes
            return;
        }
        std::string response;
        if (reply.kind == Reply::Kind::garbage) response = "HTTP/1.1 2OO OK\r\n\r\n";
        if (reply.kind == Reply::Kind::answer)
            response = "HTTP/1.1 " + std::to_string(reply.status) + " X\r\nContent-Type: application/json\r\n" +
                       reply.headers + "Content-Length: " + std::to_string(reply.body.size()) + "\r\n\r\n" + reply.body;
        if (!response.empty()) {
            const ssize_t sent = ::send(client, response.data(), response.size(), MSG_NOSIGNAL);
            static_cast<void>(sent);
        }
        ::close(client);
    }

    int fd_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<Reply> script_;
    std::vector<std::string> bodies_;
    std::string last_head_;
    std::vector<int> held_;
};

tracetree::OtlpOptions fast(const Receiver& receiver) {
    tracetree::OtlpOptions options;
    options.endpoint = receiver.url();
    options.resource = {{"service.name", "otel-tests"}};
    options.flush_interval = 1h;  // only flush() sends, unless a test wants the periodic one
    options.timeout = 2000ms;
    options.initial_backoff = 1ms;
    options.max_backoff = 50ms;
    return options;
}

Reply answer(int status, std::string headers = {}, std::string body = "{}") {
    Reply reply;
    reply.status = status;
    reply.headers = std::move(headers);
    reply.body = std::move(body);
    return reply;
}

Reply kind(Reply::Kind k) {
    Reply reply;
    reply.kind = k;
    return reply;
}

void scope_work() {
    TRACETREE_FUNCTION();
    for (int i = 0; i < 3; ++i) {
        TRACETREE_SCOPE("otlp-test inner");
    }
}

}  // namespace

TEST_CASE("OTLP/JSON: the slow call's spans, as the golden file shows") {
    const std::string json = tracetree::to_otlp_json({slow_call()}, demo_options());
    check_json(json);
    compare_golden("slow-call.json", normalize(json));
}

TEST_CASE("OTLP/JSON: ids, kinds, flags and the layout of folded children") {
    const std::string json = tracetree::to_otlp_json({slow_call()});
    // The invocation continues the caller's trace, as a server span with a remote parent.
    CHECK(json.find("\"traceId\":\"0af7651916cd43dd8448eb211c80319c\",\"spanId\":\"00f067aa0ba902b7\","
                    "\"parentSpanId\":\"b7ad6b7169203331\",\"traceState\":\"congo=t61rcWkgMzE\","
                    "\"name\":\"Http11Processor::service()\",\"kind\":2,"
                    "\"startTimeUnixNano\":\"1700000000000000000\",\"endTimeUnixNano\":\"1700000000250000000\"") !=
          std::string::npos);
    CHECK(json.find("\"flags\":769") != std::string::npos);  // sampled, parent remote
    // The client span is a child of the invocation, with its own times.
    CHECK(json.find("\"spanId\":\"1111111111111111\",\"parentSpanId\":\"00f067aa0ba902b7\",\"traceState\":"
                    "\"congo=t61rcWkgMzE\",\"name\":\"POST /pay\",\"kind\":3,\"startTimeUnixNano\":\"1700000000130000000\","
                    "\"endTimeUnixNano\":\"1700000000240000000\"") != std::string::npos);
    // Children one after another from the parent's start: createZipEntry 0..100 ms, the throw event
    // at 100 ms, ChannelClient::send 100..220 ms.
    CHECK(json.find("\"name\":\"TomcatJarInputStream::createZipEntry()\",\"kind\":1,\"startTimeUnixNano\":"
                    "\"1700000000000000000\",\"endTimeUnixNano\":\"1700000000100000000\"") != std::string::npos);
    CHECK(json.find("\"name\":\"ChannelClient::send()\",\"kind\":1,\"startTimeUnixNano\":\"1700000000100000000\","
                    "\"endTimeUnixNano\":\"1700000000220000000\"") != std::string::npos);
    CHECK(json.find("{\"key\":\"tracetree.count\",\"value\":{\"intValue\":\"31\"}}") != std::string::npos);
    CHECK(json.find("\"name\":\"exception\",\"timeUnixNano\":\"1700000000100000000\"") != std::string::npos);
    CHECK(json.find("\"status\":{\"code\":2,\"message\":\"left by an exception\"}") != std::string::npos);
    CHECK(json.find("{\"key\":\"uri\",\"value\":{\"stringValue\":\"/send\"}}") != std::string::npos);
    CHECK(json.find("\"key\":\"trace_id\"") == std::string::npos);  // context fields are not attributes

    // Children whose totals exceed the parent's (clocks) stay inside it.
    tracetree::Trace odd;
    odd.start = kStart;
    odd.root = node("outer", 1, 10ms, {node("a", 1, 8ms), node("b", 1, 8ms)});
    const std::string clamped = tracetree::to_otlp_json({odd});
    CHECK(clamped.find("\"name\":\"b\",\"kind\":1,\"startTimeUnixNano\":\"1700000000008000000\",\"endTimeUnixNano\":"
                       "\"1700000000010000000\"") != std::string::npos);
    // Without an adopted context: a trace of its own, an internal root span, no parent.
    const std::size_t outer = clamped.find("\"name\":\"outer\"");
    REQUIRE(outer != std::string::npos);
    CHECK(clamped.rfind("\"parentSpanId\"", outer) == std::string::npos);
    CHECK(clamped.find("\"name\":\"outer\",\"kind\":1") != std::string::npos);
    CHECK(clamped.find("\"flags\":256") != std::string::npos);
}

TEST_CASE("OTLP/JSON: hostile names stay valid JSON; deep and wide trees are bounded") {
    tracetree::Trace trace;
    trace.start = kStart;
    trace.fields = {{"weird \"key\"\n", std::string("\x01\xff\xfe value\\", 10)}};
    static const char name[] = "bad\xc3(utf8\"\\\n\t\x7f\0end";
    trace.root = node(std::string(name, sizeof name - 1), 1, 1ms);
    trace.root.file = "\xe2\x82";
    const std::string json = tracetree::to_otlp_json({trace});
    check_json(json);
    CHECK(json.find("\\u0000end") != std::string::npos);

    // 1500 levels (Node's own copy and destructor recurse, deeply under sanitizers: deeper would test
    // them, not the export): 1000 spans sent, the rest counted.
    tracetree::Trace deep;
    deep.start = kStart;
    deep.root = node("level", 1, 1s);
    tracetree::Node* at = &deep.root;
    for (int i = 0; i < 1500; ++i) {
        at->children.push_back(node("level", 1, 1s));
        at = &at->children.back();
    }
    std::vector<tracetree::Trace> deep_traces;
    deep_traces.push_back(std::move(deep));
    const std::string deep_json = tracetree::to_otlp_json(deep_traces);
    check_json(deep_json);
    std::size_t spans = 0;
    for (std::size_t at_span = deep_json.find("\"spanId\""); at_span != std::string::npos;
         at_span = deep_json.find("\"spanId\"", at_span + 1))
        ++spans;
    CHECK(spans == 1000);
    CHECK(deep_json.find("{\"key\":\"tracetree.dropped_spans\",\"value\":{\"intValue\":\"501\"}}") != std::string::npos);
    // Breadth first: a wide root keeps its first level.
    tracetree::OtlpOptions small;
    small.max_spans_per_trace = 3;
    tracetree::Trace wide;
    wide.start = kStart;
    wide.root = node("root", 1, 1s, {node("a", 1, 1ms, {node("a1", 1, 1ms)}), node("b", 1, 1ms), node("c", 1, 1ms)});
    const std::string wide_json = tracetree::to_otlp_json({wide}, small);
    CHECK(wide_json.find("\"name\":\"b\"") != std::string::npos);
    CHECK(wide_json.find("\"name\":\"c\"") == std::string::npos);
    CHECK(wide_json.find("\"name\":\"a1\"") == std::string::npos);
    CHECK(wide_json.find("\"tracetree.dropped_spans\",\"value\":{\"intValue\":\"2\"}") != std::string::npos);
}

TEST_CASE("parse_http_url: plain http only, with a clear reason") {
    const auto ok = tracetree::parse_http_url("http://127.0.0.1:4318/v1/traces");
    REQUIRE(ok);
    CHECK(ok->host == "127.0.0.1");
    CHECK(ok->port == "4318");
    CHECK(ok->path == "/v1/traces");
    CHECK(ok->authority == "127.0.0.1:4318");
    const auto v6 = tracetree::parse_http_url("HTTP://[::1]:9/x?y=1");
    REQUIRE(v6);
    CHECK(v6->host == "::1");
    CHECK(v6->path == "/x?y=1");
    CHECK(tracetree::parse_http_url("http://localhost")->port == "80");
    CHECK(tracetree::parse_http_url("http://localhost")->path == "/");
    for (const char* bad : {"https://collector:4318/v1/traces", "ftp://x/", "127.0.0.1:4318", "http://", "http://:80/",
                            "http://host:0/", "http://host:65536/", "http://host:12a/", "http://host:/", "http://u@host/",
                            "http://[::1/", "http://::1/", "http://host/a b", "http://host/\r\nX: y", "http://host/#frag"}) {
        CAPTURE(bad);
        std::string why;
        CHECK_FALSE(tracetree::parse_http_url(bad, &why));
        CHECK_FALSE(why.empty());
    }
    std::string why;
    tracetree::parse_http_url("https://x/", &why);
    CHECK(why.find("https is not supported") != std::string::npos);
    tracetree::OtlpOptions tls;
    tls.endpoint = "https://x/v1/traces";
    CHECK_THROWS_AS(tracetree::OtlpExporter{tls}, std::invalid_argument);
    tracetree::OtlpOptions zero;
    zero.max_queued_traces = 0;
    CHECK_THROWS_AS(tracetree::OtlpExporter{zero}, std::invalid_argument);
}

TEST_CASE("Retry-After: seconds and HTTP dates") {
    const auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
    using tracetree::detail::otlp::retry_after_delay;
    CHECK(retry_after_delay("120", now) == std::chrono::milliseconds(120000));
    CHECK(retry_after_delay(" 0 ", now) == std::chrono::milliseconds(0));
    CHECK(retry_after_delay("Sun, 06 Nov 1994 08:49:47 GMT", now) == std::chrono::milliseconds(10000));
    CHECK(retry_after_delay("Sun, 06 Nov 1994 08:49:00 GMT", now) == std::chrono::milliseconds(0));  // past
    for (const char* bad : {"", "-1", "1.5", "soon", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Xyz 1994 08:49:47 GMT"})
        CHECK_FALSE(retry_after_delay(bad, now));
}

TEST_CASE("exporter: a flush posts OTLP/JSON; stats count what was sent") {
    Receiver receiver;
    tracetree::OtlpExporter exporter(fast(receiver));
    exporter.add(slow_call());
    exporter.add(slow_call());
    CHECK(exporter.flush(5s));
    const auto bodies = receiver.bodies();
    REQUIRE(bodies.size() == 1);  // one batch
    check_json(bodies[0]);
    CHECK(bodies[0].find("\"service.name\",\"value\":{\"stringValue\":\"otel-tests\"}") != std::string::npos);
    CHECK(receiver.last_head().find("POST /v1/traces HTTP/1.1\r\n") == 0);
    CHECK(receiver.last_head().find("Content-Type: application/json\r\n") != std::string::npos);
    const tracetree::OtlpStats stats = exporter.stats();
    CHECK(stats.traces_exported == 2);
    CHECK(stats.spans_exported == 12);  // 5 nodes + 1 client span, twice
    CHECK(stats.requests == 1);
    CHECK(stats.retries == 0);
    CHECK(stats.queued == 0);
    CHECK(exporter.flush(1s));  // nothing queued: at once
    CHECK(receiver.bodies().size() == 1);
}

TEST_CASE("exporter: retryable answers are retried, with backoff or Retry-After; others are not") {
    Receiver receiver;
    tracetree::OtlpExporter exporter(fast(receiver));
    receiver.script({answer(503), answer(502), answer(504), answer(200)});
    exporter.add(slow_call());
    CHECK(exporter.flush(5s));
    auto stats = exporter.stats();
    CHECK(stats.requests == 4);
    CHECK(stats.retries == 3);
    CHECK(stats.traces_exported == 1);
    CHECK(stats.last_retry_delay <= 4ms);  // the backoff: 1, 2, 4 ms with jitter

    receiver.script({answer(429, "Retry-After: 0\r\n"), answer(200)});
    exporter.add(slow_call());
    CHECK(exporter.flush(5s));
    stats = exporter.stats();
    CHECK(stats.retries == 4);
    CHECK(stats.last_retry_delay == 0ms);  // Retry-After, not the backoff
    CHECK(stats.traces_exported == 2);

    // Retry-After longer than max_backoff: given up rather than hold every later batch.
    receiver.script({answer(503, "Retry-After: 3600\r\n")});
    exporter.add(slow_call());
    CHECK(exporter.flush(5s));
    stats = exporter.stats();
    CHECK(stats.batches_dropped == 1);
    CHECK(stats.last_error.find("Retry-After 3600 exceeds max_backoff") != std::string::npos);

    for (const int status : {400, 401, 404, 413, 500}) {
        receiver.script({answer(status)});
        const std::uint64_t before = exporter.stats().requests;
        exporter.add(slow_call());
        CHECK(exporter.flush(5s));
        CHECK(exporter.stats().requests == before + 1);  // never retried
    }
    stats = exporter.stats();
    CHECK(stats.batches_dropped == 6);
    CHECK(stats.traces_in_dropped_batches == 6);
    CHECK(stats.last_error == "HTTP 500");
    CHECK(stats.traces_exported == 2);

    // A partial success is not retried; the rejected spans are counted.
    receiver.script({answer(200, {}, R"({"partialSuccess":{"rejectedSpans":"4","errorMessage":"too old"}})")});
    exporter.add(slow_call());
    CHECK(exporter.flush(5s));
    CHECK(exporter.stats().spans_rejected == 4);
}

TEST_CASE("exporter: no answer is retried until the attempts are used up") {
    Receiver receiver;
    tracetree::OtlpOptions options = fast(receiver);
    options.timeout = 300ms;
    options.max_attempts = 3;
    tracetree::OtlpExporter exporter(options);
    // Closed without an answer, a malformed answer, then a receiver that never answers (timeout).
    receiver.script({kind(Reply::Kind::close), kind(Reply::Kind::garbage), kind(Reply::Kind::silent)});
    exporter.add(slow_call());
    CHECK(exporter.flush(10s));
    const tracetree::OtlpStats stats = exporter.stats();
    CHECK(stats.requests == 3);
    CHECK(stats.retries == 2);
    CHECK(stats.batches_dropped == 1);
    CHECK(stats.last_error.find("timed out waiting for the answer") != std::string::npos);
    CHECK(stats.last_error.find("attempts used up") != std::string::npos);
}

TEST_CASE("exporter: a receiver that is not there") {
    int port = 0;
    {
        Receiver gone;  // a port that was just free
        port = std::stoi(gone.url().substr(17));
    }
    tracetree::OtlpOptions options;
    options.endpoint = "http://127.0.0.1:" + std::to_string(port) + "/v1/traces";
    options.initial_backoff = 1ms;
    options.max_backoff = 5ms;
    options.max_attempts = 2;
    tracetree::OtlpExporter exporter(options);
    exporter.add(slow_call());
    CHECK(exporter.flush(10s));
    const tracetree::OtlpStats stats = exporter.stats();
    CHECK(stats.requests == 2);
    CHECK(stats.batches_dropped == 1);
    CHECK(stats.last_error.find("cannot connect to 127.0.0.1:") == 0);
}

TEST_CASE("exporter: the queue is bounded, batches are bounded, the periodic flush sends") {
    Receiver receiver;
    tracetree::OtlpOptions options = fast(receiver);
    options.max_queued_traces = 4;
    options.max_batch_traces = 1000;
    receiver.script({kind(Reply::Kind::silent)});  // holds the sender on the first batch
    options.timeout = 500ms;
    options.max_attempts = 1;
    {
        tracetree::OtlpExporter exporter(options);
        for (int i = 0; i < 10; ++i) exporter.add(slow_call());
        const tracetree::OtlpStats stats = exporter.stats();
        CHECK(stats.traces_dropped == 6);
        CHECK(stats.queued == 4);
        CHECK(exporter.flush(5s));
    }
    Receiver second;
    tracetree::OtlpOptions batched = fast(second);
    batched.max_batch_traces = 2;
    {
        tracetree::OtlpExporter exporter(batched);
        for (int i = 0; i < 5; ++i) exporter.add(slow_call());
        CHECK(exporter.flush(5s));
        CHECK(second.bodies().size() == 3);  // 2 + 2 + 1
        CHECK(exporter.stats().traces_exported == 5);
    }
    // And at most 8192 spans per request: three invocations of 5000 nodes go in three requests.
    Receiver big;
    tracetree::OtlpOptions spans = fast(big);
    spans.max_spans_per_trace = 5000;
    {
        tracetree::Trace wide;
        wide.start = kStart;
        wide.root = node("root", 1, 1s);
        for (int i = 0; i < 4999; ++i) wide.root.children.push_back(node("child " + std::to_string(i), 1, 1us));
        tracetree::OtlpExporter exporter(spans);
        for (int i = 0; i < 3; ++i) exporter.add(wide);
        CHECK(exporter.flush(30s));
        CHECK(big.bodies().size() == 3);
        CHECK(exporter.stats().spans_exported == 15000);
    }
    Receiver third;
    tracetree::OtlpOptions periodic = fast(third);
    periodic.flush_interval = 20ms;
    tracetree::OtlpExporter exporter(periodic);
    exporter.add(slow_call());
    CHECK(third.wait_for(1, 10s));  // no flush(): the interval sends it
}

TEST_CASE("exporter: what is queued is sent when it is destroyed; a session outliving it drops") {
    Receiver receiver;
    std::function<void(const tracetree::Trace&)> callback;
    {
        tracetree::OtlpExporter exporter(fast(receiver));
        callback = exporter.on_trace();
        callback(slow_call());
    }
    REQUIRE(receiver.bodies().size() == 1);
    callback(slow_call());  // the exporter is gone: dropped, no crash
}

TEST_CASE("exporter: live captures through on_trace and a drained flight recorder") {
    tracetree::clear_annotations();
    Receiver receiver;
    tracetree::OtlpExporter exporter(fast(receiver));
    {
        tracetree::TraceSession session(tracetree::TraceRequest("scope_work").limit(2).on_trace(exporter.on_trace()));
        tracetree::adopt(tracetree::context_from_headers(std::vector<std::pair<std::string, std::string>>{
            {"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}));
        scope_work();
        scope_work();
        tracetree::leave_context();
    }
    tracetree::FlightRecorder recorder(tracetree::RecorderRequest("scope_work"));
    scope_work();
    CHECK(exporter.drain(recorder) == 1);
    CHECK(exporter.drain(recorder) == 0);  // already sent
    scope_work();
    scope_work();
    CHECK(exporter.drain(recorder) == 2);
    CHECK(exporter.flush(5s));
    const tracetree::OtlpStats stats = exporter.stats();
    CHECK(stats.traces_exported == 5);
    CHECK(stats.spans_exported == 10);  // scope_work and its folded inner scope
    std::string all;
    for (const std::string& body : receiver.bodies()) all += body;
    CHECK(all.find("\"traceId\":\"0af7651916cd43dd8448eb211c80319c\"") != std::string::npos);
    CHECK(all.find("\"parentSpanId\":\"b7ad6b7169203331\"") != std::string::npos);
    CHECK(all.find("{\"key\":\"tracetree.count\",\"value\":{\"intValue\":\"3\"}}") != std::string::npos);
}

TEST_CASE("exporter: a forked child exports its own traces and its exporter ends, whatever the sender was doing" *
          doctest::skip(fork_child::kWithThreadsUnsafe)) {
    // Issue 42: a fork while the sender held the exporter's lock, or a child's destructor joining a
    // sender that only the parent has, hung the child. A child's exporter starts afresh: the parent's
    // queue stays the parent's, and the child's first trace starts a sender of its own.
    Receiver receiver;
    tracetree::OtlpOptions options = fast(receiver);
    options.max_batch_traces = 1;  // the sender wakes for every trace: it often holds the lock
    options.max_queued_traces = 16;
    std::optional<tracetree::OtlpExporter> exporter(std::in_place, options);
    std::atomic<bool> stop{false};
    std::thread adding([&] {
        while (!stop.load()) exporter->add(slow_call());
    });
    int failures = 0, deadlocks = 0;
    for (int i = 0; i < 50 && deadlocks == 0; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            int code = 0;
            // Half the children export; the others only end their exporter (all of them under TSan).
            if (i % 2 == 0 && fork_child::kThreadsInChild) {
                exporter->add(slow_call());
                if (!exporter->flush(10s)) code = 2;
                else if (exporter->stats().traces_exported != 1) code = 3;  // the child's own trace alone
            }
            exporter.reset();
            _exit(code);
        }
        const int code = fork_child::exit_status(pid);
        if (code == 128 + SIGALRM) ++deadlocks;
        else if (code != 0) {
            ++failures;
            MESSAGE("child " << i << " exited with " << code);
        }
    }
    stop = true;
    adding.join();
    CHECK(failures == 0);
    CHECK(deadlocks == 0);
    CHECK(exporter->flush(10s));  // the parent's exporter works on
}

