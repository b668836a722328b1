// tracetree admin, defined: handler.hpp's handler over the runtime, views and rendering.
// SPDX-License-Identifier: MIT
//
// Included at the end of admin/handler.hpp, never on its own: in every file that includes it when
// header-only, and only in the tracetree-runtime library (src/runtime.cpp) when the program's files
// are built with TRACETREE_SEPARATE_RUNTIME, as runtime/control-inl.hpp is. The functions the others
// link to are TRACETREE_DETAIL_RUNTIME_API (inline header-only); the rest are inline, used here only.
// Reading order: `detail::admin` (parameters, the Host/Origin check, JSON for the values views.hpp
// has no writer for, the HTML page, the waits), the table, then the definitions.
#ifndef TRACETREE_ADMIN_HANDLER_INL_HPP
#define TRACETREE_ADMIN_HANDLER_INL_HPP

#include "../control.hpp"
#include "../render.hpp"
#include "../sessions.hpp"
#include "../views.hpp"
#include "../runtime/sites.hpp"   // function_name: the program's functions named as patterns see them
#include "../runtime/symbols.hpp" // the program's functions and scopes, from its symbol table
#include "../text/text.hpp"  // lowercase, markup, trim_ows

#include <algorithm>          // std::min
#include <cctype>             // std::tolower: the closest names to a misspelt pattern
#include <arpa/inet.h>         // inet_pton: peer addresses and AdminOptions::allowed_peers
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>             // responses are built as text
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

namespace detail {
namespace admin {

using Params = std::vector<std::pair<std::string, std::string>>;

// Lets the handler attach a call's stop action to a token.
struct TokenAccess {
    static bool attach(CancelToken& token, std::function<void()> stop) {
        std::lock_guard<std::mutex> lock(token.mutex_);
        if (token.cancelled_) return false;
        token.on_cancel_ = std::move(stop);
        return true;
    }
    static void detach(CancelToken& token) {
        std::lock_guard<std::mutex> lock(token.mutex_);  // after this, the stop action is not running
        token.on_cancel_ = nullptr;
    }
};

// An answer other than 200, thrown from inside an endpoint and turned into the response.
struct Refusal {
    int status;
    std::string message;
    std::vector<std::pair<std::string, std::string>> headers;
};
[[noreturn]] inline void refuse(int status, std::string message,
                                std::vector<std::pair<std::string, std::string>> headers = {}) {
    throw Refusal{status, std::move(message), std::move(headers)};
}
[[noreturn]] inline void bad(const std::string& name, const std::string& why) {
    refuse(400, "parameter '" + name + "': " + why);
}

TRACETREE_DETAIL_RUNTIME_API const char* status_text(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 507: return "Insufficient Storage";
    default: return "Error";
    }
}

inline AdminResponse response(std::string content_type, std::string body, int status = 200) {
    AdminResponse out;
    out.status = status;
    out.content_type = std::move(content_type);
    out.body = std::move(body);
    out.headers = {{"Cache-Control", "no-store"}, {"X-Content-Type-Options", "nosniff"}};
    return out;
}
inline AdminResponse text(std::string body, int status = 200) {
    return response("text/plain; charset=utf-8", std::move(body), status);
}

// ---- parameters ---------------------------------------------------------------------------------

TRACETREE_DETAIL_RUNTIME_API std::string number(double value) { return fixed(value, 3); }  // "0.5", "30", "0.001"

// application/x-www-form-urlencoded: '+' is a space, %XX a byte; nothing when an escape is malformed.
inline std::optional<std::string> form_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '+') {
            out += ' ';
        } else if (text[i] == '%') {
            if (i + 2 >= text.size()) return std::nullopt;
            const int high = hex_value(text[i + 1]), low = hex_value(text[i + 2]);
            if (high < 0 || low < 0) return std::nullopt;
            out += static_cast<char>(high * 16 + low);
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

// "a=1&b=two" into pairs; `what` names the part in errors ("query", "body").
inline void parse_form(std::string_view text, const char* what, Params& into) {
    while (!text.empty()) {
        const std::size_t amp = text.find('&');
        const std::string_view item = text.substr(0, amp);
        text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
        if (item.empty()) continue;
        const std::size_t eq = item.find('=');
        const std::optional<std::string> name = form_decode(item.substr(0, eq));
        const std::optional<std::string> value =
            form_decode(eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1));
        if (!name) refuse(400, std::string("malformed %-escape in a parameter name of the ") + what);
        if (!value) bad(views::plain_text(*name), "malformed %-escape in its value");
        into.emplace_back(*name, *value);
    }
}

// ---- the endpoints (the table: handler.hpp) -------------------------------------------------------

// The parameters one endpoint takes: each read at most once, as its Param says; any other, or a
// repeated one, is a 400.
class Reader {
public:
    Reader(const Params& params, const Endpoint& endpoint, const AdminOptions& options)
        : params_(params), endpoint_(endpoint), options_(options) {
        for (std::size_t i = 0; i < params_.size(); ++i) {
            bool found = false;
            for (const Param& param : endpoint_.params) found = found || params_[i].first == param.name;
            if (!found) {
                std::string list;
                for (const Param& param : endpoint_.params) list += (list.empty() ? "" : ", ") + std::string(param.name);
                bad(views::plain_text(params_[i].first).substr(0, 64),
                    "unknown here" + (list.empty() ? std::string(" (this endpoint takes none)") : " (this endpoint takes: " + list + ")"));
            }
            for (std::size_t j = 0; j < i; ++j)
                if (params_[j].first == params_[i].first) bad(params_[i].first, "given more than once");
        }
    }

    const Endpoint& endpoint() const { return endpoint_; }
    std::optional<std::string> get(const char* name) const {
        for (const auto& param : params_)
            if (param.first == name) return param.second;
        return std::nullopt;
    }
    std::string required(const char* name) const {
        const std::optional<std::string> value = get(name);
        if (!value || value->empty()) bad(name, "required");
        return *value;
    }
    bool flag(const char* name) const {  // "0" or "1" (a checked checkbox sends "1")
        const std::optional<std::string> value = get(name);
        if (!value || *value == "0") return false;
        if (*value == "1") return true;
        bad(name, "must be 0 or 1");
    }
    std::string choice(const char* name) const {
        const std::string_view allowed = param(name).what;
        const std::optional<std::string> value = get(name);
        if (!value) return std::string(allowed.substr(0, allowed.find('|')));
        std::string list;
        for (std::string_view rest = allowed; !rest.empty();) {
            const std::string_view option = rest.substr(0, rest.find('|'));
            if (*value == option) return *value;
            list += (list.empty() ? "" : ", ") + std::string(option);
            rest.remove_prefix(std::min(rest.size(), option.size() + 1));
        }
        bad(name, "must be one of " + list);
    }
    // A decimal without sign or exponent ("10", "0.5").
    double decimal(const char* name) const {
        const Param& p = param(name);
        const double low = p.low, high = bound(p);
        const std::optional<std::string> value = get(name);
        if (!value) return std::min(p.fallback, high);
        double parsed = 0, scale = 0;
        bool digits = false;
        for (const char c : *value) {
            if (c == '.' && scale == 0) {
                scale = 1;
            } else if (c >= '0' && c <= '9' && value->size() <= 15) {
                digits = true;
                if (scale == 0) parsed = parsed * 10 + (c - '0');
                else parsed += (c - '0') * (scale /= 10);
            } else {
                digits = false;
                break;
            }
        }
        if (!digits || parsed < low || parsed > high)
            bad(name, "must be a number of " + std::string(p.what) + " from " + number(low) + " to " + number(high) +
                          (value->empty() ? "" : ", not '" + views::plain_text(value->substr(0, 32)) + "'"));
        return parsed;
    }
    std::uint64_t whole(const char* name) const {
        const Param& p = param(name);
        const auto low = static_cast<std::uint64_t>(p.low), high = static_cast<std::uint64_t>(bound(p));
        const std::optional<std::string> value = get(name);
        if (!value) return std::min(static_cast<std::uint64_t>(p.fallback), high);
        std::uint64_t number = 0;
        bool ok = !value->empty() && value->size() <= 9;
        for (const char c : *value) ok = ok && c >= '0' && c <= '9' && ((number = number * 10 + static_cast<std::uint64_t>(c - '0')), true);
        if (!ok || number < low || number > high)
            bad(name, "must be a whole number from " + std::to_string(low) + " to " + std::to_string(high) +
                          (value->empty() ? "" : ", not '" + views::plain_text(value->substr(0, 32)) + "'"));
        return number;
    }

private:
    const Param& param(const char* name) const {
        for (const Param& p : endpoint_.params)
            if (std::string_view(p.name) == name) return p;
        throw std::logic_error(std::string("tracetree: the admin table has no parameter ") + name);
    }
    double bound(const Param& p) const {
        return p.limit == Param::max_n         ? static_cast<double>(options_.max_n)
               : p.limit == Param::max_timeout ? std::chrono::duration<double>(options_.max_timeout).count()
                                               : p.high;
    }

    const Params& params_;
    const Endpoint& endpoint_;
    const AdminOptions& options_;
};

