// A raw HTTP client for the admin tests over real sockets (the listener and the server adapters): it
// sends bytes as given and reads until the server closes, so that every answer is checked as sent.
#ifndef TRACETREE_TESTS_ADMIN_CLIENT_HPP
#define TRACETREE_TESTS_ADMIN_CLIENT_HPP

#include <doctest/doctest.h>
#include <tracetree/admin/handler.hpp>

#include <arpa/inet.h>
#include <chrono>
#include <cstdint>
#include <memory>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace {

constexpr int kNoHangMs = 20000;

struct Client {
    int fd = -1;
    explicit Client(int port) {
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(static_cast<std::uint16_t>(port));
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    }
    ~Client() { hang_up(); }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    void send(const std::string& bytes) const {
        REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()));
    }
    // Everything until the server closes; "(no close)" if it does not within the bound.
    std::string read_all() const {
        std::string out;
        for (;;) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, kNoHangMs) <= 0) return out + "(no close)";
            char chunk[4096];
            const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
            if (got <= 0) return out;
            out.append(chunk, static_cast<std::size_t>(got));
        }
    }
    void hang_up() {
        if (fd >= 0) ::close(fd);
        fd = -1;
    }
};

// Connection: close, for servers that keep connections open (the adapters' libraries).
inline std::string get(const std::string& target, int port) {
    return "GET /debug/tracetree" + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\nConnection: close\r\n\r\n";
}

inline bool starts_with(const std::string& text, const std::string& prefix) { return text.compare(0, prefix.size(), prefix) == 0; }
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A server with the handler mounted under /debug/tracetree and a /hello route of its own (the
// adapters' tests): its route still answers, a form POST reaches the handler, a stranger's Host is
// refused by the handler's checks.
inline void check_mounted(int port) {
    Client hello(port);
    hello.send("GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    CHECK(contains(hello.read_all(), "\r\n\r\nhello\n"));

    Client reset(port);  // a form body, as the page's forms send it
    reset.send("POST /debug/tracetree/reset HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
               "Content-Length: 11\r\nConnection: close\r\n\r\nformat=html");
    const std::string page = reset.read_all();
    CHECK(starts_with(page, "HTTP/1.1 200 OK\r\n"));
    CHECK(contains(page, "Content-Type: text/html; charset=utf-8\r\n"));

    Client stranger(port);  // a loopback client with a stranger's Host
    stranger.send("GET /debug/tracetree/profile HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n");
    CHECK(starts_with(stranger.read_all(), "HTTP/1.1 403 Forbidden\r\n"));
}

// A client that hangs up cancels its call and frees its slot: the next four (the handler's
// max_waiting) all wait, counted one by one, so that a slot still held shows.
inline void check_hang_up_frees_slot(const tracetree::AdminHandler& admin, int port) {
    const std::chrono::seconds bound(20);
    {
        Client gone(port);
        gone.send(get("/trace?pattern=no_such_function&timeout=300", port));
        REQUIRE(admin.wait_for_waiting(1, bound));
    }
    CHECK(admin.wait_for_waiting(0, bound));  // without the cancel: 300 s
    std::vector<std::unique_ptr<Client>> four;
    for (std::size_t i = 1; i <= 4; ++i) {
        four.push_back(std::make_unique<Client>(port));
        four.back()->send(get("/trace?pattern=no_such_function&timeout=300", port));
        CHECK(admin.wait_for_waiting(i, bound));
    }
    four.clear();
    CHECK(admin.wait_for_waiting(0, bound));
}

}  // namespace

#endif  // TRACETREE_TESTS_ADMIN_CLIENT_HPP
