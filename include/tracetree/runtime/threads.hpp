// tracetree threads: the threads that record, those that have exited, and what is read of them all.
// SPDX-License-Identifier: MIT
//
// Live threads record; an exited thread's profile and timeline are folded by thread name into what
// is kept of the exited ones, within the node budget. Snapshots (profile, timeline) read both; the
// switches and limits are mirrored into every live thread's arena, where the hot path reads them.
#ifndef TRACETREE_RUNTIME_THREADS_HPP
#define TRACETREE_RUNTIME_THREADS_HPP

#include "clock.hpp"
#include "session_registry.hpp"
#include "sites.hpp"
#include "thread_state.hpp"
#include "tree.hpp"
#include "../values.hpp"

#include <algorithm>  // std::find_if, std::sort, std::remove
#include <cstdint>
#include <deque>      // retired threads
#include <memory>
#include <mutex>
#include <new>        // std::nothrow
#include <optional>
#include <stdexcept>  // std::invalid_argument for bad limits
#include <string>
#include <vector>
#include <unistd.h>   // getpid

TRACETREE_BEGIN_NAMESPACE
namespace detail {

// What is kept of exited threads: folded by name; past max_exited_threads, into one entry for all the
// others. Together they keep at most max_total_nodes nodes: what an entry cannot keep is counted as
// not recorded. Guarded by Threads::exited_mutex_, not by the lock new threads take.
class ExitedThreads {
public:
    void add(ThreadProfile profile, const Limits& limits) {
        ThreadProfile& entry = entry_for(std::move(profile), limits);
        std::uint64_t nodes = count_nodes(entry.roots);
        const std::uint64_t limit = limits.max_total_nodes;
        if (nodes_ + nodes > limit) {
            entry.dropped_nodes += prune(entry.roots, limit > nodes_ ? limit - nodes_ : 0);
            nodes = count_nodes(entry.roots);
        }
        nodes_ += nodes;
    }
    void add(ThreadTimeline timeline, const Limits& limits, std::size_t max_spans) {
        auto same = std::find_if(timelines_.begin(), timelines_.end(),
                                 [&](const ThreadTimeline& t) { return t.thread_name == timeline.thread_name; });
        if (same == timelines_.end()) {
            if (timelines_.size() < limits.max_exited_threads) timelines_.push_back(std::move(timeline));
            return;
        }
        for (Span& span : timeline.spans) {  // the per-thread bound holds for the folded entry too
            if (same->spans.size() < max_spans) same->spans.push_back(std::move(span));
            else ++same->dropped;
        }
        same->dropped += timeline.dropped;
    }
    const std::vector<ThreadProfile>& profiles() const noexcept { return profiles_; }
    const std::vector<ThreadTimeline>& timelines() const noexcept { return timelines_; }
    void clear_profiles() noexcept {
        profiles_.clear();
        nodes_ = 0;
    }
    void clear_timelines() noexcept { timelines_.clear(); }

private:
    static std::uint64_t count_nodes(const std::vector<Node>& nodes) noexcept {
        std::uint64_t count = nodes.size();
        for (const Node& node : nodes) count += count_nodes(node.children);
        return count;
    }
    // Keeps nodes breadth first while `budget` lasts; a child cut is a call of its parent not recorded
    // (Node::dropped). Returns the calls cut (a root cut has no parent: the entry's dropped_nodes).
    static std::uint64_t prune(std::vector<Node>& roots, std::uint64_t budget) {
        std::uint64_t kept = 0, cut = 0;
        while (roots.size() > budget) {
            cut += roots.back().count;
            roots.pop_back();
        }
        kept = roots.size();
        std::vector<Node*> level, next;
        for (Node& root : roots) level.push_back(&root);
        while (!level.empty()) {
            next.clear();
            for (Node* node : level) {
                std::size_t keep = 0;
                while (keep < node->children.size() && kept < budget) ++keep, ++kept;
                for (std::size_t i = keep; i < node->children.size(); ++i) {
                    node->dropped += node->children[i].count;
                    cut += node->children[i].count;  // counted in the entry too, as the node limit counts them
                }
                if (keep < node->children.size()) {
                    node->children.resize(keep);
                    node->children.shrink_to_fit();
                }
                for (Node& child : node->children) next.push_back(&child);
            }
            level.swap(next);
        }
        return cut;
    }
    ThreadProfile& entry_for(ThreadProfile profile, const Limits& limits) {
        auto same = std::find_if(profiles_.begin(), profiles_.end(),
                                 [&](const ThreadProfile& t) { return t.thread_name == profile.thread_name; });
        if (same == profiles_.end() && profiles_.size() >= limits.max_exited_threads) {
            same = std::find_if(profiles_.begin(), profiles_.end(), [](const ThreadProfile& t) { return t.thread_id == 0; });
            if (same == profiles_.end()) {
                ThreadProfile others;
                others.thread_name = "(other exited threads)";
                others.exited = true;
                profiles_.push_back(std::move(others));
                same = profiles_.end() - 1;
            }
        }
        if (same == profiles_.end()) {
            profiles_.push_back(std::move(profile));
            return profiles_.back();
        }
        nodes_ -= count_nodes(same->roots);
        if (same->os_thread_id != profile.os_thread_id) same->os_thread_id = 0;  // several threads: no one id
        merge_all(same->roots, profile.roots);
        same->dropped_depth += profile.dropped_depth;
        same->dropped_nodes += profile.dropped_nodes;
        same->exited_threads += profile.exited_threads;
        return *same;
    }

