#include "tomcat.hpp"

#include <tracetree/tracetree.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace demo {

std::size_t FileRangeSource::read(char* out, std::size_t max) {
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(max, end_ - at_));
    if (want == 0) return 0;
    for (;;) {
        const ssize_t got = ::pread(fd_, out, want, static_cast<off_t>(at_));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw zip::Error(std::string("zip: read failed: ") + std::strerror(errno));
        if (got == 0) throw zip::Error("zip: the jar file is shorter than when it was opened");
        at_ += static_cast<std::uint64_t>(got);
        return static_cast<std::size_t>(got);
    }
}

// ---- TomcatJarInputStream ---------------------------------------------------------------------

std::optional<JarEntry> TomcatJarInputStream::getNextJarEntry() {
    TRACETREE_FUNCTION();
    closeEntry();
    const std::optional<zip::LocalEntry> header = in_.read_header();
    if (!header) return std::nullopt;
    JarEntry entry = createZipEntry(header->name);
    entry.size = header->size;
    entry.size_known = !header->has_descriptor();
    return entry;
}

void TomcatJarInputStream::closeEntry() {
    TRACETREE_FUNCTION();
    in_.close_entry();  // the cost of the walk: inflating and checking everything skipped
}

JarEntry TomcatJarInputStream::createZipEntry(const std::string& name) {
    TRACETREE_FUNCTION();
    TRACETREE_WATCH("name", name);  // Arthas: watch TomcatJarInputStream createZipEntry params[0]
    JarEntry entry;
    entry.name = name;
    entry.directory = !name.empty() && name.back() == '/';
    return entry;
}

// ---- JarWarResourceSet ------------------------------------------------------------------------

JarWarResourceSet::JarWarResourceSet(std::string war_path, std::string archive_path, std::uint64_t offset,
                                     std::uint64_t length)
    : war_path_(std::move(war_path)), archive_path_(std::move(archive_path)), offset_(offset), length_(length) {}

JarWarResourceSet::~JarWarResourceSet() {
    if (archive_fd_ >= 0) ::close(archive_fd_);
}

int JarWarResourceSet::openJarFile() {
    if (archive_fd_ < 0) {
        archive_fd_ = ::open(war_path_.c_str(), O_RDONLY | O_CLOEXEC);
        if (archive_fd_ < 0) throw std::runtime_error("cannot open " + war_path_ + ": " + std::strerror(errno));
    }
    ++archive_use_count_;
    return archive_fd_;
}

void JarWarResourceSet::closeJarFile() { --archive_use_count_; }

std::shared_ptr<const JarWarResourceSet::Entries> JarWarResourceSet::getArchiveEntries() {
    TRACETREE_FUNCTION();
    std::lock_guard<std::mutex> lock(archive_lock_);
    if (!archive_entries_) {
        struct Use {  // openJarFile .. closeJarFile, also when the walk throws
            JarWarResourceSet& set;
            int fd;
            ~Use() { set.closeJarFile(); }
        } use{*this, openJarFile()};
        auto entries = std::make_shared<Entries>();
        FileRangeSource source(use.fd, offset_, length_);
        TomcatJarInputStream jar(source);
        while (std::optional<JarEntry> entry = jar.getNextJarEntry()) (*entries)[entry->name] = *entry;
        archive_entries_ = std::move(entries);
        ++walks_;
    }
    return archive_entries_;
}

WebResource JarWarResourceSet::getResource(const std::string& path) {
    TRACETREE_FUNCTION();
    WebResource resource;
    resource.path = path;
    const std::string in_jar = internal_path_ + path;  // path starts with '/'
    const std::shared_ptr<const Entries> entries = getArchiveEntries();
    auto found = entries->find(in_jar);
    if (found == entries->end() && in_jar.back() != '/') found = entries->find(in_jar + '/');
    if (found != entries->end()) {
        resource.exists = true;
        resource.directory = found->second.directory;
        resource.size = found->second.size;
        resource.set = this;
        resource.entry = found->first;
    }
    return resource;
}

std::string JarWarResourceSet::read(const WebResource& resource) {
    TRACETREE_FUNCTION();
    const std::unique_ptr<JarEntryStream> stream = open(resource);
    std::string data;
    char chunk[16384];
    for (std::size_t got; (got = stream->read(chunk, sizeof chunk)) != 0;) data.append(chunk, got);
    return data;
}

