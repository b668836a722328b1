// The demo's connector, after Tomcat's NIO one (NioEndpoint): a poller thread and a worker pool.
//
// Why Asio: standalone Asio (Debian's libasio-dev, header-only) runs the event loop: epoll
// registration, one timer per connection, and the workers' hand-back to the poller. Hand-written
// epoll would need its own timer heap, an eventfd with a locked queue for that hand-back, and care
// with re-arming: more code for the same model, and more ways to get it subtly wrong. The I/O itself
// stays readiness-based, as in Tomcat's poller (async_wait, then recv/send with MSG_DONTWAIT), so
// that an idle connection holds no buffer; only this file includes Asio.
//
// A connection's life, on the poller thread unless said otherwise:
//   reading:   bytes are appended and parsed as they arrive; no worker. Idle (no byte of the next
//              request yet) it is closed quietly after keep_alive_timeout; a request once started
//              must be whole within read_timeout, else 408.
//   serving:   a complete (or unparseable) request is queued for a worker, which runs the service
//              (the Tomcat pipeline); the response is queued and the worker sends what the socket
//              takes at once, never waiting for it.
//   writing:   the poller sends the rest as the socket drains, reading a streamed body 64 KiB at a
//              time; a client that takes nothing for read_timeout is dropped. Then reading again
//              (keep-alive; a pipelined request already here goes straight to a worker), or
//   lingering: shutdown(SHUT_WR), and unread input is drained briefly before close(): closing with
//              unread input makes the kernel send a reset, which can destroy a response (a 431 after
//              huge headers, say) that the client has not read yet.
// Past max_connections the poller answers a new connection 503 and lingers-closes it. A client that
// closes between requests costs no service call: the service runs exactly once per request.
// A connection belongs to one thread at a time, the poller or the worker serving it; it is handed
// over through the work queue's mutex one way and asio::post the other. The hand-off to a worker is
// also tracetree's (<tracetree/handoff.hpp>): the worker's service is recorded under the poller's
// AbstractEndpoint::processSocket, after a `[queued]` node, the time the request waited for a worker.
#include "net.hpp"

#include <tracetree/control.hpp>  // set_thread_name
#include <tracetree/handoff.hpp>
#include <tracetree/tracetree.hpp>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <mutex>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdexcept>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace demo::net {
namespace {

using Clock = std::chrono::steady_clock;
using asio::ip::tcp;

constexpr std::size_t kChunk = 64 * 1024;          // a streamed body is read this much at a time
constexpr std::size_t kKeepCapacity = 16 * 1024;   // larger buffers are freed once a request is done
constexpr Millis kLinger{200};
constexpr std::size_t kLingerBytes = 256 * 1024;
constexpr std::size_t kMaxRefusing = 64;  // 503s being delivered at once; past that, closed unanswered
constexpr int kAcceptBatch = 64;          // accepts per wake-up, so that a flood does not starve the rest
constexpr Millis kAcceptPause{100};       // out of descriptors: look at the backlog again after this

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

// One connection of the server. The poller's fields are used by whichever thread owns it (above).
struct Session final : Connection, std::enable_shared_from_this<Session> {
    Session(tcp::socket connected, int descriptor)
        : socket(std::move(connected)), timer(socket.get_executor()), fd(descriptor) {}

    enum class State { reading, serving, writing, lingering, closed };
    tcp::socket socket;
    asio::steady_timer timer;  // the deadline of the current state
    const int fd;
    State state = State::reading;
    Clock::time_point deadline;
    bool counted = true;      // against max_connections; false: being refused with a 503
    int served = 0;           // requests handed to the service
    bool keep = false;        // open after the response being written
    bool failed = false;      // the peer is gone, or the response cannot be finished: close at once
    bool watching = false;    // serving: a hang-up watch (on_peer_gone) is pending on the socket
    std::size_t drained = 0;  // lingering: input discarded

    std::string in;      // received, not handed over yet
    ReadResult request;  // handed over
    tracetree::Here handed;  // serving: where the poller queued it, until the worker has served it
    std::string out;     // to send, from out_at
    std::size_t out_at = 0;
    std::function<std::size_t(char*, std::size_t)> stream;  // the rest of a streamed body
    std::uint64_t stream_left = 0;

