// The demo-server binary (meson passes its path in DEMO_SERVER) under hostile clients, as a process of
// its own: its own descriptors, its own RSS, a real SIGTERM. Idle, slowloris, slow-reader and
// never-sent-body connections must cost the server no worker, so /send still answers at once; past
// --max-connections a client gets 503; memory comes back after large responses; SIGTERM stops it
// while all that is going on. Latencies and RSS are printed, and asserted only against generous
// bounds that catch a hang or a leak, never a slow machine. No sleep waits for an event: the only
// timed pause paces the slow clients.
#include "fatjar.hpp"
#include "http.hpp"
#include "net.hpp"
#include "zip.hpp"
#include "../sanitizers.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

extern char** environ;

namespace net = demo::net;
using demo::net::Millis;
using Clock = std::chrono::steady_clock;

namespace {

const std::string kHost = "127.0.0.1";
constexpr Millis kHang{60000};         // for what takes well under a second: only a hang reaches it
constexpr Millis kSlowBound{5000};     // /send under load: a hang detector, not a performance target
constexpr Millis kPace{100};           // slow clients act this often

constexpr bool kSanitized = sanitizers::kAddressOrThread;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// The full-size application jar, made once and given to every server here with --jar, and the
// largest static file it serves (the 5.6 MB source map), found by size rather than by name.
struct Jar {
    std::string dir, path;
    std::string big_path;  // its URL path
    std::string big;       // its bytes
    Jar() {
        char dir_template[] = "/tmp/tracetree-connector-test-XXXXXX";
        REQUIRE(::mkdtemp(dir_template) != nullptr);
        dir = dir_template;
        path = dir + "/" + std::string(demo::kFatJarName);
        const std::string bytes = demo::build_fat_jar(1.0);
        std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        const demo::zip::Archive fat = demo::zip::Archive::parse(bytes);
        const demo::zip::Archive nested = demo::zip::Archive::parse(fat.raw_data(*fat.find(demo::kSwaggerUiJar)));
        const demo::zip::Entry* largest = nullptr;
        for (const demo::zip::Entry& entry : nested.entries())
            if (entry.name.rfind("META-INF/resources/", 0) == 0 && (largest == nullptr || entry.size > largest->size))
                largest = &entry;
        REQUIRE(largest != nullptr);
        big_path = largest->name.substr(std::string("META-INF/resources").size());
        big = nested.read(*largest);
    }
    ~Jar() {
        ::unlink(path.c_str());
        ::rmdir(dir.c_str());
    }
};

const Jar& jar() {
    static const Jar made;
    return made;
}

// As many descriptors as the hard limit allows; returns the soft limit now.
std::size_t raise_descriptor_limit() {
    rlimit limit{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
    return static_cast<std::size_t>(std::min<rlim_t>(limit.rlim_cur, 1u << 20));
}

// demo-server on ephemeral ports, its stdout on a pipe: the banner gives the port, EOF its exit.
class ServerProcess {
public:
    explicit ServerProcess(const std::vector<std::string>& options) {
        const char* binary = std::getenv("DEMO_SERVER");
        REQUIRE_MESSAGE(binary != nullptr, "DEMO_SERVER must name the demo-server binary (meson test sets it)");
        std::vector<std::string> args = {binary, "--port=0", "--channel-port=0", "--admin-port=0", "--jar=" + jar().path};
        args.insert(args.end(), options.begin(), options.end());
        std::vector<char*> argv;
        for (std::string& arg : args) argv.push_back(arg.data());
        argv.push_back(nullptr);
        int out[2];
        REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, out[1], 1);
        const int rc = ::posix_spawn(&pid_, binary, &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        ::close(out[1]);
        out_ = out[0];
        REQUIRE_MESSAGE(rc == 0, "cannot start " << binary << ": " << std::strerror(rc));
        const std::string banner = read_line();
        const std::size_t at = banner.find(" app=http://" + kHost + ":");
        REQUIRE_MESSAGE(at != std::string::npos, "no banner from demo-server: '" << banner << "'");
        port_ = std::atoi(banner.c_str() + at + 13 + kHost.size());
        REQUIRE(port_ > 0);
    }
    ~ServerProcess() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, nullptr, 0);
        }
        ::close(out_);
    }
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    int port() const { return port_; }

    std::size_t rss_kib() const {
        std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
        for (std::string line; std::getline(status, line);)
            if (line.rfind("VmRSS:", 0) == 0) return static_cast<std::size_t>(std::strtoull(line.c_str() + 6, nullptr, 10));
        FAIL("no VmRSS for the server");
        return 0;
    }

    // SIGTERM, then the time until the process has exited (its stdout closes); its exit status must
    // be 0 (under the sanitizers that includes no leak and no race reported).
    Clock::duration terminate() {
        const auto start = Clock::now();
        REQUIRE(::kill(pid_, SIGTERM) == 0);
        for (char chunk[256];;) {
            pollfd p{out_, POLLIN, 0};
            const int ready = ::poll(&p, 1, static_cast<int>(kHang.count()));
            REQUIRE_MESSAGE(ready == 1, "demo-server still running " << kHang.count() << " ms after SIGTERM");
            const ssize_t got = ::read(out_, chunk, sizeof chunk);
            if (got == 0 || (got < 0 && errno != EINTR)) break;
        }
        int status = 0;
        REQUIRE(::waitpid(pid_, &status, 0) == pid_);
        const auto took = Clock::now() - start;
        pid_ = -1;
        CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "demo-server exit status " << status);
        return took;
    }

