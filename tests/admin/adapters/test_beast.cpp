// tracetree::async_serve_admin and serve_admin in real Boost.Beast servers (include/tracetree/admin/beast.hpp),
// over sockets on 127.0.0.1: an asynchronous server (the session as in Beast's http_server_async) and
// a thread-per-connection one. Every wait is for an event, bounded by a generous limit that only
// proves there is no hang.
#include <doctest/doctest.h>
#include <tracetree/admin/beast.hpp>
#include <tracetree/admin_beast.hpp>  // the old path still forwards (tests/old_paths.cpp)
#include <tracetree/tracetree.hpp>

#include "../client.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace beast_work {
void served(int i) {
    TRACETREE_FUNCTION();
    TRACETREE_WATCH("i", i);
}
}  // namespace beast_work

namespace {

using namespace std::chrono_literals;
namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;

// A user's asynchronous session: its own answer for every target, the admin's under its prefix.
struct Session : std::enable_shared_from_this<Session> {
    tcp::socket socket;
    tracetree::AdminHandler& admin;
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;

    Session(tcp::socket s, tracetree::AdminHandler& a) : socket(std::move(s)), admin(a) {}

    void read() {
        request = {};
        http::async_read(socket, buffer, request, [self = shared_from_this()](boost::beast::error_code error, std::size_t) {
            if (!error) self->on_read();
        });
    }
    void on_read() {
        if (tracetree::async_serve_admin(admin, request, socket, [self = shared_from_this()](auto response) { self->send(std::move(response)); }))
            return;
        http::response<http::string_body> hello{http::status::ok, request.version()};
        hello.body() = "hello\n";
        hello.keep_alive(request.keep_alive());
        hello.prepare_payload();
        send(std::move(hello));
    }
    void send(http::response<http::string_body> response) {
        auto kept = std::make_shared<http::response<http::string_body>>(std::move(response));
        http::async_write(socket, *kept, [self = shared_from_this(), kept](boost::beast::error_code error, std::size_t) {
            if (!error && kept->keep_alive()) return self->read();
            boost::system::error_code ignored;
            self->socket.shutdown(tcp::socket::shutdown_send, ignored);
        });
    }
};

struct AsyncServer {
    tracetree::AdminHandler admin;
    net::io_context io;
    tcp::acceptor acceptor{io, tcp::endpoint(net::ip::address_v4::loopback(), 0)};
    int port = acceptor.local_endpoint().port();
    std::thread thread;

    AsyncServer() {
        accept();
        thread = std::thread([this] { io.run(); });
    }
    ~AsyncServer() {
        admin.shutdown();  // the calls that wait end; run() returns once every session has
        net::post(io, [this] { acceptor.close(); });
        thread.join();
    }
    void accept() {
        acceptor.async_accept([this](boost::beast::error_code error, tcp::socket socket) {
            if (error) return;
            std::make_shared<Session>(std::move(socket), admin)->read();
            accept();
        });
    }
};

}  // namespace

TEST_CASE("Beast, asynchronous: a trace over HTTP, and the session's own answers still come") {
    AsyncServer s;
    Client client(s.port);
    client.send(get("/trace?pattern=beast_work::served&timeout=20", s.port));
    REQUIRE(s.admin.wait_for_waiting(1, 20s));
    beast_work::served(7);
    const std::string response = client.read_all();
    CHECK(starts_with(response, "HTTP/1.1 200 OK\r\n"));
    CHECK(contains(response, "Content-Type: text/plain; charset=utf-8\r\n"));
    CHECK(contains(response, "Cache-Control: no-store\r\n"));
    CHECK(contains(response, "beast_work::served()"));
    CHECK(contains(response, "Command execution times exceed limit: 1"));

    check_mounted(s.port);
}

TEST_CASE("Beast, asynchronous: a client that hangs up cancels its call and frees its slot") {
    AsyncServer s;  // max_waiting 4
    check_hang_up_frees_slot(s.admin, s.port);
}

TEST_CASE("Beast, a thread per connection: serve_admin answers, and a hang-up cancels") {
    tracetree::AdminHandler admin;
    net::io_context io;
    tcp::acceptor acceptor(io, tcp::endpoint(net::ip::address_v4::loopback(), 0));
    const int port = acceptor.local_endpoint().port();
    const auto serve_one = [&] {
        tcp::socket socket = acceptor.accept();
        boost::beast::flat_buffer buffer;
        http::request<http::string_body> request;
        http::read(socket, buffer, request);
        if (auto response = tracetree::serve_admin(admin, request, socket)) {
            boost::system::error_code ignored;
            http::write(socket, *response, ignored);
        }
    };
    {
        std::thread server(serve_one);
        Client client(port);
        client.send(get("/profile?format=folded", port));
        CHECK(starts_with(client.read_all(), "HTTP/1.1 200 OK\r\n"));
        server.join();
    }
    std::thread server(serve_one);
    {
        Client gone(port);
        gone.send(get("/trace?pattern=no_such_function&timeout=300", port));
        REQUIRE(admin.wait_for_waiting(1, 20s));
    }
    CHECK(admin.wait_for_waiting(0, 20s));  // without the cancel: 300 s
    server.join();
}

TEST_CASE("Beast: the peer is the socket's remote endpoint, so a non-loopback one gets 403") {
    http::request<http::string_body> request{http::verb::get, "/debug/tracetree/profile?format=folded", 11};
    request.set(http::field::host, "127.0.0.1:8080");
    const auto ask = [&](tracetree::AdminHandler& admin, const tcp::endpoint& peer) {
        const tracetree::AdminRequest in = tracetree::detail::admin::from_beast(request, peer);
        return std::make_pair(in.peer, admin.handle(in));
    };
    tracetree::AdminHandler admin;
    auto lan = ask(admin, tcp::endpoint(net::ip::make_address("192.0.2.7"), 5000));
    CHECK(lan.first == "192.0.2.7:5000");
    CHECK(lan.second.status == 403);
    CHECK(contains(lan.second.body, "peer 192.0.2.7:5000 is not loopback"));
    auto v6 = ask(admin, tcp::endpoint(net::ip::make_address("::1"), 5001));
    CHECK(v6.first == "[::1]:5001");
    CHECK(v6.second.status == 200);
    CHECK(ask(admin, tcp::endpoint()).second.status == 403);  // no endpoint (the socket had none): not assumed local

    tracetree::AdminOptions options;
    options.allowed_peers = {"192.0.2.0/24"};
    tracetree::AdminHandler allowing(options);
    CHECK(ask(allowing, tcp::endpoint(net::ip::make_address("192.0.2.7"), 5000)).second.status == 200);

    const auto response = tracetree::detail::admin::to_beast(admin.handle(tracetree::detail::admin::from_beast(request, tcp::endpoint())), 11, false);
    CHECK(response.result_int() == 403);
    CHECK(response[http::field::content_type] == "text/plain; charset=utf-8");
    CHECK(response[http::field::cache_control] == "no-store");
    CHECK(response[http::field::content_length] == std::to_string(response.body().size()));
}
