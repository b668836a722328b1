// tracetree OTLP: captured invocations exported as OpenTelemetry spans, over OTLP/HTTP with the JSON
// encoding. SPDX-License-Identifier: MIT
//
//   #include <tracetree/otel/otlp.hpp>
//   tracetree::OtlpOptions options;
//   options.endpoint = "http://127.0.0.1:4318/v1/traces";
//   options.resource = {{"service.name", "channel"}};
//   tracetree::OtlpExporter exporter(options);
//   tracetree::TraceSession slow(tracetree::TraceRequest("Http11Processor::service")
//                                    .min_cost(50ms).limit(1000000).on_trace(exporter.on_trace()));
//
// Optional, like otel/tracecontext.hpp: annotated files never include it. Nothing is sent when nothing is
// captured, and a capture only queues a copy of its Trace: a background thread builds the JSON and
// posts it, every `flush_interval` or on flush(), with a bounded queue, a timeout, and the OTLP
// retry rules (429, 502, 503, 504 and no answer are retried, with Retry-After or exponential backoff).
// The HTTP client is plain HTTP/1.1 on POSIX sockets (no TLS); one connection per request.
//
// The mapping (docs/otel.md): the invocation is a span of the trace it adopted (otel/tracecontext.hpp),
// each nested node a child span, a folded node (count > 1) one span with its count, min, max and
// total as attributes. A node's calls have no single start, so children are laid out one after
// another from their parent's start, each as long as its total: nesting and durations are exact, the
// positions within a parent are not; work a trace handed off to other threads (Node::parallel) starts
// at its parent's start, may outlast it, and says `tracetree.parallel`. Throw nodes become `exception` events, `throws` an error status,
// OutgoingCall's client spans children of the invocation.
//
// Reading order: options and statistics, the JSON, the exporter, the HTTP client; then `detail`.
#ifndef TRACETREE_OTEL_OTLP_HPP
#define TRACETREE_OTEL_OTLP_HPP

#include "../control.hpp"
#include "../sessions.hpp"      // FlightRecorder, Trace
#include "tracecontext.hpp"  // the ids and the annotation keys adopt() sets
#include "../views.hpp"         // detail::views::json_string: the library's one JSON string writer
#include "../text/text.hpp"      // lowercase, trim_ows
#include "../runtime/signal_mask.hpp"  // thread_without_signals: the sender

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>  // std::strerror
#include <ctime>    // timegm: Retry-After as an HTTP date
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>  // a forked child's exporters: their condition variables made anew
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>  // pthread_atfork: exporters in a forked child
#include <sys/socket.h>
#include <unistd.h>

TRACETREE_BEGIN_NAMESPACE

// ---- options and statistics ----------------------------------------------------------------------

struct OtlpOptions {
    std::string endpoint = "http://127.0.0.1:4318/v1/traces";  // plain http://host[:port][/path]
    // Resource attributes; service.name defaults to "unknown_service:<program>", and the
    // telemetry.sdk.* attributes name tracetree.
    std::vector<std::pair<std::string, std::string>> resource;
    std::chrono::milliseconds flush_interval{5000};  // what is queued is sent at least this often
    std::chrono::milliseconds timeout{10000};        // one request: connect, send, answer
    std::size_t max_queued_traces = 2048;  // past it new captures are dropped (counted in stats)
    std::size_t max_batch_traces = 256;    // invocations per request (and at most 8192 spans, one invocation at least)
    std::size_t max_spans_per_trace = 1000;  // nodes past it (breadth first) are counted, not sent
    int max_attempts = 5;                  // per request, the first one included
    std::chrono::milliseconds initial_backoff{500};  // doubled per retry, with jitter
    // The longest wait before a retry; a Retry-After asking for longer gives the request up rather
    // than hold every later one.
    std::chrono::milliseconds max_backoff{30000};
};

struct OtlpStats {
    std::uint64_t traces_exported = 0;  // in requests the receiver accepted
    std::uint64_t spans_exported = 0;
    std::uint64_t requests = 0;         // HTTP requests made, retries included
    std::uint64_t retries = 0;
    std::uint64_t traces_dropped = 0;   // not queued: the queue was full or the exporter stopping
    std::uint64_t batches_dropped = 0;  // requests given up: not retryable, attempts used up, Retry-After too long
    std::uint64_t traces_in_dropped_batches = 0;
    std::uint64_t spans_rejected = 0;   // a partial success: the receiver refused them
    std::size_t queued = 0;             // waiting now
    std::chrono::nanoseconds last_retry_delay{0};
    std::string last_error;             // the last failed request's reason
};

// ---- the JSON --------------------------------------------------------------------------------------

// An ExportTraceServiceRequest (OTLP/JSON) for the given invocations. Span ids of nested nodes are
// random; an invocation captured without an adopted context gets a trace id of its own.
std::string to_otlp_json(const std::vector<Trace>& traces, const OtlpOptions& options = {});

// ---- the exporter ------------------------------------------------------------------------------------

class OtlpExporter {
public:
    // std::invalid_argument naming the field for a bad endpoint (not http://, no host, bad port) or
    // a zero limit.
    explicit OtlpExporter(OtlpOptions options);
    // Sends what is queued, one attempt each within `timeout` in all, then stops.
    ~OtlpExporter();
    OtlpExporter(const OtlpExporter&) = delete;
    OtlpExporter& operator=(const OtlpExporter&) = delete;

    void add(Trace trace);  // from any thread; never waits for the network
    // For TraceRequest::on_trace: adds each capture. It keeps the queue alive, so a session that
    // outlives the exporter only drops what it captures afterwards.
    std::function<void(const Trace&)> on_trace();
    // Adds what `recorder` captured since the last drain of it by this exporter (known by address;
    // found again by start, thread and cost). Returns how many.
    std::size_t drain(const FlightRecorder& recorder);
    // Sends everything queued now; true when all of it was answered (sent or given up) in time.
    bool flush(std::chrono::milliseconds timeout);
    OtlpStats stats() const;

private:
    struct State;
    struct Mark {
        std::chrono::system_clock::time_point start;
        std::uint32_t thread_id = 0;
        Nanos cost{};
    };
    std::shared_ptr<State> state_;
};

