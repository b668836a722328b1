// Sockets for the demo: a small HTTP/1.1 server modelled on Tomcat's NIO connector, and a blocking
// client. Loopback by default. The bytes are parsed by http.hpp.
//
// The server: one poller thread holds every connection that is idle, still sending its request, or
// still reading its response, with the read, keep-alive and write timeouts; a named worker pool runs
// the service only for a request that has arrived whole. So idle, slow and stalled clients cost a
// descriptor and a few hundred bytes each, never a worker. Past ServerConfig::max_connections a new
// connection is answered 503 and closed. net.cpp has the details.
#ifndef DEMO_NET_HPP
#define DEMO_NET_HPP

#include "http.hpp"

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace demo::net {

using Millis = std::chrono::milliseconds;

// One connection as a worker sees it while serving one request. Nothing here waits for the peer:
// the request has arrived already, and what the socket does not take at once the poller writes later.
class Connection {
public:
    virtual ~Connection() = default;

    struct ReadResult {
        std::optional<http::Request> request;
        int error_status = 0;      // 400, 413, 414, 431, 501, 505: answer it and close
        std::string error_reason;  // one line
    };
    // The request the poller received (or why it could not be parsed). No I/O.
    virtual ReadResult read_request() = 0;
    // Queues bytes for the client and sends what the socket takes now. False when the peer is gone.
    virtual bool write(std::string_view bytes) = 0;
    // The response's head and body. A body_stream is read as the socket drains, in bounded chunks.
    // False when the peer is gone.
    virtual bool send(http::Response response, bool keep_alive, bool head_only) = 0;
    // Calls `gone` once, on the poller thread, if the client hangs up (or resets) while this request
    // is being served, so that a service that waits (an admin trace) can give up early. Bytes arriving
    // meanwhile (a pipelined request) end the watch without a call. At most once per request.
    virtual void on_peer_gone(std::function<void()> gone) = 0;
    // The client's address, "127.0.0.1:53122" (the admin handler admits loopback peers only).
    virtual std::string peer() const = 0;
};

struct ServerConfig {
    std::string name_prefix = "http-nio-";  // threads are named <prefix><port>-exec-<n>, as in Tomcat
    std::string host = "127.0.0.1";
    int port = 0;                           // 0: an ephemeral port, see HttpServer::port()
    int threads = 10;                       // workers: requests served at once
    http::Limits limits;
    Millis read_timeout{20000};             // a request must arrive whole within this from its first byte
                                            // (Tomcat's connectionTimeout); a response must make progress
                                            // within it too (a client that stops reading is dropped)
    Millis keep_alive_timeout{20000};       // a connection waiting for its next request is closed after this
    int max_keep_alive_requests = 100;
    // Open connections (idle, arriving, served or being written), as Tomcat's maxConnections. Past
    // it a new connection gets 503 and is closed. Each one is a descriptor (two while it streams a
    // static file), so RLIMIT_NOFILE must allow about 2 * max_connections for the cap to hold.
    std::size_t max_connections = 10000;
    // The poller's hand-off of each request to a worker is recorded (tracetree::here() in the poller's
    // AbstractEndpoint::processSocket, continued around the worker's SocketProcessor::doRun): a trace
    // of processSocket shows the time the request waited for a worker, then its service.
    bool traced_handoff = true;
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

    int port() const;
    void start();
    // Closes the listener and every connection, and joins the threads: at once for the poller, after
    // the request each busy worker is running. Idempotent.
    void stop();
    bool stopping() const;
    std::size_t connections() const;  // open now, counted against max_connections
    // Waits until connections() == count; false after `timeout`. For tests and shutdown checks.
    bool wait_for_connections(std::size_t count, Millis timeout) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
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

// One request on a fresh connection; `headers` are sent as given (the caller keeps CR and LF out).
http::Response request(const std::string& host, int port, const std::string& method, const std::string& target,
                       const std::string& body = {}, Millis timeout = Millis(10000), const http::Headers& headers = {});

void set_thread_name(const std::string& name);  // the OS name (cut to 15 bytes) and tracetree's full one

}  // namespace demo::net

#endif
