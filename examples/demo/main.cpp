// demo-server: the article's channel system with Tomcat's BZ 62968, live-traceable with tracetree.
// See docs/demo.md; scripts/demo runs the whole story.
#include "app.hpp"
#include "fatjar.hpp"

#include <tracetree/otel/otlp.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <pthread.h>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace {

// Every connection is a descriptor, and one streaming a static file holds the jar open too: raise the
// soft limit (1024 on many systems) toward what the cap needs, as far as the hard limit allows, and
// say so when that is not enough. Past the limit the server stops accepting for a moment, and new
// connections wait in the listen backlog instead of getting the 503.
void raise_descriptor_limit(std::size_t max_connections) {
    const rlim_t wanted = 2 * static_cast<rlim_t>(max_connections) + 1024;  // + the channel and admin ports
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= wanted) return;
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &limit);
    if (limit.rlim_cur < wanted)
        std::cerr << "demo-server: the descriptor limit is " << limit.rlim_cur << "; --max-connections="
                  << max_connections << " may need " << wanted << " (ulimit -Hn)\n";
}

// --otlp=URL and --otlp-min-cost=MS (docs/otel.md): each slow /send or static-file request, and each
// call the channel served, exported as OpenTelemetry spans, as two services.
struct Export {
    std::string url;
    std::chrono::milliseconds min_cost{0};
    std::optional<tracetree::OtlpExporter> app, channel;
    std::optional<tracetree::TraceSession> app_calls, channel_calls;

    // Takes its flags out of `args`; std::invalid_argument for a bad one.
    void take_flags(std::vector<std::string>& args) {
        for (auto arg = args.begin(); arg != args.end();) {
            if (arg->rfind("--otlp=", 0) == 0) {
                url = arg->substr(7);
            } else if (arg->rfind("--otlp-min-cost=", 0) == 0) {
                const std::string ms = arg->substr(16);
                if (ms.empty() || ms.size() > 7 || ms.find_first_not_of("0123456789") != std::string::npos)
                    throw std::invalid_argument("--otlp-min-cost: whole milliseconds, not '" + ms + "'");
                min_cost = std::chrono::milliseconds(std::stol(ms));
            } else {
                ++arg;
                continue;
            }
            arg = args.erase(arg);
        }
    }

    void start() {
        if (url.empty()) return;
        tracetree::OtlpOptions options;
        options.endpoint = url;
        options.flush_interval = std::chrono::milliseconds(500);
        options.resource = {{"service.name", "channel-system"}};
        app.emplace(options);
        options.resource = {{"service.name", "third-party-channel"}};
        channel.emplace(options);
        app_calls.emplace(tracetree::TraceRequest("Http11Processor::service").min_cost(min_cost).limit(0)
                              .on_trace(app->on_trace()));
        channel_calls.emplace(tracetree::TraceRequest("ChannelServer::pay").limit(0).on_trace(channel->on_trace()));
    }
};

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    for (const std::string& arg : args) {
        if (arg == "--help" || arg == "-h") {
            std::cout << demo::usage()
                      << "  --otlp=http://HOST:PORT/v1/traces exports slow requests as OpenTelemetry spans (OTLP/HTTP JSON),\n"
                         "    those costing at least --otlp-min-cost=MS (default 0), and every channel call\n";
            return 0;
        }
    }
    Export otlp;
    try {
        otlp.take_flags(args);
        const demo::Options options = demo::parse_options(args);
        for (const std::string& arg : args) {
            if (arg.compare(0, 12, "--write-jar=") != 0) continue;
            const std::string path = arg.substr(12);
            const std::string jar = demo::build_fat_jar(options.jar_scale);
            std::ofstream out(path, std::ios::binary | std::ios::trunc);
            out.write(jar.data(), static_cast<std::streamsize>(jar.size()));
            if (!out.flush()) throw std::runtime_error("cannot write " + path);
            std::cout << "wrote " << path << " (" << jar.size() << " bytes)\n";
            return 0;
        }
        // Signals are taken by sigwait below, not by whichever thread they land on.
        sigset_t stop_signals;
        sigemptyset(&stop_signals);
        sigaddset(&stop_signals, SIGINT);
        sigaddset(&stop_signals, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

        raise_descriptor_limit(options.max_connections);
        demo::DemoServer server(options);
        otlp.start();
        server.start();
        std::cout << "demo-server: mode=" << (options.mode == demo::Mode::buggy ? "buggy (Tomcat 8.5.31)" : "fixed (BZ 62968)")
                  << " app=http://" << options.host << ':' << server.port() << " channel=http://" << options.host << ':'
                  << server.channel_port() << " admin=http://" << options.host << ':' << server.admin_port()
                  << " jar=" << server.jar_path() << " cache-ttl=" << options.cache_ttl.count()
                  << "ms gc-period=" << options.gc_period.count() << "ms max-connections=" << options.max_connections
                  << (otlp.url.empty() ? "" : " otlp=" + otlp.url) << std::endl;
        int signal = 0;
        sigwait(&stop_signals, &signal);
        std::cout << "demo-server: stopping on signal " << signal << std::endl;
        server.stop();
        return 0;
    } catch (const std::invalid_argument& e) {
        std::cerr << "demo-server: " << e.what() << '\n' << demo::usage();
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "demo-server: " << e.what() << '\n';
        return 1;
    }
}
