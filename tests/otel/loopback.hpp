// The exporter tests' collectors (test_otlp.cpp's scripted one, test_hostile_collector.cpp's hostile
// ones) listen on 127.0.0.1 only, on a port the kernel picks.
#ifndef TRACETREE_TESTS_OTEL_LOOPBACK_HPP
#define TRACETREE_TESTS_OTEL_LOOPBACK_HPP

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <string>

namespace loopback {

// A listening socket; `port` is set to its port.
inline int listen_on_any_port(int& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port = ntohs(address.sin_port);
    return fd;
}

// One HTTP request off `fd`: its head and a Content-Length body, as far as they came before the peer
// closed, `idle_ms` passed without a byte, or `stop_fd` (-1: none) became readable.
inline std::string read_request(int fd, int stop_fd, int idle_ms) {
    std::string buffer;
    char chunk[65536];
    std::size_t head_end = std::string::npos, length = 0;
    while (head_end == std::string::npos || buffer.size() < head_end + 4 + length) {
        pollfd waits[2] = {{fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
        if (::poll(waits, stop_fd < 0 ? 1 : 2, idle_ms) <= 0 || waits[1].revents != 0) break;
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got <= 0) break;
        buffer.append(chunk, static_cast<std::size_t>(got));
        if (head_end == std::string::npos && (head_end = buffer.find("\r\n\r\n")) != std::string::npos) {
            const std::size_t at = buffer.find("Content-Length: ");
            if (at != std::string::npos && at < head_end) length = std::stoul(buffer.substr(at + 16));
        }
    }
    return buffer;
}

}  // namespace loopback

#endif