inline Nanos from_seconds(double seconds) {
    return std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(seconds));
}
inline Nanos from_millis(double millis) {
    return std::chrono::duration_cast<Nanos>(std::chrono::duration<double, std::milli>(millis));
}

// ---- who may ask ----------------------------------------------------------------------------------

// A Host header or an origin's authority ("127.0.0.1:80", "[::1]", "localhost") split into its name
// and its port with the ':' ("" when there is none, ":" when it is empty); false when a bracket is
// malformed.
inline bool split_authority(std::string_view authority, std::string_view& name, std::string_view& port) {
    if (!authority.empty() && authority.front() == '[') {
        const std::size_t close = authority.find(']');
        if (close == std::string_view::npos) return false;
        name = authority.substr(0, close + 1);
        port = authority.substr(close + 1);
        return port.empty() || port.front() == ':';
    }
    const std::size_t colon = authority.find(':');
    name = authority.substr(0, colon);
    port = colon == std::string_view::npos ? std::string_view() : authority.substr(colon);
    return true;
}

inline bool valid_port(std::string_view port) {  // none, or ':' and a number from 1 to 65535
    if (port.empty()) return true;
    port.remove_prefix(1);
    if (port.empty() || port.size() > 5) return false;
    unsigned long value = 0;
    for (const char c : port) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + static_cast<unsigned long>(c - '0');
    }
    return value >= 1 && value <= 65535;
}

// The host name of an authority, lower-case, IPv6 in brackets; nothing when it is malformed.
inline std::optional<std::string> host_name(std::string_view authority) {
    std::string_view name, port;
    if (!split_authority(authority, name, port) || !valid_port(port) || name.empty()) return std::nullopt;
    return lowercase(name);
}

inline bool allowed_host(const std::string& name, const std::vector<std::string>& allowed) {
    if (name == "127.0.0.1" || name == "[::1]" || name == "localhost") return true;
    for (const std::string& host : allowed)
        if (name == host) return true;
    return false;
}

TRACETREE_DETAIL_RUNTIME_API std::optional<Address> parse_address(std::string_view text) {
    const std::string copy(text);  // inet_pton wants a terminated string
    Address out{};
    unsigned char v4[4];
    if (::inet_pton(AF_INET, copy.c_str(), v4) == 1) {
        out[10] = out[11] = 0xff;
        std::memcpy(out.data() + 12, v4, sizeof v4);
        return out;
    }
    if (::inet_pton(AF_INET6, copy.c_str(), out.data()) == 1) return out;
    return std::nullopt;
}

// AdminRequest::peer: "a.b.c.d:port", "[v6]:port", or either without the port; an IPv6 zone
// ("%eth0") is ignored.
TRACETREE_DETAIL_RUNTIME_API std::optional<Address> peer_address(std::string_view peer) {
    std::string_view host = peer;
    if (!peer.empty() && peer.front() == '[') {
        const std::size_t close = peer.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        host = peer.substr(1, close - 1);
    } else if (peer.find(':') != std::string_view::npos && peer.find(':') == peer.rfind(':')) {
        host = peer.substr(0, peer.find(':'));
    }
    return parse_address(host.substr(0, host.find('%')));
}

struct Network {
    Address address;
    std::size_t bits;  // of the 128; an IPv4 prefix counts the 96 of the mapping too
};

// "10.0.0.0/8", "fd00::/8", or an address alone (all its bits); nothing when malformed.
inline std::optional<Network> parse_network(std::string_view cidr) {
    const std::size_t slash = cidr.find('/');
    const std::optional<Address> address = parse_address(cidr.substr(0, slash));
    if (!address) return std::nullopt;
    const bool v4 = cidr.substr(0, slash).find(':') == std::string_view::npos;
    const std::size_t most = v4 ? 32 : 128;
    std::size_t bits = most;
    if (slash != std::string_view::npos) {
        const std::string_view digits = cidr.substr(slash + 1);
        if (digits.empty() || digits.size() > 3) return std::nullopt;
        bits = 0;
        for (const char c : digits) {
            if (c < '0' || c > '9') return std::nullopt;
            bits = bits * 10 + static_cast<std::size_t>(c - '0');
        }
        if (bits > most) return std::nullopt;
    }
    return Network{*address, v4 ? bits + 96 : bits};
}

inline bool in_network(const Address& address, const Network& network) {
    const std::size_t whole = network.bits / 8, rest = network.bits % 8;
    if (std::memcmp(address.data(), network.address.data(), whole) != 0) return false;
    if (rest == 0) return true;
    const unsigned mask = (0xffu << (8 - rest)) & 0xffu;
    return ((static_cast<unsigned>(address[whole]) ^ network.address[whole]) & mask) == 0;
}

inline bool is_loopback(const Address& address) {
    return in_network(address, *parse_network("127.0.0.0/8")) || in_network(address, *parse_network("::1"));
}

// A loopback peer, or one in `allowed` (already checked by the handler's constructor).
inline bool allowed_peer(std::string_view peer, const std::vector<std::string>& allowed) {
    const std::optional<Address> address = peer_address(peer);
    if (!address) return false;
    if (is_loopback(*address)) return true;
    for (const std::string& cidr : allowed)
        if (const std::optional<Network> network = parse_network(cidr))
            if (in_network(*address, *network)) return true;
    return false;
}

// Anything after the media type must be parameters: `; name=value`, empty ones allowed (RFC 9110).
inline bool form_content_type(std::string_view content_type) {
    const std::string value = lowercase(content_type);
    const std::string_view form = "application/x-www-form-urlencoded";
    if (value.compare(0, form.size(), form) != 0) return false;
    std::string_view rest = std::string_view(value).substr(form.size());
    rest = trim_ows(rest);
    while (!rest.empty()) {
        if (rest.front() != ';') return false;
        rest.remove_prefix(1);
        const std::size_t next = rest.find(';');
        const std::string_view parameter = trim_ows(rest.substr(0, next));
        rest = next == std::string_view::npos ? std::string_view() : rest.substr(next);
        if (parameter.empty()) continue;
        const std::size_t eq = parameter.find('=');
        if (eq == 0 || eq == std::string_view::npos || eq + 1 == parameter.size()) return false;
        for (const char c : parameter.substr(0, eq))
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr))
                return false;
    }
    return true;
}

// The time a comparison takes does not depend on where the strings differ.
inline bool same_secret(std::string_view given, std::string_view secret) {
    unsigned difference = given.size() == secret.size() ? 0u : 1u;
    for (std::size_t i = 0; i < given.size(); ++i)
        difference |= static_cast<unsigned>(static_cast<unsigned char>(given[i]) ^ static_cast<unsigned char>(secret[i % secret.size()]));
    return difference == 0;
}

// Nothing when the request may go on; else the refusal.
inline std::optional<AdminResponse> check_caller(const AdminRequest& request, const AdminOptions& options) {
    const auto forbidden = [](const std::string& why) {
        return text("403 Forbidden: " + why + "\n", 403);
    };
    // A token admits any peer (it is asked of every request below); else only loopback and allowed_peers.
    if (options.token.empty() && !allowed_peer(request.peer, options.allowed_peers))
        return forbidden(request.peer.empty()
                             ? std::string("no peer address (AdminRequest::peer): the server must say who connected")
                             : "peer " + views::plain_text(request.peer.substr(0, 64)) +
                                   " is not loopback nor in the allow-list (AdminOptions::allowed_peers), and no token is set");
    std::string_view host_part, port;
    if (split_authority(request.host, host_part, port) && !host_part.empty() && !valid_port(port))
        return text("400 Bad Request: the Host header's port must be a number from 1 to 65535\n", 400);
    const std::optional<std::string> host = host_name(request.host);
    if (!host) return forbidden(request.host.empty() ? "no Host header" : "malformed Host header");
    if (!allowed_host(*host, options.allowed_hosts))
        return forbidden("Host '" + views::plain_text(host->substr(0, 64)) +
                         "' is not a loopback name nor in the allow-list (AdminOptions::allowed_hosts)");
    if (!request.origin.empty()) {
        const std::string origin = lowercase(request.origin);
        std::string_view authority;
        if (origin.compare(0, 7, "http://") == 0) authority = std::string_view(origin).substr(7);
        else if (origin.compare(0, 8, "https://") == 0) authority = std::string_view(origin).substr(8);
        const std::optional<std::string> name = authority.empty() ? std::nullopt : host_name(authority);
        if (!name || !allowed_host(*name, options.allowed_hosts))
            return forbidden("Origin '" + views::plain_text(request.origin.substr(0, 64)) +
                             "' is not a loopback origin nor in the allow-list: cross-site requests are refused");
    }
    if (!options.token.empty()) {
        const std::string& header = request.authorization;
        const bool bearer = header.size() > 7 && lowercase(header.substr(0, 7)) == "bearer ";
        std::string_view given = bearer ? std::string_view(header).substr(7) : std::string_view();
        while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
        if (!bearer || !same_secret(given, options.token)) {
            AdminResponse refused = text(header.empty() ? "401 Unauthorized: this endpoint needs Authorization: Bearer <token>\n"
                                                        : "401 Unauthorized: wrong token\n",
                                         401);
            refused.headers.emplace_back("WWW-Authenticate", header.empty() ? "Bearer realm=\"tracetree\""
                                                                            : "Bearer realm=\"tracetree\", error=\"invalid_token\"");
            return refused;
        }
    }
    return std::nullopt;
}

