// The parts of embedded Tomcat 8.5 that BZ 62968 goes through, named after the Java classes so that a
// trace reads like the Arthas one: WebResourceRoot (StandardRoot) with its Cache, a JarWarResourceSet
// per nested jar that has META-INF/resources, and the Mapper whose rule 7 asked for a resource it did
// not need. Each method records a tracetree scope.
#ifndef DEMO_TOMCAT_HPP
#define DEMO_TOMCAT_HPP

#include "zip.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace demo {

enum class Mode { buggy, fixed };  // Tomcat 8.5.31, or 8.5.37+ with the BZ 62968 fix
using SteadyClock = std::function<std::chrono::steady_clock::time_point()>;

struct JarEntry {
    std::string name;
    std::uint64_t size = 0;
    bool size_known = true;  // false: a data descriptor after the contents gives it (size is 0 until read)
    bool directory = false;
};

class JarWarResourceSet;

struct WebResource {
    std::string path;  // as asked for, e.g. "/send"
    bool exists = false;
    bool directory = false;
    std::uint64_t size = 0;
    JarWarResourceSet* set = nullptr;  // where it was found
    std::string entry;                 // its name inside that set's jar
};

// Reads a byte range of a file through pread(), in the small steps a JDK InputStream would take.
class FileRangeSource final : public zip::ByteSource {
public:
    FileRangeSource(int fd, std::uint64_t offset, std::uint64_t length) : fd_(fd), at_(offset), end_(offset + length) {}
    std::size_t read(char* out, std::size_t max) override;

private:
    int fd_;
    std::uint64_t at_, end_;
};

// org.apache.catalina.webresources.TomcatJarInputStream (a java.util.jar.JarInputStream).
class TomcatJarInputStream {
public:
    explicit TomcatJarInputStream(zip::ByteSource& source) : in_(source) {}
    // Drains the previous entry (inflate + CRC), reads the next local header. Nothing at the end.
    std::optional<JarEntry> getNextJarEntry();
    std::size_t read(char* out, std::size_t max) { return in_.read(out, max); }

private:
    void closeEntry();
    JarEntry createZipEntry(const std::string& name);
    zip::ZipInputStream in_;
};

// A resource's contents as a stream: the war stays open and the entry is inflated as the reader asks,
// so that a large file (the 5.6 MB source map) is never held whole while a client downloads it. An
// entry whose local header leaves its size to a data descriptor is read whole on opening instead, so
// that size() is known before the first byte goes out.
class JarEntryStream final : public zip::ByteSource {
public:
    JarEntryStream(int fd, std::uint64_t offset, std::uint64_t length);  // takes the descriptor
    ~JarEntryStream() override;
    JarEntryStream(const JarEntryStream&) = delete;
    JarEntryStream& operator=(const JarEntryStream&) = delete;

    std::uint64_t size() const { return size_; }
    std::size_t read(char* out, std::size_t max) override;  // 0 at the end; zip::Error when damaged

private:
    friend class JarWarResourceSet;
    int fd_;
    FileRangeSource source_;
    TomcatJarInputStream jar_;  // positioned at the entry by JarWarResourceSet::open
    std::uint64_t size_ = 0;
    std::optional<std::string> whole_;  // the entry, when its local header did not give its size
    std::size_t whole_at_ = 0;
};

// A jar inside the application jar, mounted at "/" through its META-INF/resources directory.
// Nested jars have no random access: the entry map is built by walking the whole jar, and is kept
// only until the next gc() finds the archive unused.
class JarWarResourceSet {
public:
    JarWarResourceSet(std::string war_path, std::string archive_path, std::uint64_t offset, std::uint64_t length);
    ~JarWarResourceSet();
    JarWarResourceSet(const JarWarResourceSet&) = delete;
    JarWarResourceSet& operator=(const JarWarResourceSet&) = delete;

