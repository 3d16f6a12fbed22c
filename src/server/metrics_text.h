#pragma once
// Writing the Prometheus text exposition format, version 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/): `# HELP` and `# TYPE` per
// family, then its samples, one a line:
//
//   # HELP tokamak:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
//   # TYPE tokamak:e2e_request_latency_seconds histogram
//   tokamak:e2e_request_latency_seconds_bucket{model_name="m",le="0.3"} 0
//   ...
//   tokamak:e2e_request_latency_seconds_bucket{model_name="m",le="+Inf"} 2
//   tokamak:e2e_request_latency_seconds_sum{model_name="m"} 1.25
//   tokamak:e2e_request_latency_seconds_count{model_name="m"} 2
//
// A counter's family is named with its `_total` suffix, as prometheus_client writes this
// format (its parser types a `foo_total` sample under `# TYPE foo counter` as "unknown").
// Numbers never go through iostreams, so no locale can turn "0.5" into "0,5".

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "server/metrics_histogram.h"

namespace tokamak::server {

// A label value with backslash, double quote and newline escaped (\\, \", \n).
std::string escape_label_value(std::string_view value);
// HELP text with backslash and newline escaped.
std::string escape_help(std::string_view text);
// The shortest text that reads back as the same double ("0.5", "1e-05", "3"), and "+Inf",
// "-Inf", "NaN".
std::string format_value(double value);
// A bucket bound as prometheus_client writes `le` ("0.001", "1.0", "2560.0", "+Inf"), so that
// queries written against vLLM's label values match ours.
std::string format_bound(double bound);

using Label = std::pair<std::string_view, std::string_view>;  // name, raw value

// Appends families to one text. Every sample carries the writer's constant labels first.
class PrometheusWriter {
 public:
  // `labels`: constant labels (here model_name) put on every sample.
  explicit PrometheusWriter(std::initializer_list<Label> labels);

  // The `# HELP` and `# TYPE` lines that open a family. type: counter, gauge, histogram.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // One sample line: name{constant labels,extra} value.
  void sample(std::string_view name, double value, std::initializer_list<Label> extra = {});
  void sample(std::string_view name, uint64_t value, std::initializer_list<Label> extra = {});
  // A whole histogram family: HELP, TYPE, cumulative _bucket lines ending with le="+Inf",
  // _sum and _count.
  void histogram(std::string_view name, std::string_view help, const Histogram& h);

  std::string take() { return std::move(text_); }

 private:
  void sample_text(std::string_view name, std::string_view value,
                   std::initializer_list<Label> extra);

  std::string labels_;  // `model_name="m"`: the constant labels, escaped
  std::string text_;
};

}  // namespace tokamak::server
