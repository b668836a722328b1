// tracetree::mount_admin on a real cpp-httplib server (include/tracetree/admin/httplib.hpp), over
// sockets on 127.0.0.1: a trace, a client that hangs up, the peer rule, the routes. Every wait is for
// an event, bounded by a generous limit that only proves there is no hang.
#include <doctest/doctest.h>
#include <tracetree/admin/httplib.hpp>
#include <tracetree/admin_httplib.hpp>  // the old path still forwards (tests/old_paths.cpp)
#include <tracetree/tracetree.hpp>

#include "../client.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace httplib_work {
void served(int i) {
    TRACETREE_FUNCTION();
    TRACETREE_WATCH("i", i);
}
}  // namespace httplib_work

namespace {

using namespace std::chrono_literals;

// A user's server: a route of its own, the admin mounted beside it.
struct Server {
    httplib::Server server;
    tracetree::AdminHandler admin;
    int port = 0;
    std::thread thread;

    explicit Server(tracetree::AdminOptions options = {}) : admin(std::move(options)) {
        server.Get("/hello", [](const httplib::Request&, httplib::Response& response) { response.set_content("hello\n", "text/plain"); });
        tracetree::mount_admin(server, admin);
        port = server.bind_to_any_port("127.0.0.1");  // listening from here: clients queue until the loop runs
        REQUIRE(port > 0);
        thread = std::thread([this] { server.listen_after_bind(); });
    }
    ~Server() {
        admin.shutdown();  // ends the calls that wait, which httplib's stop() waits for
        server.stop();     // every test has been served by now, so the loop runs and sees the stop
        thread.join();
    }
};

}  // namespace

TEST_CASE("httplib: a trace over HTTP, and the server's own routes still answer") {
    Server s;
    Client client(s.port);
    client.send(get("/trace?pattern=httplib_work::served&timeout=20", s.port));
    REQUIRE(s.admin.wait_for_waiting(1, 20s));
    httplib_work::served(7);
    const std::string response = client.read_all();
    CHECK(starts_with(response, "HTTP/1.1 200 OK\r\n"));
    CHECK(contains(response, "Content-Type: text/plain; charset=utf-8\r\n"));
    CHECK(contains(response, "Cache-Control: no-store\r\n"));
    CHECK(contains(response, "httplib_work::served()"));
    CHECK(contains(response, "Command execution times exceed limit: 1"));

    Client put(s.port);  // every method reaches the handler: its 405, not httplib's 404
    put.send("PUT /debug/tracetree/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    const std::string refused = put.read_all();
    CHECK(starts_with(refused, "HTTP/1.1 405 Method Not Allowed\r\n"));
    CHECK(contains(refused, "Allow: POST\r\n"));

    check_mounted(s.port);
}

TEST_CASE("httplib: a client that hangs up cancels its call and frees its slot") {
    Server s;  // max_waiting 4
    check_hang_up_frees_slot(s.admin, s.port);
}

TEST_CASE("httplib: the peer is the request's remote address, so a non-loopback one gets 403") {
    const auto ask = [](tracetree::AdminHandler& admin, const char* address, int port) {
        httplib::Request request;
        request.method = "GET";
        request.target = "/debug/tracetree/profile?format=folded";
        request.path = "/debug/tracetree/profile";
        request.remote_addr = address;
        request.remote_port = port;
        request.set_header("Host", "127.0.0.1:8080");
        const tracetree::AdminRequest in = tracetree::detail::admin::from_httplib(request);
        return std::make_pair(in.peer, admin.handle(in));
    };
    tracetree::AdminHandler admin;
    auto lan = ask(admin, "192.0.2.7", 5000);
    CHECK(lan.first == "192.0.2.7:5000");
    CHECK(lan.second.status == 403);
    CHECK(contains(lan.second.body, "peer 192.0.2.7:5000 is not loopback"));
    auto v6 = ask(admin, "::1", 5001);
    CHECK(v6.first == "[::1]:5001");
    CHECK(v6.second.status == 200);
    CHECK(ask(admin, "::ffff:127.0.0.1", 5002).second.status == 200);  // IPv4 on a dual-stack socket
    CHECK(ask(admin, "", -1).second.status == 403);                      // no address: not assumed local

    tracetree::AdminOptions options;
    options.allowed_peers = {"192.0.2.0/24"};
    tracetree::AdminHandler allowing(options);
    CHECK(ask(allowing, "192.0.2.7", 5000).second.status == 200);
    CHECK(ask(allowing, "198.51.100.1", 5000).second.status == 403);
}
