// tracetree runtime: the process-wide recorder behind control.hpp. SPDX-License-Identifier: MIT
//
// RuntimeImpl implements the Recorder interface (recorder.hpp's slow paths) over the rooms that own
// the data: the clock (clock.hpp), the interned sites (sites.hpp), the node pool and trees
// (tree.hpp), the sessions and their delivery (session_registry.hpp), each thread's state
// (thread_state.hpp) and the threads, live and exited (threads.hpp); the process around it
// (process.hpp). It is found or started by detail::runtime() (control-inl.hpp).
//
// One process, one recorder: the first copy of this header to run starts it and writes its address
// into the anchors (core/anchor.hpp); every other copy, whatever the linking, finds it there.
// Everything that allocates objects the recorder keeps runs in the starting copy (virtual calls),
// whose module is pinned in memory, so a library that is unloaded takes nothing the recorder needs.
#ifndef TRACETREE_RUNTIME_RUNTIME_HPP
#define TRACETREE_RUNTIME_RUNTIME_HPP

#include "clock.hpp"
#include "../text/format.hpp"  // java_double: TRACETREE_WATCH numbers
#include "handoffs.hpp"
#include "process.hpp"
#include "session_registry.hpp"
#include "sites.hpp"
#include "thread_state.hpp"
#include "threads.hpp"
#include "tree.hpp"

#include <algorithm>  // std::any_of, std::find
#include <cstdlib>    // std::getenv: TRACETREE_ADMIN, read once when the recorder starts
#include <mutex>
#include <optional>
#include <sstream>    // TRACETREE_WATCH values printed with operator<<
#include <stdexcept>  // std::runtime_error: no thread key left
#include <typeinfo>   // the throw hook's exception types
#include <pthread.h>  // thread-exit key, fork handlers

TRACETREE_BEGIN_NAMESPACE
namespace detail {

class RuntimeImpl : public Recorder {
public:
    // `throw_hook`: why throws are not seen, or empty (runtime/throw_hook.hpp, check_throw_hook()).
    explicit RuntimeImpl(std::string throw_hook)
        : throw_hook_(std::move(throw_hook)), module_(module_of(reinterpret_cast<void*>(&install_fork_handlers))),
          admin_setting_(environment("TRACETREE_ADMIN")) {
        if (pthread_key_create(&thread_key_, [](void* state) {
                auto* thread = static_cast<ThreadState*>(state);
                auto* runtime = static_cast<RuntimeImpl*>(thread->arena.recorder);
                runtime->handoffs_.exiting(*thread);
                runtime->threads_.retire(*thread);
            }) != 0)
            throw std::runtime_error("tracetree: no thread-specific key left for the recorder");
    }
    virtual ~RuntimeImpl() { pthread_key_delete(thread_key_); }  // only one that another copy's beat is destroyed

    // ---- Recorder: the slow paths of every copy's scopes (this copy's code runs them) ----

    Arena* join_thread() noexcept override {
        if (auto* known = static_cast<ThreadState*>(pthread_getspecific(thread_key_)))
            return known->retired.load() ? nullptr : &known->arena;
        try {
            const std::shared_ptr<ThreadState> state = threads_.make();
            if (!state) return nullptr;
            Arena& arena = state->arena;
            arena.recorder = this;
            arena.state = state.get();
            arena.uncaught = uncaught_counter();
            arena.dynamic = &kNoDynamicEntry;
            arena.guard = &state->deferred();
            state->current = state->main.get();
            state->point_at(*state->main, 0);
            state->refresh_os_name();  // before any snapshot can see the thread
            state->os_id = current_os_thread_id();
            threads_.join(state);
            pthread_setspecific(thread_key_, state.get());
            return &arena;
        } catch (...) {  // out of memory: this thread records nothing
            return nullptr;
        }
    }

    NodeRecord* enter_limited(Arena& arena, Site* site, const SiteInfo* info) noexcept override {
        ThreadState& state = ThreadState::of(arena);
        if (state.retired.load()) return nullptr;
        if (state.capture_waits()) state.start_deferred_capture();
        if (arena.cur == &state.overflow) return state.drop(1);  // inside a scope cut by the node limit
        if (state.in_overflow.load()) {  // that scope has ended
            state.in_overflow.store(false);
            state.restore_depth_limit();
        }
        state.apply_pending_reset();
        if (arena.depth >= state.max_depth.load(std::memory_order_relaxed)) {
            bump(state.current->dropped_depth);
            bump_saturating(arena.cur->dropped);
            return nullptr;
        }
        return find_or_add(arena, site, info);
    }

