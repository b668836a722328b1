// admin-host-life: the admin listener inside a process whose life is hard (issue 42): the host's life
// is the host's, the listener loses its own work at worst. One case per run, each in a child process
// of its own (its limits, closed descriptors and daemon stay there); prints "ok:"/"FAIL:" lines and
// exits 1 on a failure. These cases are in admin-hosts, the one program of the admin tests that host
// the listener or the handler (tests/admin/meson.build), beside `serve` (serve.cpp) and `env-server`
// (env_server.cpp), which this file's main() runs too.
//
//   admin-hosts thread-cap         no thread can be created (RLIMIT_NPROC, as another user when root;
//                                  else, not under a sanitizer, an address-space limit with glibc's
//                                  cache of thread stacks off): a request answers 503 with the reason,
//                                  the listener goes on and answers 200 once threads can be had again
//   admin-hosts emfile             out of descriptors (every one taken) with a client in the backlog: the
//                                  poller's CPU time stays under 5% of the wall time (it backs off
//                                  instead of spinning), the client is answered once descriptors are
//                                  free, and the admin page says what happened
//   admin-hosts closed             a daemon-style main() closes every descriptor above 2 and opens its own
//                                  listening socket and pipe on the numbers the listener had: every
//                                  connection to the program's socket reaches the program, and the
//                                  listener says once on stderr that it stopped
//   admin-hosts daemon             (TRACETREE_ADMIN=127.0.0.1:0) daemon(3): without restart_admin() the
//                                  daemon says once on stderr that it does not serve; with it, it serves
//   admin-hosts fork-waiting       (TRACETREE_ADMIN=127.0.0.1:0) 200 forks (20 under TSan) while four
//                                  admin calls wait (trace, stack, watch, monitor): no child hangs, each
//                                  records and renders, every 10th serves a listener of its own
//                                  (restart_admin()); none reads the executable's function table again
//   admin-hosts exit-answers       (TRACETREE_ADMIN=127.0.0.1:0) a trace and a monitor call wait when
//                                  the program returns from main: they answer 200 with the two
//                                  invocations, and the interval under way, they have
#include <tracetree/admin/server.hpp>
#include <tracetree/render.hpp>
#include <tracetree/runtime/stack.hpp>  // executable_functions_read(): fork-waiting's children

#include "../sanitizers.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <set>
#include <string>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

int g_failures = 0;

void check(bool ok, const std::string& what) {
    std::printf("%s%s\n", ok ? "ok: " : "FAIL: ", what.c_str());
    std::fflush(stdout);
    if (!ok) ++g_failures;
}

constexpr int kBoundMs = 20000;  // every wait for an event; its expiry is a failure

// Forks while admin calls wait: 200, or 20 under ThreadSanitizer, whose fork() of a process with
// threads takes about a second there (200 took 211 s on the 2-core machine).
constexpr int kForks = sanitizers::kThread ? 20 : 200;
// ASan's allocator in LLVM 14 and GCC 12 takes no lock around fork() (tests/fork_child.hpp; LLVM 18 does): a child
// forked while the monitor's interval allocates in another thread can wait for ever on that lock,
// whatever tracetree does (CI, 2026-12-05: 1 child of 200, its stacks not taken). Under ASan the monitor
// waits armed with one interval as long as a call may be, so no thread of the parent allocates while
// they happen; the plain and TSan builds keep its one-second ticks between the forks.
constexpr const char* kMonitor = sanitizers::kAddress ? "monitor?pattern=child_work&interval=300&n=1"
                                                      : "monitor?pattern=child_work&interval=1&n=100";
// A sanitizer's shadow memory does not fit under an address-space limit.
constexpr bool kSanitized = sanitizers::kAddressOrThread;

int connect_to(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
}

// Everything the server sends until it closes, within the bound ("" on a timeout).
std::string read_all(int fd) {
    std::string in;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBoundMs);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
        pollfd p{fd, POLLIN, 0};
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return "";
        char chunk[4096];
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got <= 0) return in;
        in.append(chunk, static_cast<std::size_t>(got));
    }
}

