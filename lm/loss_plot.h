// loss_plot.h — DIR/loss.svg: train and validation loss of a run as a self-contained SVG (no
// scripts, no external fonts or styles; opens in any browser). Two panels side by side, the same
// loss axis: against the optimizer step (left) and against training wall time (right). Each panel
// draws each curve as ONE <path> (class "train" / "val"); validation points also get dots.
#pragma once
#include <string>
#include <vector>

#include "lm/metrics_log.h"

namespace tapegrad::lm {

// `title` is printed above the panels (XML-escaped). Non-finite losses are left out.
std::string loss_svg(const std::vector<MetricRecord>& records, const std::string& title);

}  // namespace tapegrad::lm
