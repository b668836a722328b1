// tracetree trace context: W3C Trace Context (traceparent, tracestate) in and out. SPDX-License-Identifier: MIT
//
//   #include <tracetree/otel/tracecontext.hpp>
//   // a server, for each request, before the work it traces:
//   tracetree::adopt(tracetree::context_from_headers(request.headers));
//   // a client, around each outgoing call made while serving it:
//   tracetree::OutgoingCall call("POST /pay");
//   send(request.with_header("traceparent", call.traceparent()));  // and tracestate() when not empty
//
// Optional: annotated files never include it. adopt() puts the context in the thread's annotations
// (control.hpp's annotate: trace_id, span_id, parent_span_id, trace_flags, tracestate), so every Trace,
// StackTrace and WatchEvent captured on the thread until the next adopt() carries it, and otel/otlp.hpp
// exports the invocation as a span of the caller's trace. Invalid headers are never an error: they
// are ignored as the specification says, and a new trace starts.
//
// Reading order: ids, the two headers, the context a server adopts, the call a client makes.
// Specification: W3C Trace Context Level 1 (https://www.w3.org/TR/trace-context/) with its current key
// grammar; docs/otel.md.
#ifndef TRACETREE_OTEL_TRACECONTEXT_HPP
#define TRACETREE_OTEL_TRACECONTEXT_HPP

#include "../control.hpp"  // annotate()
#include "../text/text.hpp"  // trim_ows

#include <algorithm>  // std::find: a repeated tracestate key
#include <array>
#include <chrono>     // client spans' start and end
#include <cstdint>
#include <exception>  // std::uncaught_exceptions: a call left by an exception
#include <optional>
#include <random>     // std::random_device seeds each thread's id generator
#include <string>
#include <string_view>
#include <thread>     // the thread id mixed into the seed
#include <utility>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

// ---- ids ------------------------------------------------------------------------------------------

template <std::size_t Size>
struct Id {  // bytes in the order the header prints them; all zero is the spec's invalid id
    std::array<std::uint8_t, Size> bytes{};

    bool valid() const noexcept;
    std::string hex() const;  // lowercase, 2 * Size characters
    static std::optional<Id> from_hex(std::string_view text) noexcept;  // exactly 2 * Size lowercase hex digits
    static Id random();  // never all zero
    friend bool operator==(const Id& a, const Id& b) noexcept { return a.bytes == b.bytes; }
    friend bool operator!=(const Id& a, const Id& b) noexcept { return a.bytes != b.bytes; }
};
using TraceId = Id<16>;
using SpanId = Id<8>;

inline constexpr std::uint8_t kSampledFlag = 0x01;  // the one trace flag of version 00

// ---- the headers ---------------------------------------------------------------------------------

struct TraceParent {
    TraceId trace_id;
    SpanId parent_id;        // the caller's span
    std::uint8_t flags = 0;  // as sent; only kSampledFlag has a meaning

    // Version 00 (the highest this implementation knows), flags other than `sampled` cleared.
    std::string to_string() const;
};

// One traceparent value, spaces and tabs around it ignored. Nothing when the spec says to ignore it:
// a version that is not two lowercase hex digits or is ff, version 00 not exactly 55 characters, a
// field of the wrong length or not lowercase hex, an all-zero id; a higher version is read as the
// spec says (its first four fields, then the end or a '-').
std::optional<TraceParent> parse_traceparent(std::string_view value) noexcept;

// The list as it will be passed on: members in order, optional whitespace and empty members dropped,
// joined by ','; a key given again is dropped (the first stays). Nothing when the header is invalid
// (the spec: discard it whole): a key or value outside the grammar, more than 32 members. Longer than
// 512 characters, it is cut by whole members as the spec says: those over 128 characters first, then
// from the end.
std::optional<std::string> parse_tracestate(std::string_view combined);

inline constexpr std::size_t kMaxTracestateLength = 512;

// ---- a server: the context of the invocation it is about to run ------------------------------------

