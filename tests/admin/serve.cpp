// `admin-hosts serve` (host_life.cpp's main() runs it): the admin handler on an ephemeral loopback
// port, for check_browser.py. Prints "port N", then serves while a worker thread calls annotated
// functions every 10 ms, until its standard input closes (or 10 minutes pass: it never outlives a
// lost parent for long).
#include "loopback_server.hpp"

#include <tracetree/admin/handler.hpp>
#include <tracetree/tracetree.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

namespace shop {
void find_order(int id) {
    TRACETREE_FUNCTION();
    TRACETREE_WATCH("id", id);
}
void handle_request(int id) {
    TRACETREE_FUNCTION();
    find_order(id);
}
}  // namespace shop

int serve_main() {
    tracetree::AdminHandler handler;
    admin_test::LoopbackServer server(handler);
    std::atomic<bool> stop{false};
    std::thread worker([&] {
        tracetree::set_thread_name("shop-worker");
        for (int i = 0; !stop.load(); ++i) {
            shop::handle_request(i);
            std::this_thread::sleep_for(std::chrono::milliseconds(10));  // a steady load, not a wait for an event
        }
    });
    std::cout << "port " << server.port() << std::endl;
    std::mutex mutex;
    std::condition_variable closed;
    bool input_closed = false;
    std::thread reader([&] {
        while (std::getchar() != EOF) {
        }
        std::lock_guard<std::mutex> lock(mutex);
        input_closed = true;
        closed.notify_all();
    });
    {
        std::unique_lock<std::mutex> lock(mutex);
        closed.wait_for(lock, std::chrono::minutes(10), [&] { return input_closed; });
        if (input_closed) reader.join();
        else reader.detach();  // still in getchar(): the process ends with it
    }
    stop = true;
    worker.join();
    return 0;
}
