// PyTorch-style printing, following torch/_tensor_str.py (torch 1.13) with its default print options:
// precision 4, line width 80, summarise above 1000 elements with 3 edge items.
#include "tensor/print.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/dispatch.h"

namespace braid {
namespace {

constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kLineWidth = 80;
constexpr int kPrecision = 4;

// Python's float formatting of non-finite values ("nan" has no sign there).
std::string non_finite(double v) {
  if (std::isnan(v)) return "nan";
  return v < 0 ? "-inf" : "inf";
}

std::string fixed(double v, int precision) {
  if (!std::isfinite(v)) return non_finite(v);
  return fmt::format("{:.{}f}", v, precision);
}

std::string scientific(double v) {
  if (!std::isfinite(v)) return non_finite(v);
  return fmt::format("{:.{}e}", v, kPrecision);
}

std::string pad_left(const std::string& s, size_t width) {
  return s.size() >= width ? s : std::string(width - s.size(), ' ') + s;
}

// The printed elements, in print order: doubles for floating dtypes, int64 for the others (bool as 0/1).
struct Values {
  DType dtype;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  bool floating() const { return is_floating(dtype); }
};

// torch's _Formatter: one common width, and for floats a choice between integer ("1."), fixed ("1.5000")
// and scientific ("1.0000e+08") notation, all decided from the elements that will be printed.
class Formatter {
 public:
  explicit Formatter(const Values& v) : v_(v) {
    if (!v.floating()) {
      for (int64_t x : v.ints) width_ = std::max(width_, str_int(x).size());
      return;
    }
    std::vector<double> vals;
    for (double x : v.floats) {
      if (std::isfinite(x) && x != 0) vals.push_back(x);
    }
    if (vals.empty()) return;
    double lo = std::abs(vals[0]), hi = lo;
    for (double x : vals) {
      lo = std::min(lo, std::abs(x));
      hi = std::max(hi, std::abs(x));
      if (x != std::ceil(x)) int_mode_ = false;
    }
    if (int_mode_) {
      sci_mode_ = hi / lo > 1000.0 || hi > 1e8;
    } else {
      sci_mode_ = hi / lo > 1000.0 || hi > 1e8 || lo < 1e-4;
    }
    for (double x : vals) {
      if (sci_mode_) width_ = std::max(width_, scientific(x).size());
      else if (int_mode_) width_ = std::max(width_, fixed(x, 0).size() + 1);  // +1 for the trailing "."
      else width_ = std::max(width_, fixed(x, kPrecision).size());
    }
  }

  size_t width() const { return width_; }

  // The i-th printed element, padded to the common width.
  std::string format(size_t i) const {
    if (!v_.floating()) return pad_left(str_int(v_.ints[i]), width_);
    const double x = v_.floats[i];
    std::string s;
    if (sci_mode_) {
      s = scientific(x);
    } else if (int_mode_) {
      s = fixed(x, 0);
      if (std::isfinite(x)) s += '.';
    } else {
      s = fixed(x, kPrecision);
    }
    return pad_left(s, width_);
  }

 private:
  std::string str_int(int64_t x) const {
    if (v_.dtype == DType::Bool) return x != 0 ? "True" : "False";
    return std::to_string(x);
  }

  const Values& v_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  size_t width_ = 1;
};

// Indices along one dimension that are printed: all, or the edge items when summarising.
std::vector<int64_t> shown(int64_t size, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && size > 2 * kEdgeItems) {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    for (int64_t i = size - kEdgeItems; i < size; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < size; ++i) idx.push_back(i);
  }
  return idx;
}

// Storage offsets (in elements) of the printed elements in print order (torch's get_summarized_data).
// Only these are read, so printing a huge tensor does not convert all of it.
void collect(const Tensor& t, size_t d, int64_t offset, bool summarize, std::vector<int64_t>& out) {
  if (d == t.shape().size()) {
    out.push_back(offset);
    return;
  }
  for (int64_t i : shown(t.shape()[d], summarize)) collect(t, d + 1, offset + i * t.strides()[d], summarize, out);
}

Values read_values(const Tensor& host, const std::vector<int64_t>& offsets) {
  Values v{host.dtype(), {}, {}};
  dispatch(host.dtype(), "print", [&]<class T>() {
    const T* p = static_cast<const T*>(host.data_ptr());
    for (int64_t o : offsets) {
      if constexpr (is_floating_v<T>) v.floats.push_back(static_cast<double>(static_cast<opmath_t<T>>(p[o])));
      else v.ints.push_back(static_cast<int64_t>(p[o]));
    }
  });
  return v;
}

// Complex elements as torch prints them: the real parts and the imaginary parts each get their own
// formatter (so their widths and notations are chosen apart), joined as "1.5000+2.0000j".
class ComplexFormatter {
 public:
  ComplexFormatter(const Values& re, const Values& im) : re_(re), im_(im) {}
  size_t width() const { return re_.width() + im_.width() + 1; }
  std::string format(size_t i) const {
    std::string im = im_.format(i) + "j";
    im.erase(0, im.find_first_not_of(' '));
    if (im[0] == '+' || im[0] == '-') return re_.format(i) + im;
    return re_.format(i) + "+" + im;
  }

