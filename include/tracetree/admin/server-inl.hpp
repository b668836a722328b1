// tracetree admin server, defined: server.hpp's listener. SPDX-License-Identifier: MIT
//
// Included at the end of admin/server.hpp, never on its own, as admin/handler-inl.hpp is at the end
// of handler.hpp: header-only in every file that includes it, else in the tracetree-runtime library
// only. Reading order: the HTTP helpers, the server's definitions, then TRACETREE_ADMIN's listener.
#ifndef TRACETREE_ADMIN_SERVER_INL_HPP
#define TRACETREE_ADMIN_SERVER_INL_HPP

#include "handler-inl.hpp"  // the handler's helpers: status_text, split_authority, plain_text
#include "socket.hpp"
#include "../text/text.hpp"  // lowercase, trim_ows

#include <algorithm>  // std::min, std::max: the accept back-off
#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>  // pthread_atfork: TRACETREE_ADMIN's listener in a forked child
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>  // fstat: the listener's descriptors are still its own
#include <thread>
#include <unistd.h>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

namespace detail {
namespace admin {

// A descriptor's file and its identity now; invalid when it is closed.
inline FileId file_id(int fd) {
    struct stat status;
    if (fd < 0 || ::fstat(fd, &status) != 0) return {};
    return {status.st_dev, status.st_ino, true};
}

using ServerClock = std::chrono::steady_clock;

// The value of header `name` (lower case) in `head`, its lines after the request line; `count` is
// how many times it occurs.
inline std::string header_value(std::string_view head, std::string_view name, int& count) {
    std::string value;
    count = 0;
    for (std::size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size();) {
        const std::size_t end = head.find("\r\n", at + 2);
        const std::string_view line = head.substr(at + 2, end - at - 2);
        at = end;
        const std::size_t colon = line.find(':');
        if (colon == std::string_view::npos || lowercase(line.substr(0, colon)) != name) continue;
        if (count++ == 0) value = std::string(trim_ows(line.substr(colon + 1)));
    }
    return value;
}

inline std::string http_response(int status, const std::string& content_type,
                                 const std::vector<std::pair<std::string, std::string>>& headers, const std::string& body) {
    std::string out = "HTTP/1.1 " + std::to_string(status) + ' ' + status_text(status) + "\r\nContent-Type: " + content_type +
                      "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n";
    for (const auto& header : headers) out += header.first + ": " + header.second + "\r\n";
    return out + "\r\n" + body;
}

inline int poll_timeout(ServerClock::time_point deadline, ServerClock::time_point now) {  // ms, rounded up
    if (deadline <= now) return 0;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    return ms > 60000 ? 60000 : static_cast<int>(ms);
}

}  // namespace admin
}  // namespace detail

struct AdminServer::Connection {
    enum class State { reading, calling, writing, draining };
    int fd = -1;
    std::string peer;
    State state = State::reading;
    detail::admin::ServerClock::time_point deadline;
    std::string in;
    std::string out;
    std::size_t sent = 0;
    std::size_t drained = 0;
    detail::admin::FileId id;  // of fd at accept
    bool foreign = false;      // fd was closed under the poller (and maybe reused): never touched again
    std::shared_ptr<CancelToken> cancel;  // while calling; cancelled once the client is gone
    std::thread call;
};

