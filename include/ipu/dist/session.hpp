#pragma once
// Replicated training over MPI processes, as PopRun and PopDist spread a replicated model's
// replicas over instances (poptorch-features 4.4.3 and PopDist): P ranks each run R / P of the R
// replicas, rank p replicas [p R / P, (p + 1) R / P) (PopDist's replica index offset and local
// replicas). Each micro-batch's step outputs (gradients, losses, outputs, running statistics) are
// gathered from every rank, and every rank reduces all R replicas' gradients in replica order and
// runs the same update: the weights are those of one process running the R replicas
// (ipu/train/session.hpp), bit for bit, on every rank. Every replica grouping of one process works
// the same way. Each rank is given the whole step's inputs, as one process is, and takes its
// replicas' micro-batches from them; or, with distributed_options::local_inputs, only its
// replicas' micro-batches. A replica that fails on one rank fails the others' step at once, with
// its message, through the same exchange; no rank takes that step.
//
// Up front the ranks exchange a fingerprint (the training step's hash, the initial weights, the
// replicas, micro-batches, kernel threads and planned steps) and refuse to train if any differ;
// every exchange waits at most the communicator's timeout (ipu/dist/mpi.hpp).
//
//   ipu::dist::mpi_environment env(&argc, &argv);
//   ipu::dist::communicator comm(std::chrono::seconds(30));
//   ipu::dist::distributed_training_session s(comm, model, options, {}, output_mode::final,
//                                             {.replicas = 4}, {.steps = 10});
//   for (int k = 0; k < 10; ++k) s.run({{"x", x.view()}}, labels.view());
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/dist/mpi.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/train/replication.hpp"
#include "ipu/train/session.hpp"

namespace ipu::dist {

/// What the ranks must agree on besides the model and its options.
struct distributed_options {
  /// The steps this rank will run, compared across ranks before the first (0: not compared).
  std::uint64_t steps = 0;
  /// Each rank is given only its replicas' micro-batches (train::replica_instance::local_inputs):
  /// per accumulation index, one per input group of its replicas (with ungrouped inputs, one per
  /// local replica), so a rank reads only its rows. Unset: every rank is given the whole step's.
  bool local_inputs = false;
};

/// The share of the replicas of rank `rank` of `ranks` (PopDist's getReplicaIndexOffset and
/// getNumLocalReplicas), checked: the ranks must divide the replicas.
struct replica_share {
  std::int64_t first = 0, count = 1;
};
inline replica_share share_of(std::int64_t replicas, int rank, int ranks) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw error(error_category::usage, "rank " + std::to_string(rank) + " of " + std::to_string(ranks), "replica share");
  if (replicas < ranks || replicas % ranks != 0)
    throw error(error_category::usage,
                std::to_string(ranks) + " MPI ranks do not divide " + std::to_string(replicas) + " replicas",
                "distributed training", "run a number of ranks that divides the replication factor (mpirun -np)");
  const auto per = replicas / ranks;
  return {per * rank, per};
}

/// A 64-bit FNV-1a hash, for fingerprints compared across ranks (not for security).
class fnv1a {
 public:
  void add(const void* p, std::size_t n) noexcept {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 1099511628211ull;
  }
  void add(const std::string& s) noexcept {
    add(std::uint64_t{s.size()});
    add(s.data(), s.size());
  }
  template <class T>
    requires std::is_arithmetic_v<T>
  void add(T v) noexcept {
    add(&v, sizeof v);
  }
  [[nodiscard]] std::uint64_t value() const noexcept { return h_; }

 private:
  std::uint64_t h_ = 14695981039346656037ull;
};

