// tracetree::AdminServer (include/tracetree/admin/server.hpp): the handler on its own listener, over
// real sockets on 127.0.0.1. Every wait is for an event (a response, a close, a call that waits),
// bounded by a generous limit that only proves there is no hang.
#include <doctest/doctest.h>
#include <tracetree/admin/server.hpp>
#include <tracetree/tracetree.hpp>

#include "client.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <future>
#include <netinet/in.h>
#include <poll.h>
#include <dirent.h>
#include <fstream>
#include <set>
#include <signal.h>
#include <string>
#include <utility>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace admin_server_work {
void served(int i) {
    TRACETREE_FUNCTION();
    TRACETREE_WATCH("i", i);
}
}  // namespace admin_server_work

namespace {

using namespace std::chrono_literals;

}  // namespace

TEST_CASE("AdminServer: a trace over the listener, the peer from accept()") {
    tracetree::AdminServer server("127.0.0.1:0");
    REQUIRE(server.port() > 0);
    Client client(server.port());
    client.send(get("/trace?pattern=admin_server_work::served&timeout=20", server.port()));
    REQUIRE(server.handler().wait_for_waiting(1, 20s));
    admin_server_work::served(7);
    const std::string response = client.read_all();
    CHECK(starts_with(response, "HTTP/1.1 200 OK\r\n"));
    CHECK(contains(response, "Connection: close\r\n"));
    CHECK(contains(response, "admin_server_work::served()"));
    CHECK(contains(response, "Command execution times exceed limit: 1"));

    Client profile(server.port());  // a loopback client with a stranger's Host: the handler's checks apply
    profile.send("GET /debug/tracetree/profile HTTP/1.1\r\nHost: evil.example\r\n\r\n");
    CHECK(starts_with(profile.read_all(), "HTTP/1.1 403 Forbidden\r\n"));

    tracetree::AdminServer v6("[::1]:0");  // IPv6 loopback, where the machine has it
    CHECK(v6.port() > 0);
}

TEST_CASE("AdminServer: a client that sends half a request and idles is timed out") {
    tracetree::AdminServerOptions options;
    options.request_timeout = 300ms;
    tracetree::AdminServer server("127.0.0.1:0", options);
    Client half(server.port());
    half.send("GET /debug/tracetree/profile HTTP/1.1\r\nHost: 127.0");
    CHECK(starts_with(half.read_all(), "HTTP/1.1 408 Request Timeout\r\n"));
    Client silent(server.port());  // nothing sent: closed without an answer
    CHECK(silent.read_all().empty());
    Client next(server.port());  // the server still serves
    next.send(get("/profile", server.port()));
    CHECK(starts_with(next.read_all(), "HTTP/1.1 200 OK\r\n"));
}

TEST_CASE("AdminServer: a client that hangs up cancels its call and frees its slot") {
    tracetree::AdminServer server("127.0.0.1:0");  // max_waiting 4
    {
        Client gone(server.port());
        gone.send(get("/trace?pattern=no_such_function&timeout=300", server.port()));
        REQUIRE(server.handler().wait_for_waiting(1, 20s));
    }
    CHECK(server.handler().wait_for_waiting(0, 20s));  // without the cancel: 300 s
    // The next four all wait (none refused 503): counted one by one, so that a slot still held shows.
    std::vector<std::unique_ptr<Client>> four;
    for (std::size_t i = 1; i <= 4; ++i) {
        four.push_back(std::make_unique<Client>(server.port()));
        four.back()->send(get("/trace?pattern=no_such_function&timeout=300", server.port()));
        CHECK(server.handler().wait_for_waiting(i, 20s));
    }
    four.clear();
    CHECK(server.handler().wait_for_waiting(0, 20s));
}