const char* const kProfile = "GET /debug/tracetree/profile HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

// A GET's whole answer, "" when the connection is refused or nothing comes.
std::string get(int port, const std::string& target = "/debug/tracetree/profile") {
    const int fd = connect_to(port);
    if (fd < 0) return "";
    const std::string request = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    std::string answer;
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size())) answer = read_all(fd);
    ::close(fd);
    return answer;
}

int status_of(const std::string& answer) { return answer.size() > 12 ? std::atoi(answer.c_str() + 9) : 0; }

std::set<long> tasks() {
    std::set<long> out;
    if (DIR* dir = ::opendir("/proc/self/task")) {
        while (const dirent* entry = ::readdir(dir))
            if (entry->d_name[0] != '.') out.insert(std::atol(entry->d_name));
        ::closedir(dir);
    }
    return out;
}

// Runs `body` in a child process and reports how it ended; its stdout is ours, its stderr is
// returned in `err` when asked.
int in_child(void (*body)(), std::string* err = nullptr) {
    int pipe_fds[2] = {-1, -1};
    if (err != nullptr && ::pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
    std::fflush(stdout);
    const pid_t child = ::fork();
    if (child == 0) {
        if (err != nullptr) ::dup2(pipe_fds[1], 2);
        body();
        std::fflush(stdout);
        ::_exit(g_failures == 0 ? 0 : 1);
    }
    if (err != nullptr) {
        ::close(pipe_fds[1]);
        char chunk[4096];
        ssize_t got;
        while ((got = ::read(pipe_fds[0], chunk, sizeof chunk)) > 0) err->append(chunk, static_cast<std::size_t>(got));
        ::close(pipe_fds[0]);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFSIGNALED(status)) check(false, "the child ends by signal " + std::to_string(WTERMSIG(status)));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void admin_work() { TRACETREE_FUNCTION(); }

// ---- thread-cap ---------------------------------------------------------------------------------

bool thread_starts() {
    try {
        std::thread([] {}).join();
        return true;
    } catch (const std::system_error&) {
        return false;
    }
}

void thread_cap() {
    admin_work();
    tracetree::AdminServer server("127.0.0.1:0");
    check(status_of(get(server.port())) == 200, "before the cap: 200");
    rlimit nproc{};
    ::getrlimit(RLIMIT_NPROC, &nproc);
    // Root is never held by RLIMIT_NPROC (the kernel exempts the initial user namespace's root): a
    // user of no importance is, with the hard limit kept so that the soft one can be raised again.
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) std::perror("setuid");
    rlimit capped = nproc;
    capped.rlim_cur = 1;
    ::setrlimit(RLIMIT_NPROC, &capped);
    const char* how = "RLIMIT_NPROC";
    rlimit address_space{};
    ::getrlimit(RLIMIT_AS, &address_space);
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    if (thread_starts() && !kSanitized && (tunables == nullptr || std::strstr(tunables, "stack_cache_size=0") == nullptr)) {
        // No user to be, or not enforced here: no room for a thread's stack instead, which glibc
        // would take from its cache of exited threads' stacks; again with that cache off.
        std::fflush(stdout);
        ::setenv("GLIBC_TUNABLES", "glibc.pthread.stack_cache_size=0", 1);
        ::execl("/proc/self/exe", "admin-host-life", "thread-cap", static_cast<char*>(nullptr));
    }
    if (thread_starts() && !kSanitized) {
        how = "RLIMIT_AS";
        long pages = 0;
        if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
            if (std::fscanf(statm, "%ld", &pages) != 1) pages = 0;
            std::fclose(statm);
        }
        rlimit tight = address_space;
        tight.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (2u << 20);
        ::setrlimit(RLIMIT_AS, &tight);
    }
    if (thread_starts()) {
        std::printf("skipped: no thread cap could be set here (RLIMIT_NPROC does not hold; RLIMIT_AS %s)\n",
                    kSanitized ? "is not tried under a sanitizer" : "does not hold either");
        return;
    }
    std::printf("capped with %s\n", how);
    const std::string first = get(server.port());
    check(status_of(first) == 503 && first.find("no thread could be started") != std::string::npos,
          "capped: 503 with the reason: " + first.substr(first.find("\r\n\r\n") == std::string::npos ? 0 : first.find("\r\n\r\n") + 4));
    check(status_of(get(server.port())) == 503, "capped: the listener goes on (503 again)");
    ::setrlimit(RLIMIT_NPROC, &nproc);
    ::setrlimit(RLIMIT_AS, &address_space);
    check(status_of(get(server.port())) == 200, "uncapped: 200 again");
}

