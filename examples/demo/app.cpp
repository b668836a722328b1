#include "app.hpp"

#include "fatjar.hpp"
#include "net.hpp"

#include <tracetree/control.hpp>
#include <tracetree/render.hpp>
#include <tracetree/sessions.hpp>
#include <tracetree/tracecontext.hpp>
#include <tracetree/tracetree.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace demo {

// ---- the request pipeline, named after the classes it stands for ------------------------------

// com.example.channel.ChannelClient: the call to the third-party channel.
class ChannelClient {
public:
    ChannelClient(std::string host, int port) : host_(std::move(host)), port_(port) {}
    http::Response send(const std::string& body) {
        TRACETREE_FUNCTION();
        tracetree::OutgoingCall call("POST /pay");  // the request's trace context, passed on
        http::Response answer = net::request(host_, port_, "POST", "/pay", body, Millis(5000), call.headers());
        if (answer.status != 200) call.fail();
        return answer;
    }

private:
    std::string host_;
    int port_;
};

// com.example.channel.SendController: the business endpoint.
class SendController {
public:
    explicit SendController(ChannelClient& channel) : channel_(channel) {}
    http::Response send(const http::Request& request) {
        TRACETREE_FUNCTION();
        const std::string body = request.body.empty() ? std::string(R"({"amount":100,"currency":"CNY"})") : request.body;
        http::Response answer;
        try {
            answer = channel_.send(body);
        } catch (const std::exception& e) {
            return net::error_response(502, std::string("channel unreachable: ") + e.what());
        }
        if (answer.status != 200) return net::error_response(502, "channel answered " + std::to_string(answer.status));
        http::Response response;
        response.headers.emplace_back("Content-Type", "application/json");
        response.body = R"({"code":"0000","msg":"success","channel":)" + answer.body + "}\n";
        return response;
    }

private:
    ChannelClient& channel_;
};

// org.springframework.web.servlet.resource.ResourceHttpRequestHandler: classpath:/META-INF/resources/.
class ResourceHttpRequestHandler {
public:
    explicit ResourceHttpRequestHandler(StandardRoot& root) : root_(root) {}
    http::Response handleRequest(const http::Request& request, const std::string& path) {
        TRACETREE_FUNCTION();
        if (request.method != "GET" && request.method != "HEAD")
            return net::error_response(405, "only GET and HEAD for " + path);
        const WebResource resource = root_.getResource(path);
        if (!resource.exists || resource.directory)
            return net::error_response(404, "no handler and no static resource for " + path);
        http::Response response;
        response.headers.emplace_back("Content-Type", content_type(path));
        // Read from the jar as the client takes it: the largest file is 5.6 MB.
        const std::shared_ptr<JarEntryStream> body = root_.open(resource);
        response.body_stream = [body](char* out, std::size_t max) { return body->read(out, max); };
        response.body_stream_size = body->size();
        return response;
    }

private:
    static std::string content_type(const std::string& path) {
        const std::size_t dot = path.rfind('.');
        const std::string extension = dot == std::string::npos ? "" : path.substr(dot + 1);
        if (extension == "html") return "text/html";
        if (extension == "js") return "application/javascript";
        if (extension == "css") return "text/css";
        if (extension == "png") return "image/png";
        if (extension == "map") return "application/json";
        return "application/octet-stream";
    }
    StandardRoot& root_;
};

// org.springframework.web.servlet.DispatcherServlet, mapped to "/".
class DispatcherServlet {
public:
    DispatcherServlet(SendController& send, ResourceHttpRequestHandler& resources) : send_(send), resources_(resources) {}
    http::Response doDispatch(const http::Request& request, const std::string& path) {
        TRACETREE_FUNCTION();
        if (path == "/send") {
            if (request.method != "GET" && request.method != "POST")
                return net::error_response(405, "use GET or POST for /send");
            return send_.send(request);
        }
        return resources_.handleRequest(request, path);
    }

private:
    SendController& send_;
    ResourceHttpRequestHandler& resources_;
};

