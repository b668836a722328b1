// tracetree sessions: Arthas's `trace`, `stack`, `watch` and `monitor`, and a flight recorder.
// SPDX-License-Identifier: MIT
//
//   #include <tracetree/sessions.hpp>
//   tracetree::TraceSession trace(tracetree::TraceRequest("Http11Processor::service").min_cost(10ms));
//   std::optional<tracetree::Trace> slow = trace.next(30s);          // render it with render.hpp
//   tracetree::StackSession who(tracetree::StackRequest("DispatcherServlet::doDispatch"));
//   tracetree::WatchSession what(tracetree::WatchRequest("createZipEntry").limit(5));
//   tracetree::Monitor per_second(tracetree::MonitorRequest("*Processor::service").interval(1s));
//   tracetree::FlightRecorder slow_calls(tracetree::RecorderRequest("service").min_cost(50ms));
//
// Each session picks scopes by a pattern (matcher.hpp: a glob, or a regex; the whole scope name or
// the whole of what follows a `::` in it), starts watching when it is made, stops when it is
// destroyed, and costs nothing to scopes it does not watch. Sessions change only what is delivered:
// the profile counts every call either way. At most 32 sessions of all kinds run at once.
// Reading order: the request every kind shares, then trace, stack, watch, monitor, the recorder.
#ifndef TRACETREE_SESSIONS_HPP
#define TRACETREE_SESSIONS_HPP

#include "runtime/linkage.hpp"  // first: the platform check, and where this file's runtime is
#include "matcher.hpp"
#include "tracetree.hpp"  // the scope macros, as control.hpp gives them
#include "values.hpp"

#include <chrono>
#include <cstdint>
#include <functional>  // TraceRequest::on_trace
#include <memory>      // sessions are shared with the recording threads
#include <optional>
#include <string>
#include <utility>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

namespace detail { struct SessionState; }

// Which scopes, and which of their invocations. Named setters, so a call reads without positional
// arguments: TraceRequest("Mapper::*").min_cost(5ms).limit(10).
template <class Self>
class Request {
public:
    explicit Request(std::string pattern) : pattern_(std::move(pattern)) {}

    Self& regex(bool on = true) { syntax_ = on ? PatternSyntax::regex : PatternSyntax::glob; return self(); }
    Self& min_cost(Nanos cost) { min_cost_ = cost; return self(); }  // only invocations costing at least this
    Self& limit(std::uint64_t count) { limit_ = count; return self(); }  // then stop; 1 ..= 1000000, 0: until stopped

    const std::string& pattern() const { return pattern_; }
    PatternSyntax syntax() const { return syntax_; }
    Nanos min_cost() const { return min_cost_; }
    std::uint64_t limit() const { return limit_; }

private:
    Self& self() { return static_cast<Self&>(*this); }
    std::string pattern_;
    PatternSyntax syntax_ = PatternSyntax::glob;
    Nanos min_cost_{0};
    std::uint64_t limit_ = 1;
};

// A session's queue and its end, shared by the kinds that deliver one value per invocation.
template <class Value>
class Session {
public:
    Session(Session&&) noexcept = default;
    Session& operator=(Session&& other) noexcept;  // stops the session it held
    ~Session();

    std::optional<Value> next(Nanos timeout);   // the next queued value, or nothing on timeout
    std::vector<Value> collect(Nanos timeout);  // waits for `limit` values or the timeout; takes the queue
    std::uint64_t captured() const;             // delivered so far
    bool done() const;                          // limit reached or stopped
    void stop();                                // wakes a waiting next() or collect()

protected:
    Session() = default;
    std::shared_ptr<detail::SessionState> state_;
};

// ---- trace (Arthas `trace pattern '#cost > N' -n K`) ----------------------------------------------

class TraceRequest : public Request<TraceRequest> {
public:
    using Request::Request;
    // Called on the recording thread for each capture, instead of queueing it for next()/collect().
    TraceRequest& on_trace(std::function<void(const Trace&)> callback) { on_trace_ = std::move(callback); return *this; }
    // Keep TRACETREE_WATCH values in the captured nodes (Node::values): Arthas has no such option.
    TraceRequest& with_values(bool on = true) { with_values_ = on; return *this; }
    // XRay (xray/xray.hpp): the functions patched below a matching one, in direct calls (0 ..= 64).
    TraceRequest& depth(int calls) { depth_ = calls; return *this; }
    const std::function<void(const Trace&)>& on_trace() const { return on_trace_; }
    bool with_values() const { return with_values_; }
    int depth() const { return depth_; }

private:
    std::function<void(const Trace&)> on_trace_;
    bool with_values_ = false;
    int depth_ = detail::kDefaultCallDepth;
};

