// Standalone Asio's C++20 coroutines, traced: each connection's coroutine keeps its place in the tree
// across co_await, whichever thread resumes it, and the time it waits is a `[suspended]` node.
#include <tracetree/all.hpp>
#include <tracetree/asio.hpp>  // tracetree::traced: a co_spawn's place; needs Asio

#include <asio.hpp>

#include <iostream>
#include <string>
#include <thread>

using asio::ip::tcp;

asio::awaitable<std::string> look_up(std::string key) {
    TRACETREE_CO_SCOPE("look_up");  // open across a co_await: a co-scope, not a TRACETREE_SCOPE
    asio::steady_timer database(co_await asio::this_coro::executor, std::chrono::milliseconds(2));
    co_await database.async_wait(asio::use_awaitable);  // stands for a query
    co_return "found " + key;
}

asio::awaitable<void> session(tcp::socket socket) {
    TRACETREE_CO_SCOPE("session");
    std::string buffer;
    for (;;) {
        asio::error_code closed;
        const std::size_t length = co_await asio::async_read_until(socket, asio::dynamic_buffer(buffer), '\n',
                                                                   asio::redirect_error(asio::use_awaitable, closed));
        if (closed) co_return;
        std::string reply;
        {
            TRACETREE_CO_SCOPE("handle");
            reply = co_await look_up(buffer.substr(0, length - 1)) + "\n";
        }
        buffer.erase(0, length);
        co_await asio::async_write(socket, asio::buffer(reply), asio::use_awaitable);
    }
}

asio::awaitable<void> listen(tcp::acceptor acceptor, int connections) {
    TRACETREE_CO_SCOPE("listen");
    for (int i = 0; i < connections; ++i) {
        tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
        // Each session a place of its own, here under `listen`; inside a traced coroutine, traced() of
        // `co_await asio::this_coro::executor` would give one too (it takes the executor under it).
        asio::co_spawn(tracetree::traced(socket.get_executor()), session(std::move(socket)), asio::detached);
    }
}

// A client on its own thread: a few requests on each of two connections, one after the other.
void client(tcp::endpoint server) {
    asio::io_context io;
    for (int connection = 0; connection < 2; ++connection) {
        tcp::socket socket(io);
        socket.connect(server);
        std::string buffer;
        for (const char* request : {"alpha\n", "beta\n", "gamma\n"}) {
            asio::write(socket, asio::buffer(std::string(request)));
            buffer.erase(0, asio::read_until(socket, asio::dynamic_buffer(buffer), '\n'));
        }
    }  // closed: the session reads the end of the stream and ends
}

int main() {
    // The next request's `handle`, whichever threads resume it: one tree, delivered once it has ended.
    tracetree::TraceSession next_request(tracetree::TraceRequest("handle"));
    asio::io_context context;
    tcp::acceptor acceptor(context, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const tcp::endpoint server = acceptor.local_endpoint();
    {
        TRACETREE_SCOPE("server");  // the listener's place: where traced() is called
        asio::co_spawn(tracetree::traced(context.get_executor()), listen(std::move(acceptor), 2), asio::detached);
    }  // run() after it: the coroutines are recorded at their places, not inside `server`'s call
    std::thread clients(client, server);
    std::thread io([&] { context.run(); });  // two threads resume the coroutines
    context.run();  // returns once the listener and both sessions have ended
    io.join();
    clients.join();
    tracetree::render(std::cout, tracetree::profile().merged());
    if (const auto trace = next_request.next(std::chrono::seconds(0))) tracetree::render(std::cout, *trace);
}
