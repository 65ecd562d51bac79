#pragma once
// The device manager: finds and reserves simulated IPUs as PopART's DeviceManager and Model Runtime's
// DeviceManager do on a real system.
//
//     ipu::device_manager dm;                        // IPU_SYSTEM (default 16 x mk2), IPU_DEVICE_LOCK_DIR
//     for (const auto& d : dm.enumerate()) std::puts(ipu::to_string(d).c_str());
//     auto dev = dm.acquire(4, {.wait = ipu::device_wait_config::with_timeout(std::chrono::seconds(30))});
//     run(model, dev.description());                // the IPUs stay reserved while `dev` lives
//
// Devices are those of the simulated system (see ipu_system.hpp): single IPUs, then aligned groups of
// 2, 4, 8... IPUs. Reserving a device locks every physical IPU under it with an OS-level lock (see
// device_lock.hpp), so another process, another thread or another manager sees it as busy until the
// `device_handle` is released or destroyed, or the process exits. A manager is immutable: all its
// member functions may be called from several threads at once.
//
// The offline device (compile with no device attached) and the CPU device are plain descriptions:
// nothing to reserve.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ipu/device/architecture.hpp"
#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/runtime/device_lock.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/runtime/device_wait.hpp"
#include "ipu/device/ipu_system.hpp"
#include "ipu/error.hpp"
#include "ipu/log.hpp"

namespace ipu {

/// A held IPU and who holds it.
struct ipu_holder {
  std::uint32_t ipu = 0;
  /// nullopt when the holder is not known: it took the IPU a moment ago and has not yet written its
  /// pid, or it is releasing it right now.
  std::optional<pid_t> pid;
  friend bool operator==(const ipu_holder&, const ipu_holder&) = default;
};

/// A device of the system and its state, as enumerate() reports it.
struct device_info {
  std::uint32_t id = 0;
  std::uint32_t num_ipus = 1;
  architecture_description arch{};
  /// The physical IPUs of the device, in id order (Poplar's driver ids).
  std::vector<std::uint32_t> ipus;
  /// The two devices of half as many IPUs that make up this one; empty for a single IPU.
  std::vector<std::uint32_t> children;
  /// The held IPUs of the device; empty when it is free.
  std::vector<ipu_holder> holders;

  [[nodiscard]] bool is_free() const noexcept { return holders.empty(); }
  [[nodiscard]] device_description description() const noexcept {
    return device_description{device_kind::ipu, arch, num_ipus};
  }
};

/// The number of IPUs to reserve for a request of `requested`: a power of two from 1 to 64, rounded
/// up to one when `auto_round` is set (PopTorch's autoRoundNumIPUs: the extra IPUs are reserved but
/// idle). Throws ipu::error (device) otherwise.
constexpr std::uint32_t ipus_to_reserve(std::uint64_t requested, bool auto_round) {
  using ipu::format_uint;
  if (requested == 0)
    throw error(error_category::device, "0 IPUs requested", "device request", "ask for at least 1 IPU");
  if (requested > max_ipus)
    throw error(error_category::device,
                format_uint(requested) + " IPUs requested; a device has at most " + format_uint(max_ipus) + " IPUs",
                "device request",
                "use at most 64 IPUs per device: pipeline or shard over fewer IPUs, or replicate the model");
  std::uint32_t n = 1;
  while (n < requested) n *= 2;
  if (n != requested && !auto_round)
    throw error(error_category::device,
                format_uint(requested) + " IPUs requested; a device has a power of two from 1 to 64 IPUs",
                "device request",
                "ask for " + format_uint(n) +
                    " IPUs, or enable auto-rounding (PopTorch's autoRoundNumIPUs) to "
                    "reserve " +
                    format_uint(n) + " with " + format_uint(n - requested) + " idle");
  return n;
}

namespace detail::runtime {

/// "0-3, 8, 10-11" for sorted ids.
inline std::string format_ranges(const std::vector<std::uint32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!s.empty()) s += ", ";
    s += format_uint(ids[i]);
    if (j > i) {
      s += '-';  // appended, not "-" + ...: GCC 12 -Wrestrict misfires on that at -O3
      s += format_uint(ids[j]);
    }
    i = j + 1;
  }
  return s;
}

