// The connector on its own (net::HttpServer with small handlers, in this process): keep-alive and
// pipelining limits, streamed bodies, the connection cap, and the poller's timeouts. Every wait is
// for an event (a response, a close, a connection count), bounded only as a hang detector.
#include "net.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <netinet/in.h>
#include <memory>
#include <poll.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include <sys/socket.h>
#include <unistd.h>

namespace http = demo::http;
namespace net = demo::net;
using demo::net::Millis;

namespace {

const std::string kHost = "127.0.0.1";
constexpr Millis kHang{20000};  // a bound for things that happen at once: only a hang reaches it
// Larger than the socket buffers on both sides of a loopback connection whose client reads nothing
// (the server's send buffer grows to a few MiB at most), so that such a client stalls the response.
constexpr std::size_t kBig = 8u << 20;

std::string header(const http::Response& response, std::string_view name) {
    for (const auto& [key, value] : response.headers)
        if (key == name) return value;
    return "(none)";
}

// A body of `size` bytes made on the fly: byte i is i * 7 mod 251.
http::Response generated(std::uint64_t size) {
    http::Response response;
    auto at = std::make_shared<std::uint64_t>(0);
    response.body_stream = [at, size](char* out, std::size_t max) {
        std::size_t count = 0;
        for (; count < max && *at < size; ++count, ++*at) out[count] = static_cast<char>(*at * 7 % 251);
        return count;
    };
    response.body_stream_size = size;
    return response;
}

bool is_generated(const std::string& body) {
    for (std::size_t i = 0; i < body.size(); ++i)
        if (body[i] != static_cast<char>(i * 7 % 251)) return false;
    return true;
}

struct Server {
    std::atomic<int> services{0};  // calls of the service, one per request
    net::HttpServer server;

    explicit Server(net::ServerConfig config)
        : server(std::move(config), [this](net::Connection& connection, bool last) {
              ++services;
              return net::serve_one(connection, last, [](const http::Request& request) {
                  if (request.path == "/big") return generated(kBig);
                  http::Response response;
                  response.body = "hello " + request.path;
                  return response;
              });
          }) {
        server.start();
    }
    int port() const { return server.port(); }
};

net::ServerConfig config() {
    net::ServerConfig c;
    c.name_prefix = "test-";
    c.threads = 2;
    c.read_timeout = Millis(10000);
    c.keep_alive_timeout = Millis(10000);
    return c;
}

// A raw socket whose receive buffer is small, so that a client that does not read stalls the server.
int small_window_socket(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    const int size = 4096;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    return fd;
}

void send_all(int fd, const std::string& bytes) {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
}

std::string read_some(int fd) {  // what has arrived, waiting for the first byte
    pollfd p{fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, static_cast<int>(kHang.count())) == 1);
    char chunk[1024];
    const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
    REQUIRE(got > 0);
    return std::string(chunk, static_cast<std::size_t>(got));
}

}  // namespace

TEST_CASE("keep-alive: one service call per request, none for the close; pipelining up to the limit") {
    net::ServerConfig c = config();
    c.max_keep_alive_requests = 3;
    Server s(c);
    {
        net::Client client(kHost, s.port(), kHang);
        for (int i = 0; i < 3; ++i) {
            client.send("GET /" + std::to_string(i) + " HTTP/1.1\r\nHost: a\r\n\r\n");
            const http::Response response = client.read_response();
            CHECK(response.body == "hello /" + std::to_string(i));
            CHECK(header(response, "Connection") == (i == 2 ? "close" : "keep-alive"));  // the third is the last
        }
        CHECK(client.read_to_close().empty());
    }
    CHECK(s.server.wait_for_connections(0, kHang));
    CHECK(s.services.load() == 3);

    s.services = 0;
    {
        net::Client client(kHost, s.port(), kHang);  // five pipelined in one write: three answered
        std::string five;
        for (int i = 0; i < 5; ++i) five += "GET /p" + std::to_string(i) + " HTTP/1.1\r\nHost: a\r\n\r\n";
        client.send(five);
        for (int i = 0; i < 3; ++i) CHECK(client.read_response().body == "hello /p" + std::to_string(i));
        CHECK(client.read_to_close().empty());
    }
    {
        net::Client client(kHost, s.port(), kHang);  // two requests, then the client closes
        client.send("GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n");
        CHECK(client.read_response().body == "hello /a");
        CHECK(client.read_response().body == "hello /b");
        client.shutdown_write();
        CHECK(client.read_to_close().empty());
    }
    CHECK(s.server.wait_for_connections(0, kHang));
    CHECK(s.services.load() == 5);
}

