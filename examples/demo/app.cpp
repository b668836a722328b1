#include "app.hpp"

#include "fatjar.hpp"
#include "net.hpp"

#include <tracetree/admin/handler.hpp>
#include <tracetree/control.hpp>
#include <tracetree/sessions.hpp>
#include <tracetree/otel/tracecontext.hpp>
#include <tracetree/tracetree.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
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
        // A caller's trace context (W3C traceparent): traces and exports carry it. Without one the
        // request is not part of a distributed trace, and its trace header stays Arthas's.
        if (read.request && read.request->header("traceparent") != nullptr)
            tracetree::adopt(tracetree::context_from_headers(read.request->headers));
        else
            tracetree::leave_context();
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

// ---- admin: tracetree's handler (include/tracetree/admin/handler.hpp), mounted under /debug/tracetree -------

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

}  // namespace

// The admin port's service: /health, `/` sent to the index, the rest to tracetree::AdminHandler. A
// client that hangs up while its call waits cancels it: the connector watches the socket for that
// while the worker waits (Connection::on_peer_gone).
class AdminService {
public:
    explicit AdminService(const Options& options) : handler_(admin_options(options)) {}

    http::Response handle(net::Connection& connection, const http::Request& request) {
        if (request.path == "/health") return text(200, "ok\n");
        if (request.path == "/" && request.method == "GET") {
            http::Response redirect = text(302, "see " + handler_.prefix() + "/\n");
            redirect.headers.emplace_back("Location", handler_.prefix() + "/");
            return redirect;
        }
        if (!handler_.handles(request.target))
            return net::error_response(404, "the admin endpoints are under " + handler_.prefix() + "/ (and /health)");
        tracetree::AdminRequest admin;
        admin.peer = connection.peer();
        admin.method = request.method;
        admin.target = request.target;
        const auto header = [&](const char* name) { return request.header(name) != nullptr ? *request.header(name) : ""; };
        admin.host = header("Host");
        admin.origin = header("Origin");
        admin.authorization = header("Authorization");
        admin.content_type = header("Content-Type");
        admin.body = request.body;
        admin.cancel = std::make_shared<tracetree::CancelToken>();
        connection.on_peer_gone([token = admin.cancel] { token->cancel(); });
        const tracetree::AdminResponse answer = handler_.handle(admin);
        http::Response response = text(answer.status, answer.body);
        response.headers = {{"Content-Type", answer.content_type}};
        response.headers.insert(response.headers.end(), answer.headers.begin(), answer.headers.end());
        return response;
    }

    void stop() { handler_.shutdown(); }  // ends the calls waiting, so that the admin threads can be joined
    bool wait_for_waiting(std::size_t count, Millis timeout) const { return handler_.wait_for_waiting(count, timeout); }

    static constexpr int kWaiting = 4;  // calls that may wait at once; the port has two more workers

private:
    static tracetree::AdminOptions admin_options(const Options& options) {
        tracetree::AdminOptions admin;
        admin.max_waiting = kWaiting;
        if (options.host != "127.0.0.1") admin.allowed_hosts.push_back(options.host);
        return admin;
    }
    static http::Response text(int status, std::string body) {
        http::Response response;
        response.status = status;
        response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
        response.body = std::move(body);
        return response;
    }

    tracetree::AdminHandler handler_;
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

// Only the app's connector records its hand-offs (AbstractEndpoint::processSocket): a trace of it
// would otherwise catch the channel's requests made by the app's own service, and the admin calls
// made while it waits.
net::ServerConfig server_config(const Options& options, const char* prefix, int port, int threads) {
    net::ServerConfig config;
    config.traced_handoff = std::string(prefix) == "http-nio-";
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
    std::unique_ptr<AdminService> admin;
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

    http::Response channel(const http::Request& request) {  // the third party: accepts every payment it can read
        TRACETREE_SCOPE("ChannelServer::pay");
        tracetree::adopt(tracetree::context_from_headers(request.headers));  // a service of its own, traced too
        if (request.path != "/pay") return net::error_response(404, "the channel only knows /pay");
        try {
            check_payment(request.body);
        } catch (const std::invalid_argument& e) {
            return net::error_response(400, e.what());
        }
        http::Response response;
        response.headers.emplace_back("Content-Type", "application/json");
        response.body = R"({"code":"0000","msg":"accepted","orderId":"ORD)" + std::to_string(++orders) + "\"}";
        return response;
    }

    // A payment's amount ({"amount":100,...}) is a whole number; std::invalid_argument otherwise. A POST
    // /send with any other body is the demo's failed outgoing call (docs/demo.md).
    static void check_payment(const std::string& body) {
        TRACETREE_SCOPE("ChannelServer::checkPayment");
        const std::size_t key = body.find("\"amount\":");
        const std::size_t start = key == std::string::npos ? key : body.find_first_not_of(' ', key + 9);
        std::size_t end = start;
        while (end < body.size() && body[end] >= '0' && body[end] <= '9') ++end;
        if (end == start || end - start > 12)
            throw std::invalid_argument("not a payment: the amount must be a whole number (\"amount\":100)");
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
    s.admin = std::make_unique<AdminService>(o);
    s.admin_server = std::make_unique<net::HttpServer>(
        server_config(o, "admin-", o.admin_port, AdminService::kWaiting + 2), [&s](net::Connection& c, bool last) {
            return net::serve_one(c, last, [&s, &c](const http::Request& r) { return s.admin->handle(c, r); });
        });
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
    s.admin->stop();
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

std::uint64_t DemoServer::background_runs() const {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    return impl_->background_runs;
}

bool DemoServer::wait_for_background_runs(std::uint64_t at_least, Millis timeout) const {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    return impl_->changed.wait_for(lock, timeout, [&] { return impl_->background_runs >= at_least; });
}

bool DemoServer::wait_for_admin_calls(std::size_t count, Millis timeout) const {
    return impl_->admin->wait_for_waiting(count, timeout);
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
