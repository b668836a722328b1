// The demo server end to end on ephemeral loopback ports: the BZ 62968 jar walk seen in live traces,
// counted (never timed), and bad input answered with the right 4xx while the server keeps serving.
#include "app.hpp"
#include "fatjar.hpp"
#include "net.hpp"
#include "zip.hpp"

#include <doctest/doctest.h>
#include <tracetree/all.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

using demo::DemoServer;
using demo::Millis;
using demo::Mode;
namespace net = demo::net;

namespace {

const std::string kHost = "127.0.0.1";
constexpr Millis kTtl{5000};

struct Fixture {  // a fake clock for the cache TTL; gc only when the test says so
    std::atomic<std::int64_t> offset_ms{0};
    const std::chrono::steady_clock::time_point base = std::chrono::steady_clock::now();

    demo::Options options(Mode mode) {
        demo::Options o;
        o.mode = mode;
        o.port = o.channel_port = o.admin_port = 0;
        o.jar_scale = 1.0 / 64;  // same 33 entries, small files: fast under sanitizers
        o.cache_ttl = kTtl;
        o.gc_period = Millis(0);
        o.threads = 2;
        o.read_timeout = Millis(3000);
        o.keep_alive_timeout = Millis(3000);
        o.clock = [this] { return base + Millis(offset_ms.load()); };
        return o;
    }
    void pass_ttl() { offset_ms += kTtl.count() + 1; }
};

std::uint64_t calls(const tracetree::Node& node, std::string_view name) {
    std::uint64_t total = node.name.find(name) != std::string::npos ? node.count : 0;
    for (const tracetree::Node& child : node.children) total += calls(child, name);
    return total;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

std::size_t entries_in_resource_jar(const std::string& jar_path) {
    const std::string bytes = read_file(jar_path);
    const demo::zip::Archive fat = demo::zip::Archive::parse(bytes);
    const demo::zip::Entry* nested = fat.find(demo::kSwaggerUiJar);
    REQUIRE(nested != nullptr);
    return demo::zip::Archive::parse(fat.raw_data(*nested)).entries().size();
}

// One request, captured by a trace session on Http11Processor::service as Arthas `trace` would.
tracetree::Trace traced(DemoServer& server, const std::string& target, int expected_status = 200) {
    tracetree::TraceSession session(tracetree::TraceRequest("Http11Processor::service"));
    const demo::http::Response response = net::request(kHost, server.port(), "GET", target);
    CHECK(response.status == expected_status);
    std::optional<tracetree::Trace> trace = session.next(std::chrono::seconds(20));
    REQUIRE(trace);
    return std::move(*trace);
}

std::uint64_t walk_in(DemoServer& server, const std::string& target = "/send", int expected_status = 200) {
    return calls(traced(server, target, expected_status).root, "TomcatJarInputStream::createZipEntry");
}

demo::http::Response raw(DemoServer& server, const std::string& bytes, bool close_write = false) {
    net::Client client(kHost, server.port(), Millis(10000));
    client.send(bytes);
    if (close_write) client.shutdown_write();
    return client.read_response();
}

demo::http::Response admin(DemoServer& server, const std::string& target) {
    return net::request(kHost, server.admin_port(), "GET", target, {}, Millis(30000));
}

}  // namespace

TEST_CASE("buggy mode: a slow /send walks the whole nested jar, one createZipEntry per entry") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::buggy));
    server.start();
    const std::size_t entries = entries_in_resource_jar(server.jar_path());
    CHECK(entries == demo::swagger_ui_entry_count());

    const tracetree::Trace trace = traced(server, "/send");
    CHECK(trace.thread_name.rfind("http-nio-" + std::to_string(server.port()) + "-exec-", 0) == 0);
    CHECK(calls(trace.root, "Mapper::internalMapWrapper") == 1);
    CHECK(calls(trace.root, "JarWarResourceSet::getArchiveEntries") == 1);
    CHECK(calls(trace.root, "TomcatJarInputStream::createZipEntry") == entries);
    CHECK(calls(trace.root, "TomcatJarInputStream::getNextJarEntry") == entries + 1);  // the last finds the end
    CHECK(calls(trace.root, "SendController::send") == 1);
    const std::string text = tracetree::to_string(trace);
    CHECK(text.find("count=" + std::to_string(entries) + "] demo::TomcatJarInputStream::createZipEntry()") !=
          std::string::npos);
    CHECK(server.jar_walks() == 1);
}