    ReadResult read_request() override { return std::move(request); }
    bool write(std::string_view bytes) override {
        out.append(bytes.data(), bytes.size());
        return send_some();
    }
    bool send(http::Response response, bool keep_alive, bool head_only) override {
        out += http::format_head(response, keep_alive);
        if (!head_only && response.body_stream) {
            stream = std::move(response.body_stream);
            stream_left = response.body_stream_size;
            if (stream_left > 0) refill();  // the first chunk goes out with the head
        } else if (!head_only) {
            out += response.body;
        }
        return send_some();
    }

    // From the worker: the watch starts on the poller, which owns the socket's waits.
    void on_peer_gone(std::function<void()> gone) override {
        asio::post(socket.get_executor(), [s = shared_from_this(), gone = std::move(gone)]() mutable {
            s->watch_peer(std::move(gone));
        });
    }

    std::string peer() const override {
        sockaddr_in address{};
        socklen_t length = sizeof address;
        char text[INET_ADDRSTRLEN] = "";
        if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
            ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text) == nullptr)
            return "";  // unknown: the admin handler refuses it
        return std::string(text) + ':' + std::to_string(ntohs(address.sin_port));
    }

    // Poller thread. Readable while serving means a hang-up, a reset, or the next pipelined request:
    // a peek tells them apart without taking the bytes.
    void watch_peer(std::function<void()> gone) {
        if (state != State::serving) return;  // answered already
        watching = true;
        socket.async_wait(tcp::socket::wait_read, [s = shared_from_this(), gone = std::move(gone)](const asio::error_code& ec) mutable {
            if (ec || !s->watching) return;
            s->watching = false;
            char byte = 0;
            const ssize_t got = ::recv(s->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
            if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) gone();
            else if (got < 0) s->watch_peer(std::move(gone));  // woken for nothing
        });
    }

    bool done() const { return out_at == out.size() && stream_left == 0; }

    // Sends until everything is out or the socket would block. False when the peer is gone; throws
    // when a streamed body fails.
    bool send_some() {
        while (!failed) {
            if (out_at == out.size()) {
                out.clear();
                out_at = 0;
                if (stream_left == 0) return true;
                refill();
            }
            const ssize_t sent = ::send(fd, out.data() + out_at, out.size() - out_at, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (sent > 0) out_at += static_cast<std::size_t>(sent);
            else if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
            else if (sent == 0 || errno != EINTR) failed = true;
        }
        return false;
    }

    void refill() {  // appends the streamed body's next chunk to `out`
        const std::size_t at = out.size();
        out.resize(at + static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, stream_left)));
        const std::size_t got = stream(&out[at], out.size() - at);
        if (got == 0 || got > out.size() - at) throw std::runtime_error("the response body ended early");
        out.resize(at + got);
        stream_left -= got;
        if (stream_left == 0) stream = nullptr;  // closes the file now, not at the next request
    }

    void release() {  // between requests: an idle connection keeps no large buffer
        if (out.capacity() > kKeepCapacity) std::string().swap(out);
        out.clear();
        out_at = 0;
        stream = nullptr;
        if (in.empty() && in.capacity() > kKeepCapacity) std::string().swap(in);
    }
};

}  // namespace

void set_thread_name(const std::string& name) {
    ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
    tracetree::set_thread_name(name);
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
    return connection.send(std::move(response), keep, read.request->method == "HEAD") && keep;
}

// ---- HttpServer -------------------------------------------------------------------------------

struct HttpServer::Impl {
    Impl(ServerConfig c, Service s) : config(std::move(c)), service(std::move(s)) {}

    const ServerConfig config;
    const Service service;
    asio::io_context io;  // before every socket and timer: destroyed after them
    asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
    tcp::acceptor acceptor{io};
    asio::steady_timer accept_pause{io};
    int port = 0;
    std::atomic<bool> stopping{false};
    mutable std::mutex count_mutex;  // `open`, for wait_for_connections()
    mutable std::condition_variable count_changed;
    std::size_t open = 0;  // sessions counted against max_connections; changed by the poller only
    std::thread poller;
    std::vector<std::thread> workers;
    std::mutex mutex;  // the queue and `started`
    std::condition_variable queued;
    std::deque<std::shared_ptr<Session>> queue;  // complete requests waiting for a worker
    bool started = false;
    // The poller's own (and stop()'s, once the threads are joined).
    std::unordered_map<Session*, std::shared_ptr<Session>> sessions;
    std::size_t refusing = 0;
    std::vector<char> scratch = std::vector<char>(kChunk);  // recv() reads into it