    WebResource getResource(const std::string& path);
    std::string read(const WebResource& resource);  // the resource's contents (walks to the entry)
    std::unique_ptr<JarEntryStream> open(const WebResource& resource);  // the same, as a stream
    void gc();                                      // drops the entry map when the archive is unused

    const std::string& archive_path() const { return archive_path_; }
    std::uint64_t walks() const { return walks_.load(); }  // times the entry map was built

private:
    using Entries = std::unordered_map<std::string, JarEntry>;
    std::shared_ptr<const Entries> getArchiveEntries();
    int openJarFile();  // archiveLock held
    void closeJarFile();

    const std::string war_path_, archive_path_;
    const std::uint64_t offset_, length_;  // of the nested jar's bytes inside the war
    const std::string internal_path_ = "META-INF/resources";
    std::mutex archive_lock_;
    int archive_fd_ = -1;          // the open war ("archive" in Tomcat)
    int archive_use_count_ = 0;
    std::shared_ptr<const Entries> archive_entries_;
    std::atomic<std::uint64_t> walks_{0};
};

class StandardRoot;

// org.apache.catalina.webresources.Cache: one entry per path, found or not, trusted for `ttl`.
class Cache {
public:
    Cache(StandardRoot& root, std::chrono::milliseconds ttl, SteadyClock clock);
    WebResource getResource(const std::string& path);
    void backgroundProcess();  // evicts expired entries

private:
    struct CachedResource {
        WebResource resource;
        std::chrono::steady_clock::time_point next_check;
    };
    StandardRoot& root_;
    const std::chrono::milliseconds ttl_;
    SteadyClock clock_;
    std::mutex mutex_;
    std::unordered_map<std::string, CachedResource> entries_;
    static constexpr std::size_t kMaxEntries = 10000;  // paths come from clients: bound the memory
};

struct RootOptions {
    std::chrono::milliseconds cache_ttl{5000};  // Tomcat's cacheTtl
    SteadyClock clock;                          // empty: steady_clock::now
};

// org.apache.catalina.webresources.StandardRoot over a Spring Boot fat jar on disk.
class StandardRoot {
public:
    // Opens the application jar and registers a JarWarResourceSet for each BOOT-INF/lib/*.jar that
    // has META-INF/resources/. Throws std::runtime_error (naming the jar and the problem) when the jar
    // or a nested jar is not a readable archive.
    StandardRoot(const std::string& war_path, RootOptions options);

    WebResource getResource(const std::string& path);  // through the cache
    WebResource getResourceInternal(const std::string& path);
    std::string read(const WebResource& resource);
    std::unique_ptr<JarEntryStream> open(const WebResource& resource);
    void backgroundProcess();

    const std::vector<std::unique_ptr<JarWarResourceSet>>& resource_sets() const { return sets_; }
    std::uint64_t walks() const;
    std::size_t nested_jars() const { return nested_jars_; }

private:
    std::vector<std::unique_ptr<JarWarResourceSet>> sets_;
    std::unique_ptr<Cache> cache_;
    std::size_t nested_jars_ = 0;
};

// org.apache.catalina.mapper.Mapper for one context whose only servlet (Spring's DispatcherServlet)
// is the default one, mapped to "/".
class Mapper {
public:
    struct MappingData {
        std::string wrapper;       // the servlet chosen
        std::string wrapper_path;
        std::string redirect;      // a directory redirect, when enabled and the path is a directory
    };
    Mapper(StandardRoot& resources, Mode mode) : resources_(resources), mode_(mode) {}
    void map(const std::string& host, const std::string& uri, MappingData& mapping);

private:
    void internalMap(const std::string& uri, MappingData& mapping);
    void internalMapWrapper(const std::string& path, MappingData& mapping);

    StandardRoot& resources_;
    const Mode mode_;
    const bool mapper_directory_redirect_enabled_ = false;  // Tomcat's default since 8.0
    const std::vector<std::string> welcome_files_{"index.html", "index.htm", "index.jsp"};
};

}  // namespace demo

#endif