inline std::string format_ipus(const std::vector<std::uint32_t>& ids) {
  std::string s = ids.size() == 1 ? "IPU " : "IPUs ";
  s += format_ranges(ids);
  return s;
}

/// "IPUs 0-3 held by process 123 (this process); IPU 8 held by process 456".
inline std::string format_holders(const std::vector<ipu_holder>& holders) {
  std::map<pid_t, std::vector<std::uint32_t>> by_pid;  // pid 0: unknown
  for (const auto& h : holders) by_pid[h.pid.value_or(0)].push_back(h.ipu);
  const pid_t self = ::getpid();
  std::string s;
  for (auto& [pid, ipus] : by_pid) {
    std::sort(ipus.begin(), ipus.end());
    if (!s.empty()) s += "; ";
    s += format_ipus(ipus) + " held by ";
    if (pid == 0)
      s += "a process that is taking or releasing " + std::string(ipus.size() == 1 ? "it" : "them") + " right now";
    else
      s += "process " + std::to_string(pid) + (pid == self ? " (this process)" : "");
  }
  return s;
}

inline std::vector<std::uint32_t> ipus_of(const device_slot& d) {
  std::vector<std::uint32_t> v(d.num_ipus);
  for (std::uint32_t i = 0; i < d.num_ipus; ++i) v[i] = d.first_ipu + i;
  return v;
}

inline std::string format_ms(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

}  // namespace detail::runtime

/// No device asked for was free (within the wait, if any). Holds which IPUs are busy and who holds
/// them; catch it to retry later or ask for something else.
class device_busy_error : public error {
 public:
  device_busy_error(std::string message, std::string location, std::string hint, std::vector<ipu_holder> holders,
                    std::chrono::milliseconds waited)
      : error(error_category::device, std::move(message), std::move(location), std::move(hint)),
        holders_(std::move(holders)),
        waited_(waited) {}

  /// The busy IPUs of the devices that were asked for, and their holders.
  [[nodiscard]] const std::vector<ipu_holder>& holders() const noexcept { return holders_; }
  /// How long the manager waited before giving up (0 for no_wait).
  [[nodiscard]] std::chrono::milliseconds waited() const noexcept { return waited_; }

 private:
  std::vector<ipu_holder> holders_;
  std::chrono::milliseconds waited_;
};

/// A reserved device: its IPUs stay locked until release() or destruction. Move-only.
class device_handle {
 public:
  device_handle() = default;
  device_handle(device_handle&&) noexcept = default;
  device_handle& operator=(device_handle&& o) noexcept {
    if (this != &o) {
      release();
      slot_ = o.slot_;
      requested_ = o.requested_;
      arch_ = o.arch_;
      locks_ = std::move(o.locks_);
      o.locks_.clear();
    }
    return *this;
  }
  device_handle(const device_handle&) = delete;
  device_handle& operator=(const device_handle&) = delete;
  ~device_handle() = default;  // the lock files close, dropping their locks

  /// False for a default-constructed, moved-from or released handle.
  [[nodiscard]] bool valid() const noexcept { return !locks_.empty(); }
  explicit operator bool() const noexcept { return valid(); }

  [[nodiscard]] std::uint32_t id() const noexcept { return slot_.id; }
  /// IPUs reserved (a power of two).
  [[nodiscard]] std::uint32_t num_ipus() const noexcept { return slot_.num_ipus; }
  /// IPUs asked for; fewer than num_ipus() when the count was auto-rounded.
  [[nodiscard]] std::uint32_t requested_ipus() const noexcept { return requested_; }
  [[nodiscard]] std::vector<std::uint32_t> ipus() const { return detail::runtime::ipus_of(slot_); }
  [[nodiscard]] const architecture_description& arch() const noexcept { return arch_; }
  [[nodiscard]] device_description description() const noexcept {
    return device_description{device_kind::ipu, arch_, slot_.num_ipus};
  }

