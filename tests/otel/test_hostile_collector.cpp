// The OTLP exporter's HTTP client against collectors that misbehave on purpose (issue 25), on
// 127.0.0.1: every request must end within its timeout, read at most 64 KiB of heads and 1 MiB of
// body, and leave the exporter's destructor free to return. Times are checked against the timeout
// plus a generous second, never finely: what is under test is that nothing hangs. Heap growth is
// counted by tests/stress/alloc_counter.cpp, sampled while the collector sends.
#include <tracetree/otel/otlp.hpp>

#include "../stress/stress.hpp"
#include "loopback.hpp"
#include "samples.hpp"

#include <doctest/doctest.h>

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = 1000ms;
constexpr auto kSlack = 1000ms;
// Far over what a bounded client reads (64 KiB + 1 MiB + socket buffers), far under what an
// unbounded one would have taken by the time the collector gives up on its own.
constexpr std::int64_t kMostHeapGrowth = 8 << 20;
// What a client that stops reading at 1 MiB can still have let the collector send: what it read,
// and what the kernel's socket buffers on both sides hold (their largest sizes, from /proc).
std::size_t most_sent() {
    std::size_t most = (1u << 20) + (64u << 10) + (1u << 20);
    for (const char* path : {"/proc/sys/net/ipv4/tcp_rmem", "/proc/sys/net/ipv4/tcp_wmem"}) {
        std::ifstream in(path);
        std::size_t low = 0, usual = 0, high = 0;
        most += in >> low >> usual >> high ? high : (64u << 20);
    }
    return most;
}

// Each connection's own safety net, so that a client that never gives up still lets the test end.
constexpr auto kCollectorGivesUp = 10s;
constexpr std::size_t kCollectorMostBytes = 256u << 20;
constexpr int kMostConnections = 32;

class Hostile;

// One accepted connection, as a behaviour sees it.
class Peer {
public:
    Peer(int fd, Hostile& owner, int index) : fd_(fd), owner_(owner), index_(index), until_(Clock::now() + kCollectorGivesUp) {}
    int fd() const { return fd_; }
    int index() const { return index_; }  // 0 for the first connection
    bool send(std::string_view bytes);     // false once the client is gone, or the collector stops
    bool stream(std::string_view piece) {  // `piece` again and again, until send() fails
        while (send(piece)) {
        }
        return false;
    }
    bool pause(std::chrono::milliseconds wait);  // false when the collector stops meanwhile
    void read_request();                          // the head and a Content-Length body, bounded
    void wait_for_close();                        // until the client has read the answer and closed
    void signal();                                // Hostile::wait_for_signals() counts these

private:
    int fd_;
    Hostile& owner_;
    int index_;
    Clock::time_point until_;
    std::size_t sent_ = 0;
};

// Runs `behave` on each connection, each on a thread of its own, until destroyed; a pipe tells every
// thread to stop.
class Hostile {
public:
    explicit Hostile(std::function<void(Peer&)> behave) : behave_(std::move(behave)) {
        REQUIRE(::pipe(stop_) == 0);
        listener_ = loopback::listen_on_any_port(port_);
        thread_ = std::thread([this] { run(); });
    }
    ~Hostile() {
        const char byte = 0;
        static_cast<void>(::write(stop_[1], &byte, 1));
        thread_.join();
        for (std::thread& peer : peers_) peer.join();
        ::close(listener_);
        ::close(stop_[0]);
        ::close(stop_[1]);
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/traces"; }
    tracetree::HttpEndpoint endpoint() const { return *tracetree::parse_http_url(url()); }
    int connections() {
        std::lock_guard<std::mutex> lock(mutex_);
        return connections_;
    }
    bool wait_for_connections(int count) {
        std::unique_lock<std::mutex> lock(mutex_);
        return changed_.wait_for(lock, 10s, [&] { return connections_ >= count; });
    }
    void signal() {  // a behaviour tells the test it has got somewhere
        {
            std::lock_guard<std::mutex> lock(mutex_);
            ++signals_;
        }
        changed_.notify_all();
    }
    bool wait_for_signals(int count) {
        std::unique_lock<std::mutex> lock(mutex_);
        return changed_.wait_for(lock, 10s, [&] { return signals_ >= count; });
    }
    // The heap's growth over `before`, sampled after each send and, where the counter keeps one, its peak.
    void watch_heap() {
        stress::heap_reset_peak();
        before_ = most_ = stress::heap_live_bytes();
    }
    std::int64_t heap_growth() const { return std::max(most_.load(), stress::heap_peak_bytes()) - before_; }
    void sample_heap() {
        const std::int64_t now = stress::heap_live_bytes();
        std::int64_t seen = most_.load();
        while (now > seen && !most_.compare_exchange_weak(seen, now)) {
        }
    }
    int stop_fd() const { return stop_[0]; }
    std::atomic<std::size_t> sent{0};  // by every connection so far

private:
    void run() {
        for (;;) {
            pollfd waits[2] = {{listener_, POLLIN, 0}, {stop_[0], POLLIN, 0}};
            if (::poll(waits, 2, -1) < 0 || waits[1].revents != 0) return;
            const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            if (peers_.size() == kMostConnections) {
                ::close(fd);
                continue;
            }
            int index = 0;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                index = connections_++;
            }
            changed_.notify_all();
            peers_.emplace_back([this, fd, index] {
                Peer peer(fd, *this, index);
                behave_(peer);
                ::close(fd);
            });
        }
    }

