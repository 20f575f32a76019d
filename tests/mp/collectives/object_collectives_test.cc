// The object collectives (object_collectives/object_collectives.h): each of torch's six with values of every
// kind braid carries (none, bool, int, double, strings with any bytes, lists, tuples, maps, dense and sparse
// tensors, nested), objects of different sizes per rank, a subgroup addressed by global ranks, and the bad
// input: wrong list lengths, an announced size over the limit and a malformed payload, each named with the
// op, the rank that sent it and the reason.
#include "object_collectives/object_collectives.h"
#include "rpc/value_bytes.h"
#include "tensor/sparse.h"
#include "tests/mp/support/mp_test.h"
#include "tests/mp/support/registry_scope.h"

using namespace braid;
using namespace braid::mp;
using namespace braid::collectives;
using Catch::Contains;

namespace {

// Rank r's object: a map holding every kind, sized by r so that ranks' objects differ in length.
Value object_of(int r) {
  rpc::Dict d;
  d.set("rank", Value(int64_t{r}));
  d.set("half", Value(r / 2.0));
  d.set("odd", Value(r % 2 == 1));
  d.set("name", Value(std::string(static_cast<size_t>(r + 1), 'x') + std::string("\0\xff", 2)));
  d.set("nothing", Value());
  d.set("tensor", Value(braid::add(arange(0, r + 2, 1, DType::Float32), Scalar(double(r)))));
  d.set("sparse", Value(SparseTensor(from_vector<int64_t>({int64_t{r % 3}}, {1, 1}), from_vector<double>({1.5}, {1}), {3})
                            .to_tensor()));
  d.set("nested", rpc::list({Value(int64_t{r}), rpc::tuple({Value("t"), rpc::list({})})}));
  return Value(std::move(d));
}

const Value& field(const rpc::Dict& d, const char* key) {
  const Value* v = d.find(key);
  REQUIRE(v != nullptr);
  return *v;
}

// The parts of object_of(r) that identify it, compared field by field.
void check_object(const Value& v, int r) {
  INFO("object of rank " << r);
  const rpc::Dict& d = v.as_dict();
  CHECK(field(d, "rank").as_int() == r);
  CHECK(field(d, "half").as_double() == r / 2.0);
  CHECK(field(d, "odd").as_bool() == (r % 2 == 1));
  CHECK(field(d, "name").as_string() == std::string(static_cast<size_t>(r + 1), 'x') + std::string("\0\xff", 2));
  CHECK(field(d, "nothing").is_none());
  CHECK_THAT(field(d, "tensor").as_tensor(), Equals(braid::add(arange(0, r + 2, 1, DType::Float32), Scalar(double(r)))));
  const Tensor sparse = field(d, "sparse").as_tensor();
  REQUIRE(sparse.is_sparse());
  CHECK_THAT(as_sparse(sparse).to_dense(),
             Equals(SparseTensor(from_vector<int64_t>({int64_t{r % 3}}, {1, 1}), from_vector<double>({1.5}, {1}), {3})
                        .to_dense()));
  CHECK(field(d, "nested").items().at(1).items().at(0).as_string() == "t");
}

}  // namespace

TEST_CASE_METHOD(MpFixture, "objects: broadcast_object_list from every source", "[objects]") {
  Registry registry(*this);
  for (int src = 0; src < size(); ++src) {
    std::vector<Value> objects = rank() == src ? std::vector<Value>{object_of(src), Value("second"), Value(int64_t{7})}
                                               : std::vector<Value>(3);
    broadcast_object_list(objects, src);
    check_object(objects[0], src);
    CHECK(objects[1].as_string() == "second");
    CHECK(objects[2].as_int() == 7);
  }
}

TEST_CASE_METHOD(MpFixture, "objects: all_gather_object and gather_object, objects of every size", "[objects]") {
  Registry registry(*this);
  std::vector<Value> all(static_cast<size_t>(size()));
  all_gather_object(all, object_of(rank()));
  for (int r = 0; r < size(); ++r) check_object(all[static_cast<size_t>(r)], r);

  const int dst = size() - 1;
  std::vector<Value> gathered(static_cast<size_t>(size()));
  gather_object(object_of(rank()), rank() == dst ? &gathered : nullptr, dst);
  if (rank() == dst) {
    for (int r = 0; r < size(); ++r) check_object(gathered[static_cast<size_t>(r)], r);
  }
}

