// .npy files: the preamble, the header's dict literal, the dtype table and the mapping
// (runtime/data/npy_file.h).
#include "runtime/data/npy_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"

namespace braid::runtime::data {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct DTypeEntry {
  std::string_view descr;
  DType dtype;
};

// What this reader takes, in the order the "supported" list of a message gives them.
constexpr DTypeEntry kDTypes[] = {{"<f4", DType::Float32}, {"<f8", DType::Float64}, {"<i4", DType::Int32},
                                  {"<i8", DType::Int64},   {"|u1", DType::UInt8},   {"<u1", DType::UInt8}};

std::string supported_list() {
  std::string out;
  for (const DTypeEntry& e : kDTypes) {
    out += fmt::format("{}'{}' {}", out.empty() ? "" : ", ", e.descr, dtype_name(e.dtype));
  }
  return out;
}

DType dtype_of(const std::string& descr, const std::string& path) {
  for (const DTypeEntry& e : kDTypes) {
    if (descr == e.descr) return e.dtype;
  }
  BRAID_CHECK_ARG(descr != "|b1", "{}: bool arrays ('|b1') are not supported: save them as uint8 "
                  "(a.astype(np.uint8))", path);
  if (!descr.empty() && descr[0] == '>') {
    const std::string little = "<" + descr.substr(1);
    for (const DTypeEntry& e : kDTypes) {
      BRAID_CHECK_ARG(little != e.descr, "{}: big-endian dtype '{}' is not supported: save with a.astype('{}')",
                      path, descr, little);
    }
    BRAID_THROW(InvalidArgument, "{}: big-endian dtype '{}' is not supported (supported: {})", path, descr,
                supported_list());
  }
  BRAID_THROW(InvalidArgument, "{}: unsupported dtype '{}' (supported: {})", path, descr, supported_list());
}

// A recursive-descent reader of the one dict literal np.save writes. Each fail() names the character where
// the header stops making sense and shows the header.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    skip_space();
    expect('{', "the header to be a dict literal starting with '{'");
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const size_t key_at = pos_;
      const std::string key = string_literal("a quoted key ('descr', 'fortran_order' or 'shape')");
      skip_space();
      expect(':', fmt::format("':' after the key '{}'", key));
      skip_space();
      bool* seen = nullptr;
      if (key == "descr") {
        seen = &seen_descr;
        if (peek() == '[') fail("structured dtypes (a list of fields as 'descr') are not supported");
        header.descr = string_literal("a quoted dtype for 'descr', e.g. '<f4'");
      } else if (key == "fortran_order") {
        seen = &seen_fortran;
        header.fortran_order = boolean("True or False for 'fortran_order'");
      } else if (key == "shape") {
        seen = &seen_shape;
        header.shape = tuple();
      } else {
        pos_ = key_at;
        fail(fmt::format("unknown key '{}' (a .npy header has 'descr', 'fortran_order' and 'shape')", key));
      }
      if (*seen) {
        pos_ = key_at;
        fail(fmt::format("the key '{}' appears twice", key));
      }
      *seen = true;
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}' after a value");
    }
    ++pos_;  // '}'
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after the dict's closing '}'");
    for (const auto& [seen, key] : {std::pair{seen_descr, "descr"}, std::pair{seen_fortran, "fortran_order"},
                                    std::pair{seen_shape, "shape"}}) {
      if (!seen) fail(fmt::format("the key '{}' is missing", key));
    }
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const {
    std::string shown(text_.substr(0, 200));
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    }
    BRAID_THROW(InvalidArgument, "{}: bad .npy header: {} (at character {} of \"{}\")", path_, reason, pos_, shown);
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void expect(char c, const std::string& what) {
    if (peek() != c) fail(fmt::format("expected {}", what));
    ++pos_;
  }

  // 'text' or "text", without escapes (nothing in a header that this reader accepts has any).
  std::string string_literal(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail(fmt::format("expected {}", what));
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("a string is not closed");
    const std::string_view body = text_.substr(pos_ + 1, end - pos_ - 1);
    if (body.find('\\') != std::string_view::npos) fail("escapes in strings are not supported");
    pos_ = end + 1;
    return std::string(body);
  }

  bool boolean(const std::string& what) {
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    fail(fmt::format("expected {}", what));
  }

  int64_t integer() {
    if (peek() == '-') fail("a dimension of 'shape' is negative");
    if (peek() < '0' || peek() > '9') fail("expected a dimension (a non-negative integer) in 'shape'");
    int64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(v, int64_t{10}, &v) || __builtin_add_overflow(v, int64_t{peek() - '0'}, &v)) {
        fail("a dimension of 'shape' does not fit in 64 bits");
      }
      ++pos_;
    }
    if (peek() == 'L') ++pos_;  // Python 2's long literals, which old NumPy wrote
    return v;
  }

  // "()", "(5,)", "(3, 4)", "(3, 4,)"; "(5)" is the number 5 in Python, not a tuple.
  std::vector<int64_t> tuple() {
    expect('(', "a tuple for 'shape', e.g. (3, 4)");
    std::vector<int64_t> dims;
    bool trailing_comma = false;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      dims.push_back(integer());
      skip_space();
      trailing_comma = peek() == ',';
      if (trailing_comma) {
        ++pos_;
        continue;
      }
      if (peek() != ')') fail("expected ',' or ')' in 'shape'");
    }
    if (dims.size() == 1 && !trailing_comma) fail("'shape' is not a tuple: a 1-tuple is written (N,)");
    ++pos_;  // ')'
    return dims;
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// Closes a descriptor on every path out of the constructor.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