    NodeRecord* add(Arena& arena, Site* site, const SiteInfo* info) noexcept override {
        return find_or_add(arena, site, info);
    }

    void begin(Scope& scope, Arena& arena, Site* site, const SiteInfo* info) noexcept override {
        ThreadState& state = ThreadState::of(arena);
        if (state.retired.load()) return;  // a thread-exit destructor that runs after the recorder's
        if (state.capture_waits()) state.start_deferred_capture();
        const std::uint8_t flags = arena.flags.load(std::memory_order_relaxed);
        if (state.reset_pending()) state.apply_pending_reset();  // before a capture, which is folded into this tree later
        std::uint8_t slow = 0;
        // A site never seen, with the tree full, is not interned (find_or_add drops it): nothing to watch.
        const bool known = info->interned || !state.current->full();
        if (known && (info = register_site(site, info)) == nullptr) return;
        std::uint32_t framed = 0, captured = 0;
        std::uint32_t epoch = 0;
        if (known && (flags & kSessions) != 0 && arena.cur != &state.overflow) framed = watching(state, info, epoch, captured);
        // The capture waits for the first thing recorded under the scope, so that an invocation with
        // nothing below it costs the checks only; not when values are kept (by node of the capture's
        // tree, or of the frame's node).
        // Where the thread CPU clock measures off-CPU time, the clock is read when the capture starts, so
        // a deferred capture's time before its first child counts as on CPU (mark_off_cpu's lower bound).
        const bool defer = captured != 0 && framed == 0 && !state.captures[state.capture_depth].values &&
                           (arena.values & kValuesOfAll) == 0;
        if (captured != 0 && !defer) {
            state.enter_capture();
            slow |= Scope::kCaptureRoot;
        }
        NodeRecord* parent = nullptr;
        NodeRecord* node = arena.enter(site, info, parent);
        if (node == nullptr || node == &state.overflow) framed = 0;
        if (node == nullptr) {
            if ((slow & Scope::kCaptureRoot) != 0) end_capture(state, 0, false);
            return;
        }
        if (defer && node != &state.overflow) {
            state.defer_capture(captured);
            slow |= Scope::kDeferredCapture;
            // Until this state changes, the next scopes of the site are deferred the same way: by Scope
            // (begin_deferred), without this call, nor end()'s when nothing comes under them below the
            // sessions' min_cost. Run-time names stay here.
            if (site != nullptr) state.defer_in_header(info, epoch);
        }
        if (framed != 0) {
            const std::uintptr_t boundary = t_scope_entry_sp != 0 ? t_scope_entry_sp : reinterpret_cast<std::uintptr_t>(&scope);
            if (state.push_frame(info, node, framed, boundary)) slow |= Scope::kFrame;
        }
        if ((flags & kSlow) != 0) {  // a test clock or the timeline
            if (clock_.is_test(std::memory_order_relaxed)) slow |= Scope::kFakeClock;
            if (threads_.timeline_on()) {
                slow |= Scope::kTimelineSpan;
                ++state.timeline_depth;
            }
        }
        scope.node_ = node;
        scope.parent_ = parent;  // where ~Scope goes back to when `slow` stays 0
        scope.arena_ = &arena;
        scope.slow_ = slow;
        scope.uncaught_ = *arena.uncaught;
        scope.start_ = clock_.now((slow & Scope::kFakeClock) != 0);
    }

