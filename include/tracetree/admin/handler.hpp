// tracetree admin: ask a running program over HTTP, from any server. SPDX-License-Identifier: MIT
//
//   #include <tracetree/admin/handler.hpp>
//   tracetree::AdminHandler admin;  // mounted at /debug/tracetree; loopback clients only
//   // in the server's request callback, when admin.handles(target):
//   tracetree::AdminRequest request;
//   request.method = method;  request.target = target;  // path and query, as received
//   request.peer = "127.0.0.1:53122";  // the client's address as accept() gave it (unset: refused)
//   request.host = host_header;  request.origin = origin_header;  request.authorization = authorization_header;
//   request.cancel = token;  // std::make_shared<tracetree::CancelToken>(); token->cancel() on disconnect
//   tracetree::AdminResponse response = admin.handle(request);  // status, content_type, headers, body
//
// Go's net/http/pprof for tracetree: one handler, framework-agnostic (a request in, a response out;
// no sockets), for trace, stack, watch, monitor, profiles, the timeline, a flight recorder, reset, and
// an HTML page for people. docs/admin.md lists every endpoint and parameter. Annotated files never
// include this header; only the file that mounts it does.
//
// It lands in other people's servers, so it refuses by default: the peer must be a loopback address
// (or in allowed_peers, or the token is set), Host and Origin loopback names (or in the allow-list),
// else 403 (a server listening on every interface, DNS rebinding, cross-site POSTs from a browser); an
// optional bearer token (401); state changes by POST only (405); every bad or unknown parameter gets a 400 that
// names it; calls that wait are bounded in number (503), in time and in count, and end early when
// their CancelToken is cancelled or the handler shuts down.
//
// Reading order: the request, response and options; the handler; what the adapters, the listener and
// the tests use of `detail::admin`. The definitions are admin/handler-inl.hpp, compiled as the
// runtime's are (control.hpp, "Compiling the runtime once"): in every file that includes this header,
// header-only; in the tracetree-runtime library only, with TRACETREE_SEPARATE_RUNTIME, so that a file
// that mounts the handler compiles none of it, nor the views and rendering it answers with.
#ifndef TRACETREE_ADMIN_HANDLER_HPP
#define TRACETREE_ADMIN_HANDLER_HPP

#include "../control.hpp"   // first: the platform check, and where this file's definitions are
#include "../sessions.hpp"  // FlightRecorder, which the handler holds

#include <array>
#include <chrono>
#include <condition_variable>  // the destructor waits for calls in progress
#include <cstdint>
#include <functional>          // CancelToken's stop action
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

namespace detail { namespace admin { struct TokenAccess; struct Table; class Reader; } }

// Cancels one waiting call. The host server makes one per request, keeps a shared_ptr, and calls
// cancel() from any thread when its client goes away; the call then answers at once with what it has.
class CancelToken {
public:
    void cancel();           // idempotent, thread-safe; before or during the call
    bool cancelled() const;

private:
    friend struct detail::admin::TokenAccess;
    mutable std::mutex mutex_;
    bool cancelled_ = false;
    std::function<void()> on_cancel_;  // set while a call waits; run under mutex_
};

struct AdminRequest {
    std::string peer;           // the client's address from accept(): "127.0.0.1:53122", "[::1]:53122"; empty: refused
    std::string method;         // "GET", "POST", ...
    std::string target;         // the path and query as received, not decoded: "/debug/tracetree/trace?pattern=x"
    std::string host;           // the Host header; empty when absent (refused)
    std::string origin;         // the Origin header; empty when absent
    std::string authorization;  // the Authorization header; empty when absent
    std::string content_type;   // of a POST body
    std::string body;           // a POST body: parameters as application/x-www-form-urlencoded (the page's forms)
    std::shared_ptr<CancelToken> cancel;  // optional
};

struct AdminResponse {
    int status = 200;
    std::string content_type;  // with charset where it is text
    std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type: Cache-Control, Allow, ...
    std::string body;
};

struct AdminOptions {
    std::string prefix = "/debug/tracetree";  // where it is mounted: "/..." without a trailing '/', or "" for the root
    std::vector<std::string> allowed_hosts;   // host names accepted besides 127.0.0.1, [::1] and localhost (any port)
    std::vector<std::string> allowed_peers;   // client networks accepted besides loopback: "10.0.0.0/8", "fd00::/8", "192.0.2.7"
    std::string token;                        // non-empty: every request needs `Authorization: Bearer <token>`
    std::size_t max_waiting = 4;              // calls waiting at once (trace, stack, watch, monitor), 1 ..= 32
    Nanos max_timeout = std::chrono::minutes(5);  // of one call (monitor: interval * n), 1 s ..= 1 h
    std::uint64_t max_n = 100;                // values one call waits for, 1 ..= 10000
    std::size_t max_body = 64 << 20;          // bytes of the values one trace, stack, watch or monitor answers with, 1 KiB ..= 1 GiB
};

class AdminHandler {
public:
    explicit AdminHandler(AdminOptions options = {});  // std::invalid_argument naming a bad option
    ~AdminHandler();  // shutdown(), then waits for calls in progress to return
    AdminHandler(const AdminHandler&) = delete;
    AdminHandler& operator=(const AdminHandler&) = delete;

