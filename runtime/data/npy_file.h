// .npy files, NumPy's own array format (numpy/lib/format.py), read through a read-only memory mapping.
//
// Layout: the magic "\x93NUMPY", two bytes of format version (major, minor), the header's length (a
// little-endian u16 in version 1.0, a u32 in 2.0 and 3.0), the header, then the array's bytes. The header is
// a Python dict literal, padded with spaces and ended by '\n', as np.save writes it:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (1797, 64), }
// It is parsed by hand and strictly: exactly the three keys, each once; strings in single or double quotes;
// True/False; shape a tuple of non-negative integers ("()" a scalar, "(5,)" a 1-tuple, a trailing comma
// allowed); any spacing and a trailing comma in the dict. Version 3.0 only allows utf-8 in the header,
// which nothing this reader accepts needs.
//
// dtypes (descr): '<f4' float32, '<f8' float64, '<i4' int32, '<i8' int64, '|u1' or '<u1' uint8. Refused
// with the reason: big-endian ('>f4': save with a.astype('<f4')), bool ('|b1': save as uint8), anything
// else (complex, strings, structured dtypes, ...). fortran_order True is accepted only where it changes
// nothing (at most one dimension larger than 1); otherwise refused: "Fortran order is not supported: save
// with np.ascontiguousarray".
//
// Validated before anything is read: the header lies inside the file, the shape's element count and byte
// count do not overflow, and the data after the header is exactly prod(shape) * itemsize bytes (a
// truncated file names the bytes expected and found). Every error is an InvalidArgument that starts with
// the file's path: "x.npy: not a .npy file (bad magic)".
//
// The file is mapped, never read whole: touching a row faults in only its pages. release_pages() drops this
// process's resident copy of them (madvise MADV_DONTNEED: for a read-only file mapping the next touch
// re-faults them from the page cache), which is how NpyDataset bounds its resident memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace braid::runtime::data {

// The three keys of a .npy header, as written.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the header's dict literal (`text` is the header without the preamble). InvalidArgument naming
// `path` and what is wrong where.
NpyHeader parse_npy_header(std::string_view text, const std::string& path);

// "(1797, 64)", "(5,)", "()": a shape as NumPy writes it, for messages.
std::string shape_text(const std::vector<int64_t>& shape);

class NpyFile {
 public:
  // Opens, validates and maps `path` (see the top of this file). InvalidArgument naming the path.
  explicit NpyFile(std::string path);
  ~NpyFile();
  NpyFile(const NpyFile&) = delete;
  NpyFile& operator=(const NpyFile&) = delete;

  const std::string& path() const { return path_; }
  int version_major() const { return version_major_; }
  const std::string& descr() const { return header_.descr; }
  DType dtype() const { return dtype_; }
  size_t itemsize() const { return itemsize_; }
  const std::vector<int64_t>& shape() const { return header_.shape; }
  int64_t numel() const { return numel_; }
  // The array: numel() * itemsize() bytes in C order, little-endian, read-only. Not aligned to the
  // element size in general (the header's length decides), so read elements with memcpy.
  const uint8_t* data() const { return map_ + data_offset_; }
  size_t nbytes() const { return file_size_ - data_offset_; }
  // Where data() lies in the file (and in the page-aligned mapping).
  size_t data_offset() const { return data_offset_; }

  // Drops this process's mapping of every page of the file (MADV_DONTNEED); data() stays valid and
  // re-faults from the page cache when touched. Safe to call concurrently with readers.
  void release_pages() const;

 private:
  std::string path_;
  NpyHeader header_;
  int version_major_ = 0;
  DType dtype_ = DType::Float32;
  size_t itemsize_ = 0;
  int64_t numel_ = 0;
  const uint8_t* map_ = nullptr;
  size_t file_size_ = 0;
  size_t data_offset_ = 0;
};

}  // namespace braid::runtime::data