// ---- JSON for the values views.hpp has no writer for ----------------------------------------------

template <class Value>
void write_origin(std::ostream& out, const Value& value) {  // when and where a stack or watch event happened
    out << "\"start_ns\":" << views::time_ns(value.start) << ",\"thread_name\":" << views::json_string(value.thread_name)
        << ",\"thread_id\":" << std::to_string(value.thread_id) << views::tid_field(value.os_thread_id) << ",\"fields\":";
    views::write_pairs(out, value.fields);
    out << ",\"cost_ns\":" << std::to_string(value.cost.count()) << ",\"threw\":" << (value.threw ? "true" : "false");
}

TRACETREE_DETAIL_RUNTIME_API void write_json(std::ostream& out, const StackTrace& stack) {
    out << '{';
    write_origin(out, stack);
    const auto write_frames = [&out](const char* key, const std::vector<StackFrame>& frames) {
        out << ",\"" << key << "\":[";
        for (std::size_t i = 0; i < frames.size(); ++i)
            out << (i == 0 ? "" : ",") << "{\"name\":" << views::json_string(frames[i].name)
                << ",\"file\":" << views::json_string(frames[i].file) << ",\"line\":" << std::to_string(frames[i].line) << '}';
        out << ']';
    };
    write_frames("frames", stack.frames);
    if (!stack.callers.empty()) write_frames("callers", stack.callers);  // the machine stack (runtime/stack.hpp)
    out << '}';
}

TRACETREE_DETAIL_RUNTIME_API void write_json(std::ostream& out, const WatchEvent& event) {
    out << '{';
    write_origin(out, event);
    out << ",\"scope\":" << views::json_string(event.scope) << ",\"file\":" << views::json_string(event.file)
        << ",\"line\":" << std::to_string(event.line) << ",\"values\":";
    views::write_pairs(out, event.values);
    out << '}';
}

TRACETREE_DETAIL_RUNTIME_API void write_json(std::ostream& out, const MonitorInterval& interval) {
    out << "{\"start_ns\":" << views::time_ns(interval.start) << ",\"end_ns\":" << views::time_ns(interval.end) << ",\"rows\":[";
    for (std::size_t i = 0; i < interval.rows.size(); ++i) {
        const MonitorRow& row = interval.rows[i];
        out << (i == 0 ? "" : ",") << "{\"name\":" << views::json_string(row.name) << ",\"file\":" << views::json_string(row.file)
            << ",\"line\":" << std::to_string(row.line) << ",\"calls\":" << std::to_string(row.calls)
            << ",\"failed\":" << std::to_string(row.failed) << ",\"total_ns\":" << std::to_string(row.total.count())
            << ",\"min_ns\":" << std::to_string(row.min.count()) << ",\"max_ns\":" << std::to_string(row.max.count()) << '}';
    }
    out << ']' << (interval.cut_short ? ",\"cut_short\":true" : "") << '}';
}

inline void write_json_value(std::ostream& out, const Trace& trace) {  // views.hpp's, without its newline
    std::ostringstream one;
    tracetree::write_json(one, trace);
    std::string text = one.str();
    while (!text.empty() && text.back() == '\n') text.pop_back();
    out << text;
}
inline void write_json_value(std::ostream& out, const StackTrace& stack) { write_json(out, stack); }
inline void write_json_value(std::ostream& out, const WatchEvent& event) { write_json(out, event); }
inline void write_json_value(std::ostream& out, const MonitorInterval& interval) { write_json(out, interval); }

// ---- HTML -----------------------------------------------------------------------------------------

inline std::string html(std::string_view raw) { return markup(raw, true); }

// Nothing is loaded from elsewhere: no scripts at all, styles inline, forms only to this server.
inline const char* kSecurityPolicy =
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'";

inline const char* kStyle =
    "body{font-family:system-ui,sans-serif;margin:1.5em;max-width:80em;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}"
    "pre{background:#f6f6f6;padding:.8em;overflow-x:auto;font-size:13px}"
    "form{margin:.4em 0}label{margin-right:.8em}input[type=text]{width:22em}input.n{width:5em}"
    "svg{max-width:100%;height:auto}code{background:#f2f2f2}.note{color:#666}.hot{color:#c00}";

inline std::string page(const std::string& title, const std::string& body) {
    return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html(title) +
           "</title><style>" + kStyle + "</style></head>\n<body>\n" + body + "</body></html>\n";
}

inline AdminResponse html_response(std::string body, int status = 200) {
    AdminResponse out = response("text/html; charset=utf-8", std::move(body), status);
    out.headers.emplace_back("Content-Security-Policy", kSecurityPolicy);
    // Not no-referrer: with it a browser sends `Origin: null` on the page's own POST forms.
    out.headers.emplace_back("Referrer-Policy", "same-origin");
    return out;
}

// A text answer as a page for the forms: the text, and the way back. A tree line that render's
// marker ends (`+---[...] name <- hot`) is the hot node's: red, with a title and a legend.
TRACETREE_DETAIL_RUNTIME_API AdminResponse as_page(const std::string& prefix, const std::string& title, const std::string& body) {
    const std::string_view marker = kHotMarker;
    std::string text;
    bool hot = false;
    for (std::size_t start = 0; start < body.size();) {
        const std::size_t end = std::min(body.find('\n', start), body.size());
        const std::string_view line(body.data() + start, end - start);
        const std::size_t tree = line.find_first_not_of(" |");
        if (line.size() > marker.size() && line.substr(line.size() - marker.size()) == marker && tree != line.npos &&
            (line.substr(tree, 5) == "+---[" || line.substr(tree, 5) == "`---[")) {
            text += html(line.substr(0, tree + 4)) + "<span class=\"hot\" title=\"hot path: the costliest call below the root\">" +
                    html(line.substr(tree + 4)) + "</span>";
            hot = true;
        } else {
            text += html(line);
        }
        if (end < body.size()) text += '\n';
        start = end + 1;
    }
    const char* legend = "<p class=\"note\"><span class=\"hot\">Red, ending &lt;- hot</span>: the costliest call below "
                         "the root, where the time went.</p>\n";
    return html_response(page(title, "<p><a href=\"" + html(prefix) + "/\">&larr; tracetree</a></p>\n<h1>" + html(title) +
                                         "</h1>\n<pre>" + text + "</pre>\n" + (hot ? legend : "")));
}

// The answer in the format asked: "text", "json" (already JSON in `json`) or "html".
inline AdminResponse answer(const std::string& format, const std::string& prefix, const std::string& title,
                            const std::string& plain, const std::string& json) {
    if (format == "json") return response("application/json", json);
    if (format == "html") return as_page(prefix, title, plain);
    return text(plain);
}

// ---- waiting ------------------------------------------------------------------------------------

enum class Outcome { complete, timed_out, cancelled, cut };

inline const char* outcome_name(Outcome outcome) {
    return outcome == Outcome::complete    ? "complete"
           : outcome == Outcome::timed_out ? "timeout"
           : outcome == Outcome::cancelled ? "cancelled"
                                           : "cut";
}

// Keeps at most `limit` bytes of what is written and counts the rest, so that a value too big for
// AdminOptions::max_body is never built whole.
class BoundedBuffer : public std::streambuf {
public:
    explicit BoundedBuffer(std::size_t limit) : limit_(limit) {}
    std::string& text() { return kept_; }
    std::size_t size() const { return written_; }
    bool overflowed() const { return written_ > limit_; }
    void rewind(std::size_t size) {  // forgets what was written after `size` bytes
        kept_.resize(std::min(size, kept_.size()));
        written_ = size;
    }

protected:
    int_type overflow(int_type c) override {
        if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
        const char byte = traits_type::to_char_type(c);
        xsputn(&byte, 1);
        return c;
    }
    std::streamsize xsputn(const char* bytes, std::streamsize count) override {
        const std::size_t n = static_cast<std::size_t>(count);
        if (kept_.size() < limit_) kept_.append(bytes, std::min(n, limit_ - kept_.size()));
        written_ += n;
        return count;
    }

private:
    std::size_t limit_;
    std::size_t written_ = 0;
    std::string kept_;
};

// What fits of a text in whole lines, and a last line that says what was cut.
inline std::string cut_lines(BoundedBuffer& buffer, std::size_t limit, const char* what) {
    std::string& out = buffer.text();
    if (!buffer.overflowed()) return std::move(out);
    const std::size_t line_end = out.rfind('\n');
    out.resize(line_end == std::string::npos ? 0 : line_end + 1);
    return std::move(out) + "Cut at " + std::to_string(limit) + " bytes (AdminOptions::max_body): " + what + " is " +
           std::to_string(buffer.size()) + " bytes; the lines after these did not fit.\n";
}