// ---- the HTTP client: plain HTTP/1.1 POST, what the exporter uses (public for outgoing calls) -------------

struct HttpEndpoint {
    std::string host;  // a name or address; IPv6 without brackets
    std::string port = "80";
    std::string path = "/";
    std::string authority;  // the Host header: as written in the URL
};
// http://host[:port][/path]; nothing for anything else, with the reason in `why`.
std::optional<HttpEndpoint> parse_http_url(std::string_view url, std::string* why = nullptr);

struct HttpReply {
    int status = 0;           // 0: no answer (`error` says why)
    std::string error;
    std::string retry_after;  // the header, when the answer had one
    std::string body;         // at most 1 MiB of it
};
// One request on a new connection, all of it (connect, send, the whole answer) within `timeout`,
// reading at most 64 KiB of heads and 1 MiB of body whatever the peer sends (a longer body is cut, its
// status kept). Redirects are not followed. Headers with CR, LF or NUL are left out.
HttpReply http_post(const HttpEndpoint& endpoint, std::string_view content_type, std::string_view body,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    std::chrono::milliseconds timeout);

// =================================================================================================

namespace detail {
namespace otlp {

using Clock = std::chrono::steady_clock;
// What one answer may cost, whatever the peer sends: its heads (interim 1xx ones included), its body,
// and for a chunked body the framing around it.
inline constexpr std::size_t kMaxResponseHead = 64 * 1024;
inline constexpr std::size_t kMaxResponseBody = 1024 * 1024;
inline constexpr std::size_t kMaxChunkFraming = 64 * 1024;
inline constexpr std::size_t kMaxChunkLine = 1024;
// Spans per request: with names of a few hundred bytes, a few MiB of JSON, well under the 20 MiB
// the OTLP specification recommends receivers accept.
inline constexpr std::size_t kMaxBatchSpans = 8192;

// ---- JSON pieces ----

inline std::uint64_t unix_nanos(std::chrono::system_clock::time_point time) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
    return ns < 0 ? 0 : static_cast<std::uint64_t>(ns);
}

inline std::uint64_t nanos(Nanos d) { return d.count() < 0 ? 0 : static_cast<std::uint64_t>(d.count()); }

// 64-bit integers as decimal strings, as the proto3 JSON mapping says (receivers take numbers too).
inline void quoted_number(std::string& out, std::uint64_t value) { ((out += '"') += std::to_string(value)) += '"'; }

class Attributes {  // a JSON array of KeyValue
public:
    void string(std::string_view key, std::string_view value) {
        begin(key) += "\"stringValue\":";
        end(out_ += views::json_string(value));
    }
    void integer(std::string_view key, std::uint64_t value) {
        begin(key) += "\"intValue\":";
        quoted_number(out_, value);
        end(out_);
    }
    void boolean(std::string_view key, bool value) {
        begin(key) += "\"boolValue\":";
        end(out_ += value ? "true" : "false");
    }
    const std::string& json() { return out_.empty() ? out_ = "[]" : out_ += ']'; }

private:
    std::string& begin(std::string_view key) {
        out_ += out_.empty() ? '[' : ',';
        return ((out_ += "{\"key\":") += views::json_string(key)) += ",\"value\":{";
    }
    static void end(std::string& out) { out += "}}"; }
    std::string out_;
};

struct Event {
    std::uint64_t time = 0;
    std::string name;
    Attributes attributes;
};

struct SpanText {  // one span, in the field order of the OpenTelemetry JavaScript SDK
    TraceId trace_id;
    SpanId span_id, parent;
    std::string_view trace_state;
    std::string_view name;
    int kind = 1;  // 1 internal, 2 server, 3 client
    std::uint64_t start = 0, end = 0;
    Attributes attributes;
    std::vector<Event> events;
    int status = 0;  // 0 unset, 2 error
    std::string status_message;
    std::uint32_t flags = 0;