TEST_CASE("AdminServer: an oversized head is 431, an oversized body 413") {
    tracetree::AdminServerOptions options;
    options.max_head = 1024;
    options.max_body = 100;
    tracetree::AdminServer server("127.0.0.1:0", options);
    Client big_head(server.port());
    big_head.send("GET /debug/tracetree/profile HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(2000, 'a') + "\r\n\r\n");
    CHECK(starts_with(big_head.read_all(), "HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    Client endless_head(server.port());  // no end of head at all
    endless_head.send("GET /debug/tracetree/profile HTTP/1.1\r\nX: " + std::string(5000, 'a'));
    CHECK(starts_with(endless_head.read_all(), "HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    Client big_body(server.port());
    big_body.send("POST /debug/tracetree/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                  "Content-Length: 101\r\n\r\n" + std::string(101, 'a'));
    CHECK(starts_with(big_body.read_all(), "HTTP/1.1 413 Payload Too Large\r\n"));
    Client fits(server.port());
    fits.send("POST /debug/tracetree/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
              "Content-Length: 11\r\n\r\nformat=text");
    CHECK(starts_with(fits.read_all(), "HTTP/1.1 200 OK\r\n"));
}

TEST_CASE("AdminServer: connections beyond max_connections are answered 503") {
    tracetree::AdminServerOptions options;
    options.max_connections = 2;
    tracetree::AdminServer server("127.0.0.1:0", options);
    Client first(server.port()), second(server.port());
    Client third(server.port());  // accepted after the two (the backlog is in order): one too many
    const std::string refused = third.read_all();
    CHECK(starts_with(refused, "HTTP/1.1 503 Service Unavailable\r\n"));
    CHECK(contains(refused, "2 connections are open, the limit (AdminServerOptions::max_connections)"));
    first.send(get("/profile", server.port()));
    CHECK(starts_with(first.read_all(), "HTTP/1.1 200 OK\r\n"));
    first.hang_up();
    // Its place is free once the server has seen the hang-up, which this client cannot wait for: a
    // few tries, each answered at once.
    bool served = false;
    for (int i = 0; i < 100 && !served; ++i) {
        Client next(server.port());
        next.send(get("/profile", server.port()));
        served = starts_with(next.read_all(), "HTTP/1.1 200 OK\r\n");
    }
    CHECK(served);
}

TEST_CASE("AdminServer: stop() while a call waits returns, and so does the destructor") {
    auto server = std::make_unique<tracetree::AdminServer>("127.0.0.1:0");
    Client waiting(server->port());
    waiting.send(get("/trace?pattern=no_such_function&timeout=60", server->port()));
    REQUIRE(server->handler().wait_for_waiting(1, 20s));
    auto stopped = std::async(std::launch::async, [&] { server->stop(); });
    CHECK(stopped.wait_for(20s) == std::future_status::ready);  // without the cancel: 60 s
    stopped.get();
    CHECK(waiting.read_all().find("(no close)") == std::string::npos);  // its connection was closed
    server->stop();  // again: nothing to do
    server.reset();
}

namespace {
// The threads of this process, and the signals one blocks, from /proc (Linux).
std::set<std::string> thread_ids() {
    std::set<std::string> ids;
    if (DIR* tasks = ::opendir("/proc/self/task")) {
        while (const dirent* entry = ::readdir(tasks))
            if (entry->d_name[0] != '.') ids.insert(entry->d_name);
        ::closedir(tasks);
    }
    return ids;
}
unsigned long long blocked_signals(const std::string& id) {
    std::ifstream status("/proc/self/task/" + id + "/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("SigBlk:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
    return 0;
}
}  // namespace

// ninja blocks SIGCHLD except inside ppoll(): with TRACETREE_ADMIN set, a child that ended while ninja
// was busy had its SIGCHLD handled on the listener's thread (the one thread not blocking it), and
// ninja's ppoll() waited for ever. The listener's threads must block every signal, so that a signal
// the program blocks stays pending for the program's own threads.
TEST_CASE("AdminServer: its threads block the process's signals") {
    const std::set<std::string> before = thread_ids();
    tracetree::AdminServer server("127.0.0.1:0");
    Client waiting(server.port());  // a call thread too
    waiting.send(get("/trace?pattern=no_such_function&timeout=60", server.port()));
    REQUIRE(server.handler().wait_for_waiting(1, 20s));
    int listeners = 0;
    for (const std::string& id : thread_ids()) {
        if (before.count(id) != 0) continue;
        ++listeners;
        const unsigned long long blocked = blocked_signals(id);
        for (const int signal : {SIGHUP, SIGINT, SIGTERM, SIGCHLD, SIGUSR1}) {
            INFO("thread " << id << ", signal " << signal);
            CHECK((blocked >> (signal - 1) & 1) == 1);
        }
    }
    CHECK(listeners >= 2);  // the poller and the waiting call's thread
}

TEST_CASE("AdminServer: listening outside loopback needs a token or allowed_peers") {
    for (const char* address : {"0.0.0.0:0", "[::]:0", "192.0.2.1:0"}) {
        try {
            tracetree::AdminServer refused(address);
            FAIL_CHECK("listened on " << std::string(address));
        } catch (const std::invalid_argument& e) {
            CHECK_MESSAGE(contains(e.what(), "is not a loopback address"), address);
            CHECK_MESSAGE(contains(e.what(), "AdminOptions::token or AdminOptions::allowed_peers"), address);
        }
    }
    // Each refusal names what is wrong (issue 43).
    const std::pair<const char*, const char*> wrong[] = {
        {"127.0.0.1", "it has no ':PORT'"},
        {"", "it has no ':PORT'"},
        {"127.0.0.1:65536", "the port 65536 is out of range"},
        {"127.0.0.1:99999", "the port 99999 is out of range"},
        {"127.0.0.1:123456789012345678901234567890", "the port 123456789012345678901234567890 is out of range"},
        {"127.0.0.1:x", "the port 'x' is not a number"},
        {"127.0.0.1:", "the port '' is not a number"},
        {"127.0.0.1:-1", "the port '-1' is not a number"},
        {"host.example:1", "'host.example' is not an IPv4 or [IPv6] address or localhost"},
        {":80", "'' is not an IPv4 or [IPv6] address or localhost"},
        {"[::1:80", "an [IPv6] address is written [ADDRESS]:PORT"},
    };
    for (const auto& refused : wrong) {
        CAPTURE(refused.first);
        const std::string expected = std::string("is not an address to listen on: ") + refused.second +
                                     " (an IPv4 or [IPv6] address or localhost, ':', a port from 0 to 65535, 0 for any free one)";
        CHECK_THROWS_WITH_AS(tracetree::AdminServer{refused.first}, doctest::Contains(expected.c_str()), std::invalid_argument);
    }
    tracetree::AdminServer localhost("localhost:0");
    CHECK(localhost.port() > 0);
}

namespace {
std::string messages_of(std::FILE* file) {  // what was written to `file`, which is then emptied
    std::string out;
    std::rewind(file);
    for (int c = std::fgetc(file); c != EOF; c = std::fgetc(file)) out += static_cast<char>(c);
    std::fclose(file);
    return out;
}
}  // namespace

TEST_CASE("TRACETREE_ADMIN: the value starts a listener for the process, or says why it does not") {
    using tracetree::detail::admin::start_admin_from_environment;
    CHECK(start_admin_from_environment(nullptr) == nullptr);  // unset or empty: nothing, silently
    CHECK(start_admin_from_environment("") == nullptr);
    struct Refused {
        const char* value;
        const char* message;
    };
    const Refused refused[] = {
        {"0.0.0.0:0", "tracetree: TRACETREE_ADMIN (0.0.0.0:0): AdminServer: '0.0.0.0:0' is not a loopback address; "
                      "listening there needs AdminOptions::token or AdminOptions::allowed_peers"},
        {"[::]:0;token=", "tracetree: TRACETREE_ADMIN ([::]:0): 'token' is not an option, or it has no value"},
        {"127.0.0.1:0;colour=red", "'colour' is not an option, or it has no value; no admin listener started"},
        {"127.0.0.1:0;allowed_peers=10.0.0.0/33", "AdminOptions::allowed_peers holds addresses or networks in CIDR notation"},
        {"127.0.0.1", "is not an address to listen on"},
        {"127.0.0.1:99999", "tracetree: TRACETREE_ADMIN (127.0.0.1:99999): AdminServer: '127.0.0.1:99999' is not an address to "
                            "listen on: the port 99999 is out of range"},
    };
    for (const Refused& r : refused) {
        CAPTURE(r.value);
        std::FILE* messages = std::tmpfile();
        REQUIRE(messages != nullptr);
        CHECK(start_admin_from_environment(r.value, messages) == nullptr);
        const std::string said = messages_of(messages);
        CHECK(contains(said, r.message));
        CHECK(contains(said, "; no admin listener started (TRACETREE_ADMIN=ADDRESS[;token=TOKEN][;allowed_peers=CIDR,CIDR...])\n"));
    }

    std::FILE* messages = std::tmpfile();
    tracetree::AdminServer* server = start_admin_from_environment("127.0.0.1:0;token=s3cret;allowed_peers=10.0.0.0/8,fd00::/8", messages);
    REQUIRE(server != nullptr);
    const std::string said = messages_of(messages);
    CHECK(said == "tracetree: TRACETREE_ADMIN (127.0.0.1:0): admin listening on http://127.0.0.1:" + std::to_string(server->port()) +
                      "/debug/tracetree/\n");
    CHECK_FALSE(contains(said, "s3cret"));
    Client anonymous(server->port());  // the token was taken: a request without it is refused
    anonymous.send(get("/profile", server->port()));
    CHECK(starts_with(anonymous.read_all(), "HTTP/1.1 401 Unauthorized\r\n"));
    Client with_token(server->port());
    with_token.send("GET /debug/tracetree/profile HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret\r\n\r\n");
    CHECK(starts_with(with_token.read_all(), "HTTP/1.1 200 OK\r\n"));

    messages = std::tmpfile();
    CHECK(start_admin_from_environment("127.0.0.1:0", messages) == nullptr);  // one per process
    CHECK(contains(messages_of(messages), "an admin listener runs already (port " + std::to_string(server->port()) + "); none started\n"));
}