TEST_CASE("fixed mode: /send never asks the resources, so no jar walk at all") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::fixed));
    server.start();
    const tracetree::Trace trace = traced(server, "/send");
    CHECK(calls(trace.root, "Mapper::internalMapWrapper") == 1);
    CHECK(calls(trace.root, "StandardRoot::getResource") == 0);
    CHECK(calls(trace.root, "TomcatJarInputStream") == 0);
    CHECK(calls(trace.root, "ChannelClient::send") == 1);
    fixture.pass_ttl();
    server.background_process();
    CHECK(walk_in(server) == 0);
    CHECK(server.jar_walks() == 0);
    // Static resources still come from the jar (and may walk it): the fix is not "stop serving them".
    const demo::http::Response page =
        net::request(kHost, server.port(), "GET", "/webjars/springfox-swagger-ui/swagger-ui.css");
    CHECK(page.status == 200);
    CHECK(page.body.size() > 1000);
    CHECK(server.jar_walks() >= 1);
}

TEST_CASE("buggy mode: slow, fast, slow again only once the TTL has passed and gc dropped the map") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::buggy));
    server.start();
    const std::uint64_t entries = demo::swagger_ui_entry_count();
    CHECK(walk_in(server) == entries);  // cold: no cache entry, no entry map
    CHECK(walk_in(server) == 0);        // cached for the TTL
    fixture.pass_ttl();
    const tracetree::Trace revalidated = traced(server, "/send");  // TTL passed, map still held: a lookup, no walk
    CHECK(calls(revalidated.root, "StandardRoot::getResourceInternal") == 1);
    CHECK(calls(revalidated.root, "createZipEntry") == 0);
    server.background_process();  // gc drops the map, but the cache entry is fresh again
    CHECK(walk_in(server) == 0);
    fixture.pass_ttl();
    CHECK(walk_in(server) == entries);  // both: the first request after idling is slow again
    CHECK(walk_in(server) == 0);
    CHECK(walk_in(server, "/other", 404) == 0);  // another path misses the cache, but the map is held
    CHECK(server.jar_walks() == 2);
}

TEST_CASE("the background thread's gc drops the entry map on its own") {
    Fixture fixture;
    demo::Options options = fixture.options(Mode::buggy);
    options.gc_period = Millis(20);
    DemoServer server(options);
    server.start();
    CHECK(walk_in(server) == demo::swagger_ui_entry_count());
    fixture.pass_ttl();
    const std::uint64_t runs = server.background_runs();
    REQUIRE(server.wait_for_background_runs(runs + 2, Millis(20000)));  // a whole run after the walk
    CHECK(walk_in(server) == demo::swagger_ui_entry_count());
}

TEST_CASE("the admin port serves tracetree's handler: a live trace of a request, Arthas-style") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::buggy));
    server.start();
    demo::http::Response traced_response;
    std::thread waiter([&] {
        traced_response = admin(server, "/debug/tracetree/trace?pattern=Http11Processor::service&cost=0&n=1&timeout=30");
    });
    REQUIRE(server.wait_for_admin_calls(1, Millis(20000)));
    CHECK(net::request(kHost, server.port(), "GET", "/send").status == 200);
    waiter.join();
    CHECK(traced_response.status == 200);
    const std::string& text = traced_response.body;
    CHECK(text.find(";thread_name=http-nio-" + std::to_string(server.port()) + "-exec-") != std::string::npos);
    CHECK(text.find("demo::Http11Processor::service()") != std::string::npos);
    CHECK(text.find("count=33] demo::TomcatJarInputStream::createZipEntry()") != std::string::npos);
    CHECK(text.find("Command execution times exceed limit: 1") != std::string::npos);

    const demo::http::Response timed_out = admin(server, "/debug/tracetree/trace?pattern=NoSuchMethod&timeout=0.1");
    CHECK(timed_out.status == 200);
    CHECK(timed_out.body.find("Timed out after 0.1 s: 0 of 1") != std::string::npos);

    const demo::http::Response profile = admin(server, "/debug/tracetree/profile");
    CHECK(profile.status == 200);
    CHECK(profile.body.find("demo::TomcatJarInputStream::createZipEntry()") != std::string::npos);
}