    std::vector<ThreadProfile> profiles_;
    std::uint64_t nodes_ = 0;  // in profiles_, at most max_total_nodes
    std::vector<ThreadTimeline> timelines_;
};

inline constexpr std::size_t kRetiredKept = 16;  // exited threads' states kept before they are freed

class Threads {
public:
    Threads(const Clock& clock, const SessionRegistry& sessions, SiteTable& sites, ChunkPool& chunks)
        : clock_(clock), sessions_(sessions), sites_(sites), chunks_(chunks) {}

    // A new thread's state, its tree prepared; null when the node budget is spent.
    std::shared_ptr<ThreadState> make() {
        std::shared_ptr<ThreadState> state;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            state = std::make_shared<ThreadState>(next_id_++, limits_.max_nodes, chunks_);
        }
        if (!state->main->prepare()) return nullptr;
        return state;
    }
    // From now on the thread records with the switches and limits of the moment.
    void join(const std::shared_ptr<ThreadState>& state) {
        Arena& arena = state->arena;
        std::lock_guard<std::mutex> lock(mutex_);
        arena.max_name_length.store(limits_.max_name_length, std::memory_order_relaxed);
        state->max_depth.store(limits_.max_depth);
        arena.flags.store(flags_locked());
        arena.epoch_word.store(WatchWord::make(sessions_.epoch(), 0));
        state->restore_depth_limit();
        live_.push_back(state);
    }

    // At thread exit (a pthread key destructor, after every thread_local destructor of the thread):
    // its profile joins the exited ones, its trees are freed (by the last snapshot reading them, if
    // any). The state itself is kept a while, since another copy's cached pointer may still be read
    // by a last key destructor of this thread.
    void retire(ThreadState& state) noexcept {
        std::optional<ThreadProfile> profile;
        ThreadTimeline timeline;
        std::uint64_t resets_before = 0;
        try {
            {
                std::lock_guard<std::mutex> lock(exited_mutex_);
                resets_before = resets_;
            }
            state.refresh_os_name();
            const double ratio = clock_.ns_per_tick();
            profile = thread_profile(state, state.main.get(), ratio);
            profile->exited = true;
            profile->exited_threads = 1;
            timeline = thread_timeline(state, ratio);
        } catch (...) {  // out of memory at thread exit: the thread's data is lost, the program is not
            profile.reset();
        }
        state.retire();
        // Under the exited threads' lock alone: a thread starting meanwhile does not wait for the fold.
        // Snapshots take that lock first, so they see this thread live or exited, never both.
        std::lock_guard<std::mutex> exited_lock(exited_mutex_);
        Limits limits;
        {
            // Once in retired_, the state may be freed by another thread's retire(), which waits for
            // exited_lock: `state` is not used past this block. Its tree's chunks go back before the
            // fold and before a thread starting meanwhile takes its first (stress-churn bounds them).
            std::lock_guard<std::mutex> lock(mutex_);
            limits = limits_;
            state.main.reset();
            try {
                auto self = std::find_if(live_.begin(), live_.end(), [&](const auto& p) { return p.get() == &state; });
                if (self != live_.end()) {
                    retired_.push_back(std::move(*self));
                    live_.erase(self);
                }
                while (retired_.size() > kRetiredKept) retired_.pop_front();
            } catch (...) {
            }
        }
        try {
            if (profile) {
                if (resets_ != resets_before) profile->roots.clear();  // taken before a reset() that has run since
                exited_.add(std::move(*profile), limits);
                if (!timeline.spans.empty() || timeline.dropped != 0) exited_.add(std::move(timeline), limits, timeline_limit_.load());
            }
        } catch (...) {
        }
    }

