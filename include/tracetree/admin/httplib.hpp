// tracetree admin on a cpp-httplib server, in one line. SPDX-License-Identifier: MIT
//
//   #include <tracetree/admin/httplib.hpp>
//   tracetree::AdminHandler admin;           // AdminOptions: prefix, token, allowed_peers, ...
//   tracetree::mount_admin(server, admin);   // httplib::Server server; curl http://127.0.0.1:PORT/debug/tracetree/
//
// Routes every method under the handler's prefix to it, fills AdminRequest::peer from the request's
// remote address (so the loopback rule holds on a server listening on 0.0.0.0), and cancels a waiting
// call when its client hangs up, which frees its place among AdminOptions::max_waiting at once.
// httplib runs handlers on its thread pool (CPPHTTPLIB_THREAD_POOL_COUNT threads by default): a trace
// holds one while it waits, up to max_waiting of them, so keep the pool larger than that.
// When the server stops, call admin.shutdown() too: httplib's stop() waits for its handlers, and a
// waiting call ends only at its timeout otherwise. The handler must outlive the server's listen().
// Only the file that mounts it includes this header (and httplib.h); cpp-httplib 0.11 (Debian 12) on.
#ifndef TRACETREE_ADMIN_HTTPLIB_HPP
#define TRACETREE_ADMIN_HTTPLIB_HPP

#include "handler.hpp"
#include "socket.hpp"

#include <httplib.h>

#include <cstdlib>
#include <dirent.h>
#include <memory>
#include <optional>
#include <string>
#include <sys/socket.h>

TRACETREE_BEGIN_NAMESPACE

void mount_admin(httplib::Server& server, AdminHandler& admin);

namespace detail {
namespace admin {

// The request as the handler reads it. httplib has read the body and split the query; the handler
// parses the target as received again, so it sees what any other server would give it.
inline AdminRequest from_httplib(const httplib::Request& request) {
    AdminRequest out;
    out.peer = request.remote_addr.empty() ? std::string() : peer_text(request.remote_addr, request.remote_port);
    out.method = request.method;
    out.target = request.target;
    // More than one Host makes the handler's Host check see a list it refuses.
    for (std::size_t i = 0; i < request.get_header_value_count("Host"); ++i)
        out.host += (i == 0 ? "" : ",") + request.get_header_value("Host", i);
    out.origin = request.get_header_value("Origin");
    out.authorization = request.get_header_value("Authorization");
    out.content_type = request.get_header_value("Content-Type");
    out.body = request.body;
    return out;
}

inline void to_httplib(AdminResponse&& in, httplib::Response& out) {
    out.status = in.status;
    for (const auto& header : in.headers) out.set_header(header.first.c_str(), header.second);
    out.set_content(std::move(in.body), in.content_type.c_str());
}

// The socket a request arrived on. httplib hands its handlers no socket (0.11 to 0.18), so it is found
// among the process's descriptors by the connection's two ends, which no other open socket shares;
// -1 when it is not there (no /proc, or a library that leaves local_addr empty): no hang-up watch then.
inline bool same_end(const sockaddr_storage& end, const std::string& address, int port) {
    const std::string text = peer_text(end);
    const std::optional<Address> a = peer_address(text), b = parse_address(address);
    return a && b && *a == *b && text.substr(text.rfind(':') + 1) == std::to_string(port);
}

inline int httplib_socket(const httplib::Request& request) {
    if (request.local_addr.empty() || request.remote_addr.empty()) return -1;
    DIR* const fds = ::opendir("/proc/self/fd");
    if (fds == nullptr) return -1;
    int found = -1;
    while (const dirent* entry = ::readdir(fds)) {
        char* end = nullptr;
        const long fd = std::strtol(entry->d_name, &end, 10);
        if (end == entry->d_name || *end != '\0' || fd == ::dirfd(fds)) continue;
        sockaddr_storage local{}, peer{};
        socklen_t local_size = sizeof local, peer_size = sizeof peer;
        const int descriptor = static_cast<int>(fd);
        if (::getsockname(descriptor, reinterpret_cast<sockaddr*>(&local), &local_size) == 0 &&
            ::getpeername(descriptor, reinterpret_cast<sockaddr*>(&peer), &peer_size) == 0 &&
            same_end(local, request.local_addr, request.local_port) && same_end(peer, request.remote_addr, request.remote_port)) {
            found = descriptor;
            break;
        }
    }
    ::closedir(fds);
    return found;
}

}  // namespace admin
}  // namespace detail

inline void mount_admin(httplib::Server& server, AdminHandler& admin) {
    std::string pattern;  // httplib matches the decoded path against a regex: the prefix, escaped
    for (const char c : admin.prefix()) pattern += c == '.' ? std::string("\\.") : std::string(1, c);
    pattern += "(/.*)?";
    const httplib::Server::Handler handler = [&admin](const httplib::Request& request, httplib::Response& response) {
        AdminRequest in = detail::admin::from_httplib(request);
        in.cancel = std::make_shared<CancelToken>();
        AdminResponse out;
        {
            const detail::admin::HangupWatch watch(detail::admin::httplib_socket(request), in.cancel);
            out = admin.handle(in);
        }
        detail::admin::to_httplib(std::move(out), response);
    };
    // Every method httplib routes, so that a wrong one gets the handler's 405 rather than a 404.
    server.Get(pattern, handler).Post(pattern, handler).Put(pattern, handler).Patch(pattern, handler);
    server.Delete(pattern, handler).Options(pattern, handler);
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_ADMIN_HTTPLIB_HPP
