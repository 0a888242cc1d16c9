// Clock: the time seam. Production code asks a Clock for the time so tests can drive time by hand.
//
// Thread safety: SystemClock() is safe from any thread; ManualClock is safe from any thread.
#pragma once

#include <atomic>
#include <cstdint>

namespace strata {

class Clock {
 public:
  virtual ~Clock() = default;
  // Returns a monotonic time in microseconds (arbitrary epoch; only differences are meaningful).
  virtual int64_t NowMicros() const = 0;
  // Returns wall-clock time in microseconds since the Unix epoch.
  virtual int64_t WallMicros() const = 0;
};

// Returns the process-wide real clock. Never null; never freed.
Clock* SystemClock();

// A clock that only moves when told to. Starts at `start_micros` for both monotonic and wall time.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_micros = 1'700'000'000'000'000) : now_(start_micros) {}
  int64_t NowMicros() const override { return now_.load(); }
  int64_t WallMicros() const override { return now_.load(); }
  // Moves time forward by `micros`.
  void Advance(int64_t micros) { now_.fetch_add(micros); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace strata