// org.apache.catalina.core.StandardWrapperValve: calls the servlet the mapper chose.
class StandardWrapperValve {
public:
    explicit StandardWrapperValve(DispatcherServlet& servlet) : servlet_(servlet) {}
    http::Response invoke(const http::Request& request, const Mapper::MappingData& mapping) {
        TRACETREE_FUNCTION();
        return servlet_.doDispatch(request, mapping.wrapper_path);
    }

private:
    DispatcherServlet& servlet_;
};

// org.apache.catalina.connector.CoyoteAdapter: from the parsed request to the container.
class CoyoteAdapter {
public:
    CoyoteAdapter(Mapper& mapper, StandardWrapperValve& valve) : mapper_(mapper), valve_(valve) {}

    http::Response service(const http::Request& request) {
        TRACETREE_FUNCTION();
        tracetree::annotate("uri", request.path);
        Mapper::MappingData mapping;
        std::string reason;
        if (!postParseRequest(request, mapping, reason)) return net::error_response(400, reason);
        if (!mapping.redirect.empty()) {
            http::Response redirect;
            redirect.status = 302;
            redirect.headers.emplace_back("Location", mapping.redirect);
            return redirect;
        }
        return valve_.invoke(request, mapping);
    }

private:
    // Decodes and normalises the URI (rejecting what would leave the web root), then maps it.
    bool postParseRequest(const http::Request& request, Mapper::MappingData& mapping, std::string& reason) {
        TRACETREE_FUNCTION();
        const std::optional<std::string> decoded = http::percent_decode(request.path, false, false);
        if (!decoded) {
            reason = "invalid %-encoding, encoded '/' or NUL in the path";
            return false;
        }
        const std::optional<std::string> normalized = http::normalize_path(*decoded);
        if (!normalized) {
            reason = "the path climbs above the web root with '..'";
            return false;
        }
        mapper_.map("localhost", *normalized, mapping);
        return true;
    }

    Mapper& mapper_;
    StandardWrapperValve& valve_;
};

// org.apache.coyote.http11.Http11Processor: one request from the socket to the response.
class Http11Processor {
public:
    explicit Http11Processor(CoyoteAdapter& adapter) : adapter_(adapter) {}

    bool service(net::Connection& connection, bool last_allowed) {
        TRACETREE_FUNCTION();
        net::Connection::ReadResult read;
        {
            TRACETREE_SCOPE("Http11InputBuffer::parseHeaders");
            read = connection.read_request();
        }
        // The caller's trace context (W3C traceparent), or a new trace: traces and exports carry it.
        tracetree::adopt(read.request ? tracetree::context_from_headers(read.request->headers) : tracetree::new_trace());
        if (!read.request) {
            if (read.error_status != 0)
                connection.write(http::format(net::error_response(read.error_status, read.error_reason), false));
            return false;
        }
        http::Response response;
        try {
            response = adapter_.service(*read.request);
        } catch (const std::exception& e) {  // a damaged jar, say: this request fails, the server goes on
            response = net::error_response(500, e.what());
        }
        const bool keep = read.request->keep_alive && !last_allowed;
        TRACETREE_SCOPE("Http11OutputBuffer::commit");
        return connection.send(std::move(response), keep, read.request->method == "HEAD") && keep;
    }

private:
    CoyoteAdapter& adapter_;
};

// org.apache.catalina.core.StandardContext: what its background processor does for the resources.
class StandardContext {
public:
    explicit StandardContext(StandardRoot& root) : root_(root) {}
    void backgroundProcess() {
        TRACETREE_FUNCTION();
        root_.backgroundProcess();
    }

private:
    StandardRoot& root_;
};

// ---- admin: Arthas-style trace and monitor ------------------------------------------------------

namespace {

// A non-negative decimal ("10", "0.5"); nothing for anything else.
std::optional<double> parse_decimal(const std::string& text) {
    if (text.empty() || text.size() > 12) return std::nullopt;
    double value = 0, scale = 0;
    for (char c : text) {
        if (c == '.' && scale == 0) {
            scale = 1;
        } else if (c >= '0' && c <= '9') {
            if (scale == 0) value = value * 10 + (c - '0');
            else value += (c - '0') * (scale /= 10);
        } else {
            return std::nullopt;
        }
    }
    if (text.back() == '.') return std::nullopt;
    return value;
}

struct Param {
    const char* name;
    std::string* value;
};

}  // namespace

