// tracecontext-service: the "test service" of the W3C Trace Context validation harness (test/ in
// w3c/trace-context), built on tracetree's trace-context API. docs/otel.md tells how to run the
// harness against it.
//
// It answers POST on any path with a JSON array of {"url": ..., "arguments": [...]}: for each element,
// in order, it POSTs `arguments` (as a JSON body) to `url`, passing the request's trace context on as
// tracetree does for any outgoing call (same trace id, a new parent id per call, the flags and the
// tracestate the spec lets through), then answers 200. Loopback only. With --otlp=URL it also
// exports each request it served as an OTLP span tree (what tests/otel checks against the official
// OpenTelemetry SDK).
//
//   tracecontext-service [--port=0] [--otlp=http://127.0.0.1:4318/v1/traces] [--otlp-interval=1000ms]
//                        [--service-name=tracecontext-service]
#include <tracetree/otel/otlp.hpp>
#include <tracetree/otel/tracecontext.hpp>
#include <tracetree/tracetree.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr std::size_t kMaxHead = 64 * 1024;
constexpr std::size_t kMaxBody = 1024 * 1024;
constexpr std::size_t kMaxCalls = 64;  // elements of one request's array
constexpr int kWorkers = 8;
constexpr std::size_t kMaxWaiting = 64;  // accepted connections waiting for a worker
constexpr auto kCallTimeout = std::chrono::milliseconds(5000);

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Request {
    std::string method, target;
    Headers headers;
    std::string body;
};

// ---- a small JSON scanner: the array's elements, each element's url and raw arguments ----------------

class Json {
public:
    explicit Json(std::string_view text) : text_(text) {}

    struct Call {
        std::string url;
        std::string arguments = "[]";  // the raw JSON text of the value
    };

    // Nothing, with `error` set, for anything but an array of objects each with a string "url".
    std::optional<std::vector<Call>> calls(std::string& error) {
        try {
            std::vector<Call> calls;
            space();
            expect('[');
            space();
            if (peek() == ']') {
                ++pos_;
            } else {
                for (;;) {
                    if (calls.size() == kMaxCalls) throw std::runtime_error("more than 64 elements");
                    calls.push_back(call());
                    space();
                    const char c = take();
                    if (c == ']') break;
                    if (c != ',') throw std::runtime_error("expected ',' or ']'");
                }
            }
            space();
            if (pos_ != text_.size()) throw std::runtime_error("text after the array");
            return calls;
        } catch (const std::runtime_error& e) {
            error = std::string(e.what()) + " at byte " + std::to_string(pos_);
            return std::nullopt;
        }
    }

private:
    Call call() {
        Call call;
        bool has_url = false;
        space();
        expect('{');
        space();
        if (peek() == '}') throw std::runtime_error("an element without \"url\"");
        for (;;) {
            space();
            const std::string key = string();
            space();
            expect(':');
            space();
            const std::size_t start = pos_;
            if (key == "url") {
                call.url = string();
                has_url = true;
            } else {
                value(0);
                if (key == "arguments") call.arguments = std::string(text_.substr(start, pos_ - start));
            }
            space();
            const char c = take();
            if (c == '}') break;
            if (c != ',') throw std::runtime_error("expected ',' or '}'");
        }
        if (!has_url) throw std::runtime_error("an element without \"url\"");
        return call;
    }

    void value(int depth) {
        if (depth > 64) throw std::runtime_error("nested too deep");
        const char c = peek();
        if (c == '"') {
            string();
        } else if (c == '[' || c == '{') {
            const char close = c == '[' ? ']' : '}';
            ++pos_;
            space();
            if (peek() == close) {
                ++pos_;
                return;
            }
            for (;;) {
                space();
                if (close == '}') {
                    string();
                    space();
                    expect(':');
                    space();
                }
                value(depth + 1);
                space();
                const char next = take();
                if (next == close) return;
                if (next != ',') throw std::runtime_error("expected ',' in a list");
            }
        } else {
            const std::size_t start = pos_;
            while (pos_ < text_.size() && std::string_view("+-.0123456789eEtruefalsn").find(text_[pos_]) != std::string_view::npos)
                ++pos_;
            const std::string_view word = text_.substr(start, pos_ - start);
            if (word.empty() || ((word[0] < '0' || word[0] > '9') && word[0] != '-' && word != "true" && word != "false" &&
                                 word != "null"))
                throw std::runtime_error("expected a value");
        }
    }

    std::string string() {
        expect('"');
        std::string out;
        for (;;) {
            const char c = take();
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) throw std::runtime_error("a control character in a string");
            if (c != '\\') {
                out += c;
                continue;
            }
            const char e = take();
            switch (e) {
            case '"': case '\\': case '/': out += e; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u':  // URLs are ASCII: an escaped character outside it makes the URL invalid anyway
                for (int i = 0; i < 4; ++i)
                    if (!std::isxdigit(static_cast<unsigned char>(take()))) throw std::runtime_error("a bad \\u escape");
                out += '?';
                break;
            default: throw std::runtime_error("a bad escape");
            }
        }
    }

    void space() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
            ++pos_;
    }
    char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
    char take() {
        if (pos_ >= text_.size()) throw std::runtime_error("unexpected end");
        return text_[pos_++];
    }
    void expect(char c) {
        if (take() != c) {
            --pos_;
            throw std::runtime_error(std::string("expected '") + c + "'");
        }
    }

    std::string_view text_;
    std::size_t pos_ = 0;
};

