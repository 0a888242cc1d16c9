// Prometheus metrics of the server: requests by route and status with latency histograms, the phase-2
// queue's jobs by state, commits by outcome.
#include <cstdio>
#include <sstream>

#include "server_impl.h"

namespace strata::server {

namespace {

constexpr double kLatencyBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
constexpr size_t kBucketCount = std::size(kLatencyBuckets);

std::string Format(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

struct Metrics::RouteStats {
  std::map<int, int64_t> by_status;
  int64_t buckets[kBucketCount + 1] = {};  // The last one is +Inf.
  double seconds_sum = 0;
  int64_t count = 0;
};

void Metrics::Record(const std::string& route, int status, double seconds) {
  std::lock_guard lock(mu_);
  std::shared_ptr<RouteStats>& slot = routes_[route];
  if (!slot) slot = std::make_shared<RouteStats>();
  RouteStats& r = *slot;
  r.by_status[status] += 1;
  size_t b = 0;
  while (b < kBucketCount && seconds > kLatencyBuckets[b]) ++b;
  r.buckets[b] += 1;
  r.seconds_sum += seconds;
  r.count += 1;
}

void Metrics::Commit(const std::string& outcome) {
  std::lock_guard lock(mu_);
  commits_[outcome] += 1;
}

std::string Metrics::Text(const std::map<std::string, int64_t>& queue) {
  std::lock_guard lock(mu_);
  std::ostringstream out;
  out << "# HELP strata_http_requests_total HTTP requests by route and status.\n"
      << "# TYPE strata_http_requests_total counter\n";
  for (const auto& [route, r] : routes_) {
    for (const auto& [status, n] : r->by_status) {
      out << "strata_http_requests_total{route=\"" << route << "\",status=\"" << status << "\"} " << n << "\n";
    }
  }
  out << "# HELP strata_http_request_duration_seconds Time to answer a request, by route.\n"
      << "# TYPE strata_http_request_duration_seconds histogram\n";
  for (const auto& [route, r] : routes_) {
    int64_t cumulative = 0;
    for (size_t b = 0; b <= kBucketCount; ++b) {
      cumulative += r->buckets[b];
      std::string le = b == kBucketCount ? "+Inf" : Format(kLatencyBuckets[b]);
      out << "strata_http_request_duration_seconds_bucket{route=\"" << route << "\",le=\"" << le << "\"} "
          << cumulative << "\n";
    }
    out << "strata_http_request_duration_seconds_sum{route=\"" << route << "\"} " << Format(r->seconds_sum) << "\n";
    out << "strata_http_request_duration_seconds_count{route=\"" << route << "\"} " << r->count << "\n";
  }
  out << "# HELP strata_queue_jobs Phase-2 jobs by state (all accounts opened by this server).\n"
      << "# TYPE strata_queue_jobs gauge\n";
  for (const auto& [state, n] : queue) out << "strata_queue_jobs{state=\"" << state << "\"} " << n << "\n";
  out << "# HELP strata_commits_total Commits by outcome (accepted: phase 1 done; the worker's results).\n"
      << "# TYPE strata_commits_total counter\n";
  for (const auto& [outcome, n] : commits_) out << "strata_commits_total{outcome=\"" << outcome << "\"} " << n << "\n";
  return out.str();
}

}  // namespace strata::server