  /// Unlocks the IPUs now (in reverse order of locking). Idempotent.
  void release() noexcept {
    while (!locks_.empty()) locks_.pop_back();
  }

 private:
  friend class device_manager;
  device_handle(device_slot slot, std::uint32_t requested, const architecture_description& arch,
                std::vector<detail::runtime::ipu_lock_file> locks)
      : slot_(slot), requested_(requested), arch_(arch), locks_(std::move(locks)) {}

  device_slot slot_{};
  std::uint32_t requested_ = 0;
  architecture_description arch_{};
  std::vector<detail::runtime::ipu_lock_file> locks_;
};

/// Options of acquire(num_ipus, ...).
struct acquire_options {
  /// What to do when every device of the size is busy.
  device_wait_config wait{};
  /// Round a count that is not a power of two up to one (PopTorch's autoRoundNumIPUs).
  bool auto_round_num_ipus = false;
};

class device_manager {
 public:
  /// The system IPU_SYSTEM names (default: 16 Mk2 IPUs in 4 IPU-M2000s), locked in the directory
  /// IPU_DEVICE_LOCK_DIR names (default: /tmp/ipu-devices-<uid>).
  device_manager() : device_manager(ipu_system_from_environment()) {}
  /// `system`, locked in IPU_DEVICE_LOCK_DIR or the per-user default.
  explicit device_manager(const ipu_system& system)
      : device_manager(system, default_device_lock_dir(), !env_lock_dir_set()) {}
  /// `system`, locked in `lock_dir` (created if needed). Processes that use the same directory share
  /// the same simulated IPUs; they should describe the same system.
  device_manager(const ipu_system& system, std::filesystem::path lock_dir)
      : device_manager(system, std::move(lock_dir), false) {}

  [[nodiscard]] const ipu_system& system() const noexcept { return system_; }
  [[nodiscard]] const std::filesystem::path& lock_dir() const noexcept { return lock_dir_; }

  // --- enumeration ---------------------------------------------------------------------------

  /// Every device of the system, in id order, with who holds which of its IPUs now.
  [[nodiscard]] std::vector<device_info> enumerate() const {
    const auto held = probe_all();
    std::vector<device_info> out;
    out.reserve(system_.device_count());
    for (std::uint32_t id = 0; id < system_.device_count(); ++id) out.push_back(make_info(*system_.device(id), held));
    return out;
  }
  /// The devices of `num_ipus` IPUs (a power of two from 1 to 64, at most the system's size).
  [[nodiscard]] std::vector<device_info> enumerate(std::uint32_t num_ipus) const {
    check_size(ipus_to_reserve(num_ipus, false), num_ipus);
    const auto held = probe_all();
    std::vector<device_info> out;
    for (const auto& s : system_.devices_with(num_ipus)) out.push_back(make_info(s, held));
    return out;
  }
  /// One device. Throws ipu::error (device) for an unknown id.
  [[nodiscard]] device_info info(std::uint32_t id) const { return make_info(slot(id), probe_all()); }

  // --- acquisition ---------------------------------------------------------------------------