struct TraceContext {
    TraceId trace_id;
    SpanId span_id;         // this invocation's span: new for each request
    SpanId parent_span_id;  // the caller's span; invalid (all zero) when the trace starts here
    std::uint8_t flags = 0;
    std::string tracestate;  // the caller's, validated; passed on unchanged

    bool has_parent() const noexcept { return parent_span_id.valid(); }
    bool sampled() const noexcept { return (flags & kSampledFlag) != 0; }
};

// A new trace: random ids, no parent. `sampled` off by default, as the spec advises a component
// that decides late what it records (tracetree exports only what its sessions capture).
TraceContext new_trace(bool sampled = false);

// Collects the trace-context headers of one request: give it every header (names in any case), then
// take the context. A missing, repeated or invalid traceparent starts a new trace (and drops
// tracestate); several tracestate headers are joined in order.
class ContextHeaders {
public:
    void add(std::string_view name, std::string_view value);
    TraceContext context(bool sample_new_trace = false) const;

private:
    std::string traceparent_;
    std::string tracestate_;
    int traceparents_ = 0;
    bool has_tracestate_ = false;
    bool tracestate_overflow_ = false;
};

// The same for any range of (name, value) pairs: a std::vector<std::pair<std::string, std::string>>,
// a map, ...
template <class Headers>
TraceContext context_from_headers(const Headers& headers, bool sample_new_trace = false) {
    ContextHeaders collected;
    for (const auto& header : headers) collected.add(header.first, header.second);
    return collected.context(sample_new_trace);
}

// The annotation keys adopt() sets on the thread (otel/otlp.hpp reads them back from Trace::fields).
namespace fields {
inline constexpr std::string_view trace_id = "trace_id";
inline constexpr std::string_view span_id = "span_id";
inline constexpr std::string_view parent_span_id = "parent_span_id";  // only with a parent
inline constexpr std::string_view trace_flags = "trace_flags";        // "01": sampled
inline constexpr std::string_view tracestate = "tracestate";          // only when not empty
inline constexpr std::string_view client_spans = "client_spans";      // OutgoingCall: see below
}  // namespace fields

// Makes `context` the calling thread's until the next adopt() or leave_context(): like annotate(),
// it outlives the request, so adopt one per request (a request without headers adopts a new trace).
// Traces captured on the thread carry its ids, and OutgoingCall passes it on.
void adopt(const TraceContext& context);
const TraceContext* current_context() noexcept;  // the thread's, or null
void leave_context();  // removes it and its annotations

// ---- a client: one outgoing call ----------------------------------------------------------------

// A child span of the thread's current context (a new trace when there is none): the headers to send,
// with a new span id as the parent-id. While the context is adopted, the call's end is recorded in
// the `client_spans` annotation (at most kMaxClientSpans per adopted context), and otel/otlp.hpp exports
// it as a client span under the invocation; left by an exception, or fail()ed, it has an error status.
class OutgoingCall {
public:
    explicit OutgoingCall(std::string_view name = "outgoing call");  // the client span's name
    ~OutgoingCall();
    OutgoingCall(const OutgoingCall&) = delete;
    OutgoingCall& operator=(const OutgoingCall&) = delete;

    const std::string& traceparent() const noexcept { return traceparent_; }
    const std::string& tracestate() const noexcept { return tracestate_; }  // empty: send none
    // Both headers, names in lowercase, tracestate only when not empty.
    std::vector<std::pair<std::string, std::string>> headers() const;
    const SpanId& span_id() const noexcept { return span_id_; }
    const TraceId& trace_id() const noexcept { return trace_id_; }
    void fail() noexcept { failed_ = true; }  // an error answer: the client span's status is an error

private:
    std::string name_;
    std::string traceparent_;
    std::string tracestate_;
    TraceId trace_id_;
    SpanId span_id_;
    SpanId parent_;  // the invocation's span, when a context was adopted
    std::chrono::system_clock::time_point start_;
    int uncaught_ = 0;
    bool failed_ = false;
};

inline constexpr std::size_t kMaxClientSpans = 8;
inline constexpr std::size_t kMaxClientSpanName = 64;