// ---- HTTP/1.1 server side: one request per connection --------------------------------------------

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
    return true;
}

std::string_view trim(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    return text;
}

// Reads one request; a status to answer with instead when it cannot be read.
std::optional<Request> read_request(int fd, int& error_status) {
    std::string buffer;
    char chunk[8192];
    std::size_t head_end = std::string::npos;
    std::optional<Request> request;
    std::size_t body_size = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
        if (!request) {
            head_end = buffer.find("\r\n\r\n");
            if (head_end == std::string::npos && buffer.size() > kMaxHead) {
                error_status = 431;
                return std::nullopt;
            }
            if (head_end != std::string::npos) {
                request.emplace();
                std::string_view head(buffer.data(), head_end);
                std::size_t line_end = head.find("\r\n");
                const std::string_view line = head.substr(0, line_end);
                const std::size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
                if (sp1 == std::string_view::npos || sp2 == sp1 || line.substr(sp2 + 1, 7) != "HTTP/1.") {
                    error_status = 400;
                    return std::nullopt;
                }
                request->method = std::string(line.substr(0, sp1));
                request->target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
                bool has_length = false;
                while (line_end != std::string_view::npos) {
                    head.remove_prefix(line_end + 2);
                    line_end = head.find("\r\n");
                    const std::string_view header = head.substr(0, line_end);
                    const std::size_t colon = header.find(':');
                    if (colon == std::string_view::npos || colon == 0 || header.find_first_of(" \t") < colon) {
                        error_status = 400;
                        return std::nullopt;
                    }
                    const std::string_view name = header.substr(0, colon), value = trim(header.substr(colon + 1));
                    if (iequals(name, "transfer-encoding")) {
                        error_status = 411;  // the harness sends Content-Length
                        return std::nullopt;
                    }
                    if (iequals(name, "content-length")) {
                        if (has_length || value.empty() || value.size() > 9 ||
                            value.find_first_not_of("0123456789") != std::string_view::npos) {
                            error_status = 400;
                            return std::nullopt;
                        }
                        has_length = true;
                        body_size = std::stoul(std::string(value));
                        if (body_size > kMaxBody) {
                            error_status = 413;
                            return std::nullopt;
                        }
                    }
                    request->headers.emplace_back(std::string(name), std::string(value));
                }
            }
        }
        if (request && buffer.size() >= head_end + 4 + body_size) {
            request->body = buffer.substr(head_end + 4, body_size);
            return request;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
            error_status = 408;
            return std::nullopt;
        }
        const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got <= 0) {
            error_status = 0;  // gone: nobody to answer
            return std::nullopt;
        }
        buffer.append(chunk, static_cast<std::size_t>(got));
    }
}

void answer(int fd, int status, std::string_view reason, const std::string& body) {
    const std::string response = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
                                 "\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
                                 "\r\nConnection: close\r\n\r\n" + body;
    std::string_view rest = response;
    while (!rest.empty()) {
        const ssize_t sent = ::send(fd, rest.data(), rest.size(), MSG_NOSIGNAL);
        if (sent <= 0) return;
        rest.remove_prefix(static_cast<std::size_t>(sent));
    }
}

const char* reason_of(int status) {
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 502: return "Bad Gateway";
    default: return "Service Unavailable";
    }
}

// ---- the service ---------------------------------------------------------------------------------

// One request of the harness: adopt its context, then make each call in order.
std::pair<int, std::string> serve(const Request& request) {
    TRACETREE_FUNCTION();
    tracetree::adopt(tracetree::context_from_headers(request.headers));
    if (request.method != "POST") return {405, "POST a JSON array of {\"url\": ..., \"arguments\": [...]}\n"};
    std::string error;
    const std::optional<std::vector<Json::Call>> calls = Json(request.body).calls(error);
    if (!calls) return {400, "bad JSON: " + error + "\n"};
    std::string failures;
    for (const Json::Call& call : *calls) {
        std::string why;
        const std::optional<tracetree::HttpEndpoint> endpoint = tracetree::parse_http_url(call.url, &why);
        if (!endpoint) {
            failures += "skipped " + why + "\n";
            continue;
        }
        TRACETREE_SCOPE("tracecontext-service: call");
        tracetree::OutgoingCall outgoing("POST " + endpoint->path);
        const tracetree::HttpReply reply =
            tracetree::http_post(*endpoint, "application/json", call.arguments, outgoing.headers(), kCallTimeout);
        if (reply.status < 200 || reply.status >= 300) {
            outgoing.fail();
            failures += call.url + ": " + (reply.status == 0 ? reply.error : "HTTP " + std::to_string(reply.status)) + "\n";
        }
    }
    // The harness looks at the calls, not at this answer: 200 whatever the callbacks said.
    return {200, failures.empty() ? "ok\n" : failures};
}