  /// Reserves the first free device of `num_ipus` IPUs (rounded up to a power of two when
  /// `auto_round_num_ipus`), waiting as `options.wait` says. Throws device_busy_error when none is
  /// free in time, ipu::error (device) for a request the system cannot satisfy.
  [[nodiscard]] device_handle acquire(std::uint32_t num_ipus, const acquire_options& options = {}) const {
    options.wait.validate();
    const auto n = check_size(ipus_to_reserve(num_ipus, options.auto_round_num_ipus), num_ipus);
    return acquire_from(system_.devices_with(n), num_ipus, options.wait, false);
  }
  /// Reserves the first free device of `num_ipus` IPUs if one is free now; nullopt otherwise. Throws
  /// ipu::error (device) for a request the system cannot satisfy.
  [[nodiscard]] std::optional<device_handle> try_acquire(std::uint32_t num_ipus,
                                                         bool auto_round_num_ipus = false) const {
    const auto n = check_size(ipus_to_reserve(num_ipus, auto_round_num_ipus), num_ipus);
    for (const auto& s : system_.devices_with(n))
      if (auto h = try_lock(s, num_ipus)) return h;
    return std::nullopt;
  }
  /// Reserves device `id` (one IPU or a group, as enumerate() lists them; PopTorch's useIpuId),
  /// waiting as `wait` says. Throws device_busy_error when it stays busy, ipu::error (device) for an
  /// unknown id.
  [[nodiscard]] device_handle acquire_by_id(std::uint32_t id, const device_wait_config& wait = {}) const {
    wait.validate();
    const auto s = slot(id);
    return acquire_from({s}, s.num_ipus, wait, true);
  }
  /// Reserves device `id` if it is free now; nullopt otherwise. Throws ipu::error (device) for an
  /// unknown id.
  [[nodiscard]] std::optional<device_handle> try_acquire_by_id(std::uint32_t id) const {
    const auto s = slot(id);
    return try_lock(s, s.num_ipus);
  }

  // --- devices without a reservation ---------------------------------------------------------

  /// A device to compile for with no device attached (PopTorch's useOfflineIpuTarget): `target` is an
  /// architecture or IPU version ("mk2", "ipu2", "GC200"...). Never locked.
  [[nodiscard]] static device_description offline_device(std::string_view target, std::uint32_t num_ipus = 1,
                                                         bool auto_round_num_ipus = false) {
    const auto arch = find_architecture(target);
    if (!arch)
      throw error(error_category::device, "unknown offline target '" + std::string(target) + "'", "offline device",
                  "use an IPU version (ipu1, ipu2, ipu21) or architecture (mk1, mk2, bow)");
    return offline_device(*arch, num_ipus, auto_round_num_ipus);
  }
  [[nodiscard]] static device_description offline_device(const architecture_description& arch,
                                                         std::uint32_t num_ipus = 1, bool auto_round_num_ipus = false) {
    return make_device_description(arch, ipus_to_reserve(num_ipus, auto_round_num_ipus));
  }
  /// The host CPU; `num_ipus` is how many IPUs a model's annotations may name (the host runs them all).
  [[nodiscard]] static device_description cpu_device(std::uint32_t num_ipus = 1) {
    return cpu_device_description(ipus_to_reserve(num_ipus, false));
  }

 private:
  device_manager(const ipu_system& system, std::filesystem::path lock_dir, bool private_dir)
      : system_(make_ipu_system(system.arch, system.num_ipus, system.ipus_per_machine)),
        lock_dir_(std::move(lock_dir)) {
    detail::runtime::prepare_lock_dir(lock_dir_, private_dir);
  }

  static bool env_lock_dir_set() {
    const char* v = std::getenv(std::string(device_lock_dir_variable).c_str());
    return v != nullptr && *v != '\0';
  }

  std::string ipus_text(std::uint32_t n) const { return ipu::format_uint(n) + (n == 1 ? " IPU" : " IPUs"); }

  std::string where() const {
    return "device manager of " + to_string(system_) + ", lock directory " + lock_dir_.string();
  }

  /// `reserve` when the system has devices of that size; throws ipu::error (device) otherwise.
  std::uint32_t check_size(std::uint32_t reserve, std::uint32_t requested) const {
    if (system_.devices_of_size(reserve) > 0) return reserve;
    std::string what = ipus_text(requested) + " requested";
    if (reserve != requested) what += " (" + ipu::format_uint(reserve) + " after rounding)";
    throw error(error_category::device,
                what + "; the simulated system has " + ipus_text(system_.num_ipus) + " and its largest device has " +
                    ipus_text(system_.largest_device_ipus()),
                where(),
                "ask for at most " + ipus_text(system_.largest_device_ipus()) +
                    ", or simulate a bigger system (IPU_SYSTEM=" + std::string(system_.arch.name) + ":" +
                    ipu::format_uint(reserve) + ")");
  }