TEST_CASE("a streamed body arrives whole and in order; HEAD gets its length only") {
    Server s(config());
    net::Client client(kHost, s.port(), kHang);
    client.send("GET /big HTTP/1.1\r\nHost: a\r\n\r\nHEAD /big HTTP/1.1\r\nHost: a\r\n\r\nGET /small HTTP/1.1\r\nHost: a\r\n\r\n");
    const http::Response big = client.read_response();
    CHECK(big.body.size() == kBig);
    CHECK(is_generated(big.body));
    client.shutdown_write();
    const std::string rest = client.read_to_close();
    CHECK(rest.find("Content-Length: " + std::to_string(kBig) + "\r\n") != std::string::npos);  // HEAD
    CHECK(rest.find("hello /small") != std::string::npos);
    CHECK(s.services.load() == 3);
}

TEST_CASE("a client that resets in the middle of a streamed body frees its connection") {
    Server s(config());
    const int fd = small_window_socket(s.port());
    send_all(fd, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
    CHECK(read_some(fd).rfind("HTTP/1.1 200", 0) == 0);
    const linger reset{1, 0};  // close() sends RST
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    ::close(fd);
    CHECK(s.server.wait_for_connections(0, kHang));
    CHECK(net::request(kHost, s.port(), "GET", "/after", {}, kHang).body == "hello /after");
}

TEST_CASE("past max_connections: 503 and close at once; served again when one has closed") {
    net::ServerConfig c = config();
    c.max_connections = 4;
    Server s(c);
    std::vector<std::unique_ptr<net::Client>> idle;
    for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<net::Client>(kHost, s.port(), kHang));
    REQUIRE(s.server.wait_for_connections(4, kHang));
    for (int i = 0; i < 3; ++i) {  // the poller answers these without reading a request
        net::Client refused(kHost, s.port(), kHang);
        refused.send("GET /x HTTP/1.1\r\nHost: a\r\n\r\n");
        const http::Response busy = refused.read_response();
        CHECK(busy.status == 503);
        CHECK(busy.body.find("4 connections are open") != std::string::npos);
        CHECK(refused.read_to_close().empty());
    }
    CHECK(s.services.load() == 0);
    CHECK(s.server.connections() == 4);
    idle.pop_back();
    REQUIRE(s.server.wait_for_connections(3, kHang));
    CHECK(net::request(kHost, s.port(), "GET", "/again", {}, kHang).body == "hello /again");
    idle.clear();
    CHECK(s.server.wait_for_connections(0, kHang));
}

TEST_CASE("the poller times out idle, half-sent and stalled connections; no worker waits for them") {
    net::ServerConfig c = config();
    c.threads = 1;  // one worker: if any of these held it, the last request below could not be served
    c.read_timeout = Millis(300);
    c.keep_alive_timeout = Millis(300);
    Server s(c);
    net::Client idle(kHost, s.port(), kHang);
    net::Client half(kHost, s.port(), kHang);
    half.send("GET /half HTTP/1.1\r\nHost: a\r\n");
    net::Client body(kHost, s.port(), kHang);
    body.send("POST /body HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc");
    const int stalled = small_window_socket(s.port());
    send_all(stalled, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
    CHECK(read_some(stalled).rfind("HTTP/1.1 200", 0) == 0);  // served; now it reads no more
    CHECK(net::request(kHost, s.port(), "GET", "/meanwhile", {}, kHang).body == "hello /meanwhile");

    CHECK(idle.read_to_close().empty());  // closed quietly
    CHECK(half.read_to_close().find("408 Request Timeout") != std::string::npos);
    CHECK(body.read_to_close().find("408 Request Timeout") != std::string::npos);
    CHECK(s.server.wait_for_connections(0, kHang));  // the stalled reader was dropped too
    ::close(stalled);
    CHECK(s.services.load() == 2);  // /big and /meanwhile
}

TEST_CASE("stop() closes every connection and returns while clients hold them") {
    auto s = std::make_unique<Server>(config());
    std::vector<std::unique_ptr<net::Client>> clients;
    for (int i = 0; i < 50; ++i) clients.push_back(std::make_unique<net::Client>(kHost, s->port(), kHang));
    clients[0]->send("GET /half HTTP/1.1\r\n");
    const int stalled = small_window_socket(s->port());
    send_all(stalled, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n");
    CHECK(read_some(stalled).rfind("HTTP/1.1 200", 0) == 0);
    REQUIRE(s->server.wait_for_connections(51, kHang));
    s->server.stop();
    CHECK(s->server.connections() == 0);
    CHECK(clients[0]->read_to_close().empty());
    CHECK(clients[49]->read_to_close().empty());
    ::close(stalled);
    CHECK_THROWS_AS(net::Client(kHost, s->port(), kHang), std::runtime_error);  // nothing listens
}