    void end(Scope& scope) noexcept override {
        Arena& arena = *scope.arena_;
        ThreadState& state = ThreadState::of(arena);
        const std::uint64_t end = clock_.now((scope.slow_ & Scope::kFakeClock) != 0);
        const std::uint64_t elapsed = end - scope.start_;
        const bool threw = *arena.uncaught > scope.uncaught_;
        NodeRecord* node = scope.node_;
        bool captured = (scope.slow_ & Scope::kCaptureRoot) != 0;
        if ((scope.slow_ & Scope::kDeferredCapture) != 0) {
            if (state.capture_waits()) {  // nothing was recorded under the scope
                if (wanted(state.captures[state.capture_depth], elapsed)) state.start_deferred_capture();
                else state.capturing &= ~state.captures[state.capture_depth].mask;
            }
            // Started, the arena is at the scope's node in the capture's tree; else at `node` or deferred.
            captured = !state.capture_waits() && arena.cur != node;
            if (captured) node = arena.cur;
        }
        arena.leave(node, elapsed, scope.uncaught_);
        if ((scope.slow_ & Scope::kTimelineSpan) != 0) {
            --state.timeline_depth;
            try {
                std::lock_guard<std::mutex> lock(state.mutex);
                if (node->site != nullptr && state.spans.size() < threads_.timeline_limit())
                    state.spans.push_back(RawSpan{node->site, scope.start_, end, state.timeline_depth, threw});
                else
                    ++state.spans_dropped;
            } catch (...) {  // out of memory: the span is lost, the program goes on
            }
        }
        if ((scope.slow_ & Scope::kFrame) != 0) pop_frame(state, elapsed, threw);
        if (captured) end_capture(state, elapsed, true);
    }

    // TRACETREE_WATCH: to the innermost watched scope or co-scope, and to the capture that asked for values.
    void value(Arena& arena, const char* name, const char* text, std::size_t size, bool cut) noexcept override {
        try {
            add_value(ThreadState::of(arena), name, std::string(text, size) + (cut ? "..." : ""));
        } catch (...) {  // out of memory: the value is lost
        }
    }
    void value(Arena& arena, const char* name, double number) noexcept override {
        try {
            add_value(ThreadState::of(arena), name, java_double(number));
        } catch (...) {
        }
    }
    void value(Arena& arena, const char* name, void (*print)(std::ostream&, const void*), const void* object) noexcept override {
        try {
            std::ostringstream out;
            print(out, object);
            std::string text = out.str();
            if (text.size() > ValueWriter::kCapacity) text.replace(ValueWriter::kCapacity, std::string::npos, "...");
            add_value(ThreadState::of(arena), name, std::move(text));
        } catch (...) {  // out of memory, or the user's operator<< threw: the value is lost
        }
    }
    void add_value(ThreadState& state, const char* name, std::string text) {
        if (state.resumption != nullptr) handoffs_.co_value(state, name, text);
        state.add_value(name, std::move(text));
    }

    const SiteInfo* dynamic_site(Arena& arena, Site& origin_site, const char* name, std::size_t size) noexcept override {
        ThreadState& state = ThreadState::of(arena);
        if (state.retired.load()) return nullptr;  // a thread-exit destructor that runs after the recorder's
        if (state.capture_waits()) state.start_deferred_capture();
        const SiteInfo* origin = sites_.registered(&origin_site, origin_site.info.load(std::memory_order_acquire));
        if (origin == nullptr) return nullptr;
        // A name never seen needs a new node: with the tree full it is dropped without being kept.
        const InternedSite* site = sites_.dynamic(origin, name, size, !state.current->full());
        if (site == nullptr) {
            state.drop(1);
            return nullptr;
        }
        state.remember_dynamic(site);
        return site;
    }

    // ---- hand-offs (handoff.hpp) ----

