// Sockets for the demo: a small HTTP/1.1 server (acceptor thread, named worker pool, keep-alive,
// timeouts) and a blocking client. Loopback by default. The bytes are parsed by http.hpp.
#ifndef DEMO_NET_HPP
#define DEMO_NET_HPP

#include "http.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace demo::net {

using Millis = std::chrono::milliseconds;

// One accepted connection. Reads one request at a time; the unread rest (pipelining) stays buffered.
class Connection {
public:
    Connection(int fd, const http::Limits& limits, Millis read_timeout, const std::atomic<bool>& stopping)
        : fd_(fd), limits_(limits), read_timeout_(read_timeout), stopping_(stopping) {}

    struct ReadResult {
        std::optional<http::Request> request;
        int error_status = 0;      // 400, 408, 413, ...: answer it and close
        std::string error_reason;  // one line
        // Neither: the peer closed (or the server is stopping) between requests; close quietly.
    };
    ReadResult read_request();
    bool write(std::string_view bytes);  // false when the peer is gone or too slow
    bool has_buffered() const { return !buffer_.empty(); }
    bool wait_readable(Millis timeout);  // data or EOF within `timeout`; false on timeout or stop

private:
    int fd_;
    http::Limits limits_;
    Millis read_timeout_;
    const std::atomic<bool>& stopping_;
    std::string buffer_;
};

struct ServerConfig {
    std::string name_prefix = "http-nio-";  // threads are named <prefix><port>-exec-<n>, as in Tomcat
    std::string host = "127.0.0.1";
    int port = 0;                           // 0: an ephemeral port, see HttpServer::port()
    int threads = 10;
    http::Limits limits;
    Millis read_timeout{20000};             // a request must arrive whole within this (Tomcat's connectionTimeout)
    Millis keep_alive_timeout{20000};       // an idle kept-alive connection is closed after this
    int max_keep_alive_requests = 100;
    std::size_t max_queued = 256;           // accepted connections waiting for a worker; more are refused
};

// Serves one request from the connection; returns whether to keep the connection open.
using Service = std::function<bool(Connection&, bool last_allowed)>;
using Handler = std::function<http::Response(const http::Request&)>;

// The plain service: read, call the handler (exceptions become 500), answer.
bool serve_one(Connection& connection, bool last_allowed, const Handler& handler);
http::Response error_response(int status, const std::string& reason);

class HttpServer {
public:
    HttpServer(ServerConfig config, Service service);  // binds and listens; std::runtime_error on failure
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    int port() const { return port_; }
    void start();
    void stop();  // closes the listener, wakes and joins every thread; idempotent
    bool stopping() const { return stopping_.load(); }

private:
    void accept_loop();
    void worker_loop(int index);
    void serve(int fd);
    void linger(int fd);

    ServerConfig config_;
    Service service_;
    int listen_fd_ = -1;
    int wake_pipe_[2] = {-1, -1};
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::thread acceptor_;
    std::vector<std::thread> workers_;
    std::mutex mutex_;
    std::condition_variable queued_;
    std::deque<int> queue_;
    std::set<int> active_;  // connections being served: stop() shuts them down to wake their worker
    bool started_ = false;
};

// A blocking client socket on the loopback, for the channel call and for tests.
class Client {
public:
    Client(const std::string& host, int port, Millis timeout);  // std::runtime_error when it cannot connect
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    void send(std::string_view bytes);  // std::runtime_error on failure
    void shutdown_write();
    // The next response; std::runtime_error on timeout, a malformed response or a close before it ends.
    http::Response read_response();
    // Everything until the server closes (or the timeout): for checking that a server closed on us.
    std::string read_to_close();

private:
    int fd_ = -1;
    Millis timeout_;
    std::string buffer_;
};

// One request on a fresh connection.
http::Response request(const std::string& host, int port, const std::string& method, const std::string& target,
                       const std::string& body = {}, Millis timeout = Millis(10000));

void set_thread_name(const std::string& name);  // the OS name (cut to 15 bytes) and tracetree's full one

}  // namespace demo::net

#endif
