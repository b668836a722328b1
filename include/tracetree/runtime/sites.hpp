// tracetree sites: every call site the recorder has seen, interned once and never freed.
// SPDX-License-Identifier: MIT
//
// Nodes point at interned sites rather than at a macro's static record, so names outlive a library
// that is unloaded, and a reloaded library's scopes land on their old nodes. Run-time names
// (TRACETREE_SCOPE_DYNAMIC) are interned here too, within a byte budget.
#ifndef TRACETREE_RUNTIME_SITES_HPP
#define TRACETREE_RUNTIME_SITES_HPP

#include "../core/recorder.hpp"
#include "../values.hpp"  // Limits: the default budget
#include "instrumentation.hpp"  // AnnotatedCode

#include <atomic>
#include <cstdint>
#include <memory>         // sites are held by unique_ptr: their addresses never change
#include <mutex>          // the table's lock (never on the hot path)
#include <string>
#include <unordered_map>  // sites by content

TRACETREE_BEGIN_NAMESPACE
namespace detail {

struct MonitorCells;  // session_registry.hpp

struct InternedSite : SiteInfo {
    std::atomic<MonitorCells*> monitors{nullptr};  // made when a monitor first watches the site
    SiteKind kind = SiteKind::scope;
    std::string name;        // as shown: "ns::Class::method()", the scope's text, the run-time name, the type
    std::string match_name;  // what trace patterns see: the name without "()"
    std::string file;
    std::uint32_t line = 0;
    // A hand-off's path in a worker's tree has nodes of their own (their calls were counted where they
    // were made): the shadow of a site points at it, and a site finds its shadow here once made.
    const InternedSite* continues = nullptr;
    mutable std::atomic<const InternedSite*> shadow{nullptr};
    // An annotated scope: an address inside the function that holds it, found at its first call while
    // instrumentation listened (RuntimeImpl::note_code); 0 otherwise.
    mutable std::atomic<std::uintptr_t> code{0};
};
inline const InternedSite& interned(const SiteInfo* info) noexcept { return *static_cast<const InternedSite*>(info); }

// "R ns::C<T>::f(A) const [with T = int]" -> "ns::C::f": drops the return type, parameters,
// qualifiers and template arguments, keeps namespaces and classes.
inline std::string function_name(const char* signature) {
    std::string s = signature;
    if (const std::size_t with = s.find(" [with "); with != std::string::npos) s.erase(with);
    int depth = 0;
    std::size_t params = std::string::npos;
    for (std::size_t i = s.size(); i-- > 0;) {  // the parameter list: the last top-level (...)
        if (s[i] == ')') ++depth;
        if (s[i] == '(' && --depth == 0) {
            params = i;
            break;
        }
    }
    if (params != std::string::npos) s.erase(params);
    std::size_t begin = 0;
    depth = 0;
    for (std::size_t i = 0; i < s.size(); ++i) {  // the name starts after the last top-level space
        const char c = s[i];
        if (c == '<' || c == '(') ++depth;
        if ((c == '>' || c == ')') && depth > 0) --depth;
        if (c == ' ' && depth == 0 && s.compare(i + 1 > 8 ? i - 8 : 0, 8, "operator") != 0) begin = i + 1;
    }
    std::string name;
    depth = 0;
    const std::size_t op = s.find("operator", begin);
    for (std::size_t i = begin; i < s.size(); ++i) {
        const char c = s[i];
        const bool in_operator = op != std::string::npos && i >= op + 8;  // operator<, operator() stay
        if (!in_operator && c == '<') ++depth;
        else if (!in_operator && c == '>' && depth > 0) --depth;
        else if (depth == 0) name += c;
    }
    for (std::size_t at = name.find("{anonymous}"); at != std::string::npos; at = name.find("{anonymous}"))
        name.replace(at, 11, "(anonymous namespace)");  // g++ and clang++ spell it differently
    if (name.empty()) name = signature;
    return name;
}

class SiteTable {
public:
    // Interned by content and, for a macro's site, by the site's address: each template instantiation
    // is its own call site, a library loaded again at the same address finds its old sites, and another
    // library loaded there does not (its content differs).
    const InternedSite* intern(SiteKind kind, const std::string& name, const char* file, std::uint32_t line,
                               const void* site) {
        std::string key(1, static_cast<char>('a' + static_cast<int>(kind)));
        key.append(reinterpret_cast<const char*>(&site), sizeof site)
            .append(reinterpret_cast<const char*>(&line), sizeof line)
            .append(file)
            .append(1, '\0')
            .append(name);
        std::lock_guard<std::mutex> lock(mutex_);
        auto& slot = sites_[key];
        if (!slot) {
            auto made = std::make_unique<InternedSite>();
            made->kind = kind;
            made->name = kind == SiteKind::function ? name + "()" : name;
            made->match_name = name;
            made->file = file;
            made->line = line;
            made->interned = true;
            slot = std::move(made);
        }
        return slot.get();
    }

    // The interned info of a macro's site (stored in the site for its next calls); null when out of memory.
    const SiteInfo* registered(Site* site, const SiteInfo* info) noexcept {
        return info->interned ? info : intern_site(site);
    }