// A client span as the annotation keeps it: entries joined by ',', each
// "<span id> <start, Unix ns> <duration ns> <0|1: error> <name>" (the name without ',' or control
// characters, at most kMaxClientSpanName bytes).
struct ClientSpan {
    SpanId span_id;
    std::uint64_t start_unix_ns = 0;
    std::uint64_t duration_ns = 0;
    bool error = false;
    std::string name;
};
std::vector<ClientSpan> parse_client_spans(std::string_view annotation);  // malformed entries are skipped

// =================================================================================================

namespace detail {
namespace tracecontext {

inline constexpr char kHex[] = "0123456789abcdef";

inline int lower_hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

inline bool read_hex(std::string_view text, std::uint8_t* out, std::size_t bytes) noexcept {
    if (text.size() != 2 * bytes) return false;
    for (std::size_t i = 0; i < bytes; ++i) {
        const int high = lower_hex_value(text[2 * i]), low = lower_hex_value(text[2 * i + 1]);
        if (high < 0 || low < 0) return false;
        out[i] = static_cast<std::uint8_t>(high << 4 | low);
    }
    return true;
}

inline void write_hex(std::string& out, const std::uint8_t* bytes, std::size_t size) {
    for (std::size_t i = 0; i < size; ++i) {
        out += kHex[bytes[i] >> 4];
        out += kHex[bytes[i] & 15];
    }
}

// Ids need to be unique, not secret: xoshiro256** per thread, seeded once from std::random_device,
// the clock and the thread's id (so a random_device that repeats itself still differs per thread).
class IdGenerator {
public:
    IdGenerator() {
        std::uint64_t seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        seed ^= std::hash<std::thread::id>()(std::this_thread::get_id()) * 0x9E3779B97F4A7C15u;
        try {
            std::random_device device;
            seed ^= (static_cast<std::uint64_t>(device()) << 32) ^ device();
        } catch (...) {  // no entropy source: the clock and the thread id still differ
        }
        for (std::uint64_t& word : state_) word = splitmix(seed);
    }
    std::uint64_t next() noexcept {
        const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
        const std::uint64_t t = state_[1] << 17;
        state_[2] ^= state_[0];
        state_[3] ^= state_[1];
        state_[1] ^= state_[2];
        state_[0] ^= state_[3];
        state_[2] ^= t;
        state_[3] = rotl(state_[3], 45);
        return result;
    }

private:
    static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
    static std::uint64_t splitmix(std::uint64_t& x) noexcept {
        std::uint64_t z = (x += 0x9E3779B97F4A7C15u);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        return z ^ (z >> 31);
    }
    std::uint64_t state_[4];
};

inline std::uint64_t random64() {
    thread_local IdGenerator generator;
    return generator.next();
}

inline bool equals_lowercase(std::string_view text, std::string_view lower) noexcept {
    if (text.size() != lower.size()) return false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i] >= 'A' && text[i] <= 'Z' ? static_cast<char>(text[i] - 'A' + 'a') : text[i];
        if (c != lower[i]) return false;
    }
    return true;
}

inline bool is_lcalpha(char c) noexcept { return c >= 'a' && c <= 'z'; }
inline bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }
inline bool is_key_char(char c) noexcept {
    return is_lcalpha(c) || is_digit(c) || c == '_' || c == '-' || c == '*' || c == '/' || c == '@';
}

// key = (lcalpha / DIGIT) 0*255(keychar), keychar taking '@' too: the grammar since 2020, which
// replaced Level 1's simple-key / tenant@system (and with it the 241 + 14 character split).
inline bool valid_key(std::string_view key) noexcept {
    if (key.empty() || key.size() > 256 || !(is_lcalpha(key[0]) || is_digit(key[0]))) return false;
    for (const char c : key.substr(1))
        if (!is_key_char(c)) return false;
    return true;
}

