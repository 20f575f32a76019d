#include "collectives/mpi/mpi_bootstrap.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "base/check.h"
#include "collectives/mpi/mpi_runtime.h"
#include "security/job_secret.h"
#include "security/listen_address.h"
#include "store/tcp_store.h"

namespace braid::collectives::mpi {

namespace {

constexpr size_t kHostLen = 256;
constexpr size_t kSecretLen = 4096 + 1;  // JobSecret::from_file's bound, and a terminator

std::string host_name() {
  std::array<char, kHostLen> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return std::string(name.data());
}

// What rank 0 tells the others: where its store listens and the job secret, or an error (port 0) that
// every rank throws so that no rank is left waiting to connect to a server that never started. MPI is the
// one channel the ranks already trust, so the secret never touches a command line or a file.
struct Address {
  std::array<char, kHostLen> host{};
  std::array<char, kHostLen> error{};
  std::array<char, kSecretLen> secret{};
  int32_t port = 0;
  int32_t any = 0;  // the store listens on every interface (BRAID_BIND_ANY)
};

// Whether every rank of `comm` runs on this host (then the store stays on loopback).
bool single_host(MPI_Comm comm, const std::string& what) {
  MPI_Comm local = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local), "MPI_Comm_split_type", what);
  int local_size = 0, size = 0;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_size(comm, &size);
  int all_local = local_size == size ? 1 : 0;
  MPI_Comm_free(&local);
  // Every rank must agree, or rank 0 could pick loopback while a rank elsewhere needs the network.
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &all_local, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce", what);
  return all_local == 1;
}

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

  const bool local_job = single_host(comm, what);
  std::shared_ptr<store::TCPStore> master;
  Address address;
  if (runtime->world_rank() == 0) {
    options.is_master = true;
    try {
      const security::JobSecret secret = security::job_secret();
      BRAID_CHECK_ARG(secret.text().size() < kSecretLen, "{}: the job secret is longer than {} bytes", what,
                      kSecretLen - 1);
      std::memcpy(address.secret.data(), secret.text().data(), secret.text().size());
      options.secret = secret;
      const std::string bind = security::listen_host(local_job ? "127.0.0.1" : host_name());
      master = std::make_shared<store::TCPStore>(bind, 0, options);
      address.port = master->port();
      // Listening on every interface, the store is reached by the host's name (loopback on this host);
      // otherwise at what it bound, on this host too: a store bound to the host's network address (a job
      // across hosts) does not answer on 127.0.0.1.
      const std::string reach = bind == "0.0.0.0" ? host_name() : bind;
      std::strncpy(address.host.data(), reach.c_str(), kHostLen - 1);
      address.any = bind == "0.0.0.0" ? 1 : 0;
    } catch (const std::exception& e) {
      std::strncpy(address.error.data(), e.what(), kHostLen - 1);
    }
  }
  check_mpi(MPI_Bcast(&address, sizeof(Address), MPI_BYTE, 0, comm), "MPI_Bcast", what);
  if (address.port == 0) {
    BRAID_THROW(CommError, "{}: rank 0 could not start the TCPStore server: {}", what, address.error.data());
  }
  // From here on every rank holds rank 0's secret: its RPC agent, status server and groups use it too.
  auto secret = security::JobSecret::from_text(std::string(address.secret.data()), "rank 0 over MPI");
  std::fill(address.secret.begin(), address.secret.end(), '\0');
  security::adopt_job_secret(secret);
  if (master) return master;
  const bool any_on_this_host = address.any != 0 && address.host.data() == host_name();
  const std::string host = any_on_this_host ? "127.0.0.1" : std::string(address.host.data());
  options.is_master = false;
  options.secret = std::move(secret);
  return std::make_shared<store::TCPStore>(host, static_cast<uint16_t>(address.port), options);
}

}  // namespace braid::collectives::mpi