    Profile profile() {
        Profile result;
        result.taken = std::chrono::system_clock::now();
        const double ratio = clock_.ns_per_tick();
        std::vector<std::pair<std::shared_ptr<ThreadState>, std::shared_ptr<Tree>>> live;
        {
            // Both locks: each thread is seen live or exited, never both nor neither.
            std::lock_guard<std::mutex> exited_lock(exited_mutex_);
            std::lock_guard<std::mutex> lock(mutex_);
            for (const auto& state : live_) live.emplace_back(state, state->main);
            result.threads = exited_.profiles();
        }
        for (const auto& [state, tree] : live) result.threads.push_back(thread_profile(*state, tree.get(), ratio));
        std::sort(result.threads.begin(), result.threads.end(),
                  [](const ThreadProfile& a, const ThreadProfile& b) { return a.thread_id < b.thread_id; });
        return result;
    }

    void reset() {
        std::lock_guard<std::mutex> exited_lock(exited_mutex_);
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& state : live_) {
            state->reset_requested.fetch_add(1);
            state->arena.depth_limit.store(0);  // the owner clears its tree at its next scope
        }
        exited_.clear_profiles();
        ++resets_;
    }

    void set_flag(std::uint8_t flag, bool on) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (on) flags_ |= flag;
        else flags_ = static_cast<std::uint8_t>(flags_ & ~flag);
        mirror_locked();
    }
    bool enabled() {
        std::lock_guard<std::mutex> lock(mutex_);
        return (flags_ & kRecording) != 0;
    }
    // After the sessions, the clock or the timeline changed: every arena sees the state of now. Read
    // under this lock, so the last of two changes at once mirrors the newer state.
    void mirror() {
        std::lock_guard<std::mutex> lock(mutex_);
        mirror_locked();
    }

    void set_limits(const Limits& limits) {
        const auto check = [](const char* field, std::uint64_t value, std::uint64_t low, std::uint64_t high) {
            if (value < low || value > high)
                throw std::invalid_argument("tracetree: " + std::string(field) + " must be between " + std::to_string(low) +
                                            " and " + std::to_string(high) + ", got " + std::to_string(value));
        };
        check("max_depth", limits.max_depth, 1, 4096);  // renderers and Node's destructor recurse per level
        check("max_nodes", limits.max_nodes, 16, 1u << 24);
        check("max_total_nodes", limits.max_total_nodes, 256, std::uint64_t{1} << 40);
        check("max_name_length", limits.max_name_length, 1, 65536);
        check("max_name_bytes", limits.max_name_bytes, 1024, std::uint64_t{1} << 40);
        check("max_exited_threads", limits.max_exited_threads, 1, 1u << 20);
        std::lock_guard<std::mutex> lock(mutex_);
        limits_ = limits;
        chunks_.max_total_nodes.store(limits.max_total_nodes);
        sites_.set_max_name_bytes(limits.max_name_bytes);
        for (const auto& state : live_) {
            state->max_depth.store(limits.max_depth);
            state->arena.max_name_length.store(limits.max_name_length, std::memory_order_relaxed);
            state->restore_depth_limit();
        }
    }
    Limits limits() {
        std::lock_guard<std::mutex> lock(mutex_);
        return limits_;
    }
    std::size_t live_count() {
        std::lock_guard<std::mutex> lock(mutex_);
        return live_.size();
    }

    // ---- the timeline ----

    bool timeline_on() const noexcept { return timeline_on_.load(std::memory_order_relaxed); }
    std::size_t timeline_limit() const noexcept { return timeline_limit_.load(std::memory_order_relaxed); }

    void start_timeline(std::size_t max_spans) {
        if (max_spans < 1 || max_spans > (std::size_t{1} << 24))
            throw std::invalid_argument("tracetree: max_spans_per_thread must be between 1 and 16777216, got " +
                                        std::to_string(max_spans));
        std::lock_guard<std::mutex> exited_lock(exited_mutex_);
        std::lock_guard<std::mutex> lock(mutex_);
        timeline_limit_.store(max_spans);
        exited_.clear_timelines();
        for (const auto& state : live_) {
            std::lock_guard<std::mutex> spans_lock(state->mutex);
            state->spans.clear();
            state->spans_dropped = 0;
        }
        timeline_on_.store(true);
        mirror_locked();
    }
    void stop_timeline() {
        std::lock_guard<std::mutex> lock(mutex_);
        timeline_on_.store(false);
        mirror_locked();
    }
    Timeline timeline() {
        Timeline result;
        result.process_id = static_cast<std::uint32_t>(getpid());
        const double ratio = clock_.ns_per_tick();
        if (!clock_.is_test()) {
            result.origin = std::chrono::system_clock::now() -
                            std::chrono::duration_cast<std::chrono::system_clock::duration>(clock_.since_anchor());
        }
        std::vector<std::shared_ptr<ThreadState>> live;
        {
            std::lock_guard<std::mutex> exited_lock(exited_mutex_);
            std::lock_guard<std::mutex> lock(mutex_);
            live = live_;
            result.threads = exited_.timelines();
        }
        for (const auto& state : live) result.threads.push_back(thread_timeline(*state, ratio));
        std::sort(result.threads.begin(), result.threads.end(),
                  [](const ThreadTimeline& a, const ThreadTimeline& b) { return a.thread_id < b.thread_id; });
        return result;
    }

    // The lock an exit folds its tree under (no thread's first scope takes it): tests hold it to stand
    // for a fold that takes long.
    std::mutex& fold_lock() noexcept { return exited_mutex_; }

    // ---- fork(): the child forgets the other threads (their states are leaked, not destroyed: their
    // own mutexes may be held) ----

    void lock() noexcept {  // in the order of every other use: the exited threads', then mutex_
        exited_mutex_.lock();
        mutex_.lock();
    }
    void unlock_after_fork(bool child, const ThreadState* self) noexcept {
        if (child) {
            auto* orphans = new (std::nothrow) std::vector<std::shared_ptr<ThreadState>>;
            for (auto& state : live_)
                if (state.get() != self && orphans != nullptr) orphans->push_back(std::move(state));
            live_.erase(std::remove(live_.begin(), live_.end(), nullptr), live_.end());
        }
        mutex_.unlock();
        exited_mutex_.unlock();
    }