    std::function<void(Peer&)> behave_;
    int stop_[2] = {-1, -1};
    int listener_ = -1;
    int port_ = 0;
    std::thread thread_;
    std::vector<std::thread> peers_;  // the accepting thread's only
    std::mutex mutex_;
    std::condition_variable changed_;
    int connections_ = 0, signals_ = 0;
    std::atomic<std::int64_t> before_{0}, most_{0};
};

bool Peer::send(std::string_view bytes) {
    while (!bytes.empty()) {
        if (Clock::now() >= until_ || sent_ >= kCollectorMostBytes) return false;
        pollfd waits[2] = {{fd_, POLLOUT, 0}, {owner_.stop_fd(), POLLIN, 0}};
        if (::poll(waits, 2, 100) < 0 || waits[1].revents != 0) return false;
        if (waits[0].revents == 0) continue;
        const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (sent <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(sent));
        sent_ += static_cast<std::size_t>(sent);
        owner_.sent += static_cast<std::size_t>(sent);
        owner_.sample_heap();
    }
    return true;
}

bool Peer::pause(std::chrono::milliseconds wait) {
    pollfd stop{owner_.stop_fd(), POLLIN, 0};
    return ::poll(&stop, 1, static_cast<int>(wait.count())) == 0;
}

void Peer::signal() { owner_.signal(); }

void Peer::wait_for_close() {
    char chunk[4096];
    for (;;) {
        pollfd waits[2] = {{fd_, POLLIN, 0}, {owner_.stop_fd(), POLLIN, 0}};
        if (::poll(waits, 2, 2000) <= 0 || waits[1].revents != 0 || ::recv(fd_, chunk, sizeof chunk, 0) <= 0) return;
    }
}

void Peer::read_request() { loopback::read_request(fd_, owner_.stop_fd(), 2000); }

struct Outcome {
    tracetree::HttpReply reply;
    Clock::duration took{};
    std::int64_t heap_growth = 0;
    std::size_t collector_sent = 0;
};

Outcome post(Hostile& collector, std::string_view body = "{}") {
    collector.watch_heap();
    const auto start = Clock::now();
    Outcome outcome;
    outcome.reply = tracetree::http_post(collector.endpoint(), "application/json", body, {}, kTimeout);
    outcome.took = Clock::now() - start;
    outcome.heap_growth = collector.heap_growth();
    outcome.collector_sent = collector.sent;
    return outcome;
}

void check_bounded(const Outcome& outcome) {
    CHECK(outcome.took <= kTimeout + kSlack);
    CHECK(outcome.heap_growth <= kMostHeapGrowth);
    CHECK(outcome.collector_sent <= most_sent());
    CHECK(outcome.reply.body.size() <= 1024 * 1024);
}

const std::string kChunkedHead = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

tracetree::OtlpOptions options_for(const Hostile& collector) {
    tracetree::OtlpOptions options;
    options.endpoint = collector.url();
    options.flush_interval = 1h;
    options.timeout = kTimeout;
    options.initial_backoff = 1ms;
    options.max_backoff = 30s;
    return options;
}

}  // namespace