    using SessionPtr = std::shared_ptr<Session>;

    void wait_accept() {
        acceptor.async_wait(tcp::acceptor::wait_read, [this](const asio::error_code& ec) {
            if (!ec && !stopping.load()) accept_ready();
        });
    }

    void accept_ready() {
        for (int i = 0; i < kAcceptBatch; ++i) {
            const int fd = ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
            if (fd >= 0) {
                admit(fd);
            } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                // Out of descriptors: the backlog would wake the poller at once, for ever. Leave it
                // there and look again shortly (connections closing free descriptors meanwhile).
                accept_pause.expires_after(kAcceptPause);
                accept_pause.async_wait([this](const asio::error_code& ec) {
                    if (!ec && !stopping.load()) wait_accept();
                });
                return;
            } else if (errno != EINTR && errno != ECONNABORTED) {
                break;  // EAGAIN: the backlog is empty
            }
        }
        wait_accept();
    }

    void admit(int fd) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        tcp::socket socket(io);
        asio::error_code ec;
        socket.assign(tcp::v4(), fd, ec);
        if (ec) {
            ::close(fd);
            return;
        }
        const auto s = std::make_shared<Session>(std::move(socket), fd);
        const bool full = connections() >= config.max_connections;
        if (full && refusing >= kMaxRefusing) return;  // a flood: closed unanswered
        sessions.emplace(s.get(), s);
        if (full) {
            // Tomcat stops accepting at maxConnections and lets the backlog fill; a client here
            // gets an answer at once instead of a connection that hangs.
            s->counted = false;
            ++refusing;
            http::Response busy = error_response(503, std::to_string(config.max_connections) +
                                                          " connections are open, the server's limit");
            busy.headers.emplace_back("Retry-After", "1");
            s->out = http::format(busy, false);
            write(s);
            return;
        }
        count(+1);
        wait_request(s);
    }

    // The next request: one already buffered (pipelined) goes straight to a worker, else wait for it.
    void wait_request(const SessionPtr& s) {
        s->state = Session::State::reading;
        s->request = {};
        if (s->in.empty()) {
            arm(s, config.keep_alive_timeout);
        } else {
            if (parse(s)) return;
            arm(s, config.read_timeout);  // part of one is here: its time starts now
        }
        wait_readable(s);
    }

    void wait_readable(const SessionPtr& s) {
        s->socket.async_wait(tcp::socket::wait_read, [this, s](const asio::error_code& ec) {
            if (ec || stopping.load()) return;
            if (s->state == Session::State::reading) read(s);
            else if (s->state == Session::State::lingering) drain(s);
        });
    }

    void read(const SessionPtr& s) {
        for (;;) {
            const ssize_t got = ::recv(s->fd, scratch.data(), scratch.size(), MSG_DONTWAIT);
            if (got > 0) {
                if (s->in.empty()) arm(s, config.read_timeout);  // the request's first byte
                s->in.append(scratch.data(), static_cast<std::size_t>(got));
                if (parse(s)) return;  // stop reading: the rest waits in the kernel, not here
            } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                wait_readable(s);
                return;
            } else if (got < 0 && errno == EINTR) {
                continue;
            } else if (got < 0 || s->in.empty()) {
                close(s);  // a reset, or the client closed between requests
                return;
            } else {
                // Closed in the middle of a request: the service answers 400, which a client that
                // only shut down its sending side still reads.
                const bool headers_done = http::parse_request(s->in, config.limits).headers_done;
                s->request.error_status = 400;
                s->request.error_reason = headers_done
                                              ? "connection closed before the whole body arrived (truncated body)"
                                              : "connection closed in the middle of the request headers";
                s->in.clear();
                dispatch(s);
                return;
            }
        }
    }

    // Hands a complete (or unparseable) request to a worker; false when more bytes are needed.
    bool parse(const SessionPtr& s) {
        http::ParseResult parsed = http::parse_request(s->in, config.limits);
        if (parsed.status == http::ParseStatus::incomplete) return false;
        if (parsed.status == http::ParseStatus::complete) {
            s->request.request = std::move(parsed.request);
            s->in.erase(0, parsed.consumed);
        } else {
            s->request.error_status = parsed.error_status;
            s->request.error_reason = std::move(parsed.error_reason);
            s->in.clear();
        }
        dispatch(s);
        return true;
    }

    void dispatch(const SessionPtr& s) {
        s->state = Session::State::serving;
        s->timer.cancel();
        if (!config.traced_handoff) return enqueue(s);
        // Tomcat's Poller.processKey hands the socket to processSocket, which runs a SocketProcessor
        // on the executor: the same names here, so that a trace of the poller's step holds the wait.
        TRACETREE_SCOPE("AbstractEndpoint::processSocket");
        s->handed = tracetree::here();
        enqueue(s);
    }

    void enqueue(const SessionPtr& s) {
        {
            std::lock_guard<std::mutex> lock(mutex);
            queue.push_back(s);
        }
        queued.notify_one();
    }

    void worker_loop(int index) {
        set_thread_name(config.name_prefix + std::to_string(port) + "-exec-" + std::to_string(index));
        for (;;) {
            SessionPtr s;
            {
                std::unique_lock<std::mutex> lock(mutex);
                queued.wait(lock, [&] { return stopping.load() || !queue.empty(); });
                if (stopping.load()) return;
                s = std::move(queue.front());
                queue.pop_front();
            }
            bool keep = false;
            const auto serve = [&] {
                try {
                    keep = service(*s, s->served + 1 >= config.max_keep_alive_requests);
                } catch (const std::exception&) {
                    s->failed = true;  // a streamed body that broke off, say: the client sees it cut short
                }
            };
            if (config.traced_handoff) {
                // Dropped once served: a trace of processSocket is delivered when its last Here is gone.
                const tracetree::Here handed = std::move(s->handed);
                tracetree::Continue on(handed);
                TRACETREE_SCOPE("NioEndpoint::SocketProcessor::doRun");
                serve();
            } else {
                serve();
            }
            ++s->served;
            asio::post(io, [this, s = std::move(s), keep] {
                if (stopping.load()) return;
                if (s->watching) {  // the hang-up watch: the socket is written from here on
                    s->watching = false;
                    asio::error_code ignored;
                    s->socket.cancel(ignored);
                }
                s->keep = keep;
                if (s->failed) close(s);
                else write(s);
            });
        }
    }

    void write(const SessionPtr& s) {
        s->state = Session::State::writing;
        bool alive = false;
        try {
            alive = s->send_some();
        } catch (const std::exception&) {  // the static file cannot be read any more: cut it short
        }
        if (!alive) {
            close(s);
        } else if (!s->done()) {
            arm(s, config.read_timeout);  // again at every wake-up: a deadline for progress, not the whole
            s->socket.async_wait(tcp::socket::wait_write, [this, s](const asio::error_code& ec) {
                if (!ec && !stopping.load() && s->state == Session::State::writing) write(s);
            });
        } else {
            s->release();
            if (s->keep) wait_request(s);
            else linger(s);
        }
    }

    void linger(const SessionPtr& s) {
        s->state = Session::State::lingering;
        ::shutdown(s->fd, SHUT_WR);
        arm(s, kLinger);
        drain(s);
    }

    void drain(const SessionPtr& s) {
        for (;;) {
            const ssize_t got = ::recv(s->fd, scratch.data(), scratch.size(), MSG_DONTWAIT);
            if (got > 0 && (s->drained += static_cast<std::size_t>(got)) < kLingerBytes) continue;
            if (got < 0 && errno == EINTR) continue;
            if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                wait_readable(s);
                return;
            }
            close(s);  // the client closed too, reset, or sent too much
            return;
        }
    }

    void arm(const SessionPtr& s, Millis timeout) {
        s->deadline = Clock::now() + timeout;
        s->timer.expires_at(s->deadline);  // cancels the previous wait
        s->timer.async_wait([this, s](const asio::error_code& ec) {
            if (!ec && !stopping.load()) expired(s);
        });
    }

    void expired(const SessionPtr& s) {
        // A wait that had fired before a later deadline replaced it: the new one is pending.
        if (Clock::now() < s->deadline) return;
        if (s->state == Session::State::reading && !s->in.empty()) {
            asio::error_code ignored;
            s->socket.cancel(ignored);  // the read wait: the socket is written from here on
            s->in.clear();
            s->out = http::format(error_response(408, "request not complete within " +
                                                          std::to_string(config.read_timeout.count()) + " ms"),
                                  false);
            s->keep = false;
            write(s);
        } else if (s->state != Session::State::serving) {
            close(s);  // idle past keep_alive_timeout, a client that stopped reading, or lingering done
        }
    }

    void close(const SessionPtr& s) {
        if (s->state == Session::State::closed) return;
        s->state = Session::State::closed;
        asio::error_code ignored;
        s->socket.close(ignored);  // pending waits end with operation_aborted
        s->timer.cancel();
        s->stream = nullptr;
        if (s->counted) count(-1);
        else --refusing;
        sessions.erase(s.get());
    }

    std::size_t connections() const {
        std::lock_guard<std::mutex> lock(count_mutex);
        return open;
    }

    void count(int change) {
        {
            std::lock_guard<std::mutex> lock(count_mutex);
            open = change > 0 ? open + 1 : open - 1;
        }
        count_changed.notify_all();
    }
};