    void write(std::string& out) {
        ((out += "{\"traceId\":\"") += trace_id.hex()) += '"';
        ((out += ",\"spanId\":\"") += span_id.hex()) += '"';
        if (parent.valid()) ((out += ",\"parentSpanId\":\"") += parent.hex()) += '"';
        if (!trace_state.empty()) (out += ",\"traceState\":") += views::json_string(trace_state);
        (out += ",\"name\":") += views::json_string(name);
        (out += ",\"kind\":") += std::to_string(kind);
        out += ",\"startTimeUnixNano\":";
        quoted_number(out, start);
        out += ",\"endTimeUnixNano\":";
        quoted_number(out, end);
        ((out += ",\"attributes\":") += attributes.json()) += ",\"droppedAttributesCount\":0,\"events\":[";
        for (std::size_t i = 0; i < events.size(); ++i) {
            Event& event = events[i];
            ((out += i == 0 ? "{\"attributes\":" : ",{\"attributes\":") += event.attributes.json()) += ",\"name\":";
            (out += views::json_string(event.name)) += ",\"timeUnixNano\":";
            quoted_number(out, event.time);
            out += ",\"droppedAttributesCount\":0}";
        }
        (out += "],\"droppedEventsCount\":0,\"status\":{\"code\":") += std::to_string(status);
        if (!status_message.empty()) (out += ",\"message\":") += views::json_string(status_message);
        ((out += "},\"links\":[],\"droppedLinksCount\":0,\"flags\":") += std::to_string(flags)) += '}';
    }
};

// OTLP's span flags: the W3C trace flags, and whether the parent is known to be remote.
inline constexpr std::uint32_t kHasIsRemote = 0x100, kIsRemote = 0x200;

inline std::string_view field(const Trace& trace, std::string_view key) {
    for (const auto& f : trace.fields)
        if (f.first == key) return f.second;
    return {};
}

inline bool is_context_field(std::string_view key) {
    return key == fields::trace_id || key == fields::span_id || key == fields::parent_span_id ||
           key == fields::trace_flags || key == fields::tracestate || key == fields::client_spans;
}

inline std::string program_name() {
#if defined(__GLIBC__)
    return program_invocation_short_name;
#else
    return "";
#endif
}

inline void code_attributes(Attributes& attributes, const Node& node) {
    if (!node.file.empty()) attributes.string("code.file.path", node.file);
    if (node.line != 0) attributes.integer("code.line.number", node.line);
}

// The call nodes of a tree (throw nodes are no spans).
inline std::size_t count_call_nodes(const Node& root) {
    std::size_t count = 0;
    std::vector<const Node*> stack{&root};
    while (!stack.empty()) {
        const Node* node = stack.back();
        stack.pop_back();
        ++count;
        for (const Node& child : node->children)
            if (child.kind == NodeKind::call) stack.push_back(&child);
    }
    return count;
}

// Spans of one invocation, breadth first so that a cut keeps the upper levels. Returns how many.
inline std::size_t write_trace(std::string& out, bool& first, const Trace& trace, std::size_t max_spans) {
    const std::optional<TraceId> adopted = TraceId::from_hex(field(trace, fields::trace_id));
    const std::optional<SpanId> own = SpanId::from_hex(field(trace, fields::span_id));
    const std::optional<SpanId> remote = SpanId::from_hex(field(trace, fields::parent_span_id));
    std::uint8_t trace_flags = 0;
    if (!tracecontext::read_hex(field(trace, fields::trace_flags), &trace_flags, 1)) trace_flags = 0;
    const bool has_context = adopted && adopted->valid() && own && own->valid();
    const TraceId trace_id = has_context ? *adopted : TraceId::random();
    const std::string_view trace_state = has_context ? field(trace, fields::tracestate) : std::string_view();

    std::size_t written = 0;
    const auto emit = [&](SpanText& span) {
        ++written;
        span.trace_id = trace_id;
        span.trace_state = trace_state;
        if (!first) out += ',';
        first = false;
        span.write(out);
    };

    struct Pending {
        const Node* node;
        SpanId id, parent;
        std::uint64_t start, limit;  // limit: the parent's end, which a child never passes
    };
    const std::uint64_t start = unix_nanos(trace.start);
    std::vector<Pending> level{{&trace.root, has_context ? *own : SpanId::random(),
                                has_context && remote ? *remote : SpanId(), start, start + nanos(trace.root.total)}};
    // Spans not sent: every call node past the budget.
    const std::size_t call_nodes = count_call_nodes(trace.root);
    const std::vector<ClientSpan> clients = has_context ? parse_client_spans(field(trace, fields::client_spans))
                                                        : std::vector<ClientSpan>();
    const std::size_t budget = std::max<std::size_t>(max_spans, 1);
    std::size_t sent = 0;
    for (std::size_t depth = 0; !level.empty(); ++depth) {
        std::vector<Pending> next;
        for (const Pending& item : level) {
            if (sent == budget) break;
            ++sent;
            const Node& node = *item.node;
            SpanText span;
            span.span_id = item.id;
            span.parent = item.parent;
            span.name = node.name;
            span.start = item.start;
            span.end = std::min(item.start + nanos(node.total), item.limit);
            const bool root = depth == 0;
            span.kind = root && has_context ? 2 : 1;
            span.flags = trace_flags | kHasIsRemote | (root && span.parent.valid() ? kIsRemote : 0);
            code_attributes(span.attributes, node);
            if (node.count != 1) {
                span.attributes.integer("tracetree.count", node.count);
                span.attributes.integer("tracetree.min_ns", nanos(node.min));
                span.attributes.integer("tracetree.max_ns", nanos(node.max));
                span.attributes.integer("tracetree.total_ns", nanos(node.total));
            }
            if (node.dropped != 0) span.attributes.integer("tracetree.dropped_calls", node.dropped);
            if (node.parallel) span.attributes.boolean("tracetree.parallel", true);
            if (node.off_cpu) {  // the thread's time off CPU within this span (below the root: at least this)
                span.attributes.integer("tracetree.cpu.off_ns", nanos(node.off_cpu->off));
                span.attributes.integer("tracetree.cpu.on_ns", nanos(node.total - node.off_cpu->off));
                if (node.off_cpu->runnable) span.attributes.integer("tracetree.cpu.runnable_ns", nanos(*node.off_cpu->runnable));
                if (node.off_cpu->at_least) span.attributes.boolean("tracetree.cpu.off_at_least", true);
                if (node.mostly_off_cpu()) span.attributes.boolean("tracetree.cpu.mostly_off", true);
            }
            if (root) {
                span.attributes.string("thread.name", trace.thread_name);
                span.attributes.integer("thread.id", trace.thread_id);
                for (const auto& f : trace.fields)
                    if (!is_context_field(f.first)) span.attributes.string(f.first, f.second);
                if (call_nodes > budget) span.attributes.integer("tracetree.dropped_spans", call_nodes - budget);
            }
            if (node.throws != 0) {
                span.status = 2;
                span.status_message = node.count <= 1 ? "left by an exception"
                                                      : std::to_string(node.throws) + " of " + std::to_string(node.count) +
                                                            " calls left by an exception";
            }
            for (const auto& value : node.values) {
                Event event;
                event.time = span.start;
                event.name = "tracetree.watch";
                event.attributes.string("name", value.first);
                event.attributes.string("value", value.second);
                span.events.push_back(std::move(event));
            }
            std::uint64_t cursor = span.start;
            for (const Node& child : node.children) {
                if (child.kind == NodeKind::thrown) {
                    Event event;
                    event.time = cursor;
                    event.name = "exception";
                    event.attributes.string("exception.type", child.name);
                    if (child.message) event.attributes.string("exception.message", *child.message);
                    if (child.count != 1) event.attributes.integer("tracetree.count", child.count);
                    code_attributes(event.attributes, child);
                    span.events.push_back(std::move(event));
                    continue;
                }
                if (child.parallel) {  // ran on another thread meanwhile: from the parent's start, as long as it took
                    next.push_back(Pending{&child, SpanId::random(), span.span_id, span.start, ~std::uint64_t{0}});
                    continue;
                }
                next.push_back(Pending{&child, SpanId::random(), span.span_id, cursor, span.end});
                cursor = std::min(cursor + nanos(child.total), span.end);
            }
            emit(span);
            if (root) {
                for (const ClientSpan& client : clients) {
                    SpanText call;
                    call.span_id = client.span_id;
                    call.parent = span.span_id;
                    call.name = client.name;
                    call.kind = 3;
                    call.start = client.start_unix_ns;
                    call.end = client.start_unix_ns + client.duration_ns;
                    call.flags = trace_flags | kHasIsRemote;
                    call.status = client.error ? 2 : 0;
                    emit(call);
                }
            }
        }
        level = std::move(next);
        if (sent == budget) break;
    }
    return written;
}

// The spans write_trace makes of `trace`.
inline std::size_t span_count(const Trace& trace, std::size_t max_spans) {
    const std::size_t nodes = count_call_nodes(trace.root);
    const bool has_context = TraceId::from_hex(field(trace, fields::trace_id)).has_value();
    return std::min(nodes, std::max<std::size_t>(max_spans, 1)) +
           (has_context ? parse_client_spans(field(trace, fields::client_spans)).size() : 0);
}

// The whole request body; `spans` counts what it holds.
inline std::string request_json(const std::vector<Trace>& traces, const OtlpOptions& options, std::size_t& spans) {
    Attributes resource;
    bool named = false;
    for (const auto& attribute : options.resource) {
        resource.string(attribute.first, attribute.second);
        named = named || attribute.first == "service.name";
    }
    if (!named) {
        const std::string program = program_name();
        resource.string("service.name", program.empty() ? "unknown_service" : "unknown_service:" + program);
    }
    resource.string("telemetry.sdk.name", "tracetree");
    resource.string("telemetry.sdk.language", "cpp");
    const std::string version = TRACETREE_DETAIL_STRING(TRACETREE_VERSION_MAJOR) "." TRACETREE_DETAIL_STRING(
        TRACETREE_VERSION_MINOR) "." TRACETREE_DETAIL_STRING(TRACETREE_VERSION_PATCH);
    resource.string("telemetry.sdk.version", version);
    std::string out = "{\"resourceSpans\":[{\"resource\":{\"attributes\":";
    ((out += resource.json()) += ",\"droppedAttributesCount\":0},\"scopeSpans\":[{\"scope\":{\"name\":\"tracetree\",\"version\":\"")
        += version;
    out += "\"},\"spans\":[";
    bool first = true;
    spans = 0;
    for (const Trace& trace : traces) spans += write_trace(out, first, trace, options.max_spans_per_trace);
    out += "]}]}]}";
    return out;
}

// ---- HTTP ----

class Socket {
public:
    explicit Socket(int fd) : fd_(fd) {}
    ~Socket() {
        if (fd_ >= 0) ::close(fd_);
    }
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    int fd() const { return fd_; }

private:
    int fd_;
};

inline int remaining_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits for `events` on the socket; false on the deadline. Checked before polling: poll() with no
// time left still reports a ready socket, and a peer that is always ready must not outlast it.
inline bool wait_for(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        if (Clock::now() >= deadline) return false;
        pollfd p{fd, events, 0};
        const int ready = ::poll(&p, 1, remaining_ms(deadline));
        if (ready > 0) return true;
        if (ready == 0) return false;
        if (errno != EINTR) return false;
    }
}