class AdminEndpoint {
public:
    http::Response handle(const http::Request& request) {
        if (request.method != "GET" && request.method != "HEAD") return net::error_response(405, "use GET");
        const auto query = http::parse_query(request.query);
        if (!query) return net::error_response(400, "malformed %-encoding in the query string");
        if (request.path == "/trace") return trace(*query);
        if (request.path == "/monitor") return monitor(*query);
        if (request.path == "/health") return text("ok\n");
        return net::error_response(404, "admin endpoints: /trace?pattern=..&cost=ms&n=count&timeout=s&regex=0|1, "
                                        "/monitor?threads=0|1&reset=0|1, /health");
    }

    void stop() {  // ends the traces being waited for, so that the admin threads can be joined
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
        for (tracetree::TraceSession* session : sessions_) session->stop();
    }

    std::uint64_t sessions_started() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return started_;
    }
    bool wait_for_sessions(std::uint64_t at_least, Millis timeout) const {
        std::unique_lock<std::mutex> lock(mutex_);
        return changed_.wait_for(lock, timeout, [&] { return started_ >= at_least; });
    }

private:
    static http::Response text(std::string body) {
        http::Response response;
        response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
        response.body = std::move(body);
        return response;
    }

    // Fills the named parameters; a reason for the first unknown, repeated or missing one.
    static std::optional<std::string> take(const std::vector<std::pair<std::string, std::string>>& query,
                                           std::vector<Param> params) {
        std::set<std::string> seen;
        for (const auto& [key, value] : query) {
            if (!seen.insert(key).second) return "parameter '" + key + "' given twice";
            bool known = false;
            for (Param& param : params) {
                if (key != param.name) continue;
                *param.value = value;
                known = true;
            }
            if (!known) {
                std::string names;
                for (const Param& param : params) names += std::string(names.empty() ? "" : ", ") + param.name;
                return "unknown parameter '" + key.substr(0, 64) + "' (expected " + names + ")";
            }
        }
        return std::nullopt;
    }

    http::Response trace(const std::vector<std::pair<std::string, std::string>>& query) {
        std::string pattern, regex = "0", cost = "0", count = "1", timeout = "30";
        if (auto error = take(query, {{"pattern", &pattern}, {"regex", &regex}, {"cost", &cost}, {"n", &count},
                                      {"timeout", &timeout}}))
            return net::error_response(400, *error);
        if (pattern.empty()) return net::error_response(400, "missing parameter 'pattern' (e.g. Http11Processor::service)");
        if (regex != "0" && regex != "1") return net::error_response(400, "regex must be 0 or 1");
        const std::optional<double> cost_ms = parse_decimal(cost);
        if (!cost_ms || *cost_ms > 3600000) return net::error_response(400, "cost must be milliseconds, 0 to 3600000");
        const std::optional<double> n = parse_decimal(count);
        if (!n || *n < 1 || *n > 100 || *n != static_cast<double>(static_cast<int>(*n)))
            return net::error_response(400, "n must be a whole number from 1 to 100");
        const std::optional<double> seconds = parse_decimal(timeout);
        if (!seconds || *seconds <= 0 || *seconds > 600) return net::error_response(400, "timeout must be seconds, above 0 and at most 600");

        tracetree::TraceRequest request(pattern);
        request.regex(regex == "1");
        request.min_cost(std::chrono::duration_cast<tracetree::Nanos>(std::chrono::duration<double, std::milli>(*cost_ms)));
        request.limit(static_cast<std::uint64_t>(*n));
        std::optional<tracetree::TraceSession> session;
        try {
            session.emplace(request);
        } catch (const std::invalid_argument& e) {
            return net::error_response(400, e.what());
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stopping_) return net::error_response(503, "shutting down");
            sessions_.insert(&*session);
            ++started_;
        }
        changed_.notify_all();
        const auto wait = std::chrono::duration_cast<tracetree::Nanos>(std::chrono::duration<double>(*seconds));
        const auto started = std::chrono::steady_clock::now();
        std::vector<tracetree::Trace> traces;
        while (traces.size() < request.limit() && std::chrono::steady_clock::now() - started < wait) {
            std::optional<tracetree::Trace> next = session->next(wait - (std::chrono::steady_clock::now() - started));
            if (!next) break;
            traces.push_back(std::move(*next));
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            sessions_.erase(&*session);
        }
        std::ostringstream out;
        for (const tracetree::Trace& trace : traces) tracetree::render(out, trace, tracetree::RenderOptions().colour(tracetree::Colour::never));
        if (traces.size() == request.limit())
            out << "Command execution times exceed limit: " << request.limit()
                << ", so command will exit. You can set it with -n option.\n";
        else
            out << "Timed out after " << timeout << " s: " << traces.size() << " of " << request.limit()
                << " invocation(s) of '" << pattern << "' costing at least " << cost << " ms.\n";
        return text(out.str());
    }

    http::Response monitor(const std::vector<std::pair<std::string, std::string>>& query) {
        std::string threads = "0", reset = "0";
        if (auto error = take(query, {{"threads", &threads}, {"reset", &reset}})) return net::error_response(400, *error);
        if ((threads != "0" && threads != "1") || (reset != "0" && reset != "1"))
            return net::error_response(400, "threads and reset must be 0 or 1");
        const tracetree::Profile profile = tracetree::profile();
        if (reset == "1") tracetree::reset();
        std::ostringstream out;
        const auto options = tracetree::RenderOptions().colour(tracetree::Colour::never);
        if (threads == "1") tracetree::render(out, profile, options);
        else tracetree::render(out, profile.merged(), profile.taken, options);
        return text(out.str());
    }

    mutable std::mutex mutex_;
    mutable std::condition_variable changed_;
    std::set<tracetree::TraceSession*> sessions_;
    std::uint64_t started_ = 0;
    bool stopping_ = false;
};

