// Work that crosses threads: a poller parses each request and hands the rest to a worker pool. A
// trace of a request and the profile show the workers' time under the request that handed it off,
// and the queue wait apart.
#include <tracetree/all.hpp>  // annotated files need only <tracetree/tracetree.hpp> and <tracetree/handoff.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

// A minimal thread pool: what an executor does.
class Pool {
public:
    explicit Pool(int threads) {
        for (int i = 0; i < threads; ++i)
            workers_.emplace_back([this, i] {
                tracetree::set_thread_name("worker-" + std::to_string(i));
                // Each task dropped once it has run: what it holds (a trace's Here too) is not kept
                // waiting for the next one.
                for (std::function<void()> task; take(task); task = nullptr) task();
            });
    }
    ~Pool() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        ready_.notify_all();
        for (std::thread& worker : workers_) worker.join();
    }
    void post(std::function<void()> task) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            tasks_.push_back(std::move(task));
        }
        ready_.notify_one();
    }

private:
    bool take(std::function<void()>& task) {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return false;
        task = std::move(tasks_.front());
        tasks_.pop_front();
        return true;
    }
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> tasks_;
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

void busy(std::chrono::microseconds time) {  // stands for real work
    const auto until = std::chrono::steady_clock::now() + time;
    while (std::chrono::steady_clock::now() < until) {
    }
}

void query_database() {
    TRACETREE_FUNCTION();
    busy(std::chrono::microseconds(300));
}
void render_page() {
    TRACETREE_FUNCTION();
    busy(std::chrono::microseconds(100));
}

void serve(Pool& pool, int request) {
    TRACETREE_FUNCTION();
    {
        TRACETREE_SCOPE("parse");
        busy(std::chrono::microseconds(50));
    }
    // The rest runs on a worker, recorded under serve() with the time it waited in the queue.
    pool.post(tracetree::wrap(tracetree::here(), [request] {
        query_database();
        if (request % 2 == 0) render_page();
    }));
}

int main() {
    tracetree::set_thread_name("poller");
    // A trace of one request follows its work to the worker: delivered once that work is done.
    tracetree::TraceSession trace(tracetree::TraceRequest("serve"));
    {
        Pool pool(2);
        for (int request = 0; request < 20; ++request) serve(pool, request);
    }  // the pool drains its queue
    for (const tracetree::Trace& t : trace.collect(std::chrono::seconds(1))) tracetree::render(std::cout, t);
    const tracetree::Profile profile = tracetree::profile();
    for (const tracetree::ThreadProfile& thread : profile.threads)
        if (thread.thread_name == "worker-0") tracetree::render(std::cout, thread);
    tracetree::render(std::cout, profile.merged());
}
