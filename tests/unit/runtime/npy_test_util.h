// What the .npy tests share (data_npy_test.cc, data_npy_files_test.cc): a tiny .npy writer after
// numpy/lib/format.py, and reading a dataset's rows back.
#pragma once

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "runtime/data/dataset.h"
#include "runtime/data/npy_file.h"
#include "tensor/factory.h"
#include "tests/support/error_of.h"
#include "tests/support/temp_dir.h"

namespace braid::runtime::npy_test {

using Indices = std::vector<int64_t>;
using testing::TempDir;

// --- The writer.

// The preamble and the header as np.save writes them: the dict, spaces up to a multiple of 64 bytes in all,
// then '\n'. `major` picks the length field: a u16 for 1, a u32 for 2 and 3.
inline std::string npy_header(const std::string& dict, int major = 1) {
  const size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const size_t len = header.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + header;
}

inline std::string dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape +
         ", }";
}

template <class T>
std::string raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

inline std::string write_npy(const TempDir& dir, const std::string& name, const std::string& descr, const std::string& shape,
                      const std::string& bytes, int major = 1, bool fortran = false) {
  return dir.write(name, npy_header(dict(descr, shape, fortran), major) + bytes);
}

inline std::string open_error(const std::string& path) {
  return testing::error_of([&] { data::NpyFile f(path); });
}

inline std::vector<float> features_of(const Dataset& d, const Indices& rows) { return to_vector<float>(d.gather(rows).inputs[0]); }

inline Indices all_rows(const Dataset& d) {
  Indices all(static_cast<size_t>(d.size()));
  std::iota(all.begin(), all.end(), int64_t{0});
  return all;
}

}  // namespace braid::runtime::npy_test
