#include "net.hpp"

#include <tracetree/control.hpp>  // set_thread_name
#include <tracetree/tracetree.hpp>

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace demo::net {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

int poll_one(int fd, short events, Millis timeout) {  // the poll() result, retried on EINTR
    pollfd p{fd, events, 0};
    for (;;) {
        const int rc = ::poll(&p, 1, static_cast<int>(std::max<Millis::rep>(timeout.count(), 0)));
        if (rc >= 0 || errno != EINTR) return rc;
    }
}

sockaddr_in loopback_address(const std::string& host, int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1)
        throw std::runtime_error("bad IPv4 address '" + host + "'");
    return address;
}

}  // namespace

void set_thread_name(const std::string& name) {
    ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
    tracetree::set_thread_name(name);
}

// ---- Connection -------------------------------------------------------------------------------

bool Connection::wait_readable(Millis timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!stopping_.load()) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        const int rc = poll_one(fd_, POLLIN, std::min(left, Millis(1000)));
        if (rc > 0) return true;
        if (rc < 0) return false;
    }
    return false;
}

Connection::ReadResult Connection::read_request() {
    ReadResult result;
    const auto deadline = Clock::now() + read_timeout_;
    for (;;) {
        http::ParseResult parsed = http::parse_request(buffer_, limits_);
        if (parsed.status == http::ParseStatus::complete) {
            buffer_.erase(0, parsed.consumed);
            result.request = std::move(parsed.request);
            return result;
        }
        if (parsed.status == http::ParseStatus::error) {
            result.error_status = parsed.error_status;
            result.error_reason = parsed.error_reason;
            return result;
        }
        if (stopping_.load()) return result;
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        const int rc = left.count() > 0 ? poll_one(fd_, POLLIN, left) : 0;
        if (rc == 0) {
            if (buffer_.empty()) return result;  // idle, nothing started: just close
            result.error_status = 408;
            result.error_reason = "request not complete within " + std::to_string(read_timeout_.count()) + " ms";
            return result;
        }
        char chunk[16384];
        const ssize_t got = rc < 0 ? -1 : ::recv(fd_, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (buffer_.empty() || got < 0) return result;
            result.error_status = 400;
            result.error_reason = parsed.headers_done ? "connection closed before the whole body arrived (truncated body)"
                                                      : "connection closed in the middle of the request headers";
            return result;
        }
        buffer_.append(chunk, static_cast<std::size_t>(got));
    }
}

bool Connection::write(std::string_view bytes) {
    const auto deadline = Clock::now() + read_timeout_;
    while (!bytes.empty()) {
        const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent > 0) {
            bytes.remove_prefix(static_cast<std::size_t>(sent));
            continue;
        }
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
            if (left.count() <= 0 || stopping_.load() || poll_one(fd_, POLLOUT, left) <= 0) return false;
            continue;
        }
        return false;
    }
    return true;
}

http::Response error_response(int status, const std::string& reason) {
    http::Response response;
    response.status = status;
    response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
    response.body = std::to_string(status) + ' ' + std::string(http::reason_phrase(status)) + ": " + reason + '\n';
    return response;
}

bool serve_one(Connection& connection, bool last_allowed, const Handler& handler) {
    Connection::ReadResult read = connection.read_request();
    if (!read.request) {
        if (read.error_status != 0) connection.write(http::format(error_response(read.error_status, read.error_reason), false));
        return false;
    }
    http::Response response;
    try {
        response = handler(*read.request);
    } catch (const std::exception& e) {
        response = error_response(500, e.what());
    }
    const bool keep = read.request->keep_alive && !last_allowed;
    return connection.write(http::format(response, keep, read.request->method == "HEAD")) && keep;
}

// ---- HttpServer -------------------------------------------------------------------------------

HttpServer::HttpServer(ServerConfig config, Service service) : config_(std::move(config)), service_(std::move(service)) {
    if (config_.threads < 1 || config_.threads > 1000) throw std::runtime_error("threads must be 1..1000");
    const sockaddr_in address = loopback_address(config_.host, config_.port);
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw std::runtime_error("socket: " + errno_text());
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listen_fd_, 128) != 0) {
        const std::string error = errno_text();
        ::close(listen_fd_);
        throw std::runtime_error("cannot listen on " + config_.host + ":" + std::to_string(config_.port) + ": " + error);
    }
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &length);
    port_ = ntohs(bound.sin_port);
    if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
        ::close(listen_fd_);
        throw std::runtime_error("pipe: " + errno_text());
    }
}

HttpServer::~HttpServer() {
    stop();
    ::close(listen_fd_);
    ::close(wake_pipe_[0]);
    ::close(wake_pipe_[1]);
}

void HttpServer::start() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (started_ || stopping_.load()) return;
    started_ = true;
    for (int i = 1; i <= config_.threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
    acceptor_ = std::thread([this] { accept_loop(); });
}

void HttpServer::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_.exchange(true)) return;
        for (int fd : active_) ::shutdown(fd, SHUT_RDWR);  // wakes workers blocked in poll or recv
    }
    const char byte = 0;
    [[maybe_unused]] const ssize_t ignored = ::write(wake_pipe_[1], &byte, 1);
    queued_.notify_all();
    if (acceptor_.joinable()) acceptor_.join();
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : queue_) ::close(fd);
    queue_.clear();
}