    // The run-time name `name` of the macro site `origin`. A name never seen is kept only within the
    // byte budget and when `room` (a name never seen needs a new node); null when it is not, counted
    // as a dropped name when there was room.
    const InternedSite* dynamic(const SiteInfo* origin, const char* name, std::size_t size, bool room) noexcept {
        const InternedSite* site = nullptr;
        try {
            std::string key(1, 'd');
            key.append(reinterpret_cast<const char*>(&origin), sizeof origin).append(name, size);
            std::lock_guard<std::mutex> lock(mutex_);
            const auto found = sites_.find(key);
            if (found != sites_.end()) {
                site = found->second.get();
            } else if (name_bytes_ + held_bytes(key, size, interned(origin).file) <= max_name_bytes_.load() && room) {
                auto made = std::make_unique<InternedSite>();
                made->kind = SiteKind::dynamic;
                made->name.assign(name, size);
                made->match_name = made->name;
                made->file = interned(origin).file;
                made->line = interned(origin).line;
                made->origin = origin;
                made->SiteInfo::name = made->name.data();
                made->name_size = static_cast<std::uint32_t>(size);
                made->interned = true;
                const std::uint64_t bytes = held_bytes(key, size, made->file);
                const InternedSite* kept = made.get();
                sites_.emplace(std::move(key), std::move(made));  // may throw: then `made` is freed
                site = kept;
                name_bytes_ += bytes;
            }
        } catch (...) {  // out of memory: as over the budget
        }
        if (site == nullptr && room) dropped_names_.fetch_add(1, std::memory_order_relaxed);
        return site;
    }

    // The shadow of `info` (SiteInfo: a hand-off path's node); null when out of memory.
    const InternedSite* continued(const SiteInfo* info) noexcept {
        if (const InternedSite* known = interned(info).shadow.load(std::memory_order_acquire)) return known;
        return make_shadow(info);
    }
    // Once per site: out of line, so that a hand-off's path does not carry it.
    TRACETREE_DETAIL_COLD const InternedSite* make_shadow(const SiteInfo* info) noexcept {
        const InternedSite& of = interned(info);
        try {
            std::string key(1, 'c');
            key.append(reinterpret_cast<const char*>(&info), sizeof info);
            std::lock_guard<std::mutex> lock(mutex_);
            auto& slot = sites_[key];
            if (!slot) {
                auto made = std::make_unique<InternedSite>();
                made->kind = of.kind;
                made->name = of.name;
                made->match_name = of.match_name;
                made->file = of.file;
                made->line = of.line;
                made->origin = of.origin;
                made->SiteInfo::name = made->name.data();
                made->name_size = of.name_size;
                made->continues = &of;
                made->interned = true;
                slot = std::move(made);
                of.shadow.store(slot.get(), std::memory_order_release);
            }
            return slot.get();
        } catch (...) {
            return nullptr;
        }
    }

    void set_max_name_bytes(std::uint64_t bytes) noexcept { max_name_bytes_.store(bytes); }
    std::uint64_t name_bytes() {
        std::lock_guard<std::mutex> lock(mutex_);
        return name_bytes_;
    }
    std::uint64_t dropped_names() const noexcept { return dropped_names_.load(); }
    // What patterns can match among the sites seen so far (thrown types left out).
    std::vector<std::string> match_names() {
        std::vector<std::string> names;
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& site : sites_)
            if (site.second->kind != SiteKind::thrown) names.push_back(site.second->match_name);
        return names;
    }

    // The annotated sites seen so far whose code is known (instrumentation.hpp).
    std::vector<AnnotatedCode> annotated_code() {
        std::vector<AnnotatedCode> code;
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& site : sites_) {
            const std::uintptr_t at = site.second->code.load(std::memory_order_relaxed);
            if (at != 0) code.push_back(AnnotatedCode{site.second->match_name, at});
        }
        return code;
    }

    // fork(): see RuntimeImpl::lock_for_fork for the order.
    void lock() noexcept { mutex_.lock(); }
    void unlock() noexcept { mutex_.unlock(); }

private:
    TRACETREE_DETAIL_COLD const SiteInfo* intern_site(Site* site) noexcept {
        try {
            const SiteInfo* made = intern(site->kind, site->kind == SiteKind::function ? function_name(site->text) : site->text,
                                          site->file, site->line, site);
            site->info.store(made, std::memory_order_release);
            return made;
        } catch (...) {  // out of memory: not recorded
            return nullptr;
        }
    }

    // What an interned run-time name holds: its key, its two names, its file and the site itself.
    static std::uint64_t held_bytes(const std::string& key, std::size_t size, const std::string& file) noexcept {
        return key.size() + 2 * size + file.size() + sizeof(InternedSite);
    }

    std::mutex mutex_;
    std::unordered_map<std::string, std::unique_ptr<InternedSite>> sites_;
    std::uint64_t name_bytes_ = 0;  // held by run-time names, against max_name_bytes_
    std::atomic<std::uint64_t> max_name_bytes_{Limits{}.max_name_bytes};
    std::atomic<std::uint64_t> dropped_names_{0};
};

}  // namespace detail
TRACETREE_END_NAMESPACE

#endif  // TRACETREE_RUNTIME_SITES_HPP