inline int connect_to(const HttpEndpoint& endpoint, Clock::time_point deadline, std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const int status = ::getaddrinfo(endpoint.host.c_str(), endpoint.port.c_str(), &hints, &found);
    if (status != 0) {
        error = "cannot resolve " + endpoint.host + ": " + ::gai_strerror(status);
        return -1;
    }
    std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
    error = "cannot connect to " + endpoint.authority;
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
        if (errno == EINPROGRESS && wait_for(fd, POLLOUT, deadline)) {
            int code = 0;
            socklen_t length = sizeof code;
            if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length) == 0 && code == 0) return fd;
            error += std::string(": ") + std::strerror(code);
        } else {
            error += errno == EINPROGRESS ? ": timed out" : std::string(": ") + std::strerror(errno);
        }
        ::close(fd);
    }
    return -1;
}

inline bool send_all(int fd, std::string_view bytes, Clock::time_point deadline, std::string& error) {
    while (!bytes.empty()) {
        if (!wait_for(fd, POLLOUT, deadline)) {
            error = "timed out sending the request";
            return false;
        }
        const ssize_t sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (sent > 0) {
            bytes.remove_prefix(static_cast<std::size_t>(sent));
        } else if (sent < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) {
        } else {
            error = std::string("cannot send the request: ") + std::strerror(errno);
            return false;
        }
    }
    return true;
}

// Appends at most `limit` more bytes to `buffer`: >0 bytes read, 0 at the peer's close, -1 on error
// or the deadline (with `error` set). The deadline holds however fast the peer sends.
inline long receive(int fd, std::string& buffer, std::size_t limit, Clock::time_point deadline, std::string& error) {
    char chunk[16384];
    for (;;) {
        if (!wait_for(fd, POLLIN, deadline)) {
            error = "timed out waiting for the answer";
            return -1;
        }
        const ssize_t got = ::recv(fd, chunk, std::min(sizeof chunk, limit), 0);
        if (got >= 0) {
            buffer.append(chunk, static_cast<std::size_t>(got));
            return static_cast<long>(got);
        }
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            error = std::string("cannot read the answer: ") + std::strerror(errno);
            return -1;
        }
    }
}