private:
    // `tree` is the state's main tree, copied under mutex_ with the state.
    static ThreadProfile thread_profile(ThreadState& state, const Tree* tree, double ratio) {
        ThreadProfile profile;
        profile.thread_name = state.thread_name();
        profile.thread_id = state.id;
        profile.os_thread_id = state.os_id;
        if (tree == nullptr || state.reset_pending()) return profile;  // logically empty until the owner clears it
        profile.dropped_depth = tree->dropped_depth.load(std::memory_order_relaxed);
        profile.dropped_nodes = tree->dropped_nodes.load(std::memory_order_relaxed);
        std::unordered_map<std::uint32_t, std::string> messages;
        {
            std::lock_guard<std::mutex> lock(state.mutex);
            messages = tree->messages;
        }
        profile.roots = to_values(*tree, ratio, &messages, nullptr, profile.thread_name);
        return profile;
    }
    ThreadTimeline thread_timeline(ThreadState& state, double ratio) {
        ThreadTimeline result;
        result.thread_name = state.thread_name();
        result.thread_id = state.id;
        const std::uint64_t origin = clock_.origin_tick();
        std::lock_guard<std::mutex> lock(state.mutex);
        result.dropped = state.spans_dropped;
        result.spans.reserve(state.spans.size());
        for (const RawSpan& raw : state.spans) {
            const InternedSite& site = interned(raw.site);
            Span span;
            span.name = site.name;
            span.file = site.file;
            span.line = site.line;
            span.start = to_nanos(raw.start > origin ? raw.start - origin : 0, ratio);
            span.duration = to_nanos(raw.end > raw.start ? raw.end - raw.start : 0, ratio);
            span.depth = raw.depth;
            span.threw = raw.threw;
            result.spans.push_back(std::move(span));
        }
        return result;
    }

    std::uint8_t flags_locked() const noexcept {
        std::uint8_t flags = flags_;
        if (sessions_.any()) flags |= kSessions;
        if (clock_.is_test() || timeline_on_.load()) flags |= kSlow;
        return flags;
    }
    void mirror_locked() noexcept {
        const std::uint8_t flags = flags_locked();
        const std::uint64_t epoch_word = WatchWord::make(sessions_.epoch(), 0);
        for (const auto& state : live_) {
            state->arena.flags.store(flags, std::memory_order_relaxed);
            state->arena.epoch_word.store(epoch_word, std::memory_order_relaxed);
        }
    }

    const Clock& clock_;
    const SessionRegistry& sessions_;
    SiteTable& sites_;
    ChunkPool& chunks_;
    std::atomic<bool> timeline_on_{false};
    std::atomic<std::size_t> timeline_limit_{65536};

    // Lock order: exited_mutex_, then mutex_ (fork() takes both in lock()); mutex_ is never held
    // while exited_mutex_ is taken.
    std::mutex exited_mutex_;  // the two below: an exit folds under this lock alone
    std::uint64_t resets_ = 0;  // an exiting thread's data taken before a reset must not come back after it
    ExitedThreads exited_;

    std::mutex mutex_;  // everything below
    std::uint8_t flags_ = kRecording;
    Limits limits_;
    std::uint32_t next_id_ = 1;
    std::vector<std::shared_ptr<ThreadState>> live_;
    std::deque<std::shared_ptr<ThreadState>> retired_;
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_THREADS_HPP