// ---- the server -----------------------------------------------------------------------------------

namespace {

std::string make_temp_dir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/tracetree-demo-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a temporary directory " + pattern);
    return pattern;
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

net::ServerConfig server_config(const Options& options, const char* prefix, int port, int threads) {
    net::ServerConfig config;
    config.name_prefix = prefix;
    config.host = options.host;
    config.port = port;
    config.threads = threads;
    config.limits = options.limits;
    config.read_timeout = options.read_timeout;
    config.keep_alive_timeout = options.keep_alive_timeout;
    config.max_connections = options.max_connections;
    return config;
}

}  // namespace

struct DemoServer::Impl {
    Options options;
    std::string temp_dir;  // removed at the end when the jar was generated
    std::string jar_path;
    std::unique_ptr<StandardRoot> root;
    std::unique_ptr<Mapper> mapper;
    std::unique_ptr<ChannelClient> channel_client;
    std::unique_ptr<SendController> send_controller;
    std::unique_ptr<ResourceHttpRequestHandler> resource_handler;
    std::unique_ptr<DispatcherServlet> dispatcher;
    std::unique_ptr<StandardWrapperValve> wrapper_valve;
    std::unique_ptr<CoyoteAdapter> adapter;
    std::unique_ptr<Http11Processor> processor;
    std::unique_ptr<StandardContext> context;
    AdminEndpoint admin;
    std::atomic<std::uint64_t> orders{0};
    std::unique_ptr<net::HttpServer> channel_server, app_server, admin_server;

    mutable std::mutex mutex;
    mutable std::condition_variable changed;
    std::uint64_t background_runs = 0;
    bool stopping = false;
    std::thread background;

    ~Impl() {
        if (temp_dir.empty()) return;
        ::unlink(jar_path.c_str());
        ::rmdir(temp_dir.c_str());
    }