// A document that is no use cut (JSON, SVG): whole, or a 507 that says how big it is (the server
// cannot hold the representation within its limit; 413 would blame the request's body).
inline std::string whole(BoundedBuffer& buffer, std::size_t limit, const char* what) {
    if (buffer.overflowed())
        refuse(507, std::string(what) + " is " + std::to_string(buffer.size()) + " bytes, above " + std::to_string(limit) +
                        " (AdminOptions::max_body); format=text or folded answers with what fits");
    return std::move(buffer.text());
}

// The names a pattern may match before anything ran: the executable's functions (as
// TRACETREE_FUNCTION() and XRay name them) and the texts of its annotated scopes. Read once.
inline const std::vector<std::string>& program_names() {
    static const std::vector<std::string>& names = *[] {  // kept for the process, as Table's endpoints
        auto* all_names = new std::vector<std::string>;
        std::vector<std::string>& all = *all_names;
        try {
            const FunctionTable table = function_table("/proc/self/exe", executable_bias());
            for (const auto& function : table.functions) all.push_back(function_name(function.name.c_str()));
            all.insert(all.end(), table.scope_texts.begin(), table.scope_texts.end());
            std::sort(all.begin(), all.end());
            all.erase(std::unique(all.begin(), all.end()), all.end());
        } catch (...) {  // out of memory: nothing known, every pattern waits
        }
        return all_names;
    }();
    return names;
}

// For a call that got nothing in a program with XRay that could not install it (a control file built
// without the LTO mode of the rest, say): why, since no function of the program was patched.
inline std::string xray_failure_note() noexcept {
    auto* const rows_of = g_xray_rows.load();
    if (rows_of == nullptr) return "";
    try {
        std::vector<XRayRow> rows;
        rows_of(rows);
        return "";
    } catch (const std::exception& e) {
        try {
            return std::string("No function of the program was patched: ") + e.what() + " (docs/xray.md).\n";
        } catch (...) {
        }
    } catch (...) {
    }
    return "";
}