/// The hash of a graph: its tensors (names, kinds, types, shapes, data) and ops (types, domains,
/// names, operands, attributes' numbers and strings; a tensor or graph attribute by its kind).
inline void hash_graph(fnv1a& h, const graph& g) {
  h.add(g.name());
  for (const auto& t : g.tensors()) {
    h.add(t.name);
    h.add(ipu::to_string(t.info));
    h.add(static_cast<int>(t.kind));
    h.add(t.data.data(), t.data.size());
  }
  for (const auto& op : g.ops()) {
    h.add(op.type);
    h.add(op.domain);
    h.add(op.opset);
    h.add(op.name);
    for (const auto i : op.inputs) h.add(i);
    for (const auto o : op.outputs) h.add(o);
    for (const auto& a : op.attributes) {
      h.add(a.name);
      h.add(a.value.index());
      std::visit(
          [&](const auto& v) {
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, float> || std::is_same_v<V, std::int64_t>) h.add(v);
            else if constexpr (std::is_same_v<V, std::string>) h.add(v);
            else if constexpr (std::is_same_v<V, std::vector<float>> || std::is_same_v<V, std::vector<std::int64_t>>)
              for (const auto x : v) h.add(x);
            else if constexpr (std::is_same_v<V, std::vector<std::string>>)
              for (const auto& x : v) h.add(x);
          },
          a.value);
    }
  }
}

/// A replicated training session whose replicas are spread over the ranks of `comm`.
class distributed_training_session {
 public:
  distributed_training_session(communicator& comm, const graph& model, train::training_options options,
                               cpu::device_options device, train::output_mode outputs,
                               train::replication_options replication, distributed_options dist = {})
      : comm_(&comm), share_(share_of(replication.replicas, comm.rank(), comm.size())),
        session_(model, std::move(options), device, outputs, with_instance(std::move(replication), share_, comm, dist.local_inputs)) {
    check_agreement(model, device, dist);
  }

  /// One weight update, as train::training_session::run with every replica's inputs (each rank
  /// takes its replicas' micro-batches). Every rank must run it, the same number of times.
  train::step_result run(const std::vector<std::pair<std::string, const_tensor_view>>& inputs, const_tensor_view labels) {
    return session_.run(inputs, labels);
  }
  train::step_result run(const std::vector<std::pair<std::string, const_tensor_view>>& inputs) { return session_.run(inputs); }

  /// The session: weights, optimizer state and the trained model, the same on every rank.
  [[nodiscard]] const train::training_session& session() const noexcept { return session_; }
  [[nodiscard]] train::training_session& session() noexcept { return session_; }
  [[nodiscard]] const host_tensor& weight(std::string_view name) const { return session_.weight(name); }
  [[nodiscard]] int instance() const noexcept { return comm_->rank(); }
  [[nodiscard]] int instances() const noexcept { return comm_->size(); }
  /// PopDist's getReplicaIndexOffset and getNumLocalReplicas.
  [[nodiscard]] std::int64_t replica_offset() const noexcept { return share_.first; }
  [[nodiscard]] std::int64_t local_replicas() const noexcept { return share_.count; }

 private:
  static train::replication_options with_instance(train::replication_options r, replica_share s, communicator& comm,
                                                  bool local_inputs) {
    if (r.instance.count != 0)
      throw error(error_category::usage, "replication_options::instance is given to a distributed session",
                  "distributed training", "leave it unset: the session spreads the replicas over the MPI ranks");
    r.instance.first = s.first;
    r.instance.count = s.count;
    r.instance.local_inputs = local_inputs;
    r.instance.gather = [c = &comm](std::uint64_t step, std::int64_t a, std::span<const std::byte> mine,
                                    std::span<std::byte> all) { exchange(*c, step, a, mine, mine.size(), all, nullptr); };
    r.instance.fail = [c = &comm](std::uint64_t step, std::int64_t a, std::size_t bytes, const std::string& message) {
      exchange(*c, step, a, {}, bytes, {}, &message);
    };
    return r;
  }