void HttpServer::accept_loop() {
    set_thread_name(config_.name_prefix + std::to_string(port_) + "-Acceptor");
    while (!stopping_.load()) {
        pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
        if ((fds[1].revents & POLLIN) != 0) break;
        if ((fds[0].revents & POLLIN) == 0) continue;
        const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;  // the client gave up, or out of descriptors: keep accepting
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        std::unique_lock<std::mutex> lock(mutex_);
        if (queue_.size() >= config_.max_queued || stopping_.load()) {
            lock.unlock();
            const std::string busy = http::format(error_response(503, "too many connections"), false);
            [[maybe_unused]] const ssize_t ignored = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            ::close(fd);
            continue;
        }
        queue_.push_back(fd);
        lock.unlock();
        queued_.notify_one();
    }
}

void HttpServer::worker_loop(int index) {
    set_thread_name(config_.name_prefix + std::to_string(port_) + "-exec-" + std::to_string(index));
    for (;;) {
        int fd = -1;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            queued_.wait(lock, [&] { return stopping_.load() || !queue_.empty(); });
            if (stopping_.load()) return;
            fd = queue_.front();
            queue_.pop_front();
            active_.insert(fd);
        }
        serve(fd);
        linger(fd);
        std::lock_guard<std::mutex> lock(mutex_);
        active_.erase(fd);
        ::close(fd);  // under the lock: stop() never shuts down a number reused by a new socket
    }
}

// Closing with unread input makes the kernel send a reset, which can destroy an error response the
// client has not read yet (a 431 after huge headers, say): stop writing, then drain briefly first.
void HttpServer::linger(int fd) {
    ::shutdown(fd, SHUT_WR);
    const auto deadline = Clock::now() + Millis(200);
    std::size_t drained = 0;
    while (drained < (256u << 10) && !stopping_.load()) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        if (left.count() <= 0 || poll_one(fd, POLLIN, left) <= 0) return;
        char chunk[16384];
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return;
        drained += static_cast<std::size_t>(got);
    }
}

void HttpServer::serve(int fd) {
    Connection connection(fd, config_.limits, config_.read_timeout, stopping_);
    for (int served = 1; !stopping_.load(); ++served) {
        // Waiting for the next request is not part of serving one (Tomcat's poller does it).
        if (!connection.has_buffered() && !connection.wait_readable(config_.keep_alive_timeout)) return;
        if (!service_(connection, served >= config_.max_keep_alive_requests)) return;
    }
}

// ---- Client -----------------------------------------------------------------------------------

Client::Client(const std::string& host, int port, Millis timeout) : timeout_(timeout) {
    const sockaddr_in address = loopback_address(host, port);
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket: " + errno_text());
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        const std::string error = errno_text();
        ::close(fd_);
        throw std::runtime_error("cannot connect to " + host + ":" + std::to_string(port) + ": " + error);
    }
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Client::~Client() { ::close(fd_); }

void Client::send(std::string_view bytes) {
    while (!bytes.empty()) {
        if (poll_one(fd_, POLLOUT, timeout_) <= 0) throw std::runtime_error("send: timed out");
        const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (sent <= 0) throw std::runtime_error("send: " + errno_text());
        bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
}

void Client::shutdown_write() { ::shutdown(fd_, SHUT_WR); }

http::Response Client::read_response() {
    const auto deadline = Clock::now() + timeout_;
    http::Limits limits;
    limits.max_body = 64u << 20;
    for (;;) {
        http::ResponseParse parsed = http::parse_response(buffer_, limits);
        if (parsed.status == http::ParseStatus::complete) {
            buffer_.erase(0, parsed.consumed);
            return std::move(parsed.response);
        }
        if (parsed.status == http::ParseStatus::error) throw std::runtime_error("bad response: " + parsed.error_reason);
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        if (left.count() <= 0 || poll_one(fd_, POLLIN, left) <= 0)
            throw std::runtime_error("no response within " + std::to_string(timeout_.count()) + " ms");
        char chunk[16384];
        const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) throw std::runtime_error("connection closed before the response ended");
        buffer_.append(chunk, static_cast<std::size_t>(got));
    }
}

std::string Client::read_to_close() {
    const auto deadline = Clock::now() + timeout_;
    for (;;) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
        if (left.count() <= 0 || poll_one(fd_, POLLIN, left) <= 0) throw std::runtime_error("server did not close");
        char chunk[16384];
        const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        buffer_.append(chunk, static_cast<std::size_t>(got));
    }
    return std::move(buffer_);
}

http::Response request(const std::string& host, int port, const std::string& method, const std::string& target,
                       const std::string& body, Millis timeout) {
    Client client(host, port, timeout);
    std::string text = method + ' ' + target + " HTTP/1.1\r\nHost: " + host + ':' + std::to_string(port) +
                       "\r\nConnection: close\r\n";
    if (!body.empty() || method == "POST")
        text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    client.send(text + "\r\n" + body);
    return client.read_response();
}

}  // namespace demo::net
