#include "server/metrics_text.h"

#include <fmt/format.h>

#include <cmath>
#include <iterator>

namespace tokamak::server {

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string escape_help(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // fmt's "{}" is the shortest round-trip form and ignores the global locale.
  return fmt::format("{}", value);
}

std::string format_bound(double bound) {
  std::string s = format_value(bound);
  if (std::isfinite(bound) && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

PrometheusWriter::PrometheusWriter(std::initializer_list<Label> labels) {
  for (const auto& [name, value] : labels) {
    if (!labels_.empty()) labels_ += ',';
    fmt::format_to(std::back_inserter(labels_), "{}=\"{}\"", name, escape_label_value(value));
  }
}

void PrometheusWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(text_), "# HELP {} {}\n# TYPE {} {}\n", name, escape_help(help),
                 name, type);
}

void PrometheusWriter::sample(std::string_view name, double value,
                              std::initializer_list<Label> extra) {
  sample_text(name, format_value(value), extra);
}

void PrometheusWriter::sample(std::string_view name, uint64_t value,
                              std::initializer_list<Label> extra) {
  sample_text(name, fmt::format("{}", value), extra);
}

void PrometheusWriter::sample_text(std::string_view name, std::string_view value,
                                   std::initializer_list<Label> extra) {
  text_ += name;
  if (!labels_.empty() || extra.size() > 0) {
    text_ += '{';
    text_ += labels_;
    bool first = labels_.empty();
    for (const auto& [label, raw] : extra) {
      if (!first) text_ += ',';
      first = false;
      fmt::format_to(std::back_inserter(text_), "{}=\"{}\"", label, escape_label_value(raw));
    }
    text_ += '}';
  }
  text_ += ' ';
  text_ += value;
  text_ += '\n';
}

void PrometheusWriter::histogram(std::string_view name, std::string_view help, const Histogram& h) {
  family(name, "histogram", help);
  const std::string bucket = fmt::format("{}_bucket", name);
  const auto bounds = h.bounds();
  const auto counts = h.bucket_counts();
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    const std::string le = i < bounds.size() ? format_bound(bounds[i]) : "+Inf";
    sample(bucket, cumulative, {{"le", le}});
  }
  sample(fmt::format("{}_sum", name), h.sum());
  sample(fmt::format("{}_count", name), h.count());
}

}  // namespace tokamak::server
