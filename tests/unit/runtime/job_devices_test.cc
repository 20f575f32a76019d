// Where each role computes: the job file's `device` and `devices` keys (runtime/job/job_spec.h), which
// backend the trainers reduce over, and each rank's concrete device (runtime/run/rank_device.h) on hosts
// with and without GPUs. A host's devices are injected (DeviceInventory), so every branch runs here.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "runtime/data/dataset.h"
#include "runtime/job/job_spec.h"
#include "runtime/run/rank_device.h"
#include "tensor/factory.h"
#include "tests/support/error_of.h"

using namespace braid;
using braid::testing::error_of;
using namespace braid::runtime;
using Catch::Matchers::Contains;

namespace {

JobSpec parse(const std::string& yaml) { return parse_job_text(yaml, "job.yaml", "/jobs"); }

const char* kHybrid = "roles: {trainers: 2, workers: 1, master: 1}\nmodel: {kind: hybrid}\n";

const DeviceInventory kNoGpu{0, "no CUDA driver found"};
const DeviceInventory kTwoGpus{2, ""};

}  // namespace

TEST_CASE("every role computes on the CPU unless the job says otherwise", "[job][device]") {
  const JobSpec job = parse(kHybrid);
  CHECK(job.devices.all == DeviceKind::Cpu);
  CHECK(job.devices.trainer() == DeviceKind::Cpu);
  CHECK(job.devices.worker() == DeviceKind::Cpu);
  CHECK(trainers_backend(job) == Backend::Gloo);
  CHECK(world_backend(job) == Backend::Gloo);
  CHECK(to_json(job)["device"] == "cpu");
  CHECK(to_json(job)["devices"]["trainers"].is_null());
}

TEST_CASE("device: cuda puts every computing role on CUDA, and the trainers reduce over nccl", "[job][device]") {
  const JobSpec job = parse(std::string(kHybrid) + "device: cuda\n");
  CHECK(job.devices.trainer() == DeviceKind::Cuda);
  CHECK(job.devices.worker() == DeviceKind::Cuda);
  CHECK(trainers_backend(job) == Backend::Nccl);
  // The default group carries the CPU roles' messages: never nccl.
  CHECK(world_backend(job) == Backend::Gloo);

  const JobSpec mpi = parse(std::string(kHybrid) + "device: cuda\nbackend: mpi\n");
  CHECK(trainers_backend(mpi) == Backend::Nccl);
  CHECK(world_backend(mpi) == Backend::Mpi);

  const JobSpec nccl = parse(std::string(kHybrid) + "device: cuda\nbackend: nccl\n");
  CHECK(trainers_backend(nccl) == Backend::Nccl);
  CHECK(world_backend(nccl) == Backend::Gloo);
}

TEST_CASE("devices chooses per role, ahead of device", "[job][device]") {
  const JobSpec job = parse(std::string(kHybrid) + "devices: {trainers: cuda, workers: cpu}\n");
  CHECK(job.devices.trainer() == DeviceKind::Cuda);
  CHECK(job.devices.worker() == DeviceKind::Cpu);
  CHECK(trainers_backend(job) == Backend::Nccl);

  const JobSpec workers = parse(std::string(kHybrid) + "device: cuda\ndevices: {workers: cpu}\n");
  CHECK(workers.devices.trainer() == DeviceKind::Cuda);
  CHECK(workers.devices.worker() == DeviceKind::Cpu);

  const JobSpec gpu_workers = parse(std::string(kHybrid) + "devices: {workers: cuda}\n");
  CHECK(gpu_workers.devices.trainer() == DeviceKind::Cpu);
  CHECK(trainers_backend(gpu_workers) == Backend::Gloo);
}

TEST_CASE("bad device keys are refused with the key and the choices", "[job][device]") {
  CHECK_THAT(error_of([] { parse(std::string(kHybrid) + "device: gpu\n"); }),
             Contains("device: 'gpu' is not one of cpu, cuda"));
  CHECK_THAT(error_of([] { parse(std::string(kHybrid) + "device: cuda:1\n"); }),
             Contains("device: 'cuda:1' is not one of cpu, cuda"));
  CHECK_THAT(error_of([] { parse(std::string(kHybrid) + "devices: {trainers: tpu}\n"); }),
             Contains("devices.trainers: 'tpu' is not one of cpu, cuda"));
  // The master drives and computes nothing: it has no device key.
  CHECK_THAT(error_of([] { parse(std::string(kHybrid) + "devices: {master: cuda}\n"); }),
             Contains("devices.master: unknown key"));
  CHECK_THAT(error_of([] { parse(std::string(kHybrid) + "devices: cuda\n"); }), Contains("devices"));
  CHECK_THAT(error_of([] { parse(std::string(kHybrid) + "backend: nccl\n"); }),
             Contains("backend: nccl reduces CUDA tensors, but the trainers compute on the CPU"));
  CHECK_THAT(error_of([] { parse(std::string(kHybrid) + "backend: nccl\ndevices: {workers: cuda}\n"); }),
             Contains("set device: cuda (or devices.trainers: cuda)"));
}