std::unique_ptr<JarEntryStream> JarWarResourceSet::open(const WebResource& resource) {
    TRACETREE_FUNCTION();
    const int fd = ::open(war_path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open " + war_path_ + ": " + std::strerror(errno));
    std::unique_ptr<JarEntryStream> stream;
    try {
        stream = std::make_unique<JarEntryStream>(fd, offset_, length_);
    } catch (...) {
        ::close(fd);
        throw;
    }
    // No random access in a nested jar: walk to the entry.
    while (std::optional<JarEntry> entry = stream->jar_.getNextJarEntry()) {
        if (entry->name != resource.entry) continue;
        stream->size_ = entry->size;
        if (!entry->size_known) {
            std::string& whole = stream->whole_.emplace();
            char chunk[16384];
            for (std::size_t got; (got = stream->jar_.read(chunk, sizeof chunk)) != 0;) whole.append(chunk, got);
            stream->size_ = whole.size();
        }
        return stream;
    }
    throw std::runtime_error(resource.entry + " is no longer in " + archive_path_);
}

JarEntryStream::JarEntryStream(int fd, std::uint64_t offset, std::uint64_t length)
    : fd_(fd), source_(fd, offset, length), jar_(source_) {}

JarEntryStream::~JarEntryStream() { ::close(fd_); }

std::size_t JarEntryStream::read(char* out, std::size_t max) {
    if (!whole_) return jar_.read(out, max);
    const std::size_t count = std::min(max, whole_->size() - whole_at_);
    std::memcpy(out, whole_->data() + whole_at_, count);
    whole_at_ += count;
    return count;
}

void JarWarResourceSet::gc() {
    TRACETREE_FUNCTION();
    std::lock_guard<std::mutex> lock(archive_lock_);
    if (archive_fd_ >= 0 && archive_use_count_ == 0) {
        ::close(archive_fd_);
        archive_fd_ = -1;
        archive_entries_.reset();
    }
}

// ---- Cache ------------------------------------------------------------------------------------

Cache::Cache(StandardRoot& root, std::chrono::milliseconds ttl, SteadyClock clock)
    : root_(root), ttl_(ttl), clock_(std::move(clock)) {}

WebResource Cache::getResource(const std::string& path) {
    TRACETREE_FUNCTION();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        const auto found = entries_.find(path);
        if (found != entries_.end() && clock_() < found->second.next_check) return found->second.resource;
    }
    // Missing or older than the TTL: ask the resource sets again. Found or not, the answer is cached.
    WebResource resource = root_.getResourceInternal(path);
    const auto now = clock_();
    std::lock_guard<std::mutex> lock(mutex_);
    if (entries_.size() >= kMaxEntries) {
        for (auto it = entries_.begin(); it != entries_.end();)
            it = it->second.next_check <= now ? entries_.erase(it) : std::next(it);
    }
    if (entries_.size() < kMaxEntries || entries_.count(path) != 0) entries_[path] = {resource, now + ttl_};
    return resource;
}

void Cache::backgroundProcess() {
    TRACETREE_FUNCTION();
    const auto now = clock_();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) it = it->second.next_check <= now ? entries_.erase(it) : std::next(it);
}

// ---- StandardRoot -----------------------------------------------------------------------------

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open application jar " + path + ": " + std::strerror(errno));
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    if (size < 0 || size > (std::streamoff(1) << 31))
        throw std::runtime_error("application jar " + path + " is not a regular file under 2 GiB");
    in.seekg(0);
    std::string bytes(static_cast<std::size_t>(size), '\0');
    if (!in.read(bytes.data(), size)) throw std::runtime_error("cannot read application jar " + path);
    return bytes;
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

}  // namespace

