#include "collectives/mpi/mpi_bootstrap.h"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <string>

#include "base/check.h"
#include "collectives/mpi/mpi_runtime.h"
#include "store/tcp_store.h"

namespace braid::collectives::mpi {

namespace {

constexpr size_t kHostLen = 256;

std::string host_name() {
  std::array<char, kHostLen> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return std::string(name.data());
}

// What rank 0 tells the others: its host name and the port, or an error (port 0) that every rank throws
// so that no rank is left waiting to connect to a server that never started.
struct Address {
  std::array<char, kHostLen> host{};
  std::array<char, kHostLen> error{};
  int32_t port = 0;
};

}  // namespace

std::shared_ptr<store::Store> mpi_bootstrap_store(Millis timeout) {
  const auto runtime = MpiRuntime::acquire();
  const std::string what = "mpi_bootstrap_store";
  // A private communicator: the broadcast must not meet the application's traffic on MPI_COMM_WORLD.
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup", what);
  struct FreeComm {
    MPI_Comm* c;
    ~FreeComm() { MPI_Comm_free(c); }
  } free_comm{&comm};
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

  store::TcpStoreOptions options;
  options.timeout = timeout;
  options.world_size = runtime->world_size();
  options.wait_for_workers = false;  // the workers learn the port only after the constructor returns

  std::shared_ptr<store::TCPStore> master;
  Address address;
  if (runtime->world_rank() == 0) {
    options.is_master = true;
    try {
      master = std::make_shared<store::TCPStore>("0.0.0.0", 0, options);
      address.port = master->port();
      std::strncpy(address.host.data(), host_name().c_str(), kHostLen - 1);
    } catch (const std::exception& e) {
      std::strncpy(address.error.data(), e.what(), kHostLen - 1);
    }
  }
  check_mpi(MPI_Bcast(&address, sizeof(Address), MPI_BYTE, 0, comm), "MPI_Bcast", what);
  if (address.port == 0) {
    BRAID_THROW(CommError, "{}: rank 0 could not start the TCPStore server: {}", what, address.error.data());
  }
  if (master) return master;
  const std::string host = address.host.data() == host_name() ? "127.0.0.1" : std::string(address.host.data());
  options.is_master = false;
  return std::make_shared<store::TCPStore>(host, static_cast<uint16_t>(address.port), options);
}

}  // namespace braid::collectives::mpi