    HandoffRecord* capture_here(Arena& arena) noexcept override { return handoffs_.capture(ThreadState::of(arena)); }
    void recycle(Arena* arena, HandoffRecord& record) noexcept override {
        handoffs_.recycle(arena != nullptr ? &ThreadState::of(*arena) : nullptr, record);
    }
    bool continue_at(Arena& arena, const HandoffPath& path, Continuation& saved) noexcept override {
        return handoffs_.enter(ThreadState::of(arena), path, saved);
    }
    void end_continue(Continuation& saved) noexcept override { handoffs_.leave(saved); }
    // A co-scope starts sessions as begin() does; a trace records each resumption from the co-scope
    // on into a capture of its own (handoffs.hpp), other sessions get its frame at its end, wherever
    // that is.
    void enter_suspendable(Arena& arena, Site* site, SuspendableScope& scope) noexcept override {
        ThreadState& state = ThreadState::of(arena);
        const SiteInfo* info = handoffs_.suspendable_site(state, site);
        if (info == nullptr) return;
        if ((arena.flags.load(std::memory_order_relaxed) & kSessions) != 0) return enter_watched(state, info, scope);
        handoffs_.enter_suspendable(state, info, scope);
    }
    void leave_suspendable(Arena& arena, const SuspendableScope& scope) noexcept override {
        ThreadState& state = ThreadState::of(arena);
        std::uint64_t elapsed = 0;
        if (scope.frame == nullptr && scope.trace == nullptr) return (void)handoffs_.leave_suspendable(state, scope, elapsed);
        leave_watched(state, scope);
    }
    bool resume(Arena& arena, const HandoffPath& origin, CoroutineState& coroutine, Resumption& saved) noexcept override {
        return handoffs_.resume(ThreadState::of(arena), origin, coroutine, saved);
    }
    void suspend(Resumption& saved) noexcept override { handoffs_.suspend(saved); }
    void gathered(GatherRef& ref) noexcept override {
        std::unique_ptr<Gather> gather(static_cast<Gather*>(&ref));
        try {
            if (!Handoffs::finish(*gather)) return;
            for (const auto& session : gather->sessions)
                if (deliver_trace(*session, gather->trace)) stop_session(*session);
        } catch (...) {  // out of memory while delivering: this capture is lost, the program goes on
        }
    }

    // ---- owner-only operations for the other copies (virtual, so this copy's code runs them) ----

    // Made by this copy: a session outlives the library that asked for it while a thread delivers to it.
    virtual std::shared_ptr<SessionState> make_session(SessionKind kind, const std::string& pattern, PatternSyntax syntax) {
        return sessions_.make(kind, pattern, syntax);
    }
    virtual void start_session(const std::shared_ptr<SessionState>& session) {
        if (session->kind == SessionKind::stack) read_executable_functions();  // before a call can need it
        sessions_.start(session);
        threads_.mirror();
        sessions_.notify_listeners();
    }
    virtual void stop_session(SessionState& session) {
        if (!sessions_.stop(session)) return;
        threads_.mirror();
        sessions_.notify_listeners();
    }

    // For instrumentation that patches code on demand (xray/xray.hpp): called, on the thread that started
    // or stopped a session, after the set of sessions changed; running_sessions() says what it is now.
    using Listener = SessionRegistry::Listener;
    virtual void listen(Listener listener, void* context) { sessions_.listen(listener, context); }
    virtual void unlisten(Listener listener, void* context) { sessions_.unlisten(listener, context); }
    std::vector<std::shared_ptr<const SessionState>> running_sessions() { return sessions_.running(); }
    std::vector<AnnotatedCode> annotated_code() { return sites_.annotated_code(); }

    // Records `type` thrown while the innermost open scope of this thread is the current node.
    virtual void record_throw(void* object, const std::type_info* type) noexcept {
        auto* state = static_cast<ThreadState*>(pthread_getspecific(thread_key_));
        if (state == nullptr || state->retired.load()) return;
        Arena& arena = state->arena;
        const char* file = arena.throw_file;
        const std::uint32_t line = arena.throw_line;
        arena.throw_file = nullptr;
        arena.throw_line = 0;
        // A session's callback runs inside the traced program's scopes; what it throws is tracetree's.
        if (callback_session() != nullptr || out_of_memory(object, type)) return;
        if ((arena.flags.load() & kRecording) == 0 || arena.depth == 0 || arena.cur == &state->overflow) return;
        if (state->capture_waits()) state->start_deferred_capture();
        try {
            const InternedSite* site = sites_.intern(SiteKind::thrown, type_name(type), file != nullptr ? file : "", line, nullptr);
            std::uint32_t index = arena.find(arena.cur_index, site);
            if (index == 0) index = state->current->add(arena, arena.cur_index, site);
            if (index == 0) return;
            NodeRecord& node = *arena.at(index);
            bump(node.count);
            const std::optional<std::string> message = what(object, type);
            const std::size_t max_length = arena.max_name_length.load(std::memory_order_relaxed);
            std::lock_guard<std::mutex> lock(state->mutex);
            if (message) state->current->messages[index] = message->substr(0, max_length);
            else state->current->messages.erase(index);
        } catch (...) {  // out of memory: the throw is counted as before, without its node
        }
    }