    http::Response channel(const http::Request& request) {  // the third party: accepts every payment
        TRACETREE_SCOPE("ChannelServer::pay");
        tracetree::adopt(tracetree::context_from_headers(request.headers));  // a service of its own, traced too
        if (request.path != "/pay") return net::error_response(404, "the channel only knows /pay");
        http::Response response;
        response.headers.emplace_back("Content-Type", "application/json");
        response.body = R"({"code":"0000","msg":"accepted","orderId":"ORD)" + std::to_string(++orders) + "\"}";
        return response;
    }

    void background_loop() {
        net::set_thread_name("ContainerBackgroundProcessor[StandardEngine[Tomcat]]");
        std::unique_lock<std::mutex> lock(mutex);
        while (!changed.wait_for(lock, options.gc_period, [&] { return stopping; })) {
            lock.unlock();
            run_background();
            lock.lock();
        }
    }

    void run_background() {
        context->backgroundProcess();
        {
            std::lock_guard<std::mutex> lock(mutex);
            ++background_runs;
        }
        changed.notify_all();
    }
};

DemoServer::DemoServer(Options options) : impl_(std::make_unique<Impl>()) {
    Impl& s = *impl_;
    s.options = std::move(options);
    const Options& o = s.options;
    if (o.jar.empty()) {
        s.temp_dir = make_temp_dir();
        s.jar_path = s.temp_dir + "/" + std::string(kFatJarName);
        write_file(s.jar_path, build_fat_jar(o.jar_scale));
    } else {
        s.jar_path = o.jar;
    }
    s.root = std::make_unique<StandardRoot>(s.jar_path, RootOptions{o.cache_ttl, o.clock});
    s.mapper = std::make_unique<Mapper>(*s.root, o.mode);
    s.channel_server = std::make_unique<net::HttpServer>(
        server_config(o, "channel-", o.channel_port, 2),
        [&s](net::Connection& c, bool last) { return net::serve_one(c, last, [&s](const http::Request& r) { return s.channel(r); }); });
    s.channel_client = std::make_unique<ChannelClient>(o.host, s.channel_server->port());
    s.send_controller = std::make_unique<SendController>(*s.channel_client);
    s.resource_handler = std::make_unique<ResourceHttpRequestHandler>(*s.root);
    s.dispatcher = std::make_unique<DispatcherServlet>(*s.send_controller, *s.resource_handler);
    s.wrapper_valve = std::make_unique<StandardWrapperValve>(*s.dispatcher);
    s.adapter = std::make_unique<CoyoteAdapter>(*s.mapper, *s.wrapper_valve);
    s.processor = std::make_unique<Http11Processor>(*s.adapter);
    s.context = std::make_unique<StandardContext>(*s.root);
    s.app_server = std::make_unique<net::HttpServer>(
        server_config(o, "http-nio-", o.port, o.threads),
        [&s](net::Connection& c, bool last) { return s.processor->service(c, last); });
    s.admin_server = std::make_unique<net::HttpServer>(
        server_config(o, "admin-", o.admin_port, 4),
        [&s](net::Connection& c, bool last) { return net::serve_one(c, last, [&s](const http::Request& r) { return s.admin.handle(r); }); });
}

DemoServer::~DemoServer() { stop(); }

void DemoServer::start() {
    Impl& s = *impl_;
    s.channel_server->start();
    s.app_server->start();
    s.admin_server->start();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.options.gc_period.count() > 0 && !s.background.joinable() && !s.stopping)
        s.background = std::thread([&s] { s.background_loop(); });
}

void DemoServer::stop() {
    Impl& s = *impl_;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.stopping = true;
    }
    s.changed.notify_all();
    if (s.background.joinable()) s.background.join();
    s.admin.stop();
    s.admin_server->stop();
    s.app_server->stop();
    s.channel_server->stop();
}

int DemoServer::port() const { return impl_->app_server->port(); }
int DemoServer::channel_port() const { return impl_->channel_server->port(); }
int DemoServer::admin_port() const { return impl_->admin_server->port(); }
const std::string& DemoServer::jar_path() const { return impl_->jar_path; }
Mode DemoServer::mode() const { return impl_->options.mode; }
void DemoServer::background_process() { impl_->run_background(); }
std::uint64_t DemoServer::jar_walks() const { return impl_->root->walks(); }
std::uint64_t DemoServer::trace_sessions_started() const { return impl_->admin.sessions_started(); }

std::uint64_t DemoServer::background_runs() const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->background_runs;
}

bool DemoServer::wait_for_background_runs(std::uint64_t at_least, Millis timeout) const {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    return impl_->changed.wait_for(lock, timeout, [&] { return impl_->background_runs >= at_least; });
}