class Server {
public:
    explicit Server(int port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0) throw std::runtime_error("cannot create a socket");
        const int on = 1;
        ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(static_cast<std::uint16_t>(port));
        if (::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd_, 128) != 0)
            throw std::runtime_error("cannot listen on 127.0.0.1:" + std::to_string(port));
        socklen_t length = sizeof address;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
        port_ = ntohs(address.sin_port);
        for (int i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { work(); });
    }
    ~Server() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
            for (const int fd : waiting_) ::close(fd);
            waiting_.clear();
        }
        changed_.notify_all();
        for (std::thread& worker : workers_) worker.join();
        ::close(fd_);
    }
    int port() const { return port_; }

    void run(const std::atomic<bool>& stop) {
        while (!stop) {
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;  // a signal-free way to notice `stop`
            const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            std::unique_lock<std::mutex> lock(mutex_);
            if (waiting_.size() >= kMaxWaiting) {
                lock.unlock();
                answer(client, 503, reason_of(503), "busy\n");
                ::close(client);
                continue;
            }
            waiting_.push_back(client);
            lock.unlock();
            changed_.notify_one();
        }
    }

private:
    void work() {
        for (;;) {
            int fd = -1;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                changed_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
                if (stopping_) return;
                fd = waiting_.front();
                waiting_.pop_front();
            }
            int status = 0;
            const std::optional<Request> request = read_request(fd, status);
            if (request) {
                const auto [code, body] = serve(*request);
                answer(fd, code, reason_of(code), body);
            } else if (status != 0) {
                answer(fd, status, reason_of(status), std::string(reason_of(status)) + "\n");
            }
            ::close(fd);
        }
    }

    int fd_ = -1;
    int port_ = 0;
    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<int> waiting_;
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

struct Options {
    int port = 0;
    std::string otlp;
    std::chrono::milliseconds interval{1000};
    std::string service_name = "tracecontext-service";
};

Options parse(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const auto value = [&](std::string_view name) -> std::optional<std::string> {
            if (arg.compare(0, name.size(), name) != 0) return std::nullopt;
            return arg.substr(name.size());
        };
        const auto number = [&](const std::string& text, long low, long high) {
            std::size_t used = 0;
            long n = -1;
            try {
                n = std::stol(text, &used);
            } catch (const std::exception&) {
            }
            if (used != text.size() || n < low || n > high)
                throw std::invalid_argument("'" + arg + "': expected a number from " + std::to_string(low) + " to " +
                                            std::to_string(high));
            return n;
        };
        if (const auto port = value("--port=")) {
            options.port = static_cast<int>(number(*port, 0, 65535));
        } else if (const auto url = value("--otlp=")) {
            options.otlp = *url;
        } else if (const auto ms = value("--otlp-interval=")) {
            std::string text = *ms;
            if (text.size() > 2 && text.compare(text.size() - 2, 2, "ms") == 0) text.resize(text.size() - 2);
            options.interval = std::chrono::milliseconds(number(text, 1, 3600000));
        } else if (const auto name = value("--service-name=")) {
            options.service_name = *name;
        } else {
            throw std::invalid_argument("unknown argument '" + arg + "'");
        }
    }
    return options;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const Options options = parse(argc, argv);
        // SIGINT and SIGTERM are taken by one thread with sigwait; the others never see them.
        sigset_t signals;
        sigemptyset(&signals);
        sigaddset(&signals, SIGINT);
        sigaddset(&signals, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &signals, nullptr);

        std::optional<tracetree::OtlpExporter> exporter;
        std::optional<tracetree::TraceSession> session;
        if (!options.otlp.empty()) {
            tracetree::OtlpOptions otlp;
            otlp.endpoint = options.otlp;
            otlp.flush_interval = options.interval;
            otlp.resource = {{"service.name", options.service_name}};
            exporter.emplace(otlp);
            session.emplace(tracetree::TraceRequest("serve").limit(0).on_trace(exporter->on_trace()));
        }
        Server server(options.port);
        std::cout << "tracecontext-service: listening on http://127.0.0.1:" << server.port() << "/test"
                  << (options.otlp.empty() ? "" : " exporting to " + options.otlp) << std::endl;
        std::atomic<bool> stop{false};
        std::thread waiter([&] {
            int signal = 0;
            sigwait(&signals, &signal);
            stop = true;
        });
        server.run(stop);
        waiter.join();
        session.reset();
        if (exporter) {
            exporter->flush(std::chrono::seconds(5));
            const tracetree::OtlpStats stats = exporter->stats();
            std::cout << "tracecontext-service: exported " << stats.spans_exported << " spans of " << stats.traces_exported
                      << " requests; dropped " << stats.traces_dropped + stats.traces_in_dropped_batches << std::endl;
        }
        return 0;
    } catch (const std::invalid_argument& e) {
        std::cerr << "tracecontext-service: " << e.what()
                  << "\nusage: tracecontext-service [--port=0] [--otlp=URL] [--otlp-interval=MS] [--service-name=NAME]\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "tracecontext-service: " << e.what() << '\n';
        return 1;
    }
}
