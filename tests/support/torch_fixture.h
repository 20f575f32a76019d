// Reading the JSON references that tests/fixtures/make_*_fixtures.py wrote with PyTorch: a tensor is
// {"shape": [...], "values": [...]} (row-major doubles).
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/factory.h"

namespace braid::testing {

// tests/fixtures/<file>, parsed.
inline nlohmann::json load_torch_fixture(const std::string& file) {
  const auto path = std::filesystem::path(__FILE__).parent_path() / "../fixtures" / file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open fixture " + path.string());
  return nlohmann::json::parse(in);
}

inline Tensor fixture_tensor(const nlohmann::json& entry, DType dtype = DType::Float32) {
  const auto shape = entry.at("shape").get<std::vector<int64_t>>();
  return from_vector(entry.at("values").get<std::vector<double>>(), Shape(shape.begin(), shape.end())).to(dtype);
}

// The case named `name` of a fixture's "cases" list.
inline const nlohmann::json& fixture_case(const nlohmann::json& doc, const std::string& name) {
  for (const auto& c : doc.at("cases")) {
    if (c.at("name") == name) return c;
  }
  throw std::runtime_error("fixture has no case " + name);
}

}  // namespace braid::testing
