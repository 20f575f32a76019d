#include "nn/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/check.h"
#include "nn/atomic_file.h"

namespace braid::nn {

// The data buffer is little-endian and mapped tensors use it as is.
static_assert(std::endian::native == std::endian::little, "safetensors: big-endian hosts are not supported");

namespace {

using Json = nlohmann::ordered_json;  // keeps header order, which breaks ties between empty tensors

// The reference implementation's bound (MAX_HEADER_SIZE): a corrupt length cannot ask for gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::string_view kMetadataKey = "__metadata__";

constexpr std::array<std::pair<DType, std::string_view>, 9> kDTypeNames = {{
    {DType::Bool, "BOOL"},
    {DType::UInt8, "U8"},
    {DType::Int8, "I8"},
    {DType::Int32, "I32"},
    {DType::Int64, "I64"},
    {DType::Float16, "F16"},
    {DType::BFloat16, "BF16"},
    {DType::Float32, "F32"},
    {DType::Float64, "F64"},
}};
// safetensors dtypes braid has no tensor type for; named so the error says "unsupported", not "unknown".
constexpr std::array<std::string_view, 6> kForeignDTypes = {"I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2"};
constexpr std::string_view kAcceptedDTypes = "BOOL, U8, I8, I32, I64, F16, BF16, F32, F64";

std::optional<std::string_view> safetensors_name(DType d) {
  for (const auto& [dtype, name] : kDTypeNames) {
    if (dtype == d) return name;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_safetensors(std::string_view s) {
  for (const auto& [dtype, name] : kDTypeNames) {
    if (name == s) return dtype;
  }
  return std::nullopt;
}

std::string errno_text() { return std::strerror(errno); }

bool valid_utf8(const std::string& s) {
  try {
    (void)Json(s).dump();
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

// A value quoted in an error message, cut short so a hostile header cannot make a huge message.
std::string excerpt(const Json& v) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 64) s = s.substr(0, 61) + "...";
  return s;
}

// Non-negative JSON integers only: nlohmann stores them unsigned, except "-0", which is signed.
std::optional<uint64_t> as_index(const Json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

// nlohmann keeps the last of duplicate keys without a word; its parser callback sees every key, so this
// records the first duplicate (with the top-level key it sits under) for the caller to report.
class DuplicateKeyFinder {
 public:
  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    if (duplicate_ || depth < 0) return true;
    const auto d = static_cast<size_t>(depth);
    if (event == Json::parse_event_t::object_start) {
      if (keys_.size() <= d) keys_.resize(d + 1);
      keys_[d].clear();
    } else if (event == Json::parse_event_t::key && d >= 1 && d <= keys_.size()) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (d == 1) top_key_ = key;
      if (!keys_[d - 1].insert(key).second) duplicate_ = {d == 1 ? std::string() : top_key_, key};
    }
    return true;
  }
  // (enclosing top-level key, or "" for a top-level duplicate; the duplicate key)
  const std::optional<std::pair<std::string, std::string>>& duplicate() const { return duplicate_; }

 private:
  std::vector<std::set<std::string>> keys_;
  std::string top_key_;
  std::optional<std::pair<std::string, std::string>> duplicate_;
};

// One header entry, checked against the data buffer's size; `at` starts every message ("safetensors file
// 'p': tensor 'n'").
SafetensorsEntry parse_entry(const std::string& at, const std::string& name, const Json& value, uint64_t buffer_size) {
  BRAID_CHECK_ARG(value.is_object(), "{}: entry is a JSON {}, not an object", at, value.type_name());
  for (const auto& [key, _] : value.items()) {
    BRAID_CHECK_ARG(key == "dtype" || key == "shape" || key == "data_offsets",
                    "{}: unexpected key '{}' (an entry holds exactly \"dtype\", \"shape\" and \"data_offsets\")", at,
                    key);
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    BRAID_CHECK_ARG(value.contains(key),
                    "{}: missing key '{}' (an entry holds exactly \"dtype\", \"shape\" and \"data_offsets\")", at,
                    key);
  }
  SafetensorsEntry e;
  e.name = name;

  const Json& dtype = value["dtype"];
  BRAID_CHECK_ARG(dtype.is_string(), "{}: dtype is a JSON {}, not a string", at, dtype.type_name());
  const auto& dtype_text = dtype.get_ref<const std::string&>();
  const auto parsed = dtype_from_safetensors(dtype_text);
  if (!parsed) {
    const bool foreign = std::find(kForeignDTypes.begin(), kForeignDTypes.end(), dtype_text) != kForeignDTypes.end();
    BRAID_THROW(InvalidArgument, "{}: {} dtype '{}' (accepted: {})", at,
                foreign ? "braid has no tensor type for" : "unknown", dtype_text, kAcceptedDTypes);
  }
  e.dtype = *parsed;

  const Json& shape = value["shape"];
  BRAID_CHECK_ARG(shape.is_array(), "{}: shape is a JSON {}, not an array of integers", at, shape.type_name());
  // Strides and numel are int64 products of the dimensions; keep every partial product in range.
  int64_t product = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const Json& dim = shape[i];
    BRAID_CHECK_ARG(!(dim.is_number_integer() && !dim.is_number_unsigned() && dim.get<int64_t>() < 0),
                    "{}: shape dimension {} is negative ({})", at, i, excerpt(dim));
    const auto n = as_index(dim);
    BRAID_CHECK_ARG(n.has_value(), "{}: shape dimension {} is not a non-negative integer ({})", at, i, excerpt(dim));
    BRAID_CHECK_ARG(*n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) &&
                        (*n == 0 || !__builtin_mul_overflow(product, static_cast<int64_t>(*n), &product)),
                    "{}: shape {} is too large (its element count overflows int64)", at, excerpt(shape));
    e.shape.push_back(static_cast<int64_t>(*n));
  }

