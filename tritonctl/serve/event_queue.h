// The queue through which a C++ transport of `tritonctl serve` hands events (whole requests,
// cancellations) to the server's event loop: the transport's threads push, the loop watches the
// eventfd and takes everything queued at once, so a burst of events costs it one wake-up.

#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

template <typename Event>
class EventQueue {
 public:
  EventQueue() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error("eventfd failed");
  }
  ~EventQueue() { close(fd_); }
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;
  int fd() const { return fd_; }

  void Push(Event event) {
    bool was_empty;
    {
      std::lock_guard<std::mutex> lock(mu_);
      was_empty = events_.empty();
      events_.push_back(std::move(event));
    }
    if (was_empty) {
      uint64_t one = 1;
      ssize_t ignored = write(fd_, &one, sizeof(one));
      (void)ignored;
    }
  }

  std::vector<Event> Take() {
    uint64_t count;
    ssize_t ignored = read(fd_, &count, sizeof(count));
    (void)ignored;
    std::vector<Event> out;
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(events_);
    return out;
  }

 private:
  int fd_;
  std::mutex mu_;
  std::vector<Event> events_;
};