TEST_CASE("hostile collector: a chunk-size line that never ends") {
    for (const std::string line : {"1", ";extension"}) {
        CAPTURE(line);
        Hostile collector([&](Peer& peer) {
            peer.read_request();
            if (peer.send(kChunkedHead + "1")) peer.stream(std::string(16384, line[0]));
        });
        const Outcome outcome = post(collector);
        check_bounded(outcome);
        CHECK(outcome.reply.status == 0);
        CHECK(outcome.reply.error == "a malformed chunked answer");
    }
    // A size line that ends, but past 1 KiB (a size and extensions need a few dozen bytes): as malformed.
    Hostile collector_long_line([&](Peer& peer) {
        peer.read_request();
        peer.send(kChunkedHead + "5;" + std::string(2000, 'e') + "\r\nhello\r\n0\r\n\r\n");
    });
    const Outcome long_line = post(collector_long_line);
    check_bounded(long_line);
    CHECK(long_line.reply.status == 0);
    CHECK(long_line.reply.error == "a malformed chunked answer");
    // The exporter: flush() gets its answer (given up), and the destructor returns.
    Hostile collector([&](Peer& peer) {
        peer.read_request();
        if (peer.send(kChunkedHead)) peer.stream(std::string(16384, '1'));
    });
    const auto start = Clock::now();
    {
        tracetree::OtlpOptions options = options_for(collector);
        options.max_attempts = 2;
        tracetree::OtlpExporter exporter(options);
        exporter.add(samples::slow_call());
        CHECK(exporter.flush(5s));
        CHECK(exporter.stats().batches_dropped == 1);
        CHECK(exporter.stats().last_error.find("a malformed chunked answer") == 0);
    }
    CHECK(Clock::now() - start <= kTimeout + kSlack);
}

TEST_CASE("hostile collector: a body that never ends is cut at 1 MiB, the status kept") {
    const std::string endless(16384, 'x');
    const std::string heads[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n",  // longer than anything read
        "HTTP/1.1 200 OK\r\n\r\n",                                   // until the close that never comes
    };
    for (const std::string& head : heads) {
        CAPTURE(head);
        Hostile collector([&](Peer& peer) {
            peer.read_request();
            if (peer.send(head)) peer.stream(endless);
        });
        const Outcome outcome = post(collector);
        check_bounded(outcome);
        CHECK(outcome.reply.status == 200);
        CHECK(outcome.reply.body.size() == 1024 * 1024);
    }
    // Chunks of 16 KiB for ever: the body, then the chunks' framing, are bounded too.
    Hostile chunked([&](Peer& peer) {
        peer.read_request();
        if (peer.send(kChunkedHead)) peer.stream("4000\r\n" + endless + "\r\n");
    });
    const Outcome outcome = post(chunked);
    check_bounded(outcome);
    CHECK(outcome.reply.status == 200);
    CHECK(outcome.reply.body.size() == 1024 * 1024);
}

