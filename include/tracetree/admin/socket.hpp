// What the admin listener and the server adapters do with a connection's socket: name its peer for
// AdminRequest::peer, and cancel a waiting call when the client hangs up. SPDX-License-Identifier: MIT
#ifndef TRACETREE_ADMIN_SOCKET_HPP
#define TRACETREE_ADMIN_SOCKET_HPP

#include "handler.hpp"
#include "../runtime/signal_mask.hpp"  // thread_without_signals

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <memory>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <utility>

TRACETREE_BEGIN_NAMESPACE
namespace detail {
namespace admin {

// "a.b.c.d:port" or "[v6]:port" as accept() or getpeername() gave it, for AdminRequest::peer.
inline std::string peer_text(const sockaddr_storage& address) {
    char text[INET6_ADDRSTRLEN] = "";
    if (address.ss_family == AF_INET) {
        sockaddr_in v4;
        std::memcpy(&v4, &address, sizeof v4);
        ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
        return std::string(text) + ':' + std::to_string(ntohs(v4.sin_port));
    }
    sockaddr_in6 v6;
    std::memcpy(&v6, &address, sizeof v6);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof text);
    return '[' + std::string(text) + "]:" + std::to_string(ntohs(v6.sin6_port));
}

// An address and port as a server library gives them ("::1" and 53122) in AdminRequest::peer's form.
inline std::string peer_text(const std::string& address, int port) {
    const bool v6 = address.find(':') != std::string::npos;
    return (v6 ? '[' + address + ']' : address) + ':' + std::to_string(port);
}

// While it lives, a thread watches `fd` and cancels `token` when the client hangs up, resets, or
// shuts down its sending side (POLLRDHUP; bytes it sends, a pipelined request, do not count). The
// destructor stops the watch and returns once the thread has: the call has answered by then, and
// the socket is still open. Without a descriptor, a pipe or a thread (or the memory for one), there
// is no watch: the call runs to its end, as it would without a token.
class HangupWatch {
public:
    HangupWatch(int fd, std::shared_ptr<CancelToken> token) {
        if (fd < 0 || !token || ::pipe2(done_, O_CLOEXEC) != 0) return;
        try {
            thread_ = thread_without_signals([fd, done = done_[0], token = std::move(token)] {
                pollfd polled[2] = {{fd, POLLRDHUP, 0}, {done, POLLIN, 0}};
                while (::poll(polled, 2, -1) < 0 && errno == EINTR) {
                }
                if (polled[0].revents != 0) token->cancel();
            });
        } catch (const std::exception&) {  // no thread, or no memory for one: no watch
            close_pipe();
        }
    }
    ~HangupWatch() {
        if (!thread_.joinable()) return;
        ::close(done_[1]);  // wakes the thread (POLLHUP on the pipe's reading end)
        done_[1] = -1;
        thread_.join();
        close_pipe();
    }
    HangupWatch(const HangupWatch&) = delete;
    HangupWatch& operator=(const HangupWatch&) = delete;

private:
    void close_pipe() {
        for (int& fd : done_)
            if (fd >= 0) ::close(fd), fd = -1;
    }
    int done_[2] = {-1, -1};
    std::thread thread_;
};

}  // namespace admin
}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_ADMIN_SOCKET_HPP