inline std::optional<std::uint64_t> decimal(std::string_view text, int base = 10) {
    if (text.empty() || text.size() > 15) return std::nullopt;
    std::uint64_t value = 0;
    for (const char c : text) {
        int digit = -1;
        if (c >= '0' && c <= '9') digit = c - '0';
        else if (base == 16 && c >= 'a' && c <= 'f') digit = c - 'a' + 10;
        else if (base == 16 && c >= 'A' && c <= 'F') digit = c - 'A' + 10;
        if (digit < 0) return std::nullopt;
        value = value * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(digit);
    }
    return value;
}

struct Head {
    int status = 0;
    std::optional<std::uint64_t> content_length;
    bool chunked = false;
    std::string retry_after;
};

// The status line and headers (without the blank line); nothing when malformed.
inline std::optional<Head> parse_head(std::string_view text) {
    Head head;
    std::size_t end = text.find("\r\n");
    const std::string_view status_line = text.substr(0, end);
    if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ') return std::nullopt;
    const std::optional<std::uint64_t> status = decimal(status_line.substr(9, 3));
    if (!status || *status < 100 || *status > 599) return std::nullopt;
    head.status = static_cast<int>(*status);
    while (end != std::string_view::npos) {
        text.remove_prefix(end + 2);
        end = text.find("\r\n");
        const std::string_view line = text.substr(0, end);
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos) return std::nullopt;
        const std::string name = lowercase(line.substr(0, colon));
        const std::string_view value = trim_ows(line.substr(colon + 1));
        if (name == "content-length") {
            head.content_length = decimal(value);
            if (!head.content_length) return std::nullopt;
        } else if (name == "transfer-encoding") {
            head.chunked = lowercase(value).find("chunked") != std::string::npos;
        } else if (name == "retry-after") {
            head.retry_after = std::string(value);
        }
    }
    return head;
}

// A chunked body, decoded as it arrives: no byte is looked at twice, and only the line being read is
// kept. A size line longer than kMaxChunkLine (a number and extensions need a few dozen bytes) is
// malformed: it is how a peer that never ends the line is stopped before the deadline.
class Dechunker {
public:
    // Moves the complete lines and chunk bytes at the front of `raw` into `body` (past kMaxResponseBody
    // they are dropped); true once the last chunk is read. `bad` when malformed.
    bool feed(std::string& raw, std::string& body, bool& bad) {
        std::size_t at = 0;
        bool last = false;
        while (!last && !bad && at < raw.size()) {
            if (left_ > 0) {
                const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(left_, raw.size() - at));
                const std::size_t room = kMaxResponseBody - std::min(body.size(), kMaxResponseBody);
                body.append(raw, at, std::min(take, room));
                at += take;
                left_ -= take;
                after_data_ = left_ == 0;
                continue;
            }
            const std::size_t line_end = raw.find("\r\n", at);
            if (line_end == std::string::npos) {
                bad = raw.size() - at > kMaxChunkLine;
                break;
            }
            const std::string_view line(raw.data() + at, line_end - at);
            at = line_end + 2;
            if (after_data_) {  // the CRLF that ends a chunk's data
                bad = !line.empty();
                after_data_ = false;
                continue;
            }
            const std::optional<std::uint64_t> size = decimal(trim_ows(line.substr(0, line.find(';'))), 16);
            bad = !size || line.size() > kMaxChunkLine;
            if (size) left_ = *size;
            last = size && *size == 0;  // trailers are not needed
        }
        raw.erase(0, at);
        return last && !bad;
    }

private:
    std::uint64_t left_ = 0;  // bytes of the current chunk still to come
    bool after_data_ = false;
};

// Seconds to wait for a Retry-After value (delay-seconds or an IMF-fixdate); nothing when unreadable.
inline std::optional<std::chrono::milliseconds> retry_after_delay(std::string_view value,
                                                                   std::chrono::system_clock::time_point now) {
    value = trim_ows(value);
    if (const std::optional<std::uint64_t> seconds = decimal(value))
        return std::chrono::milliseconds(std::min<std::uint64_t>(*seconds, 1u << 30) * 1000);
    // "Sun, 06 Nov 1994 08:49:37 GMT"
    static const char* const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    if (value.size() != 29 || value[3] != ',' || value.substr(25) != " GMT") return std::nullopt;
    std::tm when{};
    const auto number = [&](std::size_t at, std::size_t size) { return decimal(value.substr(at, size)); };
    const auto day = number(5, 2), year = number(12, 4), hour = number(17, 2), minute = number(20, 2),
               second = number(23, 2);
    int month = -1;
    for (int i = 0; i < 12; ++i)
        if (value.substr(8, 3) == months[i]) month = i;
    if (!day || !year || !hour || !minute || !second || month < 0 || value[19] != ':' || value[22] != ':')
        return std::nullopt;
    when.tm_mday = static_cast<int>(*day);
    when.tm_mon = month;
    when.tm_year = static_cast<int>(*year) - 1900;
    when.tm_hour = static_cast<int>(*hour);
    when.tm_min = static_cast<int>(*minute);
    when.tm_sec = static_cast<int>(*second);
    const std::time_t at = ::timegm(&when);
    const auto target = std::chrono::system_clock::from_time_t(at);
    if (target <= now) return std::chrono::milliseconds(0);
    return std::chrono::duration_cast<std::chrono::milliseconds>(target - now);
}

inline bool clean_header_text(std::string_view text) {
    for (const char c : text)
        if (c == '\r' || c == '\n' || c == '\0') return false;
    return true;
}

// ---- the exporter's state, shared with on_trace() callbacks ----