HttpServer::HttpServer(ServerConfig config, Service service)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(service))) {
    Impl& m = *impl_;
    if (m.config.threads < 1 || m.config.threads > 1000) throw std::runtime_error("threads must be 1..1000");
    if (m.config.max_connections < 1 || m.config.max_connections > 1000000)
        throw std::runtime_error("max_connections must be 1..1000000");
    const sockaddr_in address = loopback_address(m.config.host, m.config.port);
    // Non-blocking: the poller accepts until the backlog is empty.
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) throw std::runtime_error("socket: " + errno_text());
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // The longest backlog the kernel allows (net.core.somaxconn): a burst of connects waits there
    // for the poller instead of being retried by the clients' kernels a second later.
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 || ::listen(fd, SOMAXCONN) != 0) {
        const std::string error = errno_text();
        ::close(fd);
        throw std::runtime_error("cannot listen on " + m.config.host + ":" + std::to_string(m.config.port) + ": " + error);
    }
    sockaddr_in bound{};
    socklen_t length = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
    m.port = ntohs(bound.sin_port);
    asio::error_code ec;
    m.acceptor.assign(tcp::v4(), fd, ec);
    if (ec) {
        ::close(fd);
        throw std::runtime_error("cannot watch the listening socket: " + ec.message());
    }
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->port; }
bool HttpServer::stopping() const { return impl_->stopping.load(); }
std::size_t HttpServer::connections() const { return impl_->connections(); }

