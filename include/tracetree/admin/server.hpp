// tracetree admin server: the admin handler on a listener of its own, in one line. SPDX-License-Identifier: MIT
//
//   #include <tracetree/admin/server.hpp>
//   tracetree::AdminServer admin("127.0.0.1:7746");  // curl http://127.0.0.1:7746/debug/tracetree/
//
// For a program without an HTTP server, or one whose server should not carry the admin endpoints.
// One thread polls the listener and every connection; each request that arrived whole is handled on a
// thread of its own (a trace waits for its invocations), at most max_connections at once. A request
// must arrive whole within request_timeout of its connection's accept (idle and slow clients are
// closed, with a 408 when they sent something), its head within max_head bytes (431) and its body
// within max_body (413); a response that makes no progress for write_timeout is dropped. A client that
// hangs up while its call waits cancels the call. One request per connection (Connection: close).
// stop() and the destructor cancel the calls that wait and return once their threads have.
//
// Binds loopback unless told otherwise; another address needs AdminOptions::token or allowed_peers,
// since the handler would refuse every client that is not loopback anyway, and without them an open
// port is all that would be gained. A program that starts a server of its own includes this header.
// The one TRACETREE_ADMIN starts is compiled where this header is: in the tracetree-runtime library,
// or, header-only, in a file that includes it (without one, TRACETREE_ADMIN says so on stderr).
// The definitions are admin/server-inl.hpp, compiled as the handler's are (admin/handler.hpp): with
// TRACETREE_SEPARATE_RUNTIME in the library only, header-only in every file that includes this.
#ifndef TRACETREE_ADMIN_SERVER_HPP
#define TRACETREE_ADMIN_SERVER_HPP

#include "handler.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>  // std::FILE: where TRACETREE_ADMIN's listener says what it does
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>  // dev_t, ino_t
#include <thread>
#include <vector>

TRACETREE_BEGIN_NAMESPACE

namespace detail {
namespace admin {
struct EnvironmentListener;
// A descriptor's file (fstat's device and inode), so that a number closed and reused under the
// listener is told from its own socket or pipe.
struct FileId {
    dev_t device = 0;
    ino_t inode = 0;
    bool valid = false;
};
}  // namespace admin
}  // namespace detail

struct AdminServerOptions {
    AdminOptions admin;                  // the handler's: token, allowed_peers, max_waiting, ...
    std::size_t max_connections = 16;    // open at once, 1 ..= 1024; more are answered 503 and closed
    std::size_t max_head = 8192;         // request line and headers, bytes (431 beyond)
    std::size_t max_body = 65536;        // a POST body, bytes (413 beyond)
    Nanos request_timeout = std::chrono::seconds(10);  // from accept to the whole request
    Nanos write_timeout = std::chrono::seconds(10);    // a response that makes no progress for this is dropped
};

class AdminServer {
public:
    // "127.0.0.1:7746", "[::1]:7746", "localhost:7746"; port 0 picks a free one (port()). Throws
    // std::invalid_argument for a bad address or option, or a bind outside loopback without a token or
    // allowed_peers; std::runtime_error when the socket cannot listen.
    explicit AdminServer(const std::string& address, AdminServerOptions options = {});
    ~AdminServer();  // stop()
    AdminServer(const AdminServer&) = delete;
    AdminServer& operator=(const AdminServer&) = delete;

    int port() const { return port_; }
    AdminHandler& handler() { return handler_; }
    void stop();  // idempotent; cancels waiting calls, closes every connection, joins every thread
    // False once the poller has stopped on its own: its descriptors were closed under it (a daemon's
    // main() closing every descriptor), or it could not go on; it said why on stderr.
    bool serving() const { return !lost_; }

private:
    friend struct detail::admin::EnvironmentListener;  // a forked child closes its copies of the descriptors
    struct Connection;
    void run();
    void serve();
    bool owns(int fd, const detail::admin::FileId& id) const;
    bool owns_its_descriptors();
    void wake();
    void forget(Connection& connection);
    void fail(Connection& connection, const char* why) noexcept;
    std::string note() const;
    void accept_all();
    void read_some(Connection& connection);
    void start_call(Connection& connection, std::size_t head_end, std::size_t body_size);
    void refuse(Connection& connection, int status, const std::string& why);
    void write_some(Connection& connection);
    void drain(Connection& connection);

