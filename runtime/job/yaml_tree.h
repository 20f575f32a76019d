// YAML text → nlohmann::json, keeping where each key was written.
//
// The job parser works on JSON only, so that a job file, a `--set` override and a job stored with a
// checkpoint (to_json) all go through the same checks. YAML scalars become typed JSON values by YAML 1.2's
// core schema: quoted scalars are strings; plain ones are null (~, null, empty), booleans (true/false),
// integers, floats (including .inf/.nan) or else strings.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace braid::runtime::job_detail {

// Dotted key path ("optimizer.lr", "roles.trainers[2]") → the 1-based line where it was written.
using LineMap = std::map<std::string, int>;

struct YamlTree {
  nlohmann::json value;
  LineMap lines;
};

// A job file is a few kilobytes; these bounds refuse what cannot be one long before it costs time or
// memory (docs/JOBS.md, "Limits"). kMaxYamlNodes counts the nodes of the converted tree, so an alias
// counts once per place it is used.
inline constexpr size_t kMaxYamlBytes = size_t{1} << 20;
inline constexpr size_t kMaxYamlNodes = 100'000;

// Whether `s` is valid UTF-8. nlohmann refuses to write a string that is not (its type_error 316), and a
// job's strings are written out: `braid check --print`, the copy kept with checkpoints, quoted in error
// messages. So parse_yaml() refuses such values and keys where the line is known, and an override's key
// is checked the same way.
bool valid_utf8(const std::string& s);

// Parses one YAML document. Throws InvalidArgument "<origin>:<line>: ..." on a syntax error or a
// duplicate key, and "<origin>: ..." naming the limit for a text over kMaxYamlBytes or a tree over
// kMaxYamlNodes.
YamlTree parse_yaml(const std::string& text, const std::string& origin);

// The line of `path` or, failing that, of its closest written parent; 0 when none is known.
int line_of(const LineMap& lines, const std::string& path);

}  // namespace braid::runtime::job_detail