    // xray/xray.hpp: a scope whose node is no longer the innermost one cannot end in place; it is
    // forgotten, and the depth it held on the fast path is given back.
    static void forget_if_moved_past(Scope& scope) noexcept {
        if (scope.node_ == nullptr) return;
        const auto& state = ThreadState::of(*scope.arena_);
        if (state.at_innermost(scope.node_, (scope.slow_ & Scope::kDeferredCapture) != 0)) return;
        if (scope.slow_ == 0) --scope.arena_->depth;
        scope.node_ = nullptr;
    }

    // ---- snapshots and control (any copy may run these: they only read and lock) ----

    double ns_per_tick() const noexcept { return clock_.ns_per_tick(); }
    Profile profile() { return threads_.profile(); }
    std::vector<std::string> scope_names() { return sites_.match_names(); }
    void reset() { threads_.reset(); }
    void set_flag(std::uint8_t flag, bool on) { threads_.set_flag(flag, on); }
    bool enabled() { return threads_.enabled(); }
    void set_clock(ClockFunction clock) {
        clock_.set_test(clock);
        threads_.mirror();
    }
    void set_limits(const Limits& limits) { threads_.set_limits(limits); }
    Limits limits() { return threads_.limits(); }
    void start_timeline(std::size_t max_spans) { threads_.start_timeline(max_spans); }
    void stop_timeline() { threads_.stop_timeline(); }
    Timeline timeline() { return threads_.timeline(); }

    ThreadState* this_thread() noexcept {
        if (Arena* arena = tls_arena()) return &ThreadState::of(*arena);
        Arena* arena = join_thread();
        return arena != nullptr ? &ThreadState::of(*arena) : nullptr;
    }

    // TRACETREE_ADMIN as it was when the recorder was made; only the copy that made it asks (runtime()).
    const std::string& admin_setting() const { return admin_setting_; }

    RecorderInfo info() {
        RecorderInfo result;
        result.version = std::to_string(TRACETREE_VERSION_MAJOR) + "." + std::to_string(TRACETREE_VERSION_MINOR) + "." +
                         std::to_string(TRACETREE_VERSION_PATCH);
        result.module = module_;
        result.threads = threads_.live_count();
        result.nodes = chunks_.nodes.load();
        result.spare_nodes = std::uint64_t{chunks_.spare_chunks()} << kChunkBits;
        result.name_bytes = sites_.name_bytes();
        result.dropped_names = sites_.dropped_names();
        result.throw_hook = throw_hook_.empty();
        result.throw_hook_note = throw_hook_;
        result.cpu_time_source = cpu_source_name(cpu_sources().last());
        result.cpu_time_note = cpu_sources().note();
        find_anchors(static_cast<const Recorder*>(this), result);
        return result;
    }

    // Called once, by the copy whose runtime was chosen, right after its anchors hold it.
    void started() {
        // From now on every copy's slow paths run this object's virtual functions, and the thread-exit
        // and fork handlers run this copy's code: keep both modules loaded.
        pin_module(*reinterpret_cast<void* const* const*>(this)[0]);  // the vtable's first entry
        pin_module(reinterpret_cast<void*>(&install_fork_handlers));
        install_fork_handlers();
    }

private:
    static inline DynamicEntry kNoDynamicEntry{};  // the table of a thread with no run-time name: one empty slot, never written

    NodeRecord* find_or_add(Arena& arena, Site* site, const SiteInfo* info) noexcept {
        ThreadState& state = ThreadState::of(arena);
        if (state.capture_waits()) state.start_deferred_capture();
        if (!info->interned && state.current->full()) return state.enter_overflow();  // a site never seen has no node here
        if ((info = register_site(site, info)) == nullptr) return state.drop(1);
        return state.find_or_add(info);
    }

    // Whether a session of `capture` wants an invocation that took `elapsed` ticks.
    bool wanted(const Capture& capture, std::uint64_t elapsed) const noexcept {
        if (elapsed < capture.below) return false;
        const Nanos cost = to_nanos(elapsed, clock_.ns_per_tick());
        return std::any_of(capture.sessions.begin(), capture.sessions.end(), [&](const auto& session) {
            return cost >= session->min_cost && session->reserved.load(std::memory_order_relaxed) < session->limit;
        });
    }

