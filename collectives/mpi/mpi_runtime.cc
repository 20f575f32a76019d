#include "collectives/mpi/mpi_runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>

#include "base/check.h"
#include "base/logging.h"

namespace braid::collectives::mpi {

namespace {

// Open MPI's default libnbc iallreduce choice is 1.5-3x slower than the blocking (coll/tuned) allreduce on
// this machine; Rabenseifner's reduce-scatter + allgather matches it (README.md, "Why nonblocking").
// Only set when the user did not choose, and only takes effect when braid initialises MPI.
constexpr const char* kLibnbcAllreduceVar = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";
constexpr const char* kLibnbcAllreduceDefault = "3";  // rabenseifner

struct Holder {
  std::once_flag once;
  std::shared_ptr<MpiRuntime> runtime;
  std::string error;  // set instead of runtime when initialisation failed
};

// MPI_User_function for MPI_INT8_T and MPI_UINT8_T: two's complement makes one unsigned loop right for both.
void wrapping_byte_sum_fn(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const uint8_t*>(in);
  auto* b = static_cast<uint8_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<uint8_t>(a[i] + b[i]);
}

// The value of the boolean control variable `name` through the MPI tool interface (MPI_T), or `fallback`
// when the library does not have it. Open MPI stores booleans as MPI_C_BOOL, so the value is read into a
// zeroed buffer and any non-zero byte of the type's size counts as true.
bool read_bool_cvar(const char* name, bool fallback) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return fallback;
  bool value = fallback;
  int index = 0;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS) {
    MPI_Datatype type = MPI_DATATYPE_NULL;
    int verbosity = 0, bind = 0, scope = 0;
    MPI_T_enum enumtype = MPI_T_ENUM_NULL;
    int name_len = 0, desc_len = 0;  // 0: the names are not wanted
    MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
    int count = 0;
    int size = 0;
    if (MPI_T_cvar_get_info(index, nullptr, &name_len, &verbosity, &type, &enumtype, nullptr, &desc_len, &bind,
                            &scope) == MPI_SUCCESS &&
        MPI_Type_size(type, &size) == MPI_SUCCESS && size > 0 && size <= 8 &&
        MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
      unsigned char bytes[16] = {};
      if (count == 1 && MPI_T_cvar_read(handle, bytes) == MPI_SUCCESS) {
        value = std::any_of(bytes, bytes + size, [](unsigned char b) { return b != 0; });
      }
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return value;
}

std::atomic<bool> g_progress_yields_when_idle{false};

Holder& holder() {
  // Destroyed during static destruction; the runtime lives on while groups still hold it.
  static Holder h;
  return h;
}

}  // namespace

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

std::string mpi_error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return fmt::format("{} (MPI error {})", std::string(text, static_cast<size_t>(len)), rc);
}

void check_mpi(int rc, const char* call, const std::string& what) {
  if (rc == MPI_SUCCESS) [[likely]] return;
  BRAID_THROW(CommError, "{} failed in {}: {}", call, what, mpi_error_string(rc));
}

bool MpiRuntime::progress_yields_when_idle() {
  return g_progress_yields_when_idle.load(std::memory_order_relaxed);
}

bool MpiRuntime::finalized() {
  int done = 0;
  MPI_Finalized(&done);  // callable at any time, even after MPI_Finalize
  return done != 0;
}

std::shared_ptr<MpiRuntime> MpiRuntime::create() {
  if (finalized()) {
    BRAID_THROW(CommError, "cannot initialise MPI: MPI_Finalize was already called in this process, and MPI "
                "cannot be initialised twice");
  }
  std::shared_ptr<MpiRuntime> runtime(new MpiRuntime());
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      BRAID_THROW(CommError, "the application initialised MPI with {}, but braid's mpi backend needs "
                  "MPI_THREAD_MULTIPLE: call MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or let braid "
                  "initialise MPI", thread_level_name(provided));
    }
  } else {
    if (std::getenv(kLibnbcAllreduceVar) == nullptr) ::setenv(kLibnbcAllreduceVar, kLibnbcAllreduceDefault, 0);
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) BRAID_THROW(CommError, "MPI_Init_thread failed: {}", mpi_error_string(rc));
    runtime->owns_mpi_ = true;  // from here on the destructor finalises, whatever happens below
    if (provided < MPI_THREAD_MULTIPLE) {
      BRAID_THROW(CommError, "MPI_Init_thread(MPI_THREAD_MULTIPLE) gave only {}: this Open MPI was built "
                  "without thread support (ompi_info | grep 'Thread support')", thread_level_name(provided));
    }
  }
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &runtime->world_rank_), "MPI_Comm_rank", "MPI initialisation");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &runtime->world_size_), "MPI_Comm_size", "MPI initialisation");
  check_mpi(MPI_Op_create(&wrapping_byte_sum_fn, /*commute=*/1, &runtime->wrapping_byte_sum_), "MPI_Op_create",
            "MPI initialisation");
  const bool yields = read_bool_cvar("mpi_yield_when_idle", false);
  g_progress_yields_when_idle.store(yields, std::memory_order_relaxed);
  logging::get("braid.coll")->debug("MPI {} by {} at {} (world rank {}/{}, mpi_yield_when_idle {})",
                                    runtime->owns_mpi_ ? "initialised" : "already initialised",
                                    runtime->owns_mpi_ ? "braid" : "the application", thread_level_name(provided),
                                    runtime->world_rank_, runtime->world_size_,
                                    yields);
  return runtime;
}

std::shared_ptr<MpiRuntime> MpiRuntime::acquire() {
  Holder& h = holder();
  std::call_once(h.once, [&h] {
    try {
      h.runtime = create();
    } catch (const std::exception& e) {
      // Remembered rather than retried: a second MPI_Init_thread after a failed one is not allowed.
      h.error = e.what();
    }
  });
  if (!h.runtime) BRAID_THROW(CommError, "{}", h.error);
  return h.runtime;
}

void MpiRuntime::keep_until_finalize(std::any keep) {
  std::lock_guard<std::mutex> lock(mu_);
  graveyard_.push_back(std::move(keep));
}

MpiRuntime::~MpiRuntime() {
  if (wrapping_byte_sum_ != MPI_OP_NULL && !finalized()) MPI_Op_free(&wrapping_byte_sum_);
  if (owns_mpi_ && !finalized()) {
    MPI_Finalize();
  } else if (!finalized() && !graveyard_.empty()) {
    // The application's MPI lives on and may still complete those requests into these buffers: keep them,
    // reachable from a static so that leak checkers do not count them.
    static auto* kept = new std::vector<std::any>();
    for (auto& k : graveyard_) kept->push_back(std::move(k));
  }
}

}  // namespace braid::collectives::mpi