StandardRoot::StandardRoot(const std::string& war_path, RootOptions options) {
    if (!options.clock) options.clock = [] { return std::chrono::steady_clock::now(); };
    cache_ = std::make_unique<Cache>(*this, options.cache_ttl, options.clock);
    const std::string bytes = read_file(war_path);
    std::string where = "application jar " + war_path;
    try {
        const zip::Archive war = zip::Archive::parse(bytes);
        for (const zip::Entry& entry : war.entries()) {
            if (!starts_with(entry.name, "BOOT-INF/lib/") || entry.name.size() < 17 ||
                entry.name.compare(entry.name.size() - 4, 4, ".jar") != 0)
                continue;
            where = "nested jar " + entry.name + " in " + war_path;
            if (entry.method != static_cast<std::uint16_t>(zip::Method::stored))
                throw zip::Error("it is compressed; Spring Boot needs nested jars stored");
            const std::string_view nested = war.raw_data(entry);
            const zip::Archive jar = zip::Archive::parse(nested);
            ++nested_jars_;
            bool has_resources = false;
            for (const zip::Entry& inner : jar.entries())
                has_resources = has_resources || starts_with(inner.name, "META-INF/resources/");
            if (!has_resources) continue;
            // Served from: check every entry once now, so that a damaged jar fails here, not later.
            for (const zip::Entry& inner : jar.entries()) jar.read(inner);
            sets_.push_back(std::make_unique<JarWarResourceSet>(
                war_path, entry.name, static_cast<std::uint64_t>(nested.data() - bytes.data()), nested.size()));
        }
    } catch (const zip::Error& e) {
        throw std::runtime_error(where + " is corrupt: " + e.what());
    }
    if (sets_.empty()) throw std::runtime_error("application jar " + war_path + " has no jar with META-INF/resources/");
}

WebResource StandardRoot::getResource(const std::string& path) {
    TRACETREE_FUNCTION();
    if (path.empty() || path.front() != '/') throw std::invalid_argument("resource path must start with '/'");
    return cache_->getResource(path);
}

WebResource StandardRoot::getResourceInternal(const std::string& path) {
    TRACETREE_FUNCTION();
    for (const auto& set : sets_) {
        WebResource resource = set->getResource(path);
        if (resource.exists) return resource;
    }
    WebResource missing;
    missing.path = path;
    return missing;
}

std::string StandardRoot::read(const WebResource& resource) {
    if (resource.set == nullptr) throw std::invalid_argument("no such resource: " + resource.path);
    return resource.set->read(resource);
}

std::unique_ptr<JarEntryStream> StandardRoot::open(const WebResource& resource) {
    if (resource.set == nullptr) throw std::invalid_argument("no such resource: " + resource.path);
    return resource.set->open(resource);
}

void StandardRoot::backgroundProcess() {
    TRACETREE_FUNCTION();
    cache_->backgroundProcess();
    for (const auto& set : sets_) set->gc();
}

std::uint64_t StandardRoot::walks() const {
    std::uint64_t total = 0;
    for (const auto& set : sets_) total += set->walks();
    return total;
}

// ---- Mapper -----------------------------------------------------------------------------------

void Mapper::map(const std::string& host, const std::string& uri, MappingData& mapping) {
    TRACETREE_FUNCTION();
    static_cast<void>(host);  // one host, one context: the ROOT context of "localhost"
    internalMap(uri, mapping);
}

void Mapper::internalMap(const std::string& uri, MappingData& mapping) {
    TRACETREE_FUNCTION();
    internalMapWrapper(uri, mapping);
}

void Mapper::internalMapWrapper(const std::string& path, MappingData& mapping) {
    TRACETREE_FUNCTION();
    // Rules 1 to 3 (exact, prefix and extension servlet mappings): the application declares none.
    // Rule 4: welcome files, for paths naming a directory.
    if (path.back() == '/') {
        for (const std::string& welcome : welcome_files_) {
            const WebResource file = resources_.getResource(path + welcome);
            if (file.exists && !file.directory) {
                mapping.wrapper = "dispatcherServlet";
                mapping.wrapper_path = path + welcome;
                return;
            }
        }
    }
    // Rule 7: the default servlet, which Spring's DispatcherServlet is (mapped to "/").
    mapping.wrapper = "dispatcherServlet";
    mapping.wrapper_path = path;
    if (path.back() == '/') return;
    if (mode_ == Mode::buggy) {
        // Tomcat 8.5.31: the resource is looked up first and the answer is thrown away unless the
        // (off by default) directory redirect is on. For /send that is a miss through every jar.
        const WebResource file = resources_.getResource(path);
        if (file.exists && file.directory && mapper_directory_redirect_enabled_) mapping.redirect = path + '/';
    } else if (mapper_directory_redirect_enabled_) {
        // BZ 62968 (8.5.37, 9.0.14): check the flag first, so no lookup happens when it is off.
        const WebResource file = resources_.getResource(path);
        if (file.exists && file.directory) mapping.redirect = path + '/';
    }
}

}  // namespace demo