// ---- emfile ---------------------------------------------------------------------------------------

long long run_ns(int schedstat_fd) {  // the thread's time on a CPU so far (schedstat's first field)
    char text[128] = "";
    const ssize_t got = ::pread(schedstat_fd, text, sizeof text - 1, 0);
    return got > 0 ? std::atoll(text) : -1;
}

void emfile() {
    admin_work();
    const std::set<long> before = tasks();
    tracetree::AdminServer server("127.0.0.1:0");
    long poller = -1;
    for (const long tid : tasks())
        if (before.count(tid) == 0) poller = tid;
    const int schedstat = ::open(("/proc/self/task/" + std::to_string(poller) + "/schedstat").c_str(), O_RDONLY | O_CLOEXEC);
    check(poller > 0 && schedstat >= 0 && run_ns(schedstat) >= 0, "the poller's thread found: " + std::to_string(poller));
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    std::vector<int> taken;
    for (int fd; (fd = ::dup(0)) >= 0;) taken.push_back(fd);
    check(errno == EMFILE, "every descriptor taken (" + std::to_string(taken.size()) + ")");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(server.port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    check(::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0, "a client waits in the backlog");
    check(::send(client, kProfile, std::strlen(kProfile), MSG_NOSIGNAL) > 0, "its request sent");
    // An interval of wall time against the poller's CPU time in it: spinning takes most of it (a
    // third of it on the 2-core machine shared with four builds), backing off next to none (0 ms).
    const long long cpu0 = run_ns(schedstat);
    const auto wall0 = std::chrono::steady_clock::now();
    ::poll(nullptr, 0, 2000);
    const long long cpu = run_ns(schedstat) - cpu0;
    const long long wall = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - wall0).count();
    check(cpu * 20 < wall, "out of descriptors, the poller does not spin: " + std::to_string(cpu / 1000000) + " ms of CPU in " +
                              std::to_string(wall / 1000000) + " ms");
    for (const int fd : taken) ::close(fd);
    const std::string answer = read_all(client);
    check(status_of(answer) == 200, "descriptors free again: the waiting client is answered 200");
    ::close(client);
    const std::string page = get(server.port(), "/debug/tracetree/");
    check(page.find("found no descriptor for a new connection") != std::string::npos, "the admin page says it ran out of descriptors");
}

// ---- closed ---------------------------------------------------------------------------------------

}  // namespace

// LeakSanitizer's switch, asked at exit: off in a forked child, which leaks by design what only the
// parent's other threads reached (their stacks are not copied) and the thread states the recorder
// orphans at fork. The parent, and a program started by exec, is checked.
static const pid_t g_parent = ::getpid();
extern "C" int __lsan_is_turned_off() { return ::getpid() != g_parent ? 1 : 0; }

// ThreadSanitizer reports a descriptor closed by one thread while another uses it as a race: here it
// is the case under test (a daemon's main() closing the listener's descriptors), not a fault.
extern "C" const char* __tsan_default_suppressions() { return "race:close_under_listener\n"; }

