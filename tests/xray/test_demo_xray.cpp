// demo-server-xray's objects in-process (examples/demo-xray): the Tomcat replica has no tracetree
// code, and a live trace of Http11Processor::service still finds the BZ 62968 jar walk, through XRay
// functions patched for the trace only, with the same call path and counts as the annotated build
// (tests/demo/test_server.cpp). Counts, never timings.
#include "app.hpp"
#include "fatjar.hpp"
#include "net.hpp"

#include <doctest/doctest.h>
#include <tracetree/all.hpp>
#include <tracetree/xray/xray.hpp>

#include <chrono>
#include <cstring>
#include <thread>

using demo::DemoServer;
using demo::Millis;

namespace {

const std::string kHost = "127.0.0.1";

demo::Options options() {  // as tests/demo/test_server.cpp: small files, no background gc
    demo::Options o;
    o.port = o.channel_port = o.admin_port = 0;
    o.jar_scale = 1.0 / 64;
    o.gc_period = Millis(0);
    o.threads = 2;
    o.read_timeout = o.keep_alive_timeout = Millis(3000);
    return o;
}

std::uint64_t calls(const tracetree::Node& node, std::string_view name) {
    std::uint64_t total = node.name.find(name) != std::string::npos ? node.count : 0;
    for (const tracetree::Node& child : node.children) total += calls(child, name);
    return total;
}
std::uint64_t calls_in_profile(std::string_view name) {
    std::uint64_t total = 0;
    for (const auto& thread : tracetree::profile().threads)
        for (const auto& root : thread.roots) total += calls(root, name);
    return total;
}

// The path from `node` down to the first node named `name` (names only), or nothing.
bool path_to(const tracetree::Node& node, const std::string& name, std::vector<std::string>& path) {
    path.push_back(node.name);
    if (node.name == name) return true;
    for (const auto& child : node.children)
        if (path_to(child, name, path)) return true;
    path.pop_back();
    return false;
}

bool sled_patched(const std::string& name) {
    for (const auto& function : tracetree::xray::functions()) {
        if (function.name != name) continue;
        unsigned char first = 0;
        std::memcpy(&first, reinterpret_cast<const void*>(function.address), 1);
        return first != 0xEB;  // an unpatched entry sled jumps over itself
    }
    throw std::runtime_error("no XRay function " + name);
}

}  // namespace

TEST_CASE("the XRay build's live trace finds the jar walk, and unpatches when it ends") {
    tracetree::reset();
    DemoServer server(options());
    server.start();
    const std::size_t entries = demo::swagger_ui_entry_count();

    // Nothing patched: Tomcat's functions record nothing, annotated scopes record as always.
    CHECK(tracetree::xray::status().patched == 0);
    CHECK(demo::net::request(kHost, server.port(), "GET", "/send").status == 200);  // warms the cache
    // The response may reach us before the server's thread has left service(): wait for its scope.
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         calls_in_profile("Http11Processor::service") == 0 && std::chrono::steady_clock::now() < until;)
        std::this_thread::yield();
    CHECK(calls_in_profile("TomcatJarInputStream") == 0);
    CHECK(calls_in_profile("Http11Processor::service") == 1);

    server.background_process();  // drops the entry map; the next /send to a new path walks the jar
    std::optional<tracetree::Trace> trace;
    {
        // The jar walk is 12 calls below service(): deeper than the default depth.
        tracetree::TraceSession session(tracetree::TraceRequest("Http11Processor::service").depth(16));
        CHECK(sled_patched("demo::TomcatJarInputStream::getNextJarEntry()"));
        CHECK(demo::net::request(kHost, server.port(), "GET", "/send2").status == 404);
        trace = session.next(std::chrono::seconds(20));
    }
    REQUIRE(trace);
    CHECK(calls(trace->root, "TomcatJarInputStream::createZipEntry") == entries);
    CHECK(calls(trace->root, "TomcatJarInputStream::getNextJarEntry") == entries + 1);  // the last finds the end
    CHECK(calls(trace->root, "TomcatJarInputStream::closeEntry") == entries + 1);
    // The annotated build's path, through annotated (app.cpp) and XRay (tomcat.cpp) functions alike.
    std::vector<std::string> path;
    REQUIRE(path_to(trace->root, "demo::TomcatJarInputStream::createZipEntry()", path));
    CHECK(path == std::vector<std::string>{
        "demo::Http11Processor::service()", "demo::CoyoteAdapter::service()", "demo::CoyoteAdapter::postParseRequest()",
        "demo::Mapper::map()", "demo::Mapper::internalMap()", "demo::Mapper::internalMapWrapper()",
        "demo::StandardRoot::getResource()", "demo::Cache::getResource()", "demo::StandardRoot::getResourceInternal()",
        "demo::JarWarResourceSet::getResource()", "demo::JarWarResourceSet::getArchiveEntries()",
        "demo::TomcatJarInputStream::getNextJarEntry()", "demo::TomcatJarInputStream::createZipEntry()"});

    // Ended: unpatched, and Tomcat's functions record nothing again.
    const tracetree::xray::Status status = tracetree::xray::status();
    CHECK(status.patched == 0);
    CHECK(status.draining == 0);
    CHECK_FALSE(sled_patched("demo::TomcatJarInputStream::getNextJarEntry()"));
    // The capture joins the worker's profile after its response went out (the trace's root scope ends
    // after the send): wait for it, then one more walk, unpatched, adds nothing.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (calls_in_profile("TomcatJarInputStream::getNextJarEntry") != entries + 1 &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();
    CHECK(calls_in_profile("TomcatJarInputStream::getNextJarEntry") == entries + 1);
    server.background_process();
    CHECK(demo::net::request(kHost, server.port(), "GET", "/send3").status == 404);  // walks again, unseen
    CHECK(calls_in_profile("TomcatJarInputStream::getNextJarEntry") == entries + 1);
    CHECK(server.jar_walks() == 3);  // the first /send, /send2, /send3
}
