#include "strata/util/cancel.h"

#include <vector>

namespace strata {

Canceller::~Canceller() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !running_callbacks_; });
}

void Canceller::Cancel() {
  std::vector<std::function<void()>> to_run;
  {
    std::lock_guard lock(mu_);
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
    for (auto& [id, callback] : callbacks_) to_run.push_back(std::move(callback));
    callbacks_.clear();
    running_callbacks_ = true;
    running_thread_ = std::this_thread::get_id();
    cv_.notify_all();
  }
  // Outside the lock: a callback may take locks of its own (the HTTP transport's wake-up).
  for (auto& callback : to_run) callback();
  std::lock_guard lock(mu_);
  running_callbacks_ = false;
  cv_.notify_all();
}

int Canceller::AddCallback(std::function<void()> callback) const {
  {
    std::lock_guard lock(mu_);
    if (!cancelled()) {
      callbacks_.emplace(next_id_, std::move(callback));
      return next_id_++;
    }
  }
  callback();
  return -1;
}

void Canceller::RemoveCallback(int id) const {
  std::unique_lock lock(mu_);
  callbacks_.erase(id);
  // A callback already handed to Cancel() may be running on another thread: wait for it (not on the
  // cancelling thread itself, where a callback may remove itself).
  if (running_thread_ != std::this_thread::get_id()) {
    cv_.wait(lock, [this] { return !running_callbacks_; });
  }
}

bool Canceller::SleepFor(std::chrono::milliseconds duration) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, duration, [this] { return cancelled(); });
}

ScopedCancelCallback::ScopedCancelCallback(const Canceller* canceller, std::function<void()> callback)
    : canceller_(canceller) {
  if (canceller_ != nullptr) id_ = canceller_->AddCallback(std::move(callback));
}

ScopedCancelCallback::~ScopedCancelCallback() {
  if (canceller_ != nullptr && id_ >= 0) canceller_->RemoveCallback(id_);
}

}  // namespace strata
