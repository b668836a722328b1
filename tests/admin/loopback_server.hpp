// A tiny HTTP/1.1 server on 127.0.0.1 for the admin tests: a thread per connection, one request per
// connection (Connection: close), every request handed to a tracetree::AdminHandler. While the
// handler runs, a second thread watches the socket and cancels the request's CancelToken when the
// client hangs up (POLLRDHUP): what a host server should do.
#ifndef TRACETREE_TESTS_ADMIN_LOOPBACK_SERVER_HPP
#define TRACETREE_TESTS_ADMIN_LOOPBACK_SERVER_HPP

#include <tracetree/admin/handler.hpp>

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace admin_test {

class LoopbackServer {
public:
    explicit LoopbackServer(tracetree::AdminHandler& handler) : handler_(handler) {
        listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof address;
        if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(listener_, 64) != 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0)
            throw std::runtime_error(std::string("loopback server: ") + std::strerror(errno));
        port_ = ntohs(address.sin_port);
        acceptor_ = std::thread([this] { accept_loop(); });
    }

    ~LoopbackServer() {
        stopping_ = true;
        ::shutdown(listener_, SHUT_RDWR);  // wakes accept()
        acceptor_.join();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (const int fd : open_) ::shutdown(fd, SHUT_RDWR);  // wakes idle readers
        }
        handler_.shutdown();  // and waiting calls
        for (std::thread& thread : threads_) thread.join();
        ::close(listener_);
    }
    LoopbackServer(const LoopbackServer&) = delete;
    LoopbackServer& operator=(const LoopbackServer&) = delete;

    int port() const { return port_; }

private:
    void accept_loop() {
        for (;;) {
            sockaddr_in peer{};
            socklen_t length = sizeof peer;
            const int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EINTR || errno == ECONNABORTED) continue;
                return;
            }
            std::lock_guard<std::mutex> lock(mutex_);
            if (stopping_) {
                ::close(fd);
                return;
            }
            open_.insert(fd);
            char address[INET_ADDRSTRLEN] = "";
            ::inet_ntop(AF_INET, &peer.sin_addr, address, sizeof address);
            threads_.emplace_back([this, fd, from = std::string(address) + ":" + std::to_string(ntohs(peer.sin_port))] { serve(fd, from); });
        }
    }

    static std::string header(const std::string& head, const char* name) {  // case-insensitive, first one
        const std::string want = std::string("\r\n") + name + ":";
        std::string lower = head;
        for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        const std::size_t at = lower.find(want);
        if (at == std::string::npos) return "";
        std::size_t begin = at + want.size();
        const std::size_t end = head.find("\r\n", begin);
        while (begin < end && head[begin] == ' ') ++begin;
        return head.substr(begin, end - begin);
    }

    // Reads until `bytes` holds the head and `body_size` more bytes; false on close, error or 10 s idle.
    static bool read_more(int fd, std::string& bytes) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 10000) <= 0) return false;
        char chunk[4096];
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got <= 0) return false;
        bytes.append(chunk, static_cast<std::size_t>(got));
        return bytes.size() <= 1 << 20;
    }

    void serve(int fd, const std::string& peer) {
        std::string bytes;
        std::size_t head_end = std::string::npos;
        while ((head_end = bytes.find("\r\n\r\n")) == std::string::npos)
            if (!read_more(fd, bytes)) return finish(fd);
        const std::string head = bytes.substr(0, head_end + 2);
        const std::size_t body_size = std::strtoul(header(head, "content-length").c_str(), nullptr, 10);
        while (bytes.size() < head_end + 4 + body_size)
            if (!read_more(fd, bytes)) return finish(fd);

        tracetree::AdminRequest request;
        const std::size_t space = head.find(' '), space2 = head.find(' ', space + 1);
        request.peer = peer;
        request.method = head.substr(0, space);
        request.target = head.substr(space + 1, space2 - space - 1);
        request.host = header(head, "host");
        request.origin = header(head, "origin");
        request.authorization = header(head, "authorization");
        request.content_type = header(head, "content-type");
        request.body = bytes.substr(head_end + 4, body_size);
        request.cancel = std::make_shared<tracetree::CancelToken>();

        int done[2];
        if (::pipe2(done, O_CLOEXEC) != 0) return finish(fd);
        std::thread watcher([fd, &done, token = request.cancel] {
            pollfd p[2] = {{fd, POLLRDHUP, 0}, {done[0], POLLIN, 0}};
            while (::poll(p, 2, -1) < 0 && errno == EINTR) {
            }
            if (p[0].revents != 0) token->cancel();  // the client hung up (or reset)
        });
        tracetree::AdminResponse response = handler_.handle(request);
        ::close(done[1]);
        watcher.join();
        ::close(done[0]);

        std::string out = "HTTP/1.1 " + std::to_string(response.status) + " " + tracetree::detail::admin::status_text(response.status) + "\r\nContent-Type: " +
                          response.content_type + "\r\nContent-Length: " + std::to_string(response.body.size()) +
                          "\r\nConnection: close\r\n";
        for (const auto& extra : response.headers) out += extra.first + ": " + extra.second + "\r\n";
        out += "\r\n" + response.body;
        for (std::size_t sent = 0; sent < out.size();) {
            const ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) break;
            sent += static_cast<std::size_t>(n);
        }
        finish(fd);
    }

    void finish(int fd) {
        std::lock_guard<std::mutex> lock(mutex_);
        open_.erase(fd);
        ::shutdown(fd, SHUT_WR);
        ::close(fd);
    }

    tracetree::AdminHandler& handler_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::thread acceptor_;
    std::mutex mutex_;
    std::set<int> open_;
    std::vector<std::thread> threads_;
};

}  // namespace admin_test

#endif  // TRACETREE_TESTS_ADMIN_LOOPBACK_SERVER_HPP