bool DemoServer::wait_for_trace_sessions(std::uint64_t at_least, Millis timeout) const {
    return impl_->admin.wait_for_sessions(at_least, timeout);
}

// ---- options ----------------------------------------------------------------------------------

std::string usage() {
    return "usage: demo-server [--mode=buggy|fixed] [--port=7744] [--channel-port=7745] [--admin-port=7746]\n"
           "                   [--cache-ttl=5s] [--gc-period=30s] [--threads=10] [--read-timeout=20s]\n"
           "                   [--keep-alive-timeout=20s] [--max-connections=10000] [--jar=PATH | --jar-scale=1]\n"
           "                   [--write-jar=PATH]\n"
           "  --mode=buggy  Tomcat 8.5.31: the mapper looks up every default-servlet path in the resources (BZ 62968)\n"
           "  --mode=fixed  Tomcat 8.5.37+: it checks mapperDirectoryRedirectEnabled (false) first\n"
           "  durations take ms or s (a bare number is ms); ports take 0 for an ephemeral one\n"
           "  --max-connections caps each port's open connections; past it a client gets 503 and a close\n"
           "  --jar=PATH uses an existing application jar; without it one is generated in $TMPDIR\n"
           "  --write-jar=PATH writes the generated application jar there and exits\n";
}

namespace {

Millis parse_duration(const std::string& name, const std::string& text) {
    std::string number = text;
    double unit = 1;
    if (number.size() > 2 && number.compare(number.size() - 2, 2, "ms") == 0) number.resize(number.size() - 2);
    else if (number.size() > 1 && number.back() == 's') {
        number.pop_back();
        unit = 1000;
    }
    const std::optional<double> value = parse_decimal(number);
    if (!value || *value * unit > 86400000.0)
        throw std::invalid_argument("--" + name + ": '" + text + "' is not a duration such as 500ms or 5s");
    return Millis(static_cast<Millis::rep>(*value * unit + 0.5));
}

int parse_int(const std::string& name, const std::string& text, int low, int high) {
    const std::optional<double> value = parse_decimal(text);
    if (!value || *value < low || *value > high || *value != static_cast<double>(static_cast<int>(*value)))
        throw std::invalid_argument("--" + name + ": '" + text + "' is not a whole number from " + std::to_string(low) +
                                    " to " + std::to_string(high));
    return static_cast<int>(*value);
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
    Options options;
    for (const std::string& arg : args) {
        const std::size_t eq = arg.find('=');
        if (arg.compare(0, 2, "--") != 0 || eq == std::string::npos)
            throw std::invalid_argument("expected --name=value, got '" + arg + "'");
        const std::string name = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
        if (name == "mode") {
            if (value != "buggy" && value != "fixed") throw std::invalid_argument("--mode: buggy or fixed, not '" + value + "'");
            options.mode = value == "buggy" ? Mode::buggy : Mode::fixed;
        } else if (name == "port") options.port = parse_int(name, value, 0, 65535);
        else if (name == "channel-port") options.channel_port = parse_int(name, value, 0, 65535);
        else if (name == "admin-port") options.admin_port = parse_int(name, value, 0, 65535);
        else if (name == "cache-ttl") options.cache_ttl = parse_duration(name, value);
        else if (name == "gc-period") options.gc_period = parse_duration(name, value);
        else if (name == "read-timeout") options.read_timeout = parse_duration(name, value);
        else if (name == "keep-alive-timeout") options.keep_alive_timeout = parse_duration(name, value);
        else if (name == "threads") options.threads = parse_int(name, value, 1, 200);
        else if (name == "max-connections") options.max_connections = static_cast<std::size_t>(parse_int(name, value, 1, 1000000));
        else if (name == "jar") options.jar = value;
        else if (name == "jar-scale") {
            const std::optional<double> scale = parse_decimal(value);
            if (!scale || *scale < 0.001 || *scale > 4) throw std::invalid_argument("--jar-scale: 0.001 to 4");
            options.jar_scale = *scale;
        } else if (name != "write-jar") {
            throw std::invalid_argument("unknown option --" + name);
        }
    }
    return options;
}

}  // namespace demo