// Edits between two names, letters compared without case.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            const bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) == std::tolower(static_cast<unsigned char>(b[j - 1]));
            row[j] = std::min({above + 1, row[j - 1] + 1, diagonal + (same ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// The names a pattern was likely meant as, for a message: "; closest: a, b, c" or nothing. Patterns
// match a name or its end after a "::" ("DBImpl::Write" matches leveldb::DBImpl::Write): the
// distance is to the closest of those. Three kept; a name whose length alone puts it past the third
// is not compared (with 10,000 names of 100 characters, comparing each took seconds).
TRACETREE_DETAIL_RUNTIME_API std::string closest_names(const std::string& text,
                                                       std::initializer_list<const std::vector<std::string>*> lists) {
    constexpr std::size_t kShown = 3;
    std::vector<std::pair<std::size_t, std::string>> closest;  // sorted, at most kShown
    const auto consider = [&](std::string_view candidate, const std::string& name) {
        const std::size_t length_gap = candidate.size() > text.size() ? candidate.size() - text.size() : text.size() - candidate.size();
        if (closest.size() == kShown && length_gap > closest.back().first) return;  // a tie still sorts by name
        const std::size_t distance = edit_distance(text, candidate);
        if (closest.size() == kShown && distance > closest.back().first) return;
        for (auto kept = closest.begin(); kept != closest.end(); ++kept)
            if (kept->second == name) {  // one name, reached again through a suffix of its own
                if (kept->first <= distance) return;
                closest.erase(kept);
                break;
            }
        closest.emplace(std::upper_bound(closest.begin(), closest.end(), std::make_pair(distance, name)), distance, name);
        if (closest.size() > kShown) closest.pop_back();
    };
    for (const std::vector<std::string>* names : lists)
        for (const std::string& name : *names) {
            if (name.size() > 4 * text.size() + 64) continue;
            consider(name, name);
            for (std::size_t at = name.find("::"); at != std::string::npos; at = name.find("::", at + 2))
                consider(std::string_view(name).substr(at + 2), name);
        }
    std::string message;
    for (std::size_t i = 0; i < closest.size(); ++i) message += (i == 0 ? "; closest: " : ", ") + views::plain_text(closest[i].second);
    return message;
}

// A session whose pattern matches no function of the program and no scope run so far would wait for
// its whole timeout for nothing (a misspelt name): answered 404 at once, naming the closest names.
// Scopes of a library loaded later, and run-time names, are known once they have run. Only in a
// program with XRay (xray/xray.hpp) for now: elsewhere a pattern of a scope not yet run waits, as
// the tests that hold a request open with one expect, and its answer says so (unmatched_note).
inline void refuse_unknown(const std::string& text, bool regex) {
    if (!g_xray_in_program.load(std::memory_order_relaxed)) return;
    std::optional<Pattern> pattern;
    try {
        pattern.emplace(text, regex ? PatternSyntax::regex : PatternSyntax::glob);
    } catch (const PatternError& e) {
        bad("pattern", e.what());
    }
    const std::vector<std::string>& program = program_names();
    const std::vector<std::string> seen = scope_names();
    const auto matches = [&](const std::string& name) { return pattern->matches(name); };
    if (std::any_of(program.begin(), program.end(), matches) || std::any_of(seen.begin(), seen.end(), matches)) return;
    refuse(404, "pattern '" + views::plain_text(text) + "' matches no function of the program and no scope run so far" +
                    closest_names(text, {&program, &seen}));
}

// For a call that waited and got nothing: a line saying that no scope run so far (and, with XRay, no
// function of the program) matches its pattern, with the names it was likely meant as; nothing when
// one does (it was not called, or not slowly enough), or when the hint cannot be had.
inline std::string unmatched_note(const std::string& text, bool regex) noexcept {
    try {
        const std::vector<std::string> seen = scope_names();
        const Pattern pattern(text, regex ? PatternSyntax::regex : PatternSyntax::glob);  // checked when the session opened
        const auto matches = [&](const std::string& name) { return pattern.matches(name); };
        if (std::any_of(seen.begin(), seen.end(), matches)) return "";
        if (g_xray_in_program.load(std::memory_order_relaxed)) {
            const std::vector<std::string>& program = program_names();
            if (std::any_of(program.begin(), program.end(), matches)) return "";
        }
        // A regular expression is not a misspelt name: no closest names for it.
        return "No scope run so far matches '" + views::plain_text(text) + "'" + (regex ? std::string() : closest_names(text, {&seen})) + ".\n";
    } catch (...) {  // the answer collected so far matters more than the hint
        return "";
    }
}

}  // namespace admin
}  // namespace detail

// One call waiting: its stop action is reachable from its token and from shutdown().
struct AdminHandler::Waiter {
    AdminHandler& handler;
    CancelToken* token;
    std::function<void()> stop;
    bool cancelled = false;  // by shutdown(); guarded by the handler's mutex

    // Takes a place among the waiting calls; 503 when they are all taken.
    Waiter(AdminHandler& owner, CancelToken* cancel) : handler(owner), token(cancel) {
        std::lock_guard<std::mutex> lock(handler.mutex_);
        if (handler.shut_down_) detail::admin::refuse(503, "the server is stopping");
        if (handler.waiters_.size() >= handler.options_.max_waiting)
            detail::admin::refuse(503,
                                  std::to_string(handler.waiters_.size()) +
                                      " calls are waiting already, the limit (AdminOptions::max_waiting); try again later",
                                  {{"Retry-After", "1"}});
        handler.waiters_.push_back(this);
    }
    ~Waiter() {
        release();
        {
            std::lock_guard<std::mutex> lock(handler.mutex_);
            for (std::size_t i = 0; i < handler.waiters_.size(); ++i)
                if (handler.waiters_[i] == this) handler.waiters_.erase(handler.waiters_.begin() + static_cast<std::ptrdiff_t>(i));
        }
        handler.changed_.notify_all();
    }
    Waiter(const Waiter&) = delete;
    Waiter& operator=(const Waiter&) = delete;

    // Arms `stop_session` (which wakes the session's wait) for a cancel or a shutdown; runs it at once
    // when either came first.
    void arm(std::function<void()> stop_session) {
        bool stopped = false;
        {
            std::lock_guard<std::mutex> lock(handler.mutex_);
            stop = stop_session;
            stopped = cancelled;
        }
        handler.changed_.notify_all();  // wait_for_waiting(): this call now waits for real
        if (token != nullptr && !detail::admin::TokenAccess::attach(*token, stop_session)) stopped = true;
        if (stopped) stop_session();
    }
    // Neither the token nor shutdown() runs the stop action after this returns.
    void release() {
        if (token != nullptr) detail::admin::TokenAccess::detach(*token);
        std::lock_guard<std::mutex> lock(handler.mutex_);
        stop = nullptr;
    }
    bool was_cancelled() const {
        if (token != nullptr && token->cancelled()) return true;
        std::lock_guard<std::mutex> lock(handler.mutex_);
        return cancelled;
    }
};

namespace detail {
namespace admin {

TRACETREE_DETAIL_RUNTIME_API const std::vector<Endpoint>& Table::endpoints() {
    using H = AdminHandler;
    const Param pattern{"pattern", Param::required}, regex{"regex", Param::flag};
    const Param cost{"cost", Param::decimal, "milliseconds", 0, 0, 3600000};
    const Param n{"n", Param::whole, "", 1, 1, 0, Param::max_n};
    const Param timeout{"timeout", Param::decimal, "seconds", 30, 0.001, 0, Param::max_timeout};
    const Param all_formats{"format", Param::choice, "text|json|html"}, page_format{"format", Param::choice, "text|html"};
    const Param depth{"depth", Param::whole,
                      "call levels: the XRay functions patched below a matching one, [docs/xray.md](xray.md#what-a-session-patches)",
                      double{kDefaultCallDepth}, 0, double{kMaxCallDepth}};
    const Field pattern_field{"pattern", "pattern", ""}, regex_field{"regex", "regex", ""};
    const Field cost_field{"cost", "min cost (ms)", "0"}, n_field{"n", "n", "1"}, timeout_field{"timeout", "timeout (s)", "30"};
    // Kept for the process, never destroyed: a listener thread may answer while static objects are
    // destroyed at exit (TRACETREE_ADMIN's listener lives as long as the process).
    static const std::vector<Endpoint>& table = *new std::vector<Endpoint>{
        {"", "GET", {}, &H::on_index, {}, "the HTML page (below)"},
        {"trace", "GET", {pattern, regex, n, all_formats, cost, timeout, depth}, &H::on_wait,
         {"Trace: the call tree of the next slow invocations (Arthas <code>trace</code>)", "trace",
          {pattern_field, regex_field, cost_field, n_field, timeout_field}, "Trace"},
         "Arthas `trace pattern '#cost > cost' -n n`: the call tree of each of the next `n` outermost invocations costing "
         "at least `cost`, then Arthas's closing line, or `Timed out after S s: k of n invocation(s) of 'P' costing at "
         "least C ms.`, or `Cancelled after ...`"},
        {"stack", "GET", {pattern, regex, n, all_formats, cost, timeout}, &H::on_wait,
         {"Stack: who calls it (Arthas <code>stack</code>)", "stack",
          {pattern_field, regex_field, cost_field, n_field, timeout_field}, "Stack"},
         "Arthas `stack`: who called each invocation, innermost first: the machine stack at its start with the open "
         "scopes in it (JSON: `callers`; `frames` are the open scopes), down to `main` or the thread's entry, or across "
         "a hand-off to the scopes it was handed off from"},
        {"watch", "GET",
         {pattern, regex, n, all_formats, cost, timeout,
          {"values", Param::free_text, "a,b: the `TRACETREE_WATCH` names to keep; all"}},
         &H::on_wait,
         {"Watch: the values it saw (Arthas <code>watch</code>)", "watch",
          {pattern_field, regex_field, {"values", "values (a,b)", ""}, n_field, timeout_field}, "Watch"},
         "Arthas `watch`: `method=... location=AtExit` and `result=@Values[...]` per invocation"},
        {"monitor", "GET",
         {pattern, regex, n, all_formats, {"interval", Param::decimal, "seconds", 1, 0.001, 0, Param::max_timeout}},
         &H::on_wait,
         {"Monitor: calls per interval (Arthas <code>monitor</code>)", "monitor",
          {pattern_field, regex_field, {"interval", "interval (s)", "1"}, {"n", "intervals", "5"}}, "Monitor"},
         "Arthas `monitor -c interval -n n` (`interval * n` at most `max_timeout`): one table per interval (timestamp, "
         "class, method, total, success, fail, avg/min/max-rt, fail-rate), a row per matching scope called in it; "
         "returned when the last interval ends; cancelled, with the interval under way cut short"},
        {"profile", "GET", {{"format", Param::choice, "text|human|folded|svg|json|html"}, {"threads", Param::flag}},
         &H::on_profile, {},
         "the cumulative profile, merged or per thread: Arthas text, the aligned table, folded stacks (flamegraph.pl, "
         "speedscope), an SVG flame graph, JSON that `read_profile_json` loads"},
        {"reset", "POST", {page_format}, &H::on_reset, {nullptr, "reset", {}, "Reset the profile"}, "forgets the profile"},
        {"timeline/start", "POST", {{"max_spans", Param::whole, "spans per thread", 65536, 1, 16777216}, page_format},
         &H::on_timeline_start, {nullptr, nullptr, {{"max_spans", "max spans per thread", "65536"}}, "Start"},
         "starts the timeline (every scope takes the slow path while it runs)"},
        {"timeline/stop", "POST", {page_format}, &H::on_timeline_stop, {nullptr, nullptr, {}, "Stop"},
         "stops it; what it recorded stays readable"},
        {"timeline", "GET", {}, &H::on_timeline, {}, "Chrome trace-event JSON for ui.perfetto.dev or chrome://tracing"},
        {"recorder/start", "POST",
         {pattern, regex, cost, {"keep", Param::whole, "traces", 16, 1, 1000}, depth, page_format}, &H::on_recorder_start,
         {nullptr, "recorder", {pattern_field, regex_field, {"cost", "min cost (ms)", "10"}, {"keep", "keep", "16"}}, "Start"},
         "starts the flight recorder: every matching invocation costing at least `cost` is captured, the newest "
         "`keep` kept; 409 while one runs"},
        {"recorder/stop", "POST", {page_format}, &H::on_recorder_stop, {nullptr, nullptr, {}, "Stop"},
         "stops it (409 if none runs); its traces stay readable until the next start"},
        {"recorder", "GET", {all_formats}, &H::on_recorder, {},
         "the kept traces, oldest first, as Arthas trees, after a line with the counts (recorded, kept, evicted); "
         "200 with a hint when none was started"},
        // Its form is on the page only in a program with XRay, and searches all: index_page writes it.
        {"xray", "GET", {{"search", Param::free_text, "a pattern over names; `*`"}, regex, {"all", Param::flag}, all_formats},
         &H::on_xray, {},
         "in a program with XRay: how many functions are instrumented, patchable and patched now, then one line per "
         "matching function (at most 1000): `patched`/`idle`/`never` (not patchable), its name, and the running sessions "
         "that patch it (`by trace 'db::DB::Write' (depth 2)`); `all=1` for the idle ones too. Without XRay: a line saying so"},
    };
    return table;
}

TRACETREE_DETAIL_RUNTIME_API std::string Table::form(const std::string& prefix, const char* name) {
    const Endpoint* endpoint = nullptr;
    for (const Endpoint& candidate : endpoints())
        if (std::string_view(candidate.name) == name) endpoint = &candidate;
    const Form& form = endpoint->form;
    std::string out = form.heading == nullptr ? "" : std::string("<h2>") + form.heading + "</h2>\n";
    out += "<form method=\"" + lowercase(endpoint->method) + "\" action=\"" + prefix + '/' + name + '"' +
           (form.id == nullptr ? "" : " id=\"" + std::string(form.id) + "-form\"") + '>';
    for (const Field& field : form.fields) {
        Param::Kind kind = Param::free_text;
        for (const Param& param : endpoint->params)
            if (std::string_view(param.name) == field.name) kind = param.kind;
        if (kind == Param::flag)
            out += std::string("<label><input type=\"checkbox\" name=\"") + field.name + "\" value=\"1\"> " + field.label + "</label> ";
        else
            out += std::string("<label>") + field.label + " <input type=\"text\" name=\"" + field.name + "\" value=\"" +
                   field.value + "\"" + (kind == Param::whole || kind == Param::decimal ? " class=\"n\"" : "") + "></label>" +
                   (kind == Param::required ? " " : "");
    }
    return out + "<input type=\"hidden\" name=\"format\" value=\"html\">" + (form.fields.empty() ? "" : " ") +
           "<button type=\"submit\">" + form.button + "</button></form>\n";
}

}  // namespace admin
}  // namespace detail

// ---- definitions ------------------------------------------------------------------------------

TRACETREE_DETAIL_RUNTIME_API void CancelToken::cancel() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) return;
    cancelled_ = true;
    if (on_cancel_) on_cancel_();
}

TRACETREE_DETAIL_RUNTIME_API bool CancelToken::cancelled() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cancelled_;
}