// The outermost invocation of a matching scope, recorded into a tree of its own: an invocation of a
// matching scope nested in a captured one is part of that capture (as in Arthas).
class TraceSession : public Session<Trace> {
public:
    explicit TraceSession(const TraceRequest& request);  // std::invalid_argument (PatternError) on bad input
};

// ---- stack (Arthas `stack`): who called it -----------------------------------------------------------

class StackRequest : public Request<StackRequest> {
public:
    using Request::Request;
};
class StackSession : public Session<StackTrace> {
public:
    explicit StackSession(const StackRequest& request);
};

// ---- watch (Arthas `watch`): the values an invocation saw -------------------------------------------

class WatchRequest : public Request<WatchRequest> {
public:
    using Request::Request;
    WatchRequest& values(std::vector<std::string> names) { names_ = std::move(names); return *this; }  // default: all
    const std::vector<std::string>& values() const { return names_; }

private:
    std::vector<std::string> names_;
};
class WatchSession : public Session<WatchEvent> {
public:
    explicit WatchSession(const WatchRequest& request);
};

// ---- monitor (Arthas `monitor -c N`): calls per interval ----------------------------------------------

class MonitorRequest {
public:
    explicit MonitorRequest(std::string pattern) : pattern_(std::move(pattern)) {}
    MonitorRequest& regex(bool on = true) { syntax_ = on ? PatternSyntax::regex : PatternSyntax::glob; return *this; }
    MonitorRequest& interval(Nanos length) { interval_ = length; return *this; }  // 1 ms ..= 1 day
    const std::string& pattern() const { return pattern_; }
    PatternSyntax syntax() const { return syntax_; }
    Nanos interval() const { return interval_; }

private:
    std::string pattern_;
    PatternSyntax syntax_ = PatternSyntax::glob;
    Nanos interval_ = std::chrono::seconds(1);
};

class Monitor {
public:
    explicit Monitor(const MonitorRequest& request);
    Monitor(Monitor&&) noexcept = default;
    Monitor& operator=(Monitor&& other) noexcept;
    ~Monitor();
    // Waits for the current interval to end and returns it (the next one starts at once). Once stopped:
    // the interval stop() cut short, if a call ended in it (its `end` says when), then nothing.
    std::optional<MonitorInterval> next();
    void stop();  // wakes a waiting next()

private:
    std::shared_ptr<detail::SessionState> state_;
};

// ---- flight recorder (Arthas `tt`, for slow calls): the last slow invocations, kept ---------------------

class RecorderRequest : public Request<RecorderRequest> {
public:
    using Request::Request;
    RecorderRequest& keep(std::size_t count) { keep_ = count; return *this; }  // the newest ones, 1 ..= 100000
    RecorderRequest& max_bytes(std::size_t bytes) { max_bytes_ = bytes; return *this; }  // of traces kept, >= 4096
    RecorderRequest& depth(int calls) { depth_ = calls; return *this; }  // as TraceRequest::depth
    std::size_t keep() const { return keep_; }
    std::size_t max_bytes() const { return max_bytes_; }
    int depth() const { return depth_; }

private:
    int depth_ = detail::kDefaultCallDepth;
    std::size_t keep_ = 16;
    std::size_t max_bytes_ = std::size_t{4} << 20;
};

// Captures every invocation of a matching scope costing at least min_cost (limit is ignored), keeping
// the newest `keep` of them within `max_bytes`; the oldest go first.
class FlightRecorder {
public:
    explicit FlightRecorder(const RecorderRequest& request);
    FlightRecorder(FlightRecorder&&) noexcept = default;
    FlightRecorder& operator=(FlightRecorder&& other) noexcept;
    ~FlightRecorder();
    std::vector<Trace> recent() const;  // oldest first; they stay kept
    std::uint64_t recorded() const;     // invocations captured since the start
    std::uint64_t evicted() const;      // of those, no longer kept
    void stop();

private:
    std::shared_ptr<detail::SessionState> state_;
};

TRACETREE_END_NAMESPACE

#if TRACETREE_DETAIL_RUNTIME_HERE
#include "runtime/sessions-inl.hpp"
#endif

#endif  // TRACETREE_SESSIONS_HPP