    // `elapsed`: the root scope's ticks. The capture's tree stays with its slot, zeroed, for the next one.
    TRACETREE_DETAIL_INLINE void end_capture(ThreadState& state, std::uint64_t elapsed, bool deliverable) noexcept {
        Capture& capture = state.leave_capture();
        Tree& tree = *capture.tree;
        auto* gather = static_cast<Gather*>(capture.gather);
        capture.gather = nullptr;
        try {
            if (deliverable && wanted(capture, elapsed)) {  // cheap invocations skip building values
                const Nanos cost = to_nanos(elapsed, clock_.ns_per_tick());
                std::optional<OffCpu> off_cpu;  // first: the interval ends now, not after the values are built
                if (!clock_.is_test(std::memory_order_relaxed)) off_cpu = measure_off_cpu(state.cpu, capture, cost);
                std::vector<Node> roots;
                {
                    std::lock_guard<std::mutex> lock(state.mutex);
                    roots = to_values(tree, clock_.ns_per_tick(), &tree.messages, &tree.values);
                }
                if (!roots.empty()) {
                    Trace trace;
                    trace.start = started_at(cost);
                    trace.root = std::move(roots.front());
                    if (off_cpu) mark_off_cpu(trace.root, *off_cpu);
                    state.header(trace);
                    if (gather != nullptr) {  // delivered when the work it handed off is done
                        ForkGate::Locked lock(handoffs_.gate, gather->mutex, state.id);
                        gather->sessions = capture.sessions;
                        gather->trace = std::move(trace);
                        gather->wanted = true;
                    } else {
                        for (const auto& session : capture.sessions)
                            if (deliver_trace(*session, trace)) stop_session(*session);
                    }
                }
            }
        } catch (...) {  // out of memory while delivering: this capture is lost, the program goes on
        }
        state.fold_capture(capture);
        release(gather);
    }

    // How much of the `cost` that just ended the thread spent off CPU; none when that cannot be known.
    static std::optional<OffCpu> measure_off_cpu(const ThreadCpu& cpu, const Capture& capture, Nanos cost) noexcept {
        const std::int64_t end = monotonic_ns();
        OffCpuTime time;
        std::int64_t unmeasured = 0;  // of `cost`, before the clock was read
        if (cpu.source() == CpuSource::switches) {
            if (!cpu.off_cpu(end - cost.count(), end, time)) return std::nullopt;
        } else {
            const std::int64_t used = cpu.source() == CpuSource::thread_clock && capture.cpu_at_start >= 0 ? thread_cpu_ns() : -1;
            if (used < 0) return std::nullopt;
            // Since the capture started recording: of a capture deferred to its first child, the time
            // before it is unknown, and past 1% of the whole what was measured is only a lower bound.
            time.off_ns = (end - capture.monotonic_at_start) - (used - capture.cpu_at_start);
            unmeasured = cost.count() - (end - capture.monotonic_at_start);
        }
        OffCpu off;
        off.at_least = unmeasured * 100 > cost.count();
        off.off = Nanos(std::min<std::int64_t>(std::max<std::int64_t>(time.off_ns, 0), cost.count()));
        if (time.runnable_known) off.runnable = std::min(Nanos(std::max<std::int64_t>(time.runnable_ns, 0)), off.off);
        return off;
    }

    // The root's measured off-CPU time; below it, each call that must have been off CPU for part of its
    // total, as it ran longer than the root ran on CPU.
    static void mark_off_cpu(Node& root, const OffCpu& off) {
        root.off_cpu = off;
        const Nanos on = root.total - off.off;
        std::vector<Node*> todo{&root};
        while (!todo.empty()) {
            Node* node = todo.back();
            todo.pop_back();
            for (Node& child : node->children) {
                if (child.kind != NodeKind::call) continue;
                if (child.total > on) child.off_cpu = OffCpu{child.total - on, std::nullopt, true};
                todo.push_back(&child);
            }
        }
    }

