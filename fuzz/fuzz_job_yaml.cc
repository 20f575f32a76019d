// The job file parser (runtime/job/job_spec.h): YAML text → YamlTree → JobSpec, every check included.
//
// Input byte 0: even parses the rest as a whole job file (then turns the job into JSON, as `braid check
// --print` does); odd applies the rest as one `--set KEY=VALUE` override to a small valid job.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.h"
#include "runtime/job/job_spec.h"

namespace {

namespace runtime = braid::runtime;

// A complete job that needs no file: synthetic data, FSDP off, one trainer and a master.
constexpr const char* kBaseJob = R"(name: base
backend: gloo
roles: {master: 0, trainers: [1]}
model: {kind: mlp, args: {in: 8, hidden: [4], out: 2}, init_seed: 1}
loss: cross_entropy
data: {kind: synthetic, num_samples: 64, num_features: 8, num_classes: 2, seed: 5}
optimizer: {kind: sgd, lr: 0.1}
train: {epochs: 1, batch_size: 8, seed: 0}
)";

const runtime::JobSpec& base_job() {
  static const runtime::JobSpec job = runtime::parse_job_text(kBaseJob, "base.yaml", "/fuzz");
  return job;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) {
    runtime::JobSpec job;
    if (braid::fuzz::accepts([&] { job = runtime::parse_job_text(text, "fuzz.yaml", "/fuzz"); })) {
      (void)runtime::to_json(job).dump();
    }
  } else {
    runtime::JobSpec job = base_job();
    if (braid::fuzz::accepts([&] { runtime::apply_override(job, text); })) (void)runtime::to_json(job).dump();
  }
  return 0;
}
