// loss_plot.cpp — the loss curves as SVG (see loss_plot.h). Coordinates are computed here: each
// panel maps [x0, x1] × [y0, y1] of data onto its plot rectangle, y growing upwards.
#include "lm/loss_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tapegrad::lm {

namespace {

constexpr double kWidth = 1000, kHeight = 420, kPanelW = 420, kPanelH = 300, kTop = 60, kLeft[2] = {70, 560};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

// About five round tick values covering [lo, hi] (steps of 1, 2 or 5 × 10^k).
std::vector<double> ticks(double lo, double hi) {
  const double span = hi - lo > 0 ? hi - lo : 1.0;
  const double raw = span / 5, mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  std::vector<double> t;
  // k·step (not a running sum, whose rounding made 1e-17 of zero); + 0.0 turns −0 (ceil of a small negative) into 0
  for (double k = std::ceil(lo / step); k * step <= hi + 1e-9 * span; ++k) t.push_back(k * step + 0.0);
  return t;
}

std::string number(double v) {
  if (std::fabs(v) < 1e-12) return "0";  // never "-0"
  if (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-2) return fmt::format("{:.1e}", v);
  return fmt::format("{:g}", std::round(v * 1000) / 1000 + 0.0);
}

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
  void pad(double frac) {
    if (empty()) lo = 0, hi = 1;
    if (hi - lo < 1e-12) lo -= 0.5, hi += 0.5;
    const double p = (hi - lo) * frac;
    lo -= p, hi += p;
  }
};

struct Point {
  double x, y;
};

}  // namespace

std::string loss_svg(const std::vector<MetricRecord>& records, const std::string& title,
                     const LossPlotOptions& options) {
  // The curves: [panel][0 = train, 1 = val] → points in data units.
  std::vector<Point> curves[2][2];
  Range x_range[2], y_range;
  for (const MetricRecord& r : records) {
    const bool train = r.kind == MetricRecord::Kind::Train;
    const double loss = train ? r.loss : r.val_loss;
    if (!std::isfinite(loss)) continue;
    const double xs[2] = {double(r.step), r.wall_s};
    for (int p = 0; p < 2; ++p) {
      curves[p][train ? 0 : 1].push_back({xs[p], loss});
      x_range[p].add(xs[p]);
    }
    y_range.add(loss);
  }
  const bool reference = options.reference_loss > 0 && std::isfinite(options.reference_loss);
  if (reference) y_range.add(options.reference_loss);
  // A log axis maps log(y) linearly; it needs positive losses (else the plot stays linear).
  const bool log_y = options.log_scale && !y_range.empty() && y_range.lo > 0;
  Range axis = y_range;  // in axis units: y or log(y)
  if (log_y) axis.lo = std::log(y_range.lo), axis.hi = std::log(y_range.hi);
  axis.pad(0.05);
  for (Range& r : x_range) {
    if (r.empty()) r.lo = 0, r.hi = 1;
    if (r.hi - r.lo < 1e-12) r.hi = r.lo + 1;
  }

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kWidth / 2, escape(title));
  const char* colors[2] = {"#1f77b4", "#ff7f0e"};
  const char* x_labels[2] = {"step", "wall time (s)"};
  for (int p = 0; p < 2; ++p) {
    const double left = kLeft[p];
    auto px = [&](double x) { return left + (x - x_range[p].lo) / (x_range[p].hi - x_range[p].lo) * kPanelW; };
    auto py = [&](double y) {
      const double a = log_y ? std::log(y) : y;
      return kTop + kPanelH - (a - axis.lo) / (axis.hi - axis.lo) * kPanelH;
    };
    svg += fmt::format("<g class=\"panel\">\n<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
                       "stroke=\"#888\"/>\n",
                       left, kTop, kPanelW, kPanelH);
    const double y_lo = log_y ? std::exp(axis.lo) : axis.lo, y_hi = log_y ? std::exp(axis.hi) : axis.hi;
    for (double t : ticks(y_lo, y_hi)) {  // round values, placed where the (log) axis puts them
      if (log_y && t <= 0) continue;
      svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#eee\"/>"
                         "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
                         left, py(t), left + kPanelW, left - 6, py(t) + 4, number(t));
    }
    for (double t : ticks(x_range[p].lo, x_range[p].hi))
      svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#eee\"/>"
                         "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
                         px(t), kTop, kTop + kPanelH, kTop + kPanelH + 16, number(t));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + kPanelW / 2,
                       kTop + kPanelH + 36, x_labels[p]);
    svg += fmt::format("<text x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" transform=\"rotate(-90 {0:.1f} "
                       "{1:.1f})\">loss (nats/token{2})</text>\n",
                       left - 48, kTop + kPanelH / 2, log_y ? ", log scale" : "");
    if (reference)
      svg += fmt::format("<g class=\"reference\"><line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" "
                         "stroke=\"#777\" stroke-dasharray=\"6 4\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" "
                         "text-anchor=\"end\" fill=\"#555\">{5} {6:.3f}</text></g>\n",
                         left, py(options.reference_loss), left + kPanelW, left + kPanelW - 4,
                         py(options.reference_loss) - 4, escape(options.reference_label), options.reference_loss);
    for (int c = 0; c < 2; ++c) {
      const std::vector<Point>& pts = curves[p][c];
      if (pts.empty()) continue;
      std::string d;
      for (size_t i = 0; i < pts.size(); ++i)
        d += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", px(pts[i].x), py(pts[i].y));
      svg += fmt::format("<path class=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"/>\n",
                         c == 0 ? "train" : "val", d, colors[c], c == 0 ? 1.2 : 2);
      if (c == 1)
        for (const Point& q : pts)
          svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(q.x), py(q.y), colors[c]);
    }
    svg += "</g>\n";
  }
  // legend; the last evaluation's bits per byte beside it when the run counted bytes (lm/bits_per_byte.h)
  std::string val_label = "validation loss";
  for (auto r = records.rbegin(); r != records.rend(); ++r)
    if (r->kind == MetricRecord::Kind::Eval) {
      if (r->val_bpb > 0)
        val_label += fmt::format(" (last: {:.4f} nats/token = {:.4f} bits/byte)", r->val_loss, r->val_bpb);
      break;
    }
  svg += fmt::format("<g class=\"legend\"><line x1=\"{0}\" y1=\"44\" x2=\"{1}\" y2=\"44\" stroke=\"{4}\" "
                     "stroke-width=\"2\"/><text x=\"{2}\" y=\"48\">train loss</text>"
                     "<line x1=\"{3}\" y1=\"44\" x2=\"{5}\" y2=\"44\" stroke=\"{6}\" stroke-width=\"2\"/>"
                     "<text x=\"{7}\" y=\"48\">{8}</text></g>\n",
                     kLeft[0], kLeft[0] + 24, kLeft[0] + 30, kLeft[0] + 120, colors[0], kLeft[0] + 144, colors[1],
                     kLeft[0] + 150, val_label);
  svg += "</svg>\n";
  return svg;
}

}  // namespace tapegrad::lm