  device_slot slot(std::uint32_t id) const {
    if (auto s = system_.device(id)) return *s;
    throw error(error_category::device,
                "no device " + std::to_string(id) + "; the system's devices are 0-" +
                    std::to_string(system_.device_count() - 1),
                where(),
                "ids 0-" + std::to_string(system_.num_ipus - 1) +
                    " are single IPUs, the rest groups of 2, 4, 8... IPUs; list them with enumerate()");
  }

  /// Holder of every held IPU of the system (nullopt: free).
  std::vector<std::optional<ipu_holder>> probe_all() const {
    std::vector<std::optional<ipu_holder>> held(system_.num_ipus);
    for (std::uint32_t ipu = 0; ipu < system_.num_ipus; ++ipu) held[ipu] = probe(ipu);
    return held;
  }
  std::optional<ipu_holder> probe(std::uint32_t ipu) const {
    detail::runtime::ipu_lock_file f(lock_dir_, ipu);
    if (!f.held_elsewhere()) return std::nullopt;
    return ipu_holder{ipu, f.read_holder()};
  }
  std::vector<ipu_holder> holders_of(const std::vector<device_slot>& slots) const {
    std::vector<ipu_holder> out;
    for (const auto& s : slots)
      for (std::uint32_t ipu = s.first_ipu; ipu < s.first_ipu + s.num_ipus; ++ipu)
        if (auto h = probe(ipu)) out.push_back(*h);
    return out;
  }

  device_info make_info(const device_slot& s, const std::vector<std::optional<ipu_holder>>& held) const {
    device_info d;
    d.id = s.id;
    d.num_ipus = s.num_ipus;
    d.arch = system_.arch;
    d.ipus = detail::runtime::ipus_of(s);
    d.children = system_.children(s);
    for (auto ipu : d.ipus)
      if (held[ipu]) d.holders.push_back(*held[ipu]);
    return d;
  }

  /// Locks every IPU of `s`, lowest id first; on the first busy one, unlocks those taken and returns
  /// nullopt. Taking them in one global order means that of two managers after overlapping devices,
  /// the one that wins the lowest shared IPU gets the device, instead of each holding a part.
  std::optional<device_handle> try_lock(const device_slot& s, std::uint32_t requested) const {
    std::vector<detail::runtime::ipu_lock_file> locks;
    locks.reserve(s.num_ipus);
    for (std::uint32_t ipu = s.first_ipu; ipu < s.first_ipu + s.num_ipus; ++ipu) {
      detail::runtime::ipu_lock_file f(lock_dir_, ipu);
      if (!f.try_lock()) return std::nullopt;  // `locks` closes its files: the rollback
      locks.push_back(std::move(f));
    }
    // Holder records are written only once the whole device is ours, so a rolled-back attempt
    // never shows up as a holder.
    const pid_t self = ::getpid();
    for (auto& l : locks) l.write_holder(self);
    return device_handle(s, requested, system_.arch, std::move(locks));
  }