// value = 0*255(chr) nblk-chr; chr = %x20 / nblk-chr; nblk-chr = %x21-2B / %x2D-3C / %x3E-7E.
inline bool valid_value(std::string_view value) noexcept {
    if (value.empty() || value.size() > 256 || value.back() == ' ') return false;
    for (const char c : value)
        if (c < 0x20 || c > 0x7E || c == ',' || c == '=') return false;
    return true;
}

struct ContextSlot {  // the thread's adopted context
    TraceContext context;
    bool active = false;
    bool annotated_parent = false, annotated_tracestate = false;
    std::string client_spans;  // the annotation's value
    std::size_t client_span_count = 0;
};

inline ContextSlot& context_slot() {
    thread_local ContextSlot slot;
    return slot;
}

inline std::string flags_hex(std::uint8_t flags) {
    std::string out;
    write_hex(out, &flags, 1);
    return out;
}

}  // namespace tracecontext
}  // namespace detail

// ---- definitions ----------------------------------------------------------------------------------

template <std::size_t Size>
bool Id<Size>::valid() const noexcept {
    for (const std::uint8_t byte : bytes)
        if (byte != 0) return true;
    return false;
}

template <std::size_t Size>
std::string Id<Size>::hex() const {
    std::string out;
    out.reserve(2 * Size);
    detail::tracecontext::write_hex(out, bytes.data(), Size);
    return out;
}

template <std::size_t Size>
std::optional<Id<Size>> Id<Size>::from_hex(std::string_view text) noexcept {
    Id id;
    if (!detail::tracecontext::read_hex(text, id.bytes.data(), Size)) return std::nullopt;
    return id;
}

template <std::size_t Size>
Id<Size> Id<Size>::random() {
    Id id;
    do {
        for (std::size_t i = 0; i < Size; i += 8) {
            std::uint64_t word = detail::tracecontext::random64();
            for (std::size_t j = 0; j < 8 && i + j < Size; ++j, word >>= 8) id.bytes[i + j] = static_cast<std::uint8_t>(word);
        }
    } while (!id.valid());
    return id;
}

inline std::string TraceParent::to_string() const {
    std::string out = "00-";
    out.reserve(55);
    detail::tracecontext::write_hex(out, trace_id.bytes.data(), 16);
    out += '-';
    detail::tracecontext::write_hex(out, parent_id.bytes.data(), 8);
    out += '-';
    out += detail::tracecontext::flags_hex(static_cast<std::uint8_t>(flags & kSampledFlag));
    return out;
}

inline std::optional<TraceParent> parse_traceparent(std::string_view value) noexcept {
    using namespace detail::tracecontext;
    value = detail::trim_ows(value);
    std::uint8_t version = 0;
    if (value.size() < 3 || !read_hex(value.substr(0, 2), &version, 1) || value[2] != '-' || version == 0xFF)
        return std::nullopt;
    // Version 00 is exactly 55 characters; a later version may append fields after a '-'.
    if (version == 0 ? value.size() != 55 : value.size() < 55 || (value.size() > 55 && value[55] != '-'))
        return std::nullopt;
    TraceParent parsed;
    if (!read_hex(value.substr(3, 32), parsed.trace_id.bytes.data(), 16) || value[35] != '-' ||
        !read_hex(value.substr(36, 16), parsed.parent_id.bytes.data(), 8) || value[52] != '-' ||
        !read_hex(value.substr(53, 2), &parsed.flags, 1))
        return std::nullopt;
    if (!parsed.trace_id.valid() || !parsed.parent_id.valid()) return std::nullopt;
    return parsed;
}

