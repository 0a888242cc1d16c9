// Cancellation: a flag one thread sets and others observe, with wake-up callbacks and cancellable sleeps.
//
// A long-running operation (an HTTP request, a tool run, a backoff sleep) takes a `const Canceller*` (null
// means "cannot be cancelled") and checks cancelled(), or registers a callback to be woken (the HTTP
// transport wakes its poll loop this way). Cancel() is idempotent; callbacks run once, on the cancelling
// thread, and must not block.
//
// Thread safety: all members are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace strata {

class Canceller {
 public:
  Canceller() = default;
  // Waits for a Cancel() that is still running callbacks on another thread.
  ~Canceller();
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;

  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Registers `callback` to run on Cancel() (immediately if already cancelled). Returns an id for Remove.
  int AddCallback(std::function<void()> callback) const;
  // Unregisters a callback; if Cancel() is running callbacks on another thread, waits until they finished,
  // so that what the callback touches may be destroyed once this returns.
  void RemoveCallback(int id) const;

  // Sleeps for `duration` or until cancelled; returns whether it was cancelled.
  bool SleepFor(std::chrono::milliseconds duration) const;

 private:
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::map<int, std::function<void()>> callbacks_;  // Guarded by mu_.
  bool running_callbacks_ = false;                           // Guarded by mu_.
  std::thread::id running_thread_;                           // Guarded by mu_.
  mutable int next_id_ = 0;                                  // Guarded by mu_.
};

// Registers a callback for the lifetime of the object (no-op for a null canceller).
class ScopedCancelCallback {
 public:
  ScopedCancelCallback(const Canceller* canceller, std::function<void()> callback);
  ~ScopedCancelCallback();
  ScopedCancelCallback(const ScopedCancelCallback&) = delete;
  ScopedCancelCallback& operator=(const ScopedCancelCallback&) = delete;

 private:
  const Canceller* canceller_;
  int id_ = -1;
};

}  // namespace strata