TEST_CASE("the admin port's flight recorder keeps the slow call that already happened") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::buggy));
    server.start();
    const auto post = [&](const std::string& target) {
        return net::request(kHost, server.admin_port(), "POST", target, {}, Millis(30000));
    };
    // CoyoteAdapter::service has returned (and been captured) before the response is written, so the
    // client's answer means the capture is in; Http11Processor::service ends after the write.
    CHECK(post("/debug/tracetree/recorder/start?pattern=CoyoteAdapter::service&cost=0&keep=2").status == 200);
    CHECK(net::request(kHost, server.port(), "GET", "/send").status == 200);  // cold: walks the jar
    CHECK(net::request(kHost, server.port(), "GET", "/send").status == 200);  // cached: no walk
    const demo::http::Response kept = admin(server, "/debug/tracetree/recorder");
    CHECK(kept.status == 200);
    CHECK(kept.body.find("2 recorded, 2 kept, 0 evicted") != std::string::npos);
    CHECK(kept.body.find("count=33] demo::TomcatJarInputStream::createZipEntry()") != std::string::npos);
    CHECK(admin(server, "/debug/tracetree/recorder/stop").status == 405);  // a change of state is a POST
    CHECK(post("/debug/tracetree/recorder/stop").status == 200);
}

TEST_CASE("the admin port: a client that hangs up ends its waiting call; foreign hosts are refused") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::buggy));
    server.start();
    {
        net::Client client(kHost, server.admin_port(), Millis(10000));
        client.send("GET /debug/tracetree/trace?pattern=NoSuchMethod&timeout=300 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        REQUIRE(server.wait_for_admin_calls(1, Millis(20000)));
    }  // closed: the connector sees it and cancels the call, which would otherwise wait 300 s
    CHECK(server.wait_for_admin_calls(0, Millis(20000)));

    net::Client rebinding(kHost, server.admin_port(), Millis(10000));
    rebinding.send("GET /debug/tracetree/profile HTTP/1.1\r\nHost: attacker.example:7746\r\n\r\n");
    CHECK(rebinding.read_response().status == 403);
    const demo::http::Response root = admin(server, "/");
    CHECK(root.status == 302);
    CHECK(root.headers.end() != std::find(root.headers.begin(), root.headers.end(),
                                          std::pair<std::string, std::string>("Location", "/debug/tracetree/")));
    CHECK(admin(server, "/debug/tracetree/").status == 200);
}

TEST_CASE("bad admin parameters get 400 with a reason, and the admin port keeps serving") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::buggy));
    server.start();
    const char* const bad[] = {"/trace",
                               "/trace?pattern=",
                               "/trace?pattern=x&n=0",
                               "/trace?pattern=x&n=101",
                               "/trace?pattern=x&n=1.5",
                               "/trace?pattern=x&n=abc",
                               "/trace?pattern=x&cost=-1",
                               "/trace?pattern=x&cost=1e3",
                               "/trace?pattern=x&timeout=0",
                               "/trace?pattern=x&timeout=601",
                               "/trace?pattern=x&regex=yes",
                               "/trace?pattern=(&regex=1",
                               "/trace?pattern=x&bogus=1",
                               "/trace?pattern=a&pattern=b",
                               "/trace?pattern=%zz",
                               "/monitor?pattern=x&reset=1",
                               "/profile?threads=2"};
    for (const char* target : bad) {
        CAPTURE(target);
        const demo::http::Response response = admin(server, std::string("/debug/tracetree") + target);
        CHECK(response.status == 400);
        CHECK(response.body.find("400 Bad Request: parameter '") != std::string::npos);
    }
    CHECK(admin(server, "/nope").status == 404);
    CHECK(admin(server, "/debug/tracetree/nope").status == 404);
    CHECK(admin(server, "/health").status == 200);
    CHECK(server.wait_for_admin_calls(0, Millis(0)));
}