TRACETREE_DETAIL_RUNTIME_API AdminHandler::AdminHandler(AdminOptions options) : options_(std::move(options)) {
    const std::string& prefix = options_.prefix;
    if (!prefix.empty() && (prefix.front() != '/' || prefix.back() == '/'))
        throw std::invalid_argument("tracetree: AdminOptions::prefix must start with '/' and not end with one, or be empty; got '" +
                                    prefix + "'");
    for (const char c : prefix)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '-' || c == '_' ||
              c == '.' || c == '~'))
            throw std::invalid_argument("tracetree: AdminOptions::prefix may hold only letters, digits and / - _ . ~");
    for (const std::string& host : options_.allowed_hosts) {
        const std::optional<std::string> name = detail::admin::host_name(host);
        if (!name || *name != host || (host.find(':') != std::string::npos && host.front() != '['))
            throw std::invalid_argument("tracetree: AdminOptions::allowed_hosts holds host names in lower case without a port "
                                        "(IPv6 in brackets); got '" + host + "'");
    }
    for (const std::string& cidr : options_.allowed_peers)
        if (!detail::admin::parse_network(cidr))
            throw std::invalid_argument("tracetree: AdminOptions::allowed_peers holds addresses or networks in CIDR "
                                        "notation (\"10.0.0.0/8\", \"fd00::/8\", \"192.0.2.7\"); got '" + cidr + "'");
    if (options_.max_waiting < 1 || options_.max_waiting > 32)
        throw std::invalid_argument("tracetree: AdminOptions::max_waiting must be between 1 and 32");
    if (options_.max_timeout < std::chrono::seconds(1) || options_.max_timeout > std::chrono::hours(1))
        throw std::invalid_argument("tracetree: AdminOptions::max_timeout must be between 1 s and 1 h");
    if (options_.max_n < 1 || options_.max_n > 10000)
        throw std::invalid_argument("tracetree: AdminOptions::max_n must be between 1 and 10000");
    if (options_.max_body < 1024 || options_.max_body > (std::size_t{1} << 30))
        throw std::invalid_argument("tracetree: AdminOptions::max_body must be between 1 KiB and 1 GiB");
}

TRACETREE_DETAIL_RUNTIME_API AdminHandler::~AdminHandler() {
    shutdown();
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return calls_ == 0; });
}

TRACETREE_DETAIL_RUNTIME_API void AdminHandler::shutdown() {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
    for (Waiter* waiter : waiters_) {
        waiter->cancelled = true;
        if (waiter->stop) waiter->stop();
    }
}

TRACETREE_DETAIL_RUNTIME_API std::size_t AdminHandler::waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t armed = 0;
    for (const Waiter* waiter : waiters_) armed += waiter->stop ? 1u : 0u;
    return armed;
}

TRACETREE_DETAIL_RUNTIME_API bool AdminHandler::wait_for_waiting(std::size_t count, Nanos timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
        std::size_t armed = 0;
        for (const Waiter* waiter : waiters_) armed += waiter->stop ? 1u : 0u;
        return armed == count;
    });
}