namespace {

void close_under_listener() {
    admin_work();
    tracetree::AdminServer server("127.0.0.1:0");
    int listener_fd = -1;  // the listener's socket: the descriptor bound to its port
    for (int fd = 3; fd < 1024 && listener_fd < 0; ++fd) {
        sockaddr_in bound{};
        socklen_t size = sizeof bound;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &size) == 0 && bound.sin_family == AF_INET &&
            ntohs(bound.sin_port) == server.port())
            listener_fd = fd;
    }
    check(status_of(get(server.port())) == 200, "before: 200");
    for (int fd = 3; fd < 1024; ++fd) ::close(fd);  // a daemon's main(), as many write it
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0 && fd < listener_fd;) {  // the numbers below it held
    }
    ::close(listener_fd);
    // The program's own socket and pipe, on the numbers that were the listener's.
    const int own = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int own_pipe[2] = {-1, -1};
    check(::pipe2(own_pipe, O_CLOEXEC | O_NONBLOCK) == 0 && listener_fd > 2 && own == listener_fd,
          "the program's socket takes the number of the listener's");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    check(::bind(own, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 && ::listen(own, 16) == 0 &&
              ::getsockname(own, reinterpret_cast<sockaddr*>(&address), &length) == 0,
          "the program listens");
    const int port = ntohs(address.sin_port);
    int reached = 0;
    for (int i = 0; i < 20; ++i) {
        const int client = connect_to(port);
        pollfd p{own, POLLIN, 0};
        int accepted = -1;
        if (client >= 0 && ::poll(&p, 1, 5000) == 1) accepted = ::accept4(own, nullptr, nullptr, SOCK_CLOEXEC);
        reached += accepted >= 0 ? 1 : 0;
        if (accepted >= 0) ::close(accepted);
        if (client >= 0) ::close(client);
    }
    check(reached == 20, "every connection to the program's socket reaches the program (" + std::to_string(reached) + " of 20)");
    char byte;
    check(::read(own_pipe[0], &byte, 1) < 0 && errno == EAGAIN, "nothing written into the program's pipe");
    check(get(server.port()).empty(), "the listener's port answers no more");
    server.stop();  // returns; closes nothing of the program's
    pollfd p{own, POLLIN, 0};
    check(::poll(&p, 1, 0) >= 0 && p.revents != POLLNVAL && ::fcntl(own_pipe[1], F_GETFD) >= 0,
          "the program's socket and pipe are open after the listener stopped");
}

// ---- daemon ---------------------------------------------------------------------------------------

int environment_port() {
    auto& listener = tracetree::detail::admin::EnvironmentListener::get();
    std::lock_guard<std::mutex> lock(listener.mutex);
    return listener.server ? listener.server->port() : 0;
}

// The host, a program of its own (TRACETREE_ADMIN read when it started): serves, becomes a daemon,
// and says on stdout what the daemon found.
int daemon_host(bool restart) {
    admin_work();
    const int port = environment_port();
    std::printf("before %d\n", status_of(get(port)));
    std::fflush(stdout);
    if (::daemon(1, 1) != 0) return 2;  // stdout and stderr stay the pipes the harness reads
    admin_work();
    if (!restart) {
        std::printf("daemon %s\n", get(port).empty() ? "refused" : "answered");
        return 0;
    }
    const int again = tracetree::restart_admin();
    const std::string answer = get(again);
    std::printf("daemon %d %s\n", status_of(answer), answer.find("admin_work") != std::string::npos ? "recorded" : "empty");
    return 0;
}

