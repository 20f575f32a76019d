#include "runtime/job/yaml_tree.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <regex>
#include <set>

#include "base/error.h"

namespace braid::runtime::job_detail {
namespace {

using nlohmann::json;

// YAML 1.2 core schema (https://yaml.org/spec/1.2.2/#1032-tag-resolution), decimal integers only.
const std::regex kInt{R"([-+]?[0-9]+)"};
const std::regex kFloat{R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)"};
const std::regex kInf{R"([-+]?\.(inf|Inf|INF))"};
const std::regex kNan{R"(\.(nan|NaN|NAN))"};

json plain_scalar(const std::string& s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (std::regex_match(s, kInt)) {
    errno = 0;
    const long long v = std::strtoll(s.c_str(), nullptr, 10);
    if (errno == 0) return static_cast<int64_t>(v);
    errno = 0;
    const unsigned long long u = std::strtoull(s.c_str(), nullptr, 10);
    if (errno == 0 && s[0] != '-') return static_cast<uint64_t>(u);
    return std::strtod(s.c_str(), nullptr);  // too large for any integer: keep its magnitude as a float
  }
  if (std::regex_match(s, kFloat)) return std::strtod(s.c_str(), nullptr);
  if (std::regex_match(s, kInf)) {
    return s[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  if (std::regex_match(s, kNan)) return std::numeric_limits<double>::quiet_NaN();
  return s;
}

class Converter {
 public:
  explicit Converter(const std::string& origin) : origin_(origin) {}

  json convert(const YAML::Node& node, const std::string& path) {
    // yaml-cpp keeps an alias as a second reference to its anchor's node, so loading is cheap, but the
    // JSON tree copies it once per reference: nested aliases ("billion laughs") grow it exponentially.
    // Counting every node converted bounds the time and memory whatever the aliases do.
    if (++nodes_ > kMaxYamlNodes) {
      throw InvalidArgument(fmt::format(
          "{}: the YAML expands to more than {} nodes (at '{}'); braid refuses it. Aliases (*name) copy the "
          "node they name, so nested aliases multiply; a job file this large is not a job file",
          origin_, kMaxYamlNodes, path));
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null: return nullptr;
      case YAML::NodeType::Scalar: {
        if (!valid_utf8(node.Scalar())) {
          throw InvalidArgument(fmt::format("{}:{}: {}: the value is not valid UTF-8", origin_, node.Mark().line + 1,
                                            path.empty() ? "the document" : path));
        }
        // "!" marks a quoted scalar: a string whatever it spells ("123", "true").
        const std::string& tag = node.Tag();
        if (tag == "!" || tag == "tag:yaml.org,2002:str") return node.Scalar();
        return plain_scalar(node.Scalar());
      }
      case YAML::NodeType::Sequence: {
        json out = json::array();
        for (size_t i = 0; i < node.size(); ++i) {
          const std::string item = fmt::format("{}[{}]", path, i);
          record(item, node[i]);
          out.push_back(convert(node[i], item));
        }
        return out;
      }
      case YAML::NodeType::Map: {
        json out = json::object();
        for (auto it = node.begin(); it != node.end(); ++it) {
          const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string("?");
          if (!valid_utf8(key)) {
            // The key itself cannot be quoted in the message: it would carry the bad bytes along.
            throw InvalidArgument(fmt::format("{}:{}: {}: a key is not valid UTF-8", origin_,
                                              it->first.Mark().line + 1, path.empty() ? "the top level" : path));
          }
          const std::string item = path.empty() ? key : path + "." + key;
          record(item, it->first);
          // yaml-cpp keeps both copies of a repeated key; a job file that sets a key twice is a mistake.
          if (out.contains(key)) {
            throw InvalidArgument(
                fmt::format("{}:{}: {}: the key is given twice", origin_, it->first.Mark().line + 1, item));
          }
          out[key] = convert(it->second, item);
        }
        return out;
      }
    }
    return nullptr;
  }

  LineMap take_lines() { return std::move(lines_); }

 private:
  void record(const std::string& path, const YAML::Node& node) {
    const YAML::Mark mark = node.Mark();
    if (!mark.is_null()) lines_.emplace(path, mark.line + 1);
  }

  const std::string& origin_;
  LineMap lines_;
  size_t nodes_ = 0;
};

}  // namespace

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

YamlTree parse_yaml(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxYamlBytes) {
    throw InvalidArgument(fmt::format("{}: the YAML text is {} bytes, more than the limit of {} bytes for a job",
                                      origin, text.size(), kMaxYamlBytes));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) throw InvalidArgument(fmt::format("{}: invalid YAML: {}", origin, e.msg));
    throw InvalidArgument(fmt::format("{}:{}:{}: invalid YAML: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  Converter converter(origin);
  YamlTree tree;
  tree.value = converter.convert(root, "");
  tree.lines = converter.take_lines();
  return tree;
}

int line_of(const LineMap& lines, const std::string& path) {
  std::string p = path;
  while (!p.empty()) {
    if (auto it = lines.find(p); it != lines.end()) return it->second;
    const auto cut = p.find_last_of(".[");
    if (cut == std::string::npos) break;
    p.resize(cut);
  }
  return 0;
}

}  // namespace braid::runtime::job_detail