inline std::uint64_t rejected_spans(std::string_view body) {
    const std::size_t key = body.find("\"rejectedSpans\"");
    if (key == std::string_view::npos) return 0;
    std::size_t at = body.find(':', key);
    if (at == std::string_view::npos) return 0;
    ++at;
    while (at < body.size() && (body[at] == ' ' || body[at] == '"')) ++at;
    std::size_t end = at;
    while (end < body.size() && body[end] >= '0' && body[end] <= '9') ++end;
    return decimal(body.substr(at, end - at)).value_or(0);
}

}  // namespace otlp
}  // namespace detail

// A forked child has only the thread that called fork(): every exporter's locks are taken around
// it, and in the child an exporter starts afresh with its options, without the parent's queue (the
// parent sends it) and with no sender until its first trace starts one of its own.
struct OtlpExporter::State : std::enable_shared_from_this<State> {
    State() {
        static const bool handlers = pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child) == 0;
        (void)handlers;
        std::lock_guard<std::mutex> lock(alive().mutex);
        alive().states.push_back(this);
    }
    ~State() {
        std::lock_guard<std::mutex> lock(alive().mutex);
        alive().states.erase(std::find(alive().states.begin(), alive().states.end(), this));
    }

    OtlpOptions options;
    HttpEndpoint endpoint;
    std::thread sender;
    bool sender_lost = false;  // in a forked child, until a trace starts a sender
    std::mutex drain_mutex;    // taken before `mutex`
    std::map<const FlightRecorder*, Mark> drained;
    mutable std::mutex mutex;
    std::condition_variable wake;     // the sender: work, a flush, a stop
    std::condition_variable settled;  // flush(): more was answered
    std::deque<Trace> queue;
    std::uint64_t accepted = 0;  // queued since the start
    std::uint64_t answered = 0;  // of those: sent or given up
    std::uint64_t flush_target = 0;
    bool stopping = false;
    // Set by the destructor: every request ends by then, the one in flight included (it started with
    // `timeout` before it), so destruction takes `timeout` at most.
    std::optional<detail::otlp::Clock::time_point> stop_deadline;
    OtlpStats stats;

    void add(Trace trace) {
        {
            std::lock_guard<std::mutex> lock(mutex);
            if (stopping || queue.size() >= options.max_queued_traces) {
                ++stats.traces_dropped;
                return;
            }
            queue.push_back(std::move(trace));
            ++accepted;
            if (sender_lost) start_sender();
            if (queue.size() < options.max_batch_traces) return;
        }
        wake.notify_one();
    }

    void start_sender() noexcept {  // the mutex is held, or no other thread has the state yet
        try {
            sender = detail::thread_without_signals([self = shared_from_this()] { self->run(); });
            sender_lost = false;
        } catch (...) {  // no thread left: what is queued waits for the next trace to try again
        }
    }

    struct Alive {
        std::mutex mutex;
        std::vector<State*> states;
    };
    static Alive& alive() {
        static Alive* const states = new Alive();  // never destroyed: a fork may come during exit
        return *states;
    }
    static void before_fork() noexcept {
        alive().mutex.lock();
        for (State* state : alive().states) {
            state->drain_mutex.lock();
            state->mutex.lock();
        }
    }
    static void after_fork_in_parent() noexcept {
        for (State* state : alive().states) {
            state->mutex.unlock();
            state->drain_mutex.unlock();
        }
        alive().mutex.unlock();
    }
    static void after_fork_in_child() noexcept {
        for (State* state : alive().states) {
            // The parent's sender is not in this process: forgotten, never joined or detached (its
            // memory is the C library's again). Nobody waits on the condition variables here: made
            // anew, not destroyed (that would wait for the parent's waiters).
            new (&state->sender) std::thread();
            state->sender_lost = !state->stopping;
            state->queue.clear();
            state->accepted = state->answered = state->flush_target = 0;
            state->stats = OtlpStats{};
            state->drained.clear();
            new (&state->wake) std::condition_variable();
            new (&state->settled) std::condition_variable();
            state->mutex.unlock();
            state->drain_mutex.unlock();
        }
        alive().mutex.unlock();
    }

    bool work_ready() const {
        return stopping || queue.size() >= options.max_batch_traces || (!queue.empty() && flush_target > answered);
    }

    // Posts one batch, retrying as OTLP says; returns the spans the receiver took.
    void send(const std::vector<Trace>& batch) {
        std::size_t spans = 0;
        const std::string body = detail::otlp::request_json(batch, options, spans);
        std::string reason;
        for (int attempt = 1;; ++attempt) {
            std::chrono::milliseconds timeout = options.timeout;
            {
                std::lock_guard<std::mutex> lock(mutex);
                if (stop_deadline) {
                    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*stop_deadline -
                                                                                            detail::otlp::Clock::now());
                    if (left.count() <= 0) return give_up(batch.size(), "stopped before it was sent");
                    timeout = std::min(timeout, left);
                }
            }
            const HttpReply reply = http_post(endpoint, "application/json", body, {}, timeout);
            std::unique_lock<std::mutex> lock(mutex);
            ++stats.requests;
            if (reply.status >= 200 && reply.status < 300) {
                stats.traces_exported += batch.size();
                stats.spans_exported += spans;
                stats.spans_rejected += detail::otlp::rejected_spans(reply.body);
                return;
            }
            const bool retryable = reply.status == 0 || reply.status == 429 || reply.status == 502 ||
                                   reply.status == 503 || reply.status == 504;
            reason = reply.status == 0 ? reply.error : "HTTP " + std::to_string(reply.status);
            std::optional<std::chrono::milliseconds> delay;
            if (!reply.retry_after.empty())
                delay = detail::otlp::retry_after_delay(reply.retry_after, std::chrono::system_clock::now());
            if (!retryable || attempt >= options.max_attempts || stopping) {
                if (retryable) reason += attempt >= options.max_attempts ? " (attempts used up)" : " (stopping)";
                return give_up(batch.size(), reason);
            }
            if (delay && *delay > options.max_backoff)
                return give_up(batch.size(), reason + ": Retry-After " + reply.retry_after + " exceeds max_backoff");
            if (!delay) delay = backoff(attempt);
            ++stats.retries;
            stats.last_retry_delay = *delay;
            stats.last_error = reason;
            const auto until = detail::otlp::Clock::now() + *delay;
            wake.wait_until(lock, until, [&] { return stopping; });
            if (stopping) return give_up(batch.size(), reason + " (stopping)");
        }
    }

    // Exponential, with jitter in [1/2, 1] so that many clients do not retry in step.
    std::chrono::milliseconds backoff(int attempt) const {
        double wait = static_cast<double>(options.initial_backoff.count());
        for (int i = 1; i < attempt && wait < static_cast<double>(options.max_backoff.count()); ++i) wait *= 2;
        wait = std::min(wait, static_cast<double>(options.max_backoff.count()));
        const double jitter = 0.5 + 0.5 * static_cast<double>(detail::tracecontext::random64() >> 11) / 9007199254740992.0;
        return std::chrono::milliseconds(static_cast<std::int64_t>(wait * jitter));
    }

    void give_up(std::size_t traces, const std::string& reason) {  // the mutex is held
        ++stats.batches_dropped;
        stats.traces_in_dropped_batches += traces;
        stats.last_error = reason;
    }

    void run() {
        std::unique_lock<std::mutex> lock(mutex);
        for (;;) {
            if (!work_ready()) wake.wait_for(lock, options.flush_interval, [&] { return work_ready(); });
            if (queue.empty()) {
                if (stopping) return;
                continue;
            }
            std::vector<Trace> batch;
            for (std::size_t spans = 0; !queue.empty() && batch.size() < options.max_batch_traces;) {
                spans += detail::otlp::span_count(queue.front(), options.max_spans_per_trace);
                if (!batch.empty() && spans > detail::otlp::kMaxBatchSpans) break;
                batch.push_back(std::move(queue.front()));
                queue.pop_front();
            }
            if (stop_deadline && detail::otlp::Clock::now() >= *stop_deadline) {
                give_up(batch.size(), "stopped before it was sent");
            } else {
                lock.unlock();
                try {
                    send(batch);
                } catch (...) {  // out of memory building the request: this batch is lost
                    std::lock_guard<std::mutex> relock(mutex);
                    give_up(batch.size(), "out of memory");
                }
                lock.lock();
            }
            answered += batch.size();
            settled.notify_all();
        }
    }
};