private:
    std::string read_line() {
        std::string line;
        for (char c = 0; c != '\n';) {
            pollfd p{out_, POLLIN, 0};
            REQUIRE_MESSAGE(::poll(&p, 1, static_cast<int>(kHang.count())) == 1, "demo-server printed no banner");
            const ssize_t got = ::read(out_, &c, 1);
            if (got < 0 && errno == EINTR) continue;
            REQUIRE_MESSAGE(got == 1, "demo-server exited at start");
            line += c;
        }
        return line;
    }

    pid_t pid_ = -1;
    int out_ = -1;
    int port_ = 0;
};

class Socket {
public:
    // Connected to the loopback port; a small receive buffer (rcvbuf > 0) makes a non-reading client
    // stall the server's writes quickly.
    explicit Socket(int port, int rcvbuf = 0) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        REQUIRE_MESSAGE(fd_ >= 0, "socket: " << std::strerror(errno));
        if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(static_cast<std::uint16_t>(port));
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE_MESSAGE(::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0,
                        "connect: " << std::strerror(errno));
    }
    ~Socket() {
        if (fd_ >= 0) ::close(fd_);
    }
    Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
    Socket& operator=(Socket&&) = delete;
    Socket(const Socket&) = delete;

    int fd() const { return fd_; }
    void send(std::string_view bytes) const { REQUIRE(send_quietly(bytes)); }
    bool send_quietly(std::string_view bytes) const {  // for other threads, where REQUIRE cannot stop the test
        return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
    }

private:
    int fd_;
};

// One GET of the large static file, checked byte for byte as it arrives.
struct Download {
    Socket socket;
    std::string head;
    std::size_t length = 0, received = 0;
    bool head_done = false, matches = true, closed = false;

    explicit Download(int port, int rcvbuf = 0) : socket(port, rcvbuf) {
        socket.send("GET " + jar().big_path + " HTTP/1.1\r\nHost: test\r\n\r\n");
    }
    bool done() const { return head_done && received == length; }

    // Reads what is there (up to `max` bytes); false when nothing was. Any thread: no REQUIRE here.
    bool read_some(std::size_t max) {
        char chunk[65536];
        const ssize_t got = ::recv(socket.fd(), chunk, std::min(max, sizeof chunk), MSG_DONTWAIT);
        if (got == 0) closed = true;
        if (got <= 0) return false;
        std::string_view bytes(chunk, static_cast<std::size_t>(got));
        if (!head_done) {
            head.append(bytes);
            const std::size_t end = head.find("\r\n\r\n");
            if (end == std::string::npos) return true;
            const std::size_t field = head.find("Content-Length: ");
            matches = matches && head.rfind("HTTP/1.1 200 ", 0) == 0 && field != std::string::npos;
            length = field == std::string::npos ? 0 : static_cast<std::size_t>(std::strtoull(head.c_str() + field + 16, nullptr, 10));
            bytes = std::string_view(head).substr(end + 4);
            head_done = true;
            const std::string rest(bytes);
            head.resize(end + 4);
            return feed(rest);
        }
        return feed(bytes);
    }

private:
    bool feed(std::string_view body) {
        const std::string& expected = jar().big;
        matches = matches && received + body.size() <= expected.size() &&
                  std::memcmp(expected.data() + received, body.data(), body.size()) == 0;
        received += body.size();
        return true;
    }
};

// Reads every download to its end, all at once, through poll().
void finish(std::vector<std::unique_ptr<Download>>& downloads) {
    const auto deadline = Clock::now() + kHang;
    for (;;) {
        std::vector<pollfd> waiting;
        std::vector<Download*> owners;
        for (auto& download : downloads) {
            if (download->done() || download->closed) continue;
            waiting.push_back({download->socket.fd(), POLLIN, 0});
            owners.push_back(download.get());
        }
        if (waiting.empty()) return;
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
        REQUIRE_MESSAGE(left > 0, "downloads of the large file did not finish within " << kHang.count() << " ms");
        REQUIRE(::poll(waiting.data(), waiting.size(), static_cast<int>(left)) >= 0);
        for (std::size_t i = 0; i < waiting.size(); ++i)
            if (waiting[i].revents != 0)
                while (owners[i]->read_some(65536)) {}
    }
}

