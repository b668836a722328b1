// tracetree admin in a Boost.Beast server, in one line of the session. SPDX-License-Identifier: MIT
//
//   #include <tracetree/admin/beast.hpp>
//   tracetree::AdminHandler admin;  // AdminOptions: prefix, token, allowed_peers, ...
//   // An asynchronous session, once a request is read (the completion runs on the socket's executor):
//   if (tracetree::async_serve_admin(admin, request, stream.socket(), [self](auto response) { self->send(std::move(response)); })) return;
//   // A session on a thread of its own (Beast's synchronous servers):
//   if (auto response = tracetree::serve_admin(admin, request, socket)) { http::write(socket, *response); continue; }
//
// Both answer false / nothing for a target outside the handler's prefix, and otherwise fill
// AdminRequest::peer from the socket's remote endpoint (so the loopback rule holds on a server
// listening on 0.0.0.0) and cancel a waiting call when its client hangs up, which frees its place
// among AdminOptions::max_waiting at once. serve_admin() blocks while a call waits (a trace waits for
// its invocations); async_serve_admin() runs the call on a thread of its own, so the io_context's
// threads never wait, and holds work on the socket's executor until the completion has been posted.
// The session keeps the socket open until the completion runs (capture it, as above). When the server
// stops, call admin.shutdown(): the waiting calls end at once. The handler must outlive the
// io_context's run(). Only the file that serves it includes this header; Boost 1.74 (Debian 12) on.
#ifndef TRACETREE_ADMIN_BEAST_HPP
#define TRACETREE_ADMIN_BEAST_HPP

#include "handler.hpp"
#include "socket.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

TRACETREE_BEGIN_NAMESPACE

namespace detail {
namespace admin {

namespace beast_http = boost::beast::http;
using BeastRequest = beast_http::request<beast_http::string_body>;
using BeastResponse = beast_http::response<beast_http::string_body>;

inline std::string beast_text(boost::beast::string_view text) { return std::string(text.data(), text.size()); }

// The request as the handler reads it, `peer` being the socket's remote endpoint.
inline AdminRequest from_beast(const BeastRequest& request, const boost::asio::ip::tcp::endpoint& peer) {
    AdminRequest out;
    out.peer = peer.port() == 0 ? std::string() : peer_text(peer.address().to_string(), peer.port());
    out.method = beast_text(request.method_string());
    out.target = beast_text(request.target());
    // More than one Host makes the handler's Host check see a list it refuses.
    const auto hosts = request.equal_range(beast_http::field::host);
    for (auto it = hosts.first; it != hosts.second; ++it) out.host += (out.host.empty() ? "" : ",") + beast_text(it->value());
    out.origin = beast_text(request[beast_http::field::origin]);
    out.authorization = beast_text(request[beast_http::field::authorization]);
    out.content_type = beast_text(request[beast_http::field::content_type]);
    out.body = request.body();
    return out;
}

inline BeastResponse to_beast(AdminResponse&& in, unsigned version, bool keep_alive) {
    BeastResponse out;
    out.version(version);
    out.result(static_cast<unsigned>(in.status));
    out.set(beast_http::field::content_type, in.content_type);
    for (const auto& header : in.headers) out.set(header.first, header.second);
    out.keep_alive(keep_alive);
    out.body() = std::move(in.body);
    out.prepare_payload();
    return out;
}

// The call, on the thread that runs it, with the hang-up watch on `fd` around it.
inline BeastResponse beast_call(AdminHandler& admin, AdminRequest request, int fd, unsigned version, bool keep_alive) {
    request.cancel = std::make_shared<CancelToken>();
    AdminResponse out;
    {
        const HangupWatch watch(fd, request.cancel);
        out = admin.handle(request);
    }
    return to_beast(std::move(out), version, keep_alive);
}

template <class Executor>
AdminRequest beast_request(const BeastRequest& request, boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>& socket) {
    boost::system::error_code error;
    const boost::asio::ip::tcp::endpoint peer = socket.remote_endpoint(error);
    return from_beast(request, error ? boost::asio::ip::tcp::endpoint() : peer);  // port 0: no peer, refused
}

}  // namespace admin
}  // namespace detail

// Blocks while the call waits; nothing when the target is not under the handler's prefix.
template <class Executor>
std::optional<detail::admin::BeastResponse> serve_admin(AdminHandler& admin, const detail::admin::BeastRequest& request,
                                                        boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>& socket) {
    const boost::beast::string_view target = request.target();
    if (!admin.handles(std::string_view(target.data(), target.size()))) return std::nullopt;
    return detail::admin::beast_call(admin, detail::admin::beast_request(request, socket), socket.native_handle(), request.version(),
                                     request.keep_alive());
}

// Starts the call on a thread of its own and returns true; `completion(response)` then runs on the
// socket's executor. False, doing nothing, when the target is not under the handler's prefix.
template <class Executor, class Completion>
bool async_serve_admin(AdminHandler& admin, const detail::admin::BeastRequest& request,
                       boost::asio::basic_stream_socket<boost::asio::ip::tcp, Executor>& socket, Completion completion) {
    const boost::beast::string_view target = request.target();
    if (!admin.handles(std::string_view(target.data(), target.size()))) return false;
    // Everything the thread needs from the socket is read here, on the session's executor: a socket
    // object is not for two threads at once (the thread only polls its descriptor).
    auto work = boost::asio::make_work_guard(socket.get_executor());
    detail::thread_without_signals([&admin, in = detail::admin::beast_request(request, socket), fd = socket.native_handle(),
                 version = request.version(), keep_alive = request.keep_alive(), completion = std::move(completion),
                 work = std::move(work)]() mutable {
        detail::admin::BeastResponse response = detail::admin::beast_call(admin, std::move(in), fd, version, keep_alive);
        boost::asio::post(work.get_executor(), [completion = std::move(completion), response = std::move(response)]() mutable {
            completion(std::move(response));
        });
        work.reset();  // after the post: the io_context's run() does not return before the completion runs
    }).detach();
    return true;
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_ADMIN_BEAST_HPP