// ---- definitions ----------------------------------------------------------------------------------

inline std::string to_otlp_json(const std::vector<Trace>& traces, const OtlpOptions& options) {
    std::size_t spans = 0;
    return detail::otlp::request_json(traces, options, spans);
}

inline OtlpExporter::OtlpExporter(OtlpOptions options) : state_(std::make_shared<State>()) {
    std::string why;
    const std::optional<HttpEndpoint> endpoint = parse_http_url(options.endpoint, &why);
    if (!endpoint) throw std::invalid_argument("tracetree: OtlpOptions::endpoint: " + why);
    const auto positive = [](bool ok, const char* name) {
        if (!ok) throw std::invalid_argument(std::string("tracetree: OtlpOptions::") + name + " must be positive");
    };
    positive(options.flush_interval.count() > 0, "flush_interval");
    positive(options.timeout.count() > 0, "timeout");
    positive(options.max_queued_traces > 0, "max_queued_traces");
    positive(options.max_batch_traces > 0, "max_batch_traces");
    positive(options.max_spans_per_trace > 0, "max_spans_per_trace");
    positive(options.max_attempts > 0, "max_attempts");
    positive(options.initial_backoff.count() > 0, "initial_backoff");
    positive(options.max_backoff >= options.initial_backoff, "max_backoff - initial_backoff");
    state_->options = std::move(options);
    state_->endpoint = *endpoint;
    state_->sender = detail::thread_without_signals([state = state_] { state->run(); });
}

inline OtlpExporter::~OtlpExporter() {
    {
        std::lock_guard<std::mutex> lock(state_->mutex);
        state_->stopping = true;
        state_->stop_deadline = detail::otlp::Clock::now() + state_->options.timeout;
    }
    state_->wake.notify_all();
    if (state_->sender.joinable()) state_->sender.join();  // none in a forked child that queued nothing
}

inline void OtlpExporter::add(Trace trace) { state_->add(std::move(trace)); }

inline std::function<void(const Trace&)> OtlpExporter::on_trace() {
    return [state = state_](const Trace& trace) { state->add(trace); };
}

inline std::size_t OtlpExporter::drain(const FlightRecorder& recorder) {
    std::vector<Trace> recent = recorder.recent();
    std::lock_guard<std::mutex> lock(state_->drain_mutex);
    std::size_t first_new = 0;
    const auto seen = state_->drained.find(&recorder);
    if (seen != state_->drained.end()) {
        const Mark& mark = seen->second;
        for (std::size_t i = recent.size(); i-- > 0;) {
            if (recent[i].start == mark.start && recent[i].thread_id == mark.thread_id && recent[i].root.total == mark.cost) {
                first_new = i + 1;
                break;
            }
        }
    }
    if (recent.empty() || first_new == recent.size()) return 0;
    const Trace& newest = recent.back();
    state_->drained[&recorder] = Mark{newest.start, newest.thread_id, newest.root.total};
    for (std::size_t i = first_new; i < recent.size(); ++i) add(std::move(recent[i]));
    return recent.size() - first_new;
}

inline bool OtlpExporter::flush(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    if (state_->sender_lost && !state_->queue.empty()) state_->start_sender();
    const std::uint64_t target = state_->accepted;
    state_->flush_target = std::max(state_->flush_target, target);
    state_->wake.notify_all();
    return state_->settled.wait_for(lock, timeout, [&] { return state_->answered >= target; });
}

inline OtlpStats OtlpExporter::stats() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    OtlpStats stats = state_->stats;
    stats.queued = state_->queue.size();
    return stats;
}

