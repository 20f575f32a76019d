// CSV datasets: one sample per line, comma-separated numbers, a label column of integer class ids.
//
// Conventions (runtime/data/dataset.h sums them up for users):
//   - fields are separated by ',' and may be padded with spaces or tabs; no quoting. Lines may end in
//     "\r\n". Blank lines are skipped (they still count in line numbers).
//   - data.header: the first line is a header and is skipped (it must have the same number of fields).
//   - every line has the same number of fields, and every field is a finite decimal number.
//   - data.label_column picks the label (negative counts from the end: -1 is the last); labels are integer
//     class ids 0..C-1 and num_classes() is the largest one plus one.
//   - data.feature_columns picks the features, in that order (negative counts from the end); empty means
//     every column but the label. Features become float32, multiplied by data.feature_scale.
//   - errors name the file and the line (counted from 1) and the column (counted from 0, as
//     data.label_column counts): "digits.csv:17: column 3: 'abc' is not a number".
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string_view>

#include "base/check.h"
#include "runtime/data/tabular_dataset.h"
#include "tensor/factory.h"

namespace braid::runtime::data {

namespace {

constexpr int64_t kMaxClasses = 1 << 20;  // a label beyond it is surely a wrong label column

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

// Reads a whole CSV file into rows of numbers, checking the shape and that every field is a number.
class CsvReader {
 public:
  CsvReader(std::string path, bool header) : path_(std::move(path)), header_(header) {}

  // Each row's numbers, and the line each row came from.
  std::vector<std::vector<double>> rows;
  std::vector<int64_t> line_numbers;
  int64_t width = 0;

  void read() {
    std::ifstream in(path_);
    BRAID_CHECK_ARG(in.is_open(), "{}: cannot open the data file: {}", path_, std::strerror(errno));
    std::string line;
    int64_t line_no = 0;
    int64_t width_line = 0;
    bool header_pending = header_;
    while (std::getline(in, line)) {
      ++line_no;
      std::string_view text(line);
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      if (trim(text).empty()) continue;
      const std::vector<std::string_view> fields = split_fields(text);
      if (width_line == 0) {
        width = static_cast<int64_t>(fields.size());
        width_line = line_no;
      }
      BRAID_CHECK_ARG(static_cast<int64_t>(fields.size()) == width, "{}:{}: {} columns, expected {} as on line {}",
                      path_, line_no, fields.size(), width, width_line);
      if (header_pending) {
        header_pending = false;
        continue;
      }
      rows.push_back(parse_row(fields, line_no));
      line_numbers.push_back(line_no);
    }
    BRAID_CHECK_ARG(!in.bad(), "{}: reading failed after line {}", path_, line_no);
    BRAID_CHECK_ARG(!rows.empty(), "{}: no data rows ({})", path_,
                    line_no == 0 ? "the file is empty" : header_ ? "only a header" : "only blank lines");
  }

 private:
  std::vector<double> parse_row(const std::vector<std::string_view>& fields, int64_t line_no) const {
    std::vector<double> row;
    row.reserve(fields.size());
    for (size_t c = 0; c < fields.size(); ++c) {
      std::string_view f = fields[c];
      BRAID_CHECK_ARG(!f.empty(), "{}:{}: column {}: the field is empty", path_, line_no, c);
      if (f.size() > 1 && f.front() == '+') f.remove_prefix(1);  // from_chars takes '-' but not '+'
      double v = 0;
      const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      BRAID_CHECK_ARG(ec == std::errc() && end == f.data() + f.size(), "{}:{}: column {}: '{}' is not a number",
                      path_, line_no, c, fields[c]);
      BRAID_CHECK_ARG(std::isfinite(v), "{}:{}: column {}: '{}' is not a finite number", path_, line_no, c,
                      fields[c]);
      row.push_back(v);
    }
    return row;
  }

  std::string path_;
  bool header_;
};

}  // namespace

std::unique_ptr<Dataset> load_csv_dataset(const std::string& path, const DataSpec& spec) {
  CsvReader reader(path, spec.header);
  reader.read();
  const int64_t width = reader.width;
  const int64_t label = spec.label_column < 0 ? spec.label_column + width : spec.label_column;
  BRAID_CHECK_ARG(0 <= label && label < width, "{}: data.label_column {} is out of range for {} columns", path,
                  spec.label_column, width);
  const std::vector<int64_t> columns = resolve_feature_columns(spec.feature_columns, width, label, path);

  const auto n = static_cast<int64_t>(reader.rows.size());
  const auto f = static_cast<int64_t>(columns.size());
  std::vector<float> features;
  features.reserve(static_cast<size_t>(n * f));
  std::vector<int64_t> labels;
  labels.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<double>& row = reader.rows[static_cast<size_t>(i)];
    const double y = row[static_cast<size_t>(label)];
    const int64_t line_no = reader.line_numbers[static_cast<size_t>(i)];
    BRAID_CHECK_ARG(y == std::floor(y), "{}:{}: column {} (the label): {} is not an integer class id", path,
                    line_no, label, y);
    BRAID_CHECK_ARG(0 <= y && y < static_cast<double>(kMaxClasses),
                    "{}:{}: column {} (the label): class id {} is not in [0, {})", path, line_no, label, y,
                    kMaxClasses);
    labels.push_back(static_cast<int64_t>(y));
    for (const int64_t c : columns) {
      features.push_back(static_cast<float>(row[static_cast<size_t>(c)] * spec.feature_scale));
    }
  }
  Tensor labels_t = from_vector(labels, {n});
  const int classes = num_classes_of(labels_t, path);
  return std::make_unique<TabularDataset>(from_vector(features, {n, f}), std::move(labels_t), classes, path);
}

}  // namespace braid::runtime::data