uint32_t little_endian(const uint8_t* p, size_t bytes) {
  uint32_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

NpyHeader parse_npy_header(std::string_view text, const std::string& path) {
  return HeaderParser(text, path).parse();
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return out + (shape.size() == 1 ? ",)" : ")");
}

NpyFile::NpyFile(std::string path) : path_(std::move(path)) {
  const Fd fd{::open(path_.c_str(), O_RDONLY | O_CLOEXEC)};
  BRAID_CHECK_ARG(fd.fd >= 0, "{}: cannot open: {}", path_, std::strerror(errno));
  struct stat st {};
  BRAID_CHECK_ARG(::fstat(fd.fd, &st) == 0, "{}: cannot stat: {}", path_, std::strerror(errno));
  BRAID_CHECK_ARG(S_ISREG(st.st_mode), "{}: not a regular file", path_);
  file_size_ = static_cast<size_t>(st.st_size);
  BRAID_CHECK_ARG(file_size_ >= kMagic.size(), "{}: not a .npy file (bad magic: the file has only {} bytes)", path_,
                  file_size_);
  void* map = ::mmap(nullptr, file_size_, PROT_READ, MAP_SHARED, fd.fd, 0);
  BRAID_CHECK_ARG(map != MAP_FAILED, "{}: cannot map the file ({} bytes): {}", path_, file_size_,
                  std::strerror(errno));
  map_ = static_cast<const uint8_t*>(map);
  // Keep the mapping in 4 KiB pages: a 2 MiB page of the file mapped on one touch would make the residency
  // estimate of NpyDataset (npy_dataset.h) far too low. A kernel without transparent huge pages refuses
  // the advice, which is then moot.
  (void)::madvise(map, file_size_, MADV_NOHUGEPAGE);
  try {
    const auto* p = map_;
    BRAID_CHECK_ARG(std::memcmp(p, kMagic.data(), kMagic.size()) == 0,
                    "{}: not a .npy file (bad magic: it does not start with \"\\x93NUMPY\")", path_);
    BRAID_CHECK_ARG(file_size_ >= 8, "{}: truncated header: the file ends within the format version ({} bytes)",
                    path_, file_size_);
    version_major_ = p[6];
    const int minor = p[7];
    BRAID_CHECK_ARG((version_major_ == 1 || version_major_ == 2 || version_major_ == 3) && minor == 0,
                    "{}: unsupported .npy format version {}.{} (supported: 1.0, 2.0, 3.0)", path_, version_major_,
                    minor);
    const size_t length_bytes = version_major_ == 1 ? 2 : 4;
    const size_t header_at = 8 + length_bytes;
    BRAID_CHECK_ARG(file_size_ >= header_at,
                    "{}: truncated header: format {}.0 needs {} bytes before the header, the file has {}", path_,
                    version_major_, header_at, file_size_);
    const size_t header_len = little_endian(p + 8, length_bytes);
    BRAID_CHECK_ARG(header_len <= file_size_ - header_at,
                    "{}: the header length {} runs past the end of the file ({} bytes, {} after the preamble)", path_,
                    header_len, file_size_, file_size_ - header_at);
    header_ = parse_npy_header(std::string_view(reinterpret_cast<const char*>(p + header_at), header_len), path_);
    data_offset_ = header_at + header_len;

    dtype_ = dtype_of(header_.descr, path_);
    itemsize_ = element_size(dtype_);
    int64_t big_dims = 0;
    numel_ = 1;
    for (const int64_t d : header_.shape) {
      big_dims += d > 1 ? 1 : 0;
      BRAID_CHECK_ARG(!__builtin_mul_overflow(numel_, d, &numel_), "{}: the shape {} has more than 2^63 elements",
                      path_, shape_text(header_.shape));
    }
    BRAID_CHECK_ARG(!header_.fortran_order || big_dims <= 1,
                    "{}: Fortran order is not supported (shape {}): save with np.ascontiguousarray(a)", path_,
                    shape_text(header_.shape));
    uint64_t expected = 0;
    BRAID_CHECK_ARG(!__builtin_mul_overflow(static_cast<uint64_t>(numel_), static_cast<uint64_t>(itemsize_), &expected),
                    "{}: the shape {} of '{}' needs more than 2^64 bytes", path_, shape_text(header_.shape),
                    header_.descr);
    const size_t actual = file_size_ - data_offset_;
    BRAID_CHECK_ARG(expected == actual, "{}: {}: the shape {} of '{}' needs {} data bytes, the file has {} after its "
                    "{}-byte header", path_, actual < expected ? "truncated data" : "extra bytes after the data",
                    shape_text(header_.shape), header_.descr, expected, actual, data_offset_);
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(map_), file_size_);
    throw;
  }
}

NpyFile::~NpyFile() { ::munmap(const_cast<uint8_t*>(map_), file_size_); }

void NpyFile::release_pages() const {
  // The mapping is read-only and shared, so dropping its pages loses nothing: they are clean copies of the
  // page cache's. A failure (which madvise on our own mapping never has) would only leave memory resident.
  (void)::madvise(const_cast<uint8_t*>(map_), file_size_, MADV_DONTNEED);
}

}  // namespace braid::runtime::data