inline std::optional<HttpEndpoint> parse_http_url(std::string_view url, std::string* why) {
    const auto fail = [&](std::string reason) -> std::optional<HttpEndpoint> {
        if (why != nullptr) *why = std::move(reason) + " in '" + std::string(url.substr(0, 200)) + "'";
        return std::nullopt;
    };
    for (const char c : url)
        if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7F) return fail("a space or control character");
    const std::string scheme = detail::lowercase(url.substr(0, url.find("://")));
    if (url.find("://") == std::string_view::npos) return fail("no http:// scheme");
    if (scheme == "https") return fail("https is not supported (plain HTTP only)");
    if (scheme != "http") return fail("not an http:// URL");
    std::string_view rest = url.substr(url.find("://") + 3);
    const std::size_t slash = rest.find_first_of("/?#");
    HttpEndpoint endpoint;
    const std::string_view authority = rest.substr(0, slash);
    if (slash != std::string_view::npos) {
        if (rest[slash] == '#') return fail("a fragment");
        endpoint.path = std::string(rest.substr(slash));
        if (endpoint.path[0] == '?') endpoint.path.insert(0, "/");
        if (endpoint.path.find('#') != std::string::npos) return fail("a fragment");
    }
    if (authority.find('@') != std::string_view::npos) return fail("user information");
    std::string_view host = authority, port;
    if (!authority.empty() && authority[0] == '[') {
        const std::size_t close = authority.find(']');
        if (close == std::string_view::npos) return fail("an unclosed [");
        host = authority.substr(1, close - 1);
        const std::string_view after = authority.substr(close + 1);
        if (!after.empty() && after[0] != ':') return fail("text after ]");
        if (!after.empty()) port = after.substr(1);
    } else if (const std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
        if (host.find(':') != std::string_view::npos) return fail("an IPv6 address without [ ]");
    }
    if (host.empty()) return fail("no host");
    if (authority.back() == ':' || (!port.empty() && (port.size() > 5 || !detail::otlp::decimal(port) ||
                                                      *detail::otlp::decimal(port) == 0 ||
                                                      *detail::otlp::decimal(port) > 65535)))
        return fail("a port that is not 1 to 65535");
    endpoint.host = std::string(host);
    if (!port.empty()) endpoint.port = std::string(port);
    endpoint.authority = std::string(authority);
    return endpoint;
}

inline HttpReply http_post(const HttpEndpoint& endpoint, std::string_view content_type, std::string_view body,
                           const std::vector<std::pair<std::string, std::string>>& headers,
                           std::chrono::milliseconds timeout) {
    using namespace detail::otlp;
    HttpReply reply;
    const Clock::time_point deadline = Clock::now() + timeout;
    const Socket socket(connect_to(endpoint, deadline, reply.error));
    if (socket.fd() < 0) return reply;
    reply.error.clear();
    std::string request = "POST " + endpoint.path + " HTTP/1.1\r\nHost: " + endpoint.authority +
                          "\r\nContent-Type: " + std::string(content_type) +
                          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n";
    for (const auto& header : headers)
        if (clean_header_text(header.first) && clean_header_text(header.second) && !header.first.empty())
            (((request += header.first) += ": ") += header.second) += "\r\n";
    request += "\r\n";
    if (!send_all(socket.fd(), request, deadline, reply.error) || !send_all(socket.fd(), body, deadline, reply.error))
        return reply;
    // The head: interim 1xx heads and the final one, kMaxResponseHead bytes in all.
    std::string buffer;
    std::optional<Head> head;
    std::size_t head_bytes = 0, scanned = 0;
    while (!head) {
        const std::size_t end = buffer.find("\r\n\r\n", scanned);
        if (end == std::string::npos) {
            scanned = buffer.size() < 3 ? 0 : buffer.size() - 3;
            if (head_bytes + buffer.size() >= kMaxResponseHead) {
                reply.error = "an answer head over 64 KiB";
                return reply;
            }
            const long got = receive(socket.fd(), buffer, kMaxResponseHead - head_bytes - buffer.size(), deadline, reply.error);
            if (got < 0) return reply;
            if (got == 0) {
                reply.error = "the connection closed before an answer";
                return reply;
            }
            continue;
        }
        head = parse_head(std::string_view(buffer).substr(0, end));
        if (!head) {
            reply.error = "a malformed answer";
            return reply;
        }
        head_bytes += end + 4;
        buffer.erase(0, end + 4);
        scanned = 0;
        if (head->status < 200) head.reset();  // 100 Continue and friends: the real answer follows
    }
    if (head->status == 204 || head->status == 304) head->content_length = 0;

    // The body: complete, or cut once kMaxResponseBody bytes (and the chunks' framing) are read; the
    // status stands either way, and the rest is never read.
    const std::size_t most = kMaxResponseBody + (head->chunked ? kMaxChunkFraming : 0);
    std::size_t read = buffer.size();
    Dechunker dechunker;
    for (;;) {
        bool complete = false, bad = false;
        if (head->chunked) {
            complete = dechunker.feed(buffer, reply.body, bad);
        } else {
            reply.body.append(buffer, 0, kMaxResponseBody - std::min(reply.body.size(), kMaxResponseBody));
            buffer.clear();
            complete = head->content_length && read >= *head->content_length;
        }
        if (bad) {
            reply.error = "a malformed chunked answer";
            return reply;
        }
        if (complete || read >= most) break;
        const long got = receive(socket.fd(), buffer, most - read, deadline, reply.error);
        if (got < 0) return reply;
        if (got == 0) break;  // closed: the end of a body without a length, or an answer cut short
        read += static_cast<std::size_t>(got);
    }
    if (head->content_length && reply.body.size() > *head->content_length)
        reply.body.resize(static_cast<std::size_t>(*head->content_length));
    reply.status = head->status;
    reply.retry_after = head->retry_after;
    return reply;
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_OTEL_OTLP_HPP