    const AdminServerOptions options_;
    AdminHandler handler_;
    int listener_ = -1;
    int wake_[2] = {-1, -1};  // a worker that finished, or stop(), writes a byte
    detail::admin::FileId listener_id_, wake_id_[2];  // what they were at the start: a number reused is not ours
    int port_ = 0;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> lost_{false};  // the poller stopped on its own (serving())
    // accept() out of descriptors (EMFILE, ENFILE, ENOBUFS, ENOMEM): the listening socket is left out
    // of the poll until accept_resume_, for a time that doubles up to a second, instead of being
    // reported ready again at once with the client still in the backlog; the page says so (note()).
    std::atomic<std::uint64_t> accept_failures_{0};
    std::atomic<int> accept_errno_{0};
    std::chrono::steady_clock::time_point accept_resume_;  // the poller's
    std::chrono::milliseconds accept_backoff_{0};          // the poller's
    std::vector<std::unique_ptr<Connection>> connections_;  // the poller's
    std::mutex finished_mutex_;
    std::vector<Connection*> finished_;  // calls answered, for the poller to send
    std::vector<Connection*> answered_;  // the poller's: finished_ taken
    std::mutex stop_mutex_;
    std::thread poller_;
};

namespace detail {
namespace admin {

// The listener TRACETREE_ADMIN started, for the rest of the process: stopped at exit, before the
// recorder it reads. fork() copies it but none of its threads, so a child must neither serve with it
// nor destroy it (the destructor would join a poller that runs in the parent only, and the handler
// would wait for the parent's calls): the child closes its copies of the listening socket and the
// wake-up pipe, so that the port is the parent's alone, and leaves the object be. The first child a
// listening process forks says so on its stderr, once (a daemon's last word before daemon() closes
// it); tracetree::restart_admin() starts a listener of the child's own.
struct EnvironmentListener {
    std::mutex mutex;
    std::unique_ptr<AdminServer> server;
    AdminServer* parents = nullptr;  // in a child: the parent's, left be (still pointed to: no leak is reported)
    std::string setting;             // TRACETREE_ADMIN's value, for restart_admin()
    std::string child_note;          // what a forked child says, made by the parent (the child only write()s)
    bool child_told = false;         // a child of this process said it already

    static EnvironmentListener& get();  // the process's one
    static void before_fork() noexcept;  // pthread_atfork's
    static void after_fork_in_parent() noexcept;
    static void after_fork_in_child() noexcept;
};

// TRACETREE_ADMIN's value, read once when the recorder starts (never on a scope's path); runtime()
// calls this in the copy that started the recorder (runtime/control-inl.hpp):
//   ADDRESS[;token=TOKEN][;allowed_peers=CIDR,CIDR...]     e.g. 127.0.0.1:7746, or 0.0.0.0:7746;token=s3cret
// starts an AdminServer there for the rest of the process and says where on `messages`; a bad value,
// or an address outside loopback without a token or allowed_peers, starts nothing and says why. Null
// or empty: nothing, silently. Returns the server, or null. Once one runs, later calls start none.
AdminServer* start_admin_from_environment(const char* value, std::FILE* messages = stderr);

}  // namespace admin
}  // namespace detail

// TRACETREE_ADMIN's listener again, in this process, as the variable said when the recorder started:
// in a child after fork() or daemon() (a child's listener is its parent's), or after the listener
// stopped because its descriptors were closed under it. Says where it listens on `messages`, or why
// it cannot; returns its port, 0 when none serves. One that serves already is left be (its port).
int restart_admin(std::FILE* messages = stderr);

TRACETREE_END_NAMESPACE

#if TRACETREE_DETAIL_RUNTIME_HERE
#include "server-inl.hpp"
#endif

#endif  // TRACETREE_ADMIN_SERVER_HPP
