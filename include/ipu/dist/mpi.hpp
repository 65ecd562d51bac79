#pragma once
// MPI for replicas spread over processes (PopRun's instances): the process's MPI environment and
// a communicator whose every exchange waits at most a deadline for its peers.
//
// MPI's blocking calls wait forever for a peer that is stuck (or dead, until mpirun notices); the
// exchange here posts non-blocking sends and receives and polls them against the deadline, so a
// rank that does not arrive is an ipu::error naming the ranks and what they did not reach. It is
// point-to-point rather than a collective because a collective that has not completed does not say
// which ranks are missing. A timed-out exchange cannot be withdrawn (MPI cannot cancel a send):
// its buffers are kept, and the environment ends the job with MPI_Abort instead of MPI_Finalize,
// which would wait for the missing rank too.
//
//   ipu::dist::mpi_environment env(&argc, &argv);
//   ipu::dist::communicator comm(std::chrono::seconds(30));
//   comm.all_gather("step 3", mine, all);  // every rank's bytes, rank-ordered, or an ipu::error
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ipu/error.hpp"

namespace ipu::dist {

/// Set once an exchange timed out: MPI then cannot finalize cleanly.
inline bool& abandoned_exchange() noexcept {
  static bool abandoned = false;
  return abandoned;
}

/// MPI_Init (funneled: only the thread that made it calls MPI) and, at the end, MPI_Finalize; or
/// MPI_Abort, ending every rank, once an exchange was abandoned.
class mpi_environment {
 public:
  mpi_environment(int* argc, char*** argv) {
    int ready = 0;
    MPI_Initialized(&ready);
    if (ready) return;  // someone else's: theirs to finalize
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw error(error_category::runtime, "MPI_Init_thread failed", "MPI", "run under mpirun, or without MPI");
    owned_ = true;
  }
  mpi_environment(const mpi_environment&) = delete;
  mpi_environment& operator=(const mpi_environment&) = delete;
  ~mpi_environment() {
    if (!owned_) return;
    if (abandoned_exchange()) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
  }

 private:
  bool owned_ = false;
};

/// A duplicate of MPI_COMM_WORLD (the library's messages never meet the application's) whose
/// exchanges wait at most `timeout` for their peers.
class communicator {
 public:
  explicit communicator(std::chrono::milliseconds timeout) : timeout_(timeout) {
    if (timeout.count() <= 0)
      throw error(error_category::usage, "an MPI timeout of " + std::to_string(timeout.count()) + " ms", "MPI",
                  "give the longest time (> 0) an exchange may wait for the other ranks");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Comm_idup(MPI_COMM_WORLD, &comm_, &r);
    std::vector<MPI_Request> one{r};
    wait(one, [](std::size_t) { return std::string("every rank"); }, "setting up the communicator");
  }
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator() {
    // A timed-out exchange's buffers stay allocated: MPI may still write into them before the abort.
    for (auto& h : abandoned_) (void)h.release();
    if (comm_ != MPI_COMM_NULL && !abandoned_exchange()) MPI_Comm_free(&comm_);
  }

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return size_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  /// Every rank's `mine` (the same size on every rank), rank-ordered, into `all`; `what` names the
  /// exchange in errors. Waits at most the timeout for every peer.
  void all_gather(const std::string& what, std::span<const std::byte> mine, std::span<std::byte> all) {
    const auto n = mine.size();
    if (n > static_cast<std::size_t>(INT_MAX) || all.size() / static_cast<std::size_t>(size_) != n ||
        all.size() % static_cast<std::size_t>(size_) != 0)
      throw error(error_category::usage,
                  what + ": " + std::to_string(n) + " bytes per rank over " + std::to_string(size_) + " ranks into " +
                      std::to_string(all.size()) + " bytes",
                  "MPI exchange", "exchange at most 2^31 - 1 bytes per rank, into room for every rank's");
    if (abandoned_exchange())
      throw error(error_category::runtime, what + ": an earlier exchange timed out", "MPI exchange",
                  "end the job: a rank that did not arrive cannot be waited for again");
    // The buffers outlive a timed-out exchange (MPI may still write into them): owned, kept if abandoned.
    auto held = std::make_unique<held_buffers>();
    held->send.assign(mine.begin(), mine.end());
    held->receive.resize(all.size());
    held->requests.assign(2 * static_cast<std::size_t>(size_), MPI_REQUEST_NULL);
    const int count = static_cast<int>(n);
    for (int q = 0; q < size_; ++q) {
      if (q == rank_) continue;
      const auto qi = static_cast<std::size_t>(q);
      MPI_Irecv(held->receive.data() + qi * n, count, MPI_BYTE, q, tag, comm_, &held->requests[qi]);
      MPI_Isend(held->send.data(), count, MPI_BYTE, q, tag, comm_, &held->requests[static_cast<std::size_t>(size_) + qi]);
    }
    try {
      wait(held->requests, [](std::size_t i) { return "rank " + std::to_string(i); }, what, size_);
    } catch (...) {
      abandoned_.push_back(std::move(held));
      throw;
    }
    std::memcpy(held->receive.data() + static_cast<std::size_t>(rank_) * n, mine.data(), n);
    std::memcpy(all.data(), held->receive.data(), all.size());
  }

 private:
  static constexpr int tag = 0x1b0;
  struct held_buffers {
    std::vector<std::byte> send, receive;
    std::vector<MPI_Request> requests;
  };

  /// Polls `requests` until all complete or the deadline passes; then names the receives (the first
  /// `receives` requests, by rank) that did not complete.
  template <class Name>
  void wait(std::vector<MPI_Request>& requests, const Name& name, const std::string& what, int receives = 1) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      bool all_done = true;
      for (auto& r : requests) {
        if (r == MPI_REQUEST_NULL) continue;
        int done = 0;
        if (MPI_Test(&r, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
          throw error(error_category::runtime, what + ": MPI reported an error", "MPI exchange");
        all_done = all_done && done != 0;
      }
      if (all_done) return;
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    std::string missing;
    for (int i = 0; i < receives && static_cast<std::size_t>(i) < requests.size(); ++i)
      if (requests[static_cast<std::size_t>(i)] != MPI_REQUEST_NULL) missing += (missing.empty() ? "" : ", ") + name(static_cast<std::size_t>(i));
    if (missing.empty()) missing = "a rank this one sends to";  // received from all, a send still pending
    abandoned_exchange() = true;
    throw error(error_category::runtime,
                what + ": " + missing + " did not arrive within " + std::to_string(timeout_.count()) + " ms (rank " +
                    std::to_string(rank_) + " of " + std::to_string(size_) + " waited)",
                "MPI exchange",
                "a rank is stuck, dead or runs a different number of steps; the job ends (MPI_Abort) as the exchange "
                "cannot be withdrawn; raise the timeout if the ranks are only slow");
  }

  std::chrono::milliseconds timeout_;
  int rank_ = 0, size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::unique_ptr<held_buffers>> abandoned_;
};

}  // namespace ipu::dist