TEST_CASE_METHOD(MpFixture, "objects: scatter_object_list gives each rank its entry", "[objects]") {
  Registry registry(*this);
  std::vector<Value> inputs;
  if (rank() == 0) {
    for (int r = 0; r < size(); ++r) inputs.push_back(object_of(r));
  }
  std::vector<Value> output(1);
  scatter_object_list(output, inputs, 0);
  check_object(output[0], rank());
}

TEST_CASE_METHOD(MpFixture, "objects: send_object_list and recv_object_list, from a named and from any rank",
                 "[objects][p2p]") {
  if (size() < 2) return;
  Registry registry(*this);
  if (rank() == 1) {
    send_object_list({object_of(1), Value("tail")}, 0);
    send_object_list({Value(int64_t{42})}, 0);
  } else if (rank() == 0) {
    std::vector<Value> got(2);
    CHECK(recv_object_list(got, 1) == 1);
    check_object(got[0], 1);
    CHECK(got[1].as_string() == "tail");
    std::vector<Value> one(1);
    CHECK(recv_object_list(one) == 1);  // any source
    CHECK(one[0].as_int() == 42);
  }
}

TEST_CASE_METHOD(MpFixture, "objects: a subgroup's ranks are global ranks", "[objects][groups]") {
  if (size() < 3) return;
  Registry registry(*this);
  auto group = new_group({1, 2});
  if (rank() != 1 && rank() != 2) return;
  std::vector<Value> all(2);
  all_gather_object(all, object_of(rank()), group);
  check_object(all[0], 1);
  check_object(all[1], 2);
  std::vector<Value> objects = rank() == 2 ? std::vector<Value>{Value("from two")} : std::vector<Value>(1);
  broadcast_object_list(objects, 2, group);
  CHECK(objects[0].as_string() == "from two");
}

TEST_CASE_METHOD(MpFixture, "objects: bad lists, sizes over the limit and malformed payloads are named", "[objects][checks]") {
  if (size() < 2) return;
  Registry registry(*this);
  std::vector<Value> short_list(1);
  CHECK_THROWS_WITH(all_gather_object(short_list, Value(1)),
                    Contains("object_list must have one entry per rank (" + std::to_string(size()) + "), got 1"));
  std::vector<Value> empty_output;
  CHECK_THROWS_WITH(scatter_object_list(empty_output, {}, 0), Contains("a list of size at least 1"));
  CHECK_THROWS_WITH(gather_object(Value(1), nullptr, rank()), Contains("Must specify object_gather_list on dst rank"));

  // Over the limit: rank 1 broadcasts an object larger than rank 0 accepts; rank 0 refuses it by its
  // announced size, naming rank 1, before a buffer of that size exists.
  ObjectOptions small;
  small.max_bytes = 64;
  std::vector<Value> big = rank() == 1 ? std::vector<Value>{Value(std::string(1000, 'b'))} : std::vector<Value>(1);
  if (rank() == 1) {
    broadcast_object_list(big, 1);
  } else {
    CHECK_THROWS_WITH(broadcast_object_list(big, 1, std::nullopt, small),
                      Contains("broadcast_object_list") && Contains("rank 1 announced") &&
                          Contains("over the limit of 64 bytes"));
  }
  // The refusing ranks still take the payload off the group, so the group stays in step: a barrier
  // proves it below. (A rank that refuses by size receives nothing more of that call.)
  if (rank() != 1) {
    TensorList payload{dev(zeros({static_cast<int64_t>(rpc::value_to_bytes(Value(std::string(1000, 'b'))).size())},
                                 DType::UInt8))};
    BroadcastOptions o;
    o.root_rank = 1;
    default_group()->broadcast(payload, o)->wait();
  }

  // Malformed: rank 1 sends sizes and bytes by hand, as a hostile peer would; rank 0's recv_object_list
  // names rank 1 and what is wrong, and allocates nothing beyond the bytes it got.
  if (rank() == 1) {
    std::vector<uint8_t> junk = rpc::value_to_bytes(Value(int64_t{5}));
    junk[junk.size() - 9] = 0x7f;  // inside the encoded value: an unknown kind byte
    TensorList sizes{dev(from_vector<int64_t>({static_cast<int64_t>(junk.size())}, {1}))};
    TensorList data{dev(from_vector(junk, {static_cast<int64_t>(junk.size())}))};
    default_group()->send(sizes, 0, 0)->wait();
    default_group()->send(data, 0, 0)->wait();
  } else if (rank() == 0) {
    std::vector<Value> got(1);
    CHECK_THROWS_WITH(recv_object_list(got, 1), Contains("recv_object_list") && Contains("object 0 from rank 1 is malformed"));
  }
  default_group()->barrier()->wait();
}