  device_handle acquire_from(const std::vector<device_slot>& candidates, std::uint32_t requested,
                             const device_wait_config& wait, bool by_id) const {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    bool logged = false;
    for (;;) {
      for (const auto& s : candidates)
        if (auto h = try_lock(s, requested)) {
          log::info([&] {
            return "acquired device " + std::to_string(s.id) + " (" +
                   detail::runtime::format_ipus(detail::runtime::ipus_of(s)) + ") for " + ipus_text(requested) +
                   (logged ? " after waiting " + detail::runtime::format_ms(std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start)) : std::string());
          });
          return std::move(*h);
        }
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - start);
      if (wait.strategy == device_wait_strategy::no_wait ||
          (wait.strategy == device_wait_strategy::wait_with_timeout && waited >= wait.timeout))
        throw busy_error(candidates, by_id, wait, waited);
      if (!logged) {
        log::info([&] {  // only probes the holders when INFO is enabled
          return "waiting for " +
                 (by_id ? "device " + std::to_string(candidates.front().id)
                        : "a device of " + ipus_text(candidates.front().num_ipus)) +
                 " (" + std::string(to_string(wait.strategy)) +
                 "): " + detail::runtime::format_holders(holders_of(candidates));
        });
        logged = true;
      }
      auto nap = wait.sleep_time;
      if (wait.strategy == device_wait_strategy::wait_with_timeout) nap = std::min(nap, wait.timeout - waited);
      std::this_thread::sleep_for(nap);
    }
  }

  device_busy_error busy_error(const std::vector<device_slot>& candidates, bool by_id, const device_wait_config& wait,
                               std::chrono::milliseconds waited) const {
    using detail::runtime::format_holders;
    const auto holders = holders_of(candidates);
    const auto size = candidates.front().num_ipus;

    std::string msg = by_id ? "device " + std::to_string(candidates.front().id) + " (" +
                                  detail::runtime::format_ipus(detail::runtime::ipus_of(candidates.front())) + ") is busy"
                      : candidates.size() == 1 ? "the only device of " + ipus_text(size) + " (device " +
                                                     std::to_string(candidates.front().id) + ") is busy"
                                               : "every device of " + ipus_text(size) + " is busy (devices " +
                                                     std::to_string(candidates.front().id) + "-" +
                                                     std::to_string(candidates.back().id) + ")";
    if (wait.strategy != device_wait_strategy::no_wait) msg += " after waiting " + detail::runtime::format_ms(waited);
    msg += holders.empty() ? std::string(": its IPUs were released while checking; try again")
                           : ": " + format_holders(holders);

    std::string hint = wait.strategy == device_wait_strategy::no_wait
                           ? std::string(by_id ? "wait for it" : "wait for one") +
                                 " (device_wait_config::with_timeout or forever; IPU_WAIT_FOR_DEVICE=1 for sessions)"
                       : wait.strategy == device_wait_strategy::wait_with_timeout ? "wait longer"
                                                                                  : "";
    const auto add = [&hint](const std::string& s) { hint += (hint.empty() ? "" : ", ") + s; };
    if (by_id) {
      const auto free = free_ids(size);
      add(free.empty() ? "no other device of " + ipus_text(size) + " is free"
                       : "use a free device of " + ipus_text(size) + " (" + join_ids(free) + ")");
    }
    if (size > 1) {
      for (auto s = size / 2; s >= 1; s /= 2) {
        const auto free = free_ids(s);
        if (free.empty()) continue;
        add("ask for fewer IPUs (" + ipus_text(s) + ": device" + (free.size() == 1 ? " " : "s ") + join_ids(free) +
            (free.size() == 1 ? " is" : " are") + " free)");
        break;
      }
    }
    add("or set IPU_DEVICE_LOCK_DIR to another directory for a separate simulated system");
    return device_busy_error(std::move(msg), where(), std::move(hint), holders, waited);
  }

  std::vector<std::uint32_t> free_ids(std::uint32_t size) const {
    std::vector<std::uint32_t> out;
    const auto held = probe_all();
    for (const auto& s : system_.devices_with(size)) {
      bool free = true;
      for (std::uint32_t ipu = s.first_ipu; ipu < s.first_ipu + s.num_ipus; ++ipu) free = free && !held[ipu];
      if (free) out.push_back(s.id);
    }
    return out;
  }
  static std::string join_ids(const std::vector<std::uint32_t>& ids) {
    constexpr std::size_t shown = 8;
    std::string s;
    for (std::size_t i = 0; i < ids.size() && i < shown; ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
    if (ids.size() > shown) s += ", ...";
    return s;
  }

  ipu_system system_;
  std::filesystem::path lock_dir_;
};

/// "device 24: 4 x mk2 (GC200), IPUs 0-3, children 16 17, free" or "..., held: IPU 2 held by process 77".
inline std::string to_string(const device_info& d) {
  std::string s =
      "device " + std::to_string(d.id) + ": " + to_string(d.description()) + ", " + detail::runtime::format_ipus(d.ipus);
  if (!d.children.empty()) s += ", children " + std::to_string(d.children[0]) + " " + std::to_string(d.children[1]);
  s += d.is_free() ? ", free" : ", held: " + detail::runtime::format_holders(d.holders);
  return s;
}

}  // namespace ipu