TEST_CASE("malformed requests get the right 4xx and the server keeps serving") {
    Fixture fixture;
    demo::Options options = fixture.options(Mode::buggy);
    options.limits.max_body = 4096;
    options.read_timeout = Millis(300);
    DemoServer server(options);
    server.start();
    auto still_serving = [&] { CHECK(net::request(kHost, server.port(), "GET", "/send").status == 200); };

    CHECK(raw(server, "GARBAGE\r\n\r\n").status == 400);
    still_serving();
    CHECK(raw(server, "GET /send HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n").status == 431);
    CHECK(raw(server, "GET /" + std::string(20000, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n").status == 414);
    still_serving();
    const demo::http::Response truncated =
        raw(server, "POST /send HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nonly ten b", true);
    CHECK(truncated.status == 400);
    CHECK(truncated.body.find("truncated body") != std::string::npos);
    CHECK(raw(server, "POST /send HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n").status == 413);
    CHECK(raw(server, "GET /send HTTP/3.0\r\nHost: a\r\n\r\n").status == 505);
    CHECK(raw(server, "GET /../etc/passwd HTTP/1.1\r\nHost: a\r\n\r\n").status == 400);
    CHECK(raw(server, "GET /%2e%2e/etc/passwd HTTP/1.1\r\nHost: a\r\n\r\n").status == 400);
    CHECK(raw(server, "GET /webjars/..%2f..%2fetc HTTP/1.1\r\nHost: a\r\n\r\n").status == 400);
    CHECK(raw(server, "GET /a/../send HTTP/1.1\r\nHost: a\r\n\r\n").status == 200);  // stays inside: fine
    CHECK(raw(server, "DELETE /send HTTP/1.1\r\nHost: a\r\n\r\n").status == 405);
    CHECK(raw(server, "GET /no-such-page HTTP/1.1\r\nHost: a\r\n\r\n").status == 404);
    CHECK(raw(server, "GET /send HTTP/1.1\r\nHost: a\r\n").status == 408);  // the blank line never comes
    CHECK(raw(server, "GET /send HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n").status == 400);
    // CR-only line endings: 400 at once (a wait for the read timeout would answer 408).
    const demo::http::Response bare_cr = raw(server, "GET /send HTTP/1.1\rHost: a\r\r");
    CHECK(bare_cr.status == 400);
    CHECK(bare_cr.body.find("bare CR") != std::string::npos);
    still_serving();

    net::Client keep_alive(kHost, server.port(), Millis(10000));  // two requests, one connection, pipelined
    keep_alive.send("GET /send HTTP/1.1\r\nHost: a\r\n\r\nGET /swagger-ui.html HTTP/1.1\r\nHost: a\r\n\r\n");
    CHECK(keep_alive.read_response().status == 200);
    const demo::http::Response page = keep_alive.read_response();
    CHECK(page.status == 200);
    CHECK(page.body.size() > 10);
}

TEST_CASE("a payment the channel cannot read: it answers 400, /send 502 (the failed outgoing call), then serves on") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::fixed));
    server.start();
    for (const char* body : {R"({"amount":"lots"})", R"({"currency":"CNY"})", R"({"amount":1234567890123})", "x"}) {
        CAPTURE(body);
        const demo::http::Response refused = net::request(kHost, server.port(), "POST", "/send", body);
        CHECK(refused.status == 502);
        CHECK(refused.body == "502 Bad Gateway: channel answered 400\n");
    }
    const demo::http::Response channel = net::request(kHost, server.channel_port(), "POST", "/pay", "{}");
    CHECK(channel.status == 400);
    CHECK(channel.body.find("the amount must be a whole number") != std::string::npos);
    CHECK(net::request(kHost, server.port(), "POST", "/send", R"({"amount": 100,"currency":"CNY"})").status == 200);
    CHECK(net::request(kHost, server.port(), "GET", "/send").status == 200);  // the default payment
}

TEST_CASE("keep-alive: one Http11Processor::service call per request, none when the client closes") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::fixed));
    server.start();
    tracetree::TraceSession session(tracetree::TraceRequest("Http11Processor::service").limit(100));
    {
        net::Client client(kHost, server.port(), Millis(10000));
        for (int i = 0; i < 5; ++i) {
            client.send("GET /send HTTP/1.1\r\nHost: a\r\n\r\n");
            CHECK(client.read_response().status == 200);
        }
        client.shutdown_write();
        CHECK(client.read_to_close().empty());  // the server has seen the close and closed too
    }
    for (int i = 0; i < 5; ++i) CHECK(session.next(std::chrono::seconds(20)));
    CHECK_FALSE(session.next(tracetree::Nanos(0)));  // a call for the close would have come before it
}