TRACETREE_DETAIL_RUNTIME_API AdminServer::AdminServer(const std::string& address, AdminServerOptions options)
    : options_(std::move(options)), handler_(options_.admin) {
    using namespace detail::admin;
    if (options_.max_connections < 1 || options_.max_connections > 1024)
        throw std::invalid_argument("tracetree: AdminServerOptions::max_connections must be between 1 and 1024");
    if (options_.max_head < 256 || options_.request_timeout <= Nanos(0) || options_.write_timeout <= Nanos(0))
        throw std::invalid_argument("tracetree: AdminServerOptions: max_head at least 256, timeouts above 0");
    std::string_view name, port_text;
    const bool split = split_authority(address, name, port_text);
    std::string host(name);
    if (host == "localhost") host = "127.0.0.1";
    if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    const std::optional<Address> bound = parse_address(host);
    const std::string_view digits = port_text.substr(port_text.empty() ? 0 : 1);
    bool number = !digits.empty();
    unsigned long port = 0;  // stops growing past the range
    for (const char c : digits) {
        number = number && c >= '0' && c <= '9';
        if (number && port <= 65535) port = port * 10 + static_cast<unsigned long>(c - '0');
    }
    const std::string wrong = !split              ? "an [IPv6] address is written [ADDRESS]:PORT"
                              : port_text.empty() ? "it has no ':PORT'"
                              : !bound            ? "'" + host + "' is not an IPv4 or [IPv6] address or localhost"
                              : !number           ? "the port '" + std::string(digits) + "' is not a number"
                              : port > 65535      ? "the port " + std::string(digits) + " is out of range"
                                                  : "";
    if (!wrong.empty())
        throw std::invalid_argument("tracetree: AdminServer: '" + address + "' is not an address to listen on: " + wrong +
                                    " (an IPv4 or [IPv6] address or localhost, ':', a port from 0 to 65535, 0 for any free one)");
    if (!is_loopback(*bound) && options_.admin.token.empty() && options_.admin.allowed_peers.empty())
        throw std::invalid_argument("tracetree: AdminServer: '" + address +
                                    "' is not a loopback address; listening there needs AdminOptions::token or "
                                    "AdminOptions::allowed_peers (the handler answers only loopback peers without them)");

    const bool v6 = host.find(':') != std::string::npos;
    sockaddr_storage storage{};
    socklen_t length = 0;
    if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(static_cast<std::uint16_t>(port));
        std::memcpy(&a.sin6_addr, bound->data(), 16);
        std::memcpy(&storage, &a, sizeof a);
        length = sizeof a;
    } else {
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(static_cast<std::uint16_t>(port));
        std::memcpy(&a.sin_addr, bound->data() + 12, 4);
        std::memcpy(&storage, &a, sizeof a);
        length = sizeof a;
    }
    const auto fail = [&](const char* what, const std::string& why) {
        if (listener_ >= 0) ::close(listener_);
        if (wake_[0] >= 0) ::close(wake_[0]), ::close(wake_[1]);
        throw std::runtime_error("tracetree: AdminServer: " + std::string(what) + " " + address + ": " + why);
    };
    // Room for every connection and every finished call up front: the poller and the call threads
    // then add to these without allocating, so that running out of memory fails one request only.
    connections_.reserve(options_.max_connections);
    finished_.reserve(options_.max_connections);
    answered_.reserve(options_.max_connections);
    listener_ = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener_ < 0) fail("cannot open a socket for", std::strerror(errno));
    const int one = 1;
    ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restarts while old connections linger
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&storage), length) != 0) fail("cannot bind", std::strerror(errno));
    if (::listen(listener_, 64) != 0) fail("cannot listen on", std::strerror(errno));
    if (::getsockname(listener_, reinterpret_cast<sockaddr*>(&storage), &length) != 0)
        fail("cannot read the port of", std::strerror(errno));
    const std::string bound_to = peer_text(storage);
    port_ = std::stoi(bound_to.substr(bound_to.rfind(':') + 1));
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) fail("cannot make a pipe for", std::strerror(errno));
    listener_id_ = file_id(listener_);
    wake_id_[0] = file_id(wake_[0]);
    wake_id_[1] = file_id(wake_[1]);
    handler_.server_note_ = [this] { return note(); };
    try {
        poller_ = detail::thread_without_signals([this] { run(); });  // its call threads inherit the mask
    } catch (const std::exception& e) {  // no thread, or no memory for one
        fail("cannot start a thread for", e.what());
    }
}

TRACETREE_DETAIL_RUNTIME_API AdminServer::~AdminServer() { stop(); }