bool HttpServer::wait_for_connections(std::size_t count, Millis timeout) const {
    std::unique_lock<std::mutex> lock(impl_->count_mutex);
    return impl_->count_changed.wait_for(lock, timeout, [&] { return impl_->open == count; });
}

void HttpServer::start() {
    Impl& m = *impl_;
    std::lock_guard<std::mutex> lock(m.mutex);
    if (m.started || m.stopping.load()) return;
    m.started = true;
    for (int i = 1; i <= m.config.threads; ++i) m.workers.emplace_back([&m, i] { m.worker_loop(i); });
    m.wait_accept();  // before the poller thread exists, which then owns the acceptor
    m.poller = std::thread([&m] {
        set_thread_name(m.config.name_prefix + std::to_string(m.port) + "-ClientPoller");
        m.io.run();
    });
}

void HttpServer::stop() {
    Impl& m = *impl_;
    {
        std::lock_guard<std::mutex> lock(m.mutex);
        if (m.stopping.exchange(true)) return;
    }
    m.queued.notify_all();
    m.io.stop();  // the poller returns from run() at once, whatever it was waiting for
    if (m.poller.joinable()) m.poller.join();
    for (std::thread& worker : m.workers) worker.join();  // each after the request it is serving
    m.workers.clear();
    // Nothing runs the loop now: close every connection from here, then run the aborted waits, which
    // see `stopping` and only let go of their sessions.
    std::vector<Impl::SessionPtr> all;
    for (const auto& entry : m.sessions) all.push_back(entry.second);
    for (const Impl::SessionPtr& s : all) m.close(s);
    m.queue.clear();
    asio::error_code ignored;
    m.acceptor.close(ignored);
    m.accept_pause.cancel();
    m.work.reset();
    m.io.restart();
    m.io.poll();
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
                       const std::string& body, Millis timeout, const http::Headers& headers) {
    Client client(host, port, timeout);
    std::string text = method + ' ' + target + " HTTP/1.1\r\nHost: " + host + ':' + std::to_string(port) +
                       "\r\nConnection: close\r\n";
    for (const auto& [name, value] : headers) text += name + ": " + value + "\r\n";
    if (!body.empty() || method == "POST")
        text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    client.send(text + "\r\n" + body);
    return client.read_response();
}

}  // namespace demo::net