TEST_CASE("device overrides follow the file's meaning and round-trip through to_json", "[job][device]") {
  JobSpec job = parse(kHybrid);
  apply_override(job, "device=cuda");
  CHECK(job.devices.trainer() == DeviceKind::Cuda);
  CHECK(job.devices.worker() == DeviceKind::Cuda);
  apply_override(job, "devices.workers=cpu");
  CHECK(job.devices.worker() == DeviceKind::Cpu);
  CHECK(job.devices.trainer() == DeviceKind::Cuda);
  const JobSpec back = parse_job_text(to_json(job).dump(), "job.yaml", "/jobs");
  CHECK(to_json(back) == to_json(job));
  // A CUDA-only backend cannot stay once the trainers go back to the CPU; the job is left as it was.
  apply_override(job, "backend=nccl");
  CHECK_THAT(error_of([&] { apply_override(job, "device=cpu"); }), Contains("nccl reduces CUDA tensors"));
  CHECK(job.devices.trainer() == DeviceKind::Cuda);
}

TEST_CASE("a CPU role stays on the CPU whatever the host has", "[device]") {
  const JobSpec job = parse(std::string(kHybrid) + "devices: {trainers: cuda}\n");
  CHECK(rank_device(job, Role::Worker, 2, 2, kNoGpu) == Device::cpu());
  CHECK(rank_device(job, Role::Master, 3, 3, kTwoGpus) == Device::cpu());
  // The master has no device even when every role's is cuda.
  CHECK(rank_device(parse(std::string(kHybrid) + "device: cuda\n"), Role::Master, 3, 3, kNoGpu) == Device::cpu());
}

TEST_CASE("a CUDA rank takes the device of its local rank, sharing when there are fewer", "[device]") {
  const JobSpec job = parse(std::string(kHybrid) + "device: cuda\n");
  CHECK(rank_device(job, Role::Trainer, 0, 0, kTwoGpus) == Device::cuda(0));
  CHECK(rank_device(job, Role::Trainer, 1, 1, kTwoGpus) == Device::cuda(1));
  CHECK(rank_device(job, Role::Worker, 2, 2, kTwoGpus) == Device::cuda(0));
  // Two hosts: the local rank counts, not the global one.
  CHECK(rank_device(job, Role::Trainer, 5, 1, kTwoGpus) == Device::cuda(1));
  // A launcher that does not say: the rank stands in.
  CHECK(rank_device(job, Role::Trainer, 3, -1, kTwoGpus) == Device::cuda(1));
}

TEST_CASE("a CUDA role on a host without a GPU is refused naming the rank, the role and why", "[device]") {
  const JobSpec job = parse(std::string(kHybrid) + "devices: {trainers: cuda, workers: cuda}\n");
  CHECK_THAT(error_of([&] { rank_device(job, Role::Trainer, 1, 1, kNoGpu); }),
             Contains("the job asks for device cuda on rank 1 (trainer), but this host has no CUDA device (no CUDA "
                      "driver found)"));
  CHECK_THAT(error_of([&] { rank_device(job, Role::Worker, 2, 2, kNoGpu); }),
             Contains("device cuda on rank 2 (worker)"));
  // What this machine really has: the same refusal when it has no GPU.
  const DeviceInventory here = local_devices();
  if (here.cuda_count == 0) {
    CHECK_FALSE(here.unavailable_reason.empty());
    CHECK_THAT(error_of([&] { rank_device(job, Role::Trainer, 0, 0, here); }), Contains(here.unavailable_reason));
  }
}

TEST_CASE("two NCCL trainers on one device of one host are refused before NCCL would", "[device]") {
  const JobSpec job = parse("roles: {trainers: 3, workers: 1}\nmodel: {kind: hybrid}\ndevice: cuda\n");
  CHECK_NOTHROW(check_trainer_devices(job, {{0, "h1 cuda:0"}, {1, "h1 cuda:1"}, {2, "h2 cuda:0"}, {3, "h1 cuda:0"}}));
  CHECK_THAT(error_of([&] { check_trainer_devices(job, {{0, "h1 cuda:0"}, {1, "h2 cuda:0"}, {2, "h1 cuda:0"}}); }),
             Contains("trainers rank 0 and rank 2 are both on h1 cuda:0, and NCCL cannot put two ranks of one group "
                      "on one device"));
  // CPU trainers share their host as they like.
  const JobSpec cpu = parse("roles: {trainers: 2}\nmodel: {kind: mlp}\n");
  CHECK_NOTHROW(check_trainer_devices(cpu, {{0, "h1 cpu"}, {1, "h1 cpu"}}));
}

TEST_CASE("a batch moves to its trainer's device as a whole", "[device]") {
  Batch b;
  b.inputs = {arange(6, DType::Float32).reshape({3, 2}), Tensor()};
  b.target = arange(3, DType::Int64);
  const Batch same = b.to(Device::cpu());
  REQUIRE(same.inputs.size() == 2);
  CHECK(same.inputs[0].data_ptr() == b.inputs[0].data_ptr());  // already there: no copy
  CHECK_FALSE(same.inputs[1].defined());
  CHECK(same.target.data_ptr() == b.target.data_ptr());
}