TRACETREE_DETAIL_RUNTIME_API void AdminServer::stop() {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    if (!poller_.joinable()) return;
    stopping_ = true;
    wake();
    poller_.join();
    // Closed only while they are still ours: a number closed under the listener may be the program's now.
    if (owns(listener_, listener_id_)) ::close(listener_);
    for (int i = 0; i < 2; ++i)
        if (owns(wake_[i], wake_id_[i])) ::close(wake_[i]);
}

TRACETREE_DETAIL_RUNTIME_API bool AdminServer::owns(int fd, const detail::admin::FileId& id) const {
    const detail::admin::FileId now = detail::admin::file_id(fd);
    return now.valid && id.valid && now.device == id.device && now.inode == id.inode;
}

// The listening socket and the wake-up pipe are what they were; if not, they were closed under the
// poller (a daemon's main() closing every descriptor above 2): it stops, once saying so, and never
// touches those numbers again, since the program may have opened its own there.
TRACETREE_DETAIL_RUNTIME_API bool AdminServer::owns_its_descriptors() {
    if (lost_) return false;
    const int fds[3] = {listener_, wake_[0], wake_[1]};
    const detail::admin::FileId* ids[3] = {&listener_id_, &wake_id_[0], &wake_id_[1]};
    for (int i = 0; i < 3; ++i) {
        if (owns(fds[i], *ids[i])) continue;
        lost_ = true;
        std::fprintf(stderr,
                     "tracetree: the admin listener on port %d stops: its descriptor %d (%s) was closed under it; it "
                     "touches none of its descriptors again (tracetree::restart_admin() starts another, docs/admin.md)\n",
                     port_, fds[i], i == 0 ? "its listening socket" : "its wake-up pipe");
        return false;
    }
    return true;
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::wake() {
    const char byte = 0;
    if (!lost_ && owns(wake_[1], wake_id_[1]))
        while (::write(wake_[1], &byte, 1) < 0 && errno == EINTR) {
        }
}

// Closes the connection's socket if it is still the one accepted, and leaves the connection to be dropped.
TRACETREE_DETAIL_RUNTIME_API void AdminServer::forget(Connection& c) {
    if (!c.foreign && owns(c.fd, c.id)) ::close(c.fd);
    c.fd = -1;
}

// The last resort when even an answer cannot be made (no memory): a fixed 503 with the reason, sent
// once, and the connection closed.
TRACETREE_DETAIL_RUNTIME_API void AdminServer::fail(Connection& c, const char* why) noexcept {
    if (c.fd >= 0 && !c.foreign && owns(c.fd, c.id)) {
        char body[256], head[160];
        const int body_size = std::snprintf(body, sizeof body, "503 Service Unavailable: %s; the listener goes on\n", why);
        const int head_size = std::snprintf(head, sizeof head,
                                            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                                            "Content-Length: %d\r\nConnection: close\r\nRetry-After: 1\r\n\r\n",
                                            body_size);
        if (head_size > 0 && static_cast<std::size_t>(head_size) < sizeof head && body_size > 0 &&
            static_cast<std::size_t>(body_size) < sizeof body &&
            ::send(c.fd, head, static_cast<std::size_t>(head_size), MSG_NOSIGNAL | MSG_MORE) == head_size)
            static_cast<void>(::send(c.fd, body, static_cast<std::size_t>(body_size), MSG_NOSIGNAL));
        ::shutdown(c.fd, SHUT_WR);
    }
    forget(c);
}

// For the admin page: what the listener went through that an operator should know.
TRACETREE_DETAIL_RUNTIME_API std::string AdminServer::note() const {
    const std::uint64_t failures = accept_failures_;
    if (failures == 0) return {};
    return "the listener found no descriptor for a new connection " + std::to_string(failures) + " time(s) (accept: " +
           std::strerror(accept_errno_) + "); each time it left its socket alone for up to a second (clients wait in the backlog)";
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::run() {
    try {
        serve();
    } catch (const std::exception& e) {  // the poll set could not be made (no memory): this listener stops, not the process
        lost_ = true;
        std::fprintf(stderr, "tracetree: the admin listener on port %d stops: %s\n", port_, e.what());
    }
    owns_its_descriptors();  // stopped without having noticed: says so now, and stop() leaves them be
    // Stopping (at the program's exit too): the calls that wait end now and answer with what they
    // collected; their threads are joined, and the answers sent for up to a second in all (a client
    // that reads slower loses the rest) before the connections go.
    handler_.shutdown();
    for (auto& c : connections_)
        if (c->call.joinable()) c->call.join();
    {
        std::lock_guard<std::mutex> lock(finished_mutex_);
        answered_.swap(finished_);
    }
    for (Connection* c : answered_) {
        if (c->foreign || !owns(c->fd, c->id)) continue;
        c->state = Connection::State::writing;
        if (c->out.empty()) fail(*c, "no memory to answer this call");
        else write_some(*c);
    }
    answered_.clear();
    using detail::admin::ServerClock;
    const auto until = ServerClock::now() + std::chrono::duration_cast<ServerClock::duration>(
                                                std::min<Nanos>(options_.write_timeout, std::chrono::seconds(1)));
    for (auto& c : connections_) {
        while (c->fd >= 0 && !c->foreign && c->state == Connection::State::writing) {
            pollfd polled{c->fd, POLLOUT, 0};
            const int ready = ::poll(&polled, 1, detail::admin::poll_timeout(until, ServerClock::now()));
            if (ready == 0 || (ready < 0 && errno != EINTR)) break;
            if (ready > 0) write_some(*c);
        }
        if (c->fd >= 0) forget(*c);
    }
    connections_.clear();
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::serve() {
    using namespace detail::admin;
    std::vector<pollfd> polled;
    polled.reserve(options_.max_connections + 2);  // push_back below never allocates
    while (!stopping_) {
        const auto now = ServerClock::now();
        int timeout = -1;
        const bool accepting = now >= accept_resume_;
        if (!accepting) timeout = poll_timeout(accept_resume_, now);
        polled.clear();
        polled.push_back({wake_[0], POLLIN, 0});
        polled.push_back({accepting ? listener_ : -1, POLLIN, 0});
        for (const auto& c : connections_) {
            // A waiting call's client may only hang up: POLLRDHUP, without POLLIN, so that bytes it
            // sends after its request do not wake the poller for ever.
            const bool calling = c->state == Connection::State::calling;
            const short events = calling ? POLLRDHUP : c->state == Connection::State::writing ? POLLOUT : POLLIN;
            // Once cancelled, a gone client is not polled: its POLLHUP would wake the poller until the
            // call returns. Nor is a socket closed under the poller (foreign): the number is not its own.
            polled.push_back({(calling && c->cancel->cancelled()) || c->foreign ? -1 : c->fd, events, 0});
            if (c->state != Connection::State::calling) {
                const int left = poll_timeout(c->deadline, now);
                timeout = timeout < 0 || left < timeout ? left : timeout;
            }
        }
        // At most 2 s, so that descriptors closed under it are noticed though their numbers, reused, stay
        // quiet (stop() could not wake it through a pipe that is no longer its own).
        if (timeout < 0 || timeout > 2000) timeout = 2000;
        const int ready = ::poll(polled.data(), polled.size(), timeout);
        if (ready < 0 && errno != EINTR) {
            if (errno == ENOMEM) {  // for the poll's own table: again a little later, without spinning
                ::poll(nullptr, 0, 100);
                continue;
            }
            lost_ = true;
            std::fprintf(stderr, "tracetree: the admin listener on port %d stops: poll: %s\n", port_, std::strerror(errno));
            break;
        }
        if (stopping_) break;
        // Anything on the pipe or the listening socket, a POLLNVAL or POLLHUP included, is looked at
        // only once both are known to be still ours.
        if ((ready == 0 || polled[0].revents != 0 || polled[1].revents != 0) && !owns_its_descriptors()) break;

        if (polled[0].revents != 0) {
            char bytes[64];
            while (::read(wake_[0], bytes, sizeof bytes) > 0) {
            }
            {
                std::lock_guard<std::mutex> lock(finished_mutex_);
                answered_.swap(finished_);  // both have room for every connection: neither allocates
            }
            for (Connection* c : answered_) {
                c->call.join();  // it has answered: nothing is left for it to do
                c->state = Connection::State::writing;
                c->deadline = ServerClock::now() + std::chrono::duration_cast<ServerClock::duration>(options_.write_timeout);
                if (c->foreign || !owns(c->fd, c->id)) c->foreign = true, forget(*c);
                else if (c->out.empty()) fail(*c, "no memory to answer this call");
                else write_some(*c);
            }
            answered_.clear();
        }
        // The connections polled this time are connections_, in order (accept_all() runs after the sweep).
        const std::size_t polled_connections = polled.size() - 2;
        const auto later = ServerClock::now();
        for (std::size_t i = 0; i < polled_connections; ++i) {
            Connection& c = *connections_[i];
            const short revents = polled[i + 2].revents;
            if (c.fd < 0 || c.foreign) continue;
            if ((revents != 0 || (c.state != Connection::State::calling && later >= c.deadline)) && !owns(c.fd, c.id)) {
                // Closed under the poller: the number may be the program's now. A call is cancelled and
                // its thread joined when it answers; the rest is dropped.
                c.foreign = true;
                if (c.state == Connection::State::calling) c.cancel->cancel();
                else c.fd = -1;
                continue;
            }
            if (c.state == Connection::State::calling) {
                if (revents != 0) c.cancel->cancel();  // hung up, reset or half-closed
                continue;
            }
            try {
                if (revents != 0 && c.state == Connection::State::reading) read_some(c);
                else if (revents != 0 && c.state == Connection::State::writing) write_some(c);
                else if (revents != 0) drain(c);
                if (c.fd >= 0 && c.state != Connection::State::calling && later >= c.deadline) {
                    if (c.state == Connection::State::reading && !c.in.empty()) refuse(c, 408, "the request did not arrive in time");
                    else forget(c);
                }
            } catch (const std::exception&) {  // no memory for its request or its answer: this request fails
                if (c.state != Connection::State::calling) fail(c, "no memory for this request");
            }
        }
        std::size_t kept = 0;
        for (auto& c : connections_)
            if (c->fd >= 0) connections_[kept++] = std::move(c);
        connections_.resize(kept);
        if (polled[1].revents != 0) accept_all();  // after the closes, so that a place just freed is taken
    }
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::accept_all() {
    using namespace detail::admin;
    for (;;) {
        sockaddr_storage address{};
        socklen_t length = sizeof address;
        const int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&address), &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                accept_errno_ = errno;
                ++accept_failures_;
                accept_backoff_ = std::min(std::max(accept_backoff_ * 2, std::chrono::milliseconds(50)),
                                           std::chrono::milliseconds(1000));
                accept_resume_ = ServerClock::now() + accept_backoff_;
            }
            return;  // EAGAIN: the backlog is empty
        }
        accept_backoff_ = std::chrono::milliseconds(0);
        Connection alone;  // answered and closed here, without allocating
        alone.fd = fd;
        alone.id = file_id(fd);
        if (connections_.size() >= options_.max_connections) {
            // An answer at once rather than a connection that hangs in the backlog; the send is
            // attempted once, the socket being new and its buffer empty.
            char why[128];
            std::snprintf(why, sizeof why, "%zu connections are open, the limit (AdminServerOptions::max_connections)",
                          options_.max_connections);
            fail(alone, why);
            continue;
        }
        std::unique_ptr<Connection> c;
        try {
            c = std::make_unique<Connection>();
            c->peer = peer_text(address);
        } catch (const std::exception&) {
            fail(alone, "no memory for a new connection");
            continue;
        }
        c->fd = fd;
        c->id = alone.id;
        c->deadline = ServerClock::now() + std::chrono::duration_cast<ServerClock::duration>(options_.request_timeout);
        connections_.push_back(std::move(c));  // within the room reserved
    }
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::read_some(Connection& c) {
    char chunk[4096];
    const ssize_t got = ::recv(c.fd, chunk, sizeof chunk, 0);
    if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) return forget(c);
    if (got < 0) return;
    c.in.append(chunk, static_cast<std::size_t>(got));
    const std::size_t head_end = c.in.find("\r\n\r\n");
    if (head_end == std::string::npos) {
        if (c.in.size() > options_.max_head) refuse(c, 431, "the request's head exceeds " + std::to_string(options_.max_head) + " bytes");
        return;
    }
    if (head_end + 4 > options_.max_head)
        return refuse(c, 431, "the request's head exceeds " + std::to_string(options_.max_head) + " bytes");
    const std::string_view head(c.in.data(), head_end + 2);
    int count = 0;
    detail::admin::header_value(head, "transfer-encoding", count);
    if (count > 0)
        return refuse(c, 501, "no Transfer-Encoding: send the body with a Content-Length");
    const std::string length = detail::admin::header_value(head, "content-length", count);
    std::size_t body_size = 0;
    bool ok = count <= 1 && length.size() <= 18;
    for (const char ch : length) ok = ok && ch >= '0' && ch <= '9' && ((body_size = body_size * 10 + static_cast<std::size_t>(ch - '0')), true);
    if (!ok) return refuse(c, 400, "a malformed Content-Length");
    if (body_size > options_.max_body)
        return refuse(c, 413, "the body exceeds " + std::to_string(options_.max_body) + " bytes");
    if (c.in.size() >= head_end + 4 + body_size) start_call(c, head_end, body_size);
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::start_call(Connection& c, std::size_t head_end, std::size_t body_size) {
    using detail::admin::header_value;
    const std::string_view head(c.in.data(), head_end + 2);
    const std::string_view line = head.substr(0, head.find("\r\n"));
    const std::size_t space = line.find(' '), space2 = line.rfind(' ');
    if (space == std::string_view::npos || space2 == space || line.substr(space2 + 1).compare(0, 7, "HTTP/1.") != 0)
        return refuse(c, 400, "a malformed request line");
    AdminRequest request;
    request.peer = c.peer;
    request.method = std::string(line.substr(0, space));
    request.target = std::string(line.substr(space + 1, space2 - space - 1));
    int hosts = 0, ignored = 0;
    request.host = header_value(head, "host", hosts);
    if (hosts > 1) return refuse(c, 400, "more than one Host header");
    request.origin = header_value(head, "origin", ignored);
    request.authorization = header_value(head, "authorization", ignored);
    request.content_type = header_value(head, "content-type", ignored);
    request.body = c.in.substr(head_end + 4, body_size);
    request.cancel = c.cancel = std::make_shared<CancelToken>();
    Connection* const connection = &c;
    try {
        c.call = std::thread([this, connection, request = std::move(request)] {
            std::string out;
            try {
                const AdminResponse response = handler_.handle(request);
                out = detail::admin::http_response(response.status, response.content_type, response.headers, response.body);
            } catch (const std::exception&) {  // bad_alloc, the one handle() lets through: out stays empty, answered 503
            }
            std::lock_guard<std::mutex> lock(finished_mutex_);
            connection->out = std::move(out);
            finished_.push_back(connection);  // within the room reserved
            wake();
        });
    } catch (const std::exception& e) {
        // No thread (a pids cap, TasksMax, an address-space limit) or no memory for one: this request
        // is answered so, and the listener goes on.
        c.cancel.reset();
        return refuse(c, 503, std::string("no thread could be started for this call (") + e.what() + "); try again later");
    }
    c.in.clear();
    c.state = Connection::State::calling;
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::refuse(Connection& c, int status, const std::string& why) {
    c.out = detail::admin::http_response(status, "text/plain; charset=utf-8", {},
                                         std::to_string(status) + ' ' + detail::admin::status_text(status) + ": " + why + "\n");
    c.state = Connection::State::writing;
    c.deadline = detail::admin::ServerClock::now() + std::chrono::duration_cast<detail::admin::ServerClock::duration>(options_.write_timeout);
    write_some(c);
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::write_some(Connection& c) {
    while (c.sent < c.out.size()) {
        const ssize_t n = ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) break;
        c.sent += static_cast<std::size_t>(n);
        c.deadline = detail::admin::ServerClock::now() +
                     std::chrono::duration_cast<detail::admin::ServerClock::duration>(options_.write_timeout);
    }
    // Sent, or the client is gone. A close with unread input would reset the connection and could
    // lose the answer on its way (a refused request that was still arriving): end the sending side
    // and read what comes until the client closes, for a bounded time and number of bytes.
    ::shutdown(c.fd, SHUT_WR);
    c.state = Connection::State::draining;
    drain(c);
}

TRACETREE_DETAIL_RUNTIME_API void AdminServer::drain(Connection& c) {
    char chunk[4096];
    for (;;) {
        const ssize_t got = ::recv(c.fd, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == EAGAIN && c.drained <= options_.max_head + options_.max_body) return;
        if (got <= 0 || (c.drained += static_cast<std::size_t>(got)) > options_.max_head + options_.max_body) break;
    }
    forget(c);
}

namespace detail {
namespace admin {

// TRACETREE_ADMIN's listener (server.hpp says how it lives through fork()).
TRACETREE_DETAIL_RUNTIME_API EnvironmentListener& EnvironmentListener::get() {
    static EnvironmentListener one;
    return one;
}
TRACETREE_DETAIL_RUNTIME_API void EnvironmentListener::before_fork() noexcept { get().mutex.lock(); }
TRACETREE_DETAIL_RUNTIME_API void EnvironmentListener::after_fork_in_parent() noexcept {
    EnvironmentListener& listener = get();
    if (listener.server) listener.child_told = true;
    listener.mutex.unlock();
}
TRACETREE_DETAIL_RUNTIME_API void EnvironmentListener::after_fork_in_child() noexcept {
    EnvironmentListener& listener = get();
    if (AdminServer* copy = listener.server.release()) {
        // Only what is still the listener's: a number closed under it may be the program's now.
        if (copy->owns(copy->listener_, copy->listener_id_)) ::close(copy->listener_);
        for (int i = 0; i < 2; ++i)
            if (copy->owns(copy->wake_[i], copy->wake_id_[i])) ::close(copy->wake_[i]);
        listener.parents = copy;
        if (!listener.child_told && copy->serving())
            static_cast<void>(::write(STDERR_FILENO, listener.child_note.data(), listener.child_note.size()));
        listener.child_told = true;
    }
    listener.mutex.unlock();
}

TRACETREE_DETAIL_RUNTIME_API AdminServer* start_admin_from_environment(const char* value, std::FILE* messages) {
    if (value == nullptr || *value == '\0') return nullptr;
    EnvironmentListener& listener = EnvironmentListener::get();
    std::unique_ptr<AdminServer>& server = listener.server;
    std::string_view rest = value;
    const std::string address(rest.substr(0, rest.find(';')));
    const auto say = [&](const std::string& text) {  // the address only: a token is not for logs
        if (messages != nullptr)
            std::fputs(("tracetree: TRACETREE_ADMIN (" + views::plain_text(address) + "): " + text + "\n").c_str(), messages);
    };
    const auto refuse_start = [&](std::string why) {
        if (why.compare(0, 11, "tracetree: ") == 0) why.erase(0, 11);
        say(why + "; no admin listener started (TRACETREE_ADMIN=ADDRESS[;token=TOKEN][;allowed_peers=CIDR,CIDR...])");
        return nullptr;
    };
    std::lock_guard<std::mutex> lock(listener.mutex);
    if (listener.setting.empty()) listener.setting = value;
    if (server) {
        say("an admin listener runs already (port " + std::to_string(server->port()) + "); none started");
        return nullptr;
    }
    AdminServerOptions options;
    while (rest.find(';') != std::string_view::npos) {
        rest.remove_prefix(rest.find(';') + 1);
        const std::string_view item = rest.substr(0, rest.find(';'));
        const std::size_t eq = item.find('=');
        const std::string_view name = item.substr(0, eq), setting = eq == std::string_view::npos ? "" : item.substr(eq + 1);
        if (name == "token" && !setting.empty()) {
            options.admin.token = std::string(setting);
        } else if (name == "allowed_peers" && !setting.empty()) {
            for (std::string_view list = setting;; list.remove_prefix(list.find(',') + 1)) {
                options.admin.allowed_peers.emplace_back(list.substr(0, list.find(',')));
                if (list.find(',') == std::string_view::npos) break;
            }
        } else {
            return refuse_start("'" + views::plain_text(name) + "' is not an option, or it has no value");
        }
    }
    // Before the server exists: a fork between the two would leave the child a server it cannot stop.
    static const bool fork_handlers = pthread_atfork(&EnvironmentListener::before_fork, &EnvironmentListener::after_fork_in_parent,
                                                     &EnvironmentListener::after_fork_in_child) == 0;
    (void)fork_handlers;
    try {
        server = std::make_unique<AdminServer>(address, std::move(options));
    } catch (const std::exception& e) {
        return refuse_start(e.what());
    }
    const bool v6 = address.find('[') != std::string::npos;
    const std::string host = address.substr(0, v6 ? address.find(']') + 1 : address.rfind(':'));
    say("admin listening on http://" + host + ':' + std::to_string(server->port()) + server->handler().prefix() + "/");
    listener.child_told = false;
    listener.child_note = "tracetree: TRACETREE_ADMIN: a child forked from process " + std::to_string(::getpid()) +
                          " does not serve the admin listener (port " + std::to_string(server->port()) +
                          " stays its parent's); tracetree::restart_admin() in the child starts one there (docs/admin.md)\n";
    return server.get();
}

// What runtime() calls when TRACETREE_ADMIN is set (runtime/control-inl.hpp): every file that
// compiles these definitions (the library, or header-only each file that includes server.hpp) defines
// it, and the linker keeps one per copy.
TRACETREE_DETAIL_OPTIONAL_PART AdminServer* start_listener(const char* setting, std::FILE* messages) {
    return start_admin_from_environment(setting, messages);
}

}  // namespace admin
}  // namespace detail

TRACETREE_DETAIL_RUNTIME_API int restart_admin(std::FILE* messages) {
    using namespace detail::admin;
    EnvironmentListener& listener = EnvironmentListener::get();
    std::unique_ptr<AdminServer> stopped;
    std::string setting;
    {
        std::lock_guard<std::mutex> lock(listener.mutex);
        if (listener.server && listener.server->serving()) return listener.server->port();
        stopped = std::move(listener.server);
        setting = listener.setting;
    }
    stopped.reset();  // its poller has returned; it closes only what is still its own
    if (setting.empty()) {
        if (messages != nullptr)
            std::fputs("tracetree: restart_admin(): TRACETREE_ADMIN was not set when the recorder started; no admin listener "
                       "started\n",
                       messages);
        return 0;
    }
    const AdminServer* server = start_admin_from_environment(setting.c_str(), messages);
    return server != nullptr ? server->port() : 0;
}

TRACETREE_END_NAMESPACE

#endif  // TRACETREE_ADMIN_SERVER_INL_HPP