TEST_CASE("hostile collector: a byte every 200 ms, slower than the timeout") {
    struct Answer {
        std::string at_once, trickled;
    };
    const Answer answers[] = {
        {"", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"},                        // the head
        {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", std::string(100, ' ')},       // the body
        {kChunkedHead, "64\r\n" + std::string(100, ' ') + "\r\n0\r\n\r\n"},              // the chunks
    };
    for (const Answer& answer : answers) {
        CAPTURE(answer.at_once);
        Hostile collector([&](Peer& peer) {
            peer.read_request();
            if (!peer.send(answer.at_once)) return;
            for (const char byte : answer.trickled)
                if (!peer.send(std::string_view(&byte, 1)) || !peer.pause(200ms)) return;
        });
        const Outcome outcome = post(collector);
        check_bounded(outcome);
        CHECK(outcome.reply.status == 0);
        CHECK(outcome.reply.error == "timed out waiting for the answer");
    }
}

TEST_CASE("hostile collector: heads over 64 KiB, in one head or in endless interim ones") {
    const std::string heads[] = {"HTTP/1.1 200 OK\r\n", "HTTP/1.1 100 Continue\r\n\r\n"};
    const std::string repeats[] = {"X-Padding: " + std::string(1000, 'p') + "\r\n", "HTTP/1.1 100 Continue\r\n\r\n"};
    for (int i = 0; i < 2; ++i) {
        CAPTURE(i);
        Hostile collector([&](Peer& peer) {
            peer.read_request();
            if (peer.send(heads[i])) peer.stream(repeats[i]);
        });
        const Outcome outcome = post(collector);
        check_bounded(outcome);
        CHECK(outcome.reply.status == 0);
        CHECK(outcome.reply.error == "an answer head over 64 KiB");
    }
}

TEST_CASE("hostile collector: a redirect is not followed, nor retried") {
    Hostile elsewhere([](Peer& peer) {
        peer.read_request();
        peer.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
    });
    Hostile collector([&](Peer& peer) {
        peer.read_request();
        peer.send("HTTP/1.1 307 Temporary Redirect\r\nLocation: " + elsewhere.url() + "\r\nContent-Length: 0\r\n\r\n");
    });
    const Outcome outcome = post(collector);
    check_bounded(outcome);
    CHECK(outcome.reply.status == 307);
    tracetree::OtlpExporter exporter(options_for(collector));
    exporter.add(samples::slow_call());
    CHECK(exporter.flush(5s));
    const tracetree::OtlpStats stats = exporter.stats();
    CHECK(stats.requests == 1);
    CHECK(stats.batches_dropped == 1);
    CHECK(stats.last_error == "HTTP 307");
    CHECK(elsewhere.connections() == 0);
}

TEST_CASE("hostile collector: 429 and 503 with Retry-After, and a destructor that does not wait them out") {
    // A date a second ahead (an HTTP date has whole seconds: a wait of 0 to 1 s), then seconds.
    const std::time_t ahead = std::time(nullptr) + 1;
    char date[64];
    std::tm parts{};
    ::gmtime_r(&ahead, &parts);
    std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &parts);
    Hostile collector([&](Peer& peer) {
        peer.read_request();
        if (peer.index() == 0)
            peer.send(std::string("HTTP/1.1 503 Unavailable\r\nRetry-After: ") + date + "\r\nContent-Length: 0\r\n\r\n");
        if (peer.index() == 1) peer.send("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n");
        if (peer.index() == 2) peer.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        if (peer.index() >= 3 && peer.send("HTTP/1.1 429 Too Many Requests\r\nRetry-After: 20\r\nContent-Length: 0\r\n\r\n")) {
            peer.wait_for_close();
            peer.signal();
        }
    });
    tracetree::OtlpExporter exporter(options_for(collector));
    exporter.add(samples::slow_call());
    CHECK(exporter.flush(10s));
    tracetree::OtlpStats stats = exporter.stats();
    CHECK(stats.requests == 3);
    CHECK(stats.retries == 2);
    CHECK(stats.traces_exported == 1);
    CHECK(stats.last_retry_delay == 1s);  // Retry-After's, not the backoff's (1 ms doubled)

    // Retry-After: 20 s, under max_backoff: the exporter waits, and its destructor does not.
    auto waiting = std::make_unique<tracetree::OtlpExporter>(options_for(collector));
    waiting->add(samples::slow_call());
    CHECK_FALSE(waiting->flush(0ms));
    // Read and closed: the exporter is a few instructions from its wait (it takes its lock first).
    REQUIRE(collector.wait_for_signals(1));
    const auto start = Clock::now();
    waiting.reset();
    CHECK(Clock::now() - start <= kTimeout + kSlack);
}

TEST_CASE("hostile collector: a reset in the middle of the answer") {
    Hostile collector([](Peer& peer) {
        peer.read_request();
        peer.send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{\"partial");
        const linger abort{1, 0};  // close() sends RST
        ::setsockopt(peer.fd(), SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
    });
    const Outcome outcome = post(collector);
    check_bounded(outcome);
    CHECK(outcome.reply.status == 0);
    CHECK(outcome.reply.error.find("cannot read the answer") == 0);
}

TEST_CASE("hostile collector: a listener that accepts and never reads") {
    Hostile collector([](Peer& peer) { peer.pause(kCollectorGivesUp); });
    // A request larger than the socket buffers: it is the sending that must give up.
    const Outcome outcome = post(collector, std::string(64u << 20, 'x'));
    CHECK(outcome.took <= kTimeout + kSlack);
    CHECK(outcome.reply.status == 0);
    CHECK(outcome.reply.error == "timed out sending the request");
    const Outcome small = post(collector);
    CHECK(small.took <= kTimeout + kSlack);
    CHECK(small.reply.error == "timed out waiting for the answer");
}

TEST_CASE("hostile collector: the exporter's destructor with a request in flight and more queued") {
    // A byte every 200 ms, for ever: the second one tells the test the request is well under way.
    Hostile collector([](Peer& peer) {
        peer.read_request();
        for (int i = 0; i < 1000 && peer.send(" ") && peer.pause(200ms); ++i)
            if (i == 1) peer.signal();
    });
    tracetree::OtlpOptions options = options_for(collector);
    options.timeout = 2 * kTimeout;
    options.max_batch_traces = 1;
    auto exporter = std::make_unique<tracetree::OtlpExporter>(options);
    for (int i = 0; i < 3; ++i) exporter->add(samples::slow_call());
    REQUIRE(collector.wait_for_signals(1));
    // `timeout` in all from here: the request in flight ends before, and the queued ones get what is left.
    const auto start = Clock::now();
    exporter.reset();
    CHECK(Clock::now() - start <= options.timeout + kSlack);
}