  /// One record per rank through all_gather: the step and accumulation index, then either this
  /// rank's replicas' outputs or (`failure` set) its replica's error message, in a payload of the
  /// same size on every rank (at least room for a message). A rank that sent an error makes every
  /// other rank's exchange fail at once with that message; out-of-step ranks are an error, not one
  /// step's gradients added to another's.
  static void exchange(communicator& c, std::uint64_t step, std::int64_t a, std::span<const std::byte> mine, std::size_t bytes,
                       std::span<std::byte> all, const std::string* failure) {
    static constexpr std::size_t message_room = 1024;
    const auto what = "step " + std::to_string(step) + " (accumulation index " + std::to_string(a) + ")";
    const auto payload = std::max(bytes, message_room);
    const std::size_t text = failure ? std::min(failure->size(), payload) : 0;
    const std::uint64_t header[3] = {step, static_cast<std::uint64_t>(a), failure ? text + 1 : 0};
    const auto n = sizeof header + payload;
    std::vector<std::byte> out(n), in(n * static_cast<std::size_t>(c.size()));
    std::memcpy(out.data(), header, sizeof header);
    if (failure && text > 0) std::memcpy(out.data() + sizeof header, failure->data(), text);
    else if (!mine.empty()) std::memcpy(out.data() + sizeof header, mine.data(), mine.size());
    c.all_gather(what, out, in);
    for (int q = 0; q < c.size(); ++q) {
      const auto* p = in.data() + static_cast<std::size_t>(q) * n;
      std::uint64_t theirs[3];
      std::memcpy(theirs, p, sizeof theirs);
      if (theirs[0] != header[0] || theirs[1] != header[1])
        throw error(error_category::runtime,
                    what + ": rank " + std::to_string(q) + " sent step " + std::to_string(theirs[0]) +
                        " (accumulation index " + std::to_string(theirs[1]) + ")",
                    "distributed training", "run every step on every rank, in the same order");
      if (theirs[2] != 0 && q != c.rank()) {
        const auto length = std::min<std::uint64_t>(theirs[2] - 1, payload);
        throw error(error_category::runtime,
                    what + ": a replica of rank " + std::to_string(q) + " failed: " +
                        std::string(reinterpret_cast<const char*>(p + sizeof header), static_cast<std::size_t>(length)),
                    "distributed training", "fix what rank " + std::to_string(q) + " reports; no rank took this step");
      }
    }
    if (failure) return;
    for (int q = 0; q < c.size(); ++q)
      std::memcpy(all.data() + static_cast<std::size_t>(q) * mine.size(), in.data() + static_cast<std::size_t>(q) * n + sizeof header,
                  mine.size());
  }

  /// What the ranks must agree on, exchanged and compared before the first step.
  struct fingerprint {
    std::uint64_t model = 0, replicas = 0, micro_batches = 0, threads = 0, steps = 0, ranks = 0;
  };
  void check_agreement(const graph& model, const cpu::device_options& device, const distributed_options& dist) {
    fnv1a h;
    hash_graph(h, model);
    const auto& tg = session_.graph_of_step();
    hash_graph(h, tg.step);
    if (tg.micro_batches > 1) hash_graph(h, tg.update);
    for (const auto& n : session_.weight_names()) {
      const auto& w = session_.weight(n);
      h.add(n);
      h.add(w.bytes().data(), w.bytes().size());
    }
    const fingerprint mine{h.value(),
                           static_cast<std::uint64_t>(session_replicas()),
                           static_cast<std::uint64_t>(tg.micro_batches),
                           static_cast<std::uint64_t>(device.threads),
                           dist.steps,
                           static_cast<std::uint64_t>(comm_->size())};
    std::vector<fingerprint> all(static_cast<std::size_t>(comm_->size()));
    comm_->all_gather("checking the ranks' configurations",
                      std::as_bytes(std::span<const fingerprint>(&mine, 1)), std::as_writable_bytes(std::span(all)));
    std::string differences;
    auto compare = [&](const char* what, auto field) {
      for (std::size_t q = 0; q < all.size(); ++q)
        if (all[q].*field != mine.*field) {
          differences += std::string(differences.empty() ? "" : "; ") + "rank " + std::to_string(q) + " has " + what +
                         " " + std::to_string(all[q].*field) + ", rank " + std::to_string(comm_->rank()) + " " +
                         std::to_string(mine.*field);
          return;
        }
    };
    compare("model hash", &fingerprint::model);
    compare("replicas", &fingerprint::replicas);
    compare("micro-batches per step", &fingerprint::micro_batches);
    compare("kernel threads", &fingerprint::threads);
    compare("planned steps", &fingerprint::steps);
    if (!differences.empty())
      throw error(error_category::usage, "the MPI ranks disagree: " + differences, "distributed training",
                  "give every rank the same model, weights, options, replicas and steps");
  }
  [[nodiscard]] std::int64_t session_replicas() const noexcept { return share_.count * comm_->size(); }

  communicator* comm_;
  replica_share share_;
  train::training_session session_;
};

}  // namespace ipu::dist