  const Json& offsets = value["data_offsets"];
  const bool two_ints = offsets.is_array() && offsets.size() == 2 && as_index(offsets[0]) && as_index(offsets[1]);
  BRAID_CHECK_ARG(two_ints, "{}: data_offsets must be two non-negative integers [begin, end], got {}", at,
                  excerpt(offsets));
  e.begin = *as_index(offsets[0]);
  e.end = *as_index(offsets[1]);
  BRAID_CHECK_ARG(e.begin <= e.end, "{}: data_offsets [{}, {}] begin after they end", at, e.begin, e.end);
  BRAID_CHECK_ARG(e.end <= buffer_size, "{}: data_offsets [{}, {}] run past the end of the data buffer ({} bytes)",
                  at, e.begin, e.end, buffer_size);
  const auto numel = static_cast<uint64_t>(shape_numel(e.shape));
  uint64_t nbytes = 0;
  const bool overflow = __builtin_mul_overflow(numel, static_cast<uint64_t>(element_size(e.dtype)), &nbytes);
  BRAID_CHECK_ARG(!overflow && nbytes == e.end - e.begin,
                  "{}: shape {} of {} needs {} bytes but data_offsets [{}, {}] hold {}", at, shape_str(e.shape),
                  dtype_text, overflow ? std::string("more than 2^64") : std::to_string(nbytes), e.begin, e.end,
                  e.end - e.begin);
  return e;
}

// Sorts by data offsets and checks that every byte of the buffer belongs to exactly one tensor, as the
// reference reader does: no overlap, no gap, nothing after the last tensor.
void sort_and_check_coverage(const std::string& where, std::vector<SafetensorsEntry>& entries, uint64_t buffer_size) {
  std::stable_sort(entries.begin(), entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  uint64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;  // set whenever covered > 0
  for (const auto& e : entries) {
    if (e.begin < covered) {
      BRAID_THROW(InvalidArgument, "{}: tensors '{}' (data_offsets [{}, {}]) and '{}' ([{}, {}]) overlap", where,
                  previous->name, previous->begin, previous->end, e.name, e.begin, e.end);
    }
    BRAID_CHECK_ARG(e.begin == covered, "{}: data buffer bytes [{}, {}) before tensor '{}' belong to no tensor", where,
                    covered, e.begin, e.name);
    covered = e.end;
    previous = &e;
  }
  BRAID_CHECK_ARG(covered == buffer_size, "{}: the last {} bytes of the data buffer ({} bytes) belong to no tensor",
                  where, buffer_size - covered, buffer_size);
}

}  // namespace

// ---------------------------------------------------------------------------------------------- writing

void save_safetensors(const StateDict& state, const std::string& path,
                      const std::map<std::string, std::string>& metadata) {
  // Validate everything first: a bad entry must not cost the existing file.
  std::set<std::string> names;
  Json header = Json::object();
  if (!metadata.empty()) {
    Json meta = Json::object();
    for (const auto& [key, value] : metadata) {
      BRAID_CHECK_ARG(valid_utf8(key) && valid_utf8(value),
                      "save_safetensors('{}'): metadata entry '{}' is not valid UTF-8", path, key);
      meta[key] = value;
    }
    header[std::string(kMetadataKey)] = std::move(meta);
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : state) {
    BRAID_CHECK_ARG(!name.empty(), "save_safetensors('{}'): an entry has an empty name", path);
    BRAID_CHECK_ARG(name != kMetadataKey, "save_safetensors('{}'): '{}' is reserved for the metadata", path, name);
    BRAID_CHECK_ARG(valid_utf8(name), "save_safetensors('{}'): name '{}' is not valid UTF-8", path, name);
    BRAID_CHECK_ARG(names.insert(name).second, "save_safetensors('{}'): duplicate name '{}'", path, name);
    BRAID_CHECK_ARG(t.defined(), "save_safetensors('{}'): '{}' is an undefined tensor", path, name);
    BRAID_CHECK_ARG(!t.is_sparse(), "save_safetensors('{}'): '{}' is a sparse tensor; safetensors holds dense tensors",
                    path, name);
    const auto dtype = safetensors_name(t.dtype());
    BRAID_CHECK_ARG(dtype.has_value(), "save_safetensors('{}'): '{}' has dtype {}, which safetensors cannot hold",
                    path, name, t.dtype());
    const uint64_t nbytes = t.nbytes();
    header[name] = {{"dtype", std::string(*dtype)}, {"shape", t.shape()}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  // Spaces to a multiple of 8, as the reference writer does, so 8-byte types after the header are aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  BRAID_CHECK_ARG(text.size() <= kMaxHeaderBytes,
                  "save_safetensors('{}'): the header takes {} bytes, more than readers accept ({})", path,
                  text.size(), kMaxHeaderBytes);

  detail::AtomicFile file(path, "save_safetensors");
  std::array<uint8_t, 8> length{};
  for (size_t i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  file.write(length.data(), length.size());
  file.write(text.data(), text.size());
  for (const auto& entry : state) {
    // One tensor at a time, so at most one extra copy is alive.
    const Tensor c = entry.second.cpu().contiguous();
    file.write(c.data_ptr(), c.nbytes());
  }
  file.commit();
}

// ---------------------------------------------------------------------------------------------- reading

struct SafetensorsFile::Mapping {
  uint8_t* base = nullptr;
  size_t size = 0;
  Mapping(uint8_t* b, size_t n) : base(b), size(n) {}
  ~Mapping() { ::munmap(base, size); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
};

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const std::string where = "safetensors file '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  BRAID_CHECK_ARG(fd >= 0, "{}: cannot open: {}", where, errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text();
    ::close(fd);
    BRAID_THROW(InvalidArgument, "{}: cannot stat: {}", where, why);
  }
  if (!S_ISREG(st.st_mode) || st.st_size < 8) {
    ::close(fd);
    BRAID_CHECK_ARG(S_ISREG(st.st_mode), "{}: not a regular file", where);
    BRAID_THROW(InvalidArgument,
                "{}: file is truncated ({} bytes; a safetensors file starts with an 8-byte header length)", where,
                st.st_size);
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  // Private and writable: a caller may modify a tensor in place; the pages are copied, the file is not.
  void* addr = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  const std::string mmap_error = addr == MAP_FAILED ? errno_text() : std::string();
  ::close(fd);  // the mapping keeps the file referenced
  BRAID_CHECK_ARG(addr != MAP_FAILED, "{}: mmap failed: {}", where, mmap_error);
  mapping_ = std::make_shared<const Mapping>(static_cast<uint8_t*>(addr), size);
  const uint8_t* p = mapping_->base;

  uint64_t header_len = 0;
  for (size_t i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(p[i]) << (8 * i);
  // Compared with what is left, never added to 8, so a length near 2^64 cannot wrap.
  BRAID_CHECK_ARG(header_len <= size - 8,
                  "{}: header length {} runs past the end of the file ({} bytes): truncated or not a safetensors file",
                  where, header_len, size);
  BRAID_CHECK_ARG(header_len <= kMaxHeaderBytes, "{}: header length {} exceeds the limit of {} bytes", where,
                  header_len, kMaxHeaderBytes);
  data_start_ = 8 + header_len;
  const uint64_t buffer_size = size - data_start_;

  DuplicateKeyFinder duplicates;
  Json header;
  try {
    const auto* text = reinterpret_cast<const char*>(p + 8);
    header = Json::parse(text, text + header_len, std::ref(duplicates));
  } catch (const Json::exception& e) {
    // parse_error, and out_of_range for a number past a double's range (found by fuzz_safetensors).
    BRAID_THROW(InvalidArgument, "{}: header is not valid JSON: {}", where, e.what());
  }
  BRAID_CHECK_ARG(header.is_object(), "{}: header is a JSON {}, not an object", where, header.type_name());
  if (const auto& dup = duplicates.duplicate()) {
    const std::string& key = dup->second;
    if (dup->first.empty()) BRAID_THROW(InvalidArgument, "{}: duplicate tensor name '{}' in the header", where, key);
    if (dup->first == kMetadataKey) BRAID_THROW(InvalidArgument, "{}: __metadata__: duplicate key '{}'", where, key);
    BRAID_THROW(InvalidArgument, "{}: tensor '{}': duplicate key '{}'", where, dup->first, key);
  }

  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      BRAID_CHECK_ARG(value.is_object(), "{}: __metadata__ is a JSON {}, not an object of strings", where,
                      value.type_name());
      for (const auto& [key, text] : value.items()) {
        BRAID_CHECK_ARG(text.is_string(), "{}: __metadata__ entry '{}' is a JSON {}, not a string", where, key,
                        text.type_name());
        metadata_[key] = text.get<std::string>();
      }
      continue;
    }
    entries_.push_back(parse_entry(where + ": tensor '" + name + "'", name, value, buffer_size));
  }

  sort_and_check_coverage(where, entries_, buffer_size);

  for (size_t i = 0; i < entries_.size(); ++i) {
    const SafetensorsEntry& e = entries_[i];
    index_.emplace(e.name, i);
    if (e.dtype != DType::Bool) continue;
    // Anything but 0 and 1 in a bool is undefined behaviour in the kernels that read it.
    const uint8_t* q = p + data_start_ + e.begin;
    for (uint64_t k = 0; k < e.end - e.begin; ++k) {
      BRAID_CHECK_ARG(q[k] <= 1, "{}: tensor '{}': BOOL element {} is byte {}, not 0 or 1", where, e.name, k,
                      static_cast<unsigned>(q[k]));
    }
  }
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = index_.find(name);
  BRAID_CHECK_ARG(it != index_.end(), "safetensors file '{}': no tensor '{}'", path_, name);
  return entries_[it->second];
}

Tensor SafetensorsFile::tensor(const std::string& name) const { return make_tensor(entry(name)); }

StateDict SafetensorsFile::state_dict() const {
  StateDict out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.emplace_back(e.name, make_tensor(e));
  return out;
}

Tensor SafetensorsFile::make_tensor(const SafetensorsEntry& e) const {
  const size_t nbytes = e.end - e.begin;
  if (nbytes == 0) return Tensor::empty(e.shape, e.dtype);
  uint8_t* data = mapping_->base + data_start_ + e.begin;
  if (reinterpret_cast<uintptr_t>(data) % element_size(e.dtype) == 0) {
    // The deleter's only job is to keep the mapping alive as long as the storage.
    auto storage = Storage::wrap(data, nbytes, Device::cpu(), [mapping = mapping_](void*) {});
    return Tensor::from_storage(std::move(storage), e.shape, contiguous_strides(e.shape), 0, e.dtype);
  }
  Tensor t = Tensor::empty(e.shape, e.dtype);
  std::memcpy(t.data_ptr(), data, nbytes);
  return t;
}

StateDict load_safetensors(const std::string& path) { return SafetensorsFile(path).state_dict(); }

}  // namespace braid::nn