    TRACETREE_DETAIL_COLD void enter_watched(ThreadState& state, const SiteInfo* info, SuspendableScope& scope) noexcept {
        std::uint32_t epoch = 0, captured = 0;
        const std::uint32_t framed = watching(state, info, epoch, captured);
        // Traced only where its coroutine's own code runs (ThreadState::coroutine_top).
        if (captured != 0 && state.arena.cur == state.coroutine_top) handoffs_.trace_suspendable(state, scope);
        std::unique_ptr<CoScopeFrame> co;
        if (framed != 0) {
            try {  // made before entering when it wants values: entering makes it its place's watched one
                co = std::make_unique<CoScopeFrame>();
                if (state.watches(framed)) {
                    co->frame.values.reserve(kMaxValuesPerScope);
                    scope.frame = co.get();
                }
            } catch (...) {  // out of memory: not watched
                co.reset();
            }
        }
        if (!handoffs_.enter_suspendable(state, info, scope) || !co) {  // not entered: no place holds it
            scope.frame = nullptr;
            return;
        }
        try {
            const char here = 0;  // the machine frames at or below it are tracetree's (stack.hpp)
            state.fill_frame(co->frame, info, state.arena.cur, framed, reinterpret_cast<std::uintptr_t>(&here));
        } catch (...) {  // out of memory: its end goes to no session (its place may hold the frame already)
            co->frame.sessions.clear();
        }
        scope.frame = co.release();
        handoffs_.route_opened(state, scope);
    }

    TRACETREE_DETAIL_COLD void leave_watched(ThreadState& state, const SuspendableScope& scope) noexcept {
        auto* co = static_cast<CoScopeFrame*>(scope.frame);
        std::uint64_t elapsed = 0;
        if (scope.trace != nullptr) handoffs_.untrace(state, scope);
        if (scope.watched != 0) handoffs_.unwatch_values(state, scope);  // if not, its place keeps the frame too
        if (handoffs_.leave_suspendable(state, scope, elapsed) && co != nullptr)
            deliver_frame(state, co->frame, elapsed, *state.arena.uncaught > scope.uncaught);
        release_frame(co);
        release(scope.trace);  // last: it may deliver the trace
    }
    void let_go_frame(void* frame) noexcept override { release_frame(static_cast<CoScopeFrame*>(frame)); }

    // The sessions of this epoch watching `info` on this thread: in `captured` the traces that start a
    // capture of it (its slot prepared; an invocation nested in one a trace already captures is part of
    // that capture), returned the stack, watch and monitor sessions.
    TRACETREE_DETAIL_INLINE std::uint32_t watching(ThreadState& state, const SiteInfo* info, std::uint32_t& epoch, std::uint32_t& captured) noexcept {
        const std::uint32_t mask = sessions_.watch_mask(*info, epoch);
        if (mask == 0 || !state.current_sessions(sessions_, epoch)) return 0;
        captured = mask & state.capture_mask & ~state.capturing;
        if (captured != 0 && !state.prepare_capture(info, captured, clock_)) captured = 0;
        return mask & ~state.capture_mask;
    }

    void pop_frame(ThreadState& state, std::uint64_t elapsed, bool threw) noexcept {
        deliver_frame(state, state.pop_frame(), elapsed, threw);
    }
    void deliver_frame(ThreadState& state, Frame& frame, std::uint64_t elapsed, bool threw) noexcept {
        const Nanos cost = to_nanos(elapsed, clock_.ns_per_tick());
        const auto header = [&](auto& value) { state.header(value); };
        for (const auto& session : frame.sessions) {
            try {
                bool limit_reached = false;
                switch (session->kind) {
                case SessionKind::stack:
                    limit_reached = deliver_invocation<StackTrace>(*session, cost, threw, header, [&](StackTrace& stack) {
                        std::size_t on_thread = 0;  // the scopes before a hand-off's path (shadows) begins
                        std::vector<bool> of_function;
                        for (const SiteInfo* site : frame.chain) {
                            const InternedSite& s = interned(site);
                            if (s.continues == nullptr && on_thread == stack.frames.size()) ++on_thread;
                            stack.frames.push_back(StackFrame{s.name, s.file, s.line});
                            of_function.push_back(s.kind == SiteKind::function);
                        }
                        stack.callers = name_stack(frame.pcs, stack.frames, of_function, on_thread);
                    });
                    break;
                case SessionKind::watch:
                    limit_reached = deliver_invocation<WatchEvent>(*session, cost, threw, header, [&](WatchEvent& event) {
                        const InternedSite& site = interned(frame.site);
                        event.scope = site.name;
                        event.file = site.file;
                        event.line = site.line;
                        const auto& names = session->value_names;
                        for (const auto& value : frame.values)
                            if (names.empty() || std::find(names.begin(), names.end(), value.first) != names.end())
                                event.values.push_back(value);
                    });
                    break;
                case SessionKind::monitor: count_call(*session, frame.site, elapsed, threw); break;
                default: break;
                }
                if (limit_reached) stop_session(*session);
            } catch (...) {  // out of memory while delivering: this invocation is lost, the program goes on
            }
        }
        frame.values.clear();
    }