// /send on a fresh connection, timed.
Clock::duration timed_send(int port) {
    const auto start = Clock::now();
    const demo::http::Response response = net::request(kHost, port, "GET", "/send", {}, kHang);
    const auto took = Clock::now() - start;
    CHECK(response.status == 200);
    return took;
}

// Runs `step` every kPace on its own thread until destroyed: the slow clients' pace.
class Pacer {
public:
    explicit Pacer(std::function<void()> step)
        : thread_([this, step = std::move(step)] {
              std::unique_lock<std::mutex> lock(mutex_);
              while (!changed_.wait_for(lock, kPace, [&] { return stop_; })) {
                  lock.unlock();
                  step();
                  lock.lock();
                  ++steps_;
                  changed_.notify_all();
              }
          }) {}
    void wait_for_steps(int count) {
        std::unique_lock<std::mutex> lock(mutex_);
        REQUIRE(changed_.wait_for(lock, kHang, [&] { return steps_ >= count; }));
    }
    ~Pacer() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        changed_.notify_all();
        thread_.join();
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool stop_ = false;
    int steps_ = 0;
    std::thread thread_;  // last: started once the rest is ready
};

}  // namespace

TEST_CASE("idle, slowloris, slow-reader and never-sent-body connections hold no worker: /send answers at once") {
    const std::size_t descriptors = raise_descriptor_limit();
    constexpr std::size_t kSlowloris = 50, kReaders = 12, kBodies = 12;
    // 2,000 idle ones, fewer if this process may not open that many (it holds one end of each).
    const std::size_t idle_count = std::min<std::size_t>(2000, descriptors > 400 ? descriptors - 300 : 100);
    ServerProcess server({"--mode=fixed", "--threads=10", "--read-timeout=60s", "--keep-alive-timeout=60s",
                          "--max-connections=" + std::to_string(idle_count + 500)});
    const Clock::duration quiet = timed_send(server.port());

    std::vector<Socket> idle, slowloris, bodies;
    for (std::size_t i = 0; i < idle_count; ++i) idle.emplace_back(server.port());
    // Slowloris: a request one byte per pace; it never ends within the test (nor within the 60 s).
    const std::string crawl = "GET /send HTTP/1.1\r\nHost: test\r\nX-Slow: " + std::string(4000, 's');
    for (std::size_t i = 0; i < kSlowloris; ++i) {
        slowloris.emplace_back(server.port());
        slowloris.back().send(crawl.substr(0, 1));
    }
    // Never-sent bodies: 100 bytes promised, none sent.
    for (std::size_t i = 0; i < kBodies; ++i) {
        bodies.emplace_back(server.port());
        bodies.back().send("POST /send HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n");
    }
    // Slow readers of the large file: each has its response started before /send is timed, and then
    // takes 1 KiB per pace, far slower than the server sends.
    std::vector<std::unique_ptr<Download>> readers;
    for (std::size_t i = 0; i < kReaders; ++i) {
        readers.push_back(std::make_unique<Download>(server.port(), 4096));
        pollfd p{readers.back()->socket.fd(), POLLIN, 0};
        REQUIRE(::poll(&p, 1, static_cast<int>(kHang.count())) == 1);
        REQUIRE(readers.back()->read_some(1024));
    }

    std::vector<Clock::duration> loaded;
    {
        std::size_t sent = 1;
        Pacer pacer([&] {
            if (sent < crawl.size())
                for (const Socket& client : slowloris) client.send_quietly(crawl.substr(sent, 1));
            ++sent;
            for (auto& reader : readers) reader->read_some(1024);
        });
        // Ten samples over a second of slow traffic, each just after the slow clients' step.
        for (int i = 1; i <= 10; ++i) {
            pacer.wait_for_steps(i);
            loaded.push_back(timed_send(server.port()));
        }
    }
    std::sort(loaded.begin(), loaded.end());
    std::printf("connector: /send with %zu idle, %zu slowloris, %zu slow-reader and %zu never-sent-body "
                "connections open: median %.2f ms, max %.2f ms over %zu requests (alone: %.2f ms)\n",
                idle_count, kSlowloris, kReaders, kBodies, ms(loaded[loaded.size() / 2]), ms(loaded.back()),
                loaded.size(), ms(quiet));
    for (const Clock::duration took : loaded) CHECK(took < kSlowBound);

    // The slow readers were held mid-response, not dropped: each still gets the whole file, exact.
    std::size_t taken = 0;
    for (const auto& reader : readers) taken += reader->received;
    finish(readers);
    for (const auto& reader : readers) {
        CHECK(reader->done());
        CHECK(reader->matches);
        CHECK(reader->length == jar().big.size());
    }
    std::printf("connector: the %zu slow readers had taken %.1f KiB each while /send was timed; then each "
                "read all %zu bytes, exact\n",
                kReaders, static_cast<double>(taken) / 1024 / kReaders, jar().big.size());
    CHECK(timed_send(server.port()) < kSlowBound);  // and the server is still fine
}