 private:
  Formatter re_;
  Formatter im_;
};

// The real and imaginary parts of the printed complex elements, as two Values of the parts' dtype.
std::pair<Values, Values> read_complex_values(const Tensor& host, const std::vector<int64_t>& offsets) {
  std::pair<Values, Values> v{{real_dtype(host.dtype()), {}, {}}, {real_dtype(host.dtype()), {}, {}}};
  dispatch_with_complex(host.dtype(), "print", [&]<class T>() {
    if constexpr (is_complex_v<T>) {
      const T* p = static_cast<const T*>(host.data_ptr());
      for (int64_t o : offsets) {
        v.first.floats.push_back(static_cast<double>(p[o].real()));
        v.second.floats.push_back(static_cast<double>(p[o].imag()));
      }
    }
  });
  return v;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string r;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) r += sep;
    r += parts[i];
  }
  return r;
}

// Lays out the formatted elements, taking them in print order.
template <class Formatter>
class Layout {
 public:
  Layout(const Shape& shape, const Formatter& f, bool summarize) : shape_(shape), f_(f), summarize_(summarize) {}

  std::string tensor_str(size_t d, int64_t indent) {
    const size_t ndim = shape_.size();
    if (ndim == 0) return f_.format(next_++);
    if (d + 1 == ndim) return vector_str(indent);
    const int64_t size = shape_[d];
    std::vector<std::string> slices;
    if (summarize_ && size > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) slices.push_back(tensor_str(d + 1, indent + 1));
      slices.emplace_back("...");
      for (int64_t i = 0; i < kEdgeItems; ++i) slices.push_back(tensor_str(d + 1, indent + 1));
    } else {
      for (int64_t i = 0; i < size; ++i) slices.push_back(tensor_str(d + 1, indent + 1));
    }
    const std::string sep = "," + std::string(ndim - d - 1, '\n') + std::string(static_cast<size_t>(indent + 1), ' ');
    return "[" + join(slices, sep) + "]";
  }

 private:
  std::string vector_str(int64_t indent) {
    const int64_t element_length = static_cast<int64_t>(f_.width()) + 2;
    const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / element_length);
    const int64_t size = shape_.back();
    std::vector<std::string> data;
    if (summarize_ && size > 2 * kEdgeItems) {
      for (int64_t i = 0; i < kEdgeItems; ++i) data.push_back(f_.format(next_++));
      data.emplace_back(" ...");
      for (int64_t i = 0; i < kEdgeItems; ++i) data.push_back(f_.format(next_++));
    } else {
      for (int64_t i = 0; i < size; ++i) data.push_back(f_.format(next_++));
    }
    std::vector<std::string> lines;
    for (size_t i = 0; i < data.size(); i += static_cast<size_t>(per_line)) {
      const auto end = std::min(data.size(), i + static_cast<size_t>(per_line));
      lines.push_back(join(std::vector<std::string>(data.begin() + static_cast<std::ptrdiff_t>(i),
                                                    data.begin() + static_cast<std::ptrdiff_t>(end)),
                           ", "));
    }
    return "[" + join(lines, ",\n" + std::string(static_cast<size_t>(indent + 1), ' ')) + "]";
  }

  const Shape& shape_;
  const Formatter& f_;
  bool summarize_;
  size_t next_ = 0;
};

// torch's _add_suffixes: ", suffix" on the last line while it fits in the line width, else a new line.
std::string add_suffixes(const std::string& body, const std::vector<std::string>& suffixes, int64_t indent) {
  std::string r = body;
  const auto nl = body.rfind('\n');
  // Python computes len - rfind + 1, with rfind = -1 when there is no newline.
  int64_t last_line_len = static_cast<int64_t>(body.size()) - (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& s : suffixes) {
    const auto len = static_cast<int64_t>(s.size());
    if (last_line_len + len + 2 > kLineWidth) {
      r += ",\n" + std::string(static_cast<size_t>(indent), ' ') + s;
      last_line_len = indent + len;
    } else {
      r += ", " + s;
      last_line_len += len + 2;
    }
  }
  return r + ")";
}

std::string size_tuple(const Shape& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

}  // namespace

std::string to_string(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const auto indent = static_cast<int64_t>(prefix.size());
  std::vector<std::string> suffixes;
  if (t.is_cuda()) suffixes.push_back(fmt::format("device='{}'", t.device()));
  const DType dtype = t.dtype();
  std::string body;
  if (t.numel() == 0) {
    // No elements to show the dtype by, so only float32 goes without it.
    if (t.dim() != 1) suffixes.push_back("size=" + size_tuple(t.shape()));
    if (dtype != DType::Float32) suffixes.push_back(fmt::format("dtype={}", dtype));
    body = "[]";
  } else {
    // complex64 is the default complex dtype (float32's), which torch leaves unnamed too.
    if (dtype != DType::Float32 && dtype != DType::Int64 && dtype != DType::Bool && dtype != DType::Complex64) {
      suffixes.push_back(fmt::format("dtype={}", dtype));
    }
    const Tensor host = t.cpu();
    const bool summarize = t.numel() > kThreshold;
    std::vector<int64_t> offsets;
    collect(host, 0, 0, summarize, offsets);
    if (is_complex(dtype)) {
      const auto [re, im] = read_complex_values(host, offsets);
      const ComplexFormatter f(re, im);
      body = Layout<ComplexFormatter>(host.shape(), f, summarize).tensor_str(0, indent);
    } else {
      const Values v = read_values(host, offsets);
      const Formatter f(v);
      body = Layout<Formatter>(host.shape(), f, summarize).tensor_str(0, indent);
    }
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << to_string(t); }

}  // namespace braid