void daemon_case(const char* self, bool restart) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return check(false, "pipes");
    const pid_t host = ::fork();
    if (host == 0) {
        ::dup2(out[1], 1);
        ::dup2(err[1], 2);
        ::execl(self, self, restart ? "daemon-host-restart" : "daemon-host", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(out[1]);
    ::close(err[1]);
    // Both pipes reach their end when the host and its daemon are gone; each read is bounded.
    std::string said[2];
    pollfd polled[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    for (int open = 2; open > 0;) {
        if (::poll(polled, 2, kBoundMs) <= 0) break;
        for (int i = 0; i < 2; ++i) {
            if (polled[i].revents == 0) continue;
            char chunk[4096];
            const ssize_t got = ::read(polled[i].fd, chunk, sizeof chunk);
            if (got > 0) said[i].append(chunk, static_cast<std::size_t>(got));
            else polled[i].fd = -1, --open;
        }
    }
    int status = 0;
    ::waitpid(host, &status, 0);
    std::printf("%s%s", said[0].c_str(), said[1].c_str());
    const auto count = [](const std::string& text, const char* what) {
        int n = 0;
        for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
        return n;
    };
    check(said[0].find("before 200\n") != std::string::npos, "before daemon(): 200");
    if (restart) {
        check(said[0].find("daemon 200 recorded\n") != std::string::npos, "the daemon serves after restart_admin(), its scope recorded");
        check(count(said[1], "admin listening on") == 2, "the daemon's listener says where it listens");
    } else {
        check(said[0].find("daemon refused\n") != std::string::npos, "without restart_admin(): the daemon does not serve");
        check(count(said[1], "does not serve") == 1, "and says so once on stderr");
    }
}

// ---- exit-answers ---------------------------------------------------------------------------------

// The host, a program of its own: says its listener's port, waits for two calls to wait, records
// twice what they trace and monitor, and returns from main; the listener stops at exit.
int exit_host() {
    const int port = environment_port();
    std::printf("port %d\n", port);
    std::fflush(stdout);
    auto& listener = tracetree::detail::admin::EnvironmentListener::get();
    if (port == 0 || !listener.server->handler().wait_for_waiting(2, std::chrono::milliseconds(kBoundMs))) return 3;
    admin_work();
    admin_work();
    return 0;
}

void exit_answers(const char* self) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return check(false, "pipe");
    const pid_t host = ::fork();
    if (host == 0) {
        ::dup2(out[1], 1);
        ::execl(self, self, "exit-host", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    for (char c = 0; c != '\n';) {
        pollfd p{out[0], POLLIN, 0};
        if (::poll(&p, 1, kBoundMs) != 1 || ::read(out[0], &c, 1) != 1) break;
        line += c;
    }
    const int port = line.compare(0, 5, "port ") == 0 ? std::atoi(line.c_str() + 5) : 0;
    std::string monitored;
    std::thread monitor([&] { monitored = get(port, "/debug/tracetree/monitor?pattern=admin_work&interval=100&n=2"); });
    const std::string answer = get(port, "/debug/tracetree/trace?pattern=admin_work&n=5&timeout=300");
    monitor.join();
    int status = 0;
    ::waitpid(host, &status, 0);
    ::close(out[0]);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the host exits 0 (" + std::to_string(status) + ")");
    const std::size_t body = answer.find("\r\n\r\n");
    std::printf("%s\n", answer.substr(body == std::string::npos ? 0 : body + 4).c_str());
    check(status_of(answer) == 200 && answer.find("Cancelled after") != std::string::npos &&
              answer.find("2 of 5 invocation(s) of 'admin_work'") != std::string::npos,
          "the call waiting at the program's exit answers 200 with what it collected");
    const std::size_t monitored_body = monitored.find("\r\n\r\n");
    std::printf("%s\n", monitored.substr(monitored_body == std::string::npos ? 0 : monitored_body + 4).c_str());
    check(status_of(monitored) == 200 && monitored.find(" admin_work  2 ") != std::string::npos &&
              monitored.find("1 of 2 interval(s) of 'admin_work', the last one cut short.") != std::string::npos,
          "the monitor waiting at the program's exit answers with the interval under way");
}

// ---- fork-waiting ---------------------------------------------------------------------------------

void child_work() { TRACETREE_FUNCTION(); }

// Where a hung child waits, on stderr, for the log of a run that cannot be repeated at will (the child
// let any process trace it: Yama's ptrace_scope 1 allows only ancestors).
void print_stacks(pid_t child) {
    const std::string pid = std::to_string(child);
    const std::string gdb = "timeout 60 gdb -batch -p " + pid + " -ex 'thread apply all bt' >&2 2>&1";
    if (std::system(gdb.c_str()) != 0)
        static_cast<void>(std::system(("cat /proc/" + pid + "/wchan /proc/" + pid + "/syscall >&2").c_str()));
}

// A child: records, renders, and every 10th serves on a listener of its own. Exits 0 when all held,
// 3 when it would have to read the executable's function table itself (the stack call read it when it
// started, before the forks).
[[noreturn]] void forked_child(int index) {
    if (!tracetree::detail::executable_functions_read().load()) std::exit(3);
    child_work();
    const tracetree::Profile profile = tracetree::profile();
    bool ok = tracetree::to_string(profile).find("child_work") != std::string::npos;
    if (index % 10 == 0) {
        const int port = tracetree::restart_admin(nullptr);
        const std::string answer = get(port);
        ok = ok && port > 0 && status_of(answer) == 200 && answer.find("child_work") != std::string::npos;
    }
    std::exit(ok ? 0 : 1);
}

void fork_waiting() {
    const int port = environment_port();
    check(port > 0, "TRACETREE_ADMIN's listener runs");
    std::vector<std::thread> calls;
    for (const char* target : {"trace?pattern=child_work&n=100&timeout=300", "stack?pattern=child_work&n=100&timeout=300",
                               "watch?pattern=child_work&n=100&timeout=300", kMonitor})
        calls.emplace_back([port, target] { get(port, std::string("/debug/tracetree/") + target); });
    auto& listener = tracetree::detail::admin::EnvironmentListener::get();
    check(listener.server->handler().wait_for_waiting(4, std::chrono::seconds(20)), "four admin calls wait");
    int hung = 0, failed = 0, table_unread = 0;
    for (int i = 0; i < kForks; ++i) {
        int result[2];
        if (::pipe2(result, O_CLOEXEC) != 0) return check(false, "pipe");
        const pid_t child = ::fork();
        if (child == 0) {
            ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // print_stacks()
            ::close(result[0]);
            forked_child(i);
        }
        ::close(result[1]);
        pollfd p{result[0], POLLIN, 0};  // the pipe's end: the child is gone
        char byte;
        if (::poll(&p, 1, kBoundMs) != 1 || ::read(result[0], &byte, 1) != 0) {
            ++hung;
            print_stacks(child);
            ::kill(child, SIGKILL);
        }
        ::close(result[0]);
        int status = 0;
        ::waitpid(child, &status, 0);
        table_unread += WIFEXITED(status) && WEXITSTATUS(status) == 3 ? 1 : 0;
        failed += WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    check(hung == 0, std::to_string(hung) + " of " + std::to_string(kForks) + " children hung");
    check(table_unread == 0, std::to_string(table_unread) + " of " + std::to_string(kForks) +
                                 " children found the executable's function table unread");
    check(failed == 0, std::to_string(failed) + " of " + std::to_string(kForks) + " children failed to record, render or serve");
    check(status_of(get(port)) == 200, "the parent answers after its children");
    listener.server->handler().shutdown();  // the waiting calls answer now
    for (auto& call : calls) call.join();
}

}  // namespace

int serve_main();       // serve.cpp
int env_server_main();  // env_server.cpp

int main(int argc, char** argv) {
    const std::string what = argc > 1 ? argv[1] : "";
    if (what == "serve") return serve_main();
    if (what == "env-server") return env_server_main();
    if (what == "daemon-host" || what == "daemon-host-restart") return daemon_host(what == "daemon-host-restart");
    if (what == "exit-host") return exit_host();
    if (what == "thread-cap") check(in_child(thread_cap) == 0, "thread-cap");
    else if (what == "emfile") check(in_child(emfile) == 0, "emfile");
    else if (what == "closed") {
        std::string err;
        check(in_child(close_under_listener, &err) == 0, "closed");
        std::fputs(err.c_str(), stdout);
        int said = 0;
        for (std::size_t at = err.find("was closed under it"); at != std::string::npos; at = err.find("was closed under it", at + 1))
            ++said;
        check(said == 1, "the listener said once on stderr that it stopped (" + std::to_string(said) + ")");
    } else if (what == "daemon") {
        daemon_case("/proc/self/exe", false);
        daemon_case("/proc/self/exe", true);
    } else if (what == "fork-waiting") fork_waiting();
    else if (what == "exit-answers") exit_answers("/proc/self/exe");
    else {
        std::fprintf(stderr, "usage: admin-hosts serve|env-server|thread-cap|emfile|closed|daemon|fork-waiting|exit-answers\n");
        return 2;
    }
    std::printf("admin-host-life %s: %d failed\n", what.c_str(), g_failures);
    return g_failures == 0 ? 0 : 1;
}