inline std::optional<std::string> parse_tracestate(std::string_view combined) {
    using namespace detail::tracecontext;
    std::vector<std::string_view> members, keys;
    std::size_t received = 0;
    while (true) {
        const std::size_t comma = combined.find(',');
        const std::string_view member = detail::trim_ows(combined.substr(0, comma));
        if (!member.empty()) {
            const std::size_t eq = member.find('=');
            if (eq == std::string_view::npos) return std::nullopt;
            const std::string_view key = member.substr(0, eq);
            if (!valid_key(key) || !valid_value(member.substr(eq + 1))) return std::nullopt;
            if (++received > 32) return std::nullopt;
            // The spec lets a repeated key be passed on or dropped, not the list: the first one stays.
            if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
                keys.push_back(key);
                members.push_back(member);
            }
        }
        if (comma == std::string_view::npos) break;
        combined.remove_prefix(comma + 1);
    }
    const auto joined_length = [&] {
        std::size_t length = members.empty() ? 0 : members.size() - 1;
        for (const std::string_view member : members) length += member.size();
        return length;
    };
    for (std::size_t i = members.size(); i-- > 0 && joined_length() > kMaxTracestateLength;)
        if (members[i].size() > 128) members.erase(members.begin() + static_cast<std::ptrdiff_t>(i));
    while (joined_length() > kMaxTracestateLength) members.pop_back();
    std::string out;
    for (const std::string_view member : members) {
        if (!out.empty()) out += ',';
        out.append(member.data(), member.size());
    }
    return out;
}

inline TraceContext new_trace(bool sampled) {
    TraceContext context;
    context.trace_id = TraceId::random();
    context.span_id = SpanId::random();
    context.flags = sampled ? kSampledFlag : 0;
    return context;
}

inline void ContextHeaders::add(std::string_view name, std::string_view value) {
    using detail::tracecontext::equals_lowercase;
    if (equals_lowercase(name, "traceparent")) {
        if (traceparents_++ == 0) traceparent_.assign(value.data(), value.size());
    } else if (equals_lowercase(name, "tracestate")) {
        // RFC 7230 3.2.2: several fields are one list, in order. Past 64 KiB (a valid list is at most
        // about 16 KiB, or padded with whitespace) the list is discarded, rather than kept growing.
        if (tracestate_.size() + value.size() > 64 * 1024) {
            tracestate_overflow_ = true;
            tracestate_.clear();
            return;
        }
        if (tracestate_overflow_) return;
        if (has_tracestate_) tracestate_ += ',';
        tracestate_.append(value.data(), value.size());
        has_tracestate_ = true;
    }
}

inline TraceContext ContextHeaders::context(bool sample_new_trace) const {
    const std::optional<TraceParent> parent = traceparents_ == 1 ? parse_traceparent(traceparent_) : std::nullopt;
    if (!parent) return new_trace(sample_new_trace);
    TraceContext context;
    context.trace_id = parent->trace_id;
    context.parent_span_id = parent->parent_id;
    context.span_id = SpanId::random();
    context.flags = parent->flags & kSampledFlag;
    if (has_tracestate_ && !tracestate_overflow_) context.tracestate = parse_tracestate(tracestate_).value_or(std::string());
    return context;
}

inline void adopt(const TraceContext& context) {
    detail::tracecontext::ContextSlot& slot = detail::tracecontext::context_slot();
    slot.context = context;
    slot.active = true;
    annotate(fields::trace_id, context.trace_id.hex());
    annotate(fields::span_id, context.span_id.hex());
    annotate(fields::trace_flags, detail::tracecontext::flags_hex(context.flags));
    // Removing a key that is not there still costs a lookup: only what the last context set.
    if (context.has_parent() || slot.annotated_parent)
        annotate(fields::parent_span_id, context.has_parent() ? context.parent_span_id.hex() : std::string());
    if (!context.tracestate.empty() || slot.annotated_tracestate) annotate(fields::tracestate, context.tracestate);
    if (slot.client_span_count != 0) annotate(fields::client_spans, "");
    slot.annotated_parent = context.has_parent();
    slot.annotated_tracestate = !context.tracestate.empty();
    slot.client_spans.clear();
    slot.client_span_count = 0;
}

inline const TraceContext* current_context() noexcept {
    const detail::tracecontext::ContextSlot& slot = detail::tracecontext::context_slot();
    return slot.active ? &slot.context : nullptr;
}

inline void leave_context() {
    detail::tracecontext::ContextSlot& slot = detail::tracecontext::context_slot();
    if (!slot.active) return;
    for (const std::string_view key : {fields::trace_id, fields::span_id, fields::trace_flags, fields::parent_span_id,
                                       fields::tracestate, fields::client_spans})
        annotate(key, "");
    slot = detail::tracecontext::ContextSlot{};
}

