// remote_device strings: the forms RemoteModule accepts, every malformed one rejected with a message that
// quotes the string and gives the format, and resolution to a worker through the running RPC agent.
#include <catch2/catch.hpp>

#include <string>

#include "base/config.h"
#include "base/error.h"
#include "dist_autograd/remote_device.h"
#include "tests/unit/dist_autograd/solo_rpc.h"

namespace braid::dist_autograd {

namespace {

// The message of parsing `text`, which must fail with InvalidArgument.
std::string parse_error(const std::string& text) {
  try {
    RemoteDevice::parse(text);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  FAIL("remote_device '" << text << "' parsed, but it should not");
  return {};
}

}  // namespace

TEST_CASE("remote_device: '<worker>/<device>', '<worker>' and 'rank:<n>/<device>' parse", "[remote_device]") {
  const RemoteDevice a = RemoteDevice::parse("worker0/cpu");
  CHECK(a.worker_name() == "worker0");
  CHECK(a.rank() == -1);
  CHECK(a.device() == Device::cpu());
  CHECK(a.str() == "worker0/cpu");

  const RemoteDevice b = RemoteDevice::parse("trainer_7");
  CHECK(b.worker_name() == "trainer_7");
  CHECK(b.device() == Device::cpu());  // the default device

  const RemoteDevice c = RemoteDevice::parse("rank:12/cpu");
  CHECK(c.worker_name().empty());
  CHECK(c.rank() == 12);
  CHECK(c.device() == Device::cpu());

  const RemoteDevice d = RemoteDevice::parse("rank:0");
  CHECK(d.rank() == 0);
  CHECK(d.device() == Device::cpu());
}

TEST_CASE("remote_device: CUDA devices parse only in a build with CUDA", "[remote_device]") {
  for (const std::string text : {"worker1/cuda:1", "rank:0/cuda", "worker0/cuda:0"}) {
    if (BRAID_HAVE_CUDA) {
      const RemoteDevice r = RemoteDevice::parse(text);
      CHECK(r.device().is_cuda());
    } else {
      const std::string msg = parse_error(text);
      CHECK_THAT(msg, Catch::Contains("needs CUDA"));
      CHECK_THAT(msg, Catch::Contains("'" + text + "'"));
    }
  }
  if (BRAID_HAVE_CUDA) {
    CHECK(RemoteDevice::parse("worker1/cuda:1").device() == Device::cuda(1));
    CHECK(RemoteDevice::parse("rank:0/cuda").device() == Device::cuda(0));
    CHECK_THAT(parse_error("worker0/cuda:x"), Catch::Contains("invalid device 'cuda:x'"));
  }
}

TEST_CASE("remote_device: malformed strings fail, quoting the string and giving the format", "[remote_device]") {
  struct Case {
    std::string text;
    std::string why;
  };
  const Case cases[] = {
      {"", "the worker name is empty"},
      {"/cpu", "the worker name is empty"},
      {"/", "the worker name is empty"},
      {"worker0/", "the device after '/' is empty"},
      {"worker0/gpu", "unknown device 'gpu'"},
      {"worker0/CPU", "unknown device 'CPU'"},
      {"rank:x/cpu", "the rank 'x' is not a non-negative integer"},
      {"rank:/cpu", "the rank '' is not a non-negative integer"},
      {"rank:-1/cpu", "the rank '-1' is not a non-negative integer"},
      {"rank:1x/cpu", "the rank '1x' is not a non-negative integer"},
      {"rank:99999999999/cpu", "the rank '99999999999' is not a non-negative integer"},
      {"a/b/c", "it has 3 '/'-separated fields, at most 2 are allowed"},
      {"worker0/cpu/", "it has 3 '/'-separated fields"},
      {"a:b/cpu", "worker part 'a:b' has a ':' but is not of the form 'rank:<rank>'"},
      {"rank:1:2/cpu", "worker part 'rank:1:2' has a ':'"},
      {"cpu", "'cpu' is a device alone and names no worker"},
      {"cuda:0", "'cuda:0' is a device alone and names no worker"},
  };
  for (const Case& c : cases) {
    INFO("remote_device '" << c.text << "'");
    const std::string msg = parse_error(c.text);
    CHECK_THAT(msg, Catch::StartsWith("Could not parse remote_device '" + c.text + "': "));
    CHECK_THAT(msg, Catch::Contains(c.why));
    CHECK_THAT(msg, Catch::Contains("The valid format is '<workername>/<device>' or 'rank:<rank>/<device>'"));
  }
}

TEST_CASE("remote_device: worker() resolves names and ranks through the RPC agent", "[remote_device][rpc]") {
  SECTION("without RPC") {
    CHECK_THROWS_WITH(RemoteDevice::parse("worker0").worker(),
                      Catch::Contains("remote_device 'worker0': RPC has not been initialized"));
  }
  SECTION("in a job of one worker") {
    testing::SoloRpc job;
    const rpc::WorkerInfo by_name = RemoteDevice::parse("worker0/cpu").worker();
    CHECK(by_name.name == "worker0");
    CHECK(by_name.id == 0);
    CHECK(RemoteDevice::parse("rank:0/cpu").worker() == by_name);
    CHECK_THROWS_AS(RemoteDevice::parse("rank:1/cpu").worker(), InvalidArgument);
    CHECK_THROWS_WITH(RemoteDevice::parse("rank:1/cpu").worker(),
                      Catch::Contains("remote_device 'rank:1/cpu': no worker has rank 1 in this RPC job (workers: "
                                      "worker0 (rank 0))"));
    CHECK_THROWS_WITH(RemoteDevice::parse("worker9").worker(),
                      Catch::Contains("remote_device 'worker9': no worker is named 'worker9'"));
  }
}

}  // namespace braid::dist_autograd