    // A macro's site, interned at its first call. Instrumentation that patches code (xray/) reads what
    // an annotated function calls, so that a trace rooted at its scope, or passing through it, patches
    // its callees: the function holding the scope is found then, once per site, by unwinding to the
    // first frame that is not tracetree's. A running trace hears of it at once, before the scope's
    // body runs, and patches in time for this very call.
    const SiteInfo* register_site(Site* site, const SiteInfo* info) noexcept {
        const bool first_call = !info->interned;
        info = sites_.registered(site, info);
        if (info != nullptr && first_call && t_scope_entry_sp == 0 && sessions_.listened()) note_code(info);
        return info;
    }
    TRACETREE_DETAIL_COLD void note_code(const SiteInfo* info) noexcept {
        try {
            const std::uintptr_t at = code_outside_tracetree();
            if (at == 0) return;
            interned(info).code.store(at, std::memory_order_relaxed);
            if (sessions_.capturing()) sessions_.notify_listeners();
        } catch (...) {  // out of memory: the trace shows the scope without the instrumented calls below it
        }
    }

    // fork() copies only the calling thread: a lock held by another thread at that moment would never
    // be released in the child. So the locks are taken around fork(), and the child forgets the other
    // threads.
    static void install_fork_handlers() noexcept {
        pthread_atfork(
            [] { static_cast<RuntimeImpl*>(find_recorder())->lock_for_fork(); },
            [] { static_cast<RuntimeImpl*>(find_recorder())->unlock_after_fork(false); },
            [] { static_cast<RuntimeImpl*>(find_recorder())->unlock_after_fork(true); });
    }
    // Lock order as everywhere: the hand-offs' gate, listeners, sessions, threads, this thread's own,
    // sites, chunks; the machine stack's walks and names first (a walk takes none of the others).
    void lock_for_fork() noexcept {
        stack_locks().walking.lock();
        stack_locks().naming.lock();
        handoffs_.gate.close();
        sessions_.lock();
        threads_.lock();
        if (auto* self = static_cast<ThreadState*>(pthread_getspecific(thread_key_))) self->mutex.lock();
        sites_.lock();
        chunks_.lock();
    }
    void unlock_after_fork(bool child) noexcept {
        auto* self = static_cast<ThreadState*>(pthread_getspecific(thread_key_));
        chunks_.unlock();
        sites_.unlock();
        if (self != nullptr) self->mutex.unlock();
        if (child && self != nullptr) {
            self->cpu.close();  // the parent thread's switches: opened again when needed
            self->os_id = current_os_thread_id();  // the child's one thread is not the one that forked
        }
        threads_.unlock_after_fork(child, self);
        sessions_.unlock_after_fork(child);
        if (child) handoffs_.forked();
        handoffs_.gate.open(child);
        sessions_.forget_held();
        stack_locks().naming.unlock();
        // glibc's rwlock tells a writer's unlock by the thread id, which differs in the child: made anew.
        if (child) new (&stack_locks().walking) std::shared_mutex();
        else stack_locks().walking.unlock();
    }

    Clock clock_;
    SiteTable sites_;
    ChunkPool chunks_;
    SessionRegistry sessions_;
    Threads threads_{clock_, sessions_, sites_, chunks_};
    Handoffs handoffs_{clock_, sites_, chunks_};
    pthread_key_t thread_key_{};
    const std::string throw_hook_;  // why this process's throws are not recorded; empty: they are
    const std::string module_;      // the executable or library whose copy made this runtime
    // TRACETREE_ADMIN when the recorder started, the only time it is read (runtime() starts the listener).
    const std::string admin_setting_;

    // The library's one read of the process environment, documented (docs/admin.md, TRACETREE_ADMIN):
    // in the constructor, once, when the recorder starts; never on a scope's path, never written.
    static std::string environment(const char* name) {
        const char* value = std::getenv(name);
        return value != nullptr ? value : "";
    }
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_RUNTIME_HPP