inline OutgoingCall::OutgoingCall(std::string_view name)
    : name_(name.substr(0, kMaxClientSpanName)),
      start_(std::chrono::system_clock::now()),
      uncaught_(std::uncaught_exceptions()) {
    for (char& c : name_)
        if (c == ',' || static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
    span_id_ = SpanId::random();
    TraceParent header;
    header.parent_id = span_id_;
    if (const TraceContext* context = current_context()) {
        trace_id_ = context->trace_id;
        parent_ = context->span_id;
        header.flags = context->flags;
        tracestate_ = context->tracestate;
    } else {
        trace_id_ = TraceId::random();
    }
    header.trace_id = trace_id_;
    traceparent_ = header.to_string();
}

inline OutgoingCall::~OutgoingCall() {
    detail::tracecontext::ContextSlot& slot = detail::tracecontext::context_slot();
    // Only into the context it was made in: not after the thread adopted the next request's.
    if (!parent_.valid() || !slot.active || slot.context.span_id != parent_ || slot.client_span_count >= kMaxClientSpans)
        return;
    try {
        const auto now = std::chrono::system_clock::now();
        const auto since_epoch = [](std::chrono::system_clock::time_point t) {
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
            return static_cast<std::uint64_t>(ns < 0 ? 0 : ns);
        };
        const std::uint64_t start = since_epoch(start_), end = since_epoch(now);
        const bool error = failed_ || std::uncaught_exceptions() > uncaught_;
        std::string& spans = slot.client_spans;
        if (!spans.empty()) spans += ',';
        spans += span_id_.hex();
        ((spans += ' ') += std::to_string(start)) += ' ';
        ((spans += std::to_string(end > start ? end - start : 0)) += error ? " 1 " : " 0 ") += name_;
        ++slot.client_span_count;
        annotate(fields::client_spans, spans);
    } catch (...) {  // out of memory: the call goes unrecorded, the program goes on
    }
}

inline std::vector<std::pair<std::string, std::string>> OutgoingCall::headers() const {
    std::vector<std::pair<std::string, std::string>> out{{"traceparent", traceparent_}};
    if (!tracestate_.empty()) out.emplace_back("tracestate", tracestate_);
    return out;
}

inline std::vector<ClientSpan> parse_client_spans(std::string_view annotation) {
    std::vector<ClientSpan> spans;
    const auto number = [](std::string_view text, std::uint64_t& out) {
        if (text.empty() || text.size() > 20) return false;
        std::uint64_t value = 0;
        for (const char c : text) {
            if (c < '0' || c > '9') return false;
            const std::uint64_t next = value * 10 + static_cast<std::uint64_t>(c - '0');
            if (next / 10 != value) return false;  // overflow
            value = next;
        }
        out = value;
        return true;
    };
    while (!annotation.empty()) {
        const std::size_t comma = annotation.find(',');
        std::string_view entry = annotation.substr(0, comma);
        annotation.remove_prefix(comma == std::string_view::npos ? annotation.size() : comma + 1);
        ClientSpan span;
        std::string_view parts[4];
        bool complete = true;
        for (std::string_view& part : parts) {
            const std::size_t space = entry.find(' ');
            if (space == std::string_view::npos) {
                complete = false;
                break;
            }
            part = entry.substr(0, space);
            entry.remove_prefix(space + 1);
        }
        const std::optional<SpanId> id = complete ? SpanId::from_hex(parts[0]) : std::nullopt;
        if (!id || !id->valid() || !number(parts[1], span.start_unix_ns) || !number(parts[2], span.duration_ns) ||
            (parts[3] != "0" && parts[3] != "1"))
            continue;
        span.span_id = *id;
        span.error = parts[3] == "1";
        span.name = std::string(entry);
        spans.push_back(std::move(span));
    }
    return spans;
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_OTEL_TRACECONTEXT_HPP
