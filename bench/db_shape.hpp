// A program of db_bench's shape (bench/xray_db_bench.cpp): see db_shape.cpp. SPDX-License-Identifier: MIT
#ifndef TRACETREE_BENCH_DB_SHAPE_HPP
#define TRACETREE_BENCH_DB_SHAPE_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace db {

inline constexpr std::size_t kKeySize = 16;
inline constexpr std::size_t kMaxBlocks = 4096;  // 16 MiB of memtable, then a fresh one
inline constexpr int kMaxHeight = 12;

struct Slice {
    const char* data;
    std::size_t size;
    int compare(const Slice& b) const {  // inline, as leveldb's
        const std::size_t n = size < b.size ? size : b.size;
        int r = std::memcmp(data, b.data, n);
        if (r == 0) r = size < b.size ? -1 : size > b.size ? 1 : 0;
        return r;
    }
};

char* EncodeVarint32(char* dst, std::uint32_t v);

struct BytewiseComparator {
    int Compare(const Slice& a, const Slice& b) const;
};
struct KeyComparator {
    BytewiseComparator user;
    int operator()(const char* a, const char* b) const { return user.Compare(Slice{a, kKeySize}, Slice{b, kKeySize}); }
};
struct Random {
    std::uint32_t seed = 301;
    std::uint32_t Next();
};
struct Arena {
    std::vector<std::unique_ptr<char[]>> blocks;
    char* next = nullptr;
    std::size_t left = 0;
    char* Allocate(std::size_t bytes);
};
struct SkipList {
    struct Node {
        const char* key;
        Node* next[1];
    };
    explicit SkipList(Arena* arena_) : arena(arena_), head(NewNode(nullptr, kMaxHeight)) {
        for (int i = 0; i < kMaxHeight; ++i) head->next[i] = nullptr;
    }
    KeyComparator compare;
    Arena* arena;
    Node* head;
    int height = 1;
    Random rnd;
    int RandomHeight();
    bool KeyIsAfterNode(const char* key, Node* n) const;
    Node* FindGreaterOrEqual(const char* key, Node** prev) const;
    Node* NewNode(const char* key, int levels);
    void Insert(const char* key);
};
struct MemTable {
    Arena arena;
    SkipList table{&arena};
    void Add(std::uint64_t sequence, const Slice& key, const Slice& value);
};
namespace crc32c {
std::uint32_t Extend(std::uint32_t crc, const char* data, std::size_t n);
std::uint32_t Mask(std::uint32_t crc);
}  // namespace crc32c
struct WritableFile {
    int fd = -1;
    bool failed = false;
    std::string buffer;
    void Append(const Slice& data);
    void Flush();
};
struct LogWriter {
    WritableFile* file;
    void EmitPhysicalRecord(const char* data, std::size_t n);
    void AddRecord(const Slice& record);
};
struct WriteBatch {
    std::string rep;
    void Put(const Slice& key, const Slice& value);
};
struct DB {
    explicit DB(int fd) { file.fd = fd; }
    ~DB() { delete mem; }
    DB(const DB&) = delete;
    DB& operator=(const DB&) = delete;
    WritableFile file;
    LogWriter log{&file};
    MemTable* mem = new MemTable;
    std::uint64_t sequence = 0;
    void MakeRoomForWrite();
    void InsertInto(const WriteBatch& batch, std::uint64_t number);
    void Write(const WriteBatch& batch);
    void Put(const Slice& key, const Slice& value);
};

}  // namespace db

#endif