    AdminResponse handle(const AdminRequest& request);  // thread-safe; never throws but std::bad_alloc
    const std::string& prefix() const { return options_.prefix; }
    bool handles(std::string_view target) const;  // target is the prefix or below it

    // Cancels every waiting call and answers later ones 503: call it when the server stops.
    void shutdown();
    std::size_t waiting() const;  // calls waiting now
    bool wait_for_waiting(std::size_t count, Nanos timeout) const;  // until waiting() == count; false on timeout

private:
    friend class AdminServer;  // sets server_note_
    friend struct detail::admin::Table;  // names the endpoints' handlers
    struct Waiter;
    using Reader = detail::admin::Reader;
    AdminResponse dispatch(const AdminRequest& request);
    // The endpoints, one each (on_wait: trace, stack, watch and monitor); detail::admin::Table routes to them.
    AdminResponse on_index(const AdminRequest&, const Reader&);
    AdminResponse on_wait(const AdminRequest& request, const Reader& reader);
    AdminResponse on_profile(const AdminRequest&, const Reader& reader);
    AdminResponse on_timeline(const AdminRequest&, const Reader&);
    AdminResponse on_timeline_start(const AdminRequest&, const Reader& reader);
    AdminResponse on_timeline_stop(const AdminRequest&, const Reader& reader);
    AdminResponse on_recorder(const AdminRequest&, const Reader& reader);
    AdminResponse on_recorder_start(const AdminRequest&, const Reader& reader);
    AdminResponse on_recorder_stop(const AdminRequest&, const Reader& reader);
    AdminResponse on_reset(const AdminRequest&, const Reader& reader);
    AdminResponse on_xray(const AdminRequest&, const Reader& reader);
    std::string index_page();

    const AdminOptions options_;
    mutable std::mutex mutex_;
    mutable std::condition_variable changed_;
    std::vector<Waiter*> waiters_;
    std::size_t calls_ = 0;  // in handle() now
    bool shut_down_ = false;

    std::mutex recorder_mutex_;  // the flight recorder the endpoints started
    std::optional<FlightRecorder> recorder_;
    std::string recorder_pattern_;
    Nanos recorder_cost_{0};
    bool recorder_running_ = false;
    std::function<std::string()> server_note_;  // the listener's trouble for the index page; set before any call
};

// What the server adapters, the listener and the tests use of the definitions.
namespace detail {
namespace admin {

// An IPv4 or IPv6 address; IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d), which is also how a dual-stack
// socket reports an IPv4 client, so one comparison covers both.
using Address = std::array<unsigned char, 16>;

std::optional<Address> parse_address(std::string_view text);  // nothing when it is none
std::optional<Address> peer_address(std::string_view peer);  // AdminRequest::peer's address

const char* status_text(int status);  // "Not Found" for 404
std::string number(double value);     // "0.5", "30", "0.001"
AdminResponse as_page(const std::string& prefix, const std::string& title, const std::string& body);  // text as an HTML page

// The names a pattern was likely meant as: "; closest: a, b, c" (three at most) or nothing.
std::string closest_names(const std::string& text, std::initializer_list<const std::vector<std::string>*> lists);

// JSON for the values views.hpp has no writer for: one object each.
void write_json(std::ostream& out, const StackTrace& stack);
void write_json(std::ostream& out, const WatchEvent& event);
void write_json(std::ostream& out, const MonitorInterval& interval);

// ---- the endpoints: one table for routing, parameter checks, the page's forms and docs/admin.md --

// One parameter: how it is read and checked, with its default and bounds.
struct Param {
    enum Kind { free_text, required, flag, choice, whole, decimal };
    enum Limit { fixed, max_n, max_timeout };  // what bounds it above: `high`, or that AdminOptions field
    const char* name;
    Kind kind;
    const char* what = "";  // choice: "a|b|c", the first the default; whole, decimal: the unit; free_text: the docs' note
    double fallback = 0, low = 0, high = 0;  // the default is at most the bound
    Limit limit = fixed;
};

struct Field {  // one field of an endpoint's form on the page
    const char* name;  // of the parameter
    const char* label;
    const char* value;
};
struct Form {  // no button: no form
    const char* heading;  // an <h2> before it, or null
    const char* id;       // the form's id is this and "-form", or none when null
    std::vector<Field> fields;
    const char* button;
};

struct Endpoint {
    const char* name;    // below the prefix: "" is the page
    const char* method;  // the only one it takes
    std::vector<Param> params;  // in the order a 400 lists them
    AdminResponse (AdminHandler::*handler)(const AdminRequest&, const Reader&);
    Form form;
    const char* answers;  // docs/admin.md's column
};

// Every endpoint, in docs/admin.md's order. tests/admin/test_admin.cpp checks that the docs' list is
// this table's.
struct Table {
    static const std::vector<Endpoint>& endpoints();
    // The endpoint's form on the page, its heading first; `prefix` is already HTML.
    static std::string form(const std::string& prefix, const char* name);
};

}  // namespace admin
}  // namespace detail

TRACETREE_END_NAMESPACE

#if TRACETREE_DETAIL_RUNTIME_HERE
#include "handler-inl.hpp"
#endif

#endif  // TRACETREE_ADMIN_HANDLER_HPP
