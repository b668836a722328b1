// A raw HTTP client for the admin tests over real sockets (the listener and the server adapters): it
// sends bytes as given and reads until the server closes, so that every answer is checked as sent.
#ifndef TRACETREE_TESTS_ADMIN_CLIENT_HPP
#define TRACETREE_TESTS_ADMIN_CLIENT_HPP

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <cstdint>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

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

}  // namespace

#endif  // TRACETREE_TESTS_ADMIN_CLIENT_HPP