TRACETREE_DETAIL_RUNTIME_API bool AdminHandler::handles(std::string_view target) const {
    const std::string_view path = target.substr(0, target.find('?'));
    if (path.compare(0, options_.prefix.size(), options_.prefix) != 0) return false;
    return path.size() == options_.prefix.size() || path[options_.prefix.size()] == '/';
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::handle(const AdminRequest& request) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        ++calls_;
    }
    AdminResponse out;
    try {
        out = dispatch(request);
    } catch (const detail::admin::Refusal& refusal) {
        out = detail::admin::text(std::to_string(refusal.status) + " " + detail::admin::status_text(refusal.status) + ": " +
                                      refusal.message + "\n",
                                  refusal.status);
        out.headers.insert(out.headers.end(), refusal.headers.begin(), refusal.headers.end());
    } catch (const std::bad_alloc&) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            --calls_;
        }
        changed_.notify_all();
        throw;
    } catch (const std::exception& e) {  // a renderer's or the recorder's: the caller's server goes on
        out = detail::admin::text(std::string("500 Internal Server Error: ") + e.what() + "\n", 500);
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        --calls_;
    }
    changed_.notify_all();
    return out;
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::dispatch(const AdminRequest& request) {
    using namespace detail::admin;
    if (std::optional<AdminResponse> refused = check_caller(request, options_)) return *refused;
    const std::size_t question = request.target.find('?');
    const std::string path = request.target.substr(0, question);
    if (!handles(path)) refuse(404, "not under " + (options_.prefix.empty() ? std::string("/") : options_.prefix));
    std::string endpoint = path.substr(options_.prefix.size());
    if (!endpoint.empty() && endpoint.front() == '/') endpoint.erase(0, 1);

    const Endpoint* route = nullptr;
    for (const Endpoint& candidate : Table::endpoints())
        if (endpoint == candidate.name) route = &candidate;
    if (route == nullptr)
        refuse(404, "no endpoint '" + detail::views::plain_text(endpoint.substr(0, 64)) + "'; the index " +
                        (options_.prefix.empty() ? std::string("/") : options_.prefix + "/") + " lists them");
    if (request.method != route->method)
        refuse(405, std::string("use ") + route->method + " for " + (endpoint.empty() ? "the index" : endpoint) +
                        (std::string(route->method) == "POST" ? " (it changes state)" : ""),
               {{"Allow", route->method}});

    Params params;
    if (question != std::string::npos) parse_form(std::string_view(request.target).substr(question + 1), "query", params);
    if (!request.body.empty()) {
        if (request.body.size() > 65536) refuse(413, "a body of at most 64 KiB");
        if (!form_content_type(request.content_type))
            refuse(415, "a body holds parameters as application/x-www-form-urlencoded (parameters such as "
                        "'; charset=utf-8' may follow, nothing else)");
        parse_form(request.body, "body", params);
    }

    const Reader reader(params, *route, options_);
    return (this->*route->handler)(request, reader);
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_index(const AdminRequest&, const Reader&) {
    return detail::admin::html_response(index_page());
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_profile(const AdminRequest&, const Reader& reader) {
    using namespace detail::admin;
    const std::string format = reader.choice("format");
    const bool threads = reader.flag("threads");
    Profile profile = tracetree::profile();
    if (!threads && format != "svg" && format != "folded") {  // merged in place: no second copy of the threads
        ThreadProfile all = profile.merged();
        profile.threads.clear();
        profile.threads.push_back(std::move(all));
    }
    const Profile& shown = profile;
    // Held to max_body as a call's values are: the writers run whole, the buffer keeps what fits.
    BoundedBuffer kept(options_.max_body);
    std::ostream out(&kept);
    if (format == "svg" || format == "folded") {
        FlameGraphOptions svg;
        svg.thread_frames = threads;
        FoldedOptions folded;
        folded.thread_frames = threads;
        if (format == "svg") write_flamegraph_svg(out, profile, svg);
        else write_folded(out, profile, folded);
        return format == "svg" ? response("image/svg+xml", whole(kept, options_.max_body, "the flame graph"))
                               : text(cut_lines(kept, options_.max_body, "the folded stacks"));
    }
    if (format == "json") {
        tracetree::write_json(out, shown);
        return response("application/json", whole(kept, options_.max_body, "the profile's JSON"));
    }
    if (format == "human") render_human(out, shown);
    else render(out, shown, RenderOptions().colour(Colour::never).hot_marker().cpu_marker().tid_marker(format == "html"));
    return answer(format, options_.prefix, "profile", cut_lines(kept, options_.max_body, "the profile"), "");
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_timeline(const AdminRequest&, const Reader&) {
    std::ostringstream out;
    write_chrome_trace(out, tracetree::timeline());
    return detail::admin::response("application/json", out.str());
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_timeline_start(const AdminRequest&, const Reader& reader) {
    const std::string format = reader.choice("format");
    const std::uint64_t spans = reader.whole("max_spans");
    start_timeline(static_cast<std::size_t>(spans));
    return detail::admin::answer(format, options_.prefix, "timeline",
                                 "timeline started: at most " + std::to_string(spans) + " spans per thread; GET " +
                                     options_.prefix + "/timeline for Chrome/Perfetto JSON\n",
                                 "");
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_timeline_stop(const AdminRequest&, const Reader& reader) {
    const std::string format = reader.choice("format");
    stop_timeline();
    return detail::admin::answer(format, options_.prefix, "timeline", "timeline stopped (what it recorded stays readable)\n", "");
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_reset(const AdminRequest&, const Reader& reader) {
    const std::string format = reader.choice("format");
    tracetree::reset();
    return detail::admin::answer(format, options_.prefix, "reset", "profile reset: every thread starts counting again\n", "");
}

// trace, stack, watch and monitor: start a session, wait for its values, answer with them.
TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_wait(const AdminRequest& request, const Reader& reader) {
    using namespace detail::admin;
    const std::string endpoint = reader.endpoint().name;
    const bool is_monitor = endpoint == "monitor";
    const std::string pattern = reader.required("pattern");
    const bool regex = reader.flag("regex");
    const std::string format = reader.choice("format");
    const double max_seconds = std::chrono::duration<double>(options_.max_timeout).count();
    const std::uint64_t n = reader.whole("n");
    const double cost_ms = is_monitor ? 0 : reader.decimal("cost");
    double seconds = 0;
    if (is_monitor) {
        const double interval = reader.decimal("interval");
        if (interval * static_cast<double>(n) > max_seconds)
            bad("n", "interval * n must be at most " + number(max_seconds) + " s (AdminOptions::max_timeout)");
        seconds = interval;
    } else {
        seconds = reader.decimal("timeout");
    }
    std::vector<std::string> value_names;
    if (const std::optional<std::string> names = endpoint == "watch" ? reader.get("values") : std::nullopt) {
        std::string_view list = *names;
        while (true) {
            const std::size_t comma = list.find(',');
            const std::string name(list.substr(0, comma));
            if (name.empty()) bad("values", "a comma-separated list of names, none empty");
            value_names.push_back(name);
            if (value_names.size() > 64) bad("values", "at most 64 names");
            if (comma == std::string_view::npos) break;
            list.remove_prefix(comma + 1);
        }
    }

    const int depth = endpoint == "trace" ? static_cast<int>(reader.whole("depth")) : detail::kDefaultCallDepth;  // only trace takes it
    refuse_unknown(pattern, regex);

    Waiter waiter(*this, request.cancel.get());
    const auto started = std::chrono::steady_clock::now();
    const Nanos min_cost = from_millis(cost_ms);
    // The session, built here: a PatternError names the pattern; any other refusal is the recorder's
    // limit on sessions running at once.
    const auto open = [&](auto make) {
        try {
            return make();
        } catch (const PatternError& e) {
            bad("pattern", e.what());
        } catch (const std::invalid_argument& e) {
            refuse(503, e.what(), {{"Retry-After", "1"}});
        }
    };
    // Only the format asked is built: a deep trace's text and JSON together cost twice the memory.
    const bool as_json = format == "json";
    BoundedBuffer values(options_.max_body);
    std::ostream out(&values);
    const RenderOptions plain = RenderOptions().colour(Colour::never).hot_marker().cpu_marker().tid_marker(format == "html");
    // Adds one value; false, leaving it out, when it does not fit in max_body.
    const auto add = [&](const auto& value, std::size_t index) {
        const std::size_t before = values.size();
        if (as_json) {
            out << (index == 0 ? "\n" : ",\n");
            write_json_value(out, value);
        } else {
            render(out, value, plain);
        }
        if (!values.overflowed()) return true;
        values.rewind(before);
        return false;
    };
    std::size_t got = 0, monitor_rows = 0;
    bool cut = false, cut_short = false;
    Outcome outcome = Outcome::complete;

    // Collects up to n values from a session until the deadline, the cancel or shutdown.
    const auto collect = [&](auto& session) {
        waiter.arm([&session] { session.stop(); });
        const auto deadline = started + from_seconds(seconds);
        while (got < n) {
            const auto now = std::chrono::steady_clock::now();
            if (now >= deadline) break;
            auto value = session.next(std::chrono::duration_cast<Nanos>(deadline - now));
            if (!value || (cut = !add(*value, got))) break;
            ++got;
        }
        waiter.release();
        outcome = cut ? Outcome::cut : got == n ? Outcome::complete : waiter.was_cancelled() ? Outcome::cancelled : Outcome::timed_out;
    };

    if (endpoint == "trace") {
        auto session = open([&] { return TraceSession(TraceRequest(pattern).regex(regex).min_cost(min_cost).limit(n).depth(depth)); });
        collect(session);
    } else if (endpoint == "stack") {
        auto session = open([&] { return StackSession(StackRequest(pattern).regex(regex).min_cost(min_cost).limit(n)); });
        collect(session);
    } else if (endpoint == "watch") {
        auto session = open(
            [&] { return WatchSession(WatchRequest(pattern).regex(regex).min_cost(min_cost).limit(n).values(value_names)); });
        collect(session);
    } else {
        auto monitor = open([&] { return Monitor(MonitorRequest(pattern).regex(regex).interval(from_seconds(seconds))); });
        waiter.arm([&monitor] { monitor.stop(); });
        for (; got < n; ++got) {
            std::optional<MonitorInterval> interval = monitor.next();
            if (!interval || (cut = !add(*interval, got))) break;
            monitor_rows += interval->rows.size();
            cut_short = interval->cut_short;  // stopped by a cancel or shutdown: the interval under way
        }
        waiter.release();
        outcome = cut ? Outcome::cut : got == n && !cut_short ? Outcome::complete : Outcome::cancelled;
    }

    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const std::string what = std::to_string(got) + " of " + std::to_string(n) + (is_monitor ? " interval(s)" : " invocation(s)") +
                             " of '" + detail::views::plain_text(pattern) + "'" +
                             (is_monitor || cost_ms == 0 ? std::string() : " costing at least " + number(cost_ms) + " ms") +
                             (cut_short ? ", the last one cut short" : "");
    const char* kind = endpoint == "trace" ? "traces" : endpoint == "stack" ? "stacks" : endpoint == "watch" ? "watches" : "intervals";
    std::string& body = values.text();
    if (as_json) {
        std::ostringstream head;
        head << "{\"format\":\"tracetree-admin\",\"kind\":\"" << kind << "\",\"pattern\":" << detail::views::json_string(pattern)
             << ",\"limit\":" << n << ",\"outcome\":\"" << outcome_name(outcome) << '"'
             << (cut ? ",\"max_body\":" + std::to_string(options_.max_body) : std::string()) << ",\"" << kind << "\":[";
        body.insert(0, head.str());
        body += "\n]}\n";
        return answer(format, options_.prefix, endpoint + " " + pattern, "", body);
    }
    if (outcome == Outcome::complete && !is_monitor)
        body += "Command execution times exceed limit: " + std::to_string(n) +
                ", so command will exit. You can set it with the n= parameter.\n";
    else if (outcome == Outcome::timed_out)
        body += "Timed out after " + number(seconds) + " s: " + what + ".\n";
    else if (outcome == Outcome::cancelled)
        body += "Cancelled after " + number(waited) + " s: " + what + ".\n";
    else if (outcome == Outcome::cut)
        body += "Cut at " + std::to_string(options_.max_body) + " bytes (AdminOptions::max_body): " + what +
                "; the next did not fit.\n";
    if (is_monitor ? got > 0 && monitor_rows == 0 : got == 0 && outcome == Outcome::timed_out)
        body += detail::admin::unmatched_note(pattern, regex) + detail::admin::xray_failure_note();
    return answer(format, options_.prefix, endpoint + " " + pattern, body, "");
}

// The program's XRay functions (xray/xray.hpp): how many, which are patched now and for which
// sessions, and a search by pattern over their names.
TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_xray(const AdminRequest&, const Reader& reader) {
    using namespace detail::admin;
    const std::string search = reader.get("search").value_or("*");
    const bool regex = reader.flag("regex");
    const bool all = reader.flag("all");  // every match, not only the patched ones
    const std::string format = reader.choice("format");
    std::optional<Pattern> pattern;
    try {
        pattern.emplace(search, regex ? PatternSyntax::regex : PatternSyntax::glob);
    } catch (const PatternError& e) {
        bad("search", e.what());
    }
    auto* const rows_of = detail::g_xray_rows.load();
    if (rows_of == nullptr)
        return answer(format, options_.prefix, "xray", "XRay: not in this program (docs/xray.md: build with clang++ -fxray-instrument and include tracetree/xray/xray.hpp)\n",
                      "{\"xray\":false}");
    std::vector<detail::XRayRow> rows;
    try {
        rows_of(rows);
    } catch (const std::exception& e) {
        refuse(503, std::string("XRay: ") + e.what());
    }
    std::size_t patchable = 0, patched = 0, shown = 0;
    std::ostringstream plain, json;
    json << "{\"xray\":true,\"functions\":[";
    for (const detail::XRayRow& row : rows) {
        patchable += row.patchable;
        patched += row.patched;
        // Names as patterns see them: without "()".
        if (!pattern->matches(row.name.substr(0, row.name.size() - 2)) || (!all && !row.patched) || shown == 1000) continue;
        plain << (row.patched ? "patched    " : row.patchable ? "idle       " : "never      ") << row.name;
        if (!row.wanted_by.empty()) plain << "  by " << row.wanted_by;
        plain << '\n';
        json << (shown == 0 ? "" : ",") << "{\"name\":" << detail::views::json_string(row.name) << ",\"patchable\":" << (row.patchable ? "true" : "false")
             << ",\"patched\":" << (row.patched ? "true" : "false") << ",\"wanted_by\":" << detail::views::json_string(row.wanted_by) << '}';
        ++shown;
    }
    json << "],\"instrumented\":" << rows.size() << ",\"patchable\":" << patchable << ",\"patched\":" << patched << '}';
    const std::string head = "XRay: " + std::to_string(rows.size()) + " functions instrumented, " + std::to_string(patchable) +
                             " patchable, " + std::to_string(patched) + " patched now; " + std::to_string(shown) + " shown (" +
                             (all ? "all" : "patched") + " matching '" + detail::views::plain_text(search) + "'" +
                             (shown == 1000 ? ", the first 1000" : "") + "; all=1 for idle ones too)\n";
    return answer(format, options_.prefix, "xray", head + plain.str(), json.str());
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_recorder_start(const AdminRequest&, const Reader& reader) {
    using namespace detail::admin;
    std::lock_guard<std::mutex> lock(recorder_mutex_);
    const std::string pattern = reader.required("pattern");
    const bool regex = reader.flag("regex");
    const double cost_ms = reader.decimal("cost");
    const std::uint64_t keep = reader.whole("keep");
    const int depth = static_cast<int>(reader.whole("depth"));
    const std::string format = reader.choice("format");
    refuse_unknown(pattern, regex);
    if (recorder_running_)
        refuse(409, "a flight recorder is running for '" + detail::views::plain_text(recorder_pattern_) + "'; POST " +
                        options_.prefix + "/recorder/stop first");
    try {
        recorder_.emplace(RecorderRequest(pattern).regex(regex).min_cost(from_millis(cost_ms)).keep(static_cast<std::size_t>(keep)).depth(depth));
    } catch (const PatternError& e) {
        bad("pattern", e.what());
    } catch (const std::invalid_argument& e) {
        refuse(503, e.what(), {{"Retry-After", "1"}});
    }
    recorder_pattern_ = pattern;
    recorder_cost_ = from_millis(cost_ms);
    recorder_running_ = true;
    return answer(format, options_.prefix, "flight recorder",
                  "flight recorder started: keeps the last " + std::to_string(keep) + " invocation(s) of '" +
                      detail::views::plain_text(pattern) + "' costing at least " + number(cost_ms) + " ms; GET " +
                      options_.prefix + "/recorder shows them\n",
                  "");
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_recorder_stop(const AdminRequest&, const Reader& reader) {
    using namespace detail::admin;
    std::lock_guard<std::mutex> lock(recorder_mutex_);
    const std::string format = reader.choice("format");
    if (!recorder_running_) refuse(409, "no flight recorder is running");
    recorder_->stop();
    recorder_running_ = false;
    return answer(format, options_.prefix, "flight recorder",
                  "flight recorder stopped; the traces it kept stay readable until the next start\n", "");
}

TRACETREE_DETAIL_RUNTIME_API AdminResponse AdminHandler::on_recorder(const AdminRequest&, const Reader& reader) {
    using namespace detail::admin;
    std::lock_guard<std::mutex> lock(recorder_mutex_);
    const std::string format = reader.choice("format");
    std::ostringstream text_out, json;
    std::vector<Trace> kept;
    json << "{\"format\":\"tracetree-admin\",\"kind\":\"recorder\",\"running\":" << (recorder_running_ ? "true" : "false");
    if (!recorder_) {
        text_out << "No flight recorder has been started: POST " << options_.prefix
                 << "/recorder/start?pattern=P&cost=MS&keep=N starts one.\n";
    } else {
        kept = recorder_->recent();
        text_out << "Flight recorder for '" << detail::views::plain_text(recorder_pattern_) << "' costing at least "
                 << number(std::chrono::duration<double, std::milli>(recorder_cost_).count()) << " ms ("
                 << (recorder_running_ ? "running" : "stopped") << "): " << recorder_->recorded() << " recorded, "
                 << kept.size() << " kept, " << recorder_->evicted() << " evicted; oldest first.\n\n";
        json << ",\"pattern\":" << detail::views::json_string(recorder_pattern_) << ",\"min_cost_ns\":" << recorder_cost_.count()
             << ",\"recorded\":" << recorder_->recorded() << ",\"evicted\":" << recorder_->evicted();
    }
    // Only the format asked, and the traces that fit in max_body, oldest first.
    BoundedBuffer values(options_.max_body);
    std::ostream out(&values);
    std::size_t shown = 0;
    for (; shown < kept.size(); ++shown) {
        const std::size_t before = values.size();
        if (format == "json") {
            out << (shown == 0 ? "\n" : ",\n");
            write_json_value(out, kept[shown]);
        } else {
            render(out, kept[shown], RenderOptions().colour(Colour::never).hot_marker().cpu_marker().tid_marker(format == "html"));
        }
        if (!values.overflowed()) continue;
        values.rewind(before);
        break;
    }
    const bool cut = shown < kept.size();
    if (format == "json") {
        json << (cut ? ",\"cut\":true,\"max_body\":" + std::to_string(options_.max_body) : std::string()) << ",\"traces\":["
             << values.text() << "\n]}\n";
        return answer(format, options_.prefix, "flight recorder", "", json.str());
    }
    text_out << values.text();
    if (cut)
        text_out << "Cut at " << options_.max_body << " bytes (AdminOptions::max_body): " << shown << " of " << kept.size()
                 << " kept trace(s) shown; the next did not fit.\n";
    return answer(format, options_.prefix, "flight recorder", text_out.str(), "");
}

TRACETREE_DETAIL_RUNTIME_API std::string AdminHandler::index_page() {
    using detail::admin::html;
    const std::string p = html(options_.prefix);
    const RecorderInfo info = recorder_info();
    const Profile profile = tracetree::profile();
    std::ostringstream body;
    body << "<h1>tracetree</h1>\n<p class=\"note\">version " << html(info.version) << ", recorder in <code>"
         << html(info.module) << "</code>, " << info.threads << " thread(s) recorded, " << info.nodes
         << " nodes allocated. Every endpoint takes <code>format=</code> as listed; see docs/admin.md.</p>\n"
         << "<p id=\"cpu-time\" class=\"note\">Time off CPU in traces: " << html(info.cpu_time_source)
         << (info.cpu_time_note.empty() ? std::string() : " (context switches refused: " + html(info.cpu_time_note) + ")")
         << ".</p>\n";
    if (server_note_) {
        const std::string note = server_note_();
        if (!note.empty()) body << "<p id=\"listener\" class=\"note\">" << html(note) << ".</p>\n";
    }

    using detail::admin::Table;
    for (const char* name : {"trace", "stack", "watch", "monitor"}) body << Table::form(p, name);

    body << "<h2>Profile: everything recorded since the start or the last reset</h2>\n<p>"
         << "<a href=\"" << p << "/profile?format=html\">Arthas text</a> &middot; "
         << "<a href=\"" << p << "/profile?format=html&amp;threads=1\">per thread</a> &middot; "
         << "<a href=\"" << p << "/profile?format=human\">table</a> &middot; "
         << "<a href=\"" << p << "/profile?format=folded\">folded</a> &middot; "
         << "<a href=\"" << p << "/profile?format=svg\">flame graph</a> &middot; "
         << "<a href=\"" << p << "/profile?format=svg&amp;threads=1\">per thread</a> &middot; "
         << "<a href=\"" << p << "/profile?format=json\">JSON</a></p>\n";
    bool recorded = false;
    for (const ThreadProfile& thread : profile.threads) recorded = recorded || !thread.roots.empty();
    if (recorded) {
        detail::admin::BoundedBuffer svg(options_.max_body);  // the page's one part that grows with the profile
        std::ostream svg_out(&svg);
        write_flamegraph_svg(svg_out, profile);
        std::string& inline_svg = svg.text();
        if (inline_svg.compare(0, 5, "<?xml") == 0) inline_svg.erase(0, inline_svg.find('\n') + 1);
        if (svg.overflowed())
            body << "<p id=\"flamegraph\" class=\"note\">The flame graph is " << svg.size() << " bytes, more than "
                 << options_.max_body << " (AdminOptions::max_body): not shown; the folded stacks answer with what fits.</p>\n";
        else
            body << "<figure id=\"flamegraph\">" << inline_svg << "</figure>\n";
    } else {
        body << "<p id=\"flamegraph\" class=\"note\">Nothing recorded yet.</p>\n";
    }

    body << "<h2>Flight recorder: the last slow calls, kept</h2>\n";
    {
        std::lock_guard<std::mutex> lock(recorder_mutex_);
        if (recorder_)
            body << "<p>" << (recorder_running_ ? "Running" : "Stopped") << " for <code>" << html(recorder_pattern_) << "</code>: "
                 << recorder_->recorded() << " recorded, " << recorder_->recorded() - recorder_->evicted() << " kept.</p>\n";
        else
            body << "<p class=\"note\">None started.</p>\n";
    }
    body << "<p><a href=\"" << p << "/recorder?format=html\">the kept traces</a> &middot; <a href=\"" << p
         << "/recorder?format=json\">JSON</a></p>\n"
         << Table::form(p, "recorder/start") << Table::form(p, "recorder/stop");

    if (detail::g_xray_rows.load() != nullptr)  // a program with XRay (xray/xray.hpp)
        body << "<h2>XRay: functions nobody annotated</h2>\n<p><a href=\"" << p << "/xray?format=html\">patched now</a>, and by which "
             << "session &middot; <a href=\"" << p << "/xray?format=json\">JSON</a></p>\n<form method=\"get\" action=\"" << p
             << "/xray\"><label>search <input type=\"text\" name=\"search\" value=\"*\"></label> <input type=\"hidden\" name=\"all\" value=\"1\">"
             << "<input type=\"hidden\" name=\"format\" value=\"html\"> <button type=\"submit\">Search</button></form>\n";

    body << "<h2>Timeline: every scope with its start, for Perfetto</h2>\n<p><a href=\"" << p
         << "/timeline\">Chrome trace JSON</a> (open it in ui.perfetto.dev or chrome://tracing)</p>\n"
         << Table::form(p, "timeline/start") << Table::form(p, "timeline/stop");

    body << "<h2>Reset</h2>\n" << Table::form(p, "reset");
    return detail::admin::page("tracetree", body.str());
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_ADMIN_HANDLER_INL_HPP