TEST_CASE("past --max-connections a client gets 503 and a close, at once") {
    ServerProcess server({"--max-connections=20"});
    std::vector<Socket> held;
    for (int i = 0; i < 20; ++i) held.emplace_back(server.port());
    // Accepted in the order they connected, so the 20 above are counted before this one.
    net::Client refused(kHost, server.port(), kHang);
    refused.send("GET /send HTTP/1.1\r\nHost: test\r\n\r\n");
    const demo::http::Response busy = refused.read_response();
    CHECK(busy.status == 503);
    CHECK(busy.body.find("20 connections are open") != std::string::npos);
    CHECK(refused.read_to_close().empty());
    std::printf("connector: over the cap: %d %s", busy.status, busy.body.c_str());
}

TEST_CASE("RSS comes back near its start after ten concurrent downloads of the large file") {
    ServerProcess server({"--mode=fixed", "--max-connections=1000"});
    timed_send(server.port());
    {
        std::vector<std::unique_ptr<Download>> warm;
        warm.push_back(std::make_unique<Download>(server.port()));
        finish(warm);
    }
    const std::size_t before = server.rss_kib();
    std::vector<std::unique_ptr<Download>> downloads;
    for (int i = 0; i < 10; ++i) downloads.push_back(std::make_unique<Download>(server.port()));
    finish(downloads);
    for (const auto& download : downloads) CHECK((download->done() && download->matches));
    downloads.clear();
    timed_send(server.port());  // a request after them, so that the connections are surely handled
    const std::size_t after = server.rss_kib();
    std::printf("connector: server RSS %.1f MiB before ten %.1f MB responses, %.1f MiB after%s\n", static_cast<double>(before) / 1024,
                static_cast<double>(jar().big.size()) / 1e6, static_cast<double>(after) / 1024, kSanitized ? " (sanitizer build)" : "");
    // Generous: the whole ten bodies held would be +54 MiB. Sanitizers keep freed memory in
    // quarantine, so there the figures are only printed.
    if (!kSanitized) CHECK(after < before + 32 * 1024);
}

TEST_CASE("SIGTERM stops the server promptly with busy workers and connections of every kind open") {
    const std::size_t descriptors = raise_descriptor_limit();
    ServerProcess server({"--threads=4", "--read-timeout=60s", "--keep-alive-timeout=60s", "--max-connections=2000"});
    std::vector<Socket> idle, half;
    for (std::size_t i = 0; i < std::min<std::size_t>(500, descriptors / 4); ++i) idle.emplace_back(server.port());
    for (int i = 0; i < 5; ++i) {
        half.emplace_back(server.port());
        half.back().send("GET /send HTTP/1.1\r\nHost: te");
    }
    std::vector<std::unique_ptr<Download>> stalled;
    for (int i = 0; i < 4; ++i) {
        stalled.push_back(std::make_unique<Download>(server.port(), 4096));
        pollfd p{stalled.back()->socket.fd(), POLLIN, 0};
        REQUIRE(::poll(&p, 1, static_cast<int>(kHang.count())) == 1);
    }
    // Two clients keep the workers busy with /send (a jar walk and a channel call each, in buggy mode)
    // until the server goes away; SIGTERM is sent once both have been answered at least once.
    std::mutex mutex;
    std::condition_variable answered;
    int answers = 0;
    std::atomic<bool> done{false};
    auto busy = [&] {
        try {
            net::Client client(kHost, server.port(), kHang);
            while (!done.load()) {
                client.send("GET /send HTTP/1.1\r\nHost: test\r\n\r\n");
                client.read_response();
                {
                    std::lock_guard<std::mutex> lock(mutex);
                    ++answers;
                }
                answered.notify_all();
            }
        } catch (const std::runtime_error&) {  // the server has gone: what this client waits for
        }
    };
    std::thread first(busy), second(busy);
    {
        std::unique_lock<std::mutex> lock(mutex);
        REQUIRE(answered.wait_for(lock, kHang, [&] { return answers >= 2; }));
    }
    const Clock::duration took = server.terminate();
    done = true;
    first.join();
    second.join();
    std::printf("connector: SIGTERM with %zu idle, 5 half-sent, 4 stalled-download connections and busy workers: "
                "exited after %.1f ms\n",
                idle.size(), ms(took));
    CHECK(took < kSlowBound);
}
