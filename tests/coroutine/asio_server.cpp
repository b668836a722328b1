// Standalone Asio's coroutines traced through tracetree::traced (asio.hpp): a TCP server on three
// threads serves eight concurrent clients; the profile has each request under the session that
// served it, the co-scopes nested as written, and the waits on the socket and the timer apart.
#include "../support.hpp"

#include <tracetree/asio.hpp>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read_until.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

using namespace test;
using asio::ip::tcp;

// What asio requires of an executor, for the adapter of the executors a server uses.
static_assert(asio::execution::is_executor<tracetree::TracedExecutor<asio::io_context::executor_type>>::value);
static_assert(asio::execution::is_executor<tracetree::TracedExecutor<asio::any_io_executor>>::value);
static_assert(std::is_constructible_v<asio::any_io_executor, tracetree::TracedExecutor<asio::io_context::executor_type>>);

namespace {

constexpr int kClients = 8;
constexpr int kRequests = 20;
constexpr int kIoThreads = 3;

// An awaited child coroutine with a real suspension: the reply is ready when the timer expires.
asio::awaitable<std::string> lookup(std::string key) {
    TRACETREE_CO_SCOPE("lookup");
    asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::microseconds(200));
    co_await timer.async_wait(asio::use_awaitable);
    co_return "value of " + key;
}

// Reads request lines until the client closes the connection; answers each.
asio::awaitable<void> session(tcp::socket socket) {
    TRACETREE_CO_SCOPE("session");
    std::string buffer;
    for (;;) {
        asio::error_code error;
        const std::size_t length = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), '\n',
                                                                   asio::redirect_error(asio::use_awaitable, error));
        if (error) break;  // end of file: the client is done
        std::string reply;
        {
            TRACETREE_CO_SCOPE("handle");
            reply = co_await lookup(buffer.substr(0, length - 1)) + "\n";
        }
        buffer.erase(0, length);
        co_await asio::async_write(socket, asio::buffer(reply), asio::use_awaitable);
    }
}

// Accepts `connections` clients, each served by a coroutine with its own place, then ends.
asio::awaitable<void> listen(tcp::acceptor& acceptor, int connections) {
    TRACETREE_CO_SCOPE("listen");
    for (int i = 0; i < connections; ++i) {
        // The socket runs on this coroutine's executor, its TracedExecutor: traced() gives the session
        // a place of its own (under `listen`, where it is called), not this one's.
        tcp::socket socket = co_await acceptor.async_accept(co_await asio::this_coro::executor, asio::use_awaitable);
        asio::co_spawn(tracetree::traced(socket.get_executor()), session(std::move(socket)), asio::detached);
    }
}

// Blocking client: `requests` request lines, each reply checked; true when all came back right.
bool client(tcp::endpoint server, int id, int requests) {
    asio::io_context io;
    tcp::socket socket(io);
    socket.connect(server);
    std::string buffer;
    bool right = true;
    for (int r = 0; r < requests; ++r) {
        const std::string key = std::to_string(id) + "-" + std::to_string(r);
        asio::write(socket, asio::buffer(key + "\n"));
        const std::size_t length = asio::read_until(socket, asio::dynamic_buffer(buffer), '\n');
        right = right && buffer.substr(0, length) == "value of " + key + "\n";
        buffer.erase(0, length);
    }
    socket.shutdown(tcp::socket::shutdown_send);  // the session reads end of file and ends
    return right;
}

std::uint64_t dropped(const tracetree::Node& node) {
    std::uint64_t sum = node.dropped;
    for (const tracetree::Node& child : node.children) sum += dropped(child);
    return sum;
}

}  // namespace