TEST_CASE("static files are streamed from the nested jar, whole, and HEAD gives their length") {
    Fixture fixture;
    DemoServer server(fixture.options(Mode::fixed));
    server.start();
    const std::string jar = read_file(server.jar_path());
    const demo::zip::Archive fat = demo::zip::Archive::parse(jar);
    const demo::zip::Archive nested = demo::zip::Archive::parse(fat.raw_data(*fat.find(demo::kSwaggerUiJar)));
    const std::string name = "META-INF/resources/webjars/springfox-swagger-ui/swagger-ui-bundle.js.map";
    const std::string expected = nested.read(*nested.find(name));
    const std::string path = name.substr(std::string("META-INF/resources").size());
    const demo::http::Response got = net::request(kHost, server.port(), "GET", path);
    CHECK(got.status == 200);
    CHECK(got.body.size() == expected.size());
    CHECK(got.body == expected);
    net::Client client(kHost, server.port(), Millis(10000));
    client.send("HEAD " + path + " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    const std::string head = client.read_to_close();
    CHECK(head.find("Content-Length: " + std::to_string(expected.size()) + "\r\n") != std::string::npos);
    CHECK(head.substr(head.find("\r\n\r\n") + 4).empty());
}

TEST_CASE("a corrupt or missing application jar gives a clear error at start") {
    Fixture fixture;
    char dir_template[] = "/tmp/tracetree-demo-test-XXXXXX";
    REQUIRE(::mkdtemp(dir_template) != nullptr);
    const std::string dir = dir_template;
    const std::string good = demo::build_fat_jar(1.0 / 64);
    auto start_with = [&](const std::string& bytes) -> std::string {
        const std::string path = dir + "/app.jar";
        std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        demo::Options options = fixture.options(Mode::buggy);
        options.jar = path;
        try {
            DemoServer server(options);
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "started";
    };
    CHECK(start_with(good) == "started");
    CHECK(start_with("this is not a jar").find("app.jar is corrupt: zip: not a ZIP archive") != std::string::npos);
    CHECK(start_with(good.substr(0, good.size() / 2)).find("is corrupt") != std::string::npos);
    std::string damaged = good;
    const demo::zip::Archive fat = demo::zip::Archive::parse(good);
    const std::string_view nested = fat.raw_data(*fat.find(demo::kSwaggerUiJar));
    damaged[static_cast<std::size_t>(nested.data() - good.data()) + nested.size() / 3] ^= 0x55;
    const std::string error = start_with(damaged);
    CHECK(error.find("nested jar BOOT-INF/lib/springfox-swagger-ui-2.9.2.jar") != std::string::npos);
    CHECK(error.find("is corrupt") != std::string::npos);
    ::unlink((dir + "/app.jar").c_str());
    ::rmdir(dir.c_str());

    demo::Options missing = fixture.options(Mode::buggy);
    missing.jar = dir + "/gone.jar";
    CHECK_THROWS_WITH_AS(DemoServer{missing}, doctest::Contains("cannot open application jar"), std::runtime_error);
}

TEST_CASE("command-line options") {
    const demo::Options options = demo::parse_options({"--mode=fixed", "--cache-ttl=250ms", "--gc-period=2s", "--port=0"});
    CHECK(options.mode == Mode::fixed);
    CHECK(options.cache_ttl == Millis(250));
    CHECK(options.gc_period == Millis(2000));
    CHECK(options.port == 0);
    CHECK_THROWS_AS(demo::parse_options({"--mode=broken"}), std::invalid_argument);
    CHECK_THROWS_AS(demo::parse_options({"--port=70000"}), std::invalid_argument);
    CHECK_THROWS_AS(demo::parse_options({"--cache-ttl=soon"}), std::invalid_argument);
    CHECK_THROWS_AS(demo::parse_options({"--what=1"}), std::invalid_argument);
    CHECK_THROWS_AS(demo::parse_options({"fixed"}), std::invalid_argument);
    CHECK(demo::parse_options({"--max-connections=50"}).max_connections == 50);
    CHECK_THROWS_AS(demo::parse_options({"--max-connections=0"}), std::invalid_argument);
}
