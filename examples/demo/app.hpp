// The demo server: the "channel system" of the article (Spring Boot on embedded Tomcat 8.5.31 with
// springfox-swagger-ui in its fat jar), the third-party channel it forwards to, and an admin port
// that serves tracetree's admin handler (Arthas-style live traces and more).
#ifndef DEMO_APP_HPP
#define DEMO_APP_HPP

#include "http.hpp"
#include "tomcat.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace demo {

using Millis = std::chrono::milliseconds;

struct Options {
    Mode mode = Mode::buggy;
    std::string host = "127.0.0.1";
    int port = 7744;          // the application (0: ephemeral)
    int channel_port = 7745;  // the third-party channel
    int admin_port = 7746;    // tracetree's admin handler under /debug/tracetree, and /health
    std::string jar;          // an existing application jar; empty: generate one in a temporary directory
    double jar_scale = 1.0;   // sizes of the generated jar's files (tests use less)
    Millis cache_ttl{5000};   // Tomcat's cacheTtl
    Millis gc_period{30000};  // background processor delay (Spring Boot 2.0: 30 s); 0: none, call background_process()
    int threads = 10;
    Millis read_timeout{20000};
    Millis keep_alive_timeout{20000};
    std::size_t max_connections = 10000;  // per port (Tomcat's maxConnections); past it: 503 and close
    http::Limits limits;
    SteadyClock clock;  // for the cache TTL; empty: steady_clock (tests pass a fake one)
};

// Parses --name=value arguments. std::invalid_argument with a one-line reason on a bad one.
Options parse_options(const std::vector<std::string>& args);
std::string usage();

class DemoServer {
public:
    explicit DemoServer(Options options);  // builds the jar, opens it, binds the three ports; throws on failure
    ~DemoServer();
    DemoServer(const DemoServer&) = delete;
    DemoServer& operator=(const DemoServer&) = delete;

    void start();
    void stop();

    int port() const;
    int channel_port() const;
    int admin_port() const;
    const std::string& jar_path() const;
    Mode mode() const;

    void background_process();  // one run of the background processor, now
    std::uint64_t background_runs() const;
    bool wait_for_background_runs(std::uint64_t at_least, Millis timeout) const;
    // Waits until `count` admin calls (trace, stack, watch, monitor) are waiting; false after `timeout`.
    bool wait_for_admin_calls(std::size_t count, Millis timeout) const;
    std::uint64_t jar_walks() const;  // times a nested jar's entry map was built

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace demo

#endif