TEST_CASE("an asio server's coroutines: each session under the listener, each request under its session") {
    tracetree::reset();
    tracetree::set_thread_name("test-main");
    constexpr int kTraced = 5;  // the next requests, whichever threads resume them: one tree each
    tracetree::TraceSession trace(tracetree::TraceRequest("handle").limit(kTraced));
    asio::io_context context;
    tcp::acceptor acceptor(context, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const tcp::endpoint server = acceptor.local_endpoint();
    {
        TRACETREE_SCOPE("serve");  // the listener's place: here, where traced() is called
        asio::co_spawn(tracetree::traced(context.get_executor()), listen(acceptor, kClients), asio::detached);
    }
    std::vector<std::thread> io_threads;
    for (int i = 0; i < kIoThreads; ++i)
        io_threads.emplace_back([&context, i] {
            tracetree::set_thread_name("io-" + std::to_string(i));
            context.run();  // returns when the listener and every session have ended
            TRACETREE_SCOPE("after");  // on a thread whose coroutines all suspended or ended: a root
        });
    std::vector<std::thread> clients;
    std::vector<char> right(kClients, false);
    for (int id = 0; id < kClients; ++id)
        clients.emplace_back([&, id] { right[static_cast<std::size_t>(id)] = client(server, id, kRequests); });
    for (std::thread& thread : clients) thread.join();
    for (std::thread& thread : io_threads) thread.join();
    for (int id = 0; id < kClients; ++id) CHECK(right[static_cast<std::size_t>(id)]);

    const tracetree::Profile profile = tracetree::profile();
    const tracetree::ThreadProfile merged = profile.merged();
    INFO(tracetree::to_string(merged));
    CHECK(merged.dropped_depth == 0);
    CHECK(merged.dropped_nodes == 0);
    for (const tracetree::Node& root : merged.roots) CHECK(dropped(root) == 0);

    const tracetree::Node* listen_node = on_path(merged, {"serve", "listen"});
    REQUIRE(listen_node != nullptr);
    CHECK(listen_node->count == 1);
    CHECK(child_at(*listen_node, "[suspended]").count == kClients);  // each accept
    const tracetree::Node* session_node = find_child(*listen_node, "session");
    REQUIRE(session_node != nullptr);
    CHECK(session_node->count == kClients);
    CHECK(child_at(*listen_node, "[queued]").count == kClients);  // each session's start
    const tracetree::Node* handle = find_child(*session_node, "handle");
    REQUIRE(handle != nullptr);
    CHECK(handle->count == kClients * kRequests);
    CHECK(find_child(*handle, "[suspended]") == nullptr);  // it waits only inside lookup
    const tracetree::Node* lookup_node = find_child(*handle, "lookup");
    REQUIRE(lookup_node != nullptr);
    CHECK(lookup_node->count == kClients * kRequests);
    const tracetree::Node* timer_wait = find_child(*lookup_node, "[suspended]");
    REQUIRE(timer_wait != nullptr);
    CHECK(timer_wait->count == kClients * kRequests);  // one timer each
    // Between requests a session waits for each read and each write; last, the end of file.
    const tracetree::Node* socket_wait = find_child(*session_node, "[suspended]");
    REQUIRE(socket_wait != nullptr);
    CHECK(socket_wait->count == kClients * (2 * kRequests + 1));
    // No scope in the wrong place: the co-scopes are where the code opened them, and nowhere else.
    CHECK(find_root(merged, "session") == nullptr);
    CHECK(find_root(merged, "handle") == nullptr);
    CHECK(find_root(merged, "lookup") == nullptr);
    CHECK(find_child(*listen_node, "handle") == nullptr);

    int io_seen = 0;
    for (const tracetree::ThreadProfile& thread : profile.threads) {
        if (thread.thread_name.rfind("io-", 0) != 0) continue;
        ++io_seen;
        const tracetree::Node* after = find_root(thread, "after");
        REQUIRE(after != nullptr);
        CHECK(after->count == 1);
    }
    CHECK(io_seen == kIoThreads);
    CHECK(node_at(merged, {"after"}).count == kIoThreads);

    const std::vector<tracetree::Trace> traces = trace.collect(std::chrono::seconds(0));
    CHECK(traces.size() == kTraced);
    for (const tracetree::Trace& one : traces) {
        INFO(tracetree::to_string(one));
        CHECK(one.root.name == "handle");
        CHECK(one.root.count == 1);
        const tracetree::Node& traced_lookup = child_at(one.root, "lookup");
        CHECK(traced_lookup.count == 1);
        CHECK(child_at(traced_lookup, "[suspended]").count == 1);  // its timer
        CHECK(one.root.total >= traced_lookup.total);
    }
}

TEST_CASE("traced() gives a new place, also to the executor a traced coroutine runs on") {
    asio::io_context context;
    const auto parent = tracetree::traced(context.get_executor());
    const asio::any_io_executor inside = parent;  // what this_coro::executor and get_executor() give
    const auto child = tracetree::traced(inside);
    CHECK(child.place() != parent.place());
    CHECK(child.inner() == asio::any_io_executor(context.get_executor()));  // not wrapped twice
    CHECK(tracetree::traced(parent).inner() == parent.inner());
    const asio::any_io_executor plain = context.get_executor();
    CHECK(tracetree::traced(plain).inner() == plain);  // nothing to unwrap
    const auto on_strand = tracetree::traced(asio::make_strand(context));
    CHECK(tracetree::traced(asio::any_io_executor(on_strand)).inner() == asio::any_io_executor(on_strand.inner()));
    CHECK(asio::prefer(parent, asio::execution::outstanding_work.tracked).place() == parent.place());
    CHECK(&asio::query(parent, asio::execution::context) == &context);
    CHECK(parent == parent);
    CHECK(parent != tracetree::traced(context.get_executor()));  // same inner, another place
}

TEST_CASE("a traced coroutine destroyed while it waits (its io_context destroyed): its place outlives its frames") {
    tracetree::reset();
    tracetree::set_thread_name("test-main");
    {
        asio::io_context context;
        asio::co_spawn(
            tracetree::traced(context.get_executor()),
            []() -> asio::awaitable<void> {
                TRACETREE_CO_SCOPE("waits");
                asio::steady_timer never(co_await asio::this_coro::executor, std::chrono::hours(1));
                co_await never.async_wait(asio::use_awaitable);
            },
            asio::detached);
        CHECK(context.run_one() == 1);  // co_spawn's start: the coroutine runs to its wait
    }  // the pending wait destroyed, and with it the coroutine's frames, outside any resumption
    {
        TRACETREE_SCOPE("after");
    }
    const tracetree::ThreadProfile merged = tracetree::profile().merged();
    INFO(tracetree::to_string(merged));
    CHECK(merged.dropped_nodes == 1);  // the co-scope's end, where the coroutine did not run
    CHECK(find_root(merged, "waits") == nullptr);
    REQUIRE(find_root(merged, "after") != nullptr);  // this thread's tree as it was
    CHECK(node_at(merged, {"after"}).count == 1);
}

TEST_CASE("work posted through a traced executor runs at its place, which the work keeps alive") {
    tracetree::reset();
    tracetree::set_thread_name("test-main");
    asio::io_context context;
    {
        TRACETREE_SCOPE("poster");
        // The executor is a temporary: only the queued work holds the place when it runs.
        asio::post(tracetree::traced(context.get_executor()), [] { TRACETREE_SCOPE("posted"); });
    }
    CHECK(context.run() == 1);
    const tracetree::ThreadProfile merged = tracetree::profile().merged();
    INFO(tracetree::to_string(merged));
    const tracetree::Node* posted = on_path(merged, {"poster", "posted"});
    REQUIRE(posted != nullptr);
    CHECK(posted->count == 1);
    CHECK(on_path(merged, {"poster", "[queued]"}) != nullptr);
    CHECK(find_root(merged, "posted") == nullptr);
}
